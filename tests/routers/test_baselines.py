"""``fixed:actor=NAME`` (RouterWorld's Route-To-X rows) and ``best-per-dataset`` (OpenRouterBench's Max Expert):
hand-computed choices on a small table, the errors, and the same rules on real tables."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from routerlab.data.feedback import Feedback
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.protocols.full import evaluate
from routerlab.routers import get_router
from routerlab.routers.bounds import BestPerDataset, Fixed

N = math.nan
# train: on x, a is best (1, 0.5, 0); on y, c is (a 0 over its 2 observed cells, b 1/3, c 1); overall a 0.5,
# b 0.4, c 0.6 -> best-single c. Test: x, y and z, a dataset training never saw (-> c, the fallback); the last
# test row has an unobserved cell (evaluate leaves it out), the one before it no correct actor.
TRAIN = [[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1], [N, 0, 1]]
TRAIN_DS = ["x", "x", "y", "y", "y"]
TEST = [[1, 0, 1], [0, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 1], [0, 0, 0], [N, 1, 1]]
TEST_DS = ["x", "x", "y", "y", "z", "z", "x"]


def small() -> RoutingTable:
    return RoutingTable.from_arrays(TRAIN + TEST, actors=["a", "b", "c"], dataset=TRAIN_DS + TEST_DS,
                                    split=["train"] * len(TRAIN) + ["test"] * len(TEST), name="small")


def blank(table: RoutingTable) -> Features:
    """Features without vectors: neither router reads any."""
    return Features(np.zeros((table.n_queries, 1), dtype=np.float32), table, "none")


def _parts() -> tuple[RoutingTable, RoutingTable]:
    t = small()
    return t.select_split("train"), t.select_split("test")


def test_best_per_dataset_picks_each_datasets_best_training_actor_and_falls_back_to_best_single() -> None:
    train, test = _parts()
    router = get_router("best-per-dataset").fit(train, blank(train))
    assert isinstance(router, BestPerDataset)
    assert router.actors_by_dataset == {"x": "a", "y": "c"} and router.fallback_actor == "c"
    np.testing.assert_array_equal(router.choose(blank(test)), [0, 0, 2, 2, 2, 2, 0])
    scores = router.scores(blank(test))
    np.testing.assert_allclose(scores[0], [1.0, 0.5, 0.0])  # x's training means
    np.testing.assert_allclose(scores[2], [0.0, 1 / 3, 1.0])  # y's: a over its two observed cells
    np.testing.assert_allclose(scores[4], [0.5, 0.4, 0.6])  # z, unseen: the overall means (best-single's)
    dist = router.distribution(blank(test))
    np.testing.assert_array_equal(dist, np.eye(3)[[0, 0, 2, 2, 2, 2, 0]])  # a hard assignment: E_p = 0
    single = get_router("best-single").fit(train, blank(train))
    assert single.actor == router.fallback_actor


def test_best_per_dataset_reads_training_outcomes_only() -> None:
    """The test split's own outcomes do not move its choices: only the training means and the dataset label do."""
    train, test = _parts()
    router = get_router("best-per-dataset").fit(train, blank(train))
    flipped = RoutingTable.from_arrays(1 - np.nan_to_num(np.asarray(TEST, dtype=float)), actors=["a", "b", "c"],
                                       dataset=TEST_DS, split=["test"] * len(TEST))
    np.testing.assert_array_equal(router.choose(blank(flipped)), router.choose(blank(test)))


def test_best_per_dataset_on_one_dataset_is_best_single_and_ties_go_to_the_first() -> None:
    t = RoutingTable.from_arrays([[1, 1, 0], [0, 0, 1], [1, 0, 0]], actors=["a", "b", "c"],
                                 dataset=["d", "d", "d"], split=["train", "train", "test"])
    train, test = t.select_split("train"), t.select_split("test")
    router = get_router("best-per-dataset").fit(train, blank(train))
    assert router.actors_by_dataset == {"d": "a"}  # a, b and c all 0.5: the first
    assert router.choose(blank(test)).tolist() == get_router("best-single").fit(train, blank(train)).choose(
        blank(test)).tolist()


def test_best_per_dataset_learns_from_logged_feedback_by_masked_means() -> None:
    train, _ = _parts()
    # one logged actor per query: x logs a (1) and b (1); y logs c (1), a (0), b (0)
    fb = Feedback.logged(train, np.array([0, 1, 2, 0, 1]), np.full(5, 1 / 3))
    router = get_router("best-per-dataset").fit(fb, blank(train))
    assert router.recipe == "masked"
    assert router.actors_by_dataset == {"x": "a", "y": "c"}  # x: a 1, b 1 (tie -> a), c unobserved (-1)


def test_fixed_always_picks_its_actor() -> None:
    train, test = _parts()
    router = get_router("fixed:actor=b").fit(train, blank(train))
    assert isinstance(router, Fixed) and router.actor == "b"
    np.testing.assert_array_equal(router.choose(blank(test)), np.ones(len(TEST), dtype=int))
    np.testing.assert_array_equal(router.distribution(blank(test)), np.eye(3)[[1] * len(TEST)])


