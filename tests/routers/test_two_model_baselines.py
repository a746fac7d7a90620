"""The two-model baselines of routerxbench sec. 5.1 (SPEC 6): hand-computed values of the logit, self-ask and
semantic-entropy scores, their ordering, AUROC on synthetic data where the signal is (anti-)informative,
embedding-mlp on a separable problem, and the refusals."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import pytest

from routerlab.data.table import RoutingTable
from routerlab.errors import DataError, UsageError
from routerlab.features.base import Features
from routerlab.metrics.curves import router_auroc
from routerlab.routers import get_router
from routerlab.routers.two_model import TwoModelRouter
from routerlab.routers.two_model_baselines import cluster_entropy

NAN = math.nan
SIGNAL_ROUTERS = ["max-logit", "entropy", "margin", "self-ask", "semantic-entropy"]


def pair_table(small: npt.ArrayLike, large: npt.ArrayLike | None = None) -> RoutingTable:
    """A two-actor table (small first) with the small model's 0/1 scores; the large model is always right."""
    s = np.asarray(small, dtype=np.float64)
    big = np.ones_like(s) if large is None else np.asarray(large, dtype=np.float64)
    return RoutingTable.from_arrays(np.column_stack([s, big]), actors=["small", "large"],
                                    text=[f"question {i}" for i in range(s.size)])


def features_of(table: RoutingTable, signals: Mapping[str, npt.ArrayLike],
                X: npt.ArrayLike | None = None) -> Features:
    x = np.zeros((table.n_queries, 1)) if X is None else X
    return Features.of(x, table.queries, table.actors, "test").with_signals(signals)


def score(spec: str, signals: Mapping[str, npt.ArrayLike], small: npt.ArrayLike | None = None) -> np.ndarray:
    """The two-model score of a signal router (fitted on the same rows: it learns nothing)."""
    n = len(next(iter(signals.values())))
    table = pair_table(np.arange(n) % 2 if small is None else small)
    f = features_of(table, signals)
    router = get_router(spec).fit(table, f)
    assert isinstance(router, TwoModelRouter)
    s = router.small_score(f)
    np.testing.assert_array_equal(router.scores(f), np.column_stack([s, np.zeros(n)]))
    return s


# ---------------------------------------------------------------------------- hand-computed values
LOGITS = [[2.0, 1.0, 0.0, NAN], [0.5, 0.5, 0.5, 0.5]]
Z = math.exp(2) + math.exp(1) + 1.0  # softmax over the first row's three options
P = [math.exp(2) / Z, math.exp(1) / Z, 1.0 / Z]  # 0.66524, 0.24473, 0.09003


def test_probabilities_entropy_and_margin_of_logits_2_1_0() -> None:
    assert P[0] == pytest.approx(0.6652409558) and P[1] == pytest.approx(0.2447284711)
    entropy = -sum(p * math.log(p) for p in P)
    assert entropy == pytest.approx(0.8323955, abs=1e-7)
    sig = {"option_logits": LOGITS}
    np.testing.assert_allclose(score("max-logit", sig), [2.0, 0.5])
    np.testing.assert_allclose(score("max-logit:on=probability", sig), [P[0], 0.25])
    np.testing.assert_allclose(score("entropy", sig), [-entropy, -math.log(4)])
    np.testing.assert_allclose(score("entropy:normalize=true", sig), [-entropy / math.log(3), -1.0])
    np.testing.assert_allclose(score("margin", sig), [P[0] - P[1], 0.0], atol=1e-12)
    assert P[0] - P[1] == pytest.approx(0.4205124847)
    np.testing.assert_allclose(score("margin:on=logit", sig), [1.0, 0.0])


def test_the_nan_mask_not_the_column_count_decides_the_options() -> None:
    """[2, 1, 0, NaN] scores as the three options it has, never as four, wherever the NaN sits."""
    moved = [[NAN, 0.0, 2.0, 1.0], [2.0, 1.0, 0.0, NAN]]
    for spec in ("max-logit:on=probability", "entropy", "margin"):
        s = score(spec, {"option_logits": moved})
        assert s[0] == pytest.approx(s[1]), spec


