"""Speed statistics: medians, an interval of the variant/stock ratio (a bootstrap over repetitions, or a t interval
over processes), verdicts, rounds needed; and the Wilson interval of a proportion (how often a check fails)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
RESOLVE = 0.01  # the smallest change (1%) a comparison should be able to call
BOOTSTRAP_RESAMPLES = 4000
SEED = 12345  # fixed so that a report made twice from the same samples shows the same interval


@dataclass(frozen=True)
class RatioEstimate:
    """variant/stock of median tokens per second (or of times), with its interval and what it supports."""

    stock_median: float
    variant_median: float
    ratio: float
    low: float
    high: float
    n_stock: int
    n_variant: int

    @property
    def verdict(self) -> str:
        if math.isnan(self.low) or math.isnan(self.high):
            return "unknown"
        if self.low <= 1.0 <= self.high:
            return "same"
        return "faster" if self.low > 1.0 else "slower"

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    @property
    def resolves_one_percent(self) -> bool:
        return self.half_width <= RESOLVE


def _ratio_of_medians(variant: np.ndarray, stock: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(variant, axis=axis) / np.median(stock, axis=axis)


def ratio_estimate(stock: list[float], variant: list[float]) -> RatioEstimate:
    """Median of each side and a percentile-bootstrap 95% interval of their ratio (samples resampled per side)."""
    s = np.asarray(stock, dtype=float)
    v = np.asarray(variant, dtype=float)
    if s.size == 0 or v.size == 0:
        raise ValueError("both sides need at least one sample")
    ratio = float(np.median(v) / np.median(s))
    if s.size < 2 or v.size < 2 or (np.ptp(s) == 0 and np.ptp(v) == 0):
        low = high = ratio if (s.size >= 2 and v.size >= 2) else float("nan")
    else:
        from scipy import stats as sps  # imported on first use: the CLI starts without scipy

        result = sps.bootstrap(
            (v, s),
            _ratio_of_medians,
            vectorized=True,
            paired=False,
            confidence_level=CONFIDENCE,
            n_resamples=BOOTSTRAP_RESAMPLES,
            method="percentile",
            rng=np.random.default_rng(SEED),
        )
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    return RatioEstimate(float(np.median(s)), float(np.median(v)), ratio, low, high, int(s.size), int(v.size))


WELCH = (
    "Welch t interval of the log ratio of process medians' geometric means when each side has 2+ processes (session 54)"
)
BOOTSTRAP = "two-level percentile bootstrap (processes, then repetitions) when each side has 2+ processes"
INTERVAL_METHOD = WELCH  # what new results use and record; BOOTSTRAP is what results before session 54 recorded


def grouped_ratio_estimate(
    stock_groups: list[list[float]], variant_groups: list[list[float]], method: str = INTERVAL_METHOD
) -> RatioEstimate:
    """Like :func:`ratio_estimate`, but the samples of each side come from several processes (rounds).

    Repetitions inside one process share its state (clocks, placement, allocator), so they are not independent:
    treating them as such gives intervals that miss the offsets between processes. With at least two processes a
    side (:data:`WELCH`), each process counts once, by its median: the ratio is that of the two sides' geometric means
    of process medians, and its interval is Welch's t interval of the difference of their mean logs (degrees of
    freedom by Welch-Satterthwaite, so two or three processes a side give the wide interval they deserve). With one
    process a side it falls back to :func:`ratio_estimate` over the repetitions.

    ``method=BOOTSTRAP`` is the two-level percentile bootstrap (processes, then repetitions; the ratio of pooled
    medians) that results before session 54 used and recorded; a report of such a result recomputes with it. On A/A
    comparisons with the process offsets of session 54's races it made about 4% false calls with five processes a
    side, but 7-15% with three and 18-30% with two; this interval made 2-4% at each
    (results/h100-2026-12-07-session54-processes/coverage.py; tests/test_eval_stats.py checks both).
    """
    stock = [np.asarray(g, dtype=float) for g in stock_groups if len(g)]
    variant = [np.asarray(g, dtype=float) for g in variant_groups if len(g)]
    flat_s, flat_v = np.concatenate(stock), np.concatenate(variant)
    if len(stock) < 2 or len(variant) < 2:
        return ratio_estimate(flat_s.tolist(), flat_v.tolist())
    if method == BOOTSTRAP:
        ratio, low, high = _two_level_bootstrap(stock, variant)
    elif method == WELCH:
        ratio, low, high = _welch_over_processes(stock, variant)
    else:
        raise ValueError(f"unknown interval method: {method!r}")
    return RatioEstimate(float(np.median(flat_s)), float(np.median(flat_v)), ratio, low, high, flat_s.size, flat_v.size)


def _welch_over_processes(stock: list[np.ndarray], variant: list[np.ndarray]) -> tuple[float, float, float]:
    """Ratio of geometric means of process medians and its Welch t interval (computed in logs); NaN (verdict
    "unknown") when a process's median is not positive (a run that timed nothing has no log)."""
    medians_s = np.array([np.median(g) for g in stock])
    medians_v = np.array([np.median(g) for g in variant])
    if (medians_s <= 0).any() or (medians_v <= 0).any():
        return math.nan, math.nan, math.nan
    log_s, log_v = np.log(medians_s), np.log(medians_v)
    shift = float(log_v.mean() - log_s.mean())
    var_s, var_v = log_s.var(ddof=1) / log_s.size, log_v.var(ddof=1) / log_v.size
    half = 0.0
    if var_s + var_v > 0:
        from scipy import stats as sps  # imported on first use: the CLI starts without scipy

        dof = (var_s + var_v) ** 2 / (var_s**2 / (log_s.size - 1) + var_v**2 / (log_v.size - 1))
        half = float(sps.t.ppf(0.5 + CONFIDENCE / 2, dof) * math.sqrt(var_s + var_v))
    return math.exp(shift), math.exp(shift - half), math.exp(shift + half)


