"""The eval report's clocks-and-spread table (evals/clock_spread.py), on session 16's committed decode eval: 15
processes a side whose medians spread 6-9% while the SM clock sat at 1980 MHz with no throttle reason."""

from __future__ import annotations

import copy
import json

from evals.clock_spread import side_spreads
from evals.report import clocks_frame, render

from .conftest import REPO

DECODE = REPO / "results" / "h200-2026-12-02-session16-decode-stalls" / "eval-decode-35b.json"


def _decode() -> dict:
    return json.loads(DECODE.read_text())


def test_the_decode_spread_came_with_flat_clocks() -> None:
    spreads = {entry.side: entry for entry in side_spreads(_decode()["payload"])}
    stock = spreads["stock"]
    assert stock.test == "tg128" and len(stock.medians) == 15
    assert round(100 * stock.spread, 1) == 6.7
    (gpu,) = stock.gpus
    assert (gpu.sm_mhz.low, gpu.sm_mhz.high) == (1980.0, 1980.0) and gpu.reasons == ()
    assert gpu.samples > 100  # the idle samples of each process's start are left out, the rest kept


def test_idle_samples_are_left_out_and_other_throttle_reasons_shown() -> None:
    result = _decode()
    samples = result["payload"]["clocks"]["samples"]
    idle = [s for s in samples if s["tag"].startswith("bench:stock:") and s["clocks.sm"] < 1000]
    assert idle and all(int(s["clocks_throttle_reasons.active"], 16) & 1 for s in idle)
    throttled = copy.deepcopy(next(s for s in samples if s["tag"] == "bench:stock:3" and s["clocks.sm"] == 1980.0))
    throttled.update({"clocks.sm": 1410.0, "clocks_throttle_reasons.active": "0x0000000000000004"})
    samples.append(throttled)
    row = clocks_frame(result).set_index("side").loc["stock"]
    assert row["SM MHz"] == "1410–1980" and row["throttle reasons besides idle"] == "0x0000000000000004"


def test_the_report_shows_the_table_after_the_speed_table_and_only_with_samples() -> None:
    result = _decode()
    text = render(result)
    assert text.index("### Speed") < text.index("### Clocks and spread during the timed runs")
    assert "| stock | tg128 | 15 | 222.14–237.12 | 6.7% | 1980 | 3201 |" in text
    result["payload"]["clocks"] = {"sampled": False, "samples": []}
    assert "### Clocks and spread" not in render(result)
