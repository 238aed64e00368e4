"""Host CPU facts that change how llama.cpp is built here.

ggml's CPU backend, built with ``-march=native`` on a CPU that advertises AMX, runs its Q4/Q8 matrix products on
AMX tiles. Some virtual machines advertise AMX without enabling the tile state: the kernel grants the permission
ggml asks for, and the first ``ldtilecfg`` still faults (session 36's build machine, a Firecracker guest: every
llama-perplexity run of SmolLM2 died in ``ggml_backend_amx_mul_mat``). fusekit measures CUDA fusions, and the CPU
backend is its reference and its CI's runner, so builds keep ggml off AMX wherever the CPU advertises it.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess
from pathlib import Path

AMX_OFF = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The feature flags of the first CPU in /proc/cpuinfo (empty where there is none)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


def compiler_accepts(flags: str, compiler: str) -> bool:
    """Whether ``compiler`` compiles an empty C++ unit with ``flags`` (an older GCC does not know -mno-amx-*)."""
    path = shutil.which(compiler)
    if path is None:
        return False
    done = subprocess.run(
        [path, *flags.split(), "-x", "c++", "-c", os.devnull, "-o", os.devnull], capture_output=True, text=True
    )
    return done.returncode == 0


@functools.cache
def isa_defines() -> tuple[str, ...]:
    """CMake defines for this host's CPU: AMX off where the CPU advertises it and the compiler can say so."""
    if platform.machine() not in ("x86_64", "AMD64") or "amx_tile" not in cpu_flags():
        return ()
    if not compiler_accepts(AMX_OFF, os.environ.get("CXX", "c++")):
        return ()
    return (f"CMAKE_C_FLAGS={AMX_OFF}", f"CMAKE_CXX_FLAGS={AMX_OFF}")
