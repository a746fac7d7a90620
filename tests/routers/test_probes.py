"""Hidden-state probes (SPEC 6; routerxbench-probedirichlet.txt Algorithm 1): probe-dirichlet, probe-mean, probe-final
on small synthetic hidden states whose label is a linear function of one known layer."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from routerlab.data.table import RoutingTable
from routerlab.errors import DataError, UsageError
from routerlab.features.base import Features
from routerlab.metrics.curves import router_auroc
from routerlab.routers import get_router, probes
from routerlab.routers.probes import HiddenStateProbe, ProbeDirichlet, layer_statistics

FAST = {"epochs": 20, "lr": 0.01}  # the paper's lr 1e-4 x 50 epochs is sized for 12K examples
N_TRAIN = 400


def problem(layers: int, dim: int, informative: int, shared: float, seed: int = 0,
            n: int = 600) -> tuple[RoutingTable, Features, np.ndarray]:
    """n queries whose small model is right exactly when z_informative . d > 0 (the large model always is).
    Each layer = shared * c + its own noise (shared > 0: layers correlated as in a residual stream); dims 0-1 are
    scaled up 40x, like the few huge dimensions of real hidden states. Returns the table, features, hidden."""
    rng = np.random.default_rng(seed)
    common = rng.standard_normal((n, 1, dim))
    hidden = shared * common + rng.standard_normal((n, layers, dim))
    hidden[:, :, :2] *= 40
    direction = rng.standard_normal(dim)
    small = (hidden[:, informative] @ direction > 0).astype(float)
    table = RoutingTable.from_arrays(np.column_stack([small, np.ones(n)]), actors=["small", "large"])
    h16 = hidden.astype(np.float16)
    feats = Features.of(np.zeros((n, 1)), table.queries, table.actors, "test").with_signals({"hidden": h16})
    return table, feats, h16


def split(table: RoutingTable, feats: Features) -> tuple[RoutingTable, Features, RoutingTable, Features]:
    train, test = np.arange(N_TRAIN), np.arange(N_TRAIN, table.n_queries)
    return table.select_queries(train), feats.take(train), table.select_queries(test), feats.take(test)


def fit_probe(spec: str, table: RoutingTable, feats: Features, **options: object) -> HiddenStateProbe:
    router = get_router(spec, **options).fit(table, feats)
    assert isinstance(router, HiddenStateProbe)
    return router


def held_out_auroc(spec: str, table: RoutingTable, feats: Features,
                   **options: object) -> tuple[float, HiddenStateProbe]:
    train, ftrain, test, ftest = split(table, feats)
    router = fit_probe(spec, train, ftrain, **{**FAST, **options})
    return router_auroc(router.small_score(ftest), test.score[:, 0], test.score[:, 1]), router


@pytest.mark.parametrize("spec", ["probe-final", "probe-mean", "probe-dirichlet"])
def test_each_probe_learns_a_label_linear_in_the_last_layer(spec: str) -> None:
    table, feats, _ = problem(layers=5, dim=16, informative=4, shared=3.0)
    auc, router = held_out_auroc(spec, table, feats)
    assert auc > 0.9, (spec, auc)
    scores = router.scores(feats)  # actor scores [s, 0]: softmax gives P(small good enough) = sigmoid(s)
    np.testing.assert_array_equal(scores[:, 1], 0.0)
    np.testing.assert_allclose(router.distribution(feats)[:, 0], 1 / (1 + np.exp(-scores[:, 0])))


def test_dirichlet_weights_concentrate_on_the_one_informative_layer() -> None:
    table, feats, _ = problem(layers=6, dim=16, informative=2, shared=0.0)
    auc, router = held_out_auroc("probe-dirichlet", table, feats)
    w = router.layer_weights()
    assert auc > 0.9 and int(np.argmax(w)) == 2 and w[2] > 0.5, (auc, w)
    assert w[0] == 0.0 and w.sum() == pytest.approx(1.0)  # layers=blocks: the embedding output is not read
    # the data really hide the signal in layer 2: the last layer alone and the uniform mean do much worse
    assert held_out_auroc("probe-final", table, feats)[0] < 0.7
    assert held_out_auroc("probe-mean", table, feats)[0] < auc - 0.1


def test_dirichlet_inference_is_the_head_on_alpha_over_its_sum() -> None:
    table, feats, hidden = problem(layers=5, dim=8, informative=3, shared=0.0)
    router = get_router("probe-dirichlet", standardize=True, **FAST).fit(table, feats)
    assert isinstance(router, ProbeDirichlet)
    assert np.abs(router.feature_mean).max() > 1 and router.feature_scale.max() > 10  # really standardised
    alpha = router.concentration()
    assert alpha.sum() == pytest.approx(np.exp(router.log_concentration))
    assert router.log_concentration != 1.0  # b0 is learned (it starts at the option b0 = 1.0)
    np.testing.assert_allclose(router.layer_weights()[1:], alpha / alpha.sum(), rtol=1e-12)
    # eq. 15 by hand: F = sum_l w_l (z_l - mean_l) / scale_l over layers 1.., s = v . F + b
    z = (hidden[:, 1:].astype(np.float64) - router.feature_mean) / router.feature_scale
    fused = np.einsum("bld,l->bd", z, alpha / alpha.sum())
    expected = fused @ router.head_weight.astype(np.float64) + router.head_bias
    np.testing.assert_allclose(router.small_score(feats), expected, rtol=1e-4, atol=1e-4)
    assert router.describe()["layer_weights"] == [round(float(w), 6) for w in router.layer_weights()]


def test_fixed_layer_weights_of_the_ablations() -> None:
    table, feats, _ = problem(layers=5, dim=8, informative=4, shared=1.0, n=100)
    quick = {"epochs": 1}
    mean = fit_probe("probe-mean", table, feats, **quick)
    np.testing.assert_array_equal(mean.layer_weights(), [0, 0.25, 0.25, 0.25, 0.25])
    assert (mean.feature_mean == 0).all() and (mean.feature_scale == 1).all()  # standardize=false by default
    np.testing.assert_array_equal(fit_probe("probe-mean", table, feats, layers="all", **quick).layer_weights(),
                                  [0.2] * 5)
    np.testing.assert_array_equal(fit_probe("probe-final", table, feats, **quick).layer_weights(),
                                  [0, 0, 0, 0, 1])
    everything = fit_probe("probe-dirichlet", table, feats, layers="all", **quick).layer_weights()
    assert everything[0] > 0 and everything.sum() == pytest.approx(1.0)


def test_standardisation_statistics_are_the_exact_mean_and_std(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    hidden = (rng.standard_normal((23, 3, 4)) * [1, 10, 100, 1000] + 50).astype(np.float16)
    hidden[:, 2, 1] = 7.0  # a constant feature: its scale is 1, not 0
    ids = np.array([f"q{i}" for i in range(23)], dtype=object)
    monkeypatch.setattr(probes, "CHUNK_ROWS", 5)  # several chunks, the last one short
    mean, std = layer_statistics(hidden, 1, ids)
    exact = hidden[:, 1:].astype(np.float64)
    expected_std = exact.std(axis=0)
    expected_std[1, 1] = 1.0
    np.testing.assert_allclose(mean, exact.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(std, expected_std, rtol=1e-5)
    hidden[17, 2, 3] = np.inf
    with pytest.raises(DataError, match="'q17'"):
        layer_statistics(hidden, 0, ids)


@pytest.mark.parametrize("spec", ["probe-mean", "probe-dirichlet"])
def test_same_seed_same_scores_other_seed_other_scores(spec: str) -> None:
    import torch

    table, feats, _ = problem(layers=4, dim=8, informative=3, shared=1.0, n=200)
    options = {"epochs": 3, "lr": 0.01}
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    a = fit_probe(spec, table, feats, seed=4, **options).small_score(feats)
    np.testing.assert_array_equal(torch.rand(3), before)  # the caller's global torch RNG is left as it was
    b = fit_probe(spec, table, feats, seed=4, **options).small_score(feats)
    c = fit_probe(spec, table, feats, seed=5, **options).small_score(feats)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_refusals_are_clear_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    table, feats, hidden = problem(layers=4, dim=8, informative=3, shared=1.0, n=60)
    bare = Features.of(np.zeros((60, 1)), table.queries, table.actors, "test")
    with pytest.raises(UsageError, match="probe-dirichlet' needs the small model's per-layer hidden states"):
        get_router("probe-dirichlet").fit(table, bare)
    three = RoutingTable.from_arrays(np.ones((60, 3)), actors=["s", "m", "l"])
    with pytest.raises(UsageError, match="two models"):
        get_router("probe-mean").fit(three, Features.of(np.zeros((60, 1)), three.queries, three.actors, "t"))
    for spec, needle in [("probe-dirichlet:epochs=0", "epochs=0 is out of range"),
                         ("probe-dirichlet:lr=0", "lr=0 is out of range"),
                         ("probe-mean:batch_size=0", "batch_size=0"),
                         ("probe-dirichlet:layers=middle", "one of all, blocks"),
                         ("probe-dirichlet:weight_decay=-1", "weight_decay=-1"),
                         ("probe-final:layers=all", "has no option"),
                         ("probe-mean:standardize=2", "standardize=2")]:
        with pytest.raises(UsageError, match=needle):
            get_router(spec)
    all_good = RoutingTable.from_arrays(np.ones((60, 2)), actors=["small", "large"])
    with pytest.raises(UsageError, match="good enough on all 60 training queries"):
        get_router("probe-final").fit(all_good, feats)
    one_layer = feats.with_signals({"hidden": hidden[:, :1]})
    with pytest.raises(UsageError, match="use layers=all"):
        get_router("probe-mean").fit(table, one_layer)
    with pytest.raises(DataError, match=r"expected \(queries, layers, dim\)"):
        get_router("probe-mean").fit(table, feats.with_signals({"hidden": hidden[:, 0]}))
    fitted = get_router("probe-mean", epochs=1).fit(table, feats)
    with pytest.raises(UsageError, match="4 layers x 8 dims, asked to score 4 x 6"):
        fitted.scores(feats.with_signals({"hidden": hidden[:, :, :6]}))
    broken = hidden.copy()
    broken[7, 3, 2] = np.nan
    with pytest.raises(DataError, match="'q7'"):
        get_router("probe-mean", standardize=False).fit(table, feats.with_signals({"hidden": broken}))
    with pytest.raises(DataError, match="'q7'"):
        fitted.scores(feats.with_signals({"hidden": broken}))
    monkeypatch.setitem(sys.modules, "torch", None)  # torch not installed
    with pytest.raises(UsageError, match=r"pip install torch==2\.13\.0"):
        get_router("probe-dirichlet").fit(table, feats)
