"""A variant's KL read against a control's (a pure fp32 order change of stock) in the same eval."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from evals.kl_control import MeanKld, against_control, control_cells, is_control
from evals.report import render

REPO = Path(__file__).resolve().parents[1]
CONTROL_RUN = REPO / "results" / "h200-2026-12-01-session7-control"


def entry(value: float, error: float, identical: bool = False) -> dict:
    text = f"Mean    KLD:   {value:.6f} ±   {error:.6f}"
    return {"logprobs_identical": identical, "statistics": {"Mean KLD": {"value": value, "error": error, "text": text}}}


def test_a_control_is_named_by_its_prefix() -> None:
    assert is_control("control-q8-reduce-order")
    assert not is_control("fusion-5") and not is_control("fusion-5+control-no-pdl")


def test_within_two_combined_errors_is_like_the_control() -> None:
    cell = against_control(MeanKld(0.370566, 0.003797), MeanKld(0.363358, 0.003770), "c")
    assert cell == "1.020× c: like the control"


def test_a_larger_kl_is_above_the_control_with_its_distance() -> None:
    """The sabotage of the reading: a KL well above the control's must not pass as like it."""
    cell = against_control(MeanKld(0.40, 0.004), MeanKld(0.36, 0.004), "c")
    assert cell.startswith("1.111× c: above the control (7.1 σ)")


def test_a_much_smaller_kl_is_below_the_control() -> None:
    assert against_control(MeanKld(0.10, 0.004), MeanKld(0.36, 0.004), "c").endswith("below the control")


def test_cells_skip_controls_identical_variants_and_missing_statistics() -> None:
    kl = {
        "control-x": entry(0.36, 0.004),
        "fusion-1": entry(0.0, 0.0, identical=True),
        "fusion-5": entry(0.37, 0.004),
        "broken": {"logprobs_identical": False, "statistics": {}},
    }
    cells = control_cells(kl)
    assert cells["control-x"] == "" and cells["fusion-1"] == "" and cells["broken"] == ""
    assert cells["fusion-5"] == "1.028× control-x: like the control"


def test_no_control_no_column() -> None:
    assert control_cells({"fusion-5": entry(0.37, 0.004)}) == {"fusion-5": ""}


def test_the_committed_control_run_reads_fusion5_as_like_the_control_on_both_models() -> None:
    for name in ("eval-control-35b.json", "eval-control-llama8b.json"):
        text = render(json.loads((CONTROL_RUN / name).read_text()))
        assert "mean KLD against the control" in text
        row = next(line for line in text.splitlines() if line.startswith("| fusion-5 |") and "mean KLD" in line)
        assert "control-q8-reduce-order: like the control" in row, row


def test_a_report_without_a_control_keeps_its_columns() -> None:
    result = json.loads((CONTROL_RUN / "eval-control-35b.json").read_text())
    result = copy.deepcopy(result)
    kl = result["payload"]["quality"]["kl"]
    kl.pop("control-q8-reduce-order")
    assert "against the control" not in render(result)
