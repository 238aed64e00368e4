"""The floor-trace call's results as Markdown (``scripts/device_calls/issue11-floor-trace.sh``, session 49): the stream
check's timing program (``tests/cpp/q8_stock_order_timing.cu``) once per shape under Nsight Systems. Per contender, the
program's per-launch time (events around back-to-back launches, launch cost included) beside its kernel's own median
from the trace, and the launches well under that median (session 50: the hinted-copy kernels ran fast on the same
weight copies every round, which pulls their per-launch means down).

The program times its contenders in the order of its JSON rows, each with a kernel of its own, so a trace's kernels in
order of first launch are the rows' kernels; where the counts differ the shape is named and not paired.
"""

from __future__ import annotations

import contextlib
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evals.profile import schema, source
from fusekit.errors import FusekitError

FAST_SHARE = 0.9  # a launch under this share of its kernel's median counts as fast

Table = Callable[[list[str], list[list[Any]]], list[str]]


def kernels_in_launch_order(export: Path) -> list[tuple[str, list[float]]]:
    """(demangled name, each launch's duration in µs) per kernel of an export, in order of first launch."""
    durations: dict[str, list[float]] = {}
    with source.prepared(export) as plain, contextlib.closing(source.connect(plain)) as conn:
        rows = conn.execute(
            f'SELECT names.value, k.{schema.K_START}, k."{schema.K_END}" FROM main.{schema.KERNEL} AS k '
            f"JOIN main.{schema.STRING_IDS} AS names ON names.id = k.{schema.K_DEMANGLED} ORDER BY k.{schema.K_START}"
        )
        for name, start, end in rows:
            durations.setdefault(name, []).append((end - start) / 1000)
    return list(durations.items())


def _timing_rows(path: Path) -> list[dict[str, Any]]:
    """The program's result rows (contender, shape, bytes, per-launch median), checked."""
    try:
        rows = json.loads(path.read_text())["results"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FusekitError(f"{path} is not the timing program's JSON ({exc})") from exc
    if not isinstance(rows, list) or not rows:
        raise FusekitError(f"{path} has no results")
    for row in rows:
        missing = [key for key in ("kernel", "shape", "bytes", "median_us") if key not in row]
        if missing:
            raise FusekitError(f"{path}: a result lacks {', '.join(missing)}")
    return rows


def _short(name: str) -> str:
    """A kernel's template name without the namespaces and casts that make every row alike."""
    short = name.removeprefix("void ").rsplit("(", 1)[0]
    for noise in ("fusekit_q8::", "<unnamed>::", "(bool)", "(int)", "(StreamCopy)", "(Weights)", "(Body)"):
        short = short.replace(noise, "")
    return short


def _rows(timing: list[dict[str, Any]], kernels: list[tuple[str, list[float]]]) -> list[list[Any]]:
    """One row per contender: its per-launch time, its kernel's median and minimum, fast launches, the difference."""
    rows = []
    for row, (name, times) in zip(timing, kernels, strict=True):
        median = statistics.median(times)
        fast = sum(1 for t in times if t < FAST_SHARE * median)
        rows.append(
            [
                row["kernel"],
                f"{row['median_us']:.2f}",
                f"{median:.2f}",
                f"{min(times):.2f}",
                f"{fast} of {len(times)}",
                f"{row['median_us'] - median:+.2f}",
                f"`{_short(name)}`",
            ]
        )
    return rows


def render_floor_traces(folder: Path, table: Table) -> list[str]:
    """One table per traced shape; empty when the folder has no floor trace."""
    pairs = []
    for path in sorted(folder.glob("floor-timing-*.json")):
        shape = path.name.removeprefix("floor-timing-").removesuffix(".json")
        export = folder / "floor-traces" / f"floor-{shape}.sqlite.xz"
        if export.is_file():
            pairs.append((shape, path, export))
    if not pairs:
        return []
    out = [
        "## The timing program under Nsight Systems (`floor-timing-*.json`, `floor-traces/`)",
        "",
        "Per contender: the program's per-launch time (events around back-to-back launches over weight copies, launch "
        "cost included), its kernel's median and minimum µs from the trace, the launches under "
        f"{FAST_SHARE:.0%} of that median, and per-launch minus kernel median. Contenders and kernels are paired in "
        "order of first launch.",
    ]
    for shape, path, export in pairs:
        timing = _timing_rows(path)
        kernels = kernels_in_launch_order(export)
        out += ["", f"### {shape} ({timing[0]['shape']}, {timing[0]['bytes'] / 1e6:.1f} MB)", ""]
        if len(kernels) != len(timing):
            out.append(f"_The trace holds {len(kernels)} kernels for {len(timing)} contenders: not paired._")
            continue
        headers = ["contender", "per launch µs", "kernel median µs", "kernel min µs", "fast launches", "difference µs"]
        out += table([*headers, "kernel"], _rows(timing, kernels))
    return out
