"""Every registered two-model router declares exactly the small-model signals it reads (``reads_signals``): the
two-model protocol checks the declaration before any training, so a wrong one would either refuse a run that works
or let one start that fails after hours of fitting."""

from __future__ import annotations

import numpy as np
import pytest

from routerlab.data.demo import demo
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.routers import routers
from routerlab.testing import synthetic_signals
from tests.routers.conftest import make

TWO_MODEL = sorted(n for n, c in routers().items() if getattr(c, "two_model", False))
SIGNALS = ("hidden", "option_logits", "self_ask", "samples")


def test_the_two_model_family_is_registered() -> None:
    assert set(TWO_MODEL) >= {"max-logit", "entropy", "margin", "self-ask", "semantic-entropy", "embedding-mlp",
                              "probe-final", "probe-mean", "probe-dirichlet"}


@pytest.mark.parametrize("name", TWO_MODEL)
def test_declared_signals_are_the_ones_read(name: str) -> None:
    table = demo(160, seed=1)
    order = np.argsort(table.actors.params_b, kind="stable")
    pair = table.select_actors([table.actor_names[int(order[0])], table.actor_names[int(order[-1])]])
    X = np.random.default_rng(0).normal(size=(pair.n_queries, 8))
    full = synthetic_signals(pair)
    declared = set(make(name).reads_signals)
    for missing in SIGNALS:
        feats = Features.of(X, pair.queries, pair.actors, "test").with_signals(
            {k: v for k, v in full.items() if k != missing})
        router = make(name)
        if missing in declared:
            with pytest.raises(UsageError, match="extract"):
                router.check_signals(feats)
            continue
        router.check_signals(feats)  # not declared: the check passes and so does a real fit and score
        router.fit(pair, feats)
        assert router.small_score(feats).shape == (pair.n_queries,)
