"""Partial eval results in reports: `fusekit report FILE` and `--session DIR` label them, never as complete.

The partial results are the committed H200 35B eval cut back to its first speed rounds, their speed
payload recomputed by evals.runner.speed_payload as a stopped eval's checkpoint holds it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from evals.report import partial_text, render
from evals.results import read_result, write_result
from evals.runner import speed_payload
from evals.session_report import _evals
from fusekit.cli import main

from .conftest import REPO

EVAL_35B = REPO / "results" / "h200-2026-11-30-fusions" / "eval-all-35b.json"  # 6 sides, 3 rounds of 5 reps


@pytest.fixture(scope="module")
def eval_35b() -> dict[str, Any]:
    return read_result(EVAL_35B)


def _partial_35b(eval_35b: dict[str, Any], rounds: int, stopped_by: str | None) -> dict[str, Any]:
    """The committed 35B eval as if it had stopped after ``rounds`` of its 3 speed rounds."""
    result = copy.deepcopy(eval_35b)
    names = [v["name"] for v in result["variants"]]
    runs = result["payload"]["speed"]["runs"][: rounds * len(names)]
    result["payload"]["speed"] = speed_payload(runs, names, rounds)
    del result["payload"]["clocks"], result["finished"]
    steps = ["quality", "text", *(f"speed round {k} of 3" for k in range(1, rounds + 1))]
    result["partial"] = {"completed": steps, "stopped_by": stopped_by, "written": "2026-11-30T17:00:00+00:00"}
    return result


def test_the_report_labels_a_partial_result(eval_35b: dict[str, Any]) -> None:
    text = render(_partial_35b(eval_35b, 2, "llama-bench (stock) was killed by signal 9"), "eval-all-35b.partial.json")
    assert text.startswith("## Partial eval 2026-11-30T16:07:41+00:00 (eval-all-35b.partial.json)")
    assert (
        "**Partial result: completed quality, text, speed rounds 1-2 of 3; "
        "stopped by: llama-bench (stock) was killed by signal 9.**"
    ) in text
    assert "Speed: 2 of 3 rounds interleaved" in text
    assert "| tg128 | fusion-1+fusion-2+fusion-3+fusion-5 |" in text and "### KL divergence against stock" in text


def test_a_complete_result_has_no_partial_label(eval_35b: dict[str, Any]) -> None:
    text = render(eval_35b, "eval-all-35b.json")
    assert text.startswith("## Eval 2026-11-30T16:07:41+00:00") and "Partial" not in text
    assert "Speed: 3 rounds interleaved" in text


def test_partial_text_without_a_recorded_stop() -> None:
    text = partial_text({"completed": ["quality", "speed round 1 of 3"], "stopped_by": None})
    unknown = "not recorded (the process was killed, or is still running)"
    assert text == f"completed quality, speed round 1 of 3; stopped by: {unknown}"


def test_the_session_report_shows_a_partial_eval_once(tmp_path: Path, eval_35b: dict[str, Any]) -> None:
    partial = _partial_35b(eval_35b, 1, None)
    write_result(partial, tmp_path / "eval-all-35b.partial.json")
    write_result(partial, tmp_path / "eval-other.partial.json")
    write_result(eval_35b, tmp_path / "eval-all-35b.json")
    text = "\n".join(_evals(tmp_path))
    assert text.count("## Eval 2026-11-30T16:07:41+00:00 (eval-all-35b.json)") == 1
    assert "_`eval-all-35b.partial.json` left out: the finished eval's `eval-all-35b.json` is here._" in text
    assert text.count("## Partial eval") == 1 and "(eval-other.partial.json)" in text
    assert "completed quality, text, speed round 1 of 3; stopped by: not recorded" in text


def test_report_command_labels_a_partial_file(tmp_path: Path, eval_35b: dict[str, Any]) -> None:
    path = write_result(_partial_35b(eval_35b, 2, "KeyboardInterrupt"), tmp_path / "eval-all-35b.partial.json")
    done = CliRunner().invoke(main, ["report", str(path)])
    assert done.exit_code == 0, done.output
    assert "**Partial result: completed quality, text, speed rounds 1-2 of 3; stopped by: KeyboardInterrupt.**" in (
        done.output
    )
