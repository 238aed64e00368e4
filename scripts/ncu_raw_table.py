#!/usr/bin/env python3
"""A Markdown table of a few Nsight Compute metrics per profiled kernel, from `ncu --import R --csv --page raw`.

Reads the raw page as ncu writes it (a header row of metric names, a row of units, one row per kernel launch),
plain or compressed (.gz, .xz), and prints one row per launch: what bounds a memory-bound kernel at a glance (time,
issue activity, DRAM throughput, the two stall reasons that tell issue-bound from latency-bound, instructions).
With --traffic, the memory traffic instead: sectors DRAM read, sectors L2 sent to L1 and the requests and hits
behind them (an export made with those metrics in NCU_METRICS, as scripts/stock_order_gpu_check.sh takes them).
With --stalls, where the warps wait: cycles stalled per issued instruction, by reason (the WarpStateStats section).
--metric NAME (repeatable) adds a column of that metric as ncu wrote it. Values keep 6 significant digits in the JSON
(a small kernel's sector counts in millions would round away at a fixed number of decimals).

    python3 scripts/ncu_raw_table.py results/<s>/ncu-raw.csv.xz [--traffic | --stalls] [--metric M] [--json out.json]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import lzma
import sys
from pathlib import Path

# (metric, column title, scale): the columns, in order
COLUMNS: tuple[tuple[str, str, float], ...] = (
    ("gpu__time_duration.sum", "µs", 1.0),
    ("smsp__issue_active.avg.pct_of_peak_sustained_active", "issue active %", 1.0),
    ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "DRAM %", 1.0),
    ("smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio", "not selected / issue", 1.0),
    ("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", "long scoreboard / issue", 1.0),
    ("smsp__inst_executed.sum", "warp instructions (M)", 1e-6),
    ("launch__registers_per_thread", "registers", 1.0),
)

# --traffic: where a kernel's bytes go between DRAM, L2 and L1 (sectors of 32 bytes, in millions)
TRAFFIC: tuple[tuple[str, str, float], ...] = (
    ("gpu__time_duration.sum", "µs", 1.0),
    ("dram__sectors_read.sum", "DRAM sectors read (M)", 1e-6),
    ("l1tex__m_xbar2l1tex_read_sectors.sum", "L2 to L1 sectors (M)", 1e-6),
    ("lts__t_requests_srcunit_tex_op_read.sum", "L1 read requests at L2 (M)", 1e-6),
    ("lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum", "L2 hit sectors (M)", 1e-6),
    ("smsp__inst_executed.sum", "warp instructions (M)", 1e-6),
)


# --stalls: cycles a warp spends stalled per issued instruction, by reason (the ones a streaming kernel meets)
STALL_REASONS = (
    "long_scoreboard",  # waiting on global or local memory
    "short_scoreboard",  # waiting on shared memory (and MUFU)
    "mio_throttle",  # the shared-memory / LSU instruction queue is full
    "lg_throttle",  # the global-memory instruction queue is full
    "wait",  # fixed-latency waits, cp.async's wait groups among them
    "barrier",
    "math_pipe_throttle",
    "not_selected",  # ready, another warp issued
    "selected",
)
STALLS: tuple[tuple[str, str, float], ...] = (
    ("gpu__time_duration.sum", "µs", 1.0),
    ("smsp__issue_active.avg.pct_of_peak_sustained_active", "issue active %", 1.0),
    *(
        (f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio", reason.replace("_", " "), 1.0)
        for reason in STALL_REASONS
    ),
)


class RawPageError(ValueError):
    """The file is not an ncu raw page with the metrics this table needs."""


def read_text(path: Path) -> str:
    """An ncu export's text, decompressed by suffix (.xz, .gz, else plain)."""
    data = path.read_bytes()
    if path.suffix == ".xz":
        data = lzma.decompress(data)
    elif path.suffix == ".gz":
        data = gzip.decompress(data)
    return data.decode("utf-8")


def read_rows(path: Path) -> list[list[str]]:
    """The CSV rows of a raw page, decompressed by suffix."""
    return list(csv.reader(io.StringIO(read_text(path))))


def kernel_table(
    rows: list[list[str]], columns: tuple[tuple[str, str, float], ...] = COLUMNS
) -> list[dict[str, object]]:
    """One record per kernel launch: its short name, grid and the columns' values (None where ncu left one out)."""
    if len(rows) < 3 or "Kernel Name" not in rows[0]:
        raise RawPageError("no 'Kernel Name' column and launch rows: not an ncu --page raw export")
    col = {name: i for i, name in enumerate(rows[0])}
    if not any(metric in col for metric, _, _ in columns):
        raise RawPageError("none of the table's metrics is in this export")
    records = []
    for launch, row in enumerate(rows[2:]):
        name = row[col["Kernel Name"]].replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
        record: dict[str, object] = {"launch": launch, "kernel": name.split("(")[0].strip()}
        if "Grid Size" in col:
            record["grid"] = row[col["Grid Size"]]
        for metric, title, scale in columns:
            text = row[col[metric]].replace(",", "") if metric in col else ""
            record[title] = float(f"{float(text) * scale:.6g}") if text else None
        records.append(record)
    return records


def markdown(records: list[dict[str, object]], columns: tuple[tuple[str, str, float], ...] = COLUMNS) -> str:
    """The records as a Markdown table."""
    titles = [title for _, title, _ in columns]
    lines = ["| launch | kernel | grid | " + " | ".join(titles) + " |", "|---" * (3 + len(titles)) + "|"]
    for r in records:
        values = ["-" if r[t] is None else f"{r[t]:.1f}" for t in titles]
        lines.append(f"| {r['launch']} | {r['kernel']} | {r.get('grid', '')} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("raw", type=Path, help="ncu --csv --page raw output (.csv, .csv.gz or .csv.xz)")
    parser.add_argument("--json", type=Path, help="also write the records as JSON here")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--traffic", action="store_true", help="the memory-traffic columns instead (TRAFFIC)")
    view.add_argument("--stalls", action="store_true", help="stall cycles per issued instruction by reason instead")
    parser.add_argument(
        "--metric", action="append", default=[], help="also this metric, unscaled, as a column (repeatable)"
    )
    args = parser.parse_args(argv)
    columns = TRAFFIC if args.traffic else STALLS if args.stalls else COLUMNS
    columns = columns + tuple((metric, metric, 1.0) for metric in args.metric)
    try:
        records = kernel_table(read_rows(args.raw), columns)
    except (OSError, ValueError, lzma.LZMAError) as err:  # ValueError: RawPageError, bad numbers, bad text
        print(f"ncu_raw_table: {args.raw}: {err}", file=sys.stderr)
        return 1
    print(markdown(records, columns))
    if args.json:
        args.json.write_text(json.dumps({"source": str(args.raw), "kernels": records}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
