"""Unit tests of the spine's pure parts: pin, registry manifests, stacks, patch parsing, git URL parsing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fusekit.errors import FusekitError
from fusekit.patching import describe_failure, failing_hunk, hunks_of
from fusekit.pin import load_pin
from fusekit.registry import Registry, parse_manifest, unknown_fusion_message
from fusekit.source import is_git_url, split_url_commit
from fusekit.stack import (
    MAX_LABEL_BYTES,
    Entry,
    canonical,
    check_is_patch,
    file_stem,
    label_of,
    patch_label,
    stack_hash,
    user_patch_entry,
)

from .conftest import TEST_DATA, TEST_PATCHES

REPO = Path(__file__).resolve().parents[1]


def test_pin_is_complete() -> None:
    pin = load_pin()
    assert re.fullmatch(r"[0-9a-f]{40}", pin.commit)
    assert re.fullmatch(r"[0-9a-f]{40}", pin.tree)
    assert re.fullmatch(r"[0-9a-f]{64}", pin.sdist.sha256)
    assert pin.sdist.requirement == "llama-cpp-python==0.3.36"
    assert "models" in pin.slim_omit


def _manifest(tmp_path: Path, body: str, name: str = "fusion-2") -> Path:
    (tmp_path / "patches").mkdir(exist_ok=True)
    (tmp_path / "kernels").mkdir(exist_ok=True)
    (tmp_path / "patches" / "a.patch").write_text((TEST_DATA / "patches" / "example-bench-banner.patch").read_text())
    (tmp_path / "fusions").mkdir(exist_ok=True)
    path = tmp_path / "fusions" / f"{name}.toml"
    path.write_text(body)
    return path


GOOD = """
name = "fusion-2"
alias = "gdn-chains"
title = "t"
description = "d"
patches = ["a.patch"]
backends = ["cuda"]
ops = ["RMS_NORM"]
"""


def test_manifest_parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEKIT_DATA", str(tmp_path))
    fusion = parse_manifest(_manifest(tmp_path, GOOD))
    assert fusion.order == 2 and fusion.alias == "gdn-chains"
    assert fusion.patches[0].name == "a.patch"


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda s: s.replace('alias = "gdn-chains"\n', ""), "missing alias"),
        (lambda s: s.replace('"a.patch"', '"nope.patch"'), "does not exist"),
        (lambda s: s.replace('["cuda"]', '["rocm"]'), "unknown backends"),
        (lambda s: s.replace('name = "fusion-2"', 'name = "fusion-two"'), "fusion-N"),
        (lambda s: s + "colour = 'red'\n", "unknown keys"),
        (lambda s: s + "[[kernels]]\nsource = 'x.cu'\n", "exactly 'source' and 'dest'"),
        (lambda s: s.replace("title = ", "title == "), "malformed"),
    ],
)
def test_malformed_manifests_fail_loudly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit, problem: str) -> None:
    monkeypatch.setenv("FUSEKIT_DATA", str(tmp_path))
    path = _manifest(tmp_path, edit(GOOD))
    with pytest.raises(FusekitError, match=problem) as info:
        parse_manifest(path)
    assert str(path) in info.value.message


def test_registry_suggests_near_names(example_data: Path) -> None:
    registry = Registry.load()
    assert registry.get("example-banner").name == "fusion-9"
    with pytest.raises(FusekitError, match="did you mean fusion-9"):
        registry.get("fusion-8")
    assert "did you mean" not in unknown_fusion_message("zzz", ["fusion-1"])


def test_registry_refuses_duplicate_alias(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEKIT_DATA", str(tmp_path))
    _manifest(tmp_path, GOOD)
    _manifest(tmp_path, GOOD.replace("fusion-2", "fusion-3"), name="fusion-3")
    with pytest.raises(FusekitError, match="used by both"):
        Registry.load(tmp_path / "fusions")


def _entry(kind: str, name: str, tmp_path: Path, text: str = "x") -> Entry:
    path = tmp_path / f"{name}.patch"
    path.write_text(text)
    return Entry(kind, name, (path,))


def test_canonical_order_and_labels(tmp_path: Path) -> None:
    f3, f1 = _entry("fusion", "fusion-3", tmp_path), _entry("fusion", "fusion-1", tmp_path)
    mine, other = _entry("patch", "mine", tmp_path), _entry("patch", "other", tmp_path)
    stack = canonical([mine, f3, other, f1, f3])
    assert [e.name for e in stack] == ["fusion-1", "fusion-3", "mine", "other"]
    assert label_of(stack) == "fusion-1+fusion-3+mine+other"
    assert label_of([]) == "stock"


def test_long_labels_still_name_a_folder(tmp_path: Path) -> None:
    """A stack of many patches (the session-10 stack with every experiment and a fix: 251 bytes) made a git branch
    whose lock file passed 255 bytes; longer labels keep the names that fit and a hash of the whole list."""
    names = [f"fusion-{n}" for n in (1, 2, 3, 5)] + [f"experiment-with-a-long-name-{i:02d}" for i in range(12)]
    stack = [_entry("fusion" if n.startswith("fusion-") else "patch", n, tmp_path) for n in names]
    label = label_of(stack)
    assert len(label.encode()) <= MAX_LABEL_BYTES and len(label.encode() + b".lock") < 255
    assert label.startswith("fusion-1+fusion-2+fusion-3+fusion-5+experiment-with-a-long-name-00+")
    kept = label.split("+")[:-1]
    assert kept == names[: len(kept)] and label.split("+")[-1].startswith(f"{len(names) - len(kept)}-more-")
    assert label != label_of(stack[:-1]) and label == label_of(list(stack))
    short = stack[:6]
    assert label_of(short) == "+".join(names[:6])


def test_an_arm_of_a_long_label_still_names_a_file(tmp_path: Path) -> None:
    """Session 31: ``LABEL@GGML_CUDA_PDL=0`` of a 238-byte label (254 bytes) fits a file name, but its eval scratch
    file (``.kld``) and its trace (``.nsys-rep``) did not; file_stem keeps the environment (the name's end) and a hash
    of the whole."""
    session31 = REPO / "results" / "h200-2026-12-04-session31-z-pdl" / "eval-all-35b.partial.json"
    label = json.loads(session31.read_text())["variants"][1]["name"]  # GSL, as label_of cut it
    arm, other = label + "@GGML_CUDA_PDL=0", label + "@GGML_CUDA_PDL=1"
    assert len((arm + ".kld").encode()) > 255  # the case that failed
    stem = file_stem(arm)
    assert len((stem + ".kld").encode()) <= 255 and stem.endswith("@GGML_CUDA_PDL=0")
    assert len(file_stem(arm, 100).encode()) == 100 and file_stem(arm, 100).endswith("@GGML_CUDA_PDL=0")
    assert stem != file_stem(other) and stem == file_stem(arm)
    assert (
        file_stem(label) == label
        and file_stem("stock@GGML_CUDA_DISABLE_FUSION=1") == "stock@GGML_CUDA_DISABLE_FUSION=1"
    )
    (tmp_path / stem).mkdir()  # the file system takes it


def test_stack_hash_follows_contents(tmp_path: Path) -> None:
    entry = _entry("patch", "mine", tmp_path, "one")
    before = stack_hash([entry])
    assert stack_hash([entry]) == before
    entry.patches[0].write_text("two")
    assert stack_hash([entry]) != before


def test_patch_files_are_checked(tmp_path: Path) -> None:
    check_is_patch(TEST_PATCHES / "conflict-bench-usage.patch")
    junk = tmp_path / "notes.patch"
    junk.write_text("just some words\n")
    with pytest.raises(FusekitError, match="is not a patch"):
        check_is_patch(junk)
    with pytest.raises(FusekitError, match="does not exist"):
        check_is_patch(tmp_path / "missing.patch")
    assert patch_label(Path("/x/my change.patch")) == "my-change"


def _patch_with_header(tmp_path: Path, header: str) -> Path:
    path = tmp_path / "experiment.patch"
    body = (TEST_PATCHES / "conflict-bench-usage.patch").read_text()
    path.write_text(header + body)
    return path


def test_a_patch_header_places_the_kernel_files_it_names_and_they_count_in_its_hash(tmp_path: Path) -> None:
    plain = user_patch_entry(_patch_with_header(tmp_path, "an experiment\n"))
    assert plain.kernels == ()
    named = user_patch_entry(_patch_with_header(tmp_path, "an experiment\nKernels: fusekit-chunked-gdn-lean.cuh\n"))
    assert [(s.name, d) for s, d in named.kernels] == [
        ("fusekit-chunked-gdn-lean.cuh", "ggml/src/ggml-cuda/fusekit-chunked-gdn-lean.cuh")
    ]
    assert named.content_hash() != plain.content_hash()
    # a "Kernels:" line after the first diff (a trailer, as git format-patch writes one) is not the header's
    inside = _patch_with_header(tmp_path, "")
    inside.write_text(inside.read_text() + "-- \nKernels: not-a-file.cuh\n")
    assert user_patch_entry(inside).kernels == ()


@pytest.mark.parametrize("name", ["missing-kernel.cuh", "../pyproject.toml"])
def test_a_patch_header_naming_a_missing_kernel_file_is_refused(tmp_path: Path, name: str) -> None:
    path = _patch_with_header(tmp_path, f"an experiment\nKernels: {name}\n")
    with pytest.raises(FusekitError, match=f"Kernels: line names {re.escape(repr(name))}"):
        user_patch_entry(path)


def test_hunks_and_failing_hunk() -> None:
    text = (TEST_DATA / "patches" / "example-bench-banner.patch").read_text()
    hunks = hunks_of(text)
    assert [h.old_start for h in hunks] == [19, 426]
    assert {h.file for h in hunks} == {"tools/llama-bench/llama-bench.cpp"}
    assert failing_hunk(text, "tools/llama-bench/llama-bench.cpp", 426) == hunks[1]
    message = describe_failure(
        TEST_DATA / "patches" / "example-bench-banner.patch",
        "error: patch failed: tools/llama-bench/llama-bench.cpp:426\n"
        "error: tools/llama-bench/llama-bench.cpp: patch does not apply",
    )
    assert "hunk -426,6 +427,7" in message and "FUSEKIT_EXAMPLE_BANNER" in message


def test_git_url_forms() -> None:
    assert is_git_url("https://github.com/ggml-org/llama.cpp")
    assert is_git_url("git@github.com:ggml-org/llama.cpp.git")
    assert not is_git_url("./llama.cpp")
    assert split_url_commit("https://h/l.git#0c1e570") == ("https://h/l.git", "0c1e570")
    assert split_url_commit("https://h/l.git@0c1e57098b") == ("https://h/l.git", "0c1e57098b")
    assert split_url_commit("git@github.com:o/l.git") == ("git@github.com:o/l.git", None)
