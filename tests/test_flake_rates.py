"""scripts/flake_rates.py: failure rates from the flake step's lines, on session 31's committed flake.txt."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "flake_rates.py"
spec = importlib.util.spec_from_file_location("flake_rates", SCRIPT)
assert spec is not None and spec.loader is not None
flake_rates = importlib.util.module_from_spec(spec)
spec.loader.exec_module(flake_rates)

FLAKE = REPO / "results" / "h200-2026-12-04-session31-z-pdl" / "flake.txt"


def test_session31_counts_and_the_empty_stock_selection() -> None:
    rows = flake_rates.rates(flake_rates.parse(FLAKE.read_text()), 0.177)
    assert [(r["setting"], r["failed"], r["empty"]) for r in rows] == [
        ("default", 0, True),
        ("GGML_CUDA_DISABLE_GRAPHS=1", 0, True),
        ("default", 3, False),
        ("GGML_CUDA_DISABLE_GRAPHS=1", 4, False),
        ("default", 6, False),
        ("GGML_CUDA_DISABLE_GRAPHS=1", 7, False),
    ]
    assert rows[0]["rate"] is None  # an empty selection is never a pass
    low, high = rows[2]["ci95"]
    assert low < 3 / 30 < high and all(r["expected_inside"] for r in rows[2:])


def test_an_expected_rate_outside_the_interval_is_said(tmp_path: Path) -> None:
    line = "fusion-5 default op=MUL_MAT params=type_a=q4_0, runs=30 failed=0 last: 1/1 tests passed\n"
    (rows,) = flake_rates.rates(flake_rates.parse(line), 0.5)
    assert rows["expected_inside"] is False
    out = tmp_path / "rates.json"
    assert flake_rates.main([str(FLAKE), "--json", str(out)]) == 0
    assert len(json.loads(out.read_text())["rows"]) == 6


def test_a_line_that_is_not_a_flake_line_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "flake.txt"
    bad.write_text("stock default op=MUL_MAT runs=3\n")
    assert flake_rates.main([str(bad)]) == 1
    assert "not a flake line" in capsys.readouterr().err
