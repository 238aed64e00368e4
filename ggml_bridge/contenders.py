"""Which builds race: stock and the current variant of a workspace, or build folders named on the command line.

The workspace modules (and their gitpython) are imported only for workspace mode, so a GPU host
without gitpython can race build folders with ``python -m ggml_bridge mulmat --lib-dir ...``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from fusekit.errors import FusekitError

from .bridge import REQUIRED_LIBS
from .sweep import Contender


def has_libs(bin_dir: Path) -> bool:
    return all((bin_dir / name).is_file() for name in REQUIRED_LIBS)


def build_kind(device: str) -> str:
    """The fusekit build backend a ggml device needs: ``cuda`` for CUDA<n>, else ``cpu``."""
    return "cuda" if device.upper().startswith("CUDA") else "cpu"


def auto_device(lib_dirs: list[Path]) -> str:
    """CUDA0 when the builds carry the CUDA backend (or, with no builds named, a GPU is visible); else CPU."""
    if lib_dirs:
        return "CUDA0" if all((d / "libggml-cuda.so").is_file() for d in lib_dirs) else "CPU"
    return "CUDA0" if shutil.which("nvidia-smi") and _gpu_visible() else "CPU"


def _gpu_visible() -> bool:
    done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return done.returncode == 0 and "GPU" in done.stdout


def from_lib_dirs(specs: list[str]) -> list[Contender]:
    """``LABEL=DIR`` or ``DIR`` (labelled by its variant tree when it is ``trees/<label>/build-*/bin``)."""
    out = []
    for spec in specs:
        label, _, path = spec.rpartition("=")
        bin_dir = Path(path).expanduser().resolve()
        if bin_dir.name != "bin" and (bin_dir / "bin").is_dir():
            bin_dir = bin_dir / "bin"
        if not has_libs(bin_dir):
            raise FusekitError(f"no ggml shared libraries in {bin_dir}; build it first (fusekit build)")
        if not label:
            label = bin_dir.parent.parent.name if bin_dir.parent.name.startswith("build") else bin_dir.parent.name
        out.append(Contender(label, bin_dir, _stamp(bin_dir.parent)))
    labels = [c.label for c in out]
    if len(set(labels)) != len(labels):
        raise FusekitError(f"two builds share a label ({', '.join(labels)}); name them with LABEL=DIR")
    return out


CONTROL_SUFFIX = " (A/A control)"


def with_control(contenders: list[Contender]) -> list[Contender]:
    """The contenders and, last, the first of them again in its own worker: an A/A control. Its difference from the
    first is the race's noise between processes (each loads its own library and weight copies)."""
    first = contenders[0]
    record = {**first.record, "control_of": first.label}
    return [*contenders, Contender(first.label + CONTROL_SUFFIX, first.lib_dir, record)]


STAMP = "fusekit-build.json"  # fusekit.build.STAMP (checked in the tests)


def _stamp(build_dir: Path) -> dict:
    stamp = build_dir / STAMP
    return {"build": json.loads(stamp.read_text())} if stamp.is_file() else {}


def from_workspace(home: Path, device: str, cuda_arch: str | None, build: Callable | None) -> list[Contender]:
    """Stock and (when it is not stock) the current variant; ``build(ws, variant, options)`` builds a missing
    one, or is None, and then a missing build is an error."""
    from fusekit.build import BuildOptions, detect_cuda_arch
    from fusekit.registry import Registry
    from fusekit.variants import current_entries, materialize
    from fusekit.workspace import Workspace

    ws = Workspace(home)
    kind = build_kind(device)
    options = BuildOptions(kind, (cuda_arch or detect_cuda_arch()) if kind == "cuda" else None)
    with ws.lock():
        variants = [materialize(ws, [])]
        current = materialize(ws, current_entries(ws, Registry.load()))
        if not current.is_stock:
            variants.append(current)
        out = []
        for v in variants:
            build_dir = v.tree / f"build-{options.key}"
            if not has_libs(build_dir / "bin"):
                if build is None:
                    hint = " --backend cuda" if kind == "cuda" else ""
                    raise FusekitError(
                        f"variant {v.label} is not built for {options.key} (no ggml libraries in {build_dir / 'bin'}); "
                        f"run 'fusekit build{hint}' or add --build"
                    )
                build_dir = build(ws, v, options).build_dir
            out.append(Contender(v.label, build_dir / "bin", {"variant": v.describe(), **_stamp(build_dir)}))
    return out
