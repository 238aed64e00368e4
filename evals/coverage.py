"""Which ggml backends a variant's patches touch, so an eval can say when a build compiles none of them."""

from __future__ import annotations

import re
from pathlib import Path

# ggml/src/ggml-<name>/... holds one backend's code; everything else is compiled by every build.
_BACKEND_DIR = re.compile(r"^ggml/src/ggml-([a-z0-9]+)/")
_DIFF_PATH = re.compile(r"^\+\+\+ b/(\S+)|^--- a/(\S+)", re.M)
BUILD_COMPILES = {"cpu": frozenset({"cpu"}), "cuda": frozenset({"cpu", "cuda"})}


def touched_paths(patch: Path) -> set[str]:
    found = set()
    for new, old in _DIFF_PATH.findall(patch.read_text(errors="replace")):
        path = new or old
        if path != "/dev/null":
            found.add(path)
    return found


def backend_of(path: str) -> str | None:
    """The backend whose folder holds ``path``; None for code that every build compiles."""
    match = _BACKEND_DIR.match(path)
    return match.group(1) if match else None


def uncompiled_only(paths: set[str], backend: str) -> bool:
    """True when every path belongs to a backend that a ``backend`` build does not compile."""
    if not paths:
        return False
    compiled = BUILD_COMPILES[backend]
    owners = [backend_of(p) for p in paths]
    return all(owner is not None and owner not in compiled for owner in owners)


def variant_paths(entries: list) -> set[str]:
    """Files a variant's entries change: every patched path and every placed kernel file."""
    paths: set[str] = set()
    for entry in entries:
        for patch in entry.patches:
            paths |= touched_paths(Path(patch))
        paths |= {dest for _, dest in entry.kernels}
    return paths
