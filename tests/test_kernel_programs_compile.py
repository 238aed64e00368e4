"""Every standalone kernel program (kernels/*_check.cu but the host checks) compiles for sm_90 with the flags the
GPU session's kernels step uses: a program first run on a GPU must not fail there on a compile error."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fusekit.compilecheck import find_nvcc

KERNELS = Path(__file__).resolve().parent.parent / "kernels"
PROGRAMS = sorted(p for p in KERNELS.glob("*_check.cu") if not p.name.endswith("_host_check.cu"))
NVCC = find_nvcc()


def test_there_are_standalone_programs() -> None:
    assert {p.stem for p in PROGRAMS} >= {"chunked_gdn_check", "glu_handoff_check"}


@pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine")
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_program_compiles_for_sm90(program: Path, tmp_path: Path) -> None:
    cmd = [str(NVCC), "-c", "-O3", "-std=c++17", "-arch=sm_90", "-lineinfo", f"-I{KERNELS}"]
    done = subprocess.run([*cmd, "-o", str(tmp_path / "program.o"), str(program)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
