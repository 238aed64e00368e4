"""Pure unit tests: the ratio interval, verdicts and rounds needed."""

from __future__ import annotations

import math

import numpy as np
import pytest

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


def _offset_processes(rng: np.random.Generator, processes: int) -> list[list[float]]:
    """One side of an A/A comparison: each process lands 1% from the others (as stock against its own control did on
    the H100 in session 54), its 7 rounds 0.2% from one another."""
    return [list(100 * rng.normal(1, 0.01) * rng.normal(1, 0.002, 7)) for _ in range(processes)]


@pytest.mark.parametrize("processes", [2, 3, 6])
def test_grouped_interval_holds_its_level_when_processes_drift(processes: int) -> None:
    """A/A comparisons whose processes land at different speeds: resampling repetitions as if they were independent
    calls identical code faster or slower in a third of them; the interval over processes does so in about 5% of
    comparisons, at two processes a side as at six (the two-level bootstrap it replaced did so in 18-30% at two and
    7-15% at three: results/h100-2026-12-07-session54-processes/coverage.py)."""
    from evals.stats import grouped_ratio_estimate

    rng = np.random.default_rng(7)
    naive_false = grouped_false = 0
    trials = 400
    for trial in range(trials):
        stock, variant = _offset_processes(rng, processes), _offset_processes(rng, processes)
        if trial < 50:
            naive = ratio_estimate(list(np.concatenate(stock)), list(np.concatenate(variant)))
            naive_false += naive.verdict != "same"
        grouped_false += grouped_ratio_estimate(stock, variant).verdict != "same"
    assert naive_false >= 10  # of 50
    assert grouped_false <= 0.075 * trials  # 5% of 400 is 20; 30 allows the sampling noise of a 400-trial count


def test_the_bootstrap_it_replaced_misses_its_level_with_two_or_three_processes() -> None:
    """The reason for the change, kept as a check: the same A/A comparisons, resampled in two levels, call identical
    code faster or slower far more often than 5% of the time with two or three processes a side."""
    from evals.stats import BOOTSTRAP, grouped_ratio_estimate

    for processes, at_least in ((2, 0.15), (3, 0.08)):
        rng = np.random.default_rng(7)
        trials = 200
        false_calls = 0
        for _ in range(trials):
            stock, variant = _offset_processes(rng, processes), _offset_processes(rng, processes)
            false_calls += grouped_ratio_estimate(stock, variant, BOOTSTRAP).verdict != "same"
        assert false_calls >= at_least * trials, (processes, false_calls)


def test_grouped_interval_is_centred_on_the_geometric_means_of_process_medians() -> None:
    from evals.stats import grouped_ratio_estimate

    stock = [[100.0, 101.0, 99.0], [104.0, 104.0, 104.0]]  # process medians 100 and 104
    variant = [[110.0], [110.0, 111.0, 109.0], [121.0]]  # 110, 110, 121
    est = grouped_ratio_estimate(stock, variant)
    expected = (110 * 110 * 121) ** (1 / 3) / (100 * 104) ** 0.5
    assert est.ratio == pytest.approx(expected)
    assert est.low * est.high == pytest.approx(expected**2)  # symmetric in the log
    assert est.stock_median == 102.5 and est.n_variant == 5
    same = grouped_ratio_estimate([[100.0], [100.0]], [[102.0, 102.0], [102.0]])
    assert same.low == same.high == pytest.approx(1.02)  # no spread between processes: no width
    stalled = grouped_ratio_estimate([[0.0, 0.0], [100.0]], [[101.0], [102.0]])  # a process that timed nothing
    assert stalled.verdict == "unknown" and math.isnan(stalled.ratio)
    with pytest.raises(ValueError, match="unknown interval method"):
        grouped_ratio_estimate(stock, variant, "jackknife")


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
