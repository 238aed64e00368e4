"""``fusekit bench mulmat --processes N``: each contender timed in N worker processes with their rounds pooled, and
the report's spread between a contender's processes (session 53: stock and its A/A control, one build in two
processes, differed by up to 2.7-4.5% on medium shapes, far more than the rounds inside one process spread)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evals.results import read_result
from fusekit.build import BuildResult
from ggml_bridge.report import process_lines, render, speedup_estimate, split_by_process
from ggml_bridge.sweep import by_contender, process_spread

from .conftest import REPO
from .test_bridge_cli import TINY, one_error_line, run
from .test_bridge_control import fake_result


def test_the_help_explains_processes() -> None:
    code, output = run("bench", "mulmat", "--help")
    assert code == 0 and "--processes" in output and "3-5% between two processes" in " ".join(output.split())


def test_worker_samples_regroup_by_contender_then_process() -> None:
    # three contenders a, b, c in two processes: workers a0 b0 c0 a1 b1 c1
    samples = [[1.0], [2.0], [3.0], [1.5], [2.5], [3.5]]
    assert by_contender(samples, 3) == [[[1.0], [1.5]], [[2.0], [2.5]], [[3.0], [3.5]]]


def test_the_report_splits_pooled_samples_back_by_process() -> None:
    # the sweep pools process 0's rounds, then process 1's, ... (checked against process_us on the CPU below)
    assert split_by_process({"samples_s": [1, 2, 3, 4, 5, 6]}, 3) == [[1, 2], [3, 4], [5, 6]]


def test_the_process_spread_is_the_range_of_their_medians_over_their_median() -> None:
    spread = process_spread([[10e-6, 11e-6, 12e-6], [10.2e-6, 10.4e-6, 10.6e-6], [9.9e-6, 10.0e-6, 10.1e-6]])
    assert spread["process_us"] == pytest.approx([11.0, 10.4, 10.0])
    assert spread["process_spread_pct"] == pytest.approx(100 * (11.0 - 10.0) / 10.4)


def test_the_report_names_each_contenders_largest_process_spread() -> None:
    result = fake_result({"stock": [10.0, 20.0, 30.0], "mine": [9.0, 19.0, 28.0]}, control=False)
    assert process_lines(result) == []  # one process a contender: no line
    result["payload"]["spec"]["processes"] = 3
    for i, case in enumerate(result["payload"]["cases"]):
        case["contenders"]["stock"]["process_spread_pct"] = [1.0, 4.0, 2.0][i]
        case["contenders"]["mine"]["process_spread_pct"] = [0.5, 0.5, 3.0][i]
    lines = process_lines(result)
    assert lines[0].startswith("each contender timed in 3 processes")
    assert lines[1] == "- stock: median 2.0%, largest 4.0% (q8_0 2048x4096 n=1)"
    assert lines[2] == "- mine: median 0.5%, largest 3.0% (q8_0 3072x4096 n=1)"
    assert "in each of 3 processes a contender" in render(result)


def _timed(times: dict[str, list[list[float]]]) -> dict:
    """A one-case result whose contenders were timed in processes: label -> each process's rounds (µs)."""
    result = fake_result({label: [1.0] for label in times}, control=False)
    result["payload"]["spec"]["processes"] = len(next(iter(times.values())))
    for label, per_process in times.items():
        entry = result["payload"]["cases"][0]["contenders"][label]
        entry["samples_s"] = [x * 1e-6 for block in per_process for x in block]
        entry["us"] = float(np.median([x for block in per_process for x in block]))
        entry["process_spread_pct"] = 0.0
    return result