def test_a_shift_of_all_logits_moves_max_logit_only() -> None:
    shifted = [[2.0, 1.0, 0.0, NAN], [12.0, 11.0, 10.0, NAN]]
    np.testing.assert_allclose(score("max-logit", {"option_logits": shifted}), [2.0, 12.0])
    for spec in ("max-logit:on=probability", "entropy", "margin", "margin:on=logit"):
        s = score(spec, {"option_logits": shifted})
        assert s[0] == pytest.approx(s[1]), spec


def test_large_logits_do_not_overflow() -> None:
    s = score("entropy", {"option_logits": [[1000.0, 0.0, NAN], [-1000.0, -1000.0, NAN]]})
    np.testing.assert_allclose(s, [0.0, -math.log(2)], atol=1e-12)


def test_self_ask_passes_the_signal_through() -> None:
    values = np.array([1.5, -0.25, 3.0], dtype=np.float32)
    np.testing.assert_array_equal(score("self-ask", {"self_ask": values}), values.astype(np.float64))
    np.testing.assert_array_equal(score("self-ask", {"self_ask": values[:, None]}), values.astype(np.float64))


def test_semantic_entropy_of_codes() -> None:
    h = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    assert h == pytest.approx(0.6365142)
    codes = np.array([[0, 0, 1, -1],    # H(2/3, 1/3): the missing answer is ignored
                      [3, 3, 3, 3],     # one cluster: 0
                      [0, 1, 2, 3],     # four clusters: log 4
                      [7, -1, 7, 9],    # codes need not be 0..C-1: H(2/3, 1/3)
                      [-1, -1, -1, -1],  # no answer: log k, the largest possible
                      [5, -1, -1, -1]], dtype=np.int32)  # one answer: 0
    expected = [h, 0.0, math.log(4), h, math.log(4), 0.0]
    np.testing.assert_allclose(score("semantic-entropy", {"samples": codes}), np.negative(expected), atol=1e-12)
    entropy, answered = cluster_entropy(codes)
    assert answered.tolist() == [True, True, True, True, False, True]
    np.testing.assert_allclose(entropy[answered], np.array(expected)[answered], atol=1e-12)


def test_semantic_entropy_of_a_query_does_not_depend_on_the_others() -> None:
    codes = np.array([[-1, -1, -1], [0, 1, 2], [0, 0, 1]])
    whole = score("semantic-entropy", {"samples": codes})
    alone = score("semantic-entropy", {"samples": codes[:1]}, small=[1])
    assert alone[0] == whole[0] == pytest.approx(-math.log(3))


# ---------------------------------------------------------------------------- ordering
def test_each_router_orders_a_small_synthetic_set() -> None:
    """Four queries from confident to unsure; every signal router ranks them in that order."""
    signals = {
        "option_logits": [[6.0, 0.0, 0.0, 0.0], [3.0, 1.0, 0.0, NAN], [1.0, 0.5, 0.0, NAN], [0.2, 0.1, 0.1, 0.0]],
        "self_ask": [4.0, 1.0, -1.0, -3.0],
        "samples": [[1, 1, 1, 1], [1, 1, 1, 2], [1, 1, 2, 2], [1, 2, 3, -1]],
    }
    for spec in [*SIGNAL_ROUTERS, "max-logit:on=probability", "margin:on=logit", "entropy:normalize=true"]:
        s = score(spec, signals)
        assert np.all(np.diff(s) < 0), (spec, s)


# ---------------------------------------------------------------------------- AUROC on synthetic data
def _synthetic(informative: bool, n: int = 400, seed: int = 0) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The small model's correctness and signals that follow it (or its opposite, when not informative)."""
    rng = np.random.default_rng(seed)
    good = rng.random(n) < 0.5
    sure = good if informative else ~good
    logits = rng.normal(0.0, 0.5, (n, 4))
    logits[:, 0] += np.where(sure, 3.0, 0.3)
    logits[rng.random(n) < 0.3, 3] = np.nan  # some three-option questions
    codes = np.where(rng.random((n, 6)) < np.where(sure, 0.9, 0.4)[:, None], 0, rng.integers(1, 4, (n, 6)))
    codes[rng.random((n, 6)) < 0.1] = -1
    signals = {"option_logits": logits.astype(np.float32),
               "self_ask": (np.where(sure, 1.0, -1.0) + rng.normal(0.0, 1.0, n)).astype(np.float32),
               "samples": codes.astype(np.int32)}
    return good.astype(np.float64), signals


