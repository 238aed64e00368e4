"""fusion-1's q8_1 cache bookkeeping (kernels/fusekit-q8-cache.h, plain C++) compiled and run on the CPU:
key matching, invalidation by overlapping writes, the norm epilogue's same-step exception, arena limits."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import HOST_SANITIZERS, SANITIZED_ENV

REPO = Path(__file__).resolve().parent.parent
CXX = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")


@pytest.mark.skipif(CXX is None, reason="no C++ compiler on this machine")
def test_q8_cache_rules(tmp_path: Path) -> None:
    program = tmp_path / "q8_cache_test"
    source = REPO / "tests" / "cpp" / "q8_cache_test.cpp"
    cmd = [str(CXX), "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", *HOST_SANITIZERS, f"-I{REPO / 'kernels'}"]
    built = subprocess.run([*cmd, "-o", str(program), str(source)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-2000:]
    ran = subprocess.run([str(program)], capture_output=True, text=True, env=SANITIZED_ENV)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert ran.stdout.strip().startswith("ok")
