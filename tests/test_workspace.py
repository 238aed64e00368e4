"""Real init from each kind of source, verified against the pin; bad sources leave nothing behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from fusekit.cli import main
from fusekit.errors import FusekitError
from fusekit.gitutil import run_git
from fusekit.pin import load_pin
from fusekit.source import SLIM_MANIFEST
from fusekit.workspace import Workspace


def quiet(_: str) -> None:
    pass


def assert_nothing_left(home: Path) -> None:
    leftovers = sorted(p.name for p in home.iterdir()) if home.exists() else []
    assert set(leftovers) <= {"cache", ".lock"}, leftovers


def test_sdist_init_is_verified_and_idempotent(pinned_home: Path) -> None:
    ws = Workspace(pinned_home)
    pin = load_pin()
    assert run_git(ws.repo, "rev-parse", "stock") == pin.commit
    assert run_git(ws.tree("stock"), "rev-parse", "HEAD^{tree}") == pin.tree
    state = ws.load_state()
    assert "sdist sha256" in state["verified"]
    assert "nothing to do" in ws.init(None, quiet)


def test_init_from_a_git_directory(pinned_home: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    message = Workspace(home).init(str(Workspace(pinned_home).tree("stock")), quiet)
    assert "commit 0c1e57098b" in message
    assert run_git(home / "repo.git", "rev-parse", "stock") == load_pin().commit


@pytest.fixture(scope="module")
def exported_tree(pinned_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pinned tree as plain files (no git history), like an unpacked release tarball."""
    folder = tmp_path_factory.mktemp("export")
    tar = folder / "llama.cpp.tar"
    run_git(Workspace(pinned_home).repo, "archive", "--format=tar", "--prefix=llama.cpp/", "-o", str(tar), "stock")
    return tar


def test_init_from_a_plain_tarball_checks_the_tree(exported_tree: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    message = Workspace(home).init(str(exported_tree), quiet)
    assert "files hash to the pinned tree" in message
    # The imported commit stands in for the pin, and its tree is the pinned tree.
    assert run_git(home / "repo.git", "rev-parse", "stock^{tree}") == load_pin().tree


def _unpack(tar: Path, into: Path) -> Path:
    into.mkdir()
    subprocess.run(["tar", "-xf", str(tar), "-C", str(into)], check=True)
    return into / "llama.cpp"


def test_a_tampered_tree_is_refused_and_nothing_is_left(exported_tree: Path, tmp_path: Path) -> None:
    tree = _unpack(exported_tree, tmp_path / "src")
    target = tree / "ggml" / "src" / "ggml.c"
    target.write_text(target.read_text() + "\n// tampered\n")
    home = tmp_path / "home"
    with pytest.raises(FusekitError, match=r"is not llama\.cpp 0c1e57098b"):
        Workspace(home).init(str(tree), quiet)
    assert_nothing_left(home)


def _slim(tree: Path, repo: Path) -> dict[str, list[str]]:
    """Remove the pin's omitted paths and write the manifest with their git ids."""
    omitted = {}
    for path in load_pin().slim_omit:
        line = run_git(repo, "ls-tree", "stock", path)
        meta, _ = line.split("\t", 1)
        omitted[path] = meta.split()
        shutil.rmtree(tree / path)
    (tree / SLIM_MANIFEST).write_text(json.dumps({"commit": load_pin().commit, "omitted": omitted}))
    return omitted


def test_a_slim_tree_verifies_through_its_manifest(exported_tree: Path, pinned_home: Path, tmp_path: Path) -> None:
    tree = _unpack(exported_tree, tmp_path / "src")
    _slim(tree, Workspace(pinned_home).repo)
    home = tmp_path / "home"
    message = Workspace(home).init(str(tree), quiet)
    assert "slim tree" in message
    assert not (home / "trees" / "stock" / "models").exists()


def test_a_slim_tree_with_a_wrong_manifest_is_refused(exported_tree: Path, pinned_home: Path, tmp_path: Path) -> None:
    tree = _unpack(exported_tree, tmp_path / "src")
    omitted = _slim(tree, Workspace(pinned_home).repo)
    omitted["docs"][2] = "0" * 40
    (tree / SLIM_MANIFEST).write_text(json.dumps({"commit": load_pin().commit, "omitted": omitted}))
    home = tmp_path / "home"
    with pytest.raises(FusekitError, match="does not match the pin"):
        Workspace(home).init(str(tree), quiet)
    assert_nothing_left(home)


def test_no_network_and_no_cache_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "3")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_NO_INDEX", "0")
    home = tmp_path / "home"
    with pytest.raises(FusekitError, match="no cached copy exists"):
        Workspace(home).init(None, quiet)
    assert_nothing_left(home)


