"""canonical(): one entry per name; the same bytes from two checkouts are one entry, different bytes are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusekit.errors import FusekitError
from fusekit.stack import canonical, user_patch_entry

PATCH = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+{}\n"


def _patch(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "my-change.patch"
    path.write_text(PATCH.format(body))
    return path


def test_the_same_patch_from_two_checkouts_is_one_entry_with_the_later_files(tmp_path: Path) -> None:
    old = user_patch_entry(_patch(tmp_path / "old-checkout", "b"))
    new = user_patch_entry(_patch(tmp_path / "new-checkout", "b"))
    assert old != new and old.content_hash() == new.content_hash()
    assert canonical([old, new]) == [new]


def test_two_different_patches_of_one_name_are_refused_with_both_paths_and_the_way_out(tmp_path: Path) -> None:
    old = user_patch_entry(_patch(tmp_path / "old-checkout", "b"))
    new = user_patch_entry(_patch(tmp_path / "new-checkout", "c"))
    with pytest.raises(FusekitError, match="both called 'my-change'") as refused:
        canonical([old, new])
    message = str(refused.value)
    assert str(old.patches[0]) in message and str(new.patches[0]) in message and "fusekit reset" in message
