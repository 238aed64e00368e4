"""``fusekit bundle``: one folder that sets fusekit up on a GPU host without network.

It holds a slim source tarball of the stock tree (``[slim] omit`` paths left out, their git ids in
``.fusekit-slim.json`` so ``fusekit init --source`` still proves the tree is the pin), wheels of
fusekit and of the dependencies a plain CUDA Python image lacks, and ``run.sh`` that installs
them into a private folder.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import click

from .errors import FusekitError
from .gitutil import run_git
from .paths import PACKAGE_DIR, resolve_home
from .pin import load_pin
from .source import SLIM_MANIFEST
from .workspace import STOCK_BRANCH, Workspace

# Missing on the GPU image (see shared/gpu-host/H200.md); versions fixed so a bundle is reproducible.
DEPENDENCY_WHEELS = ("gitpython==3.1.45", "gitdb==4.0.12", "smmap==5.0.2", "cffi==2.0.0", "pycparser==2.23")
# Not fusekit's: issue #10's reference for fusion-4, flash-linear-attention's chunked kernel, which the session's
# kernels step times on the host's torch and triton (scripts/fla_gdn_timing.py). Pure Python, about 1.2 MB.
REFERENCE_WHEELS = ("fla-core==0.6.0", "einops==0.8.2")
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")
PIP_PLATFORM = ("--python-version", "3.12", "--implementation", "cp", "--abi", "cp312")
PIP_PLATFORM += tuple(arg for p in PLATFORMS for arg in ("--platform", p))
SIZE_LIMIT = 60 * 1000 * 1000
TARBALL_NAME = "llama.cpp-slim.tar.gz"  # the layout scripts/device_setup.sh reads: whl/, debs/, this tarball
SOURCE_ROOT = PACKAGE_DIR.parent
# Debian packages the GPU host scripts unpack from debs/: nsys' importer needs libdw1 and libelf1; every
# variant build after stock needs ccache (with libhiredis0.14), else each compiles from scratch (~300 s on
# 16 cores, several variants at once far longer: the session-8 device run lost its builds to this).
HOST_DEBS = ("libdw1", "libelf1", "ccache", "libhiredis0.14")

RUN_SH = """#!/usr/bin/env bash
# Install fusekit and the wheels beside it into a private folder (no network needed), then print
# the exports that put it first:   eval "$(bash run.sh)"
# Then: fusekit init --source "$here/{tarball}"
# Settings: PYTHON (default python3, the wheels are for CPython 3.12), FUSEKIT_SITE (default ./site).
set -euo pipefail
here="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
python="${{PYTHON:-python3}}"
target="${{FUSEKIT_SITE:-$here/site}}"
for wheel in "$here"/whl/*.whl; do
  if ! "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \\
      --target "$target" "$wheel" >&2; then
    case "$(basename "$wheel")" in
      fusekit-*) echo "run.sh: could not install $(basename "$wheel")" >&2; exit 1 ;;
      *) echo "run.sh: skipped $(basename "$wheel") (not for this Python)" >&2 ;;
    esac
  fi
done
echo "export PYTHONPATH=\\"$target${{PYTHONPATH:+:$PYTHONPATH}}\\""
echo "export PATH=\\"$target/bin:$PATH\\""
echo "# then: fusekit init --source $here/{tarball}"
"""


def omitted_entries(repo: Path, commit: str, paths: list[str]) -> dict[str, list[str]]:
    """path -> [mode, type, id] of each omitted path in ``commit`` (paths absent from it are skipped)."""
    out: dict[str, list[str]] = {}
    for path in paths:
        line = run_git(repo, "ls-tree", commit, "--", path.rstrip("/"))
        if line:
            meta, name = line.split("\t", 1)
            mode, kind, oid = meta.split()
            out[name] = [mode, kind, oid]
    return out


def write_slim_tarball(ws: Workspace, out: Path) -> Path:
    """``out`` = the stock tree without the ``[slim] omit`` paths, plus the manifest that verifies it."""
    pin = load_pin()
    ws.require_init()
    commit = run_git(ws.repo, "rev-parse", STOCK_BRANCH)
    tree = run_git(ws.repo, "rev-parse", f"{commit}^{{tree}}")
    if tree != pin.tree:
        raise FusekitError(
            f"the workspace's stock tree {tree[:12]} is not the pinned tree {pin.tree[:12]} "
            "(was it made from a slim bundle?); bundle from a workspace initialised from a full source"
        )
    omit = list(pin.slim_omit)
    manifest = {"commit": pin.commit, "omitted": omitted_entries(ws.repo, commit, omit)}
    prefix = f"llama.cpp-{pin.commit[:10]}/"
    excludes = [f":(exclude){p}" for p in omit]
    with tempfile.TemporaryDirectory(prefix="fusekit-bundle-") as tmp:
        plain = Path(tmp) / "slim.tar"
        cmd = ["git", "-C", str(ws.repo), "archive", "--format=tar", f"--prefix={prefix}", "-o", str(plain), commit]
        done = subprocess.run([*cmd, "--", ".", *excludes], capture_output=True, text=True)
        if done.returncode != 0:
            raise FusekitError("git archive failed", detail=done.stderr)
        data = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
        with tarfile.open(plain, "a") as tar:
            info = tarfile.TarInfo(prefix + SLIM_MANIFEST)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
        partial = out.with_name(out.name + ".part")
        with plain.open("rb") as src, partial.open("wb") as raw, gzip.GzipFile("", "wb", 9, raw, mtime=0) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(partial, out)
    return out


def download_wheels(dest: Path, wheel_cache: Path | None) -> list[Path]:
    """Dependency and reference wheels for cp312 manylinux, from ``wheel_cache`` if it has them, else from PyPI."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", *PIP_PLATFORM]
    cmd += ["-d", str(dest)]
    if wheel_cache:
        cmd += ["--no-index", "--find-links", str(wheel_cache)]
    done = subprocess.run([*cmd, *DEPENDENCY_WHEELS, *REFERENCE_WHEELS], capture_output=True, text=True)
    if done.returncode != 0:
        raise FusekitError(
            "pip could not fetch the dependency wheels (no network? pass --wheels DIR holding them)",
            detail=done.stderr[-2000:],
        )
    return sorted(dest.glob("*.whl"))


def build_fusekit_wheel(dest: Path) -> Path:
    """A wheel of this fusekit checkout: with the installed hatchling, else in pip's build isolation."""
    if not (SOURCE_ROOT / "pyproject.toml").is_file():
        raise FusekitError(f"fusekit bundle needs a fusekit source checkout (no pyproject.toml in {SOURCE_ROOT})")
    errors = ""
    for isolation in (["--no-build-isolation"], []):
        cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, "-w", str(dest), str(SOURCE_ROOT)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        found = sorted(dest.glob("fusekit-*.whl"))
        if done.returncode == 0 and found:
            return found[-1]
        errors += done.stderr[-1000:]
    raise FusekitError("building the fusekit wheel failed (pip install hatchling, or allow pip network)", detail=errors)


def host_debs(folder: Path) -> list[Path]:
    """The .deb files of ``folder``; every package of HOST_DEBS must be among them."""
    found = sorted(folder.glob("*.deb"))
    missing = [name for name in HOST_DEBS if not any(deb.name.split("_")[0] == name for deb in found)]
    if missing:
        raise FusekitError(
            f"--debs {folder} lacks {', '.join(missing)} (get them with: apt-get download {' '.join(HOST_DEBS)})"
        )
    return found


def carry_debs(debs: Path, dest: Path) -> None:
    """Copy the checked .deb files of ``debs`` into ``dest``; ``dest`` may be ``debs`` itself (a bundle
    refreshed from its own debs/ keeps them)."""
    found = host_debs(debs)
    dest.mkdir(parents=True, exist_ok=True)
    for deb in found:
        target = dest / deb.name
        if not (target.exists() and target.samefile(deb)):
            shutil.copy2(deb, target)


def make_bundle(
    ws: Workspace, out: Path, wheel_cache: Path | None = None, debs: Path | None = None
) -> dict[str, object]:
    """Write the bundle folder; return what it holds. ``debs``: a folder of .deb files to carry
    (Debian's libdw1 and libelf1 for Nsight Systems' importer, see evals/profile/runner.py)."""
    out.mkdir(parents=True, exist_ok=True)
    tarball = out / TARBALL_NAME
    write_slim_tarball(ws, tarball)
    wheels = out / "whl"
    shutil.rmtree(wheels, ignore_errors=True)
    download_wheels(wheels, wheel_cache)
    build_fusekit_wheel(wheels)
    if debs is not None:
        carry_debs(debs, out / "debs")
    (out / "run.sh").write_text(RUN_SH.format(tarball=tarball.name))
    (out / "run.sh").chmod(0o755)
    files = sorted(p for p in out.rglob("*") if p.is_file() and "site" not in p.relative_to(out).parts)
    size = sum(p.stat().st_size for p in files)
    if size > SIZE_LIMIT:
        raise FusekitError(f"bundle {out} is {size / 1e6:.1f} MB, over the {SIZE_LIMIT / 1e6:.0f} MB limit")
    return {"folder": str(out), "bytes": size, "files": [str(p.relative_to(out)) for p in files]}


@click.command("bundle")
@click.option(
    "-o", "--output", type=click.Path(file_okay=False, path_type=Path), required=True, help="Folder to write."
)
@click.option("--wheels", "wheel_cache", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Take the dependency wheels from this folder instead of PyPI.")  # fmt: skip
@click.option("--debs", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Also carry the .deb files of this folder in debs/: libdw1, libelf1 (nsys), ccache, "
                   "libhiredis0.14 (variant builds); all four are required.")  # fmt: skip
@click.pass_context
def bundle_cmd(ctx: click.Context, output: Path, wheel_cache: Path | None, debs: Path | None) -> None:
    """Write a folder for a GPU host without network: slim source, wheels, run.sh (under 60 MB).

    The layout (whl/, debs/, llama.cpp-slim.tar.gz) is the one scripts/device_setup.sh and
    scripts/gpu_batch.sh read.
    """
    ws = Workspace(resolve_home(ctx.obj.get("home") if ctx.obj else None))
    if debs is None:
        click.echo(
            f"fusekit: no --debs: the host gets no ccache and no nsys importer ({', '.join(HOST_DEBS)})", err=True
        )
    info = make_bundle(ws, output, wheel_cache, debs)
    for name in info["files"]:  # type: ignore[union-attr]
        click.echo(f"  {name}")
    size = int(info["bytes"])  # type: ignore[call-overload]
    click.echo(f'bundle {output}: {size / 1e6:.1f} MB; on the host: eval "$(bash {output.name}/run.sh)"')
