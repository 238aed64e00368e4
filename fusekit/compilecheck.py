"""Compile-only check of the CUDA units a variant changes, for machines without a GPU.

The units are the ``.cu`` files of ``ggml/src/ggml-cuda`` that differ from stock, plus the ``.cu``
files there that include a changed header. Each is compiled with ``nvcc -c`` for every asked
architecture, with the flags ggml's CMake gives CUDA sources (``-use_fast_math -extended-lambda``,
``GGML_CUDA_USE_GRAPHS``). ggml-cuda includes ``cublas_v2.h``; a toolkit without cuBLAS gets the
headers from the pinned ``nvidia-cublas`` wheel (headers only are extracted, once, into the cache).

The units are linked into one library (libggml-cuda), so compiling each alone is not enough: a non-template kernel
or function defined in a header that several units include links twice (session 45 lost a GPU build to one). After
the compiles, the external symbols the units define are compared (``nm``); a symbol defined by two of them is
reported as a failed check of its own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import FusekitError
from .gitutil import run_git
from .source import pip_download
from .workspace import STOCK_BRANCH

CUDA_DIR = "ggml/src/ggml-cuda"
CUBLAS_REQUIREMENT = "nvidia-cublas==13.10.0.20"  # CUDA 13 headers; only cublas_v2.h and friends are used
NVCC_FLAGS = ("-std=c++17", "-O3", "-use_fast_math", "-extended-lambda", "-DGGML_USE_CUDA", "-DGGML_CUDA_USE_GRAPHS")
INCLUDE_PATTERN = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# ggml/cmake/common.cmake defines GGML_CUDA_FA_<K>_<V> (1: its vector FlashAttention instance is built) for every pair
# of these types, from the cache variable GGML_CUDA_FA_QUANTS whose default ggml/CMakeLists.txt sets
FA_TYPES_PATTERN = re.compile(r"set\(FA_TYPES ([a-z0-9_ ]+)\)")
FA_DEFAULT_PATTERN = re.compile(r'set\s*\(GGML_CUDA_FA_QUANTS\s+"([^"]*)"\s+CACHE')
# nm's letters for an external definition the linker will not merge with another (weak W/V and unique u ones it
# merges: templates, inline functions)
STRONG_SYMBOL_TYPES = frozenset("TDBRG")
LINK_CHECK = "(link: external symbols of the units)"


@dataclass(frozen=True)
class UnitResult:
    unit: str
    arch: str
    ok: bool
    seconds: float
    errors: str  # the compiler's first error lines when not ok

    def record(self) -> dict[str, object]:
        return asdict(self)


def find_nvcc(explicit: str | None = None) -> Path | None:
    """``--nvcc``, then ``$NVCC``, then PATH, then /usr/local/cuda/bin."""
    for candidate in (explicit, os.environ.get("NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def changed_files(tree: Path) -> list[str]:
    """Paths (relative to the tree) that differ between stock and the tree's HEAD."""
    out = run_git(tree, "diff", "--name-only", STOCK_BRANCH, "HEAD")
    return [line for line in out.splitlines() if line.strip()]


def touched_units(tree: Path, changed: list[str]) -> list[str]:
    """Changed ggml-cuda ``.cu`` files, and those that include a changed ggml-cuda header."""
    cuda = [p for p in changed if p.startswith(CUDA_DIR + "/")]
    units = {p for p in cuda if p.endswith(".cu") and (tree / p).is_file()}
    headers = {Path(p).name for p in cuda if p.endswith((".cuh", ".h"))}
    if headers:
        for source in sorted((tree / CUDA_DIR).glob("*.cu")):
            included = set(INCLUDE_PATTERN.findall(source.read_text(errors="replace")))
            if included & headers:
                units.add(str(source.relative_to(tree)))
    return sorted(units)


def _has_cublas(include: Path) -> bool:
    return (include / "cublas_v2.h").is_file()


