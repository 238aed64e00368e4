"""Speed statistics: medians, a bootstrap interval of the variant/stock ratio, verdicts, rounds needed."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

CONFIDENCE = 0.95
RESOLVE = 0.01  # the smallest change (1%) a comparison should be able to call
BOOTSTRAP_RESAMPLES = 4000
SEED = 12345  # fixed so that a report made twice from the same samples shows the same interval


@dataclass(frozen=True)
class RatioEstimate:
    """variant/stock of median tokens per second, with its bootstrap interval and what it supports."""

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


def rounds_needed(estimate: RatioEstimate, rounds: int, target: float = RESOLVE) -> int:
    """Rounds that would shrink the interval's half-width to ``target``, assuming it narrows as 1/sqrt(n)."""
    if estimate.half_width <= target or rounds <= 0:
        return rounds
    return math.ceil(rounds * (estimate.half_width / target) ** 2 - 1e-9)
