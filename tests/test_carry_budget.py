"""A device call sends the tracked tree plus what it carries, 64 MiB in all: the tree must leave room for the bundle.

Session 20 found the tree and the bundle over the limit (every call refused) only on the device. The bundle
(`fusekit bundle`: slim llama.cpp tarball, wheels, debs) is about 10 MB, so the tracked files may take what is left.
Since session 37 every device session starts with `scripts/device_calls/slim_tree.sh on`, which takes results/ out of
the index and ignores it for the session (no device call reads it), so what a call sends is the tracked tree without
results/. That is what must fit; the second test holds the script to doing so. (Session 48 found the whole tracked tree
0.26 MB under the old whole-tree limit, with every session's results adding to it.)
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CALL_LIMIT = 64 * 2**20  # what one device call may send: working tree plus carried paths
BUNDLE_ALLOWANCE = 11 * 10**6  # the bundle of session 20 took 9.9 MB; a little room for a larger wheel
SLIM_TREE = REPO / "scripts" / "device_calls" / "slim_tree.sh"


def _tracked_bytes_sent() -> int:
    """Bytes of the tracked files a device call sends after ``slim_tree.sh on``: everything outside results/."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    names = [name for name in listed.decode().split("\0") if name and not name.startswith("results/")]
    return sum((REPO / name).stat().st_size for name in names if (REPO / name).is_file())


def test_the_tracked_tree_leaves_room_for_the_bundle() -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    sent = _tracked_bytes_sent()
    room = CALL_LIMIT - BUNDLE_ALLOWANCE
    assert sent <= room, (
        f"tracked files outside results/ take {sent / 1e6:.1f} MB, over the {room / 1e6:.1f} MB a device call leaves "
        "beside the bundle: compress large files (xz) or move them out of the tree"
    )


def test_slim_tree_takes_results_out_of_what_a_call_sends() -> None:
    """The premise of the budget above: ``on`` removes results/ from the index and ignores it, ``off`` undoes both."""
    script = SLIM_TREE.read_text()
    assert "git rm -r -q --cached results" in script
    assert "echo '/results/' >>\"$exclude\"" in script
    assert "git reset -q -- results" in script