def cublas_include(nvcc: Path, cache: Path, explicit: Path | None, note: Callable[[str], None]) -> Path:
    """A folder holding ``cublas_v2.h``: ``--cuda-include``, the toolkit's, an installed wheel's, or the cache."""
    if explicit is not None:
        if not _has_cublas(explicit):
            raise FusekitError(f"--cuda-include {explicit} has no cublas_v2.h")
        return explicit
    toolkit = nvcc.resolve().parent.parent / "include"
    if _has_cublas(toolkit):
        return toolkit
    for entry in sys.path:
        for sub in ("nvidia/cu13/include", "nvidia/cublas/include"):
            if entry and _has_cublas(Path(entry) / sub):
                return Path(entry) / sub
    target = cache / "cublas-headers"
    found = sorted(target.glob("**/cublas_v2.h"))
    if found:
        return found[0].parent
    note(f"fetching cuBLAS headers ({CUBLAS_REQUIREMENT}, a large wheel; headers only are kept)")
    folder = cache / "cublas-download"
    shutil.rmtree(folder, ignore_errors=True)
    done = pip_download(CUBLAS_REQUIREMENT, folder, binary=True)
    wheels = sorted(folder.glob("*.whl"))
    if not wheels:
        tail = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no wheel"
        raise FusekitError(f"cannot fetch {CUBLAS_REQUIREMENT} for its headers: {tail} (or pass --cuda-include)")
    with zipfile.ZipFile(wheels[0]) as wheel:
        members = [m for m in wheel.namelist() if "/include/" in m and m.endswith(".h")]
        wheel.extractall(target, members=members)
    shutil.rmtree(folder, ignore_errors=True)
    found = sorted(target.glob("**/cublas_v2.h"))
    if not found:
        raise FusekitError(f"{wheels[0].name} holds no cublas_v2.h")
    return found[0].parent


def fattn_defines(tree: Path) -> list[str]:
    """The GGML_CUDA_FA_* definitions a default CMake configuration of the tree passes to every CUDA unit (fattn.cu
    reads them); none where the tree's cmake files do not say (older trees, which do not read them either)."""
    try:
        types_match = FA_TYPES_PATTERN.search((tree / "ggml/cmake/common.cmake").read_text())
        default_match = FA_DEFAULT_PATTERN.search((tree / "ggml/CMakeLists.txt").read_text())
    except OSError:
        return []
    if types_match is None or default_match is None:
        return []
    types = types_match.group(1).split()
    quants = default_match.group(1).lower()
    pairs = {pair.strip() for pair in re.split(r"[;,]", quants) if pair.strip()}
    built = {"f16-f16", *pairs}  # common.cmake always builds f16-f16
    defines = [f'-DGGML_CUDA_FA_QUANTS="{quants.replace(";", ",")}"']
    for type_v in types:
        for type_k in types:
            pair = f"{type_k}-{type_v}"
            defines.append(f"-DGGML_CUDA_FA_{type_k.upper()}_{type_v.upper()}={int(quants == 'all' or pair in built)}")
    return defines


def compile_unit(
    nvcc: Path, tree: Path, unit: str, arch: str, include: Path, scratch: Path, defines: list[str]
) -> UnitResult:
    """``nvcc -c`` of one unit for one architecture (sm_ARCH), in a scratch folder, with the tree's ``defines``
    (fattn_defines).

    Through ccache when it is installed, with the trees' common root as base directory (as builds do),
    so a unit that is the same in several stacks compiles once. The object stays (object_path) for the link check.
    """
    obj = object_path(scratch, unit, arch)
    launcher = shutil.which("ccache")
    env = {**os.environ, "CCACHE_BASEDIR": str(tree.parent), "CCACHE_NOHASHDIR": "1"} if launcher else None
    cmd = [
        *([launcher] if launcher else []), str(nvcc), "-c", *NVCC_FLAGS, *defines, f"-arch=sm_{arch}",
        f"-I{include}", f"-I{tree / 'ggml/include'}", f"-I{tree / 'ggml/src'}", f"-I{tree / CUDA_DIR}",
        "-o", str(obj), str(tree / unit),
    ]  # fmt: skip
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = time.monotonic() - start
    errors = ""
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr + done.stdout).splitlines() if "error" in ln.lower()]
        errors = "\n".join(lines[:8]) or (done.stderr + done.stdout).strip()[-800:]
    return UnitResult(unit, arch, done.returncode == 0, round(seconds, 1), errors)


