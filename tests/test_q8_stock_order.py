"""The summation order of the experiments fusion-5-stock-order, fusion-5-stock-ordered-tiles, fusion-5-stock-streamed
and fusion-5-stock-whole-blocks on the CPU: tests/cpp/q8_stock_order_test.cu, compiled against fusekit-q8-gemv.cuh as
the four leave it on stack-1-5-grouped-f32, runs the header's segments, part reads and part dot products in the
kernels' data flows (a warp standing in for some of MMVQ's warps at splits 1, 2, 4, a lane taking one part per
stood-in warp or whole blocks; one warp per row by tile; a warp's run of rows through a ring of cp.async slots whose
copies land only at a wait) against a separate emulation of mul_mat_vec_q's 128 threads at one token, and wants every
row bit for bit MMVQ's; --sabotage (the header's blocks_used switch, which leaves a block out) must make every row
differ. Needs nvcc (the header is CUDA); no GPU."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from fusekit.cli import main
from fusekit.compilecheck import find_nvcc

REPO = Path(__file__).resolve().parent.parent
PATCH = REPO / "patches" / "experiments" / "fusion-5-stock-order.patch"
TILES = REPO / "patches" / "experiments" / "fusion-5-stock-ordered-tiles.patch"  # its split-1 flow on top
STREAM = REPO / "patches" / "experiments" / "fusion-5-stock-streamed.patch"  # large tables on top
WHOLE = REPO / "patches" / "experiments" / "fusion-5-stock-whole-blocks.patch"  # splits 2 and 4 on top
PROGRAM = REPO / "tests" / "cpp" / "q8_stock_order_test.cu"
KERNELS = REPO / "kernels"  # standalone.cuh
# the same experiment on a GPU without ggml (scripts/stock_order_gpu_check.sh runs it on the H200)
GPU_CHECK = REPO / "tests" / "cpp" / "q8_stock_order_gpu_check.cu"
GPU_TIMING = REPO / "tests" / "cpp" / "q8_stock_order_timing.cu"
HEADER = "ggml/src/ggml-cuda/fusekit-q8-gemv.cuh"
NVCC = find_nvcc()

pytestmark = pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine: the header is CUDA")


def fusekit(home: Path, *args: str) -> str:
    done = CliRunner().invoke(main, ["--home", str(home), *args])
    assert done.exit_code == 0, done.output
    return done.stdout


@pytest.fixture(scope="module")
def order_program(pinned_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test program, built against the header the experiment leaves (copied out of the applied tree)."""
    work = tmp_path_factory.mktemp("stock-order")
    fusekit(pinned_home, "reset")
    try:
        fusekit(pinned_home, "apply", "stack-1-5-grouped-f32", str(PATCH), str(TILES), str(STREAM), str(WHOLE))
        tree = Path(json.loads(fusekit(pinned_home, "status", "--json"))["tree"])
        shutil.copy(tree / HEADER, work / Path(HEADER).name)
    finally:
        fusekit(pinned_home, "reset")
    for source in (GPU_CHECK, GPU_TIMING):  # the GPU programs compile against the same header
        cmd = [str(NVCC), "-c", "-O3", "-std=c++17", "-use_fast_math", "-arch=sm_90", f"-I{work}", f"-I{KERNELS}"]
        compiled = subprocess.run([*cmd, "-o", str(work / "gpu.o"), str(source)], capture_output=True, text=True)
        assert compiled.returncode == 0, compiled.stderr[-3000:]
    binary = work / "q8_stock_order_test"
    cmd = [str(NVCC), "-O2", "-std=c++17", "-arch=sm_90", f"-I{work}", "-o", str(binary), str(PROGRAM)]
    built = subprocess.run(cmd, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    return binary


def test_every_row_is_mmvqs_bit_for_bit(order_program: Path) -> None:
    ran = subprocess.run([str(order_program)], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-1000:]
    assert "1030 checks: 1030 bit for bit MMVQ's, 1030 within 1e-5 of the float64 reference" in ran.stdout
    assert ran.stdout.count("split 0 (0: by tile") == 14  # fusion-5-stock-ordered-tiles' flow ran
    assert ran.stdout.count("split -2 (0: by tile") == ran.stdout.count("split -4 (0: by tile") == 14  # whole blocks
    assert ran.stdout.count(", 7 rows: 7 bit for bit MMVQ's") == 42  # the stream kernel's ring, 14 shapes x 3 depths
    assert "order checks passed" in ran.stdout


def test_the_sabotage_switch_makes_every_row_differ(order_program: Path) -> None:
    ran = subprocess.run([str(order_program), "--sabotage"], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert "sabotage: 0 of 1030 equal (all must be different)" in ran.stdout
