#!/usr/bin/env python3
"""Where a kernel's instructions go, from the SASS listing Nsight Compute exports with its per-instruction counters.

Reads `ncu --import R --csv --page source --print-source sass` (plain or .xz/.gz): one section per profiled launch, a
`"Kernel Name"` line, a header row and one row per SASS instruction with "Instructions Executed" (warp-level) and
"Warp Stall Sampling (All Samples)". For each launch it prints the warp instructions by opcode (the part before the
first dot, predicates dropped) and by *execution count*: instructions executed equally often form one loop level
(e.g. a chunk loop's body, or a copy loop nested in it), so a level with few lines and a high count is a hot inner
loop. `--launch N` picks one launch (default: every one); `--json F` writes the records.

`--phases` adds the launch cut into phases at its barriers (a BAR, a CTA's or a named one, ends a phase): per phase
its lines, warp instructions, share of the stall samples (where the warps spent their time, as sampled), its top
stall reasons and its memory and tensor instructions. The listing is in address order, which is program order for
straight-line code; a loop whose body holds a barrier shows as the phases of one trip.

    python3 scripts/ncu_sass_mix.py results/<s>/ncu-chunked-gdn-sass.csv.xz [--launch 0] [--top 10] [--phases]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import lzma
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ncu_raw_table import read_text  # a sibling script: run as scripts/ncu_sass_mix.py

EXECUTED = "Instructions Executed"
SAMPLES = "Warp Stall Sampling (All Samples)"


class SassPageError(ValueError):
    """The file is not an ncu source page with SASS and per-instruction counters."""


def split_launches(text: str) -> list[tuple[str, list[list[str]]]]:
    """(kernel name, rows with the header first) per profiled launch, in the export's order."""
    launches: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith('"Kernel Name"'):
            launches.append((next(csv.reader([line]))[1], []))
        elif launches and line.strip():
            launches[-1][1].append(line)
    if not launches:
        raise SassPageError("no '\"Kernel Name\"' section: not an ncu --page source export")
    return [(name, list(csv.reader(lines))) for name, lines in launches]


def opcode(source: str) -> str:
    """The opcode of one SASS line without its predicate and modifiers ('@!P0 IMAD.IADD R1, ...' -> 'IMAD')."""
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def _count(cell: str) -> int:
    """A counter cell of the export as an int (thousands separators dropped, empty as 0)."""
    return int(cell.replace(",", "") or 0)


def launch_mix(name: str, rows: list[list[str]], top: int) -> dict[str, object]:
    """One launch's instructions by opcode and by loop level (lines executed equally often)."""
    if not rows or EXECUTED not in rows[0] or "Source" not in rows[0]:
        raise SassPageError(f"{name}: no '{EXECUTED}' and 'Source' columns (export with --print-source sass)")
    header = rows[0]
    i_exec, i_src = header.index(EXECUTED), header.index("Source")
    i_samples = header.index(SAMPLES) if SAMPLES in header else None
    by_opcode: Counter[str] = Counter()
    samples: Counter[str] = Counter()
    levels: dict[int, Counter[str]] = defaultdict(Counter)
    for row in rows[1:]:
        if len(row) <= max(i_exec, i_src):
            continue
        executed = _count(row[i_exec])
        op = opcode(row[i_src])
        by_opcode[op] += executed
        levels[executed][op] += 1
        if i_samples is not None:
            samples[op] += _count(row[i_samples])
    total = sum(by_opcode.values())
    if total == 0:
        raise SassPageError(f"{name}: no instruction executed (a launch under --once with counters off?)")
    level_records = [
        {
            "executed_per_line": count,
            "lines": sum(ops.values()),
            "warp_instructions": count * sum(ops.values()),
            "share": round(count * sum(ops.values()) / total, 4),
            "opcodes": dict(ops.most_common(top)),
        }
        for count, ops in levels.items()
        if count > 0
    ]
    level_records.sort(key=lambda r: -int(r["warp_instructions"]))
    return {
        "kernel": name,
        "warp_instructions": total,
        "opcodes": [
            {"opcode": op, "warp_instructions": n, "share": round(n / total, 4), "stall_samples": samples[op]}
            for op, n in by_opcode.most_common(top)
        ],
        "levels": level_records[:top],
    }


STALL_PREFIX = "stall_"
NOT_ISSUED = " (Not Issued)"
PHASE_OPCODES = ("HMMA", "LDG", "LDGSTS", "STG", "LDS", "STS", "MUFU")  # what a phase moves and multiplies


@dataclass
class Phase:
    """The lines of a launch from one barrier to the next (or to the listing's end)."""

    first_line: int
    lines: int = 0
    warp_instructions: int = 0
    stall_samples: int = 0
    stalls: Counter[str] = field(default_factory=Counter)
    opcodes: Counter[str] = field(default_factory=Counter)
    ends_with: str = "(end)"

    def record(self, total_samples: int) -> dict[str, object]:
        """The phase as JSON, its share of the launch's stall samples and its three largest stall reasons."""
        return {
            "first_line": self.first_line,
            "lines": self.lines,
            "warp_instructions": self.warp_instructions,
            "stall_samples": self.stall_samples,
            "ends_with": self.ends_with,
            "sample_share": round(self.stall_samples / total_samples, 4) if total_samples else 0.0,
            "top_stalls": {reason: n for reason, n in self.stalls.most_common(3) if n},
            "opcodes": {op: n for op, n in self.opcodes.items() if n},
        }


