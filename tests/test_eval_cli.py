"""Fast CLI tests: documented flags exist, report refuses what is not an eval result."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from evals.results import new_result, write_result
from fusekit.cli import main


def test_eval_help_lists_the_documented_flags() -> None:
    done = CliRunner().invoke(main, ["eval", "--help"])
    assert done.exit_code == 0
    for flag in ("--ppl", "--kl", "--against", "--model", "--corpus", "--json", "--rounds", "--ctx", "--chunks", "-p"):
        assert flag in done.output


def test_report_help_lists_plot() -> None:
    done = CliRunner().invoke(main, ["report", "--help"])
    assert done.exit_code == 0 and "--plot" in done.output


def test_report_refuses_a_file_that_is_not_a_result(tmp_path: Path) -> None:
    bogus = tmp_path / "x.json"
    bogus.write_text(json.dumps({"hello": 1}))
    done = CliRunner().invoke(main, ["report", str(bogus)])
    assert done.exit_code == 1 and "is not a fusekit result file" in done.output


def test_report_refuses_another_kind(tmp_path: Path) -> None:
    path = write_result(new_result("profile", command=["fusekit", "profile"]), tmp_path / "p.json")
    done = CliRunner().invoke(main, ["report", str(path)])
    assert done.exit_code == 1 and "is a profile result, not an eval result" in done.output


def test_eval_without_a_workspace_says_init(tmp_path: Path) -> None:
    done = CliRunner().invoke(main, ["--home", str(tmp_path / "none"), "eval"])
    assert done.exit_code == 1 and "run 'fusekit init' first" in done.output
