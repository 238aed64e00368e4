"""Terminal tables and CSV files for profiles and comparisons (no computation happens here)."""

from __future__ import annotations

import csv
from pathlib import Path

from fusekit.console import table

from .compare import Comparison
from .parse import Profile

NAME_WIDTH = 70


def _short(name: str, width: int = NAME_WIDTH) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def _us(ns: float) -> str:
    return f"{ns / 1000.0:,.1f}"


def _signed_us(ns: float) -> str:
    return f"{ns / 1000.0:+,.1f}"


def summary_lines(p: Profile) -> list[str]:
    """The header of a profile: totals, token figures, GPU busy share, graph warning."""
    lines = [f"trace: {p.path}"]
    lines.append(f"kernels: {len(p.kernels)} distinct, {p.launches:,} launches, {_us(p.kernel_ns)} µs kernel time")
    if p.exclusive and p.kernel_ns:
        lines.append(
            f"exclusive: {_us(p.exclusive_ns)} µs of it add to the kernel timeline; "
            f"{100.0 * (1 - p.exclusive_ns / p.kernel_ns):.1f}% overlaps an earlier kernel "
            "(a kernel launched early, as under programmatic dependent launch, waits inside its own duration)"
        )
    per = p.per_token()
    if per:
        exclusive = f", {per['exclusive_us_per_token']:,.1f} µs exclusive" if "exclusive_us_per_token" in per else ""
        lines.append(
            f"per token ({p.tokens} tokens, {p.tokens_source or 'given'}): "
            f"{per['kernels_per_token']:,.1f} kernels, {per['kernel_us_per_token']:,.1f} µs kernel time{exclusive}"
        )
    else:
        lines.append("per token: unknown (pass --tokens N to get kernels and µs per token)")
    span = p.timeline
    if span:
        lines.append(
            f"GPU busy {span.busy_pct:.1f}% of {_us(span.span_ns)} µs traced; idle {_us(span.idle_ns)} µs in "
            f"{span.gaps:,} gaps ({span.gaps_over_10us:,} over 10 µs, longest {_us(span.max_gap_ns)} µs)"
        )
    for note in p.notes:
        lines.append(f"WARNING: {note}")
    return lines


def category_table(p: Profile) -> str:
    per_token = bool(p.tokens)
    exclusive = bool(p.exclusive)
    headers = ["category", "kernels", "launches", "time µs", "share %"] + (["exclusive µs"] if exclusive else [])
    if per_token:
        headers += ["launches/token", "µs/token"] + (["exclusive µs/token"] if exclusive else [])
    rows = []
    for c in p.categories():
        row = [c.category, c.kernels, f"{c.instances:,}", _us(c.total_ns), f"{c.share_pct:.1f}"]
        row += [_us(c.exclusive_ns)] if exclusive else []
        if per_token and p.tokens:
            row += [f"{c.instances / p.tokens:,.1f}", f"{c.total_ns / p.tokens / 1000.0:,.1f}"]
            row += [f"{c.exclusive_ns / p.tokens / 1000.0:,.1f}"] if exclusive else []
        rows.append(row)
    return table(headers, rows)


def kernel_table(p: Profile, top: int) -> str:
    headers = [
        "time %",
        "total µs",
        "instances",
        "avg ns",
        "med ns",
        "min ns",
        "max ns",
        "stddev ns",
        "category",
        "name",
    ]
    rows = [
        [
            f"{k.time_pct:.1f}",
            _us(k.total_ns),
            f"{k.instances:,}",
            f"{k.avg_ns:,.1f}",
            f"{k.med_ns:,.1f}",
            f"{k.min_ns:,}",
            f"{k.max_ns:,}",
            f"{k.stddev_ns:,.1f}",
            k.category,
            _short(k.name),
        ]
        for k in p.kernels[:top]
    ]
    return table(headers, rows)


def ops_table(title: str, ops: list, with_bytes: bool = False) -> str:
    headers = [title, "count", "time µs"] + (["bytes"] if with_bytes else [])
    rows = [[op.name, f"{op.count:,}", _us(op.total_ns)] + ([f"{op.bytes or 0:,}"] if with_bytes else []) for op in ops]
    return table(headers, rows)