def launch_phases(name: str, rows: list[list[str]]) -> list[dict[str, object]]:
    """One launch's lines cut into phases, each ending with a barrier (BAR) or the listing's end."""
    header = rows[0]
    if SAMPLES not in header or EXECUTED not in header or "Source" not in header:
        raise SassPageError(f"{name}: --phases needs the '{SAMPLES}' column (export with --print-source sass)")
    i_exec, i_src, i_samples = header.index(EXECUTED), header.index("Source"), header.index(SAMPLES)
    stalls = {
        column.removeprefix(STALL_PREFIX): i
        for i, column in enumerate(header)
        if column.startswith(STALL_PREFIX) and not column.endswith(NOT_ISSUED)
    }
    phases: list[Phase] = []
    current: Phase | None = None
    for line, row in enumerate(rows[1:]):
        if len(row) <= max(i_exec, i_src, i_samples):
            continue
        current = current or Phase(first_line=line)
        op = opcode(row[i_src])
        executed = _count(row[i_exec])
        current.lines += 1
        current.warp_instructions += executed
        current.stall_samples += _count(row[i_samples])
        for reason, i in stalls.items():
            if i < len(row):
                current.stalls[reason] += _count(row[i])
        if op in PHASE_OPCODES:
            current.opcodes[op] += executed
        if op == "BAR":
            current.ends_with = row[i_src].strip()
            phases.append(current)
            current = None
    if current is not None:
        phases.append(current)
    total = sum(phase.stall_samples for phase in phases)
    return [phase.record(total) for phase in phases]


def phases_markdown(phases: list[dict[str, object]]) -> str:
    """The phases as one Markdown table."""
    lines = [
        "| phase | first line | lines | warp instructions | stall samples | share | top stalls | moves |",
        "|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for i, phase in enumerate(phases):
        stalls = ", ".join(f"{reason} {n}" for reason, n in phase["top_stalls"].items())  # type: ignore[attr-defined]
        moves = ", ".join(f"{op} {n:,}" for op, n in phase["opcodes"].items())  # type: ignore[attr-defined]
        lines.append(
            f"| {i} | {phase['first_line']} | {phase['lines']} | {phase['warp_instructions']:,} | "
            f"{phase['stall_samples']} | {phase['sample_share']:.1%} | {stalls} | {moves} |"
        )
    return "\n".join(lines)


def markdown(record: dict[str, object]) -> str:
    """One launch's record as two Markdown tables."""
    lines = [f"**{record['kernel']}**: {record['warp_instructions']:,} warp instructions", ""]
    lines += ["| opcode | warp instructions | share | stall samples |", "|---|---:|---:|---:|"]
    for r in record["opcodes"]:  # type: ignore[union-attr]
        lines.append(f"| {r['opcode']} | {r['warp_instructions']:,} | {r['share']:.1%} | {r['stall_samples']} |")
    lines += ["", "| executed per line | lines | warp instructions | share | most lines |", "|---:|---:|---:|---:|---|"]
    for r in record["levels"]:  # type: ignore[union-attr]
        ops = ", ".join(f"{op} {n}" for op, n in list(r["opcodes"].items())[:6])
        lines.append(
            f"| {r['executed_per_line']:,} | {r['lines']} | {r['warp_instructions']:,} | {r['share']:.1%} | {ops} |"
        )
    if "phases" in record:
        lines += ["", phases_markdown(record["phases"])]  # type: ignore[arg-type]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sass", type=Path, help="ncu --csv --page source --print-source sass (.csv, .gz or .xz)")
    parser.add_argument("--launch", type=int, help="only this launch (0 = the first profiled)")
    parser.add_argument("--top", type=int, default=10, help="opcodes and loop levels listed (default 10)")
    parser.add_argument("--phases", action="store_true", help="also cut each launch into phases at its barriers")
    parser.add_argument("--json", type=Path, help="also write the records as JSON here")
    args = parser.parse_args(argv)
    try:
        launches = split_launches(read_text(args.sass))
        if args.launch is not None and not 0 <= args.launch < len(launches):
            raise SassPageError(f"launch {args.launch} asked, the export has {len(launches)}")
        chosen = range(len(launches)) if args.launch is None else [args.launch]
        records = [{"launch": i, **launch_mix(*launches[i], args.top)} for i in chosen]
        if args.phases:
            for record in records:
                record["phases"] = launch_phases(*launches[int(record["launch"])])
    except (OSError, ValueError, lzma.LZMAError) as err:  # ValueError: SassPageError, bad numbers, bad text
        print(f"ncu_sass_mix: {args.sass}: {err}", file=sys.stderr)
        return 1
    print("\n\n".join(f"launch {r['launch']}: " + markdown(r) for r in records))
    if args.json:
        args.json.write_text(json.dumps({"source": str(args.sass), "launches": records}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
