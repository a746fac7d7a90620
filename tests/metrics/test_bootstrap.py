"""Bootstrap intervals and the paired comparison (SPEC 7)."""

from __future__ import annotations

import numpy as np
import pytest

from routerlab.metrics.bootstrap import (
    bootstrap_ci,
    bootstrap_means,
    bootstrap_statistic,
    paired_bootstrap,
    resample_indices,
)


def _bernoulli(n: int, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).random(n) < 0.5).astype(float)


def test_ci_contains_the_mean_and_has_the_right_width() -> None:
    values = _bernoulli(400)
    est = bootstrap_ci(values, seed=1)
    assert est.value == values.mean()
    assert est.lo <= est.value <= est.hi
    # normal approximation: 2 * 1.96 * sqrt(.25 / 400) = 0.098
    assert est.hi - est.lo == pytest.approx(0.098, rel=0.2)


def test_ci_shrinks_with_n_and_is_seeded() -> None:
    small, large = bootstrap_ci(_bernoulli(100)), bootstrap_ci(_bernoulli(10_000))
    assert (large.hi - large.lo) < (small.hi - small.lo) / 5  # ~ 1 / sqrt(100) = 1/10
    values = _bernoulli(300)
    assert bootstrap_ci(values, seed=5) == bootstrap_ci(values, seed=5)
    assert bootstrap_ci(values, seed=5) != bootstrap_ci(values, seed=6)


def test_degenerate_samples() -> None:
    assert tuple(bootstrap_ci(np.full(20, 0.3))) == pytest.approx((0.3, 0.3, 0.3))
    assert bootstrap_ci([0.7]) == (0.7, 0.7, 0.7)
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_ci([0.1, np.nan])


def test_means_share_resamples_and_match_a_gather() -> None:
    values = np.random.default_rng(2).random((50, 3))
    reps = bootstrap_means(values, n_boot=64, seed=9)
    idx = np.concatenate(list(resample_indices(50, 64, 9)))
    np.testing.assert_allclose(reps, values[idx].mean(axis=1))
    np.testing.assert_allclose(bootstrap_means(values[:, 1], n_boot=64, seed=9), reps[:, 1])


def test_statistic_version_for_a_ratio() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.random(200), rng.random(200) + 0.5
    est = bootstrap_statistic(lambda idx: a[idx].mean(axis=1) / b[idx].mean(axis=1), 200, seed=4)
    assert est.value == pytest.approx(a.mean() / b.mean())
    assert est.lo < est.value < est.hi
    same_draws = bootstrap_statistic(lambda idx: a[idx].mean(axis=1), 200, seed=4)
    assert same_draws == pytest.approx(bootstrap_ci(a, seed=4))


def test_paired_bootstrap() -> None:
    a = _bernoulli(300)
    same = paired_bootstrap(a, a.copy(), seed=0)
    assert (same.diff, same.lo, same.hi, same.p_value) == (0.0, 0.0, 0.0, 1.0)
    rng = np.random.default_rng(1)
    better = np.clip(a + (rng.random(300) < 0.3), 0, 1)  # B right where A is, and on ~30% more
    diff = paired_bootstrap(better, a, n_boot=999, seed=0)
    assert diff.diff == pytest.approx((better - a).mean())
    assert diff.lo > 0 and diff.p_value == pytest.approx(1 / 1000)
    assert paired_bootstrap(better, a, seed=2) == paired_bootstrap(better, a, seed=2)
    noise = paired_bootstrap(_bernoulli(300, 1), _bernoulli(300, 2), seed=0)
    assert noise.lo < 0 < noise.hi and noise.p_value > 0.05
