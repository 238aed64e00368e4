"""Named stacks (patches/stacks.toml): each is a variant a GPU session measured, and bad files or names fail clearly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fusekit.cli import main
from fusekit.errors import FusekitError
from fusekit.named_stacks import expand, load_stacks, parse_stacks
from fusekit.paths import data_root
from fusekit.registry import Registry
from fusekit.stack import spec_entries


def _measured_variants(evidence: str) -> list[list[tuple[str, str, str]]]:
    folder = (data_root() / evidence).parent
    variants = []
    for result in sorted(folder.glob("eval-*.json")):
        for variant in json.loads(result.read_text())["variants"]:
            variants.append([(e["kind"], e["name"], e["sha256"]) for e in variant["entries"]])
    return variants


@pytest.mark.parametrize("name", sorted(load_stacks(Registry.load())))
def test_a_named_stack_is_a_variant_its_evidence_measured(name: str) -> None:
    registry = Registry.load()
    stack = load_stacks(registry)[name]
    entries = [(e.kind, e.name, e.content_hash()) for e in spec_entries(name, registry)]
    assert entries in _measured_variants(stack.evidence), (
        f"{name} is no longer the variant measured in {stack.evidence} (entries, their order or a patch changed): "
        "measure it again and point evidence there"
    )


def test_the_committed_stacks_hold_every_fusion_they_name() -> None:
    stacks = load_stacks(Registry.load())
    assert {"stack-1-4", "stack-1-5"} <= stacks.keys()
    assert [s for s in stacks["stack-1-5"].specs if s.startswith("fusion-")] == [f"fusion-{i}" for i in range(1, 6)]


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "experiments").mkdir(exist_ok=True)
    (tmp_path / "experiments" / "a.patch").write_text("--- a/x\n+++ b/x\n")
    path = tmp_path / "stacks.toml"
    path.write_text(text)
    return path


GOOD = '[stack-a]\ntitle = "t"\nentries = ["fusion-1", "experiments/a.patch"]\nevidence = "e"\n'


def test_a_good_file_resolves_fusions_and_patch_files(tmp_path: Path) -> None:
    stacks = parse_stacks(_write(tmp_path, GOOD), Registry.load())
    assert stacks["stack-a"].specs == ("fusion-1", str((tmp_path / "experiments" / "a.patch").resolve()))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (GOOD.replace("stack-a", "mystack"), "must be 'stack-'"),
        (GOOD.replace("[stack-a]", "[stack-a]\nextra = 1"), "needs exactly the keys"),
        (GOOD.replace('"experiments/a.patch"', '"experiments/missing.patch"'), "neither a fusion nor a file"),
        (GOOD.replace("entries = [", "entries = [1, "), "list of strings"),
        ("[stack-a\n", "malformed stacks file"),
    ],
)
def test_a_bad_file_names_itself_and_the_problem(tmp_path: Path, text: str, problem: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(FusekitError, match="malformed stacks file") as caught:
        parse_stacks(path, Registry.load())
    assert problem in str(caught.value) and str(path) in str(caught.value)


def test_expand_replaces_stacks_and_refuses_unknown_ones(tmp_path: Path) -> None:
    stacks = parse_stacks(_write(tmp_path, GOOD), Registry.load())
    assert expand(["fusion-5", "stack-a"], stacks)[:2] == ["fusion-5", "fusion-1"]
    with pytest.raises(FusekitError, match=r"unknown stack 'stack-b' \(named stacks: stack-a"):
        expand(["stack-b"], stacks)


def test_list_shows_the_named_stacks() -> None:
    result = CliRunner().invoke(main, ["list"])
    assert result.exit_code == 0
    assert "named stacks" in result.output and "stack-1-5" in result.output
