"""The command line: help documents the flags, bad input gives one line and a non-zero exit."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from fusekit.cli import main

from .conftest import TEST_PATCHES


def invoke(*args: str, home: Path | None = None):
    runner = CliRunner()
    prefix = ["--home", str(home)] if home else []
    return runner.invoke(main, [*prefix, *args], catch_exceptions=False)


def test_help_documents_the_commands_and_flags() -> None:
    top = invoke("--help").output
    for command in ("init", "list", "apply", "status", "build", "reset", "refresh"):
        assert command in top
    assert "--source" in invoke("init", "--help").output
    build_help = invoke("build", "--help").output
    for flag in ("--backend", "--cuda-arch", "--jobs", "--json"):
        assert flag in build_help


def _one_line_error(result) -> str:
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("fusekit: error: ")
    return lines[0]


def test_commands_before_init_say_so(tmp_path: Path) -> None:
    for command in (["build"], ["status"], ["apply", str(TEST_PATCHES / "readme-note.patch")]):
        line = _one_line_error(invoke(*command, home=tmp_path / "h"))
        assert "run 'fusekit init' first" in line


def test_unknown_fusion_is_one_line(pinned_home: Path, example_data) -> None:
    line = _one_line_error(invoke("apply", "fusion-99", home=pinned_home))
    assert "unknown fusion 'fusion-99'" in line


def test_status_and_list_json(pinned_home: Path, example_data) -> None:
    import json

    assert json.loads(invoke("list", "--json").output)[0]["name"] == "fusion-9"
    info = json.loads(invoke("status", "--json", home=pinned_home).output)
    assert info["pin"].startswith("0c1e57098b")


def test_build_with_a_bad_backend(pinned_home: Path) -> None:
    result = invoke("build", "--backend", "rocm", home=pinned_home)
    assert result.exit_code == 2 and "rocm" in result.output
