"""Variants: stock plus an ordered stack of patches, one git branch and work tree each.

``materialize`` builds a variant's branch in a scratch work tree and only publishes it when
every patch applied, so a failing patch leaves the repository, the current variant and every
branch exactly as they were.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git

from .errors import FusekitError
from .gitutil import git_error_text, run_git
from .patching import apply_patch
from .registry import Registry
from .stack import (
    STOCK,
    Entry,
    canonical,
    file_sha256,
    fusion_entry,
    label_of,
    patch_description,
    stack_hash,
    user_patch_entry,
)
from .workspace import STOCK_BRANCH, Workspace, variant_branch

ENTRY_TRAILER = "Fusekit-Entry"


@dataclass(frozen=True)
class Variant:
    label: str
    entries: tuple[Entry, ...]
    stack_sha256: str
    tree: Path
    head: str

    @property
    def is_stock(self) -> bool:
        return self.label == STOCK

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.label,
            "stack_sha256": self.stack_sha256,
            "head": self.head,
            "entries": [e.describe() for e in self.entries],
        }


def _entry_record(entry: Entry) -> dict[str, Any]:
    return {
        "kind": entry.kind,
        "name": entry.name,
        "patches": [str(p) for p in entry.patches],
        "kernels": [[str(s), d] for s, d in entry.kernels],
    }


def entries_from_state(record: dict[str, Any], registry: Registry) -> list[Entry]:
    """Rebuild the entries of a stored variant from today's files (fusions by name)."""
    entries = []
    for item in record["entries"]:
        if item["kind"] == "fusion":
            entries.append(fusion_entry(registry.get(item["name"])))
        else:
            entries.append(user_patch_entry(Path(item["patches"][0])))
    return entries


def dirty_files(tree: Path) -> list[str]:
    """Paths changed in a work tree but not committed (edits not yet in a patch)."""
    if not tree.is_dir():
        return []
    out = run_git(tree, "status", "--porcelain", "--untracked-files=all")
    return [line[3:] for line in out.splitlines() if line.strip()]


def materialize(ws: Workspace, entries: list[Entry]) -> Variant:
    """Make sure the variant of ``entries`` exists with today's patch contents; return it."""
    entries = canonical(entries)
    label = label_of(entries)
    state = ws.load_state()
    if not entries:
        return Variant(STOCK, (), "", ws.tree(STOCK), state["stock_commit"])
    digest = stack_hash(entries)
    record = state["variants"].get(label)
    tree = ws.tree(label)
    if record and record["stack_sha256"] == digest and tree.is_dir():
        return Variant(label, tuple(entries), digest, tree, record["head"])
    if tree.is_dir() and dirty_files(tree):
        raise FusekitError(
            f"variant {label} has edits not yet in a patch in {tree}; "
            f"run 'fusekit refresh NAME' or 'git -C {tree} stash' before it is rebuilt"
        )
    ws.require_room_for_trees(1 if tree.is_dir() else 2)  # the scratch tree, and the variant's own if new
    head = _build_branch(ws, entries)
    branch = variant_branch(label)
    if tree.is_dir():
        run_git(tree, "reset", "-q", "--hard", head)
    else:
        run_git(ws.repo, "branch", "-f", branch, head)
        try:
            run_git(ws.repo, "worktree", "add", "-q", str(tree), branch)
        except BaseException:  # a checkout cut short (disk full, interrupt): no half tree, no branch left behind
            shutil.rmtree(tree, ignore_errors=True)
            run_git(ws.repo, "worktree", "prune")
            run_git(ws.repo, "branch", "-D", branch)
            raise
    state["variants"][label] = {
        "entries": [_entry_record(e) for e in entries],
        "stack_sha256": digest,
        "head": head,
    }
    ws.save_state(state)
    return Variant(label, tuple(entries), digest, tree, head)


def _build_branch(ws: Workspace, entries: list[Entry]) -> str:
    """Commit every entry onto stock in a scratch work tree; return the last commit id."""
    scratch = Path(tempfile.mkdtemp(prefix="apply-", dir=ws.home))
    shutil.rmtree(scratch)
    run_git(ws.repo, "worktree", "add", "-q", "--detach", str(scratch), STOCK_BRANCH)
    try:
        for entry in entries:
            _commit_entry(scratch, entry)
        return run_git(scratch, "rev-parse", "HEAD")
    finally:
        run_git(ws.repo, "worktree", "remove", "--force", str(scratch))
        shutil.rmtree(scratch, ignore_errors=True)
        run_git(ws.repo, "worktree", "prune")


def _commit_entry(tree: Path, entry: Entry) -> None:
    for source, dest in entry.kernels:
        target = tree / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        run_git(tree, "add", "--", dest)
    if entry.kernels and not entry.patches:
        _commit(tree, entry, "kernel files")
    for index, patch in enumerate(entry.patches):
        apply_patch(tree, patch)
        _commit(tree, entry, f"{patch.name} (sha256 {file_sha256(patch)[:12]})", last=index == len(entry.patches) - 1)


