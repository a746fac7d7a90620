"""Thresholds fixed on development queries for a target call rate, applied to others (issue 23)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from routerlab.errors import UsageError
from routerlab.metrics.operating_points import escalate, threshold_for_rate


def test_distinct_scores_give_the_k_lowest() -> None:
    s = [0.9, 0.1, 0.5, 0.3, 0.7]
    t = threshold_for_rate(s, 0.4)  # k = 2: 0.1 and 0.3 escalated, the value is the next one, 0.5
    assert (t.value, t.tie_share, t.n_fit) == (0.5, 0.0, 5)
    assert escalate(s, t).tolist() == [False, True, False, True, False]
    # a fractional k: 0.5 * 5 = 2.5 queries -> the value 0.5 is escalated half the time
    half = threshold_for_rate(s, 0.5)
    assert (half.value, half.tie_share) == (0.5, 0.5)


def test_a_tied_block_is_split_by_the_coin() -> None:
    s = np.array([0.0] * 2 + [0.5] * 6 + [1.0] * 2)  # 10 queries, a block of 6 at 0.5
    t = threshold_for_rate(s, 0.3)  # 3 queries: the 2 zeros and 1/6 of the block
    assert t.value == 0.5 and t.tie_share == pytest.approx(1 / 6)
    big = np.repeat(s, 10_000)
    assert escalate(big, t, seed=1).mean() == pytest.approx(0.3, abs=0.005)
    np.testing.assert_array_equal(escalate(big, t, seed=1), escalate(big, t, seed=1))  # seeded


def test_the_ends() -> None:
    s = [0.2, 0.4, 0.4]
    assert not escalate(s, threshold_for_rate(s, 0.0)).any()
    everything = threshold_for_rate(s, 1.0)
    assert escalate(s, everything).all() and everything.value == math.inf
    assert everything.to_dict()["threshold"] is None


def test_fitted_on_one_set_applied_to_another_reaches_the_rate_within_sampling_noise() -> None:
    rng = np.random.default_rng(0)
    dev, test = rng.normal(size=5000), rng.normal(size=5000)
    realized = escalate(test, threshold_for_rate(dev, 0.3)).mean()
    assert abs(realized - 0.3) < 0.03  # sd of the gap ~ sqrt(.21 * 2 / 5000) = 0.009


@pytest.mark.parametrize("rate", [-0.1, 1.1, float("nan"), True])
def test_bad_rates(rate: float) -> None:
    with pytest.raises(UsageError, match=r"call rate must be in \[0, 1\]"):
        threshold_for_rate([0.1, 0.2], rate)


def test_bad_scores_name_the_query() -> None:
    with pytest.raises(UsageError, match="query 1"):
        threshold_for_rate([0.1, float("nan")], 0.5)
    with pytest.raises(UsageError, match="no development queries"):
        threshold_for_rate([], 0.5)


def test_pacing_keeps_every_prefix_within_the_band_and_the_end_within_band_plus_half_over_n() -> None:
    from routerlab.metrics.operating_points import paced_escalate

    rng = np.random.default_rng(3)
    dev = rng.normal(size=300)
    t = threshold_for_rate(dev, 0.3)
    drifted = rng.normal(loc=0.7, size=2000)  # traffic easier than dev: the bare threshold escalates ~12%
    bare = escalate(drifted, t)
    assert abs(bare.mean() - 0.3) > 0.1
    paced = paced_escalate(drifted, t, band=0.02)
    counts = np.cumsum(paced)
    steps = np.arange(1, drifted.size + 1)
    assert (np.abs(counts - 0.3 * steps) <= 0.02 * steps + 0.5 + 1e-9).all()
    assert abs(paced.mean() - 0.3) <= 0.02 + 0.5 / drifted.size
    # with no band at all the count stays within half a query of 0.3 t: the slack is the least that works
    tight = np.cumsum(paced_escalate(drifted, t, band=0.0))
    assert (np.abs(tight - 0.3 * steps) <= 0.5 + 1e-9).all()
    # within the band, the decision is the threshold's own: the paced choice escalates the lower scores
    assert drifted[paced].mean() < drifted[~paced].mean()


def test_pacing_changes_nothing_when_the_threshold_keeps_the_rate_itself() -> None:
    from routerlab.metrics.operating_points import paced_escalate

    s = np.tile([0.5, 0.9, 0.1, 0.7, 0.95, 0.8, 0.6, 0.3, 0.4, 0.99], 30)  # 0.1 and 0.3 below 0.4: rate 0.2
    t = threshold_for_rate(s, 0.2)
    np.testing.assert_array_equal(paced_escalate(s, t), escalate(s, t))
    np.testing.assert_array_equal(paced_escalate(s, t, band=1.0), escalate(s, t))


def test_pacing_band_is_checked() -> None:
    from routerlab.metrics.operating_points import paced_escalate

    with pytest.raises(UsageError, match="pacing band"):
        paced_escalate([0.1], threshold_for_rate([0.1, 0.2], 0.5), band=float("nan"))
