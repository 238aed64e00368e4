"""Shared fixtures: one real workspace per test run, initialised from the real sdist, with real builds.

The workspace lives in ``$FUSEKIT_TEST_ROOT`` (default ``.fusekit-test/`` in the repository, git-ignored),
so a second local run reuses the download, the checkout and the builds (ninja and ccache make that fast).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from fusekit.build import BuildOptions, BuildResult, build_variant
from fusekit.cli import main
from fusekit.drop import drop
from fusekit.named_stacks import expand, load_stacks
from fusekit.registry import Registry
from fusekit.stack import resolve_spec
from fusekit.variants import apply, reset
from fusekit.workspace import Workspace

REPO = Path(__file__).resolve().parents[1]
TEST_DATA = REPO / "tests" / "data"
TEST_PATCHES = REPO / "tests" / "patches"
TEST_ROOT = Path(os.environ.get("FUSEKIT_TEST_ROOT", REPO / ".fusekit-test")).resolve()


# Host test programs of our plan and cache code (C++ on the CPU) are built with these: a read of freed or foreign
# memory or undefined behaviour stops the program (session 46: fusion-2's plan copied pointers out of a freed map
# node, and only the GPU noticed). SANITIZED_ENV is their environment (leaks are not what they look for).
HOST_SANITIZERS = (
    "-fsanitize=address",
    "-fsanitize=undefined",
    "-fno-sanitize-recover=undefined",
    "-fno-omit-frame-pointer",
)
HOST_SANITIZER_LIBS = ("-lasan", "-lubsan")  # what g++ links for them, named for nvcc, which links without them
SANITIZED_ENV = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0"}

RESHAPE_RESIDUAL_PATCH = REPO / "patches" / "experiments" / "fusion-2-reshape-residual.patch"
RESHAPE_RESIDUAL_HEADER = "ggml/src/ggml-cuda/fusekit-reshape-residual.cuh"


def apply_hunks(work: Path, include: str, patch: Path) -> None:
    """The hunks of patch for the files matching include (a git pathspec glob), applied to the files under work."""
    applied = subprocess.run(
        ["git", "apply", f"--include={include}", str(patch)], cwd=work, capture_output=True, text=True
    )
    assert applied.returncode == 0, applied.stderr


def reshape_residual_header(work: Path) -> Path:
    """The header experiment fusion-2-reshape-residual creates, written under work exactly as the patch has it;
    returns its folder (for -I)."""
    apply_hunks(work, RESHAPE_RESIDUAL_HEADER, RESHAPE_RESIDUAL_PATCH)
    return work / Path(RESHAPE_RESIDUAL_HEADER).parent


def log(message: str) -> None:
    print(f"[fixture] {message}", flush=True)


@pytest.fixture(scope="session")
def test_root() -> Path:
    TEST_ROOT.mkdir(parents=True, exist_ok=True)
    return TEST_ROOT


@pytest.fixture(scope="session")
def pinned_home(test_root: Path) -> Path:
    """A workspace initialised from the real PyPI sdist (downloaded once, then cached)."""
    home = test_root / "home"
    Workspace(home).init(None, log)
    return home


def cli(home: Path, *args: str) -> str:
    """``fusekit --home HOME ARGS`` through click (named stacks resolve as for a user); its output, asserting it ran."""
    done = CliRunner().invoke(main, ["--home", str(home), *args])
    assert done.exit_code == 0, done.output
    return done.stdout


def variant_labels(home: Path) -> set[str]:
    """The variants a workspace knows now."""
    return set(Workspace(home).load_state()["variants"])


def drop_variants_since(home: Path, before: set[str]) -> None:
    """Reset to stock and drop every variant made since ``before`` was taken: each tree is about 180 MB, and a
    full run applies about a hundred stacks, more disk than a CI machine may have free."""
    ws = Workspace(home)
    with ws.lock():
        reset(ws)
        drop(ws, sorted(variant_labels(home) - before), force=True)


def applied_tree(home: Path, entries: list[str], registry: Registry) -> Iterator[Path]:
    """Yields the pinned tree with ``entries`` applied (fusions, named stacks or patch files, named stacks expanded
    as ``fusekit apply`` does); afterwards the workspace is reset to stock and the variant dropped. For module
    fixtures that read or compile a patched tree."""
    ws = Workspace(home)
    with ws.lock():
        reset(ws)
        before = variant_labels(home)
        variant = apply(ws, expand(entries, load_stacks(registry)), registry, resolve_spec)
    yield variant.tree
    drop_variants_since(home, before)


@pytest.fixture(scope="session")
def stock_build(pinned_home: Path) -> BuildResult:
    """A real CPU build of stock llama.cpp (minutes cold on 2 cores, seconds when up to date)."""
    ws = Workspace(pinned_home)
    return build_variant("stock", ws.tree("stock"), ws.trees, "", BuildOptions(), None, log)


@pytest.fixture
def example_data(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point fusekit's registry at tests/data (an example fusion with a real patch and kernel file)."""
    monkeypatch.setenv("FUSEKIT_DATA", str(TEST_DATA))
    return TEST_DATA
