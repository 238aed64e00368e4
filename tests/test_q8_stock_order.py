"""The summation order of the experiments fusion-5-stock-order, fusion-5-stock-ordered-tiles, fusion-5-stock-streamed,
fusion-5-stock-whole-blocks, fusion-5-stock-wider-stream and fusion-5-stock-y-shared on the CPU:
tests/cpp/q8_stock_order_test.cu, compiled against fusekit-q8-gemv.cuh as they, fusion-5-stream-lean-issue,
fusion-5-stream-rows-in-turn, fusion-5-stream-slot-addresses, fusion-5-stream-tma-copies, fusion-5-stream-via-l1,
fusion-5-stream-with-l2-hints, fusion-5-stream-y-pairs, fusion-5-stream-z-hinted-l1, fusion-5-stream-zy-y-registers,
fusion-5-stream-zz-y-registers-first, fusion-5-stream-zzz-medium-tables and fusion-5-stream-zzzz-mmvq-short-tables
leave it on stack-1-5-grouped-f32,
runs the header's segments, part reads and part dot products in the kernels' data flows (a warp standing in for some
of MMVQ's warps at splits 1, 2, 4, a lane taking one part per stood-in warp or whole blocks; one warp per row by tile;
a warp's run of rows through a ring of cp.async slots whose copies land only at a wait, reading y from the CTA's
copy) against a separate emulation of mul_mat_vec_q's 128 threads at one token, and wants every row bit for bit
MMVQ's; --sabotage (the header's blocks_used switch, which leaves a block out) must make every row differ. And which
products plan sends to the stream kernel and which ones the glue leaves to MMVQ (tests/cpp/q8_stream_dispatch_test.cu),
against the header with and without fusion-5-stream-zzz-medium-tables or fusion-5-stream-zzzz-mmvq-short-tables, and
without fusion-5-stock-wider-stream (and fusion-5-stock-y-shared). Needs nvcc (the header is CUDA); no GPU."""

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
PATCH = REPO / "patches" / "experiments" / "fusion-5-stock-order.patch"
TILES = REPO / "patches" / "experiments" / "fusion-5-stock-ordered-tiles.patch"  # its split-1 flow on top
STREAM = REPO / "patches" / "experiments" / "fusion-5-stock-streamed.patch"  # large tables on top
WHOLE = REPO / "patches" / "experiments" / "fusion-5-stock-whole-blocks.patch"  # splits 2 and 4 on top
WIDER = REPO / "patches" / "experiments" / "fusion-5-stock-wider-stream.patch"  # split-2 and -4 tables streamed
Y_SHARED = REPO / "patches" / "experiments" / "fusion-5-stock-y-shared.patch"  # the stream kernel's y in shared memory
LEAN = REPO / "patches" / "experiments" / "fusion-5-stream-lean-issue.patch"  # its copies' addresses made incrementally
INTERLEAVED = REPO / "patches" / "experiments" / "fusion-5-stream-rows-in-turn.patch"  # rows dealt to warps in turn
SLOTS = REPO / "patches" / "experiments" / "fusion-5-stream-slot-addresses.patch"  # the ring's addresses in registers
TMA = REPO / "patches" / "experiments" / "fusion-5-stream-tma-copies.patch"  # copy kinds; bulk copies on sm_90
VIA_L1 = REPO / "patches" / "experiments" / "fusion-5-stream-via-l1.patch"  # plan's copies through L1
L2_HINTS = REPO / "patches" / "experiments" / "fusion-5-stream-with-l2-hints.patch"  # L1 copies with L2 hints
Y_PAIRS = REPO / "patches" / "experiments" / "fusion-5-stream-y-pairs.patch"  # y's copy read 8 bytes at a time
HINTED_L1 = REPO / "patches" / "experiments" / "fusion-5-stream-z-hinted-l1.patch"  # plan's l1 copies evict first
Y_REGISTERS = REPO / "patches" / "experiments" / "fusion-5-stream-zy-y-registers.patch"  # short rows' y in registers
Y_FIRST = REPO / "patches" / "experiments" / "fusion-5-stream-zz-y-registers-first.patch"  # longer rows: 2 tiles
MEDIUM = REPO / "patches" / "experiments" / "fusion-5-stream-zzz-medium-tables.patch"  # 17.8 MB tables stream too
SHORT = REPO / "patches" / "experiments" / "fusion-5-stream-zzzz-mmvq-short-tables.patch"  # short tables stay MMVQ's
DISPATCH = REPO / "tests" / "cpp" / "q8_stream_dispatch_test.cu"
PROGRAM = REPO / "tests" / "cpp" / "q8_stock_order_test.cu"
KERNELS = REPO / "kernels"  # standalone.cuh
# the same experiment on a GPU without ggml (scripts/stock_order_gpu_check.sh runs it on the H200)
GPU_CHECK = REPO / "tests" / "cpp" / "q8_stock_order_gpu_check.cu"
GPU_TIMING = REPO / "tests" / "cpp" / "q8_stock_order_timing.cu"
GPU_REUSE = REPO / "tests" / "cpp" / "q8_stream_reuse_check.cu"  # scripts/stream_reuse_gpu_check.sh
HEADER = "ggml/src/ggml-cuda/fusekit-q8-gemv.cuh"
NVCC = find_nvcc()

