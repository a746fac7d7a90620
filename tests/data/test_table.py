"""The routing table: construction, validation, derivations (SPEC 1), selection, concat, hash."""

from __future__ import annotations

import numpy as np
import pytest

from routerlab import Actors, RoutingTable, concat
from routerlab.data.table import derive_cost, derive_latency
from routerlab.errors import DataError, UsageError


def small(**kw: object) -> RoutingTable:
    score = np.array([[1, 0, np.nan], [0, 1, 1], [1, 1, 0], [0, 0, 0]], dtype=np.float32)
    return RoutingTable.from_arrays(
        score,
        actors=["a", "b", "c"],
        text=["x", "y", "x", "z"],
        dataset=["d1", "d1", "d2", "d2"],
        split=["train", "train", "test", "test"],
        **kw,  # type: ignore[arg-type]
    )


def test_shapes_and_observed() -> None:
    t = small()
    assert (t.n_queries, t.n_actors) == (4, 3)
    assert t.score.dtype == np.float32
    assert t.observed_fraction == pytest.approx(11 / 12)
    assert t.dataset_counts() == {"d1": 2, "d2": 2}
    assert t.split_counts() == {"test": 2, "train": 2}


def test_latency_is_derived_from_tokens_ttft_itl() -> None:
    # SPEC 1: latency = TTFT + (tokens_out - 1) * ITL. Actor a: 100 ms + 9 * 10 ms = 0.19 s.
    actors = Actors.create(["a", "b"], ttft_ms=[100, np.nan], itl_ms=[10, 20], output_price=[2.0, 4.0])
    t = RoutingTable.from_arrays([[1, 0]], actors=actors, tokens_out=[[10, 5]])
    assert t.latency_s is not None and t.cost_usd is not None
    assert t.latency_s[0, 0] == pytest.approx(0.19)
    assert np.isnan(t.latency_s[0, 1])  # TTFT unknown -> latency unknown, never guessed
    # no input tokens: cost = tokens_out * output_price / 1e6, flagged as a lower bound
    assert t.cost_usd[0].tolist() == pytest.approx([10 * 2.0 / 1e6, 5 * 4.0 / 1e6])
    assert any("lower bound" in d for d in t.meta["derived"])


def test_cost_uses_input_and_output_tokens() -> None:
    c = derive_cost(np.array([[1000.0]], dtype=np.float32), np.array([[500.0]], dtype=np.float32),
                    np.array([0.2]), np.array([0.6]))
    assert c is not None
    assert c[0, 0] == pytest.approx((1000 * 0.2 + 500 * 0.6) / 1e6)


def test_no_derivation_without_profiles() -> None:
    assert derive_latency(np.ones((2, 2), np.float32), np.array([np.nan, np.nan]), np.array([1.0, 1.0])) is None
    t = small(tokens_out=np.ones((4, 3)))
    assert t.latency_s is None and t.cost_usd is None


@pytest.mark.parametrize("bad", [1.5, -0.1, np.inf])
def test_score_out_of_range_names_query_and_actor(bad: float) -> None:
    score = np.zeros((3, 2))
    score[2, 1] = bad
    with pytest.raises(DataError, match=r"row 3.*'score'.*actor 'b'"):
        RoutingTable.from_arrays(score, actors=["a", "b"])


def test_negative_tokens_rejected() -> None:
    with pytest.raises(DataError, match="tokens_out"):
        RoutingTable.from_arrays([[1.0]], actors=["a"], tokens_out=[[-3]])


def test_shape_mismatch_and_duplicates_rejected() -> None:
    with pytest.raises(DataError, match="shape"):
        RoutingTable.from_arrays(np.zeros((2, 2)), actors=["a", "b"], latency_s=np.zeros((2, 3)))
    with pytest.raises(DataError, match="unique"):
        RoutingTable.from_arrays(np.zeros((2, 1)), actors=["a"], query_ids=["q", "q"])
    with pytest.raises(DataError, match="'a' repeats"):
        Actors.create(["a", "b", "a"])
    with pytest.raises(DataError, match="2-D"):
        RoutingTable.from_arrays(np.zeros(3), actors=["a"])


