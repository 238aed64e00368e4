"""Pure unit tests: the ratio interval, verdicts and rounds needed."""

from __future__ import annotations

import math

import numpy as np

from evals.stats import RatioEstimate, ratio_estimate, rounds_needed


def test_clearly_faster_variant_is_faster() -> None:
    rng = np.random.default_rng(1)
    stock = list(100 + rng.normal(0, 0.5, 20))
    variant = list(110 + rng.normal(0, 0.5, 20))
    est = ratio_estimate(stock, variant)
    assert est.verdict == "faster"
    assert est.low > 1.0 and est.low <= est.ratio <= est.high
    assert math.isclose(est.ratio, np.median(variant) / np.median(stock))


def test_clearly_slower_variant_is_slower() -> None:
    rng = np.random.default_rng(2)
    est = ratio_estimate(list(100 + rng.normal(0, 0.5, 20)), list(90 + rng.normal(0, 0.5, 20)))
    assert est.verdict == "slower" and est.high < 1.0


def test_same_distribution_gives_same() -> None:
    rng = np.random.default_rng(3)
    est = ratio_estimate(list(100 + rng.normal(0, 2, 30)), list(100 + rng.normal(0, 2, 30)))
    assert est.verdict == "same" and est.low <= 1.0 <= est.high


def test_identical_constant_samples_give_a_point_interval() -> None:
    est = ratio_estimate([50.0] * 4, [50.0] * 4)
    assert (est.low, est.ratio, est.high, est.verdict) == (1.0, 1.0, 1.0, "same")


def test_single_samples_have_no_interval() -> None:
    est = ratio_estimate([50.0], [51.0])
    assert est.verdict == "unknown"
    assert rounds_needed(est, 1) is None  # nothing to extrapolate from (this crashed an eval with -r 1 --rounds 1)


def test_interval_is_reproducible() -> None:
    stock, variant = [100.0, 101.0, 99.0, 100.5], [102.0, 101.5, 103.0, 100.0]
    assert ratio_estimate(stock, variant) == ratio_estimate(stock, variant)


def test_rounds_needed_scales_with_the_square_of_the_width() -> None:
    est = RatioEstimate(100, 100, 1.0, 0.96, 1.04, 8, 8)  # ±4%
    assert not est.resolves_one_percent
    assert rounds_needed(est, 4) == 64  # (4% / 1%)^2 x 4 rounds
    tight = RatioEstimate(100, 100, 1.0, 0.995, 1.005, 8, 8)
    assert tight.resolves_one_percent and rounds_needed(tight, 4) == 4


def test_grouped_interval_holds_its_level_when_processes_drift() -> None:
    """A/A comparisons whose processes land at different speeds (3% between processes, 0.2% within):
    resampling repetitions as if they were independent calls identical code faster or slower about
    four times as often as a 95% interval should; resampling processes first halves that (three
    processes per side still leave the percentile interval a little short of its level)."""
    from evals.stats import grouped_ratio_estimate

    rng = np.random.default_rng(7)
    naive_false = grouped_false = 0
    trials = 100
    for _ in range(trials):
        stock = [list(100 * rng.normal(1, 0.01) * rng.normal(1, 0.002, 5)) for _ in range(3)]
        variant = [list(100 * rng.normal(1, 0.01) * rng.normal(1, 0.002, 5)) for _ in range(3)]
        naive_false += ratio_estimate(list(np.concatenate(stock)), list(np.concatenate(variant))).verdict != "same"
        grouped_false += grouped_ratio_estimate(stock, variant).verdict != "same"
    assert naive_false >= 20
    assert grouped_false <= 12 and grouped_false <= naive_false / 2


def test_grouped_interval_still_resolves_a_real_change() -> None:
    from evals.stats import grouped_ratio_estimate

    rng = np.random.default_rng(8)
    stock = [list(100 + rng.normal(0, 0.3, 5)) for _ in range(3)]
    variant = [list(95 + rng.normal(0, 0.3, 5)) for _ in range(3)]
    est = grouped_ratio_estimate(stock, variant)
    assert est.verdict == "slower" and est.high < 0.96


def _drifting_rounds(rng: np.random.Generator, rounds: int, gain: float) -> list[tuple[list[float], list[float]]]:
    """Rounds whose speed drifts down 1% a round (as on the H200 session), the variant ``gain`` faster in each."""
    pairs = []
    for r in range(rounds):
        level = 100 * (1 - 0.01 * r)
        stock = list(level * rng.normal(1, 0.004, 5))
        variant = list(level * (1 + gain) * rng.normal(1, 0.004, 5))
        pairs.append((stock, variant))
    return pairs


def test_pairing_by_round_resolves_a_change_that_drift_hides() -> None:
    from evals.stats import grouped_ratio_estimate, paired_rounds_estimate

    pairs = _drifting_rounds(np.random.default_rng(11), 6, 0.02)
    unpaired = grouped_ratio_estimate([s for s, _ in pairs], [v for _, v in pairs])
    paired = paired_rounds_estimate(pairs)
    assert paired is not None and paired.verdict == "faster" and 1.01 < paired.ratio < 1.03
    assert unpaired.half_width > 2 * (paired.high - paired.low) / 2  # drift widens the unpaired interval


def test_pairing_by_round_holds_its_level_on_a_drifting_a_a_run() -> None:
    """Identical code under drift: the paired t interval calls a difference in about 5% of runs, not more."""
    from evals.stats import paired_rounds_estimate

    rng = np.random.default_rng(12)
    false_calls = 0
    for _ in range(200):
        estimate = paired_rounds_estimate(_drifting_rounds(rng, 6, 0.0))
        assert estimate is not None
        false_calls += estimate.verdict != "same"
    assert false_calls <= 20  # 5% of 200 is 10; allow sampling noise


def test_pairing_needs_three_rounds_and_reads_an_eval_run_list() -> None:
    from evals.stats import paired_rounds_estimate, round_pairs

    runs = [
        {"side": side, "round": r, "tests": [{"test": "tg128", "samples_ts": [100.0 + r, 101.0 + r]}]}
        for r in range(2)
        for side in ("stock", "fusion-1")
    ]
    pairs = round_pairs(runs, "tg128", "stock", "fusion-1")
    assert pairs == [([100.0, 101.0], [100.0, 101.0]), ([101.0, 102.0], [101.0, 102.0])]
    assert paired_rounds_estimate(pairs) is None
