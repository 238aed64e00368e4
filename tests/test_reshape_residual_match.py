"""The match of the experiment fusion-2-reshape-residual on the CPU: tests/cpp/reshape_residual_match_test.cpp
builds the tail of a qwen35moe gated-delta-net layer with ggml (MUL_MAT ssm_out, reshape_2d, residual ADD, norm)
and asks the patch's fusekit_mul_mat_reshape_add which nodes it would fuse. Its first version used ggml_can_fuse,
which refuses a view in the middle, and never fired on the H200 (session 11); --sabotage puts that test back and
must fail. Needs a C++ compiler and the stock CPU build's libggml-base; no CUDA."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from fusekit.build import BuildResult

from .conftest import HOST_SANITIZERS, SANITIZED_ENV, reshape_residual_header

REPO = Path(__file__).resolve().parent.parent
CXX = shutil.which("g++") or shutil.which("c++")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CXX is None, reason="no C++ compiler")]


@pytest.fixture(scope="module")
def match_program(stock_build: BuildResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test program, built against the header exactly as the patch creates it."""
    work = tmp_path_factory.mktemp("reshape-residual")
    header_dir = reshape_residual_header(work)
    ggml = stock_build.build_dir.parent / "ggml"
    program = work / "reshape_residual_match_test"
    cmd = [
        str(CXX),
        "-std=c++17",
        *HOST_SANITIZERS,
        f"-I{ggml / 'include'}",
        f"-I{ggml / 'src'}",
        f"-I{header_dir.parent}",
        "-o",
        str(program),
        str(REPO / "tests" / "cpp" / "reshape_residual_match_test.cpp"),
        f"-L{stock_build.bin_dir}",
        "-lggml-base",
        f"-Wl,-rpath,{stock_build.bin_dir}",
    ]
    built = subprocess.run(cmd, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    return program


def test_the_match_takes_the_decode_tail_and_nothing_else(match_program: Path) -> None:
    ran = subprocess.run([str(match_program)], capture_output=True, text=True, timeout=60, env=SANITIZED_ENV)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "match checks passed" in ran.stdout
    assert ran.stdout.count(" ok\n") == 6


def test_the_first_versions_test_fails_the_decode_case(match_program: Path) -> None:
    """Sabotage: ggml_can_fuse of MUL_MAT, RESHAPE, ADD, as the version measured in session 11 matched."""
    sabotage = [str(match_program), "--sabotage"]
    ran = subprocess.run(sabotage, capture_output=True, text=True, timeout=60, env=SANITIZED_ENV)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    decode = [line for line in ran.stdout.splitlines() if line.startswith("one token: ssm_out, reshape, residual ADD")]
    assert len(decode) == 1 and decode[0].endswith("WRONG")