def _commit(tree: Path, entry: Entry, what: str, last: bool = True) -> None:
    role = "last" if last else "part"
    message = f"fusekit: {entry.name}: {what}\n\n{ENTRY_TRAILER}: {entry.name} {role}\n"
    run_git(tree, "commit", "-q", "--allow-empty", "--no-verify", "-m", message)


# ----- the commands' library functions -----------------------------------------------------
def current_entries(ws: Workspace, registry: Registry) -> list[Entry]:
    state = ws.load_state()
    return entries_from_state(state["variants"][state["current"]], registry)


def apply(ws: Workspace, specs: list[str], registry: Registry, resolve) -> Variant:
    """Add entries to the current stack and make the result the current variant."""
    new = [resolve(spec, registry) for spec in specs]
    variant = materialize(ws, current_entries(ws, registry) + new)
    state = ws.load_state()
    state["current"] = variant.label
    ws.save_state(state)
    return variant


def reset(ws: Workspace) -> None:
    state = ws.load_state()
    state["current"] = STOCK
    ws.save_state(state)


def status(ws: Workspace, registry: Registry) -> dict[str, Any]:
    """The current variant, its entries with hashes, staleness and unrefreshed edits."""
    state = ws.load_state()
    label = state["current"]
    record = state["variants"][label]
    entries = entries_from_state(record, registry)
    tree = ws.tree(label)
    return {
        "home": str(ws.home),
        "pin": state["pin"],
        "source": state["source"],
        "verified": state["verified"],
        "variant": label,
        "branch": variant_branch(label),
        "tree": str(tree),
        "entries": [e.describe() for e in entries],
        "stale": bool(entries) and record["stack_sha256"] != stack_hash(entries),
        "edits_not_in_a_patch": dirty_files(tree),
        "variants": sorted(state["variants"]),
    }


def refresh(ws: Workspace, name: str, registry: Registry) -> list[Path]:
    """Fold the edits in the current variant's tree into entry ``name``'s patch file (quilt-style).

    The edits are committed as a fixup of that entry's last commit and the stack is rebased,
    so edits that conflict with entries above it are refused and left in place. Returns the
    files written.
    """
    state = ws.load_state()
    label = state["current"]
    if label == STOCK:
        raise FusekitError("the current variant is stock; apply a fusion or patch before refreshing it")
    entries = entries_from_state(state["variants"][label], registry)
    matches = [e for e in entries if name in (e.name,) or (e.kind == "fusion" and registry.get(e.name).alias == name)]
    if not matches:
        raise FusekitError(f"{name!r} is not on the current stack ({label})")
    entry = matches[0]
    if not entry.patches:
        raise FusekitError(f"{entry.name} has no patch file to refresh (kernels only)")
    tree = ws.tree(label)
    if not dirty_files(tree):
        raise FusekitError(f"no edits in {tree} to refresh into {entry.name}")
    target = _entry_commit(tree, entry.name)
    kernel_dests = {dest for _, dest in entry.kernels}
    run_git(tree, "add", "-A")
    run_git(tree, "commit", "-q", "--no-verify", f"--fixup={target}")
    try:
        run_git(tree, "rebase", "-q", "-i", "--autosquash", STOCK_BRANCH, env={"GIT_SEQUENCE_EDITOR": ":"})
    except git.GitCommandError as exc:
        run_git(tree, "rebase", "--abort")
        run_git(tree, "reset", "-q", "--mixed", "HEAD~1")
        raise FusekitError(
            f"the edits conflict with entries above {entry.name} on the stack; nothing was changed",
            detail=git_error_text(exc),
        ) from None
    new_target = _entry_commit(tree, entry.name)
    excluded = [f":(exclude){dest}" for dest in kernel_dests]
    diff = run_git(tree, "diff", "--no-color", "--no-ext-diff", f"{new_target}~1", new_target, "--", ".", *excluded)
    written: list[Path] = []
    patch_file = entry.patches[-1]  # an entry's earlier patch files keep their contents
    patch_file.write_text(patch_description(patch_file.read_text()) + diff + "\n")
    written.append(patch_file)
    for source, dest in entry.kernels:
        shutil.copyfile(tree / dest, source)
        written.append(source)
    head = run_git(tree, "rev-parse", "HEAD")
    new_entries = entries_from_state(state["variants"][label], registry)
    state["variants"][label].update(head=head, stack_sha256=stack_hash(new_entries))
    ws.save_state(state)
    return written


def _entry_commit(tree: Path, name: str) -> str:
    found = run_git(tree, "log", "--format=%H", f"--grep=^{ENTRY_TRAILER}: {name} last$", f"{STOCK_BRANCH}..HEAD")
    commits = found.split()
    if not commits:
        raise FusekitError(f"no commit of {name} in the variant's history; run 'fusekit apply' again")
    return commits[0]
