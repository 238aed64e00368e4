"""Prints README.md's tables from this folder's JSONs (run from this folder, with the repository's packages):

1. call 3's race (5 processes a contender): µs a node of stock and fill-or-cap, fill's speed-up and stock's A/A
   control with their 95% Welch t intervals over processes (ggml_bridge.report.speedup_estimates, as REPORT.md), and
   each contender's spread between its process medians;
2. calls 1 and 2 (3 processes a contender), the same speed-ups and intervals;
3. the A/A control's false calls (its interval excludes 1) in each call, by the interval the run printed (the
   two-level bootstrap of main at 6b1749f) and by the Welch t interval that replaced it;
4. call 3's interval half-widths;
5. the spread of each contender's process medians (the standard deviation of their logs around each case's mean, the
   SIGMA of coverage.py), and whether one process slot is fastest throughout: how often each slot had the fastest of
   the process medians, and its mean offset from the case's median of process medians.
"""

import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's evals and ggml_bridge

from evals.stats import BOOTSTRAP, WELCH, RatioEstimate
from ggml_bridge.report import speedup_estimate

CALLS = {"call 1": "repeats/call-1/", "call 2": "repeats/call-2/", "call 3": ""}
MMVQ_TABLES = ("512x2048", "640x2560", "2048x4096", "2048x6144")  # the stack falls back to stock MMVQ there


def load(folder: str) -> dict:
    return json.loads(Path(folder, "race-mm.json").read_text())


def short_name(label: str) -> str:
    return "control" if label.endswith("(A/A control)") else "fill" if label.endswith("fill-or-cap") else "stock"


def labels(result: dict) -> dict[str, str]:
    """short name -> the contender's label in the result"""
    return {short_name(v["label"]): v["label"] for v in result["variants"]}


def shape(case: dict) -> str:
    return f"{case['m']}x{case['k']}"


def estimate(result: dict, case: dict, name: str, method: str = WELCH) -> RatioEstimate:
    """stock's time over ``name``'s (a speed-up) with its interval over processes by ``method``, as REPORT.md's"""
    return speedup_estimate(result, case, labels(result)[name], method)


def cell(e: RatioEstimate) -> str:
    return f"{e.ratio:.3f} [{e.low:.3f}, {e.high:.3f}]" + (" **" + e.verdict + "**" if e.verdict != "same" else "")


def print_race(result: dict, spreads: bool) -> None:
    head = "| shape | stock µs | fill µs | fill: x stock | control: x stock |"
    print(head + (" spread % stock / fill / control |" if spreads else ""))
    print("|---|---:|---:|---|---|" + ("---:|" if spreads else ""))
    names = labels(result)
    for case in result["payload"]["cases"]:
        times = {n: case["contenders"][label] for n, label in names.items()}
        row = [shape(case).replace("x", " x "), f"{times['stock']['us']:.2f}", f"{times['fill']['us']:.2f}"]
        row += [cell(estimate(result, case, "fill")), cell(estimate(result, case, "control"))]
        if spreads:
            row.append(" / ".join(f"{times[n]['process_spread_pct']:.1f}" for n in ("stock", "fill", "control")))
        print("| " + " | ".join(row) + " |")


def print_false_calls(results: dict[str, dict]) -> None:
    print("| call | processes | control cases | excluded 1, bootstrap (as printed) | excluded 1, Welch t |")
    print("|---|---:|---:|---|---|")
    for call, result in results.items():
        cases = result["payload"]["cases"]
        row = [call, str(result["payload"]["spec"]["processes"]), str(len(cases))]
        for method in (BOOTSTRAP, WELCH):
            missed = [shape(c) for c in cases if estimate(result, c, "control", method).verdict != "same"]
            row.append(f"{len(missed)}" + (f" ({', '.join(missed)})" if missed else ""))
        print("| " + " | ".join(row) + " |")


def print_fill_on_mmvq(results: dict[str, dict]) -> None:
    print("| call | " + " | ".join(MMVQ_TABLES) + " |")
    print("|---|" + "---|" * len(MMVQ_TABLES))
    for call, result in results.items():
        by_shape = {shape(c): c for c in result["payload"]["cases"]}
        print(f"| {call} | " + " | ".join(cell(estimate(result, by_shape[s], "fill")) for s in MMVQ_TABLES) + " |")


def offset_sigma(result: dict, label: str) -> float:
    """The standard deviation (%) of a contender's log process medians around each case's mean, over all cases."""
    logs = [np.log(case["contenders"][label]["process_us"]) for case in result["payload"]["cases"]]
    return 100 * float(np.std(np.concatenate([x - x.mean() for x in logs])))


def rounds_sigma(result: dict, label: str) -> float:
    """The median (%) over cases and processes of the robust spread of a process's rounds: the interquartile range of
    their logs over 1.349 (a normal's standard deviation; one slow round does not set it), the WITHIN of coverage.py."""
    processes = result["payload"]["spec"]["processes"]
    spreads = []
    for case in result["payload"]["cases"]:
        logs = np.log(case["contenders"][label]["samples_s"])
        for block in np.split(logs, processes):  # process-major, as ggml_bridge.report.split_by_process
            q1, q3 = np.percentile(block, [25, 75])
            spreads.append((q3 - q1) / 1.349)
    return 100 * float(np.median(spreads))


def print_half_widths(result: dict) -> None:
    """Each interval's half-width (%, in the log: sqrt(high / low) - 1) over the shapes, per contender."""
    for name in ("fill", "control"):
        widths = sorted(
            (100 * (math.sqrt(e.high / e.low) - 1), shape(c))
            for c in result["payload"]["cases"]
            for e in [estimate(result, c, name)]
        )
        text = ", ".join(f"{w:.1f} ({s})" for w, s in widths)
        print(f"- {name}: {text}")


def print_slots(results: dict[str, dict]) -> None:
    print(
        "| call | contender | spread of process medians (sd of logs, %) | rounds within a process (robust sd, %) "
        "| cases each slot was fastest | mean offset of each slot, % |"
    )
    print("|---|---|---:|---:|---|---|")
    for call, result in results.items():
        for name, label in labels(result).items():
            count = result["payload"]["spec"]["processes"]
            fastest, offsets = [0] * count, [[] for _ in range(count)]
            for case in result["payload"]["cases"]:
                medians = case["contenders"][label]["process_us"]
                fastest[medians.index(min(medians))] += 1
                centre = sorted(medians)[count // 2]
                for slot, value in enumerate(medians):
                    offsets[slot].append(100 * math.log(value / centre))
            mean = [sum(o) / len(o) for o in offsets]
            sigma = offset_sigma(result, label)
            cells = f"{' / '.join(map(str, fastest))} | {' / '.join(f'{m:+.2f}' for m in mean)}"
            print(f"| {call} | {name} | {sigma:.2f} | {rounds_sigma(result, label):.2f} | {cells} |")


results = {call: load(folder) for call, folder in CALLS.items()}
print("Call 3, 5 processes a contender:\n")
print_race(results["call 3"], spreads=True)
for call in ("call 1", "call 2"):
    print(f"\n{call.capitalize()}, 3 processes a contender:\n")
    print_race(results[call], spreads=False)
print("\nCall 3's interval half-widths, %, narrowest first:\n")
print_half_widths(results["call 3"])
print("\nStock's A/A control against stock:\n")
print_false_calls(results)
print("\nFill-or-cap on the four tables where the stack runs stock's MMVQ:\n")
print_fill_on_mmvq(results)
print("\nProcess slots (process p of every contender runs before process p + 1 of any):\n")
print_slots(results)