@pytest.mark.parametrize("spec", [*SIGNAL_ROUTERS, "max-logit:on=probability", "margin:on=logit"])
def test_auroc_follows_the_signal(spec: str) -> None:
    for informative in (True, False):
        small, signals = _synthetic(informative)
        value = router_auroc(score(spec, signals, small=small), small, np.ones_like(small))
        if informative:
            assert value > 0.75, (spec, value)
        else:
            assert value < 0.25, (spec, value)


# ---------------------------------------------------------------------------- embedding-mlp
def _separable(n: int, seed: int) -> tuple[RoutingTable, Features]:
    rng = np.random.default_rng(seed)
    X = rng.normal(0.0, 1.0, (n, 8)).astype(np.float32)
    good = (X[:, 0] + 0.5 * X[:, 1] - 0.25 * X[:, 2]) > 0.0
    table = pair_table(good.astype(np.float64))
    return table, Features.of(X, table.queries, table.actors, "test")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # the reference fit below
def test_embedding_mlp_learns_a_separable_problem_and_is_deterministic() -> None:
    train, ftrain = _separable(300, seed=1)
    test, ftest = _separable(200, seed=2)
    router = get_router("embedding-mlp", seed=3).fit(train, ftrain)
    assert isinstance(router, TwoModelRouter)
    s = router.small_score(ftest)
    small = test.score[:, 0].astype(np.float64)
    assert router_auroc(s, small, np.ones_like(small)) > 0.9
    # the score is a logit: its sigmoid is the classifier's P(small is good enough), sure on the clear cases
    margin = ftest.X[:, 0] + 0.5 * ftest.X[:, 1] - 0.25 * ftest.X[:, 2]
    assert (s[margin > 1.5] > 0).all() and (s[margin < -1.5] < 0).all()
    from sklearn.neural_network import MLPClassifier

    same = MLPClassifier(hidden_layer_sizes=(64,), alpha=1e-4, max_iter=200, random_state=3).fit(
        ftrain.X, train.score[:, 0].astype(int))
    np.testing.assert_allclose(1.0 / (1.0 + np.exp(-s)), same.predict_proba(ftest.X)[:, 1], rtol=1e-6, atol=1e-9)
    again = get_router("embedding-mlp", seed=3).fit(train, ftrain).scores(ftest)
    np.testing.assert_array_equal(router.scores(ftest), again)
    other = get_router("embedding-mlp", seed=4).fit(train, ftrain).scores(ftest)
    assert not np.array_equal(other, again)


def test_embedding_mlp_options_reach_the_classifier() -> None:
    train, ftrain = _separable(120, seed=5)
    small = get_router("embedding-mlp:hidden=3,max_iter=5,alpha=0.1").fit(train, ftrain)
    assert small._weights[0].shape == (8, 3) and small._weights[1].shape == (3, 1)
    assert small.n_iter_ == 5


def test_embedding_mlp_refuses_one_label_and_other_encoders() -> None:
    train, ftrain = _separable(50, seed=6)
    all_good = pair_table(np.ones(50))
    router = get_router("embedding-mlp")
    with pytest.raises(UsageError, match="good enough on all 50 training queries"):
        router.check_applicable(all_good)
    with pytest.raises(UsageError, match="nothing to learn"):
        router.fit(all_good, Features.of(ftrain.X, all_good.queries, all_good.actors, "test"))
    fitted = get_router("embedding-mlp:max_iter=5").fit(train, ftrain)
    wider = Features.of(np.zeros((50, 9)), train.queries, train.actors, "other")
    with pytest.raises(UsageError, match="trained on 8-dimensional query vectors"):
        fitted.scores(wider)


def test_embedding_mlp_learns_graded_scores_as_small_at_least_large() -> None:
    rng = np.random.default_rng(7)
    X = rng.normal(0.0, 1.0, (200, 4)).astype(np.float32)
    small = np.where(X[:, 0] > 0, 0.9, 0.2)
    large = np.full(200, 0.6)
    table = pair_table(small, large)
    f = Features.of(X, table.queries, table.actors, "test")
    s = get_router("embedding-mlp").fit(table, f).small_score(f)
    assert router_auroc(s, small, large) > 0.9


