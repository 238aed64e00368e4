"""The stream kernel's launch shape on the CPU, for two experiments on the stack L1 + ZY + M + F:

- fusion-5-stream-zzzzz-residency-cap (tests/cpp/q8_residency_cap_test.cu): plan_stream's partial grids capped at
  ceil(CTAs / SMs) an SM on 132 SMs (6144 x 4096: 3), full grids uncapped, no reserve without a GPU, and a reserve that
  lets the cap's CTAs share an SM but not one more (H100/H200 and A100 shared memory, the stream kernel's static size
  and a sweep). --sabotage (one granule less) must make the reserve cases fail.
- fusion-5-stream-zzzzzz-full-grid (tests/cpp/q8_stream_grid_test.cu): plan_stream's grids full (528 CTAs on 132 SMs
  wherever a table has a row for each warp) and the most loaded SM's rows that follow (14336 x 4096: 112, from 128).
  Against the same header with the experiment reversed, the program must find the rule before and fail the full-grid
  expectation.
- fusion-5-stream-zzzzzzz-fill-or-cap (the same program): on top of both, the full grid only where the plain grid puts
  4 CTAs on some SM; the two 384-CTA tables keep the cap's grid. Against the full-grid header without it, asking for
  fill-or-cap must fail on exactly those two.

Each program is compiled against fusekit-q8-gemv.cuh as its experiment leaves it. Needs nvcc, no GPU."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from fusekit.compilecheck import find_nvcc
from fusekit.registry import Registry

from .conftest import applied_tree

REPO = Path(__file__).resolve().parent.parent
REGISTRY = Registry.load(REPO / "fusions")
EXPERIMENTS = REPO / "patches" / "experiments"
STACK = [
    "stack-1-5-stock-order-l1",
    str(EXPERIMENTS / "fusion-5-stream-zy-y-registers.patch"),
    str(EXPERIMENTS / "fusion-5-stream-zzz-medium-tables.patch"),
    str(EXPERIMENTS / "fusion-5-stream-zzzz-mmvq-short-tables.patch"),
]
CAP = EXPERIMENTS / "fusion-5-stream-zzzzz-residency-cap.patch"
FULL = EXPERIMENTS / "fusion-5-stream-zzzzzz-full-grid.patch"
FILL_OR_CAP = EXPERIMENTS / "fusion-5-stream-zzzzzzz-fill-or-cap.patch"
CPP = REPO / "tests" / "cpp"
HEADER = "ggml/src/ggml-cuda/fusekit-q8-gemv.cuh"
NVCC = find_nvcc()

pytestmark = pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine: the header is CUDA")


def stack_header(home: Path, folder: Path, *experiments: Path) -> Path:
    """The header the stack with ``experiments`` on top leaves, copied to folder/; returns folder."""
    folder.mkdir(parents=True)
    for tree in applied_tree(home, [*STACK, *map(str, experiments)], REGISTRY):
        shutil.copy(tree / HEADER, folder / Path(HEADER).name)
    return folder


def build(source: Path, header_dir: Path, binary: Path) -> Path:
    cmd = [str(NVCC), "-std=c++17", "-arch=sm_90", f"-I{header_dir}", "-o", str(binary), str(source)]
    built = subprocess.run(cmd, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    return binary


def run(program: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(program), *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def cap_program(pinned_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("residency-cap")
    header = stack_header(pinned_home, work / "header", CAP)
    return build(CPP / "q8_residency_cap_test.cu", header, work / "q8_residency_cap_test")


@pytest.fixture(scope="module")
def grid_programs(pinned_home: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The grid check against the header with the experiment, and against the same header with it reversed."""
    work = tmp_path_factory.mktemp("stream-grid")
    full = stack_header(pinned_home, work / "full", FULL)
    without = work / "without"
    (without / Path(HEADER).parent).mkdir(parents=True)
    shutil.copy(full / Path(HEADER).name, without / HEADER)
    reverse = ["git", "apply", "-R", f"--include={HEADER}", str(FULL)]
    reversed_ = subprocess.run(reverse, cwd=without, capture_output=True, text=True)
    assert reversed_.returncode == 0, reversed_.stderr
    source = CPP / "q8_stream_grid_test.cu"
    return build(source, full, work / "grid-full"), build(source, without / Path(HEADER).parent, work / "grid-without")


def expect(program: Path, args: tuple[str, ...], code: int, *needles: str) -> str:
    """Runs ``program args``, wants exit status ``code`` and every needle in its output; returns the output."""
    ran = run(program, *args)
    assert ran.returncode == code, ran.stdout[-3000:] + ran.stderr[-1000:]
    for needle in needles:
        assert needle in ran.stdout
    return ran.stdout


def test_partial_stream_grids_are_capped_and_the_reserve_caps_exactly(cap_program: Path) -> None:
    expect(
        cap_program,
        (),
        0,
        "grid 6144 x 4096     384 CTAs: cap 3 (expected 3)",
        "3 CTAs an SM with 13056 bytes reserved each",
        "15 of 15 cases as fusion-5-stream-zzzzz-residency-cap expects",
    )


def test_a_reserve_one_granule_short_fails_the_check(cap_program: Path) -> None:
    out = expect(
        cap_program, ("--sabotage",), 1, "10 of 15 cases as fusion-5-stream-zzzzz-residency-cap expects (sabotaged"
    )
    assert out.count("WRONG (cap + 1 CTAs fit, or the cap does not)") == 3  # every reserve made


def test_the_stream_grid_fills_every_slot(grid_programs: tuple[Path, Path]) -> None:
    expect(
        grid_programs[0],
        (),
        0,
        "Llama-3-8B up 14336 x 4096          528 CTAs, at most   112 rows an SM",
        "9 of 9 tables as fusion-5-stream-zzzzzz-full-grid expects",
    )


def test_without_the_full_grid_experiment_its_check_fails(grid_programs: tuple[Path, Path]) -> None:
    expect(grid_programs[1], (), 0, "Llama-3-8B up 14336 x 4096          448 CTAs, at most   128 rows an SM")
    expect(grid_programs[1], ("--expect-full",), 1, "2 of 9 tables as fusion-5-stream-zzzzzz-full-grid expects")


@pytest.fixture(scope="module")
def fill_or_cap_program(pinned_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("fill-or-cap")
    header = stack_header(pinned_home, work / "header", CAP, FULL, FILL_OR_CAP)
    return build(CPP / "q8_stream_grid_test.cu", header, work / "grid-fill-or-cap")


def test_fill_or_cap_fills_only_grids_with_four_ctas_on_an_sm(fill_or_cap_program: Path) -> None:
    expect(
        fill_or_cap_program,
        (),
        0,
        "Llama-3-8B qkv 6144 x 4096          384 CTAs",
        "Llama-3-8B up 14336 x 4096          528 CTAs, at most   112 rows an SM",
        "9 of 9 tables as fusion-5-stream-zzzzzzz-fill-or-cap expects",
    )


def test_the_full_grid_alone_fails_the_fill_or_cap_check(grid_programs: tuple[Path, Path]) -> None:
    out = expect(grid_programs[0], ("--expect-fill-or-cap",), 1, "7 of 9 tables as fusion-5-stream-zzzzzzz-fill-or-cap")
    assert out.count("WRONG") == 2  # the two 384-CTA tables
