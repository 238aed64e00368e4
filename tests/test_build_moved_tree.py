"""A build folder copied with its tree (a copied or moved home) is configured afresh for the tree it is now in."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from fusekit.build import BuildOptions, build_variant, configured_source
from fusekit.gitutil import run_git

PROGRAM = '#include <cstdio>\nint main() { std::puts("%s"); }\n'


def tiny_tree(tree: Path, message: str) -> None:
    """A one-program CMake project in a git repository (build_variant reads the tree's HEAD)."""
    tree.mkdir(parents=True)
    (tree / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.14)\nproject(tiny CXX)\nadd_executable(hello hello.cpp)\n"
    )
    (tree / "hello.cpp").write_text(PROGRAM % message)
    run_git(tree, "init", "-q")
    run_git(tree, "add", ".")
    run_git(tree, "commit", "-qm", "tiny")


def build_and_run(tree: Path, notes: list[str]) -> str:
    result = build_variant("tiny", tree, tree.parent, "", BuildOptions(), 1, notes.append, targets=("hello",))
    return subprocess.run([str(result.build_dir / "hello")], capture_output=True, text=True, check=True).stdout.strip()


def test_a_copied_build_folder_compiles_the_copy(tmp_path: Path) -> None:
    first, second = tmp_path / "first" / "tiny", tmp_path / "second" / "tiny"
    tiny_tree(first, "first tree")
    assert build_and_run(first, []) == "first tree"
    shutil.copytree(first.parent, second.parent, symlinks=True)
    (second / "hello.cpp").write_text(PROGRAM % "second tree")

    notes: list[str] = []
    assert build_and_run(second, notes) == "second tree"
    assert any("configuring it afresh" in note for note in notes)
    assert configured_source(second / "build-cpu") == second.resolve()
    assert build_and_run(first, []) == "first tree"  # the first tree's build is its own still
