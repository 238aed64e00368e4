"""``fusekit drop`` on a real workspace of its own (imported from the shared one's stock tree): a dropped
variant's tree, branch and record go, stock and the current variant stay, and a refused request drops nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fusekit.cli import main
from fusekit.gitutil import run_git
from fusekit.workspace import Workspace, variant_branch

pytestmark = pytest.mark.slow

PATCHES = Path(__file__).resolve().parent / "patches"
README_NOTE = str(PATCHES / "readme-note.patch")
NOOP = str(PATCHES / "noop-comment.patch")


def fusekit(home: Path, *args: str) -> tuple[int, str]:
    done = CliRunner().invoke(main, ["--home", str(home), *args])
    return done.exit_code, done.output


def variants(home: Path) -> list[str]:
    return sorted(Workspace(home).load_state()["variants"])


@pytest.fixture(scope="module")
def own_home(pinned_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("drop") / "h"
    Workspace(home).init(str(Workspace(pinned_home).tree("stock")), lambda _msg: None)
    return home


@pytest.fixture
def two_variants(own_home: Path) -> tuple[str, str]:
    """Variants readme-note and noop-comment exist; stock is current."""
    labels = []
    for patch in (README_NOTE, NOOP):
        assert fusekit(own_home, "reset")[0] == 0
        assert fusekit(own_home, "apply", patch)[0] == 0
        labels.append(Workspace(own_home).load_state()["current"])
    assert fusekit(own_home, "reset")[0] == 0
    return labels[0], labels[1]


def test_a_dropped_variant_loses_tree_branch_and_record_and_comes_back_on_apply(
    own_home: Path, two_variants: tuple[str, str]
) -> None:
    note, noop = two_variants
    ws = Workspace(own_home)
    code, output = fusekit(own_home, "drop", note, "--json")
    assert code == 0, output
    report = json.loads(output)
    assert [d["variant"] for d in report["dropped"]] == [note]
    assert report["bytes_freed"] > 50_000_000  # a llama.cpp tree
    assert not ws.tree(note).exists()
    assert run_git(ws.repo, "branch", "--list", variant_branch(note)) == ""
    assert note not in variants(own_home) and noop in variants(own_home)
    assert ws.tree(noop).is_dir() and ws.tree("stock").is_dir()
    assert fusekit(own_home, "apply", README_NOTE)[0] == 0  # made anew from its patch
    assert (ws.tree(note) / "README.md").read_text() != (ws.tree("stock") / "README.md").read_text()


def test_stock_the_current_variant_and_unknown_names_are_refused_and_nothing_is_dropped(
    own_home: Path, two_variants: tuple[str, str]
) -> None:
    note, noop = two_variants
    before = variants(own_home)
    for args in (["stock"], [note, "no-such-variant"], [noop, "stock"], []):
        code, output = fusekit(own_home, "drop", *args)
        assert code == 1 and output.startswith("fusekit: error: "), output
    assert fusekit(own_home, "apply", NOOP)[0] == 0  # noop-comment is current now
    code, output = fusekit(own_home, "drop", note, noop)
    assert code == 1 and "is the current variant" in output
    assert variants(own_home) == before
    assert Workspace(own_home).tree(note).is_dir()
    assert fusekit(own_home, "reset")[0] == 0


def test_edits_not_in_a_patch_need_force(own_home: Path, two_variants: tuple[str, str]) -> None:
    note, _noop = two_variants
    tree = Workspace(own_home).tree(note)
    (tree / "README.md").write_text("an edit not yet in a patch\n")
    code, output = fusekit(own_home, "drop", note)
    assert code == 1 and "not yet in a patch" in output and "README.md" in output
    assert tree.is_dir()
    assert fusekit(own_home, "drop", note, "--force")[0] == 0
    assert not tree.exists()


def test_all_keeps_stock_and_the_current_variant(own_home: Path, two_variants: tuple[str, str]) -> None:
    note, noop = two_variants
    assert fusekit(own_home, "apply", NOOP)[0] == 0
    code, output = fusekit(own_home, "drop", "--all")
    assert code == 0, output
    assert f"dropped {note}" in output
    assert variants(own_home) == sorted(["stock", noop])
    assert Workspace(own_home).tree(noop).is_dir()
    assert fusekit(own_home, "drop", "--all", noop)[0] == 1  # names and --all together
    assert fusekit(own_home, "reset")[0] == 0


def test_apply_refuses_in_one_line_when_the_disk_cannot_take_the_trees(
    own_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = variants(own_home)
    monkeypatch.setattr("fusekit.workspace.TREE_BYTES", 10**18)  # more than any disk has free
    code, output = fusekit(own_home, "apply", README_NOTE, NOOP)  # a stack no other test makes
    assert code == 1 and output.startswith("fusekit: error: only ") and "fusekit drop --all" in output, output
    assert len(output.strip().splitlines()) == 1
    assert variants(own_home) == before
    assert Workspace(own_home).load_state()["current"] == "stock"
