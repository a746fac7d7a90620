"""Early stopping on a development part (issue 23, section 1): ``mlp``, ``barp`` and the probes keep the epoch that
does best on the development queries, report it, and fit exactly as before without one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.routers import get_router
from routerlab.routers._early_stopping import EarlyStopping
from routerlab.routers.base import DevPart

# A network small and fast enough to learn the quirk of the training side below within 80 epochs.
MLP = "mlp:hidden=16,epochs=80,lr=0.003,weight_decay=0,batch_size=16"


def quirky(n: int, seed: int, prefix: str, quirk: bool) -> tuple[RoutingTable, Features]:
    """Two actors: actor a is right when x0 > 0, b otherwise. On a ``quirk`` part the outcomes are flipped where
    x1 > 0.8 (a peculiarity of the training queries only): a network first learns the rule every part shares, then,
    trained longer, the quirk, and gets the development and test queries there wrong."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    good_a = (X[:, 0] > 0) ^ (quirk & (X[:, 1] > 0.8))
    score = np.column_stack([good_a, ~good_a]).astype(float)
    table = RoutingTable.from_arrays(score, actors=["a", "b"], query_ids=[f"{prefix}{i}" for i in range(n)])
    return table, Features.of(X, table.queries, table.actors, "synthetic")


@pytest.fixture(scope="module")
def parts() -> dict[str, tuple[RoutingTable, Features]]:
    return {"train": quirky(300, 0, "tr", True), "dev": quirky(300, 1, "dv", False),
            "test": quirky(400, 2, "te", False)}


def mu_o(router: object, part: tuple[RoutingTable, Features]) -> float:
    table, feats = part
    choice = router.choose(feats)  # type: ignore[attr-defined]
    return float(table.score[np.arange(table.n_queries), choice].mean())


# ------------------------------------------------------------------------------------------------ the tracker
def test_tracker_keeps_the_best_epoch_and_stops_after_patience() -> None:
    es = EarlyStopping("dev_mu_o", higher_is_better=True, patience=2)
    seen = [es.update(v) for v in (0.5, 0.6, 0.7, 0.7, 0.65)]
    # epoch 0 is the start; 3 ties epoch 2 (kept: the earlier); 4 is worse: two epochs without gain = stop
    assert seen == [(True, False), (True, False), (True, False), (False, False), (False, True)]
    assert (es.best_epoch, es.epochs_run, es.best) == (2, 4, 0.7)
    record = es.describe(n_dev=10, max_epochs=20)
    assert record["best_epoch"] == 2 and record["stopped_early"] and record["curve"] == [0.5, 0.6, 0.7, 0.7, 0.65]


def test_tracker_minimises_a_loss_and_never_keeps_a_diverged_epoch() -> None:
    es = EarlyStopping("dev_bce", higher_is_better=False, patience=3)
    for v in (0.7, 0.5, math.nan, 0.4, math.inf):
        es.update(v)
    assert es.best_epoch == 3 and es.best == 0.4
    assert es.describe(5, 4)["curve"] == [0.7, 0.5, None, 0.4, None]  # JSON has no NaN
    start_nan = EarlyStopping("dev_bce", higher_is_better=False, patience=3)
    start_nan.update(math.nan)
    assert start_nan.update(0.9) == (True, False) and start_nan.best_epoch == 1


# ------------------------------------------------------------------------------------------------------- mlp
def test_mlp_trained_too_long_overfits_and_early_stopping_keeps_an_early_epoch(parts: dict) -> None:
    """The hand-made case: 80 epochs learn the training side's quirk; the development part picks an early epoch,
    which routes the (quirk-free) test queries far better."""
    long = get_router(MLP).fit(*parts["train"])
    stopped = get_router(MLP).fit(*parts["train"], dev=DevPart(*parts["dev"]))
    es = stopped.early_stopping
    assert es is not None and long.early_stopping is None
    assert es["metric"] == "dev_mu_o" and es["on"] == "dev" and es["n_dev"] == 300
    assert 1 <= es["best_epoch"] <= 10 and es["stopped_early"] and es["epochs_run"] == es["best_epoch"] + 5
    assert len(es["curve"]) == es["epochs_run"] + 1 and max(es["curve"]) == es["best_value"]
    # the kept parameters are the best epoch's: routing the development queries gives the best value again
    assert mu_o(stopped, parts["dev"]) == pytest.approx(es["best_value"], abs=1e-6)
    assert es["best_value"] > 0.9
    assert mu_o(stopped, parts["test"]) > mu_o(long, parts["test"]) + 0.08
    assert stopped.describe()["early_stopping"] == es


