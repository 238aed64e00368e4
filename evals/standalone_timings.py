"""Timing tables from the standalone kernel programs' JSON (q8-gemv, moe-router, chunked-gdn, glu-handoff, fusion-5's
MMVQ-order kernels, and fla's chunked gated delta rule as fusion-4's reference), for the session report.
Pure data to table: the report reads the files (evals/session_report.py).

The programs time every experiment of a kernel on the same data in one process; these tables set the
experiments side by side per shape so a report shows what an experiment gained before it reached ggml.
Only checked timings count: a row whose check failed shows its time struck out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TimingTable:
    """One table: its file, a line that says what it shows, headers and rows."""

    source: str
    caption: str
    headers: list[str]
    rows: list[list[Any]]


def _us(entry: dict[str, Any]) -> str:
    """Microseconds with two decimals; struck out when the entry's check failed."""
    text = f"{entry['us']:.2f}"
    return text if entry.get("ok", True) else f"~~{text}~~"


def q8_gemv_table(source: str, data: dict[str, Any]) -> TimingTable | None:
    """Per shape: the bandwidth floor and every experiment's time (µs), fastest in bold."""
    shapes = data.get("shapes", [])
    names: list[str] = []
    for shape in shapes:
        names += [name for name in shape.get("experiments", {}) if name not in names]
    if not names:
        return None
    rows = []
    for shape in shapes:
        experiments = shape.get("experiments", {})
        times = {name: experiments[name]["us"] for name in names if name in experiments and experiments[name]["ok"]}
        best = min(times.values(), default=None)
        cells = []
        for name in names:
            if name not in experiments:
                cells.append("")
                continue
            cell = _us(experiments[name])
            cells.append(f"**{cell}**" if experiments[name]["us"] == best else cell)
        what = f"{shape['what']} ({shape['weights']}, {shape['bytes'] / 1e6:.1f} MB)"
        rows.append([what, f"{shape['floor_us']:.2f}", *cells])
    caption = (
        "µs per call of each launch-shape experiment on the same weights (the floor: a 16-byte streaming read of "
        "the same bytes); the fastest checked time of a row in bold"
    )
    return TimingTable(source, caption, ["shape", "floor", *names], rows)


# The router experiments moe_router_check times beside the plain kernel: JSON key -> what it changes.
ROUTER_EXPERIMENTS = {
    "ahead": "its weights loaded before the grid-dependency wait",
    "rank": "its experts picked by rank (bits equal to the router's: yes/no)",
}


def moe_router_table(source: str, data: dict[str, Any]) -> TimingTable | None:
    """Per router case: the router kernel and each experiment timed beside it, with its ratio to the router (µs)."""
    cases = data.get("router", [])
    present = [key for key in ROUTER_EXPERIMENTS if any(key in case for case in cases)]
    if not present:
        return None
    headers = ["case", "n_embd", "experts", "used", "router"]
    for key in present:
        headers += [key, f"{key} / router"] + (["same bits"] if key == "rank" else [])
    rows = []
    for case in cases:
        row = [case["what"], case["n_embd"], case["n_expert"], case["n_used"], _us(case)]
        for key in present:
            entry = case.get(key)
            row += [_us(entry) if entry else "", f"{entry['us'] / case['us']:.3f}" if entry else ""]
            if key == "rank":
                row.append(("yes" if entry.get("same_bits_as_plain") else "**no**") if entry else "")
        rows.append(row)
    caption = "µs per call of the fused router, and with " + "; with ".join(ROUTER_EXPERIMENTS[k] for k in present)
    return TimingTable(source, caption, headers, rows)


STEP_2A = " (step 2a, TF32 two passes)"
# The three-pass steps (prep pass, chain of chunk states, output pass): their column label and the suffix of their rows.
THREE_PASS_STEPS = (
    ("step 2b", " (step 2b, three passes)", "step 2b"),  # after session 13
    ("step 2c", " (step 2c, padded shared rows)", "step 2c with its shared-memory rows padded against bank conflicts"),
)


