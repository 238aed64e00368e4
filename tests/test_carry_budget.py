"""A device call sends the tracked tree plus what it carries, 64 MiB in all: the tree must leave room for the bundle.

Session 20 found the tree and the bundle over the limit (every call refused) only on the device. The bundle
(`fusekit bundle`: slim llama.cpp tarball, wheels, debs) is about 10 MB, so the tracked files may take what is left.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CALL_LIMIT = 64 * 2**20  # what one device call may send: working tree plus carried paths
BUNDLE_ALLOWANCE = 11 * 10**6  # the bundle of session 20 took 9.9 MB; a little room for a larger wheel


def _tracked_bytes() -> int:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    return sum((REPO / name).stat().st_size for name in listed.decode().split("\0") if name and (REPO / name).is_file())


def test_the_tracked_tree_leaves_room_for_the_bundle() -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = _tracked_bytes()
    room = CALL_LIMIT - BUNDLE_ALLOWANCE
    assert tracked <= room, (
        f"tracked files take {tracked / 1e6:.1f} MB, over the {room / 1e6:.1f} MB a device call leaves beside the "
        "bundle: compress large result files (xz) or move raw traces out of the tree"
    )