def _two_level_bootstrap(stock: list[np.ndarray], variant: list[np.ndarray]) -> tuple[float, float, float]:
    """Ratio of pooled medians and the percentile interval of resampling processes, then repetitions in each."""
    rng = np.random.default_rng(SEED)
    ratios = _hierarchical_medians(variant, rng, BOOTSTRAP_RESAMPLES) / _hierarchical_medians(
        stock, rng, BOOTSTRAP_RESAMPLES
    )
    alpha = (1 - CONFIDENCE) / 2
    low, high = np.quantile(ratios, [alpha, 1 - alpha])
    return float(np.median(np.concatenate(variant)) / np.median(np.concatenate(stock))), float(low), float(high)


def _hierarchical_medians(groups: list[np.ndarray], rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Bootstrap medians of a side whose samples come in processes: resample processes, then samples."""
    sizes = {g.size for g in groups}
    if len(sizes) == 1:  # the usual case, vectorised: every process ran the same repetitions
        table = np.stack(groups)
        count, size = table.shape
        chosen = rng.integers(0, count, size=(resamples, count))
        inner = rng.integers(0, size, size=(resamples, count, size))
        return np.median(table[chosen[..., None], inner].reshape(resamples, -1), axis=1)
    medians = np.empty(resamples)
    for b in range(resamples):
        chosen = rng.integers(0, len(groups), size=len(groups))
        pooled = np.concatenate([rng.choice(groups[g], size=groups[g].size, replace=True) for g in chosen])
        medians[b] = np.median(pooled)
    return medians


def recorded_method(summary: list[dict]) -> str:
    """The interval method an eval's speed summary recorded: :data:`WELCH` where its rows say so, else
    :data:`BOOTSTRAP` (every result before session 54, including those that recorded no method)."""
    return WELCH if any(row.get("interval_method") == WELCH for row in summary) else BOOTSTRAP


def rounds_needed(estimate: RatioEstimate, rounds: int, target: float = RESOLVE) -> int | None:
    """Rounds that would shrink the interval's half-width to ``target``, assuming it narrows as 1/sqrt(n);
    None when there is no interval to extrapolate from (one sample a side)."""
    if not math.isfinite(estimate.half_width):
        return None
    if estimate.half_width <= target or rounds <= 0:
        return rounds
    return math.ceil(rounds * (estimate.half_width / target) ** 2 - 1e-9)


@dataclass(frozen=True)
class PairedEstimate:
    """variant/stock paired by round: each round's ratio of process medians, their geometric mean, and a
    t interval over rounds. Drift that moves both sides of a round together cancels in each ratio."""

    ratio: float
    low: float
    high: float
    rounds: int

    @property
    def verdict(self) -> str:
        if self.low <= 1.0 <= self.high:
            return "same"
        return "faster" if self.low > 1.0 else "slower"


MIN_PAIRED_ROUNDS = 3  # two ratios give a t interval too wide to say anything


def paired_rounds_estimate(pairs: list[tuple[list[float], list[float]]]) -> PairedEstimate | None:
    """``pairs``: (stock samples, variant samples) of each round, from the processes of that round.

    Returns None with fewer than MIN_PAIRED_ROUNDS rounds that have samples on both sides. Assumes the
    rounds are exchangeable (the eval alternates the order of sides, ABBA) and the log ratios roughly normal.
    """
    logs = [
        math.log(float(np.median(v)) / float(np.median(s)))
        for s, v in pairs
        if len(s) and len(v) and float(np.median(s)) > 0 and float(np.median(v)) > 0
    ]
    if len(logs) < MIN_PAIRED_ROUNDS:
        return None
    from scipy import stats as sps  # imported on first use: the CLI starts without scipy

    values = np.asarray(logs)
    mean = float(values.mean())
    half = float(sps.t.ppf(0.5 + CONFIDENCE / 2, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size))
    return PairedEstimate(math.exp(mean), math.exp(mean - half), math.exp(mean + half), int(values.size))


def process_groups(runs: list[dict]) -> dict[str, dict[str, list[list[float]]]]:
    """test -> side -> the samples of each llama-bench process of an eval's speed runs, kept apart (the groups
    :func:`grouped_ratio_estimate` resamples)."""
    groups: dict[str, dict[str, list[list[float]]]] = {}
    for run in runs:
        for entry in run["tests"]:
            groups.setdefault(entry["test"], {}).setdefault(run["side"], []).append(list(entry["samples_ts"]))
    return groups


def round_pairs(runs: list[dict], test: str, stock: str, variant: str) -> list[tuple[list[float], list[float]]]:
    """The samples of ``test`` for stock and ``variant`` in each round of an eval's speed runs."""
    by_round: dict[int, dict[str, list[float]]] = {}
    for run in runs:
        for entry in run["tests"]:
            if entry["test"] == test and run["side"] in (stock, variant):
                by_round.setdefault(run["round"], {}).setdefault(run["side"], []).extend(entry["samples_ts"])
    return [(sides.get(stock, []), sides.get(variant, [])) for _, sides in sorted(by_round.items())]


def wilson_interval(hits: int, n: int) -> tuple[float, float]:
    """The 95% Wilson score interval of the proportion hits / n ((0, 1) when n is 0)."""
    if n == 0:
        return 0.0, 1.0
    z = 1.959963984540054
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
