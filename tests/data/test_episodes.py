"""Agentic episodes in the data model: steps, derived cell values, selections, the store and the content hash."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from routerlab.data.episodes import Episodes, episode_table
from routerlab.data.store import load
from routerlab.data.table import Actors, Queries, RoutingTable, concat
from routerlab.errors import DataError

# q1/a: plan (model), calculator (tool), answer (model), right. q1/b: one model step, wrong. q2/a: model, env, model.
STEPS = [
    {"query_id": "q1", "actor": "a", "step": 0, "kind": "model", "tokens_in": 100, "tokens_out": 20,
     "ttft_s": 0.5, "itl_s": 0.05, "latency_s": 1.45, "env_s": 0},
    {"query_id": "q1", "actor": "a", "step": 1, "kind": "tool", "tool": "calculator", "env_s": 0.25},
    {"query_id": "q1", "actor": "a", "step": 2, "kind": "model", "tokens_in": 140, "tokens_out": 10,
     "ttft_s": 0.6, "itl_s": 0.05, "latency_s": 1.05, "score": 1},
    {"query_id": "q1", "actor": "b", "step": 0, "kind": "model", "tokens_in": 90, "tokens_out": 40,
     "latency_s": 3.0, "score": 0},
    {"query_id": "q2", "actor": "a", "step": 0, "kind": "model", "tokens_in": 80, "tokens_out": 5, "latency_s": 0.4},
    {"query_id": "q2", "actor": "a", "step": 1, "kind": "env", "env_s": 2.0},
    {"query_id": "q2", "actor": "a", "step": 2, "kind": "model", "tokens_in": 120, "tokens_out": 7, "latency_s": 0.6,
     "score": 0.5},
]


def _table() -> RoutingTable:
    queries = Queries.create(["q1", "q2", "q3"], text=["one", "two", "three"], split=["train", "test", "test"])
    actors = Actors.create(["a", "b"], input_price=[1.0, 2.0], output_price=[10.0, 20.0])
    return episode_table(Episodes.from_records(STEPS), queries=queries, actors=actors, name="agentic")


def test_the_summary_sums_steps_by_hand() -> None:
    summ = Episodes.from_records(STEPS).summary()
    assert [(q, a) for q, a in zip(summ.query_id, summ.actor, strict=True)] == [("q1", "a"), ("q1", "b"), ("q2", "a")]
    assert summ.n_steps.tolist() == [3, 1, 3]
    assert summ.n_model.tolist() == [2, 1, 2] and summ.n_tool.tolist() == [1, 0, 0] and summ.n_env.tolist() == [0, 0, 1]
    np.testing.assert_allclose(summ.latency_s, [1.45 + 0.25 + 1.05, 3.0, 0.4 + 2.0 + 0.6])
    np.testing.assert_allclose(summ.model_s, [2.5, 3.0, 1.0])
    np.testing.assert_allclose(summ.env_s, [0.25, 0.0, 2.0])
    np.testing.assert_allclose(summ.tokens_in, [240, 90, 200])
    np.testing.assert_allclose(summ.tokens_out, [30, 40, 12])
    np.testing.assert_allclose(summ.score, [1.0, 0.0, 0.5])


def test_rows_in_any_order_come_out_by_cell_then_step() -> None:
    shuffled = [STEPS[i] for i in (6, 3, 0, 5, 2, 4, 1)]
    eps = Episodes.from_records(shuffled)
    assert eps.cells() == [("q2", "a"), ("q1", "b"), ("q1", "a")]
    assert eps.step.tolist() == [0, 1, 2, 0, 0, 1, 2]
    assert eps.kind.tolist() == ["model", "env", "model", "model", "model", "tool", "model"]


def test_the_table_derives_each_episode_cell() -> None:
    t = _table()
    assert t.episode_mask.tolist() == [[True, True], [True, False], [False, False]]
    np.testing.assert_allclose(t.score, [[1.0, 0.0], [0.5, np.nan], [np.nan, np.nan]])
    np.testing.assert_allclose(t.latency_s, [[2.75, 3.0], [3.0, np.nan], [np.nan, np.nan]], rtol=1e-6)
    np.testing.assert_allclose(t.tokens_in, [[240, 90], [200, np.nan], [np.nan, np.nan]])
    np.testing.assert_allclose(t.tokens_out, [[30, 40], [12, np.nan], [np.nan, np.nan]])
    # cost: (tokens_in * input price + tokens_out * output price) / 1e6, from the sums
    np.testing.assert_allclose(t.cost_usd[0], [(240 * 1 + 30 * 10) / 1e6, (90 * 2 + 40 * 20) / 1e6], rtol=1e-6)
    assert any("equation 5" in d for d in t.meta["derived"])
    assert t.describe()["episodes"] == {"cells": 3, "steps": 7, "steps_by_kind": {"model": 5, "tool": 1, "env": 1},
                                        "median_steps_per_actor": {"a": 3.0, "b": 1.0}}


def test_a_model_step_without_latency_gets_ttft_plus_itl() -> None:
    steps = [{"query_id": "q", "actor": "a", "step": 0, "kind": "model", "tokens_out": 11, "ttft_s": 0.2,
              "itl_s": 0.1},  # its own TTFT/ITL: 0.2 + 10 * 0.1 = 1.2
             {"query_id": "q", "actor": "a", "step": 1, "kind": "model", "tokens_out": 5, "score": 1}]  # the actor's
    actors = Actors.create(["a"], ttft_ms=[300.0], itl_ms=[50.0])  # 0.3 + 4 * 0.05 = 0.5
    t = episode_table(Episodes.from_records(steps), actors=actors)
    assert t.latency_s[0, 0] == pytest.approx(1.7)
    assert t.episodes is not None and t.episodes.latency_s.tolist() == pytest.approx([1.2, 0.5])
    assert any("2 model steps" in d for d in t.meta["derived"])
    unknown = episode_table(Episodes.from_records(steps))  # no actor TTFT/ITL: the second step's time is unknown
    assert np.isnan(unknown.latency_s[0, 0])


@pytest.mark.parametrize(("change", "row", "field", "words"), [
    ({"kind": "thinking"}, 2, "kind", "unknown step kind 'thinking'"),
    ({"env_s": -1.0}, 2, "env_s", "must be finite and >= 0"),
    ({"env_s": float("inf")}, 2, "env_s", "must be finite and >= 0"),
    ({"latency_s": 0.3}, 2, "latency_s", "a tool step has no latency_s"),
    ({"tokens_out": 3}, 2, "tokens_out", "a tool step has no tokens_out"),
    ({"step": 0}, 2, "step", "step 0 of the episode of query 'q1' and actor 'a' is given twice (also row 1)"),
    ({"step": 1.5}, 2, "step", "a step number is an integer >= 0, got 1.5"),
    ({"step": -1}, 2, "step", "a step number is an integer >= 0"),
    ({"env_s": "slow"}, 2, "env_s", "expected a number, got 'slow'"),
    ({"query_id": ""}, 2, "query_id", "query_id is empty"),
    ({"score": 2}, 2, "score", "a score lies in [0, 1]"),
])
def test_a_bad_step_is_one_error_naming_row_and_field(change: dict[str, object], row: int, field: str,
                                                      words: str) -> None:
    steps = [dict(s) for s in STEPS]
    steps[1].update(change)
    with pytest.raises(DataError) as err:
        Episodes.from_records(steps, source="steps.csv")
    assert err.value.file == "steps.csv" and err.value.row == row and err.value.field == field
    assert words in str(err.value)


def test_a_model_step_with_environment_time_and_a_last_step_without_score_are_refused() -> None:
    steps = [dict(s) for s in STEPS]
    steps[0]["env_s"] = 0.1
    with pytest.raises(DataError, match="row 1, field 'env_s': a model step's time is its latency_s"):
        Episodes.from_records(steps)
    steps = [dict(s) for s in STEPS]
    del steps[2]["score"]
    with pytest.raises(DataError, match="row 3, field 'score': the last step of the episode of query 'q1' and "
                                        "actor 'a' has no score"):
        Episodes.from_records(steps)
    with pytest.raises(DataError, match="unknown step column 'duration'"):
        Episodes.from_records([{**STEPS[0], "duration": 1}])
    with pytest.raises(DataError, match="row 1, field 'query_id': query_id is empty"):
        Episodes.from_records([{"actor": "a", "step": 0, "kind": "model", "score": 1}])


def test_steps_of_cells_the_table_lacks_are_refused() -> None:
    t = RoutingTable.from_arrays(np.full((1, 1), np.nan), actors=["a"], query_ids=["q1"])
    with pytest.raises(DataError, match="step 0 names actor 'b', which the table does not hold"):
        t.with_episodes(Episodes.from_records(STEPS[:4]))


def test_selections_keep_the_episodes_of_the_cells_they_keep() -> None:
    t = _table()
    only_b = t.select_actors(["b"])
    assert only_b.episodes is not None and only_b.episodes.cells() == [("q1", "b")]
    q2 = t.select_queries(np.array([False, True, True]))
    assert q2.episodes is not None and q2.episodes.cells() == [("q2", "a")]
    assert t.select_queries([2]).episodes is None  # q3 has no episode
    assert t.select_split("test").episodes is not None
    joined = concat([t.select_queries([0]), t.select_queries([1, 2])])
    assert joined.episodes is not None and joined.episodes.cells() == t.episodes.cells()  # type: ignore[union-attr]
    assert joined.content_hash == t.content_hash


def test_the_store_round_trips_and_verifies_the_steps(tmp_path: Path) -> None:
    t = _table()
    t.save(tmp_path / "t")
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    assert manifest["episodes"] == {"file": "steps.parquet", "cells": 3, "steps": 7}
    back = load(tmp_path / "t")
    assert back.content_hash == t.content_hash
    assert back.episodes is not None and t.episodes is not None
    assert json.dumps(back.episodes.records()) == json.dumps(t.episodes.records())  # NaN == NaN as text
    np.testing.assert_array_equal(back.latency_s, t.latency_s)
    # one step's time edited after saving (same size on disk, so only the hash can tell)
    file = tmp_path / "t" / "steps.parquet"
    tbl = pq.read_table(file)
    env = tbl.column("env_s").to_pylist()
    env[1] = 0.75
    pq.write_table(tbl.set_column(tbl.column_names.index("env_s"), "env_s", pa.array(env)), file,
                   compression="zstd")
    manifest["files"]["steps.parquet"] = file.stat().st_size
    (tmp_path / "t" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"content hash \w+ does not match"):
        load(tmp_path / "t")
    load(tmp_path / "t", verify=False)  # trusting the manifest reads it


def test_a_table_without_episodes_hashes_as_before() -> None:
    """Hashes computed by the code before episodes existed: results files that record them still match."""
    from routerlab.datasets import demo

    t = RoutingTable.from_arrays([[1.0, 0.0]], actors=["a", "b"], query_ids=["q"])
    assert t.episodes is None and "episodes" not in t.describe()
    assert t.content_hash == "4f3a746214f6f6ee525dceb8f1b4d4fb26ac5aec1ed7bf57a3d09d31b561dede"
    assert demo().content_hash == "1a2390c1c945c8e7f117a999207f455c7fb3552513f8776b9c2642400e962208"