def test_mlp_stopped_at_epoch_k_is_the_mlp_trained_k_epochs(parts: dict) -> None:
    """Watching the development part draws nothing from the training stream: the kept network is exactly the one a
    fit of ``epochs = best_epoch`` without a development part trains."""
    stopped = get_router(MLP).fit(*parts["train"], dev=DevPart(*parts["dev"]))
    k = stopped.early_stopping["best_epoch"]  # type: ignore[index]
    short = get_router(MLP.replace("epochs=80", f"epochs={k}")).fit(*parts["train"])
    X = parts["test"][1]
    np.testing.assert_array_equal(stopped.scores(X), short.scores(X))


def test_mlp_without_a_development_part_is_unchanged(parts: dict) -> None:
    """No development part: every epoch runs, patience does nothing, nothing is recorded (the numbers of the
    existing router tests are those of before)."""
    a = get_router(MLP).fit(*parts["train"])
    b = get_router(MLP + ",patience=1").fit(*parts["train"])
    X = parts["test"][1]
    np.testing.assert_array_equal(a.scores(X), b.scores(X))
    assert "early_stopping" not in a.describe()


def test_a_development_query_with_an_unobserved_cell_is_not_scored(parts: dict) -> None:
    dev, fdev = parts["dev"]
    score = dev.score.copy()
    score[:, 1] = np.nan
    holey = RoutingTable.from_arrays(score, actors=dev.actor_names, query_ids=list(dev.queries.ids))
    with pytest.raises(UsageError, match="no development query has every actor observed"):
        get_router(MLP).fit(*parts["train"], dev=(holey, Features.of(fdev.X, holey.queries, holey.actors, "s")))


# ------------------------------------------------------------------------------------------------------ barp
def test_barp_stops_on_the_development_part_instead_of_its_holdout(parts: dict) -> None:
    spec = "barp:epochs=40,patience=3,dropout=0"
    part = DevPart(*parts["dev"])
    stopped = get_router(spec).fit(*parts["train"], dev=part)
    es = stopped.early_stopping
    assert es is not None and es["metric"] == "dev_expected_reward" and es["n_dev"] == 300
    assert stopped.best_epoch == es["best_epoch"] and stopped.epochs_run == es["epochs_run"]
    # its value: the expected score of its policy on the development queries (by=none: the score itself)
    dev, fdev = parts["dev"]
    expected = float((stopped.distribution(fdev) * dev.score).sum(axis=1).mean())
    assert expected == pytest.approx(es["best_value"], abs=1e-5)
    # the development part replaces the holdout: the holdout share no longer matters, and the policy is the one
    # trained best_epoch epochs on every training query (holdout=0, no development part)
    other = get_router(spec + ",holdout=0.3").fit(*parts["train"], dev=part)
    np.testing.assert_array_equal(stopped.scores(fdev), other.scores(fdev))
    k = es["best_epoch"]
    plain = get_router(f"barp:epochs={max(k, 1)},patience=3,dropout=0,holdout=0").fit(*parts["train"])
    if k >= 1:
        np.testing.assert_array_equal(stopped.scores(fdev), plain.scores(fdev))
    # without a development part: the holdout as before, nothing recorded
    assert get_router(spec).fit(*parts["train"]).early_stopping is None


# ---------------------------------------------------------------------------------------------------- probes
def _probe_problem(seed: int, n: int, prefix: str) -> tuple[RoutingTable, Features]:
    """Small model right exactly when layer 2 . d > 0 (the large model always right); 4 layers x 8 dims."""
    rng = np.random.default_rng(seed)
    hidden = rng.standard_normal((n, 4, 8))
    direction = np.random.default_rng(99).standard_normal(8)
    small = (hidden[:, 2] @ direction + 0.8 * rng.standard_normal(n) > 0).astype(float)
    table = RoutingTable.from_arrays(np.column_stack([small, np.ones(n)]), actors=["small", "large"],
                                     query_ids=[f"{prefix}{i}" for i in range(n)])
    feats = Features.of(np.zeros((n, 1)), table.queries, table.actors, "test").with_signals(
        {"hidden": hidden.astype(np.float32)})
    return table, feats


