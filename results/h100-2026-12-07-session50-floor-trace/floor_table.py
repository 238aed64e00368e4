"""Each timing-program contender's own kernel duration beside its per-launch time (session 50's floor trace).

The timing program (tests/cpp/q8_stock_order_timing.cu) times its contenders in the order of its JSON rows, each with a
kernel of its own; a trace's kernels, in order of first launch, are therefore the rows' kernels. Reads
floor-timing-SHAPE.json and floor-traces/floor-SHAPE.sqlite.xz of a results folder; prints a Markdown table per shape.
"""

from __future__ import annotations

import json
import lzma
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path


def kernels_in_launch_order(export: Path) -> list[tuple[str, list[float]]]:
    """(name, durations in µs) per kernel of the packed Nsight Systems export, in order of first launch."""
    with tempfile.TemporaryDirectory() as scratch:
        plain = Path(scratch) / "trace.sqlite"
        plain.write_bytes(lzma.decompress(export.read_bytes()))
        with sqlite3.connect(plain) as db:
            rows = db.execute(
                "SELECT s.value, k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                "JOIN StringIds s ON s.id = k.demangledName ORDER BY k.start"
            ).fetchall()
    durations: dict[str, list[float]] = {}
    for name, start, end in rows:
        durations.setdefault(name, []).append((end - start) / 1e3)
    return list(durations.items())


def shape_table(folder: Path, shape: str) -> str:
    """Markdown rows: contender, per-launch median (program), kernel median, min, difference."""
    timing = json.loads((folder / f"floor-timing-{shape}.json").read_text())["results"]
    kernels = kernels_in_launch_order(folder / "floor-traces" / f"floor-{shape}.sqlite.xz")
    if len(kernels) != len(timing):
        raise SystemExit(f"{shape}: {len(kernels)} kernels in the trace, {len(timing)} contenders in the JSON")
    lines = [
        f"### {shape} ({timing[0]['shape']}, {timing[0]['bytes'] / 1e6:.1f} MB)",
        "",
        "| contender | per launch (program) | kernel median | kernel min | launches | per launch - kernel | kernel |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for row, (name, times) in zip(timing, kernels, strict=True):
        median = statistics.median(times)
        short = name.removeprefix("void ").rsplit("(", 1)[0]
        for noise in ("fusekit_q8::", "<unnamed>::", "(bool)", "(int)", "(StreamCopy)", "(Weights)", "(Body)"):
            short = short.replace(noise, "")
        lines.append(
            f"| {row['kernel']} | {row['median_us']:.2f} | {median:.2f} | {min(times):.2f} | {len(times)} "
            f"| {row['median_us'] - median:+.2f} | `{short}` |"
        )
    return "\n".join(lines)


def main() -> None:
    """python3 floor_table.py FOLDER SHAPE..."""
    folder = Path(sys.argv[1])
    for shape in sys.argv[2:]:
        print(shape_table(folder, shape), end="\n\n")


if __name__ == "__main__":
    main()
