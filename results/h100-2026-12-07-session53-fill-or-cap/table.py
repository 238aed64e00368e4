"""Prints README.md's tables from this folder's JSONs (run from this folder):

1. the one-token race, µs a node in calls 3 and 6 (stock, stock's A/A control, the stack + cap, + cap + full grid,
   + cap + full grid + fill-or-cap), with each variant's range of stock/variant over the two calls;
2. the A/A pairs of each call: stock against its control (same build, two processes) on every shape, and fill-or-cap
   against the build whose launch it shares (the cap where the plain grid has at most 3 CTAs an SM, else the full
   grid; the rule of tests/cpp/q8_stream_grid_test.cu, recomputed below for the 132 SMs of this H100). Per shape a
   signed time ratio (its sign changes from shape to shape within one pair of processes); over the shapes the median
   and largest slower / faster ratio, to set the spread between builds beside the spread of one build;
3. the spread within a contender: each (shape, contender)'s IQR over its 7 rounds, per call.
"""

import json
import math
from pathlib import Path

CALLS = {"call 3": "repeats/call-3/", "call 6": ""}
SUFFIXES = (  # the contender label's end -> the name in the tables, most specific first
    ("(A/A control)", "control"),
    ("fill-or-cap", "fill"),
    ("full-grid", "cap+full"),
    ("residency-cap", "cap"),
    ("stock", "stock"),
)
NAMES = ("stock", "control", "cap", "cap+full", "fill")
SM_COUNT, CTAS_PER_SM, WARPS_PER_CTA = 132, 4, 8


def short_name(label: str) -> str:
    return next(name for suffix, name in SUFFIXES if label.endswith(suffix))


def cases(folder: str) -> list[dict]:
    return json.loads(Path(folder, "race-mm.json").read_text())["payload"]["cases"]


def race(folder: str) -> dict[str, dict[str, float]]:
    """shape -> contender name -> µs a node (the race's median over its rounds)."""
    return {f"{c['m']}x{c['k']}": {short_name(k): v["us"] for k, v in c["contenders"].items()} for c in cases(folder)}


def fill_shares(nrows: int) -> str:
    """The build whose stream launch fill-or-cap repeats for a one-token table of nrows rows: the full grid where the
    plain grid puts more than 3 x SMs CTAs, else the cap."""
    per_warp = math.ceil(nrows / (SM_COUNT * CTAS_PER_SM * WARPS_PER_CTA))
    plain = math.ceil(math.ceil(nrows / per_warp) / WARPS_PER_CTA)
    return "cap+full" if plain > (CTAS_PER_SM - 1) * SM_COUNT else "cap"


def ratio(times: dict[str, float], a: str, b: str) -> float:
    return max(times[a], times[b]) / min(times[a], times[b])


def print_race(races: dict[str, dict[str, dict[str, float]]]) -> None:
    print("| shape | stock | control | cap | cap+full | fill |")
    print("|---|" + "---:|" * len(NAMES))
    for shape in races["call 3"]:
        cells = []
        for name in NAMES:
            times = [races[c][shape][name] for c in CALLS]
            stock = [races[c][shape]["stock"] for c in CALLS]
            text = " / ".join(f"{t:.2f}" for t in times)
            if name != "stock":
                text += f" ({min(stock) / max(times):.3f}-{max(stock) / min(times):.3f}x)"
            cells.append(text)
        print(f"| {shape.replace('x', ' x ')} | " + " | ".join(cells) + " |")


def print_aa(races: dict[str, dict[str, dict[str, float]]]) -> None:
    print("| shape | stock µs | fill shares | control / stock, call 3 | call 6 | fill / its twin, call 3 | call 6 |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for shape in races["call 3"]:  # signed here (time over time): above 1, the control or fill took longer
        twin = fill_shares(int(shape.split("x")[0]))
        row = [races[c][shape]["control"] / races[c][shape]["stock"] for c in CALLS]
        row += [races[c][shape]["fill"] / races[c][shape][twin] for c in CALLS]
        stock = races["call 3"][shape]["stock"]
        print(f"| {shape.replace('x', ' x ')} | {stock:.2f} | {twin} | " + " | ".join(f"{r:.3f}" for r in row) + " |")
    for call in CALLS:
        for label, twin in (("stock / control", False), ("fill / its twin", True)):
            pairs = {
                shape: ratio(times, "fill", fill_shares(int(shape.split("x")[0])))
                if twin
                else ratio(times, "stock", "control")
                for shape, times in races[call].items()
            }
            ratios = sorted(pairs.values())
            medium = sorted(r for shape, r in pairs.items() if races[call][shape]["stock"] >= 5.0)
            print(
                f"\n- {call}, {label}: median {ratios[len(ratios) // 2]:.3f}, largest {ratios[-1]:.3f}; shapes of 5 µs "
                f"or more ({len(medium)}): median {medium[len(medium) // 2]:.3f}, largest {medium[-1]:.3f}",
                end="",
            )
    print()


def print_iqr() -> None:
    print("| call | (shape, contender) pairs | IQR %, median | 90th percentile | largest |")
    print("|---|---:|---:|---:|---:|")
    for call, folder in CALLS.items():
        iqr = sorted(entry["iqr_pct"] for case in cases(folder) for entry in case["contenders"].values())
        row = [len(iqr), iqr[len(iqr) // 2], iqr[int(0.9 * len(iqr))], iqr[-1]]
        print(f"| {call} | {row[0]} | " + " | ".join(f"{x:.2f}" for x in row[1:]) + " |")


races = {call: race(folder) for call, folder in CALLS.items()}
print_race(races)
print()
print_aa(races)
print()
print_iqr()
