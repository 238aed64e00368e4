"""Golden terminal output of `fusekit profile` on deterministic synthetic traces.

After an intended change of the output, rewrite the golden files with
``FUSEKIT_UPDATE_GOLDEN=1 python -m pytest tests/test_profile_golden.py`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from fusekit.cli import main

from .nsys_synth import Trace, decode_trace

GOLDEN = Path(__file__).parent / "golden"
MMVQ = "void mul_mat_vec_q<(ggml_type)12, 1, false>(const void *, const void *, float *, unsigned int)"
QUANT = "void quantize_q8_1(const float *, void *, long, long, long, long, long, long)"
NORM = "void rms_norm_f32<256, true, false>(const float *, float *, int, long, long, long, float)"
MUL = "void k_bin_bcast<&op_mul, float, float, float>(const float *, const float *, float *)"
FUSED = "void rms_norm_f32<256, true, true>(const float *, float *, int, long, long, long, float, const float *)"


def check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("FUSEKIT_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"output differs from {path}"


def run(tmp_path: Path, *args: str) -> str:
    result = CliRunner().invoke(main, ["profile", *args])
    assert result.exit_code == 0, result.output
    return result.output.replace(str(tmp_path), "<tmp>")


@pytest.fixture
def stock(tmp_path: Path) -> Path:
    trace = decode_trace([NORM, MUL, QUANT, MMVQ, QUANT, MMVQ], 8)
    trace.memcpy = [(-50_000, -40_000, 1 << 20, 1)]
    trace.runtime = [("cudaLaunchKernel_v7000", i * 1500, i * 1500 + 400, i + 1) for i in range(48)]
    return trace.write(tmp_path / "stock.sqlite")


def test_single_trace(tmp_path: Path, stock: Path) -> None:
    check("profile_single.txt", run(tmp_path, "--from", str(stock), "--tokens", "8"))


def test_against(tmp_path: Path, stock: Path) -> None:
    fused: Trace = decode_trace([FUSED, QUANT, MMVQ, MMVQ], 8)
    path = fused.write(tmp_path / "fused.sqlite")
    check("profile_against.txt", run(tmp_path, "--from", str(stock), "--against", str(path), "--tokens", "8"))
