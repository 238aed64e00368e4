"""``fusekit profile --from/--against RESULT.json``: profiles read back from committed results compare as the
traces they came from did, and wrong files or sides fail with one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evals.profile.compare import compare
from evals.profile.parse import read_profile
from evals.profile.saved import read_saved_profile
from evals.results import read_result
from fusekit.cli import main

from .nsys_synth import decode_trace

MMVQ = "void mul_mat_vec_q<(ggml_type)8, 1, false>(const void *, const void *, float *, unsigned int)"
NORM = "void rms_norm_f32<256, true, false>(const float *, float *, int, long, long, long, float)"
MUL = "void k_bin_bcast<&op_mul, float, float, float>(const float *, const float *, float *)"
FUSED = "void rms_norm_f32<256, true, true>(const float *, float *, int, long, long, long, float, const float *)"


def _profile_result(tmp_path: Path, name: str, a: list[str], b: list[str], tokens: int) -> Path:
    """A profile result of two synthetic traces (stock A, variant B), written by the command itself."""
    stock = decode_trace(a, tokens).write(tmp_path / f"{name}-a.sqlite")
    variant = decode_trace(b, tokens).write(tmp_path / f"{name}-b.sqlite")
    out = tmp_path / f"{name}.json"
    args = ["profile", "--from", str(stock), "--against", str(variant), "--tokens", str(tokens), "--json", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return out


def test_a_saved_side_is_the_profile_it_was_written_from(tmp_path: Path) -> None:
    saved = _profile_result(tmp_path, "s1", [NORM, MUL, MMVQ], [FUSED, MMVQ], 4)
    for side, trace in (("stock", "s1-a.sqlite"), ("variant", "s1-b.sqlite")):
        original = read_profile(tmp_path / trace, 4, "--tokens")
        again = read_saved_profile(saved, side)
        assert again.kernels == original.kernels
        assert again.exclusive == original.exclusive
        assert again.per_token() == original.per_token()
        assert again.timeline == original.timeline and again.graphs == original.graphs
        assert again.path == str(saved)


def test_two_sessions_variants_compare_from_their_results(tmp_path: Path) -> None:
    first = _profile_result(tmp_path, "s1", [NORM, MUL, MMVQ], [FUSED, MMVQ], 4)
    second = _profile_result(tmp_path, "s2", [NORM, MUL, MMVQ], [FUSED, MMVQ, MUL], 4)
    out = tmp_path / "cmp.json"
    result = CliRunner().invoke(main, ["profile", "--from", str(first), "--against", str(second), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "per token: +1.0 kernels" in result.output  # the MUL the second variant kept
    expected = compare(read_profile(tmp_path / "s1-b.sqlite", 4), read_profile(tmp_path / "s2-b.sqlite", 4))
    written = read_result(out)["payload"]["comparison"]
    assert written["kernels"] == expected.to_dict()["kernels"]
    both_stock = ["--from-side", "stock", "--against-side", "stock"]
    stock_sides = CliRunner().invoke(main, ["profile", "--from", str(first), "--against", str(second), *both_stock])
    assert stock_sides.exit_code == 0 and "per token: +0.0 kernels, +0.0 µs kernel time" in stock_sides.output


EVAL_RESULT = {"schema": "fusekit-result", "schema_version": 1, "kind": "eval"}


@pytest.mark.parametrize(
    ("make", "extra", "message"),
    [
        (lambda p: p / "missing.json", [], "no such profile result"),
        (lambda p: _write(p / "eval.json", EVAL_RESULT), [], "not a profile result"),
        (lambda p: _write(p / "x.json", {"a": 1}), [], "not a fusekit result file"),
        (lambda p: decode_trace([MMVQ], 2).write(p / "t.sqlite"), ["--from-side", "stock"], "picks a profile"),
    ],
)
def test_bad_saved_input_fails_in_one_line(tmp_path: Path, make, extra: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["profile", "--from", str(make(tmp_path)), *extra])
    assert result.exit_code != 0
    assert message in result.output, result.output
    assert "Traceback" not in result.output


def test_a_result_without_profiles_or_with_a_damaged_one_is_refused(tmp_path: Path) -> None:
    saved = _profile_result(tmp_path, "s1", [NORM, MMVQ], [FUSED, MMVQ], 2)
    data = json.loads(saved.read_text())
    del data["payload"]["profiles"][1]["kernels"][0]["med_ns"]
    damaged = _write(tmp_path / "damaged.json", data)
    result = CliRunner().invoke(main, ["profile", "--from", str(damaged)])
    assert result.exit_code != 0 and "damaged profile" in result.output
    data["payload"]["profiles"] = []
    empty = _write(tmp_path / "empty.json", data)
    result = CliRunner().invoke(main, ["profile", "--from", str(empty)])
    assert result.exit_code != 0 and "holds no profile" in result.output


def _write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))
    return path
