"""Golden output: the report of a committed result from a real self-check run (stock, no-op, sabotage)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from evals.report import extensions_frame, kl_verdict, render, speed_frame
from evals.results import read_result
from fusekit.cli import main

DATA = Path(__file__).resolve().parent / "data" / "eval"
RESULT = DATA / "selfcheck-result.json"


def test_report_matches_the_golden_markdown() -> None:
    expected = (DATA / "selfcheck-report.md").read_text()
    assert render(read_result(RESULT), "selfcheck-result.json") == expected


def test_report_verdicts_come_from_the_stored_numbers() -> None:
    result = read_result(RESULT)
    kl = result["payload"]["quality"]["kl"]
    assert kl_verdict(kl["noop-comment"]) == "identical (log-probs byte for byte)"
    assert kl_verdict(kl["sabotage-rms-norm"]).startswith("different (mean KLD 0.005238")


def test_report_command_prints_every_check(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    done = CliRunner().invoke(main, ["report", str(RESULT), "-o", str(out)])
    assert done.exit_code == 0, done.output
    text = out.read_text()
    assert text.startswith("# fusekit report")
    for title in ("### Perplexity", "### KL divergence against stock", "### Text identity", "### Speed"):
        assert title in text


def test_one_process_a_side_is_never_taken_for_a_speed_change() -> None:
    """Session 37: one round called fusion-1-residual-norm 2.4% faster than its base [1.0045, 1.0516], though it
    fused nothing; ten rounds gave 0.9866 [0.9590, 1.0071]. The one-round rows now say what their interval misses."""
    folder = Path(__file__).resolve().parents[1] / "results" / "h100-2026-12-05-session37-residual-norm"
    one = read_result(folder / "eval-all-35b.json")
    assert all("one process a side" in note for note in speed_frame(one)["note"])
    assert "faster (one process a side)" in extensions_frame(one)["verdict"].tolist()
    ten = read_result(folder / "eval-decode-35b.json")
    assert not any("one process a side" in note for note in speed_frame(ten)["note"])
    assert extensions_frame(ten)["verdict"].tolist() == ["same"]
