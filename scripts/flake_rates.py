#!/usr/bin/env python3
"""Failure rates from the flake step's lines (scripts/h200_session.sh flake -> results/flake.txt): per build and
setting, the runs, the failures and a 95% Wilson interval; a selection that matched no case (EMPTY) is reported as
such, never as a pass. With --expected P, each line also says whether P lies inside its interval.

    python3 scripts/flake_rates.py results/<session>/flake.txt [--expected 0.177] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from evals.stats import wilson_interval

LINE = re.compile(
    r"^(?P<label>\S+) (?P<setting>\S+) op=(?P<op>\S+) params=(?P<params>\S+) runs=(?P<runs>\d+) "
    r"failed=(?P<failed>\d+) last: (?P<last>.*)$"
)


def parse(text: str) -> list[dict]:
    """One dict per flake line: label, setting, op, params, runs, failed, empty (the selection matched no case)."""
    rows = []
    for line in text.splitlines():
        match = LINE.match(line.strip())
        if match is None:
            if line.strip():
                raise ValueError(f"not a flake line: {line[:120]!r}")
            continue
        row = match.groupdict()
        rows.append(
            {
                "label": row["label"],
                "setting": row["setting"],
                "op": row["op"],
                "params": row["params"],
                "runs": int(row["runs"]),
                "failed": int(row["failed"]),
                "empty": "EMPTY" in row["last"],
            }
        )
    return rows


def rates(rows: list[dict], expected: float | None) -> list[dict]:
    """Each non-empty row with its failure rate and Wilson interval (and whether ``expected`` is inside it)."""
    out = []
    for row in rows:
        if row["empty"]:
            out.append({**row, "rate": None, "ci95": None})
            continue
        low, high = wilson_interval(row["failed"], row["runs"])
        entry = {**row, "rate": row["failed"] / row["runs"], "ci95": [low, high]}
        if expected is not None:
            entry["expected_inside"] = low <= expected <= high
        out.append(entry)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("flake", type=Path, help="a flake.txt written by the flake step")
    parser.add_argument("--expected", type=float, help="a predicted failure rate to hold against each interval")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    try:
        rows = rates(parse(args.flake.read_text()), args.expected)
    except (OSError, ValueError) as exc:
        print(f"flake_rates: {exc}", file=sys.stderr)
        return 1
    for row in rows:
        name = f"{row['label'][-40:]} {row['setting']}"
        if row["rate"] is None:
            print(f"{name}: EMPTY (the selection matched no case in this build)")
        else:
            low, high = row["ci95"]
            inside = (
                ""
                if args.expected is None
                else f"; {args.expected} {'inside' if row['expected_inside'] else 'OUTSIDE'}"
            )
            print(f"{name}: {row['failed']} of {row['runs']} failed, 95% [{low:.3f}, {high:.3f}]{inside}")
    if args.json:
        command = "python3 scripts/flake_rates.py " + " ".join(argv if argv is not None else sys.argv[1:])
        with open(args.json, "w") as f:
            json.dump({"command": command, "expected": args.expected, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