@pytest.mark.parametrize("name", ["probe-mean", "probe-final", "probe-dirichlet"])
def test_probe_keeps_its_lowest_development_loss(name: str) -> None:
    pytest.importorskip("torch")
    train, dev = _probe_problem(0, 60, "tr"), _probe_problem(1, 200, "dv")
    spec = f"{name}:epochs=40,lr=0.05,patience=3,standardize=true"
    stopped = get_router(spec).fit(*train, dev=DevPart(*dev))
    es = stopped.early_stopping
    assert es is not None and es["metric"] == "dev_bce" and es["direction"] == "min" and es["n_dev"] == 200
    assert es["best_value"] == min(v for v in es["curve"] if v is not None)
    # the kept parameters give the reported loss on the development queries
    s = stopped.small_score(dev[1])  # type: ignore[attr-defined]
    y = dev[0].score[:, 0] >= dev[0].score[:, 1]
    assert float(np.mean(np.logaddexp(0.0, s) - y * s)) == pytest.approx(es["best_value"], abs=1e-5)
    # and are those of the probe trained best_epoch epochs without a development part
    k = es["best_epoch"]
    if k >= 1:
        short = get_router(spec.replace("epochs=40", f"epochs={k}")).fit(*train)
        np.testing.assert_allclose(stopped.small_score(dev[1]), short.small_score(dev[1]),  # type: ignore[attr-defined]
                                   rtol=0, atol=1e-6)
    assert get_router(spec).fit(*train).early_stopping is None


def test_probe_development_part_needs_both_outcomes() -> None:
    pytest.importorskip("torch")
    train, (dev, fdev) = _probe_problem(0, 60, "tr"), _probe_problem(1, 50, "dv")
    score = dev.score.copy()
    score[0, 1] = np.nan
    holey = RoutingTable.from_arrays(score, actors=dev.actor_names, query_ids=list(dev.queries.ids))
    feats = Features.of(fdev.X, holey.queries, holey.actors, "t").with_signals({"hidden": fdev.signal("hidden")})
    with pytest.raises(UsageError, match="lack a small or large score"):
        get_router("probe-mean:epochs=2").fit(*train, dev=(holey, feats))


# --------------------------------------------------------------------------------------------- the contract
def test_routers_that_do_not_train_by_epochs_ignore_the_development_part(parts: dict) -> None:
    X = parts["test"][1]
    for spec in ("knn:k=5", "linear", "best-single"):
        with_dev = get_router(spec).fit(*parts["train"], dev=DevPart(*parts["dev"]))
        without = get_router(spec).fit(*parts["train"])
        np.testing.assert_array_equal(with_dev.scores(X), without.scores(X))
        assert with_dev.early_stopping is None


def test_a_bad_development_part_is_one_usage_error(parts: dict) -> None:
    train, ftrain = parts["train"]
    dev, fdev = parts["dev"]
    router = get_router(MLP)
    with pytest.raises(UsageError, match="also training queries"):
        router.fit(train, ftrain, dev=(train, ftrain))
    with pytest.raises(UsageError, match="development features are not those"):
        router.fit(train, ftrain, dev=(dev, parts["test"][1]))
    other = dev.select_actors(["b", "a"])
    with pytest.raises(UsageError, match="development part has actors"):
        router.fit(train, ftrain, dev=(other, Features.of(fdev.X, other.queries, other.actors, "s")))
    with pytest.raises(UsageError, match="dev must be a DevPart"):
        router.fit(train, ftrain, dev=dev)  # type: ignore[arg-type]
    empty = dev.select_queries(np.zeros(dev.n_queries, dtype=bool))
    with pytest.raises(UsageError, match="development part is empty"):
        router.fit(train, ftrain, dev=(empty, fdev.take(np.arange(0))))
