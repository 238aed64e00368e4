"""Self-check on real CPU builds: a sabotaged RMS norm must be caught, a rebuilt stock must be identical.

Both variants run in one eval (one KL base, interleaved speed rounds) with settings small enough for
two cores; the no-op variant is stock plus a comment-only patch, i.e. identical code in a separate tree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from evals import klbase
from evals.cli import evaluate
from evals.report import render
from fusekit.build import BuildResult
from fusekit.cli import main
from fusekit.workspace import Workspace

pytestmark = pytest.mark.slow

PATCHES = Path(__file__).resolve().parent / "patches"
SABOTAGE = str(PATCHES / "sabotage-rms-norm.patch")
NOOP = str(PATCHES / "noop-comment.patch")
# Small but real: perplexity 4 x 256 tokens (508 scored), 3 prompts x 48 tokens, 4 speed rounds (ABBA twice,
# so each side has 4 processes for the process-level interval).
SMALL = {
    "against": "stock",
    "model": None,
    "corpus": None,
    "ppl": True,
    "kl": True,
    "kl_base": None,
    "speed": True,
    "text": True,
    "rounds": 4,
    "repetitions": 3,
    "n_prompt": "64",
    "n_gen": "16",
    "n_depth": "0",
    "ctx_size": 256,
    "chunks": 4,
    "tokens": 48,
    "prompts": 3,
    "threads": None,
    "backend": "cpu",
    "cuda_arch": None,
    "jobs": None,
    "json_path": None,
}
SMALL_ARGS = ["--ctx", "256", "--chunks", "4", "--tokens", "48", "--prompts", "3", "--rounds", "1", "-r", "1"]


@pytest.fixture(scope="module")
def eval_home(pinned_home: Path, stock_build: BuildResult) -> Path:
    """The shared test workspace (the default model is fetched into its cache on first use)."""
    return pinned_home


@pytest.fixture(scope="module")
def selfcheck(eval_home: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("eval") / "selfcheck.json"
    return evaluate(Workspace(eval_home), [NOOP, SABOTAGE], {**SMALL, "json_path": out})


def _names(result: dict[str, Any]) -> list[str]:
    return [v["name"] for v in result["variants"]]


def test_result_file_is_complete(selfcheck: tuple[dict[str, Any], Path]) -> None:
    _, path = selfcheck
    stored = json.loads(path.read_text())
    assert stored["kind"] == "eval" and stored["schema_version"] == 1
    assert _names(stored) == ["stock", "noop-comment", "sabotage-rms-norm"]
    for variant in stored["variants"][1:]:
        assert len(variant["stack_sha256"]) == 64 and variant["entries"][0]["patches"][0]["sha256"]
        assert variant["build"]["options"]["backend"] == "cpu" and variant["build"]["head"]
    assert len(stored["inputs"]["model"]["sha256"]) == 64 and len(stored["inputs"]["corpus"]["sha256"]) == 64
    speed = stored["payload"]["speed"]
    assert len(speed["runs"]) == 4 * 3  # rounds x sides
    abba = ["stock", "noop-comment", "sabotage-rms-norm", "sabotage-rms-norm", "noop-comment", "stock"]
    assert [r["side"] for r in speed["runs"]] == abba * 2
    for run in speed["runs"]:
        assert run["run"]["argv"][0].endswith("llama-bench")
        for test in run["tests"]:
            assert len(test["samples_ts"]) == 3 and test["build_commit"]


def test_rebuilt_stock_is_identical(selfcheck: tuple[dict[str, Any], Path]) -> None:
    result, _ = selfcheck
    payload = result["payload"]
    kl = payload["quality"]["kl"]["noop-comment"]
    assert kl["logprobs_identical"] is True
    assert kl["statistics"]["Same top p"]["value"] == 100.0
    assert kl["statistics"]["Maximum KLD"]["value"] == pytest.approx(0.0, abs=1e-4)  # uint16 base quantisation
    assert payload["quality"]["ppl"]["noop-comment"]["ppl"] == payload["quality"]["ppl"]["stock"]["ppl"]
    assert all(c["identical"] for c in payload["text"]["comparisons"]["noop-comment"])
    # Speed is reported, never judged here: a timing verdict belongs in a benchmark on a quiet machine
    # (CI's shared 2 cores once put identical code at 1.15x). Only the shape of the estimate is checked.
    row = next(r for r in payload["speed"]["summary"] if r["variant"] == "noop-comment")
    assert row["low"] <= row["ratio"] <= row["high"] and row["verdict"] in {"same", "faster", "slower"}, row
    assert "identical (log-probs byte for byte)" in render(result)


def test_sabotage_is_caught(selfcheck: tuple[dict[str, Any], Path]) -> None:
    result, _ = selfcheck
    payload = result["payload"]
    kl = payload["quality"]["kl"]["sabotage-rms-norm"]
    assert kl["logprobs_identical"] is False
    assert kl["statistics"]["Mean KLD"]["value"] > 0
    assert kl["statistics"]["Same top p"]["value"] < 100.0
    assert payload["quality"]["ppl"]["sabotage-rms-norm"]["ppl"] != payload["quality"]["ppl"]["stock"]["ppl"]
    assert not all(c["identical"] for c in payload["text"]["comparisons"]["sabotage-rms-norm"])
    text = render(result)
    assert "different (mean KLD" in text and "| different |" in text


def test_report_command_renders_the_result(selfcheck: tuple[dict[str, Any], Path], tmp_path: Path) -> None:
    _, path = selfcheck
    plot = tmp_path / "speed.png"
    done = CliRunner().invoke(main, ["report", str(path), "--plot", str(plot)])
    assert done.exit_code == 0, done.output
    for title in ("### Perplexity", "### KL divergence against stock", "### Text identity", "### Speed"):
        assert title in done.output
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_kl_base_mismatch_is_refused(selfcheck: tuple[dict[str, Any], Path], tmp_path: Path, eval_home: Path) -> None:
    result, _ = selfcheck
    base = Path(result["payload"]["quality"]["kl_base"]["path"])
    other = tmp_path / "other.txt"
    other.write_text(Path(result["inputs"]["corpus"]["path"]).read_text()[:200_000])
    args = ["--home", str(eval_home), "eval", "stock", "--no-speed", "--no-text", "--kl", "--kl-base", str(base)]
    done = CliRunner().invoke(main, [*args, *SMALL_ARGS, "--corpus", str(other)])
    assert done.exit_code == 1
    assert "does not match this eval: corpus" in done.output
    decode_path = CliRunner().invoke(main, [*args, *SMALL_ARGS, "--ppl-ubatch", "1"])  # one-token kernels: not the base
    assert decode_path.exit_code == 1
    assert "does not match this eval: settings" in decode_path.output
    identity = dict(klbase.check_base(base, result["payload"]["quality"]["kl_base"]["identity"], 256)["identity"])
    identity["settings"] = {**identity["settings"], "chunks": 99}
    with pytest.raises(Exception, match="settings"):
        klbase.check_base(base, identity, 256)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--model", "/nonexistent/model.gguf"], "does not exist"),
        (["--model", __file__], "is not a GGUF file"),
        (["--ppl", "--corpus", "SHORT"], "is too short: it tokenizes to"),
        (["no-such-fusion"], "unknown fusion 'no-such-fusion'"),
        (["--speed", "-p", "not-a-number", "--no-text"], "llama-bench (stock) exited with"),
    ],
)
def test_bad_input_is_one_clear_line(eval_home: Path, tmp_path: Path, extra: list[str], message: str) -> None:
    short = tmp_path / "short.txt"
    short.write_text("Only a few words here.\n")
    extra = [str(short) if e == "SHORT" else e for e in extra]
    args = ["--home", str(eval_home), "eval", "--no-speed", "--no-text", *SMALL_ARGS, *extra]
    if "no-such-fusion" not in extra:
        args.insert(3, "stock")
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 1, done.output
    first = done.output.strip().splitlines()
    errors = [line for line in first if line.startswith("fusekit: error:")]
    assert len(errors) == 1 and message in errors[0], done.output
