"""Small helpers over gitpython for the managed llama.cpp repository."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import git

from .errors import FusekitError

IDENTITY = {
    "GIT_AUTHOR_NAME": "fusekit",
    "GIT_AUTHOR_EMAIL": "fusekit@localhost",
    "GIT_COMMITTER_NAME": "fusekit",
    "GIT_COMMITTER_EMAIL": "fusekit@localhost",
}


def run_git(cwd: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
    """Run one git command in ``cwd`` and return its stdout (stripped of the final newline)."""
    full_env = {**os.environ, **IDENTITY, **(env or {})}
    try:
        with tempfile.TemporaryFile() as stream:
            if stdin is not None:
                stream.write(stdin.encode())
                stream.seek(0)
            return git.Git(str(cwd)).execute(
                ["git", *args],
                env=full_env,
                istream=stream if stdin is not None else None,
                strip_newline_in_stdout=True,
            )
    except git.GitCommandNotFound as exc:
        raise FusekitError("git is not installed (fusekit needs the git command line tool)") from exc


def git_error_text(exc: git.GitCommandError) -> str:
    """The stderr of a failed git command, without gitpython's framing."""
    stderr = exc.stderr if isinstance(exc.stderr, str) else str(exc.stderr or "")
    stderr = stderr.strip()
    if stderr.startswith("stderr: '") and stderr.endswith("'"):
        stderr = stderr[len("stderr: '") : -1]
    return stderr.strip()


def tree_of_directory(repo_dir: Path, work_tree: Path) -> str:
    """Git tree id of the files in ``work_tree`` as ``git add -A`` sees them (a throw-away index)."""
    index = repo_dir / "fusekit-verify.index"
    env = {"GIT_INDEX_FILE": str(index), "GIT_WORK_TREE": str(work_tree)}
    try:
        run_git(repo_dir, "add", "-A", "-f", ".", env=env)
        return run_git(repo_dir, "write-tree", env=env)
    finally:
        index.unlink(missing_ok=True)


def insert_tree_entries(repo_dir: Path, tree: str, entries: dict[str, tuple[str, str, str]]) -> str:
    """Return the id of ``tree`` with ``entries`` (path -> (mode, type, id)) added back.

    The inserted objects need not exist in the repository (``git mktree --missing``): this
    recomputes the id a full tree would have from a tree with some sub-trees left out.
    """
    direct: dict[str, tuple[str, str, str]] = {}
    nested: dict[str, dict[str, tuple[str, str, str]]] = {}
    for path, entry in entries.items():
        head, _, rest = path.partition("/")
        if rest:
            nested.setdefault(head, {})[rest] = entry
        else:
            direct[head] = entry
    listing = run_git(repo_dir, "ls-tree", tree) if tree else ""
    current: dict[str, tuple[str, str, str]] = {}
    for line in listing.splitlines():
        meta, name = line.split("\t", 1)
        mode, kind, oid = meta.split()
        current[name] = (mode, kind, oid)
    for name, sub_entries in nested.items():
        sub_tree = current[name][2] if name in current else ""
        current[name] = ("040000", "tree", insert_tree_entries(repo_dir, sub_tree, sub_entries))
    current.update(direct)
    text = "".join(f"{mode} {kind} {oid}\t{name}\n" for name, (mode, kind, oid) in current.items())
    return run_git(repo_dir, "mktree", "--missing", stdin=text)
