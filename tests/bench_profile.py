"""Benchmark: parse and summarize a synthetic export of one million kernel rows (target: under 10 s on 2 cores).

Not a pytest test (the name does not start with ``test_``). Run from the repository root:

    python tests/bench_profile.py [--rows 1000000] [--repeat N] [--keep PATH]

Writing the synthetic file is not timed; the figure is the wall time of ``read_profile`` (kernel summary,
categories, memory operations, API counts, NVTX, timeline and graph check), best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root

from evals.profile.parse import read_profile
from tests.nsys_synth import write_large


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None, help="write the synthetic export here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "synthetic.sqlite"
        if not path.exists():
            started = time.perf_counter()
            write_large(path, args.rows)
            print(f"wrote {args.rows:,} kernel rows in {time.perf_counter() - started:.1f}s ({path})")
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            profile = read_profile(path)
            times.append(time.perf_counter() - started)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(
            f"parsed {profile.launches:,} kernels ({len(profile.kernels)} names) in {min(times):.2f}s "
            f"(best of {len(times)}; {os.cpu_count()} cores, load average {load:.1f})"
        )
    return 0 if min(times) < 10.0 else 1


if __name__ == "__main__":
    sys.exit(main())
