"""Render a ``bench-mulmat`` result as text (reads only; never runs anything)."""

from __future__ import annotations

from typing import Any

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


def render(result: dict[str, Any]) -> str:
    """Header lines, one row per (type, shape, tokens, contender), and the skipped shapes."""
    p = result["payload"]
    spec = p["spec"]
    labels = [v["label"] for v in result["variants"]]
    dev = p["device"]
    mode = "checks only" if spec["check_only"] else f"{spec['rounds']} rounds × {spec['reps']} graph runs each"
    if spec["sabotage"]:
        mode += "; SABOTAGE MODE (packed weights corrupted)"
    lines = [
        f"bench mulmat on {dev['name']} ({dev['description']}), {result['created']}",
        f"llama.cpp {result['llama_cpp']['commit'][:10]}; contenders: "
        + ", ".join(f"{v['label']} ({v['lib_dir']})" for v in result["variants"]),
        f"cache to defeat: {p['cache_bytes'] >> 20} MiB ({p['cache_source']}); seed {spec['seed']}; {mode}",
    ]
    roof = p.get("roofline")
    if roof:
        lines.append(f"memory roofline (f32 copy, read + write): {roof['gb_s']:.1f} GB/s")
        lines.append(f"time per node = {p['timing_includes']}")
    rows = []
    for case in p["cases"]:
        base_us = case["contenders"].get(labels[0], {}).get("us")
        for label in labels:
            e = case["contenders"][label]
            chk = e["check"]
            verdict = f"{'ok' if chk['passed'] else 'FAIL'} {chk['nmse']:.1e}"
            us = e.get("us")
            speed = f"{base_us / us:.3f}" if (us and base_us and label != labels[0]) else ""
            rows.append(
                [
                    case["type"],
                    f"{case['m']}x{case['k']}",
                    case["n"],
                    label,
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
    lines += ["", table([*headers, f"x vs {labels[0]}", "copies"], rows)]
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
