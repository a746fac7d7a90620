"""Joining tables by query id (routerlab.data.join): alignment by id never by position, text and actor checks,
dropped counts, the two-model designation, and a real table split by actors and joined back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from routerlab import Actors, Queries, RoutingTable, join, load
from routerlab.data.join import two_model_pair
from routerlab.errors import DataError, UsageError


def small_model() -> RoutingTable:
    """The "collected" small model: four questions, one actor."""
    return RoutingTable.from_arrays(
        [[1], [0], [1], [0]], actors=["small"], query_ids=["q0", "q1", "q2", "q3"],
        text=["What is 2+2?", "Capital of France?", "Largest planet?", "H2O is?"],
        dataset=["math", "geo", "astro", "chem"], split=["train", "train", "test", "test"],
        tokens_out=[[3], [4], [5], [6]])


def large_model(order: list[int] | None = None) -> RoutingTable:
    """The "shared data" large model on q3, q1, q2, q9 (not q0), with its own metadata; rows can be permuted."""
    ids = ["q3", "q1", "q2", "q9"]
    text = ["  H2O is?", "Capital of France?\n", "Largest planet?", "Unrelated"]
    score = [[1.0, 0.5], [1.0, 1.0], [0.0, 1.0], [1.0, 0.0]]
    source = ["s3", "s1", "s2", "s9"]
    pick = order or list(range(4))
    return RoutingTable(
        queries=Queries.create([ids[i] for i in pick], text=[text[i] for i in pick], dataset=["other"] * 4,
                               extra={"src": [source[i] for i in pick]}),
        actors=Actors.create(["large", "mid"], params_b=[70.0, 8.0]),
        score=np.array([score[i] for i in pick], dtype=np.float32), name="shared")


def test_inner_join_aligns_by_id_in_the_first_tables_order() -> None:
    j = join([small_model(), large_model()])
    assert j.queries.ids.tolist() == ["q1", "q2", "q3"]  # q0 is not in the large table, q9 not in the small
    assert j.actor_names == ["small", "large", "mid"]
    # hand-aligned: q1 small 0 large 1 mid 1; q2 small 1 large 0 mid 1; q3 small 0 large 1 mid 0.5
    np.testing.assert_array_equal(j.score, [[0, 1, 1], [1, 0, 1], [0, 1, 0.5]])
    assert j.queries.dataset.tolist() == ["geo", "astro", "chem"]  # from the first table
    assert j.queries.split.tolist() == ["train", "test", "test"]
    assert j.queries.text.tolist() == ["Capital of France?", "Largest planet?", "H2O is?"]
    assert j.queries.extra["src"].tolist() == ["s1", "s2", "s3"]  # a later table's metadata, aligned by id
    assert j.tokens_out is not None
    np.testing.assert_array_equal(j.tokens_out[:, 0], [4, 5, 6])
    assert np.isnan(j.tokens_out[:, 1:]).all()  # the large table has no tokens: unobserved, never invented
    assert j.actors.params_b.tolist()[1:] == [70.0, 8.0] and np.isnan(j.actors.params_b[0])


def test_row_order_of_any_table_does_not_change_the_join() -> None:
    base = join([small_model(), large_model()])
    for order in ([3, 2, 1, 0], [1, 3, 0, 2], [2, 0, 3, 1]):
        other = join([small_model(), large_model(order)])
        assert other.content_hash == base.content_hash
    first_shuffled = small_model().select_queries(np.array([2, 0, 3, 1]))
    j = join([first_shuffled, large_model()])
    assert j.queries.ids.tolist() == ["q2", "q3", "q1"]  # the first table's order, whatever it is
    np.testing.assert_array_equal(j.score, [[1, 0, 1], [0, 1, 0.5], [0, 1, 1]])


def test_dropped_counts_and_sources_are_recorded() -> None:
    a, b = small_model(), large_model()
    rec = join([a, b]).meta["join"]
    assert rec["how"] == "inner" and rec["n_queries"] == 3
    assert [(s["matched"], s["dropped"]) for s in rec["sources"]] == [(3, 1), (3, 1)]
    assert [s["content_hash"] for s in rec["sources"]] == [a.content_hash, b.content_hash]
    assert rec["sources"][1]["actors"] == ["large", "mid"]


def test_left_join_keeps_the_first_tables_ids_with_unobserved_cells() -> None:
    j = join([small_model(), large_model()], how="left")
    assert j.queries.ids.tolist() == ["q0", "q1", "q2", "q3"]
    assert np.isnan(j.score[0, 1:]).all() and j.score[0, 0] == 1
    assert j.queries.extra["src"].tolist() == [None, "s1", "s2", "s3"]
    assert [s["dropped"] for s in j.meta["join"]["sources"]] == [0, 1]  # q9 of the large table


def test_text_conflict_names_the_id_and_both_tables() -> None:
    b = large_model()
    text = b.queries.text.copy()
    text[1] = "Capital of Germany?"  # q1
    bad = RoutingTable(queries=Queries(b.queries.ids, text, b.queries.dataset, b.queries.split,
                                               b.queries.extra), actors=b.actors, score=b.score, name="shared")
    with pytest.raises(DataError) as err:
        join([small_model(), bad])
    msg = str(err.value)
    assert "'q1'" in msg and "table 1 ('table')" in msg and "table 2 ('shared')" in msg
    assert "Capital of France?" in msg and "Capital of Germany?" in msg


def test_unknown_text_conflicts_with_nothing() -> None:
    a = small_model()
    blank = RoutingTable(queries=Queries(a.queries.ids, np.array([""] * 4, dtype=object),
                                                 a.queries.dataset, a.queries.split, {}),
                         actors=a.actors, score=a.score)
    j = join([blank, large_model()])
    assert j.queries.text.tolist() == ["Capital of France?\n", "Largest planet?", "  H2O is?"]  # filled from b


def test_an_actor_in_two_tables_is_refused() -> None:
    b = large_model()
    clash = RoutingTable(queries=b.queries, actors=Actors.create(["small", "mid"]), score=b.score, name="shared")
    with pytest.raises(DataError, match=r"actor 'small' is in table 1 \('table'\) and in table 2 \('shared'\)"):
        join([small_model(), clash])


def test_no_shared_id_and_bad_how_are_refused() -> None:
    other = RoutingTable.from_arrays([[1]], actors=["z"], query_ids=["zz"])
    with pytest.raises(DataError, match="no query id is in every table"):
        join([small_model(), other])
    with pytest.raises(UsageError, match="how must be one of"):
        join([small_model(), large_model()], how="outer")
    with pytest.raises(UsageError, match="at least one table"):
        join([])


def test_two_model_pair_is_validated_and_survives_save(tmp_path: Path) -> None:
    j = join([small_model(), large_model()], small="small", large="large", name="pair")
    assert j.meta["two_model"] == {"small": "small", "large": "large"}
    assert two_model_pair(j) == ("small", "large")
    j.save(tmp_path / "t")
    back = load(tmp_path / "t")
    assert two_model_pair(back) == ("small", "large") and back.name == "pair"
    assert two_model_pair(join([small_model(), large_model()])) is None
    with pytest.raises(UsageError, match="needs both small and large"):
        join([small_model(), large_model()], small="small")
    with pytest.raises(UsageError, match="'gpt' is not an actor"):
        join([small_model(), large_model()], small="small", large="gpt")
    with pytest.raises(UsageError, match="must differ"):
        join([small_model(), large_model()], small="large", large="large")
    gone = j.select_actors(["small", "mid"])
    with pytest.raises(DataError, match="designated large model 'large' is not an actor"):
        two_model_pair(gone)


def test_real_table_split_by_actors_and_shuffled_joins_back(real_table: Callable[[str], RoutingTable]) -> None:
    t = real_table("mmlu-pro")
    names = t.actor_names
    left = t.select_actors(names[:4])
    rng = np.random.default_rng(0)
    right = t.select_actors(names[4:]).select_queries(rng.permutation(t.n_queries))
    j = join([left, right])
    assert j.actor_names == names and j.n_queries == t.n_queries
    np.testing.assert_array_equal(j.queries.ids, t.queries.ids)
    np.testing.assert_array_equal(j.score, t.score)  # NaN where the original is NaN, equal elsewhere
    np.testing.assert_array_equal(j.queries.text, t.queries.text)
    np.testing.assert_array_equal(j.queries.dataset, t.queries.dataset)
    assert set(j.queries.extra) == set(t.queries.extra)
    assert j.meta["join"]["sources"][1]["dropped"] == 0
    # the right half in its own shuffled order really is misaligned by position: the join is doing the work
    assert not np.array_equal(right.score, t.score[:, 4:], equal_nan=True)
