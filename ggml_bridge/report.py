"""Render a ``bench-mulmat`` result as text (reads only; never runs anything)."""

from __future__ import annotations

import statistics
from typing import Any

from evals.stats import CONFIDENCE, INTERVAL_METHOD, RatioEstimate, grouped_ratio_estimate
from fusekit.console import table

from .constants import CONTROL_TYPES


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def expected_to_fail(check: dict[str, Any]) -> bool:
    """Shifted expert ids, and sabotaged quantized weights, must fail; everything else must pass."""
    return bool(check.get("expect_fail")) or (check["sabotaged"] and check["type_name"] not in CONTROL_TYPES)


def check_counts(payload: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Checks split by outcome: ``passed``, ``failed``, and ``unexpected`` (the outcome was not the expected one)."""
    out: dict[str, list[dict[str, Any]]] = {"passed": [], "failed": [], "unexpected": []}
    for check in payload["checks"]:
        out["passed" if check["passed"] else "failed"].append(check)
        if check["passed"] == expected_to_fail(check):
            out["unexpected"].append(check)
    return out


def _check_line(c: dict[str, Any]) -> str:
    verdict = "passed" if c["passed"] else "failed"
    return f"{c['op']} {c['type_name']} {c['m']}x{c['k']} n={c['n']} {verdict}: nmse {c['nmse']:.2e}"


def _case_name(case: dict[str, Any]) -> str:
    return f"{case['type']} {case['m']}x{case['k']} n={case['n']}"


def _control(result: dict[str, Any]) -> dict[str, Any] | None:
    """The variant record of the sweep's A/A control (``--control``), or None."""
    return next((v for v in result["variants"] if v.get("control_of")), None)


def _spreads(result: dict[str, Any], control: dict[str, Any]) -> dict[str, float]:
    spreads = {}
    for case in result["payload"]["cases"]:
        first, again = (case["contenders"][label].get("us") for label in (control["control_of"], control["label"]))
        if first and again:
            spreads[_case_name(case)] = max(first, again) / min(first, again)
    return spreads


def control_spreads(result: dict[str, Any]) -> dict[str, float]:
    """Per timed case, the A/A ratio (slower over faster) of the first contender and its control (``--control``);
    empty when the sweep had no control."""
    control = _control(result)
    return {} if control is None else _spreads(result, control)


def _named(label: str, names: dict[str, str] | None) -> str:
    """``label`` as ``names`` (:func:`shown_labels`) shows it, or itself."""
    return (names or {}).get(label, label)


def control_lines(result: dict[str, Any], names: dict[str, str] | None = None) -> list[str]:
    """The A/A spread and, for each variant, its cases faster or slower than the first contender by more than the
    largest A/A ratio of the sweep (the rest are ties); nothing without a control; ``names`` shortens labels
    (:func:`shown_labels`). With 2+ processes a contender the spread line only: each case's interval over processes
    (:func:`process_lines`) gives the verdicts, and one band for the whole sweep would let its noisiest case decide
    every other."""
    control = _control(result)
    spreads = _spreads(result, control) if control is not None else {}
    if control is None or not spreads:  # no control, or a check-only sweep
        return []
    base = control["control_of"]
    worst = max(spreads, key=spreads.__getitem__)
    band = spreads[worst]
    processes = _processes(result)
    spread = (
        f"spread median {100 * (statistics.median(spreads.values()) - 1):.1f}%, largest {100 * (band - 1):.1f}% "
        f"({worst})"
    )
    if processes > 1:
        return [
            f"A/A control ({base} raced twice, in {processes} processes each, rounds pooled): {spread}; the verdicts "
            "come from each case's interval over processes"
        ]
    lines = [
        f"A/A control ({base} raced twice, in two processes): {spread}; a variant within the largest spread of "
        f"{base}'s time is a tie"
    ]
    for variant in result["variants"]:
        if variant["label"] in (base, control["label"]):
            continue
        ratios = [
            case["contenders"][base]["us"] / case["contenders"][variant["label"]]["us"]
            for case in result["payload"]["cases"]
            if _case_name(case) in spreads and case["contenders"][variant["label"]].get("us")
        ]
        faster = sum(r > band for r in ratios)
        slower = sum(r < 1 / band for r in ratios)
        lines.append(
            f"- {_named(variant['label'], names)}: of {len(ratios)} cases, faster than "
            f"{base} beyond it in {faster}, "
            f"slower beyond it in {slower}, a tie in {len(ratios) - faster - slower}"
        )
    return lines


def _processes(result: dict[str, Any]) -> int:
    return int(result["payload"]["spec"].get("processes", 1))


def split_by_process(entry: dict[str, Any], processes: int) -> list[list[float]]:
    """A contender's samples split by process: ``samples_s`` holds process 0's rounds, then process 1's, ..."""
    samples = entry["samples_s"]
    size = len(samples) // processes
    return [samples[p * size : (p + 1) * size] for p in range(processes)]


def speedup_estimate(
    result: dict[str, Any], case: dict[str, Any], label: str, method: str = INTERVAL_METHOD
) -> RatioEstimate | None:
    """The first contender's time over ``label``'s (a speed-up: the ratio of the geometric means of their process
    medians) with its Welch t interval over processes (evals.stats.grouped_ratio_estimate; ``method`` picks another),
    or None with one process a contender or no timing."""
    processes = _processes(result)
    base = result["variants"][0]["label"]
    first, other = case["contenders"][base], case["contenders"][label]
    if processes < 2 or "samples_s" not in first or "samples_s" not in other:
        return None
    # as grouped_ratio_estimate's variant / stock of medians: the base's times over the contender's
    return grouped_ratio_estimate(split_by_process(other, processes), split_by_process(first, processes), method)


def speedup_estimates(result: dict[str, Any]) -> dict[tuple[str, str], RatioEstimate]:
    """(case name, contender label) -> :func:`speedup_estimate` for every contender after the first; empty with one
    process a contender. Computed once for the table and the verdict lines."""
    if _processes(result) < 2:
        return {}
    estimates = {}
    for case in result["payload"]["cases"]:
        for variant in result["variants"][1:]:
            estimate = speedup_estimate(result, case, variant["label"])
            if estimate is not None:
                estimates[(_case_name(case), variant["label"])] = estimate
    return estimates


def interval_text(estimate: RatioEstimate) -> str:
    """A speed-up with its interval, as the bench table and the session report show it: ``1.068 [1.042, 1.095]``."""
    return f"{estimate.ratio:.3f} [{estimate.low:.3f}, {estimate.high:.3f}]"


def estimate_of(
    estimates: dict[tuple[str, str], RatioEstimate], case: dict[str, Any], label: str
) -> RatioEstimate | None:
    """``label``'s entry of :func:`speedup_estimates` for one case, or None (one process a contender)."""
    return estimates.get((_case_name(case), label))


def process_lines(
    result: dict[str, Any],
    estimates: dict[tuple[str, str], RatioEstimate] | None = None,
    names: dict[str, str] | None = None,
) -> list[str]:
    """With --processes N > 1: how far each contender's processes parted (the spread between their medians, as a
    share of their median), over the sweep's timed cases, and each variant's verdicts by its interval (``estimates``,
    from :func:`speedup_estimates` when not given); nothing with one process a contender. ``names`` shortens labels
    (:func:`shown_labels`)."""
    processes = _processes(result)
    if processes < 2:
        return []
    lines = [f"each contender timed in {processes} processes, rounds pooled; spread between its processes' medians:"]
    for variant in result["variants"]:
        spreads = {
            _case_name(case): entry["process_spread_pct"]
            for case in result["payload"]["cases"]
            if "process_spread_pct" in (entry := case["contenders"][variant["label"]])
        }
        if spreads:
            worst = max(spreads, key=spreads.__getitem__)
            lines.append(
                f"- {_named(variant['label'], names)}: median "
                f"{statistics.median(spreads.values()):.1f}%, "
                f"largest {spreads[worst]:.1f}% ({worst})"
            )
    base = result["variants"][0]["label"]
    interval = f"{100 * CONFIDENCE:.0f}% Welch t interval over processes"
    lines.append(f"speed-up over {base} (of the geometric means of process medians) with its {interval}:")
    estimates = speedup_estimates(result) if estimates is None else estimates
    for variant in result["variants"][1:]:
        verdicts = [estimate.verdict for (_, label), estimate in estimates.items() if label == variant["label"]]
        if verdicts:
            faster, slower = verdicts.count("faster"), verdicts.count("slower")
            lines.append(
                f"- {_named(variant['label'], names)}: of {len(verdicts)} cases, faster than "
                f"{base} in {faster}, slower in {slower}, "
                f"the interval holds 1 in {len(verdicts) - faster - slower}"
            )
    return lines


LONGEST_SHOWN_LABEL = 40  # a stack's spec names 7 patches (240 characters): longer labels get a number in the table


def shown_labels(labels: list[str]) -> dict[str, str]:
    """label -> its name in the table: itself, or ``#i`` (its place among the contenders) when it is longer than
    LONGEST_SHOWN_LABEL characters."""
    return {label: label if len(label) <= LONGEST_SHOWN_LABEL else f"#{i}" for i, label in enumerate(labels)}


def render(result: dict[str, Any]) -> str:
    """Header lines, one row per (type, shape, tokens, contender), and the skipped shapes."""
    p = result["payload"]
    spec = p["spec"]
    labels = [v["label"] for v in result["variants"]]
    shown = shown_labels(labels)
    dev = p["device"]
    mode = "checks only" if spec["check_only"] else f"{spec['rounds']} rounds × {spec['reps']} graph runs each"
    if _processes(result) > 1 and not spec["check_only"]:
        mode += f" in each of {_processes(result)} processes a contender"
    if spec["sabotage"]:
        mode += "; SABOTAGE MODE (packed weights corrupted)"
    lines = [
        f"bench mulmat on {dev['name']} ({dev['description']}), {result['created']}",
        f"llama.cpp {result['llama_cpp']['commit'][:10]}; contenders: "
        + ", ".join(f"{v['label']} ({v['lib_dir']})" for v in result["variants"]),
        f"cache to defeat: {p['cache_bytes'] >> 20} MiB ({p['cache_source']}); seed {spec['seed']}; {mode}",
    ]
    lines += [f"in the table: {shown[label]} = {label}" for label in labels if shown[label] != label]
    roof = p.get("roofline")
    if roof:
        lines.append(f"memory roofline (f32 copy, read + write): {roof['gb_s']:.1f} GB/s")
        lines.append(f"time per node = {p['timing_includes']}")
    estimates = speedup_estimates(result)
    rows = []
    for case in p["cases"]:
        base_us = case["contenders"].get(labels[0], {}).get("us")
        for label in labels:
            e = case["contenders"][label]
            chk = e["check"]
            verdict = f"{'ok' if chk['passed'] else 'FAIL'} {chk['nmse']:.1e}"
            us = e.get("us")
            speed = f"{base_us / us:.3f}" if (us and base_us and label != labels[0]) else ""
            estimate = estimate_of(estimates, case, label) if speed else None
            if estimate is not None:  # the interval's own centre: geometric means of process medians
                speed = interval_text(estimate)
            rows.append(
                [
                    case["type"],
                    f"{case['m']}x{case['k']}",
                    case["n"],
                    shown[label],
                    verdict,
                    _fmt(us, ".2f"),
                    _fmt(e.get("iqr_pct"), ".1f"),
                    _fmt(e.get("gb_s"), ".1f"),
                    _fmt(e.get("roofline_pct"), ".1f"),
                    _fmt(e.get("tflop_s"), ".3f"),
                    speed,
                    case.get("copies", ""),
                ]
            )
    headers = ["type", "MxK", "n", "variant", "check (nmse)", "us", "IQR%", "GB/s", "%roof", "TFLOP/s"]
    lines += ["", table([*headers, f"x vs {shown[labels[0]]}", "copies"], rows)]
    spread = control_lines(result, shown) + process_lines(result, estimates, shown)
    if spread:
        lines += ["", *spread]
    if p.get("skipped"):
        lines += ["", "skipped (K not a multiple of the type's block):", *(f"  {s}" for s in p["skipped"])]
    counts = check_counts(p)
    lines += [
        "",
        f"checks: {len(counts['passed'])} passed, {len(counts['failed'])} failed, "
        f"{len(counts['unexpected'])} not as expected (must-fail checks: sabotaged quantized weights, shifted ids)",
    ]
    lines += [f"  unexpected: {c['contender']}: {_check_line(c)}" for c in counts["unexpected"]]
    return "\n".join(lines)
