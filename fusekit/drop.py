"""Dropping variants: a variant's work tree (with its build folders), its branch and its record go.

Every variant keeps a full llama.cpp work tree (about 180 MB, more with builds), so a workspace that
tried many stacks grows by gigabytes. Dropping one is undone by applying the same stack again: the
patch files are the source of truth, the tree is only their result.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .errors import FusekitError
from .gitutil import run_git
from .stack import STOCK
from .variants import dirty_files
from .workspace import Workspace, variant_branch


@dataclass(frozen=True)
class Dropped:
    label: str
    tree: Path
    bytes_freed: int

    def describe(self) -> dict[str, object]:
        return {"variant": self.label, "tree": str(self.tree), "bytes_freed": self.bytes_freed}


def folder_bytes(folder: Path) -> int:
    """Bytes of the regular files under ``folder`` (links not followed); 0 when it does not exist."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                total += os.path.getsize(path)
    return total


def droppable(ws: Workspace) -> list[str]:
    """Every variant that ``--all`` drops: all but stock and the current one."""
    state = ws.load_state()
    return sorted(label for label in state["variants"] if label not in (STOCK, state["current"]))


def check_droppable(ws: Workspace, labels: list[str], force: bool) -> None:
    """Refuse the whole request (nothing dropped) if any label cannot be dropped."""
    state = ws.load_state()
    for label in labels:
        if label == STOCK:
            raise FusekitError("stock cannot be dropped: every variant is built on it")
        if label not in state["variants"]:
            known = len(state["variants"])
            raise FusekitError(f"no variant {label!r} in {ws.home} ({known} known; 'fusekit status --json' lists them)")
        if label == state["current"]:
            raise FusekitError(f"{label} is the current variant; run 'fusekit reset' (or apply another) first")
        edits = dirty_files(ws.tree(label))
        if edits and not force:
            raise FusekitError(
                f"{label} has {len(edits)} edit(s) not yet in a patch in {ws.tree(label)} ({', '.join(edits[:3])}); "
                "run 'fusekit refresh NAME' first, or pass --force to lose them"
            )


def drop(ws: Workspace, labels: list[str], force: bool = False) -> list[Dropped]:
    """Drop each variant of ``labels`` after checking all of them; returns what went, in order.

    The tree goes first and the record last, so an interrupted drop leaves a record whose tree is
    missing, which the next ``apply`` of that stack simply makes again.
    """
    labels = list(dict.fromkeys(labels))
    check_droppable(ws, labels, force)
    dropped = []
    for label in labels:
        tree = ws.tree(label)
        size = folder_bytes(tree)
        shutil.rmtree(tree, ignore_errors=True)
        if tree.exists():
            raise FusekitError(f"could not remove {tree}; nothing else of {label} was changed")
        run_git(ws.repo, "worktree", "prune")
        branch = variant_branch(label)
        if run_git(ws.repo, "branch", "--list", branch).strip():
            run_git(ws.repo, "branch", "-D", branch)
        state = ws.load_state()
        state["variants"].pop(label, None)
        ws.save_state(state)
        dropped.append(Dropped(label, tree, size))
    return dropped
