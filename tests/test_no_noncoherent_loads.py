"""Our kernels read nothing through the non-coherent path (``ld.global.nc``; ``__ldg``, and what nvcc may emit
for ``const __restrict__`` pointers): under programmatic dependent launch such loads are not ordered by the
grid-dependency wait and can return the previous kernel's stale data (fusion-5's q8_1 activations read with
``__ldg`` gave NaN log-probs on the H200). Each ``.cu`` the manifests place into ggml-cuda, compiled to PTX for
sm_90 in the pinned tree with every fusion applied, must define no kernel with such a load; an ``__ldg`` put
back into a copy of fusekit-q8-gemv.cuh must be found. Needs nvcc, no GPU."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fusekit.compilecheck import CUDA_DIR, INCLUDE_PATTERN, cublas_include, find_nvcc
from fusekit.ptxcheck import compile_ptx, demangle, nc_load_kernels, ptx_functions
from fusekit.registry import Registry

from .conftest import applied_tree

REPO = Path(__file__).resolve().parent.parent
REGISTRY = Registry.load(REPO / "fusions")
NVCC = find_nvcc()
SABOTAGED_HEADER = "fusekit-q8-gemv.cuh"  # its __ldca( calls become __ldg( in the sabotage copy
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine: the PTX check compiles our CUDA units")


def placed_units() -> list[str]:
    """The ``.cu`` files the fusion manifests place into ggml-cuda (paths in the tree)."""
    return sorted({k.dest for f in REGISTRY.fusions for k in f.kernels if k.dest.endswith(".cu")})


@pytest.fixture(scope="module")
def patched_tree(pinned_home: Path) -> Iterator[Path]:
    """The pinned tree with every registered fusion applied (the workspace is reset to stock afterwards)."""
    yield from applied_tree(pinned_home, [f.name for f in REGISTRY.fusions], REGISTRY)


@pytest.fixture(scope="module")
def includes(pinned_home: Path, patched_tree: Path) -> list[Path]:
    """ggml's include folders in the patched tree, and one holding cublas_v2.h."""
    assert NVCC is not None
    cublas = cublas_include(NVCC, pinned_home / "cache", None, lambda _msg: None)
    return [patched_tree / "ggml/include", patched_tree / "ggml/src", patched_tree / CUDA_DIR, cublas]


def unit_ptx(source: Path, includes: list[Path], scratch: Path) -> str:
    """The sm_90 PTX of one unit (both tests compile the same way)."""
    assert NVCC is not None
    return compile_ptx(NVCC, source, includes, scratch / f"{source.stem}.ptx", arch="90")


def offenders_message(found: dict[str, list[str]]) -> str:
    lines = [f"{unit}: {name}" for unit, names in found.items() for name in demangle(names)]
    return "kernels with non-coherent (ld.global.nc) loads, unsafe under PDL:\n  " + "\n  ".join(lines)


@pytest.mark.slow
@needs_nvcc
def test_our_kernels_have_no_noncoherent_loads(patched_tree: Path, includes: list[Path], tmp_path: Path) -> None:
    units = placed_units()
    assert units, "the fusion manifests place no .cu file into ggml-cuda"
    with ThreadPoolExecutor(max_workers=max(1, min(len(units), os.cpu_count() or 1))) as pool:
        ptx = dict(zip(units, pool.map(lambda u: unit_ptx(patched_tree / u, includes, tmp_path), units), strict=True))
    entries = {u: [n for n, (kind, _) in ptx_functions(text).items() if kind == "entry"] for u, text in ptx.items()}
    assert any(entries.values()), f"no kernel (.entry) in the PTX of {units}"
    found = {u: names for u, text in ptx.items() if (names := nc_load_kernels(text))}
    assert not found, offenders_message(found)


@pytest.mark.slow
@needs_nvcc
def test_an_ldg_put_back_is_found(patched_tree: Path, includes: list[Path], tmp_path: Path) -> None:
    """The q8 GEMV header with __ldg( for its __ldca( loads, compiled from a copy of the unit that includes it."""
    cuda = patched_tree / CUDA_DIR
    units = [u for u in placed_units() if SABOTAGED_HEADER in INCLUDE_PATTERN.findall((patched_tree / u).read_text())]
    assert len(units) == 1, f"expected one placed unit including {SABOTAGED_HEADER}, got {units}"
    text = (cuda / SABOTAGED_HEADER).read_text()
    assert "__ldca(" in text, f"{SABOTAGED_HEADER} has no __ldca( load to sabotage"
    copy = tmp_path / "sabotaged"
    copy.mkdir()
    (copy / SABOTAGED_HEADER).write_text(text.replace("__ldca(", "__ldg("))
    unit = Path(shutil.copy(patched_tree / units[0], copy))  # its quoted include now finds the sabotaged copy
    found = nc_load_kernels(unit_ptx(unit, includes, tmp_path))
    assert found, "an __ldg in the q8 GEMV kernel was not found in its PTX"
    assert all("fusekit_q8::" in name for name in demangle(found)), offenders_message({units[0]: found})


PTX = """
.func  (.param .b32 func_retval0) _Z6helperPKi(.param .b64 _Z6helperPKi_param_0)
{
    ld.global.nc.L1::no_allocate.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];
    ret;
}
.visible .entry _Z7callingv(
    .param .u64 _Z7callingv_param_0
)
.maxntid 128, 1, 1
{
    { .reg .b32 temp; }
    call.uni (retval0), _Z6helperPKi, (param0);
    ret;
}
.weak .entry _Z8coherentv()
{
    ld.global.ca.u32 %r1, [%rd1];
    ld.global.u32 %r2, [%rd2];
    ret;
}
.entry _Z6directv()
{
    ld.global.nc.f32 %f1, [%rd1];
}
"""


def test_the_ptx_check_follows_calls_and_ignores_coherent_loads() -> None:
    assert nc_load_kernels(PTX) == ["_Z6directv", "_Z7callingv"]
    assert {name: kind for name, (kind, _) in ptx_functions(PTX).items()} == {
        "_Z6helperPKi": "func",
        "_Z7callingv": "entry",
        "_Z8coherentv": "entry",
        "_Z6directv": "entry",
    }
