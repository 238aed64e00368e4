"""The experiment fusion-2-pdl: fusion-2's kernels take part in ggml's programmatic dependent launch. In the pinned
tree with fusion-2 and the experiment applied, every kernel in the sm_90 PTX of fusekit-gdn-chains.cu (the unit that
launches them) must wait for the kernels before it (``griddepcontrol.wait``) and release the one after it early
(``griddepcontrol.launch_dependents``): a kernel launched with the attribute that does not wait would read what the
kernel before it has not written yet. Without the experiment none of them does (the premise), and a wait taken out of
a copy of the header must be found. Needs nvcc, no GPU."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from fusekit.compilecheck import CUDA_DIR, cublas_include, find_nvcc
from fusekit.ptxcheck import compile_ptx, demangle, kernels_outside_pdl, ptx_functions
from fusekit.registry import Registry

from .conftest import applied_tree

REPO = Path(__file__).resolve().parent.parent
REGISTRY = Registry.load(REPO / "fusions")
PATCH = REPO / "patches" / "experiments" / "fusion-2-pdl.patch"
UNIT = f"{CUDA_DIR}/fusekit-gdn-chains.cu"
HEADER = "fusekit-gdn-chains.cuh"
WAIT = "    FUSEKIT_GDN_WAIT_FOR_INPUTS();\n"
NVCC = find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine: the check compiles fusion-2's unit")


@pytest.fixture(scope="module")
def pdl_tree(pinned_home: Path) -> Iterator[Path]:
    yield from applied_tree(pinned_home, ["fusion-2", str(PATCH)], REGISTRY)


def unit_ptx(tree: Path, source: Path, home: Path, scratch: Path) -> str:
    """The sm_90 PTX of one unit, with the tree's include folders and one holding cublas_v2.h."""
    assert NVCC is not None
    cublas = cublas_include(NVCC, home / "cache", None, lambda _msg: None)
    includes = [tree / "ggml/include", tree / "ggml/src", tree / CUDA_DIR, cublas]
    return compile_ptx(NVCC, source, includes, scratch / f"{source.stem}.ptx", arch="90")


def entries(ptx: str) -> list[str]:
    return sorted(name for name, (kind, _) in ptx_functions(ptx).items() if kind == "entry")


@pytest.mark.slow
@needs_nvcc
def test_every_fused_kernel_waits_and_releases(pdl_tree: Path, pinned_home: Path, tmp_path: Path) -> None:
    ptx = unit_ptx(pdl_tree, pdl_tree / UNIT, pinned_home, tmp_path)
    kernels = entries(ptx)
    assert len(kernels) >= 9, kernels  # prologue and gated norm at 4 row lengths each, and the conv window
    assert not kernels_outside_pdl(ptx), demangle(kernels_outside_pdl(ptx))


@pytest.mark.slow
@needs_nvcc
def test_a_wait_taken_out_is_found(pdl_tree: Path, pinned_home: Path, tmp_path: Path) -> None:
    """The gated norm's wait removed in a copy of the header: its four kernels, and only they, are found."""
    text = (pdl_tree / CUDA_DIR / HEADER).read_text()
    kernel_start = text.index("gated_norm_kernel(const GatedNormArgs a) {")
    cut = text.index(WAIT, kernel_start)
    copy = tmp_path / "sabotaged"
    copy.mkdir()
    (copy / HEADER).write_text(text[:cut] + text[cut + len(WAIT) :])
    unit = Path(shutil.copy(pdl_tree / UNIT, copy))  # its quoted include now finds the copy
    found = demangle(kernels_outside_pdl(unit_ptx(pdl_tree, unit, pinned_home, tmp_path)))
    assert len(found) == 4 and all("gated_norm_kernel" in name for name in found), found


@pytest.mark.slow
@needs_nvcc
def test_without_the_experiment_no_fused_kernel_takes_part(pinned_home: Path, tmp_path: Path) -> None:
    """The premise: fusion-2 alone launches its kernels outside PDL."""
    for tree in applied_tree(pinned_home, ["fusion-2"], REGISTRY):
        ptx = unit_ptx(tree, tree / UNIT, pinned_home, tmp_path)
        assert entries(ptx) and kernels_outside_pdl(ptx) == entries(ptx)


PTX = """
.visible .entry _Z4bothv()
{
    griddepcontrol.launch_dependents;
    griddepcontrol.wait;
    ret;
}
.visible .entry _Z8waitonlyv()
{
    griddepcontrol.wait;
    ret;
}
.entry _Z7neitherv()
{
    ld.global.u32 %r1, [%rd1];
}
.func _Z6helperv()
{
    ret;
}
"""


def test_the_pdl_check_wants_both_instructions_in_each_kernel() -> None:
    assert kernels_outside_pdl(PTX) == ["_Z7neitherv", "_Z8waitonlyv"]
