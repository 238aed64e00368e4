"""Apply one patch file inside a work tree with git, and explain a failure precisely."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import git

from .errors import FusekitError
from .gitutil import git_error_text, run_git

_FAILED_AT = re.compile(r"error: patch failed: (?P<file>.+?):(?P<line>\d+)")
_NO_APPLY = re.compile(
    r"error: (?P<file>.+?): (?P<why>patch does not apply|does not exist in index"
    r"|already exists in index|No such file or directory)"
)


@dataclass(frozen=True)
class Hunk:
    file: str
    header: str
    old_start: int
    text: str


def hunks_of(patch_text: str) -> list[Hunk]:
    """Split a unified diff into hunks, each with the file it changes."""
    hunks: list[Hunk] = []
    current_file = ""
    lines = patch_text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("+++ ") or (
            line.startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith("+++ /dev/null")
        ):
            name = line[4:].split("\t")[0]
            current_file = name[2:] if name.startswith(("a/", "b/")) else name
        elif line.startswith("@@ "):
            match = re.match(r"@@ -(\d+)", line)
            start = int(match.group(1)) if match else 0
            body = [line]
            index += 1
            while index < len(lines) and not lines[index].startswith(("@@ ", "diff --git ", "--- ")):
                body.append(lines[index])
                index += 1
            hunks.append(Hunk(current_file, line, start, "\n".join(body)))
            continue
        index += 1
    return hunks


def failing_hunk(patch_text: str, file: str, line: int | None) -> Hunk | None:
    """The hunk git complained about: in ``file``, starting at ``line`` when known."""
    candidates = [h for h in hunks_of(patch_text) if h.file == file]
    if line is not None:
        exact = [h for h in candidates if h.old_start == line]
        if exact:
            return exact[0]
    return candidates[0] if candidates else None


def apply_patch(tree: Path, patch: Path) -> None:
    """``git apply --index`` in ``tree``; on failure raise with the file and failing hunk."""
    try:
        run_git(tree, "apply", "--index", "--whitespace=nowarn", str(patch))
    except git.GitCommandError as exc:
        stderr = git_error_text(exc)
        raise FusekitError(describe_failure(patch, stderr), detail=stderr) from None


def describe_failure(patch: Path, stderr: str) -> str:
    text = patch.read_text(errors="replace")
    match = _FAILED_AT.search(stderr)
    if match:
        file, line = match.group("file"), int(match.group("line"))
        hunk = failing_hunk(text, file, line)
        where = f"{file}, hunk {hunk.header.split('@@')[1].strip()}" if hunk else f"{file}:{line}"
        shown = f"\n{hunk.text}" if hunk else ""
        return f"patch {patch} does not apply: {where}{shown}"
    match = _NO_APPLY.search(stderr)
    if match:
        return f"patch {patch} does not apply: {match.group('file')}: {match.group('why')}"
    first = stderr.splitlines()[0] if stderr else "git apply failed"
    return f"patch {patch} does not apply: {first}"
