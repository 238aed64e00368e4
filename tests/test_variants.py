"""Real patch stacks in the managed repository: apply, user patches, atomic failure, status, refresh."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fusekit.errors import FusekitError
from fusekit.gitutil import run_git
from fusekit.registry import Registry
from fusekit.stack import resolve_spec
from fusekit.variants import apply, dirty_files, refresh, reset, status
from fusekit.workspace import Workspace

from .conftest import TEST_DATA, TEST_PATCHES

BENCH = "tools/llama-bench/llama-bench.cpp"


def _apply(ws: Workspace, *specs: str):
    return apply(ws, list(specs), Registry.load(), resolve_spec)


def snapshot(ws: Workspace) -> dict[str, str]:
    """Everything a failed apply must leave exactly as it was."""
    state = ws.load_state()
    current = ws.tree(state["current"])
    return {
        "state": ws.state_file.read_text(),
        "refs": run_git(ws.repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        "worktrees": run_git(ws.repo, "worktree", "list", "--porcelain"),
        "head": run_git(current, "rev-parse", "HEAD"),
        "status": run_git(current, "status", "--porcelain"),
        "home": " ".join(sorted(p.name for p in ws.home.iterdir())),
    }


def test_apply_fusion_places_kernels_and_commits(pinned_home: Path, example_data: Path) -> None:
    ws = Workspace(pinned_home)
    reset(ws)
    variant = _apply(ws, "example-banner")
    assert variant.label == "fusion-9"
    assert (variant.tree / "tools/llama-bench/fusekit_example.h").is_file()
    assert "FUSEKIT_EXAMPLE_BANNER" in (variant.tree / BENCH).read_text()
    log = run_git(variant.tree, "log", "--format=%s", "stock..HEAD")
    assert log.splitlines() == [f"fusekit: fusion-9: example-bench-banner.patch (sha256 {_sha('example')})"]
    info = status(ws, Registry.load())
    assert info["variant"] == "fusion-9" and info["branch"] == "variant/fusion-9"
    assert info["entries"][0]["patches"][0]["sha256"].startswith(_sha("example"))
    assert not info["stale"] and info["edits_not_in_a_patch"] == []


def _sha(which: str) -> str:
    from fusekit.stack import file_sha256

    return file_sha256(TEST_DATA / "patches" / "example-bench-banner.patch")[:12]


def test_user_patch_joins_the_stack_after_fusions(pinned_home: Path, example_data: Path) -> None:
    ws = Workspace(pinned_home)
    reset(ws)
    _apply(ws, str(TEST_PATCHES / "readme-note.patch"))
    variant = _apply(ws, "fusion-9")
    assert variant.label == "fusion-9+readme-note"
    assert "user patch applied" in (variant.tree / "README.md").read_text()
    again = _apply(ws, "fusion-9")  # same set, same variant: nothing is rebuilt
    assert again.head == variant.head


def test_a_conflicting_patch_changes_nothing(pinned_home: Path, example_data: Path) -> None:
    ws = Workspace(pinned_home)
    reset(ws)
    _apply(ws, "fusion-9")
    before = snapshot(ws)
    with pytest.raises(FusekitError) as info:
        _apply(ws, str(TEST_PATCHES / "conflict-bench-usage.patch"))
    message = info.value.message
    assert "conflict-bench-usage.patch does not apply" in message
    assert f"{BENCH}, hunk -425,7 +425,7" in message
    assert "(fusekit conflict patch)" in message  # the failing hunk is shown
    assert snapshot(ws) == before


def test_unknown_names_and_bad_files_are_refused(pinned_home: Path, example_data: Path, tmp_path: Path) -> None:
    ws = Workspace(pinned_home)
    reset(ws)
    before = snapshot(ws)
    with pytest.raises(FusekitError, match="unknown fusion 'fusion-8'; did you mean fusion-9"):
        _apply(ws, "fusion-8")
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    with pytest.raises(FusekitError, match="is not a patch"):
        _apply(ws, str(text))
    with pytest.raises(FusekitError, match="does not exist"):
        _apply(ws, str(tmp_path / "gone.patch"))
    assert snapshot(ws) == before


def test_refresh_writes_edits_back(pinned_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    shutil.copytree(TEST_DATA, data)
    monkeypatch.setenv("FUSEKIT_DATA", str(data))
    ws = Workspace(pinned_home)
    reset(ws)
    variant = _apply(ws, "fusion-9")
    bench = variant.tree / BENCH
    bench.write_text(
        bench.read_text().replace(
            'printf("%s\\n", FUSEKIT_EXAMPLE_BANNER);', 'printf("[%s]\\n", FUSEKIT_EXAMPLE_BANNER);'
        )
    )
    header = variant.tree / "tools/llama-bench/fusekit_example.h"
    header.write_text(header.read_text() + "// refreshed\n")
    assert len(dirty_files(variant.tree)) == 2
    description = "An example patch's description: what it does and why.\nChecks: EXAMPLE\n"
    patch_path = data / "patches/example-bench-banner.patch"
    patch_path.write_text(description + patch_path.read_text())
    written = refresh(ws, "example-banner", Registry.load())
    assert written == [data / "patches/example-bench-banner.patch", data / "kernels/fusekit_example.h"]
    patch = (data / "patches/example-bench-banner.patch").read_text()
    assert '+    printf("[%s]\\n", FUSEKIT_EXAMPLE_BANNER);' in patch
    assert patch.startswith(description + "diff --git ")  # session 37's refresh dropped an experiment's header
    assert "fusekit_example.h" not in patch.split("@@")[0]  # the kernel file is not in the patch
    assert (data / "kernels/fusekit_example.h").read_text().endswith("// refreshed\n")
    assert dirty_files(variant.tree) == []
    assert len(run_git(variant.tree, "log", "--format=%H", "stock..HEAD").split()) == 1
    assert not status(ws, Registry.load())["stale"]
    with pytest.raises(FusekitError, match="no edits"):
        refresh(ws, "fusion-9", Registry.load())