pytestmark = pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine: the header is CUDA")


def _header_without(work: Path, name: str, *patches: Path) -> Path:
    """A copy of the applied header in work/name with ``patches`` reversed, in that order; returns work/name."""
    folder = work / name
    (folder / Path(HEADER).parent).mkdir(parents=True)
    shutil.copy(work / Path(HEADER).name, folder / HEADER)
    for patch in patches:
        reverse = ["git", "apply", "-R", f"--include={HEADER}", str(patch)]
        reversed_ = subprocess.run(reverse, cwd=folder, capture_output=True, text=True)
        assert reversed_.returncode == 0, f"{patch.name}: {reversed_.stderr}"
    return folder


@pytest.fixture(scope="module")
def order_program(pinned_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test program, built against the header the experiment leaves (copied out of the applied tree)."""
    work = tmp_path_factory.mktemp("stock-order")
    fusekit(pinned_home, "reset")
    before = variant_labels(pinned_home)
    try:
        experiments = (
            PATCH,
            TILES,
            STREAM,
            WHOLE,
            WIDER,
            Y_SHARED,
            LEAN,
            INTERLEAVED,
            SLOTS,
            TMA,
            VIA_L1,
            L2_HINTS,
            Y_PAIRS,
            HINTED_L1,
            Y_REGISTERS,
            Y_FIRST,
            MEDIUM,
            SHORT,
        )
        fusekit(pinned_home, "apply", "stack-1-5-grouped-f32", *map(str, experiments))
        tree = Path(json.loads(fusekit(pinned_home, "status", "--json"))["tree"])
        shutil.copy(tree / HEADER, work / Path(HEADER).name)
    finally:
        drop_variants_since(pinned_home, before)
    for source in (GPU_CHECK, GPU_TIMING, GPU_REUSE):  # the GPU programs compile against the same header
        cmd = [str(NVCC), "-c", "-O3", "-std=c++17", "-use_fast_math", "-arch=sm_90", f"-I{work}", f"-I{KERNELS}"]
        compiled = subprocess.run([*cmd, "-o", str(work / "gpu.o"), str(source)], capture_output=True, text=True)
        assert compiled.returncode == 0, compiled.stderr[-3000:]
    # the header without fusion-5-stream-zzz-medium-tables only, for the medium rule's other side
    no_medium = _header_without(work, "no-medium", MEDIUM)
    # the header without fusion-5-stream-zzzz-mmvq-short-tables only, for the short-tables rule's other side
    no_short = _header_without(work, "no-short", SHORT)
    # the header without fusion-5-stream-zzzz-mmvq-short-tables, fusion-5-stream-zzz-medium-tables,
    # fusion-5-stream-zz-y-registers-first, fusion-5-stream-zy-y-registers,
    # fusion-5-stream-z-hinted-l1, fusion-5-stream-y-pairs, fusion-5-stream-with-l2-hints, fusion-5-stream-via-l1,
    # fusion-5-stream-tma-copies, fusion-5-stream-slot-addresses, fusion-5-stream-rows-in-turn,
    # fusion-5-stream-lean-issue, fusion-5-stock-y-shared and fusion-5-stock-wider-stream, for the dispatch test's
    # other side
    stream_experiments = (
        SHORT,
        MEDIUM,
        Y_FIRST,
        Y_REGISTERS,
        HINTED_L1,
        Y_PAIRS,
        L2_HINTS,
        VIA_L1,
        TMA,
        SLOTS,
        INTERLEAVED,
        LEAN,
    )
    before = _header_without(work, "before", *stream_experiments, Y_SHARED, WIDER)
    folders = (
        ("dispatch", work),
        ("dispatch_no_medium", no_medium / Path(HEADER).parent),
        ("dispatch_no_short", no_short / Path(HEADER).parent),
        ("dispatch_before", before / Path(HEADER).parent),
    )
    for name, folder in folders:
        cmd = [str(NVCC), "-std=c++17", "-arch=sm_90", f"-I{folder}", "-o", str(work / name), str(DISPATCH)]
        built = subprocess.run(cmd, capture_output=True, text=True)
        assert built.returncode == 0, built.stderr[-3000:]
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


def _dispatch(program: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(program), *args], capture_output=True, text=True, timeout=60)


def test_plan_streams_the_split_tables_with_their_residual(order_program: Path) -> None:
    """fusion-5-stock-wider-stream: ssm_out and the attention output (split 2, with the residual as bias) and every
    other plain table plan would split take the stream kernel at depth 3; gated, ids and many-channel products and
    small split-1 tables keep the row kernels; the rule before it is not what this header does."""
    ran = _dispatch(order_program.parent / "dispatch")
    assert ran.returncode == 0, ran.stdout
    assert "35B ssm_out 2048x4096 + residual           stream" in ran.stdout
    assert "stream depth 3, y in shared memory; 31 of 31 cases" in ran.stdout and "dispatch as expected" in ran.stdout
    assert "long rows 20000x16384                      row kernels" in ran.stdout  # over the shared copy of y
    before_rule = _dispatch(order_program.parent / "dispatch", "--expect-before")
    assert before_rule.returncode == 1 and before_rule.stdout.count("WRONG") == 17


def test_plan_streams_the_medium_q8_tables(order_program: Path) -> None:
    """fusion-5-stream-zzz-medium-tables: plain Q8_0 tables of 2^19 blocks and more (8192 x 2048, 4096 x 4096 up to
    14336 x 4096) take the stream kernel; one block fewer, Q4_0 and gated ones keep the row kernels. The wider rule
    alone is not what this header does, and the header without the experiment fails the medium rule on exactly the
    five medium tables."""
    ran = _dispatch(order_program.parent / "dispatch")
    for case in ("35B gdn wqkv 8192x2048", "Llama wq/wo 4096x4096", "Llama down 4096x14336"):
        assert f"{case:<42} stream       (expected stream)" in ran.stdout
    for case in ("one block short of medium 4095x128", "q4_0 8192x2048 (medium, not Q8_0)", "gated medium 8192x2048"):
        assert f"{case:<42} row kernels  (expected row kernels)" in ran.stdout
    assert "as fusion-5-stream-zzz-medium-tables expects" in ran.stdout
    wider_only = _dispatch(order_program.parent / "dispatch", "--expect-wider")
    assert wider_only.returncode == 1 and wider_only.stdout.count("WRONG") == 5
    no_medium = order_program.parent / "dispatch_no_medium"
    assert _dispatch(no_medium).returncode == 0  # its own header's rule: the wider one
    sabotage = _dispatch(no_medium, "--expect-medium")
    assert sabotage.returncode == 1 and sabotage.stdout.count("WRONG") == 5


def test_the_short_q8_tables_stay_with_mmvq(order_program: Path) -> None:
    """fusion-5-stream-zzzz-mmvq-short-tables: plain Q8_0 tables of at most 16 rows an SM with rows of 64 blocks or
    more (the 35B preset's ssm_out and attention output, 2048 x 4096) are left to MMVQ, one row more or one block fewer,
    gated, Q4_0 and two-channel products are not; the header without the experiment leaves none and so fails the rule
    on exactly the nine short cases."""
    ran = _dispatch(order_program.parent / "dispatch")
    assert ran.returncode == 0, ran.stdout
    for case in ("35B ssm_out 2048x4096 + residual", "35B attention wk 512x2048", "16 rows an SM 2112x64"):
        assert f"short tables: {case:<42} MMVQ    (expected MMVQ)" in ran.stdout
    for case in ("one row over 16 an SM 2113x64", "63 blocks a row 2048x63", "q4_0 short 2048x4096"):
        assert f"short tables: {case:<42} fusekit (expected fusekit)" in ran.stdout
    assert "31 of 31 cases as fusion-5-stream-zzzz-mmvq-short-tables expects" in ran.stdout
    no_short = order_program.parent / "dispatch_no_short"
    assert _dispatch(no_short).returncode == 0  # its own header's rule: none left to MMVQ
    sabotage = _dispatch(no_short, "--expect-short")
    assert sabotage.returncode == 1 and sabotage.stdout.count("WRONG") == 9, sabotage.stdout


def test_the_header_before_it_keeps_its_own_rule(order_program: Path) -> None:
    """The same cases on fusion-5-stock-whole-blocks' header: its rule holds and the wider one fails there, so the
    dispatch test tells the two headers apart."""
    before = order_program.parent / "dispatch_before"
    ran = _dispatch(before, "--expect-before")
    assert ran.returncode == 0 and "stream depth 4; 31 of 31 cases" in ran.stdout, ran.stdout
    wider_rule = _dispatch(before)
    assert wider_rule.returncode == 1 and wider_rule.stdout.count("WRONG") == 11
