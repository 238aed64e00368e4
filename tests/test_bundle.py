"""fusekit bundle: the slim tarball verifies against the pin (and a tampered one does not); the folder
stays under 60 MB and run.sh installs a fusekit that runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from fusekit.bundle import SIZE_LIMIT, carry_debs, host_debs, make_bundle, write_slim_tarball
from fusekit.errors import FusekitError
from fusekit.pin import load_pin
from fusekit.source import SLIM_MANIFEST
from fusekit.workspace import Workspace

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def slim(pinned_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_slim_tarball(Workspace(pinned_home), tmp_path_factory.mktemp("slim") / "slim.tar.gz")


def test_slim_tarball_leaves_out_the_omitted_paths_and_verifies(slim: Path, tmp_path: Path) -> None:
    with tarfile.open(slim) as tar:
        names = tar.getnames()
        root = names[0].split("/")[0]
        manifest = json.loads(tar.extractfile(f"{root}/{SLIM_MANIFEST}").read())  # type: ignore[union-attr]
    omit = load_pin().slim_omit
    assert not [n for n in names if n.split("/", 1)[-1].startswith(tuple(f"{path}/" for path in omit))]
    assert sorted(manifest["omitted"]) == sorted(omit)
    assert slim.stat().st_size < 20e6
    message = Workspace(tmp_path / "h").init(str(slim), lambda _: None)
    assert "slim tree" in message and "hash to the pinned tree" in message


def _repack(slim: Path, dest: Path, edit) -> Path:
    folder = dest / "x"
    with tarfile.open(slim) as tar:
        tar.extractall(folder, filter="data")
    root = next(folder.iterdir())
    edit(root)
    out = dest / "tampered.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        tar.add(root, arcname=root.name)
    return out


def test_tampered_slim_tarball_is_refused(slim: Path, tmp_path: Path) -> None:
    def edit_file(root: Path) -> None:
        path = root / "ggml" / "src" / "ggml.c"
        path.write_text(path.read_text() + "\n// changed\n")

    def edit_manifest(root: Path) -> None:
        manifest = json.loads((root / SLIM_MANIFEST).read_text())
        manifest["omitted"]["docs"][2] = "0" * 40
        (root / SLIM_MANIFEST).write_text(json.dumps(manifest))

    for name, edit in (("file", edit_file), ("manifest", edit_manifest)):
        tampered = _repack(slim, tmp_path / name, edit)
        with pytest.raises(FusekitError, match="does not match the pin"):
            Workspace(tmp_path / name / "h").init(str(tampered), lambda _: None)


def test_bundle_is_small_and_run_sh_installs_fusekit(pinned_home: Path, tmp_path: Path) -> None:
    cache = os.environ.get("FUSEKIT_WHEELS")
    try:
        info = make_bundle(Workspace(pinned_home), tmp_path / "bundle", Path(cache) if cache else None)
    except FusekitError as exc:
        if "could not fetch" in exc.message:
            pytest.skip("no network and no FUSEKIT_WHEELS folder for the dependency wheels")
        raise
    assert int(info["bytes"]) < SIZE_LIMIT  # type: ignore[call-overload]
    wheels = " ".join(info["files"])  # type: ignore[arg-type]
    for name in ("gitpython", "gitdb", "smmap", "cffi", "pycparser", "fusekit", "fla_core", "einops"):
        assert f"whl/{name}-" in wheels
    site = tmp_path / "site"
    env = {**os.environ, "FUSEKIT_SITE": str(site), "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(tmp_path / "bundle" / "run.sh")], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert f'export PYTHONPATH="{site}' in done.stdout
    check = "import fusekit, git, smmap; print(fusekit.__file__, git.__file__)"
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert where.returncode == 0 and where.stdout.count(str(site)) == 2, where.stdout + where.stderr
    helped = subprocess.run([str(site / "bin" / "fusekit"), "--help"], capture_output=True, text=True, env=env)
    assert helped.returncode == 0 and "model" in helped.stdout and "bundle" in helped.stdout


def test_host_debs_requires_ccache_and_the_nsys_libraries(tmp_path: Path) -> None:
    """A debs folder without ccache is refused with one line naming what is missing (session 8 lost its
    variant builds to a bundle without it); the full set is accepted."""
    debs = tmp_path / "debs"
    debs.mkdir()
    for name in ("libdw1_0.188-2.1_amd64.deb", "libelf1_0.188-2.1_amd64.deb"):
        (debs / name).write_bytes(b"")
    with pytest.raises(FusekitError, match=r"lacks ccache, libhiredis0\.14 \(get them with: apt-get download"):
        host_debs(debs)
    for name in ("ccache_4.8+really4.7.5-1_amd64.deb", "libhiredis0.14_0.14.1-3_amd64.deb"):
        (debs / name).write_bytes(b"")
    assert [deb.name.split("_")[0] for deb in host_debs(debs)] == sorted(
        ["libdw1", "libelf1", "ccache", "libhiredis0.14"]
    )


def test_carry_debs_copies_and_a_bundle_refreshes_from_its_own_debs(tmp_path: Path) -> None:
    """``--debs`` naming the output's own debs/ folder keeps the files (session 27's refresh crashed with
    shutil.SameFileError); another folder is copied."""
    debs = tmp_path / "debs"
    debs.mkdir()
    names = [
        "ccache_4.7.5_amd64.deb",
        "libdw1_0.188_amd64.deb",
        "libelf1_0.188_amd64.deb",
        "libhiredis0.14_0.14_amd64.deb",
    ]
    for name in names:
        (debs / name).write_bytes(name.encode())
    carry_debs(debs, debs)
    assert sorted(p.name for p in debs.iterdir()) == names and (debs / names[0]).read_bytes() == names[0].encode()
    carry_debs(debs, tmp_path / "out" / "debs")
    assert sorted(p.name for p in (tmp_path / "out" / "debs").iterdir()) == names