def profile_text(p: Profile, top: int) -> str:
    parts = ["\n".join(summary_lines(p)), category_table(p), kernel_table(p, top)]
    if len(p.kernels) > top:
        parts[-1] += f"\n({len(p.kernels) - top} more kernels: --top N, --csv or --json show them)"
    if p.memops:
        parts.append(ops_table("memory operation", p.memops, with_bytes=True))
    launches = [op for op in p.api if "Launch" in op.name]
    if launches:
        parts.append(ops_table("launch API", launches))
    if p.nvtx:
        parts.append(ops_table("NVTX range", p.nvtx[:top]))
    return "\n\n".join(parts)


def comparison_text(c: Comparison, top: int) -> str:
    head = [
        f"A: {c.a.path}",
        f"B: {c.b.path}",
        f"kernel time {_us(c.a.kernel_ns)} -> {_us(c.b.kernel_ns)} µs ({_signed_us(c.delta_ns)} µs), "
        f"launches {c.a.launches:,} -> {c.b.launches:,} ({c.delta_launches:+,})",
    ]
    exclusive = bool(c.a.exclusive and c.b.exclusive)
    if exclusive:
        head.append(
            f"exclusive kernel time {_us(c.a.exclusive_ns)} -> {_us(c.b.exclusive_ns)} µs "
            f"({_signed_us(c.delta_exclusive_ns)} µs): what the launches add to the kernel timeline"
        )
    per = c.per_token()
    if per:
        extra = f", {per['exclusive_us_per_token']:+,.1f} µs exclusive" if "exclusive_us_per_token" in per else ""
        head.append(
            f"per token: {per['kernels_per_token']:+,.1f} kernels, {per['kernel_us_per_token']:+,.1f} µs kernel time"
            f"{extra}"
        )
    for side, p in (("A", c.a), ("B", c.b)):
        head += [f"WARNING ({side}): {note}" for note in p.notes]
    excl_headers = ["A excl µs", "B excl µs", "Δ excl µs"] if exclusive else []
    cats = table(
        ["category", "A µs", "B µs", "Δ µs", *excl_headers, "A launches", "B launches", "Δ launches"],
        [
            [d.key, _us(d.a_ns), _us(d.b_ns), _signed_us(d.delta_ns),
             *([_us(d.a_exclusive_ns), _us(d.b_exclusive_ns), _signed_us(d.delta_exclusive_ns)] if exclusive else []),
             f"{d.a_launches:,}", f"{d.b_launches:,}", f"{d.delta_launches:+,}"]
            for d in c.categories
        ],
    )  # fmt: skip
    kernels = table(
        ["Δ µs", "Δ launches", "A launches", "B launches", "status", "category", "name"],
        [
            [_signed_us(d.delta_ns), f"{d.delta_launches:+,}", f"{d.a_launches:,}", f"{d.b_launches:,}", d.status,
             d.category, _short(d.key)]
            for d in c.kernels[:top]
        ],
    )  # fmt: skip
    return "\n\n".join(["\n".join(head), cats, kernels])


def write_kernel_csv(p: Profile, path: Path) -> Path:
    """Per-kernel rows with the columns of ``cuda_gpu_kern_sum`` plus short name and category."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(
            ["Time (%)", "Total Time (ns)", "Instances", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)",
             "StdDev (ns)", "Category", "Short Name", "Name"]
        )  # fmt: skip
        for k in p.kernels:
            out.writerow(
                [k.time_pct, k.total_ns, k.instances, k.avg_ns, k.med_ns, k.min_ns, k.max_ns, k.stddev_ns,
                 k.category, k.short_name, k.name]
            )  # fmt: skip
    return path


def write_comparison_csv(c: Comparison, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["Name", "Category", "A (ns)", "B (ns)", "Delta (ns)", "A Instances", "B Instances",
                      "Delta Instances", "Status"])  # fmt: skip
        for d in c.kernels:
            out.writerow([d.key, d.category, d.a_ns, d.b_ns, d.delta_ns, d.a_launches, d.b_launches,
                          d.delta_launches, d.status])  # fmt: skip
    return path
