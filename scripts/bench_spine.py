"""Time the spine on this machine: init (download, cached, no-op) and builds (cold, ccache, no-op).

    python3 scripts/bench_spine.py OUT.json [--cold-build]

Each step runs the real `fusekit` command line in a fresh workspace under a temporary folder and is
timed from outside; the result file (kind "bench-spine") records the commands and the seconds.
--cold-build adds a stock build with ccache disabled (minutes on 2 cores).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evals.results import new_result, write_result

REPO = Path(__file__).resolve().parents[1]


def timed(argv: list[str], env: dict[str, str]) -> dict[str, object]:
    started = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{done.stderr[-2000:]}")
    print(f"{seconds:8.1f} s  {' '.join(argv[3:])}", flush=True)
    return {"argv": argv, "seconds": seconds, "stdout_tail": done.stdout[-400:]}


def main() -> None:
    out = Path(sys.argv[1])
    cold_build = "--cold-build" in sys.argv[2:]
    fusekit = [sys.executable, "-m", "fusekit.cli"]
    steps: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-spine-") as tmp:
        home = Path(tmp) / "home"
        env = {**os.environ, "FUSEKIT_HOME": str(home), "FUSEKIT_DATA": str(REPO / "tests" / "data")}
        steps["init, downloading the sdist"] = timed([*fusekit, "init"], env)
        steps["init again (no-op)"] = timed([*fusekit, "init"], env)
        cached = Path(tmp) / "cached"
        (cached / "cache").mkdir(parents=True)
        os.link(home / "cache" / "llama_cpp_python-0.3.36.tar.gz", cached / "cache" / "llama_cpp_python-0.3.36.tar.gz")
        steps["init from the cached sdist"] = timed([*fusekit, "--home", str(cached), "init"], env)
        if cold_build:
            steps["build stock, ccache disabled"] = timed([*fusekit, "build"], {**env, "CCACHE_DISABLE": "1"})
        else:
            steps["build stock, ccache as found"] = timed([*fusekit, "build"], env)
        steps["build again (nothing changed)"] = timed([*fusekit, "build"], env)
        timed([*fusekit, "apply", "example-banner"], env)
        steps["build stock + example fusion (variant from ccache)"] = timed([*fusekit, "build"], env)
        steps["build again, variant current (nothing changed)"] = timed([*fusekit, "build"], env)
    result = new_result("bench-spine", command=[sys.executable, *sys.argv])
    result["payload"] = {"steps": steps, "cold_build": cold_build}
    write_result(result, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