def test_bad_sources(tmp_path: Path) -> None:
    with pytest.raises(FusekitError, match="neither a directory, a tarball nor a git URL"):
        Workspace(tmp_path / "h1").init(str(tmp_path / "nowhere"), quiet)
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(os.urandom(1000))
    with pytest.raises(FusekitError, match="not a tarball"):
        Workspace(tmp_path / "h2").init(str(junk), quiet)
    assert_nothing_left(tmp_path / "h2")


def test_a_held_lock_is_one_clear_error_or_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second command fails at once by default; with FUSEKIT_LOCK_WAIT it waits for the first to finish."""
    ws = Workspace(tmp_path / "home")
    release = threading.Event()
    held = threading.Event()

    def first_command() -> None:
        with ws.lock():
            held.set()
            release.wait(10)

    thread = threading.Thread(target=first_command)
    thread.start()
    held.wait(10)
    try:
        with pytest.raises(FusekitError, match="another fusekit command is working"), ws.lock():
            pass
        monkeypatch.setenv("FUSEKIT_LOCK_WAIT", "20")
        threading.Timer(0.5, release.set).start()
        with ws.lock():
            assert release.is_set()
    finally:
        release.set()
        thread.join()


def small_home(home: Path) -> None:
    """A home with the layout fusekit keeps (a bare repository, two linked work trees, state.json), on a tiny
    repository instead of llama.cpp."""
    source = home.parent / f"{home.name}-source"
    source.mkdir(parents=True)
    (source / "a.txt").write_text("a\n")
    run_git(source, "init", "-q")
    run_git(source, "add", "a.txt")
    run_git(source, "commit", "-qm", "a")
    run_git(home.parent, "clone", "-q", "--bare", str(source), str(home / "repo.git"))
    run_git(home / "repo.git", "branch", "-f", "stock", "HEAD")
    run_git(home / "repo.git", "branch", "-f", "variant/fusion-1", "HEAD")
    run_git(home / "repo.git", "worktree", "add", "-q", str(home / "trees" / "stock"), "stock")
    run_git(home / "repo.git", "worktree", "add", "-q", str(home / "trees" / "fusion-1"), "variant/fusion-1")
    head = run_git(home / "repo.git", "rev-parse", "stock")
    stock = {"entries": [], "stack_sha256": "", "head": head}
    state = {"version": 1, "pin": load_pin().commit, "source": "a test repository", "verified": "no"}
    state |= {"current": "stock", "stock_commit": head, "variants": {"stock": stock}}
    (home / "state.json").write_text(json.dumps(state))


def git_dir_of(tree: Path) -> Path:
    return Path(run_git(tree, "rev-parse", "--absolute-git-dir")).resolve()


@pytest.mark.parametrize("move", [False, True], ids=["copied", "moved"])
def test_a_copied_or_moved_home_links_its_trees_to_its_own_repository(
    tmp_path: Path, move: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "first" / "home", tmp_path / "second" / "home"
    small_home(first)
    second.parent.mkdir()
    (shutil.move if move else shutil.copytree)(str(first), str(second))

    Workspace(second).load_state()

    assert "linked its work trees fusion-1, stock" in capsys.readouterr().err
    for label in ("stock", "fusion-1"):
        assert git_dir_of(second / "trees" / label) == (second / "repo.git" / "worktrees" / label).resolve()
        run_git(second / "trees" / label, "status", "--porcelain")  # git works in the tree
        if not move:  # the first home keeps its own links
            assert git_dir_of(first / "trees" / label) == (first / "repo.git" / "worktrees" / label).resolve()
    listed = run_git(second / "repo.git", "worktree", "list", "--porcelain")  # the repository names them back
    trees = {line.split(" ", 1)[1] for line in listed.splitlines() if line.startswith("worktree ") and "trees" in line}
    assert trees == {str((second / "trees" / label).resolve()) for label in ("stock", "fusion-1")}
    run_git(second / "trees" / "fusion-1", "commit", "-q", "--allow-empty", "-m", "only in the second home")
    if not move:
        assert "only in the second home" not in run_git(first / "repo.git", "log", "--format=%s", "variant/fusion-1")
    assert Workspace(second).relink_moved_trees() == []  # nothing left to do


def test_a_git_failure_no_caller_explains_is_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    small_home(home)
    (home / "trees" / "stock" / ".git").write_text("gitdir: /nowhere/repo.git/worktrees/gone\n")  # a broken link
    result = CliRunner().invoke(main, ["--home", str(home), "status"], catch_exceptions=False)
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "fusekit: error: 'git status --porcelain --untracked-files=all' failed: "
        "fatal: not a git repository: /nowhere/repo.git/worktrees/gone"
    ]