def _three_pass_columns(label: str, entries: dict[str, dict[str, Any]]) -> tuple[list[str], Callable[[str], list[str]]]:
    """The columns of one three-pass step (the prep pass alone where the program timed it) and a row's cells."""
    with_prep = any("prep_median_us" in entry for entry in entries.values())
    headers = [label] + ([f"{label} prep pass"] if with_prep else []) + [f"{label} chain", f"{label} output pass"]
    headers.append(f"{label} error out / state")

    def cells(what: str) -> list[str]:
        entry = entries.get(what)
        if entry is None:
            return [""] * len(headers)
        prep = [f"{entry['prep_median_us']:.2f}" if "prep_median_us" in entry else ""] if with_prep else []
        return [
            _us({"us": entry["median_us"], "ok": entry["ok"]}),
            *prep,
            f"{entry['chain_median_us']:.2f}",
            f"{entry['output_median_us']:.2f}",
            f"{entry['err_out']:.1e} / {entry['err_state']:.1e}",
        ]

    return headers, cells


# Experiments around step 2c's passes, each checked whole with one pass replaced and timed: marker in "what" ->
# (column label, the keys of its time (the first one an entry has), caption). Step 2d replaces the chain ("... (step
# 2d, chain of 16 warps)"), step 3c and step 3f (on mma.sync) the output pass, step 3e the chain (on mma.sync), step
# 3h the chain (on mma.sync, B operands from TF32 copies), step 3d the prep pass (timed alone, or whole with the chain
# and the output pass its row names), step 3i the same with the record's Qe and QKm in TF32; steps 4a-4d (sessions
# 38-40) the chain with the state in registers and its variants, timed alone or whole; steps 4e and 4f (sessions 40-41)
# the prep pass, alone or whole; step 4g (session 41) the output pass; step 5a (session 41) two passes; step 4h
# (session 43) step 4f's prep pass with the values asked into the L2 early, alone or whole in two passes; step 4i
# (session 44) step 4f's prep pass with W and U0 sent out by the bulk copy, the same two ways; step 4j (session 44)
# step 4i's with QKm sent out that way too.
PASS_VARIANTS = {
    " (step 2d, ": (
        "step 2d chain",
        ("chain_median_us",),
        "step 2d: step 2c's prep and output passes around another chain, each checked whole, its chain timed alone "
        "(compare with step 2c's chain)",
    ),
    " (step 3c, ": (
        "step 3c output",
        ("output_median_us",),
        "step 3c: step 2c's prep pass and chain, then another output pass, each checked whole, its output pass timed "
        "alone (compare with step 2c's output pass)",
    ),
    " (step 3f, ": (
        "step 3f output",
        ("output_median_us",),
        "step 3f: step 2c's prep pass and chain, then the output pass with its products on mma.sync (every A element "
        "loaded up front, S0 and U staged in TF32), checked whole, its output pass timed alone (compare with step "
        "2c's output pass)",
    ),
    " (step 3e, ": (
        "step 3e chain",
        ("chain_median_us",),
        "step 3e: step 2c's prep and output passes around step 2c's chain with its products on mma.sync from shared "
        "memory, checked whole, its chain timed alone (compare with step 2c's chain)",
    ),
    " (step 3h, ": (
        "step 3h chain",
        ("chain_median_us",),
        "step 3h: step 2c's prep and output passes around step 3e's chain with its products' B operands (S0, U) read "
        "from TF32 copies written beside them, checked whole, its chain timed alone (compare with step 3e's chain)",
    ),
    " (step 3d, ": (
        "step 3d",
        ("prep_median_us", "median_us"),
        "step 3d: the prep pass on mma.sync with its operands read from shared memory, then step 2c's chain and an "
        "output pass, checked whole; timed as its column says: the prep pass alone (compare with step 2c's prep "
        "pass), or all three passes with the chain and the output pass the column names (compare with step 2c "
        "whole)",
    ),
    " (step 3i, ": (
        "step 3i",
        ("prep_median_us", "median_us"),
        "step 3i: step 3d's prep pass storing its TF32-only operands rounded (P, the scaled keys and values, the "
        "record's Qe and QKm), then a chain and step 3f's output pass reading them without rounding, checked whole; "
        "timed as its column says: the prep pass alone (compare with step 3d's), or all three passes with the chain "
        "the column names (compare with step 3d whole)",
    ),
    " (step 4a, ": (
        "step 4a",
        ("chain_median_us", "median_us"),
        "step 4a: the chain with the state in registers (warps of 16 value columns), checked whole between step 2c's "
        "prep and output passes and its chain timed alone (compare with step 3e's chain), or whole with step 3d's "
        "prep pass and step 3f's output pass (compare with step 3d whole)",
    ),
    " (step 4b, ": (
        "step 4b chain",
        ("chain_median_us",),
        "step 4b: step 4a's chain with each 16-column slice on a pair of warps, checked whole, its chain timed alone "
        "(compare with step 4a's chain)",
    ),
    " (step 4c, ": (
        "step 4c",
        ("chain_median_us", "median_us"),
        "step 4c: step 4a's chain with its staging copies and its stores at compile-time offsets (the same "
        "arithmetic), timed as step 4a is (compare with step 4a)",
    ),
    " (step 4d, ": (
        "step 4d",
        ("chain_median_us", "median_us"),
        "step 4d: step 4c's chain with its copies and stores spread through its two products, timed as step 4a is "
        "(compare with step 4c)",
    ),
    " (step 4e, ": (
        "step 4e",
        ("prep_median_us", "median_us"),
        "step 4e: step 3d's prep pass with its staging 16 bytes a load and its loops at compile-time offsets (the same "
        "record), timed alone (compare with step 3d's prep pass) or whole with step 4c's chain (compare with step 4c "
        "whole)",
    ),
    " (step 4f, ": (
        "step 4f",
        ("prep_median_us", "median_us"),
        "step 4f: step 4e's prep pass with its operands rounded to TF32 once where staged, tiles sharing their A "
        "fragment and the products' zero blocks skipped (step 4e's record value for value), timed alone (compare "
        "with step 4e's prep pass) or whole with step 4c's chain (compare with step 4e whole)",
    ),
    " (step 4g, ": (
        "step 4g",
        ("output_median_us", "median_us"),
        "step 4g: step 3f's output pass of 128 columns with its staging at compile-time offsets and its result "
        "stored from the fragments (step 3f's outputs bit for bit), timed alone (compare with step 3f's output pass) "
        "or whole after step 4f's prep pass and step 4c's chain (compare with step 4f whole)",
    ),
    " (step 5a, ": (
        "step 5a",
        ("chain_median_us", "median_us"),
        "step 5a: two passes, step 4f's prep pass (Qe and QKm stored in TF32) and a chain that computes the outputs "
        "too, timed as the chain alone (compare with step 4c's chain plus step 3f's output pass) or whole (compare "
        "with step 4g whole)",
    ),
    " (step 4h, ": (
        "step 4h",
        ("prep_median_us", "median_us"),
        "step 4h: step 4f's prep pass with each chunk's values asked into the L2 once its keys and queries are staged "
        "(step 4f's record bit for bit), timed alone (compare with step 4f's prep pass) or whole in two passes with "
        "step 5a's chain (compare with step 5a whole)",
    ),
    " (step 4i, ": (
        "step 4i",
        ("prep_median_us", "median_us"),
        "step 4i: step 4f's prep pass with the record's W and U0 staged in shared memory and sent out a row at a time "
        "by the bulk copy (cp.async.bulk, sm_90; step 4f's record bit for bit), timed alone (compare with step 4f's "
        "prep pass beside it) or whole in two passes with step 5a's chain (compare with step 5a whole beside it)",
    ),
    " (step 4j, ": (
        "step 4j",
        ("prep_median_us", "median_us"),
        "step 4j: step 4i's prep pass with the record's QKm also staged in shared memory (the solve's buffer, before "
        "the solve) and sent out by the bulk copy (step 4f's record bit for bit), timed alone or whole in two passes "
        "(compare with step 4i's beside it)",
    ),
}

