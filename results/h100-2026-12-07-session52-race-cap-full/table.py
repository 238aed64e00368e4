"""Prints README.md's tables from this folder's JSONs (run from this folder):

1. the one-token race, µs a node per call, with each variant's range of stock/variant over the calls (calls 1 and 3:
   the stack, + cap, + full grid; calls 5 and 6: + cap, + cap + full grid, + cap + full grid + fill-or-cap);
2. the product kernel's mean exclusive µs per launch in call 2's node profiles;
3. the A/A check: in one call, two builds whose launch of a shape is the same (same kernel, grid and rows), their
   ratio (slower / faster). The launches are the grids of tests/cpp/q8_stream_grid_test.cu's rule, recomputed below
   from the race's shape for the 132 SMs of these H100s;
4. 4096 x 2048 by round parity: the rounds alternate the contenders' order (the last contender follows itself across
   odd rounds' boundaries), so a position effect would part even rounds from odd ones;
5. the spread within a contender: each (shape, contender)'s IQR over its 7 rounds, per machine.
"""

import glob
import json
import math
from pathlib import Path

CALLS = {"call 1": "repeats/call-1/", "call 3": "", "call 5": "repeats/call-5/", "call 6": "repeats/call-6/"}
SUFFIXES = (  # the contender label's end -> the name in the tables, most specific first
    ("fill-or-cap", "fill"),
    ("residency-cap+fusion-5-stream-zzzzzz-full-grid", "cap+full"),
    ("full-grid", "full"),
    ("residency-cap", "cap"),
    ("mmvq-short-tables", "stack"),
    ("stock", "stock"),
)
VARIANTS = ("stack", "cap", "full", "cap+full", "fill")
SM_COUNT, CTAS_PER_SM, WARPS_PER_CTA = 132, 4, 8


def short_name(label: str) -> str:
    return next(name for suffix, name in SUFFIXES if label.endswith(suffix))


def race(folder: str) -> dict[str, dict[str, float]]:
    """shape -> contender name -> µs a node (the race's median over its rounds)."""
    cases = json.loads(Path(folder, "race-mm.json").read_text())["payload"]["cases"]
    return {f"{c['m']}x{c['k']}": {short_name(k): v["us"] for k, v in c["contenders"].items()} for c in cases}


def launch(variant: str, nrows: int) -> tuple[int, bool]:
    """(CTAs, capped) of the stream kernel's launch for a one-token table of nrows rows under a variant's rule."""
    most = SM_COUNT * CTAS_PER_SM
    per_warp = math.ceil(nrows / (most * WARPS_PER_CTA))
    plain = math.ceil(math.ceil(nrows / per_warp) / WARPS_PER_CTA)
    full = math.ceil(min(nrows, most * WARPS_PER_CTA) / WARPS_PER_CTA)
    fills = {"full": True, "cap+full": True, "fill": plain > (CTAS_PER_SM - 1) * SM_COUNT}.get(variant, False)
    ctas = full if fills else plain
    capped = variant != "stack" and variant != "full" and 2 <= math.ceil(ctas / SM_COUNT) < CTAS_PER_SM
    return ctas, capped


def print_race(races: dict[str, dict[str, dict[str, float]]]) -> None:
    print("| shape | calls | stock | " + " | ".join(VARIANTS) + " |")
    print("|---|---|" + "---:|" * (len(VARIANTS) + 1))
    for shape in races["call 1"]:
        for group in (("call 1", "call 3"), ("call 5", "call 6")):
            cells = []
            for name in ("stock", *VARIANTS):
                times = [races[c][shape][name] for c in group if name in races[c][shape]]
                if not times:
                    cells.append("")
                    continue
                stock = [races[c][shape]["stock"] for c in group]
                text = " / ".join(f"{t:.2f}" for t in times)
                if name != "stock":
                    text += f" ({min(stock) / max(times):.3f}-{max(stock) / min(times):.3f}x)"
                cells.append(text)
            print(f"| {shape.replace('x', ' x ')} | {', '.join(group)} | " + " | ".join(cells) + " |")


