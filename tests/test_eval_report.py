"""Golden output: the report of a committed result from a real self-check run (stock, no-op, sabotage)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from evals.report import kl_verdict, render
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
