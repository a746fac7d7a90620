"""The metric registry and ``evaluate_choices`` (SPEC 4, 5, 7)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from routerlab.metrics import registry
from routerlab.metrics.bootstrap import bootstrap_ci, bootstrap_statistic
from routerlab.metrics.cost import mean_cost, mean_latency
from routerlab.metrics.latency import acc_at_1, acc_at_1_l, dcg, l_dcg
from routerlab.metrics.registry import MetricInputs, evaluate_choices, metric, registered_metrics
from routerlab.metrics.selection import e_p, mu_o, softmax, v_b, v_r

RNG = np.random.default_rng(11)
N, M = 120, 4
SCORE = (RNG.random((N, M)) < 0.5).astype(float)
LATENCY = RNG.uniform(0.5, 5.0, (N, M))
COST = RNG.uniform(0.0, 0.01, (N, M))
ROUTER = RNG.normal(size=(N, M))
CHOICE = ROUTER.argmax(axis=1)


@pytest.fixture
def clean_registry() -> Iterator[None]:
    saved = dict(registry._REGISTRY)
    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)


def test_names_follow_the_inputs() -> None:
    assert set(evaluate_choices(SCORE, CHOICE, n_boot=50)) == {"mu_o", "v_b", "acc_at_1"}
    everything = evaluate_choices(SCORE, CHOICE, LATENCY, COST, softmax(ROUTER), reference=0.6, n_boot=50)
    assert set(everything) == {
        "mu_o", "v_b", "v_r", "e_p", "acc_at_1", "acc_at_1_l", "dcg", "l_dcg", "mean_cost", "mean_latency"
    }  # fmt: skip
    assert set(registered_metrics()) >= set(everything)


def test_values_agree_with_the_functions_and_intervals_hold_them() -> None:
    out = evaluate_choices(SCORE, CHOICE, LATENCY, COST, softmax(ROUTER), reference=0.6, n_boot=200, seed=3)
    expected = {
        "mu_o": mu_o(SCORE, CHOICE),
        "v_b": v_b(SCORE, CHOICE),
        "v_r": v_r(SCORE, CHOICE, 0.6),
        "e_p": e_p(softmax(ROUTER)),
        "acc_at_1": acc_at_1(SCORE, CHOICE),
        "acc_at_1_l": acc_at_1_l(SCORE, CHOICE, LATENCY),
        "dcg": dcg(SCORE, CHOICE, LATENCY),
        "l_dcg": l_dcg(SCORE, CHOICE, LATENCY),
        "mean_cost": mean_cost(COST, CHOICE),
        "mean_latency": mean_latency(LATENCY, CHOICE),
    }
    for name, value in expected.items():
        est = out[name]
        assert est.value == pytest.approx(value), name
        assert est.lo <= est.value <= est.hi, name


def test_intervals_match_the_bootstrap_functions_for_the_same_seed() -> None:
    out = evaluate_choices(SCORE, CHOICE, n_boot=300, seed=8)
    chosen = SCORE[np.arange(N), CHOICE]
    assert out["mu_o"] == pytest.approx(bootstrap_ci(chosen, n_boot=300, seed=8))
    best = int(SCORE.mean(axis=0).argmax())
    ratio = bootstrap_statistic(
        lambda idx: chosen[idx].mean(axis=1) / SCORE[:, best][idx].mean(axis=1), N, n_boot=300, seed=8
    )
    assert out["v_b"] == pytest.approx(ratio)
    assert evaluate_choices(SCORE, CHOICE, n_boot=300, seed=8) == out  # deterministic


def test_answerable_only_and_names() -> None:
    score = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]])
    latency = np.array([[1.0, 2.0], [1.0, 1.0], [3.0, 1.0]])
    out = evaluate_choices(score, [0, 0, 1], latency, n_boot=20, answerable_only=True, names=["acc_at_1_l"])
    assert list(out) == ["acc_at_1_l"] and out["acc_at_1_l"].value == 1.0  # 2 answerable queries: no interval
    assert np.isnan(out["acc_at_1_l"].lo) and np.isnan(out["acc_at_1_l"].hi)
    many = evaluate_choices(np.tile(score, (15, 1)), [0, 0, 1] * 15, np.tile(latency, (15, 1)), n_boot=20,
                            answerable_only=True, names=["acc_at_1_l"])
    assert many == {"acc_at_1_l": (1.0, 1.0, 1.0)}  # 30 answerable queries
    with pytest.raises(ValueError, match="unknown metrics"):
        evaluate_choices(score, [0, 0, 1], names=["nope"])


@pytest.mark.usefixtures("clean_registry")
def test_registering_a_metric() -> None:
    @metric("picked_first", needs=("latency",))
    def picked_first(inputs: MetricInputs) -> np.ndarray:
        return np.asarray(inputs.choice == 0, dtype=np.float64)

    assert "picked_first" not in evaluate_choices(SCORE, CHOICE, n_boot=10)
    out = evaluate_choices(SCORE, CHOICE, LATENCY, n_boot=10)
    assert out["picked_first"].value == pytest.approx(np.mean(CHOICE == 0))
    with pytest.raises(ValueError, match="already registered"):
        metric("picked_first")(picked_first)
    with pytest.raises(ValueError, match="unknown inputs"):
        metric("bad", needs=("weather",))