def test_a_speed_up_beyond_every_process_is_faster_and_one_inside_their_spread_a_tie() -> None:
    stock = [[10.0, 10.1, 10.0], [10.4, 10.5, 10.4], [9.8, 9.9, 9.8]]  # three processes, offsets up to 7%
    clear = [[9.0, 9.1, 9.0], [9.2, 9.1, 9.2], [8.9, 9.0, 8.9]]  # 10% faster than every stock process
    inside = [[9.8, 9.8, 9.9], [10.0, 10.1, 10.0], [9.7, 9.8, 9.7]]  # 2% faster: inside stock's process spread
    result = _timed({"stock": stock, "clear": clear, "inside": inside})
    case = result["payload"]["cases"][0]
    fast = speedup_estimate(result, case, "clear")
    assert fast is not None and fast.verdict == "faster" and fast.low > 1.04
    geometric = (10.0 * 10.4 * 9.8) ** (1 / 3) / (9.0 * 9.2 * 8.9) ** (1 / 3)  # of the process medians
    assert fast.ratio == pytest.approx(geometric) and fast.low * fast.high == pytest.approx(geometric**2)
    tie = speedup_estimate(result, case, "inside")
    assert tie is not None and tie.verdict == "same" and tie.low < 1 < tie.high
    lines = process_lines(result)
    assert "- clear: of 1 cases, faster than stock in 1, slower in 0, the interval holds 1 in 0" in lines
    assert "- inside: of 1 cases, faster than stock in 0, slower in 0, the interval holds 1 in 1" in lines
    assert f"{geometric:.3f} [{fast.low:.3f}, {fast.high:.3f}]" in render(result)  # the table's speed-up, its interval
    result["payload"]["spec"]["processes"] = 1
    assert speedup_estimate(result, case, "clear") is None  # one process a contender: no interval


@pytest.mark.slow
def test_processes_time_stock_in_two_workers_on_the_cpu(stock_build: BuildResult, tmp_path: Path) -> None:
    lib = ["--lib-dir", f"stock={stock_build.bin_dir}", "--backend", "CPU", "--threads", "1"]
    out = tmp_path / "two.json"
    code, output = run("bench", "mulmat", *lib, "--types", "q8_0", *TINY, "--processes", "2", "--out", str(out))
    assert code == 0, output
    result = read_result(out)
    assert result["payload"]["spec"]["processes"] == 2
    for case in result["payload"]["cases"]:
        entry = case["contenders"]["stock"]
        assert len(entry["samples_s"]) == 2 * 2  # 2 rounds in each of 2 processes, pooled
        assert len(entry["process_us"]) == 2 and entry["process_spread_pct"] >= 0
        # samples_s holds process 0's rounds, then process 1's (the report splits it so)
        assert [np.median(entry["samples_s"][p * 2 : p * 2 + 2]) * 1e6 for p in (0, 1)] == pytest.approx(
            entry["process_us"]
        )
        assert entry["check"]["passed"]
    # the checks ran in the first process only: as many as one process gives (3 token counts, 1 shape)
    assert len(result["payload"]["checks"]) == 3
    assert "each contender timed in 2 processes" in output
    code, output = run("bench", "mulmat", *lib, "--types", "q8_0", *TINY, "--processes", "2", "--check")
    assert code != 0 and "--processes times each contender" in one_error_line(output)


def test_long_contender_names_get_a_number_in_the_table_and_a_legend() -> None:
    """Session 54's race: the stack's spec (240 characters) made every row of race-mm.txt as wide; the table names it
    #1 and a header line says what #1 is. Short names (stock, its control) stay as they are."""
    result = json.loads((REPO / "results" / "h100-2026-12-07-session54-processes" / "race-mm.json").read_text())
    stack = result["variants"][1]["label"]
    assert len(stack) > 200
    text = render(result)
    assert f"in the table: #1 = {stack}" in text.splitlines()
    rows = [line for line in text.splitlines() if line.startswith("q8_0  4096x14336")]
    assert [row.split()[3] for row in rows] == ["stock", "#1", "stock"]  # then "(A/A control)"
    assert max(len(row) for row in rows) < 160
    assert "- #1: of 17 cases, faster than stock in 12, slower in 0, the interval holds 1 in 5" in text  # verdicts too