def object_path(scratch: Path, unit: str, arch: str) -> Path:
    return scratch / f"{Path(unit).stem}.sm{arch}.o"


def external_definitions(nm: str, obj: Path) -> set[str]:
    """The (mangled) names an object defines for the linker and will not let another object define too."""
    done = subprocess.run(
        [nm, "--defined-only", "--extern-only", "--format=posix", str(obj)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise FusekitError(f"nm cannot read {obj.name}: {done.stderr.strip()[-300:]}")
    names = set()
    for line in done.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[1] in STRONG_SYMBOL_TYPES:
            names.add(fields[0])
    return names


def symbol_clashes(nm: str, objects: dict[str, Path]) -> dict[str, list[str]]:
    """Symbols defined by more than one of the objects (by unit), each with the units that define it."""
    owners: dict[str, list[str]] = defaultdict(list)
    for unit, obj in sorted(objects.items()):
        for name in external_definitions(nm, obj):
            owners[name].append(unit)
    return {name: units for name, units in sorted(owners.items()) if len(units) > 1}


def demangled(names: list[str]) -> list[str]:
    """The names as c++filt writes them (unchanged where it is missing)."""
    tool = shutil.which("c++filt")
    if tool is None or not names:
        return names
    done = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True)
    lines = done.stdout.splitlines()
    return lines if done.returncode == 0 and len(lines) == len(names) else names


def link_check(nm: str, objects: dict[str, Path], arch: str) -> UnitResult:
    """One result for the units compiled for arch: failed where two of them define the same external symbol."""
    start = time.monotonic()
    clashes = symbol_clashes(nm, objects)
    names = demangled(list(clashes))
    errors = "\n".join(
        f"error: {name} is defined in {', '.join(Path(u).name for u in units)}"
        for name, units in zip(names[:8], list(clashes.values())[:8], strict=True)
    )
    if len(clashes) > 8:
        errors += f"\n... and {len(clashes) - 8} more"
    return UnitResult(LINK_CHECK, arch, not clashes, round(time.monotonic() - start, 1), errors)


def compile_check(
    tree: Path,
    archs: list[str],
    nvcc: Path,
    include: Path,
    scratch: Path,
    jobs: int,
    note: Callable[[str], None],
) -> list[UnitResult]:
    """Compile every touched unit for every arch (``jobs`` at a time); results in unit, arch order, then per arch the
    link check of the units that compiled (where there are two or more and ``nm`` is installed)."""
    units = touched_units(tree, changed_files(tree))
    if not units:
        return []
    scratch.mkdir(parents=True, exist_ok=True)
    work = [(u, a) for u in units for a in archs]
    note(f"compiling {len(units)} CUDA unit(s) x {len(archs)} arch(s) with {nvcc} ({jobs} at a time)")
    defines = fattn_defines(tree)  # read once for every unit

    def one(item: tuple[str, str]) -> UnitResult:
        result = compile_unit(nvcc, tree, item[0], item[1], include, scratch, defines)
        note(f"  {'ok    ' if result.ok else 'FAILED'} sm_{item[1]} {item[0]} ({result.seconds:.0f}s)")
        return result

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(one, work))
    nm = shutil.which("nm")
    try:
        for arch in archs:
            objects = {r.unit: object_path(scratch, r.unit, arch) for r in results if r.arch == arch and r.ok}
            if len(objects) < 2:
                continue
            if nm is None:
                note(f"  no nm (binutils) on PATH: sm_{arch}'s units were not checked for symbols defined twice")
                continue
            linked = link_check(nm, objects, arch)
            note(f"  {'ok    ' if linked.ok else 'FAILED'} sm_{arch} {LINK_CHECK}")
            results.append(linked)
    finally:
        for unit, arch in work:
            object_path(scratch, unit, arch).unlink(missing_ok=True)
    return results
