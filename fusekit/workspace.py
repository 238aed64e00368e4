"""The workspace: the managed llama.cpp repository, one work tree per variant, builds and caches.

Layout under the home folder (``./.fusekit`` by default)::

    repo.git/          bare repository; branch ``stock`` at the pinned commit, ``variant/<label>`` per variant
    trees/<label>/     a git work tree per variant (``trees/stock`` too); edit a variant in place here;
                       its build folders ``build-<backend...>/`` live inside it ('fusekit drop' removes both)
    cache/             downloads (sdist, models), KL bases
    state.json         what was initialised from where, the current variant, the known variants
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .console import note
from .errors import FusekitError
from .gitutil import run_git
from .pin import load_pin
from .source import Obtained, Progress, obtain
from .stack import STOCK

STATE_VERSION = 1
STOCK_BRANCH = "stock"
TREE_BYTES = 200_000_000  # a work tree of the pinned llama.cpp without builds takes about 176 MB


def variant_branch(label: str) -> str:
    return STOCK_BRANCH if label == STOCK else f"variant/{label}"


class Workspace:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.repo = home / "repo.git"
        self.trees = home / "trees"
        self.cache = home / "cache"
        self.state_file = home / "state.json"

    # ----- state -------------------------------------------------------------------------
    @property
    def initialised(self) -> bool:
        return self.state_file.is_file() and self.repo.is_dir()

    def require_init(self) -> None:
        if not self.initialised:
            raise FusekitError(f"no llama.cpp checkout in {self.home}; run 'fusekit init' first")

    def load_state(self) -> dict[str, Any]:
        self.require_init()
        state = json.loads(self.state_file.read_text())
        if state.get("version") != STATE_VERSION:
            raise FusekitError(
                f"{self.state_file} has state version {state.get('version')}, this fusekit reads {STATE_VERSION}; "
                f"remove {self.home} and run 'fusekit init' again"
            )
        relinked = self.relink_moved_trees()
        if relinked:
            note(f"{self.home} was moved or copied: linked its work trees {', '.join(relinked)} to {self.repo}")
        return state

    def relink_moved_trees(self) -> list[str]:
        """Point work trees that still name another home's repository (a copied or moved home) back at this one.

        Git records each link twice, with absolute paths: ``trees/<label>/.git`` names the repository's
        ``worktrees/<name>`` folder, whose ``gitdir`` file names the tree back. ``git worktree repair`` follows the
        stale link and would rewrite the other home's files, so both files are written here, inside this home only.
        Returns the labels of the trees relinked.
        """
        relinked = []
        admin_root = self.repo.resolve() / "worktrees"
        for tree in sorted(self.trees.iterdir()) if self.trees.is_dir() else []:
            link = tree / ".git"
            if not link.is_file():
                continue
            text = link.read_text().strip()
            if not text.startswith("gitdir: "):
                continue
            named = Path(text[len("gitdir: ") :])
            admin = admin_root / named.name
            if named.resolve() == admin or not admin.is_dir():
                continue  # linked here already, or not one of this repository's trees
            link.write_text(f"gitdir: {admin}\n")
            (admin / "gitdir").write_text(f"{link.resolve()}\n")
            relinked.append(tree.name)
        return relinked

    def save_state(self, state: dict[str, Any]) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.state_file)

    def tree(self, label: str) -> Path:
        return self.trees / label

    def require_room_for_trees(self, count: int) -> None:
        """Refuse, before anything is written, when the disk cannot take ``count`` more work trees."""
        free = shutil.disk_usage(self.home).free
        needed = count * TREE_BYTES
        if free < needed:
            raise FusekitError(
                f"only {free / 1e6:.0f} MB free under {self.home}, and this needs about {needed / 1e6:.0f} MB "
                f"({count} llama.cpp work tree(s)); 'fusekit drop --all' deletes the trees of other variants"
            )

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Only one fusekit process changes a workspace at a time."""
        self.home.mkdir(parents=True, exist_ok=True)
        wait = float(os.environ.get("FUSEKIT_LOCK_WAIT", "0") or 0)
        deadline = time.monotonic() + wait
        with open(self.home / ".lock", "w") as handle:
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise FusekitError(
                            f"another fusekit command is working in {self.home}; wait for it "
                            "(or set FUSEKIT_LOCK_WAIT=SECONDS to wait here)"
                        ) from None
                    time.sleep(0.5)
            yield

    # ----- init --------------------------------------------------------------------------
    def init(self, source: str | None, progress: Progress) -> str:
        """Create the managed repository from a verified source; a second call is a no-op."""
        pin = load_pin()
        if self.initialised:
            state = self.load_state()
            if state["pin"] != pin.commit:
                raise FusekitError(
                    f"{self.home} holds llama.cpp {state['pin'][:10]}, the pin is {pin.short}; "
                    f"remove {self.home} and run 'fusekit init' again"
                )
            return f"already initialised: llama.cpp {pin.short} from {state['source']}; nothing to do"
        self.home.mkdir(parents=True, exist_ok=True)
        self.cache.mkdir(exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="init-", dir=self.home))
        try:
            obtained = obtain(source, self.cache, scratch, progress)
            staged_repo = scratch / "repo.git"
            progress("creating the managed repository")
            stock_commit = _make_repository(obtained, staged_repo, pin.commit)
            os.replace(staged_repo, self.repo)
            self.trees.mkdir(exist_ok=True)
            run_git(self.repo, "worktree", "add", "-q", str(self.tree(STOCK)), STOCK_BRANCH)
            state = {
                "version": STATE_VERSION,
                "pin": pin.commit,
                "source": obtained.description,
                "verified": obtained.verified,
                "stock_commit": stock_commit,
                "current": STOCK,
                "variants": {STOCK: {"entries": [], "stack_sha256": "", "head": stock_commit}},
            }
            self.save_state(state)
        except BaseException:
            shutil.rmtree(self.repo, ignore_errors=True)
            shutil.rmtree(self.trees, ignore_errors=True)
            raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return f"initialised llama.cpp {pin.short} from {obtained.description} (verified: {obtained.verified})"