@pytest.mark.parametrize("spec,needle", [
    ("fixed", "router 'fixed' needs the actor it always picks: write fixed:actor=NAME, NAME one of the table's "
              "actors: a, b, c"),
    ("fixed:actor=", "needs the actor it always picks"),
    ("fixed:actor=d", "router 'fixed': actor 'd' is not an actor of this table; its actors: a, b, c"),
    ("fixed:actor=A", "actor 'A' is not an actor of this table"),
])
def test_fixed_without_a_known_actor_is_one_error_before_training(spec: str, needle: str) -> None:
    train, _ = _parts()
    router = get_router(spec)  # the name is checked against the table, so building it is fine
    with pytest.raises(UsageError) as err:
        router.check_applicable(train)
    assert needle in str(err.value)
    with pytest.raises(UsageError, match="actor"):
        get_router(spec).fit(train, blank(train))


def test_fixed_keeps_an_actor_name_as_written() -> None:
    """Actor names such as ``meta/llama-2-70b-chat`` or ``7`` are text, not an ``a/b`` tuple or a number."""
    assert get_router("fixed:actor=meta/llama-2-70b-chat").params["actor"] == "meta/llama-2-70b-chat"
    assert get_router("fixed:actor=7").params["actor"] == "7"
    assert get_router("fixed:actor=a/01").params["actor"] == "a/01"
    assert get_router("knn:k=7").params["k"] == 7  # other routers' options are coerced as before
    with pytest.raises(UsageError, match="option actor=3 should be str"):
        Fixed(actor=3)
    many = RoutingTable.from_arrays(np.zeros((2, 30)), actors=[f"m{i}" for i in range(30)], split=["train"] * 2)
    with pytest.raises(UsageError, match=r"m0, m1, .*, m19, \.\.\. \(30 in all\)$"):
        get_router("fixed:actor=gpt").check_applicable(many)


def test_evaluate_fixed_is_the_actors_test_mean_on_the_evaluated_queries() -> None:
    """mu_o of fixed:actor=X is X's mean over the test queries evaluate scores: those with every cell observed
    (the row with an unobserved cell is left out for every router, so it is not X's mean over all its cells)."""
    t = small()
    train, test = _parts()
    ev = evaluate(t, ["fixed:actor=a", "fixed:actor=b", "fixed:actor=c", "best-per-dataset"], n_boot=40,
                  features=(blank(train), blank(test)), compare_to=None)
    mu = {r.spec: r.metrics["mu_o"] for r in ev.results}
    assert ev.excluded_test_queries == 1
    assert mu["fixed:actor=a"] == 2 / 6 and mu["fixed:actor=b"] == 2 / 6 and mu["fixed:actor=c"] == 3 / 6
    assert np.nanmean(np.asarray(TEST, dtype=float)[:, 1]) == 3 / 7  # b over all its observed test cells
    # best-per-dataset: x -> a (1, 0), y -> c (0, 1), z -> c (1, 0)
    assert mu["best-per-dataset"] == 3 / 6
    assert all(r.metrics["e_p"] == 0 for r in ev.results)


def test_fixed_equals_each_actors_test_mean_on_routerbench(real_table: Callable[[str], RoutingTable]) -> None:
    """routerbench has unobserved cells and actor names with '/': every fixed:actor=X scores X's test mean over
    the evaluated (complete) test queries, exactly."""
    table = real_table("routerbench")
    train, test = table.select_split("train"), table.select_split("test")
    specs = [f"fixed:actor={a}" for a in table.actor_names]
    ev = evaluate(table, specs, n_boot=40, features=(blank(train), blank(test)), compare_to=None)
    complete = ~np.isnan(test.score).any(axis=1)
    assert ev.excluded_test_queries == int((~complete).sum()) > 0
    for r, actor in zip(ev.results, table.actor_names, strict=True):
        column = np.asarray(test.score[complete, table.actor_names.index(actor)], dtype=np.float64)
        assert r.metrics["mu_o"] == float(column.mean()), actor
        assert r.selection == {actor: 1.0}


def test_best_per_dataset_on_llmrouter_given_and_ood(real_table: Callable[[str], RoutingTable]) -> None:
    """On llmrouter's given split each test query gets its dataset's best mean training actor (computed here
    independently); on an out-of-domain split the held-out datasets get the best single training actor."""
    table = real_table("llmrouter")
    train, test = table.select_split("train"), table.select_split("test")
    router = get_router("best-per-dataset").fit(train, blank(train))
    ds = train.queries.dataset.astype(str)
    for d in np.unique(ds):
        means = np.nanmean(np.asarray(train.score[ds == d], dtype=np.float64), axis=0)
        assert router.actors_by_dataset[str(d)] == train.actor_names[int(np.argmax(means))], d
    expected = [router.actors_by_dataset[str(d)] for d in test.queries.dataset.astype(str)]
    chosen = [test.actor_names[i] for i in router.choose(blank(test))]
    assert chosen == expected
    ev = evaluate(table, ["best-per-dataset", "best-single"], n_boot=200, features=(blank(train), blank(test)))
    by = {r.spec: r for r in ev.results}
    assert by["best-per-dataset"].metrics["mu_o"] > by["best-single"].metrics["mu_o"]  # the dataset helps here
    # out of domain: gsm8k and mmlu are held out; their queries get best-single's actor
    held = ["gsm8k", "mmlu"]
    keep = ~np.isin(ds, held)
    ood_train = train.select_queries(keep)
    ood = get_router("best-per-dataset").fit(ood_train, blank(ood_train))
    assert set(ood.actors_by_dataset).isdisjoint(held)
    single = get_router("best-single").fit(ood_train, blank(ood_train)).actor
    assert ood.fallback_actor == single
    rows = np.isin(test.queries.dataset.astype(str), held)
    picked = ood.choose(blank(test))[rows]
    assert rows.any() and set(picked.tolist()) == {test.actor_names.index(single)}
