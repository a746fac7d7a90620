"""The embedded demo: deterministic, fast, and a benchmark where routing matters."""

from __future__ import annotations

import numpy as np

from routerlab.data.splits import given_split
from routerlab.datasets import DOMAINS, demo
from routerlab.metrics.bounds import actor_means, bounds


def test_deterministic_in_seed() -> None:
    a, b, c = demo(seed=7), demo(seed=7), demo(seed=8)
    assert a.content_hash == b.content_hash
    assert a.content_hash != c.content_hash


def test_shape_and_columns() -> None:
    t = demo()
    assert 2000 <= t.n_queries <= 5000 and 6 <= t.n_actors <= 10
    assert set(t.dataset_counts()) == set(DOMAINS)
    assert t.split_counts().keys() == {"train", "test"}
    assert t.latency_s is not None and t.cost_usd is not None and t.tokens_out is not None
    assert t.observed_fraction == 1.0
    assert t.describe()["duplicate_texts"] == 0


def test_routing_matters() -> None:
    t = demo()
    train, test = given_split(t).apply(t)
    b = bounds(test.score, train.score)
    # the oracle clearly beats the best single actor, which clearly beats random
    assert b.oracle - b.best_single > 0.08
    assert b.best_single - b.random > 0.1
    # reading the query pays: the best train actor per domain beats the best single actor clearly
    per_domain = {d: int(np.argmax(actor_means(train.select_datasets([d]).score))) for d in DOMAINS}
    chosen = np.array([per_domain[d] for d in test.queries.dataset])
    assert test.score[np.arange(test.n_queries), chosen].mean() - b.best_single > 0.05
    # specialists: on its own domain a 7B specialist beats the large generalists
    means = {d: dict(zip(t.actor_names, actor_means(t.select_datasets([d]).score), strict=True)) for d in DOMAINS}
    assert means["math"]["math-7b"] > means["math"]["large-120b"]
    assert means["code"]["coder-7b"] > means["code"]["large-120b"]


def test_a_small_actor_is_often_the_fastest_correct_one() -> None:
    t = demo()
    assert t.latency_s is not None
    lat = np.where(t.score >= 0.5, t.latency_s, np.inf)
    answerable = np.isfinite(lat).any(axis=1)
    fastest = lat.argmin(axis=1)[answerable]
    small = [i for i, p in enumerate(t.actors.params_b) if p <= 7]
    assert np.isin(fastest, small).mean() > 0.5
    # and the largest actor is rarely the fastest correct one
    assert (fastest == int(np.argmax(t.actors.params_b))).mean() < 0.1


def test_latency_profiles_look_real() -> None:
    t = demo()
    assert t.latency_s is not None
    med = np.median(t.latency_s, axis=0)
    assert med.min() < 1.0 < med.max()  # from sub-second small models to multi-second large ones
    assert t.actors.ttft_ms.min() >= 10 and t.actors.ttft_ms.max() <= 6000
