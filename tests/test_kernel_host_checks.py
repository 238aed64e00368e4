"""Host-side checks of our kernels (kernels/*_host_check.cu), run on the CPU: each program exercises a
kernel's host-callable arithmetic against a float64 reference and must pass, and its --sabotage mode
(the kernel's own sabotage switch) must make every sum check fail, which the program reports with exit 0."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fusekit.compilecheck import find_nvcc

KERNELS = Path(__file__).resolve().parent.parent / "kernels"
PROGRAMS = sorted(KERNELS.glob("*_host_check.cu"))
NVCC = find_nvcc()

pytestmark = pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine: the host checks are CUDA sources")


@pytest.fixture(scope="module", params=PROGRAMS, ids=lambda p: p.stem)
def program(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    binary = tmp_path_factory.mktemp("host") / request.param.stem
    cmd = [str(NVCC), "-O2", "-std=c++17", "-arch=sm_90", f"-I{KERNELS}", "-o", str(binary), str(request.param)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return binary


def test_there_is_a_host_check() -> None:
    assert PROGRAMS


def test_host_check_passes(program: Path) -> None:
    done = subprocess.run([str(program)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]
    assert "host checks passed" in done.stdout


def test_sabotage_fails_every_sum(program: Path) -> None:
    done = subprocess.run([str(program), "--sabotage"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "all must be" in done.stdout
