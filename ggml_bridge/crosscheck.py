"""Compare bench-mulmat results with ``test-backend-ops perf -o MUL_MAT`` of the same build.

``python -m ggml_bridge.crosscheck TBO_LOG RESULT.json [RESULT.json ...]`` prints, for every MUL_MAT
case test-backend-ops timed, its µs/run next to each result's median µs at the same type, m, k and n.

test-backend-ops repeats one node on one weight tensor, so a weight smaller than the L2 stays
cached; a result made with ``--copies 1`` measures the same thing, the rotating sweep does not.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from evals.results import read_result

_LINE = re.compile(
    r"MUL_MAT\(type_a=(\w+),type_b=f32,m=(\d+),n=(\d+),k=(\d+),[^)]*\):\s+(\d+) runs -\s+([\d.]+) us/run"
)
AGREEMENT = 0.10  # the bound: within 10%


def parse_tbo(text: str) -> dict[tuple[str, int, int, int], float]:
    """(type, m, k, n) → µs/run from test-backend-ops' console output."""
    out = {}
    for match in _LINE.finditer(text):
        type_name, m, n, k = match.group(1), int(match.group(2)), int(match.group(3)), int(match.group(4))
        out[(type_name, m, k, n)] = float(match.group(6))
    return out


def compare(tbo: dict[tuple[str, int, int, int], float], results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for (type_name, m, k, n), tbo_us in sorted(tbo.items()):
        row: dict[str, Any] = {"type": type_name, "m": m, "k": k, "n": n, "test_backend_ops_us": tbo_us}
        for name, result in results.items():
            for case in result["payload"]["cases"]:
                if (case["type"], case["m"], case["k"], case["n"]) == (type_name, m, k, n):
                    for label, entry in case["contenders"].items():
                        us = entry.get("us")
                        if us:
                            row[f"{name}:{label}_us"] = us
                            row[f"{name}:{label}_ratio"] = us / tbo_us
                            row[f"{name}:{label}_within_10pct"] = abs(us / tbo_us - 1) <= AGREEMENT
        rows.append(row)
    return rows


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    tbo = parse_tbo(Path(argv[0]).read_text())
    if not tbo:
        print(f"no MUL_MAT perf lines in {argv[0]}", file=sys.stderr)
        return 1
    results = {Path(p).stem: read_result(Path(p)) for p in argv[1:]}
    rows = compare(tbo, results)
    print(json.dumps(rows, indent=2))
    for row in rows:
        head = f"{row['type']:5} m={row['m']} k={row['k']} n={row['n']}"
        parts = [f"{head}: test-backend-ops {row['test_backend_ops_us']:.2f} us"]
        parts += [f"{key[:-3]} {value:.2f} us" for key, value in row.items() if key.endswith("_us") and ":" in key]
        print("# " + "; ".join(parts), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
