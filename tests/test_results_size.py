"""The working tree travels to the GPU host with every device call, beside the bundle, under the host's 64 MiB limit;
committed results are what grows it. Session 27's first call was refused: tracked files had reached 56 MB. Since
session 37 a device session takes results/ out of the index (scripts/device_calls/slim_tree.sh), so what travels is
the rest of the tree; the whole of it still has a cap, for clones and CI."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .conftest import REPO

TRAVEL_LIMIT = 10_000_000  # bytes of tracked files outside results/: with the bundle and a 47 MiB model part, < 64 MiB
TREE_LIMIT = 150_000_000  # bytes of all tracked files
PLAIN_LIMIT = 100_000  # a result file over this is stored xz-compressed (JSON excepted: fusekit report reads it)


def needs_compression(path: Path) -> bool:
    """A result file over PLAIN_LIMIT bytes that is neither compressed nor JSON."""
    return path.suffix not in {".xz", ".gz", ".json"} and path.stat().st_size > PLAIN_LIMIT


def _tracked() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    return [REPO / name for name in listed.stdout.split("\0") if name and (REPO / name).is_file()]


def test_what_travels_leaves_room_for_the_bundle_and_a_model_part() -> None:
    travelling = [path for path in _tracked() if not path.is_relative_to(REPO / "results")]
    total = sum(path.stat().st_size for path in travelling)
    assert total < TRAVEL_LIMIT, f"tracked files outside results/ are {total / 1e6:.1f} MB"


def test_tracked_files_stay_under_the_cap() -> None:
    total = sum(path.stat().st_size for path in _tracked())
    assert total < TREE_LIMIT, f"tracked files are {total / 1e6:.1f} MB: xz the large plain results"


def test_large_result_files_are_compressed() -> None:
    results = [path for path in _tracked() if path.is_relative_to(REPO / "results")]
    assert results, "no committed results found"
    assert [str(path.relative_to(REPO)) for path in results if needs_compression(path)] == []


def test_the_rule_names_a_large_plain_file(tmp_path: Path) -> None:
    """The rule's own sabotage: a large plain log is named; its .xz, a large JSON and a small log are not."""
    for name, size in (("session.log", PLAIN_LIMIT + 1), ("session.log.xz", PLAIN_LIMIT + 1),
                       ("eval.json", PLAIN_LIMIT + 1), ("smoke.txt", PLAIN_LIMIT)):  # fmt: skip
        (tmp_path / name).write_bytes(b"x" * size)
    assert [path.name for path in sorted(tmp_path.iterdir()) if needs_compression(path)] == ["session.log"]
