"""The committed H200 baseline report is exactly what the report generator makes of the committed files."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from fusekit.cli import main
from fusekit.synth.gguflib import load_gguf
from fusekit.synth.presets import get_preset
from fusekit.synth.traffic import token_traffic
from fusekit.workspace import Workspace

from .conftest import REPO

BASELINE = REPO / "results" / "h200-2026-11-30-stock"


def test_committed_report_is_generated(pinned_home: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / "REPORT.md"
    result = CliRunner().invoke(
        main,
        ["--home", str(pinned_home), "report", "--baseline", str(BASELINE.relative_to(REPO)), "-o", str(out)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert out.read_text() == (BASELINE / "REPORT.md").read_text()


def test_token_traffic_accounts_for_the_whole_file(pinned_home: Path) -> None:
    model = json.loads((BASELINE / "model.json").read_text())
    gguf = load_gguf(Workspace(pinned_home).tree("stock") / "gguf-py")
    traffic = token_traffic(get_preset(model["preset"]), gguf, model["experts_type"], model["dense_type"])
    # Tensor data is all but the header (metadata, the tokenizer's vocab, alignment): a few MB.
    assert 0 < model["bytes"] - traffic.file_bytes < 16 * 2**20
    assert traffic.experts * 256 // 8 + traffic.dense < traffic.file_bytes


def test_not_a_baseline_folder(pinned_home: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["--home", str(pinned_home), "report", "--baseline", str(tmp_path)])
    assert result.exit_code == 1 and "is not a baseline batch folder" in result.output