# ---------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("spec", [*SIGNAL_ROUTERS, "embedding-mlp"])
def test_a_table_of_three_actors_is_refused(spec: str) -> None:
    table = RoutingTable.from_arrays(np.ones((4, 3)), actors=["a", "b", "c"])
    f = Features.of(np.zeros((4, 1)), table.queries, table.actors, "test").with_signals(
        {"option_logits": np.zeros((4, 2)), "self_ask": np.zeros(4), "samples": np.zeros((4, 3), dtype=int)})
    with pytest.raises(UsageError, match=r"routes between two models .* has 3 actors"):
        get_router(spec).fit(table, f)


@pytest.mark.parametrize("spec,needle", [
    ("max-logit", "option-letter logits"), ("entropy", "option-letter logits"), ("margin", "option-letter logits"),
    ("self-ask", "self-assessment"), ("semantic-entropy", "sampled answers"),
])
def test_features_without_the_signal_are_a_usage_error(spec: str, needle: str) -> None:
    table = pair_table([1, 0])
    f = Features.of(np.zeros((2, 1)), table.queries, table.actors, "test")
    router = get_router(spec).fit(table, f)  # it learns nothing: the signal is read when scoring
    with pytest.raises(UsageError, match=f"router '{spec}' needs .*{needle}.*routerlab extract"):
        router.scores(f)


@pytest.mark.parametrize("spec,needle", [
    ("entropy:foo=1", "router 'entropy' has no option ['foo']"),
    ("max-logit:on=softmax", "option on='softmax' is out of range; it must be one of logit, probability"),
    ("margin:on=rank", "option on='rank' is out of range"),
    ("entropy:normalize=2", "option normalize=2 should be bool"),
    ("self-ask:on=logit", "router 'self-ask' has no option ['on']"),
    ("embedding-mlp:hidden=0", "option hidden=0 is out of range; it must be an integer in [1, 65,536]"),
    ("embedding-mlp:alpha=-1", "option alpha=-1 is out of range"),
    ("embedding-mlp:max_iter=0", "option max_iter=0 is out of range; it must be an integer >= 1"),
])
def test_bad_options_are_one_clear_error(spec: str, needle: str) -> None:
    with pytest.raises(UsageError) as err:
        get_router(spec)
    assert needle in str(err.value)


@pytest.mark.parametrize("spec,signals,needle", [
    ("entropy", {"option_logits": [[1.0, NAN], [NAN, NAN]]}, "query 'q1' has no option logits (all NaN)"),
    ("max-logit", {"option_logits": [[1.0, math.inf], [0.0, 1.0]]}, "query 'q0' has an infinite option logit"),
    ("max-logit", {"option_logits": [1.0, 2.0]}, "option_logits has shape (2,)"),
    ("self-ask", {"self_ask": [0.5, NAN]}, "query 'q1' has no finite self_ask"),
    ("semantic-entropy", {"samples": [[0, 1], [-2, 0]]}, "query 'q1' has a sample code that is not an integer"),
    ("semantic-entropy", {"samples": [[0.0, 1.5], [0.0, 0.0]]}, "query 'q0' has a sample code"),
    ("semantic-entropy", {"samples": np.zeros((2, 0), dtype=int)}, "no sampled answers (k = 0)"),
])
def test_bad_signal_values_are_a_data_error_naming_the_query(spec: str, signals: Mapping[str, npt.ArrayLike],
                                                              needle: str) -> None:
    with pytest.raises(DataError) as err:
        score(spec, signals)
    assert needle in str(err.value)


def test_every_router_says_what_it_is() -> None:
    for spec in [*SIGNAL_ROUTERS, "embedding-mlp"]:
        cls = type(get_router(spec))
        assert cls.summary and "\n" not in cls.summary and "5.1" in (cls.__doc__ or "")
        assert set(cls.constraints) == set(cls.defaults)


def test_margin_of_a_one_option_question_is_the_largest() -> None:
    """MMLU-Pro has questions with one option: nothing to doubt, so the margin tops every real one."""
    logits = {"option_logits": [[3.0, 1.0, NAN], [NAN, 2.0, NAN], [0.5, 0.4, 0.3]]}
    prob = score("margin", logits)
    assert prob[1] == 1.0 and prob[0] < 1.0 and prob[2] < prob[0]
    logit = score("margin:on=logit", logits)
    assert logit[1] == 1e6 and logit[0] == pytest.approx(2.0) and logit[2] == pytest.approx(0.1)
