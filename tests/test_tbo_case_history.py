"""scripts/tbo_case_history.py: one test-backend-ops case across committed logs, sabotaged runs left out; and the
Wilson interval it and scripts/one_value_nmse.py report (evals/stats.py)."""

from __future__ import annotations

import importlib.util
import json
import lzma
from pathlib import Path

import pytest

from evals.stats import wilson_interval

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "tbo_case_history.py"
spec = importlib.util.spec_from_file_location("tbo_case_history", SCRIPT)
assert spec is not None and spec.loader is not None
history = importlib.util.module_from_spec(spec)
spec.loader.exec_module(history)

CASE = "MUL_MAT(type_a=q4_0,type_b=f32,m=1,n=1,k=256,"


def log(case_line: str, passed: int, total: int = 1334) -> str:
    return f"  MUL_MAT(type_a=q8_0,m=7): OK\n{case_line}\n  {passed}/{total} tests passed\n"


def test_counts_the_case_in_sound_runs_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = tmp_path / "results" / "s" / "logs"
    logs.mkdir(parents=True)
    (logs / "a-MUL_MAT.log").write_text(log(f"  {CASE}bs=[1,1]): OK", 1334))
    failing = f"[MUL_MAT] ERR = 61.1 > 0.0005   {CASE}bs=[1,1]): FAIL"
    (logs / "b-MUL_MAT.log.xz").write_bytes(lzma.compress(log(failing, 1333).encode()))
    (logs / "c-MUL_MAT.log").write_text(log(failing, 1278))  # a sabotaged build: 56 failures, left out
    (logs / "d-MUL_MAT.log").write_text(log("  MUL_MAT(type_a=f16): OK", 1334))  # the case not in it
    monkeypatch.chdir(tmp_path)
    assert history.main([CASE, "--json", "out.json"]) == 0
    data = json.loads((tmp_path / "out.json").read_text())
    assert [(Path(r["log"]).name, r["outcome"]) for r in data["runs"]] == [
        ("a-MUL_MAT.log", "ok"),
        ("b-MUL_MAT.log.xz", "fail"),
    ]
    assert data["failed"] == 1 and data["command"].startswith("python3 scripts/tbo_case_history.py 'MUL_MAT(")


def test_wilson_interval() -> None:
    low, high = wilson_interval(2, 20)
    assert round(low, 4) == 0.0279 and round(high, 4) == 0.3010
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == pytest.approx(1.0)