def product_us(path: str, side: str) -> float:
    """The product kernel's (not the quantize's) mean exclusive µs per launch on side a (stock) or b (the variant)."""
    kernels = json.loads(Path(path).read_text())["payload"]["comparison"]["kernels"]
    k = next(k for k in kernels if k[f"{side}_launches"] >= 10 and "quantize" not in k["key"])
    return k[f"{side}_exclusive_ns"] / k[f"{side}_launches"] / 1e3


def print_kernels() -> None:
    print("| shape | stock MMVQ | stack | cap | full |")
    print("|---|---:|---:|---:|---:|")
    for shape in ("6144x4096", "14336x4096"):
        # the file-name keys of the stack, + cap and + full grid; stock is side a of each
        paths = [
            glob.glob(f"node-profile-{shape}-{key}*.json")[0]
            for key in ("407758fe30fb", "531d9f148366", "eb61fbfe359e")
        ]
        cells = [f"{product_us(path, 'b'):.2f}" for path in paths]
        print(f"| {shape.replace('x', ' x ')} | {product_us(paths[0], 'a'):.2f} | " + " | ".join(cells) + " |")


def print_aa(races: dict[str, dict[str, dict[str, float]]]) -> None:
    print("| call | pair | shapes with the same launch | ratio, median | ratio, largest (shape) |")
    print("|---|---|---:|---:|---|")
    pairs = {("call 1", "call 3"): [("stack", "full"), ("cap", "full")], ("call 5", "call 6"): [
        ("cap", "cap+full"), ("cap", "fill"), ("cap+full", "fill")]}  # fmt: skip
    for calls, names in pairs.items():
        for call in calls:
            for a, b in names:
                ratios = {}
                for shape, times in races[call].items():
                    if launch(a, int(shape.split("x")[0])) == launch(b, int(shape.split("x")[0])):
                        ratios[shape] = max(times[a], times[b]) / min(times[a], times[b])
                worst = max(ratios, key=ratios.get)
                median = sorted(ratios.values())[len(ratios) // 2]
                print(f"| {call} | {a} / {b} | {len(ratios)} | {median:.3f} | {ratios[worst]:.3f} ({worst}) |")


def print_parity(shape: str = "4096x2048") -> None:
    print(f"| call | {shape.replace('x', ' x ')}: each contender's median µs, even rounds / odd rounds |")
    print("|---|---|")
    for call, folder in CALLS.items():
        cases = json.loads(Path(folder, "race-mm.json").read_text())["payload"]["cases"]
        case = next(c for c in cases if f"{c['m']}x{c['k']}" == shape)
        cells = []
        for label, entry in case["contenders"].items():
            even, odd = (sorted(x * 1e6 for x in entry["samples_s"][start::2]) for start in (0, 1))
            cells.append(f"{short_name(label)} {even[len(even) // 2]:.2f} / {odd[len(odd) // 2]:.2f}")
        print(f"| {call} | {'; '.join(cells)} |")


def print_iqr() -> None:
    print("| machine | calls | (shape, contender) pairs | IQR %, median | 90th percentile | largest |")
    print("|---|---|---:|---:|---:|---:|")
    for machine, calls in ((1, ("call 1", "call 3")), (2, ("call 5", "call 6"))):
        iqr = sorted(
            entry["iqr_pct"]
            for call in calls
            for case in json.loads(Path(CALLS[call], "race-mm.json").read_text())["payload"]["cases"]
            for entry in case["contenders"].values()
        )
        row = [len(iqr), iqr[len(iqr) // 2], iqr[int(0.9 * len(iqr))], iqr[-1]]
        print(f"| {machine} | {', '.join(calls)} | {row[0]} | " + " | ".join(f"{x:.2f}" for x in row[1:]) + " |")


races = {call: race(folder) for call, folder in CALLS.items()}
print_race(races)
print()
print_kernels()
print()
print_aa(races)
print()
print_parity()
print()
print_iqr()
