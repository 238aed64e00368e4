"""Render a ``bench-mulmat`` result as text (reads only; never runs anything)."""

from __future__ import annotations

from typing import Any

from fusekit.console import table


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def check_counts(payload: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Checks split by outcome: ``passed`` and ``failed`` lists of check records."""
    out: dict[str, list[dict[str, Any]]] = {"passed": [], "failed": []}
    for case in payload["cases"]:
        for entry in case["contenders"].values():
            out["passed" if entry["check"]["passed"] else "failed"].append(entry["check"])
    return out


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
    lines += ["", f"checks: {len(counts['passed'])} passed, {len(counts['failed'])} failed"]
    return "\n".join(lines)
