"""``fusekit bench mulmat --control``: the first contender raced twice (an A/A control), and the report's spread and
its verdicts (session 52: identical launches in different builds differed by up to about 3% in one race)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals.results import read_result
from fusekit.build import BuildResult
from ggml_bridge.report import control_lines, control_spreads, render

from .test_bridge_cli import TINY, one_error_line, run

CONTROL = "stock (A/A control)"


def fake_result(times: dict[str, list[float]], control: bool = True) -> dict:
    """A bench-mulmat result with one q8_0 case per position of the time lists (µs per contender)."""
    labels = list(times)
    variants = [{"label": label, "lib_dir": f"/builds/{label}"} for label in labels]
    if control:
        variants[labels.index(CONTROL)]["control_of"] = "stock"
    cases = []
    for i in range(len(times["stock"])):
        contenders = {
            label: {"us": times[label][i], "check": {"passed": True, "nmse": 1e-5}, "iqr_pct": 0.5} for label in labels
        }
        cases.append({"type": "q8_0", "m": 1024 * (i + 1), "k": 4096, "n": 1, "contenders": contenders})
    spec = {"check_only": False, "sabotage": False, "rounds": 7, "reps": 3, "seed": 1234}
    payload = {"spec": spec, "device": {"name": "CUDA0", "description": "test"}, "cache_bytes": 50 << 20}
    payload.update(cache_source="device", cases=cases, checks=[], skipped=[])
    return {"variants": variants, "payload": payload, "created": "now", "llama_cpp": {"commit": "0c1e57098b"}}


def test_the_spread_is_the_ratio_of_the_first_contender_to_itself() -> None:
    result = fake_result({"stock": [10.0, 20.0, 30.0], CONTROL: [10.2, 19.0, 30.0], "mine": [9.0, 19.8, 25.0]})
    spreads = control_spreads(result)
    want = {"q8_0 1024x4096 n=1": 1.02, "q8_0 2048x4096 n=1": 20 / 19, "q8_0 3072x4096 n=1": 1}
    assert spreads == pytest.approx(want)
    lines = control_lines(result)
    assert "spread median 2.0%, largest 5.3% (q8_0 2048x4096 n=1)" in lines[0]
    # 10 / 9 = 1.111 and 30 / 25 = 1.2 are beyond 1.053; 20 / 19.8 = 1.010 is faster but inside it: a tie
    assert lines[1] == "- mine: of 3 cases, faster than stock beyond it in 2, slower beyond it in 0, a tie in 1"
    assert "A/A control (stock raced twice" in render(result)


def test_a_difference_inside_the_spread_is_a_tie_and_one_beyond_it_a_loss() -> None:
    result = fake_result({"stock": [10.0, 10.0], CONTROL: [10.3, 10.0], "mine": [10.25, 10.4]})
    verdict = "- mine: of 2 cases, faster than stock beyond it in 0, slower beyond it in 1, a tie in 1"
    assert control_lines(result)[1] == verdict


def test_without_a_control_the_report_has_no_spread() -> None:
    result = fake_result({"stock": [10.0], "mine": [9.0]}, control=False)
    assert control_spreads(result) == {} and control_lines(result) == []
    assert "A/A control" not in render(result)


@pytest.mark.slow
def test_control_races_stock_twice_on_the_cpu(stock_build: BuildResult, tmp_path: Path) -> None:
    lib = ["--lib-dir", f"stock={stock_build.bin_dir}", "--backend", "CPU", "--threads", "1"]
    out = tmp_path / "aa.json"
    code, output = run("bench", "mulmat", *lib, "--types", "q8_0", *TINY, "--control", "--out", str(out))
    assert code == 0, output
    result = read_result(out)
    assert [v["label"] for v in result["variants"]] == ["stock", CONTROL]
    assert result["variants"][1]["control_of"] == "stock"
    for case in result["payload"]["cases"]:
        first, again = case["contenders"]["stock"], case["contenders"][CONTROL]
        assert first["weights_sha256"] == again["weights_sha256"] and again["check"]["passed"]
    assert len(control_spreads(result)) == 2  # 1 and 8 tokens
    assert "A/A control (stock raced twice, in two processes): spread median" in output
    code, output = run("bench", "mulmat", *lib, "--types", "q8_0", *TINY, "--control", "--check")
    assert code != 0 and "--control times the first contender twice" in one_error_line(output)
