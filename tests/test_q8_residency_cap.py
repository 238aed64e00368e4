"""The experiment fusion-5-stream-zzzzz-residency-cap on the CPU: tests/cpp/q8_residency_cap_test.cu, compiled against
fusekit-q8-gemv.cuh as the experiment leaves it on its stack, wants plan_stream's partial grids capped at ceil(CTAs /
SMs) an SM on 132 SMs (6144 x 4096: 3), full grids uncapped, no reserve without a GPU, and a reserve that lets the
cap's CTAs share an SM but not one more (H100/H200 and A100 shared memory, the stream kernel's static size and a
sweep). --sabotage (one granule less) must make the reserve cases fail. Needs nvcc, no GPU."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from fusekit.compilecheck import find_nvcc

from .conftest import cli as fusekit
from .conftest import drop_variants_since, variant_labels

REPO = Path(__file__).resolve().parent.parent
EXPERIMENTS = REPO / "patches" / "experiments"
STACK = [
    "stack-1-5-stock-order-l1",
    str(EXPERIMENTS / "fusion-5-stream-zy-y-registers.patch"),
    str(EXPERIMENTS / "fusion-5-stream-zzz-medium-tables.patch"),
    str(EXPERIMENTS / "fusion-5-stream-zzzz-mmvq-short-tables.patch"),
]
CAP = EXPERIMENTS / "fusion-5-stream-zzzzz-residency-cap.patch"
PROGRAM = REPO / "tests" / "cpp" / "q8_residency_cap_test.cu"
HEADER = "ggml/src/ggml-cuda/fusekit-q8-gemv.cuh"
NVCC = find_nvcc()

pytestmark = pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine: the header is CUDA")


@pytest.fixture(scope="module")
def cap_program(pinned_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The check program, built against the header the experiment leaves on its stack (a named stack: the CLI's
    apply resolves it)."""
    work = tmp_path_factory.mktemp("residency-cap")
    fusekit(pinned_home, "reset")
    before = variant_labels(pinned_home)
    try:
        fusekit(pinned_home, "apply", *STACK, str(CAP))
        tree = Path(json.loads(fusekit(pinned_home, "status", "--json"))["tree"])
        shutil.copy(tree / HEADER, work / Path(HEADER).name)
    finally:
        drop_variants_since(pinned_home, before)
    binary = work / "q8_residency_cap_test"
    cmd = [str(NVCC), "-std=c++17", "-arch=sm_90", f"-I{work}", "-o", str(binary), str(PROGRAM)]
    built = subprocess.run(cmd, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    return binary


def run(program: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(program), *args], capture_output=True, text=True, timeout=120)


def test_partial_stream_grids_are_capped_and_the_reserve_caps_exactly(cap_program: Path) -> None:
    ran = run(cap_program)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-1000:]
    assert "grid 6144 x 4096     384 CTAs: cap 3 (expected 3)" in ran.stdout
    assert "3 CTAs an SM with 13056 bytes reserved each" in ran.stdout
    assert "15 of 15 cases as fusion-5-stream-zzzzz-residency-cap expects" in ran.stdout


def test_a_reserve_one_granule_short_fails_the_check(cap_program: Path) -> None:
    ran = run(cap_program, "--sabotage")
    assert ran.returncode == 1, ran.stdout[-3000:]
    assert ran.stdout.count("WRONG (cap + 1 CTAs fit, or the cap does not)") == 3  # every reserve made
    assert "10 of 15 cases as fusion-5-stream-zzzzz-residency-cap expects (sabotaged reserve)" in ran.stdout
