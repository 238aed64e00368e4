#!/usr/bin/env python3
"""How one test-backend-ops case fared in every committed run: scans the logs under results/ (plain or .xz) for the
case's result line, leaves out the runs of sabotaged builds (more than --max-failures failing cases: a sabotage build
fails dozens, a sound one none or one), and counts the passes and failures with a 95% Wilson interval.

    python3 scripts/tbo_case_history.py 'MUL_MAT(type_a=q4_0,type_b=f32,m=1,n=1,k=256,'
            [--logs 'results/**/*-MUL_MAT.log*'] [--max-failures 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import lzma
import re
import sys
from pathlib import Path

from evals.stats import wilson_interval

SUMMARY = re.compile(r"(\d+)/(\d+) tests passed")


def read_log(path: Path) -> str:
    if path.suffix == ".xz":
        return lzma.decompress(path.read_bytes()).decode(errors="replace")
    return path.read_text(errors="replace")


def case_outcome(text: str, case: str, max_failures: int) -> str | None:
    """'ok', 'fail' or None (the case is not in the log, or the run failed too many cases to count)."""
    lines = [line for line in text.splitlines() if case in line and ("OK" in line or "FAIL" in line)]
    summary = SUMMARY.search(text)
    if not lines or summary is None or int(summary[2]) - int(summary[1]) > max_failures:
        return None
    return "fail" if "FAIL" in lines[0] else "ok"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("case", help="the start of the case's name, as test-backend-ops prints it")
    parser.add_argument("--logs", default="results/**/*-MUL_MAT.log*", help="glob of the logs, from the working dir")
    parser.add_argument("--max-failures", type=int, default=5, help="runs failing more cases are left out")
    parser.add_argument("--json", help="write the runs and counts here")
    args = parser.parse_args(argv)
    runs = []
    for path in sorted(Path().glob(args.logs)):
        outcome = case_outcome(read_log(path), args.case, args.max_failures)
        if outcome is not None:
            runs.append({"log": str(path), "outcome": outcome})
    failed = sum(r["outcome"] == "fail" for r in runs)
    low, high = wilson_interval(failed, len(runs))
    for r in runs:
        print(f"{r['outcome']:4s}  {r['log']}")
    print(f"{failed} of {len(runs)} runs failed the case (95% [{low:.3f}, {high:.3f}])")
    if args.json:
        with open(args.json, "w") as f:
            command = "python3 scripts/tbo_case_history.py " + " ".join(
                f"'{a}'" if "(" in a or "*" in a else a for a in (argv if argv is not None else sys.argv[1:])
            )
            json.dump({"command": command, "runs": runs, "failed": failed, "ci95": [low, high]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