# Rows comparing an experiment's output with that of the pass it replaces, float for float: suffix -> column.
RUN_COMPARISONS = {
    " (step 4f record against step 4e's)": "step 4f record against step 4e's: floats differing (largest difference)",
    " (step 4g output against step 3f's)": "step 4g output against step 3f's: floats differing (largest difference)",
    " (step 4h record against step 4f's)": "step 4h record against step 4f's: floats differing (largest difference)",
    " (step 4i record against step 4f's)": "step 4i record against step 4f's: floats differing (largest difference)",
    " (step 4j record against step 4f's)": "step 4j record against step 4f's: floats differing (largest difference)",
}


def _comparison_cell(entry: dict[str, Any] | None) -> str:
    """Floats differing (largest difference), and how many only one run wrote; empty without a comparison row."""
    if entry is None:
        return ""
    cell = f"{entry['differing_floats']} ({entry['max_abs_difference']:.1e})"
    one_sided = entry.get("one_sided_floats", 0)
    return cell + (f", **{one_sided} written by one run only**" if one_sided else "")


def _variant_us(entry: dict[str, Any], keys: tuple[str, ...]) -> float:
    """The time of a pass-variant entry: its first key present."""
    return next(entry[key] for key in keys if key in entry)


def _pass_variants(cases: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """The experiments' rows: (marker, variant) -> case -> entry, step by step, each in the program's order."""
    variants: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for marker in PASS_VARIANTS:
        for case in cases:
            what = case["what"]
            if marker in what and what.endswith(")"):
                name, variant = what.split(marker, 1)
                variants.setdefault((marker, variant[:-1]), {})[name] = case
    return variants


def chunked_gdn_table(source: str, data: dict[str, Any]) -> TimingTable | None:
    """Per case: the step-1 fp32 kernel, step 2a's two tensor-core passes and, where the program ran them, the
    three-pass steps (prep, chain, output; µs per layer), with their errors."""
    cases = data.get("cases", [])
    step_2a = {case["what"].removesuffix(STEP_2A): case for case in cases if case["what"].endswith(STEP_2A)}
    if not step_2a:
        return None
    headers = ["case", "step 1", "step 2a", "step 2a, 16 columns", "prep pass", "step 2a error out / state"]
    three_pass, described = [], []
    for label, suffix, description in THREE_PASS_STEPS:
        entries = {case["what"].removesuffix(suffix): case for case in cases if case["what"].endswith(suffix)}
        if entries:
            step_headers, cells = _three_pass_columns(label, entries)
            headers += step_headers
            three_pass.append(cells)
            described.append(description)
    variants = _pass_variants(cases)
    for (marker, variant), entries in variants.items():
        ctas = next(iter(entries.values())).get("ctas_per_sm")
        label = PASS_VARIANTS[marker][0]
        headers.append(f"{label}: {variant}" + (f" ({ctas} CTA per SM)" if ctas is not None else ""))
    compared = {
        suffix: {case["what"].removesuffix(suffix): case for case in cases if case["what"].endswith(suffix)}
        for suffix in RUN_COMPARISONS
    }
    compared = {suffix: entries for suffix, entries in compared.items() if entries}
    headers += [RUN_COMPARISONS[suffix] for suffix in compared]
    rows = []
    for case in cases:
        two = step_2a.get(case["what"])
        if two is None:
            continue
        row = [
            case["what"],
            _us({"us": case["median_us"], "ok": case["ok"]}),
            _us({"us": two["median_us"], "ok": two["ok"]}),
            _us({"us": two["median_us_16_columns"], "ok": two["ok"]}),
            f"{two['prep_median_us']:.2f}",
            f"{two['err_out']:.1e} / {two['err_state']:.1e} (limit {two['tolerance']:.0e})",
        ]
        for cells in three_pass:
            row += cells(case["what"])
        for (marker, _), entries in variants.items():
            entry = entries.get(case["what"])
            row.append(_us({"us": _variant_us(entry, PASS_VARIANTS[marker][1]), "ok": entry["ok"]}) if entry else "")
        for entries in compared.values():
            row.append(_comparison_cell(entries.get(case["what"])))
        rows.append(row)
    stock = data.get("stock_serial_us_t4096_h200")
    caption = (
        "µs per gated-delta-net layer: step 1 (fp32, one CTA per column slice, chunks in turn) and step 2a (a prep "
        "pass over all chunks, then the state pass; 32 or 16 value columns per CTA)"
    )
    if three_pass:
        caption += (
            "; the three-pass steps (the prep pass, the chain of chunk states, then the output pass over all chunks): "
            + ", and ".join(described)
        )
    for marker in dict.fromkeys(marker for marker, _ in variants):
        caption += "; " + PASS_VARIANTS[marker][2]
    if compared:
        caption += (
            "; the comparisons: the floats that differ between an experiment's output and that of the pass it "
            "replaces, each run into a NaN-poisoned buffer (under --sabotage the sabotaged run against the clean one)"
        )
    if stock:
        caption += (
            f"; the program then quoted issue #10's {stock[0]}-{stock[1]} µs for stock as T = 4096, but that figure is "
            "per 512-token call (ubatch) of a 4096-token prompt: stock's own timing is test-backend-ops perf "
            "(tbo-perf-gdn-stock.txt of a session that ran it)"
        )
    return TimingTable(source, caption, headers, rows)


def fla_gdn_table(source: str, data: dict[str, Any]) -> TimingTable | None:
    """flash-linear-attention's chunk_gated_delta_rule at the same shapes on the same host (scripts/fla_gdn_timing.py):
    per prompt length and dtype, the median and range of its CUDA-graph replays, or the error it raised."""
    cases = data.get("cases", [])
    if not cases:
        return None
    rows = []
    for case in cases:
        if "median_us" in case:
            timed = [f"{case['median_us']:.1f}", f"{case['min_us']:.1f}-{case['max_us']:.1f}", case.get("replays", "")]
            rows.append([case["T"], case["dtype"], *timed, "yes" if case.get("finite") else "**no**"])
        else:
            rows.append([case["T"], case["dtype"], "—", "—", "", f"error: {case.get('error', '?')}"])
    caption = (
        f"flash-linear-attention's `chunk_gated_delta_rule` (fla-core {data.get('fla_core', '?')}, Triton "
        f"{data.get('triton', '?')}, torch {data.get('torch', '?')}) on {data.get('device', '?')}, one sequence at the "
        f"35B layer's shapes, issue #10's reference; {data.get('timing', '')}"
    )
    return TimingTable(source, caption, ["T", "dtype", "median µs", "range µs", "replays", "outputs finite"], rows)


def glu_handoff_table(source: str, data: dict[str, Any]) -> TimingTable | None:
    """The GLU GEMV's q8_1 hand-offs (kernels/glu_handoff_check.cu): per variant its rows per CTA, cluster size, µs per
    evaluation under CUDA-graph replay, and what it adds to the GEMV alone; a failed check strikes its time out."""
    variants = data.get("variants", [])
    if not variants:
        return None
    alone = next((v for v in variants if "median_us" in v and v.get("cluster") == 1 and "ok_q" not in v), None)
    rows = []
    for v in variants:
        if "median_us" not in v:
            rows.append([v["name"], v["rows_per_cta"], v["cluster"], "not launchable", "", ""])
            continue
        ok = v.get("ok_y", False) and v.get("ok_q", True)
        added = f"{v['median_us'] - alone['median_us']:+.2f}" if alone is not None and v is not alone else ""
        checks = "y ok" if v.get("ok_y") else "**y wrong**"
        if "ok_q" in v:
            checks += ", q8_1 ok" if v["ok_q"] else f", **{v['bad_blocks']} q8_1 blocks wrong**"
        rows.append([v["name"], v["rows_per_cta"], v["cluster"], _us({"us": v["median_us"], "ok": ok}), added, checks])
    caption = (
        f"µs per evaluation of a one-token GLU GEMV over {data.get('rows', '?')} rows of {data.get('k', '?')} (half "
        "weights) and the q8_1 copy of its output, each way of handing the rows to the quantize; CUDA graphs of "
        f"{data.get('reps_per_graph', '?')} evaluations replayed, weights rotating past L2 (issue #7)"
    )
    headers = ["variant", "rows per CTA", "cluster", "µs", "over the GEMV alone", "checks"]
    return TimingTable(source, caption, headers, rows)


def rows_reader_table(source: str, data: dict[str, Any]) -> TimingTable | None:
    """#11's short tables (kernels/q8_rows_reader_check.cu): per shape every variant's median µs a node over the
    interleaved rounds, its range, ggml's node (the quantize launch + MMVQ) over it, and its checks; a failed check
    strikes the time out."""
    cases = data.get("cases", [])
    if not cases:
        return None
    rows = []
    for case in cases:
        variants = case.get("variants", [])
        separate = next((v["median_us"] for v in variants if v["name"] == "separate"), None)
        for v in variants:
            checks = "y ok" if v["ok"] else "**y wrong**"
            if v["rows_per_cta"] > 0:
                checks += ", bits = separate's" if v["same_y_as_separate"] else ", **bits differ from separate's**"
            ok = v["ok"] and (v["rows_per_cta"] <= 0 or v["same_y_as_separate"])
            rows.append(
                [
                    case["what"],
                    f"{case['bytes'] / 1e6:.1f}",
                    v["name"],
                    _us({"us": v["median_us"], "ok": ok}),
                    f"{v['min_us']:.2f}-{v['max_us']:.2f}",
                    f"{separate / v['median_us']:.3f}" if separate else "",
                    checks,
                ]
            )
    caption = (
        f"µs a node on {data.get('device', '?')}, the median of {data.get('rounds', '?')} interleaved rounds of "
        f"CUDA graphs ({data.get('reps_per_graph', '?')} nodes a graph, weights rotating past 4× the L2), with the "
        "range over rounds; separate: ggml's node (quantize launch + MMVQ), alone: MMVQ on a ready q8_1 copy, reader "
        "Rn: n rows a CTA quantizing x itself; × separate: separate's median over the variant's"
    )
    headers = ["shape", "MB", "variant", "median µs", "range µs", "× separate", "checks"]
    return TimingTable(source, caption, headers, rows)


FLOOR_KERNEL = "floor (16-byte read)"  # the stock-order timing's plain read of the same bytes


def stock_order_timing_table(source: str, data: dict[str, Any]) -> TimingTable | None:
    """fusion-5's MMVQ-order kernels against the stack's (tests/cpp/q8_stock_order_timing.cu): per shape every kernel
    timed in the same rounds, its median and range, its ratio to the shape's first kernel (the stack's), and, where
    the program recorded the table's bytes, its TB/s and the floor's time as a share of its own."""
    results = data.get("results", [])
    if not results:
        return None
    shapes: dict[str, list[dict[str, Any]]] = {}
    for entry in results:
        shapes.setdefault(entry["shape"], []).append(entry)
    rows = []
    for shape, entries in shapes.items():
        first = entries[0]["median_us"]
        floor = next((e["median_us"] for e in entries if e["kernel"] == FLOOR_KERNEL), None)
        for entry in entries:
            us = entry["median_us"]
            nbytes = entry.get("bytes")
            rows.append(
                [
                    shape,
                    f"{nbytes / 1e6:.1f}" if nbytes else "",
                    entry["kernel"],
                    f"{us:.2f}",
                    f"{entry['min_us']:.2f}-{entry['max_us']:.2f}",
                    f"{us / first:.3f}",
                    f"{nbytes / (us * 1e6):.2f}" if nbytes else "",
                    f"{100 * floor / us:.0f}%" if floor and entry["kernel"] != FLOOR_KERNEL else "",
                ]
            )
    rounds = results[0].get("rounds", "?")
    caption = (
        f"µs per launch of each kernel on {data.get('device', '?')} ({data.get('sm_count', '?')} SMs), the median of "
        f"{rounds} interleaved rounds of back-to-back launches over weight copies past 4× the L2, with the range over "
        "rounds; ratio: to the shape's first kernel (the stack's); TB/s: the table's bytes over the median; floor: a "
        "plain 16-byte read of the same bytes, timed the same way, as a share of each kernel's time"
    )
    headers = ["shape", "MB", "kernel", "median µs", "range µs", "ratio", "TB/s", "floor / kernel"]
    return TimingTable(source, caption, headers, rows)


# Which program's JSON (its file name in a session folder) makes which table; sabotage runs are not timings.
TABLE_MAKERS: dict[str, Callable[[str, dict[str, Any]], TimingTable | None]] = {
    "q8-gemv-standalone.json": q8_gemv_table,
    "moe-router-standalone.json": moe_router_table,
    "chunked-gdn-standalone.json": chunked_gdn_table,
    "fla-gdn-reference.json": fla_gdn_table,
    "glu-handoff-standalone.json": glu_handoff_table,
    "stock-order-timing.json": stock_order_timing_table,
    "q8-rows-reader-standalone.json": rows_reader_table,
}
