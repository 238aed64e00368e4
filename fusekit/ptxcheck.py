"""Non-coherent global loads (``ld.global.nc``) in the PTX of our kernels.

ggml launches kernels with programmatic dependent launch on sm_90: a kernel may start before the one
before it has finished, and waits (``griddepcontrol.wait``) before reading what that one wrote. Loads
through the read-only path (``__ldg``, PTX ``ld.global.nc``, which nvcc may also emit for
``const __restrict__`` pointers) are outside the memory model that wait orders and can see stale data,
so our kernels must not contain any. ``nc_load_kernels`` lists the kernels of a PTX file that do.
``kernels_outside_pdl`` lists the kernels that do not take part in that launch: no wait, or no early release
of the kernel after them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from .compilecheck import NVCC_FLAGS
from .errors import FusekitError

NC_LOAD = re.compile(r"\bld\.global(?:\.[\w:]+)*?\.nc\b")
PDL_WAIT = re.compile(r"\bgriddepcontrol\.wait\b")
PDL_RELEASE = re.compile(r"\bgriddepcontrol\.launch_dependents\b")
_BRACE = re.compile(r"[{}]")
_CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([\w$.]+)")
_HEADER = re.compile(
    r"^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)*\.(entry|func)[ \t]+(?:\([^)]*\)[ \t]*)?([\w$.]+)", re.M
)


def compile_ptx(nvcc: Path, source: Path, includes: list[Path], out: Path, arch: str = "90") -> str:
    """``nvcc -ptx`` of one unit for sm_ARCH with ggml's CUDA flags; the PTX text (FusekitError on failure)."""
    cmd = [str(nvcc), "-ptx", f"-arch=sm_{arch}", *NVCC_FLAGS, *[f"-I{p}" for p in includes], "-o", str(out)]
    done = subprocess.run([*cmd, str(source)], capture_output=True, text=True)
    if done.returncode != 0:
        raise FusekitError(f"nvcc -ptx {source.name} failed:\n{(done.stderr + done.stdout).strip()[-3000:]}")
    return out.read_text()


def _body(ptx: str, start: int) -> str:
    """The ``{ ... }`` block that follows ``start`` (braces matched); empty for a declaration."""
    opened = ptx.find("{", start)
    semicolon = ptx.find(";", start)
    if opened < 0 or 0 <= semicolon < opened:
        return ""
    depth = 0
    for brace in _BRACE.finditer(ptx, opened):
        depth += 1 if brace.group() == "{" else -1
        if depth == 0:
            return ptx[opened : brace.end()]
    return ptx[opened:]


def ptx_functions(ptx: str) -> dict[str, tuple[str, str]]:
    """Each function a PTX file defines: name -> (``entry`` or ``func``, body)."""
    found: dict[str, tuple[str, str]] = {}
    for match in _HEADER.finditer(ptx):
        body = _body(ptx, match.end())
        if body:
            found[match.group(2)] = (match.group(1), body)
    return found


def nc_load_kernels(ptx: str) -> list[str]:
    """Kernels (``.entry``) whose body, or a ``.func`` they call, holds an ``ld.global.nc`` load; sorted."""
    functions = ptx_functions(ptx)
    calls = {name: [f for f in _CALL.findall(body) if f in functions] for name, (_, body) in functions.items()}

    def loads_nc(name: str, seen: set[str]) -> bool:
        seen.add(name)
        if NC_LOAD.search(functions[name][1]):
            return True
        return any(loads_nc(callee, seen) for callee in calls[name] if callee not in seen)

    return sorted(name for name, (kind, _) in functions.items() if kind == "entry" and loads_nc(name, set()))


def kernels_outside_pdl(ptx: str) -> list[str]:
    """Kernels (``.entry``) whose own body lacks ``griddepcontrol.wait`` (ggml_cuda_pdl_sync) or
    ``griddepcontrol.launch_dependents`` (ggml_cuda_pdl_lc); sorted. Both are inlined where ggml calls them."""
    return sorted(
        name
        for name, (kind, body) in ptx_functions(ptx).items()
        if kind == "entry" and not (PDL_WAIT.search(body) and PDL_RELEASE.search(body))
    )


def demangle(names: list[str]) -> list[str]:
    """C++ names for mangled ones, through ``cu++filt`` or ``c++filt`` when installed (else unchanged)."""
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if not tool or not names:
        return list(names)
    done = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True)
    lines = done.stdout.splitlines()
    return lines if done.returncode == 0 and len(lines) == len(names) else list(names)
