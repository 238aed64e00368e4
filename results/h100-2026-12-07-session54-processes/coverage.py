"""Prints the A/A false-call rates that README.md, the notes and evals.stats quote (run from this folder, with the
repository's packages; about a minute): simulated races of identical code, each side timed in P processes of 7
rounds, every process offset from the others by a normal factor of standard deviation SIGMA, its rounds by one of
WITHIN (this folder's races, table.py: SIGMA 0.75-1.8%, WITHIN 0.56-1.13%; session 53's rounds about 0.3-0.4%). For
each pair and P, the share of 400 races whose 95% interval excludes 1, by the two-level bootstrap
(evals.stats.BOOTSTRAP, before session 54) and by the Welch t interval over process medians (evals.stats.WELCH), with
its Wilson 95% interval."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's evals

from evals.stats import BOOTSTRAP, WELCH, grouped_ratio_estimate, wilson_interval

TRIALS, ROUNDS = 400, 7


def side(rng: np.random.Generator, processes: int, sigma: float, within: float) -> list[list[float]]:
    return [list(100 * rng.normal(1, sigma) * rng.normal(1, within, ROUNDS)) for _ in range(processes)]


print("| SIGMA | WITHIN | processes a side | bootstrap: false calls | Welch t: false calls |")
print("|---:|---:|---:|---|---|")
for sigma, within in ((0.008, 0.002), (0.008, 0.007), (0.012, 0.007), (0.018, 0.007)):
    for processes in (2, 3, 5):
        cells = []
        for method in (BOOTSTRAP, WELCH):
            rng = np.random.default_rng(54)
            false_calls = sum(
                grouped_ratio_estimate(
                    side(rng, processes, sigma, within), side(rng, processes, sigma, within), method
                ).verdict
                != "same"
                for _ in range(TRIALS)
            )
            low, high = wilson_interval(false_calls, TRIALS)
            cells.append(f"{100 * false_calls / TRIALS:.1f}% [{100 * low:.1f}, {100 * high:.1f}]")
        print(f"| {100 * sigma:.1f}% | {100 * within:.1f}% | {processes} | " + " | ".join(cells) + " |")