def _make_repository(obtained: Obtained, target: Path, commit: str) -> str:
    """A bare repository with branch ``stock``; return the stock commit id."""
    if obtained.kind == "git":
        run_git(target.parent, "clone", "-q", "--bare", str(obtained.path), str(target))
        run_git(target, "branch", "-f", STOCK_BRANCH, commit)
        for branch in run_git(target, "for-each-ref", "--format=%(refname:short)", "refs/heads").split():
            if branch != STOCK_BRANCH:
                run_git(target, "branch", "-D", branch)
        run_git(target, "symbolic-ref", "HEAD", f"refs/heads/{STOCK_BRANCH}")
        return commit
    # Plain files: one commit whose message names the pinned commit it stands for.
    run_git(target.parent, "init", "-q", "--bare", str(target))
    index = target / "fusekit-import.index"
    env = {"GIT_INDEX_FILE": str(index), "GIT_WORK_TREE": str(obtained.path)}
    run_git(target, "add", "-A", "-f", ".", env=env)
    run_git(target, "rm", "-q", "--cached", "--ignore-unmatch", ".fusekit-slim.json", env=env)
    tree = run_git(target, "write-tree", env=env)
    index.unlink()
    message = f"llama.cpp {commit}\n\nImported by fusekit from {obtained.description}.\nVerified: {obtained.verified}\n"
    new_commit = run_git(target, "commit-tree", tree, "-m", message)
    run_git(target, "update-ref", f"refs/heads/{STOCK_BRANCH}", new_commit)
    run_git(target, "symbolic-ref", "HEAD", f"refs/heads/{STOCK_BRANCH}")
    return new_commit