def test_select_actors_and_queries() -> None:
    t = small(tokens_out=np.arange(12).reshape(4, 3))
    s = t.select_actors(["c", "a"])
    assert s.actor_names == ["c", "a"]
    np.testing.assert_array_equal(s.score, t.score[:, [2, 0]])
    assert s.tokens_out is not None
    np.testing.assert_array_equal(s.tokens_out, np.arange(12).reshape(4, 3)[:, [2, 0]])
    q = t.select_queries(np.array([False, True, True, False]))
    assert q.queries.ids.tolist() == ["q1", "q2"]
    assert t.select_datasets(["d2"]).n_queries == 2
    assert t.select_split("train").queries.ids.tolist() == ["q0", "q1"]
    with pytest.raises(UsageError, match="unknown actor 'zz'"):
        t.select_actors(["zz"])
    with pytest.raises(UsageError, match="unknown datasets"):
        t.select_datasets(["nope"])
    with pytest.raises(UsageError, match="no query has split"):
        t.select_split("val")


def test_concat_unions_actors_with_nan() -> None:
    t1 = RoutingTable.from_arrays([[1, 0]], actors=["a", "b"], query_ids=["x"])
    t2 = RoutingTable.from_arrays([[0.5, 1]], actors=["c", "a"], query_ids=["y"])
    u = concat([t1, t2])
    assert u.actor_names == ["a", "b", "c"]
    np.testing.assert_array_equal(u.score, np.array([[1, 0, np.nan], [1, np.nan, 0.5]], dtype=np.float32))
    with pytest.raises(DataError, match="unique"):
        concat([t1, t1])


def test_concat_rejects_conflicting_actor_attributes() -> None:
    t1 = RoutingTable.from_arrays([[1]], actors=Actors.create(["a"], ttft_ms=[10]), query_ids=["x"])
    t2 = RoutingTable.from_arrays([[1]], actors=Actors.create(["a"], ttft_ms=[20]), query_ids=["y"])
    with pytest.raises(DataError, match="ttft_ms"):
        concat([t1, t2])


def test_concat_keeps_actor_metadata() -> None:
    a1 = Actors.create(["a", "b"], extra={"family": ["llama", "qwen"], "ctx": np.array([8.0, 32.0])})
    a2 = Actors.create(["c", "a"], extra={"family": ["phi", "llama"], "license": ["mit", "meta"]})
    t1 = RoutingTable.from_arrays([[1, 0]], actors=a1, query_ids=["x"])
    t2 = RoutingTable.from_arrays([[0.5, 1]], actors=a2, query_ids=["y"])
    u = concat([t1, t2])
    assert sorted(u.actors.extra) == ["ctx", "family", "license"]
    assert list(u.actors.extra["family"]) == ["llama", "qwen", "phi"]
    assert list(u.actors.extra["license"]) == ["meta", None, "mit"]
    assert u.actors.extra["ctx"].dtype == np.float64
    np.testing.assert_array_equal(u.actors.extra["ctx"], [8.0, 32.0, np.nan])


def test_concat_rejects_conflicting_actor_metadata() -> None:
    t1 = RoutingTable.from_arrays([[1]], actors=Actors.create(["a"], extra={"family": ["x"]}), query_ids=["x"])
    t2 = RoutingTable.from_arrays([[1]], actors=Actors.create(["a"], extra={"family": ["y"]}), query_ids=["y"])
    with pytest.raises(DataError, match="family"):
        concat([t1, t2])


def test_content_hash_tracks_every_value() -> None:
    base = small()
    assert base.content_hash == small().content_hash
    score = base.score.copy()
    score[3, 2] = 1
    changed = RoutingTable(queries=base.queries, actors=base.actors, score=score)
    assert changed.content_hash != base.content_hash
    renamed = small()
    object.__setattr__(renamed.queries, "text", np.array(["x", "y", "x", "w"], dtype=object))
    assert renamed.content_hash != base.content_hash


def test_describe_has_the_info_keys() -> None:
    info = small().describe()
    for key in ("n_queries", "n_actors", "actors", "datasets", "splits", "observed_fraction", "has_tokens",
                "has_latency", "has_cost", "duplicate_texts", "train_test_overlap"):
        assert key in info
    # text "x" is in train (q0) and test (q2): one duplicate, one leak
    assert info["duplicate_texts"] == 1
    assert info["train_test_overlap"] == 1
