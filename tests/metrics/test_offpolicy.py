"""Off-policy estimators on logs small enough to check by hand (metrics/offpolicy.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from routerlab.metrics import offpolicy as op
from routerlab.metrics.bootstrap import FewQueriesWarning, percentile_interval, resample_indices

# Four logged queries, three actors. Logged actors, their propensities and observed rewards:
A = np.array([0, 1, 2, 0])
P = np.array([0.5, 0.25, 0.25, 0.5])
R = np.array([1.0, 0.0, 1.0, 0.5])
# the target router chooses actors 0, 1, 1, 1: it agrees with the log on queries 0 and 1
CHOICE = np.array([0, 1, 1, 1])
DIST = np.eye(3)[CHOICE]
PI = (A == CHOICE).astype(float)  # 1, 1, 0, 0 -> weights 2, 4, 0, 0


def test_hand_computed_ips_snips_ess() -> None:
    w = op.importance_weights(PI, P)
    assert w.tolist() == [2.0, 4.0, 0.0, 0.0]
    assert float(op.ips(R, PI, P)) == pytest.approx((2 * 1 + 4 * 0) / 4)  # 0.5
    assert float(op.snips(R, PI, P)) == pytest.approx(2 / 6)
    assert float(op.effective_sample_size(w)) == pytest.approx(6**2 / (2**2 + 4**2))  # 1.8
    assert float(op.effective_sample_size(np.ones(7))) == pytest.approx(7.0)
    assert float(op.effective_sample_size(np.zeros(3))) == 0.0


def test_hand_computed_dr() -> None:
    rhat = np.full((4, 3), 0.5)
    # direct 0.5 each; corrections w (r - 0.5) = 1, -2, 0, 0 -> terms 1.5, -1.5, 0.5, 0.5
    terms = op.dr_contributions(R, A, P, DIST, rhat)
    assert terms.numerator.tolist() == [1.5, -1.5, 0.5, 0.5]
    assert float(op.dr(R, A, P, DIST, rhat)) == pytest.approx(0.25)


def test_dr_with_a_perfect_model_is_exact_and_with_zero_is_ips() -> None:
    rng = np.random.default_rng(3)
    n, m = 50, 4
    truth = rng.random((n, m))  # every actor's reward on every query
    target = rng.dirichlet(np.ones(m), size=n)
    logging = rng.dirichlet(np.ones(m), size=n)
    a = np.array([rng.choice(m, p=row) for row in logging])
    p = logging[np.arange(n), a]
    r = truth[np.arange(n), a]
    true_value = float((target * truth).sum(axis=1).mean())
    assert float(op.dr(r, a, p, target, truth)) == pytest.approx(true_value, abs=1e-12)
    pi = target[np.arange(n), a]
    assert float(op.dr(r, a, p, target, np.zeros((n, m)))) == pytest.approx(float(op.ips(r, pi, p)), abs=1e-12)


def test_snips_with_uniform_log_and_uniform_target_is_the_plain_mean() -> None:
    rng = np.random.default_rng(0)
    r = rng.random(20)
    p = np.full(20, 0.25)
    pi = np.full(20, 0.25)
    assert float(op.snips(r, pi, p)) == pytest.approx(float(r.mean()))
    assert float(op.ips(r, pi, p)) == pytest.approx(float(r.mean()))


def test_snips_is_undefined_when_no_logged_query_agrees() -> None:
    pi = np.zeros(4)
    assert math.isnan(float(op.snips(R, pi, P)))
    assert float(op.ips(R, pi, P)) == 0.0
    d = op.weight_diagnostics(op.importance_weights(pi, P), P, 3)
    assert d.n_agree == 0 and d.ess == 0.0
    assert any("SNIPS is undefined" in w for w in d.warnings)
    lo, hi = op.snips_contributions(R, op.importance_weights(pi, P)).normal_interval()
    assert math.isnan(float(lo)) and math.isnan(float(hi))


def test_normal_intervals_by_hand() -> None:
    # the 4-query log 8 times over: 32 queries, enough (MIN_QUERIES) for an interval
    r, w = np.tile(R, 8), np.tile(op.importance_weights(PI, P), 8)
    z = 1.959963984540054
    # IPS terms (2, 0, 0, 0) x 8: mean 0.5, squared deviations 8 * (2.25 + 3 * 0.25) = 24, sd sqrt(24 / 31)
    se = math.sqrt(24 / 31) / math.sqrt(32)
    lo, hi = op.ips_contributions(r, w).normal_interval()
    assert (float(lo), float(hi)) == pytest.approx((0.5 - z * se, 0.5 + z * se))
    # SNIPS: w (r - V) = (4/3, -4/3, 0, 0) x 8, sum w = 48; se = sqrt(8 * 32/9 * 32/31) / 48
    se = math.sqrt(8 * 32 / 9 * 32 / 31) / 48
    lo, hi = op.snips_contributions(r, w).normal_interval()
    assert (float(lo), float(hi)) == pytest.approx((1 / 3 - z * se, 1 / 3 + z * se))


def test_no_normal_interval_below_the_minimum_of_queries() -> None:
    """Issue 21: an interval over 4 logged queries is not computed (NaN: unavailable), with a warning."""
    with pytest.warns(FewQueriesWarning, match="only 4 logged queries"):
        lo, hi = op.ips_contributions(R, op.importance_weights(PI, P)).normal_interval()
    assert math.isnan(float(lo)) and math.isnan(float(hi))
    with pytest.warns(FewQueriesWarning, match="only 4 logged queries"):
        (blo, bhi), = op.bootstrap_intervals([op.ips_contributions(R, op.importance_weights(PI, P))])
    assert math.isnan(blo) and math.isnan(bhi)


def test_leading_axes_equal_one_log_at_a_time() -> None:
    rng = np.random.default_rng(1)
    s, n, m = 6, 40, 3
    a = rng.integers(0, m, size=(s, n))
    p = np.full((s, n), 1 / m)
    r = rng.random((s, n))
    dist = rng.dirichlet(np.ones(m), size=n)
    rhat = rng.random((s, n, m))
    for est in op.ESTIMATORS:
        batch = op.contributions(est, r, a, p, dist[None], rhat if est == "dr" else None)
        lo, hi = batch.normal_interval()
        for i in range(s):
            one = op.contributions(est, r[i], a[i], p[i], dist, rhat[i] if est == "dr" else None)
            assert float(one.value()) == pytest.approx(float(batch.value()[i]))
            olo, ohi = one.normal_interval()
            assert (float(olo), float(ohi)) == pytest.approx((float(lo[i]), float(hi[i])))


def test_bootstrap_intervals_equal_a_loop_over_resamples() -> None:
    rng = np.random.default_rng(2)
    n, m = 30, 3
    a = rng.integers(0, m, size=n)
    p = np.full(n, 1 / m)
    r = rng.random(n)
    dist = np.eye(m)[rng.integers(0, m, size=n)]
    rhat = rng.random((n, m))
    terms = [op.contributions(e, r, a, p, dist, rhat) for e in op.ESTIMATORS]
    got = op.bootstrap_intervals(terms, n_boot=200, seed=5)
    idx = np.concatenate(list(resample_indices(n, 200, 5)))
    for t, (lo, hi) in zip(terms, got, strict=True):
        if t.denominator is None:
            reps = t.numerator[idx].mean(axis=1)
        else:
            den = t.denominator[idx].sum(axis=1)
            reps = np.where(den > 0, t.numerator[idx].sum(axis=1) / np.where(den > 0, den, 1), np.nan)
        assert (lo, hi) == pytest.approx(percentile_interval(reps))


def test_diagnostics_warn_on_tiny_propensities_and_low_ess() -> None:
    p = np.array([0.001, 0.5, 0.5, 0.5])
    w = np.array([1 / 0.001, 0.0, 0.0, 0.0])
    d = op.weight_diagnostics(w, p, 4)
    assert d.min_propensity == 0.001 and d.max_weight == 1000.0 and d.n_agree == 1
    assert d.ess == pytest.approx(1.0)
    text = " ".join(d.warnings)
    assert "propensity below 0.025" in text and "below 30" in text
    # a uniform log of 300 queries with a deterministic target: ESS ~ n / m, no warning
    rng = np.random.default_rng(0)
    agree = rng.integers(0, 3, size=300) == 0
    d = op.weight_diagnostics(agree * 3.0, np.full(300, 1 / 3), 3)
    assert d.warnings == [] and d.ess == pytest.approx(agree.sum())


def test_bad_inputs_raise() -> None:
    with pytest.raises(ValueError, match=r"propensities must lie in \(0, 1\]"):
        op.importance_weights([1.0], [0.0])
    with pytest.raises(ValueError, match="NaN"):
        op.ips([np.nan], [1.0], [0.5])
    with pytest.raises(ValueError, match="unknown estimator"):
        op.contributions("ipw", R, A, P, DIST)
    with pytest.raises(ValueError, match="reward model"):
        op.contributions("dr", R, A, P, DIST)
    with pytest.raises(ValueError, match="outside the 3 actors"):
        op.dr(R, np.array([0, 1, 3, 0]), P, DIST, np.zeros((4, 3)))


def test_ridge_reward_model_is_cross_fitted_and_falls_back_to_means() -> None:
    rng = np.random.default_rng(4)
    n, m, d = 300, 3, 4
    x = rng.normal(size=(n, d))
    a = rng.integers(0, m, size=n)
    a[:5] = 2  # actor 2 is logged on 5 queries only: it falls back to its mean
    a[5:][a[5:] == 2] = 0
    beta = rng.normal(size=(m, d))
    r = (x * beta[a]).sum(axis=1) + 0.5
    fold = op.fold_assignment(n, 5, seed=0)
    assert np.bincount(fold).tolist() == [60] * 5
    rhat, fallback = op.ridge_reward_model(x, a, r, m, fold, alpha=1e-6)
    assert fallback == 5  # actor 2 in every fold
    # a linear reward is recovered by the fitted actors (clipped to the logged range)
    for actor in (0, 1):
        truth = np.clip(x @ beta[actor] + 0.5, r.min(), r.max())
        assert np.allclose(rhat[:, actor], truth, atol=1e-4)
    # actor 2: the mean of its logged rewards outside each query's fold
    for i in range(n):
        outside = (a == 2) & (fold != fold[i])
        assert rhat[i, 2] == pytest.approx(r[outside].mean())
    # cross-fitting: a query's own reward never changes its own prediction
    r2 = r.copy()
    r2[7] += 100.0
    rhat2, _ = op.ridge_reward_model(x, a, r2, m, fold, alpha=1e-6)
    same = fold == fold[7]
    lo, hi = min(r.min(), r2.min()), max(r.max(), r2.max())
    assert np.allclose(np.clip(rhat[same], lo, hi), rhat2[same])
    assert not np.allclose(rhat[~same], rhat2[~same])
    # several reward columns at once give the single-column answers
    both, _ = op.ridge_reward_model(x, a, np.column_stack([r, 1 - r]), m, fold, alpha=1e-6)
    assert np.allclose(both[..., 0], rhat)


@pytest.mark.parametrize("d", [3, 40])  # primal (rows > d) and dual (rows <= d) systems
def test_ridge_reward_model_equals_scikit_learn_ridge_per_fold_and_actor(d: int) -> None:
    from sklearn.linear_model import Ridge

    rng = np.random.default_rng(d)
    n, m = 120, 3
    x = rng.normal(size=(n, d))
    a = rng.integers(0, m, size=n)
    r = rng.random((n, 2))
    fold = op.fold_assignment(n, 3, seed=1)
    rhat, fallback = op.ridge_reward_model(x, a, r, m, fold, alpha=0.7, min_rows=2)
    assert fallback == 0
    for g in range(3):
        for actor in range(m):
            rows = (fold != g) & (a == actor)
            want = Ridge(alpha=0.7).fit(x[rows], r[rows]).predict(x[fold == g])
            assert np.allclose(rhat[fold == g, actor], np.clip(want, r.min(axis=0), r.max(axis=0)))
