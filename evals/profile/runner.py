"""Find nsys, record a trace with every graph node traced, import it (with the QdstrmImporter fallback)
and export it to SQLite.

On the H200 host ``nsys profile`` records a ``.qdstrm`` but its own import step fails because the
importer cannot load ``libdw.so.1`` (shared/gpu-host/H200.md); running ``QdstrmImporter`` directly with
``LD_LIBRARY_PATH`` pointing at a folder holding ``libdw.so.1`` and ``libelf.so.1`` works.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

from fusekit.errors import FusekitError

LIBDW_ENV = "FUSEKIT_NSYS_LIBS"
NSYS_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems/*/target-linux-x64/nsys",
    "/opt/nvidia/nsight-systems-cli/*/bin/nsys",
    "/opt/nvidia/nsight-systems-cli/*/target-linux-x64/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
    "/usr/local/cuda/bin/nsys",
    "/usr/local/cuda-*/bin/nsys",
    "/usr/lib/nsight-systems/bin/nsys",
)
IMPORTER_FIX = (
    f"QdstrmImporter needs libdw.so.1 and libelf.so.1: unpack Debian's libdw1 and libelf1 packages "
    f"(apt-get download libdw1 libelf1; dpkg -x each into one folder) and set {LIBDW_ENV} to the folder "
    f"that holds the .so files (shared/gpu-host/H200.md, section Nsight Systems)"
)


def find_nsys(explicit: str | None = None) -> Path | None:
    """``--nsys PATH``, else ``nsys`` on PATH, else the newest one in the usual install folders."""
    if explicit:
        path = Path(explicit)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise FusekitError(f"--nsys {explicit} is not an executable file")
        return path
    on_path = shutil.which("nsys")
    if on_path:
        return Path(on_path)
    found = sorted({p for pattern in NSYS_GLOBS for p in glob.glob(pattern) if os.access(p, os.X_OK)})
    return Path(found[-1]) if found else None


def find_importer(nsys: Path) -> Path | None:
    """The ``QdstrmImporter`` shipped next to ``nsys`` (in a sibling host folder)."""
    root = nsys.resolve().parent.parent
    candidates = sorted(root.glob("*/QdstrmImporter")) + sorted(root.glob("*/*/QdstrmImporter"))
    return candidates[0] if candidates else None


def have_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    done = subprocess.run([smi, "-L"], capture_output=True, text=True)
    return done.returncode == 0 and "GPU" in done.stdout


def _run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env)


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def import_qdstrm(nsys: Path, qdstrm: Path) -> Path:
    """Run QdstrmImporter on ``qdstrm`` (with ``$FUSEKIT_NSYS_LIBS`` on the library path) -> ``.nsys-rep``."""
    importer = find_importer(nsys)
    if importer is None:
        raise FusekitError(f"nsys did not import {qdstrm} and no QdstrmImporter was found near {nsys}", IMPORTER_FIX)
    env = dict(os.environ)
    libdw = os.environ.get(LIBDW_ENV)
    if libdw:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [libdw, env.get("LD_LIBRARY_PATH", "")]))
    done = _run([str(importer), "-i", str(qdstrm)], env)
    rep = qdstrm.with_suffix(".nsys-rep")
    if done.returncode != 0 or not rep.is_file():
        detail = _tail(done.stderr or done.stdout) + "\n" + IMPORTER_FIX
        raise FusekitError(f"QdstrmImporter could not import {qdstrm} (exit {done.returncode})", detail)
    return rep


def record(nsys: Path, base: Path, argv: list[str]) -> Path:
    """``nsys profile -t cuda --cuda-graph-trace=node -o BASE ARGV`` -> the ``.nsys-rep`` (imported if needed)."""
    base.parent.mkdir(parents=True, exist_ok=True)
    command = [str(nsys), "profile", "-t", "cuda", "--cuda-graph-trace=node", "--force-overwrite=true", "-o", str(base)]
    done = _run(command + argv)
    rep = base.with_suffix(".nsys-rep")
    if rep.is_file():
        return rep
    qdstrm = base.with_suffix(".qdstrm")
    if qdstrm.is_file():
        return import_qdstrm(nsys, qdstrm)
    raise FusekitError(f"nsys profile wrote no trace (exit {done.returncode})", _tail(done.stderr or done.stdout))


def export_sqlite(nsys: Path, rep: Path) -> Path:
    """``nsys export --type sqlite`` next to the report."""
    out = rep.with_suffix(".sqlite")
    done = _run([str(nsys), "export", "--type", "sqlite", "--force-overwrite=true", "-o", str(out), str(rep)])
    if done.returncode != 0 or not out.is_file():
        raise FusekitError(f"nsys export failed for {rep} (exit {done.returncode})", _tail(done.stderr or done.stdout))
    return out


def trace(nsys: Path, base: Path, argv: list[str]) -> Path:
    """Record ``argv`` and export it; returns the SQLite file."""
    return export_sqlite(nsys, record(nsys, base, argv))
