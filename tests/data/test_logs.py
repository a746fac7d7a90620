"""Logged feedback on disk: Logs, write_logs / read_logs round trips, the long format's propensity column, errors."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from routerlab.data.feedback import Feedback, draw_actions
from routerlab.data.importers import read
from routerlab.data.logs import REWARD_COLUMNS, Logs, read_logs, write_logs
from routerlab.data.longformat import read_long
from routerlab.data.table import MATRIX_FIELDS, RoutingTable
from routerlab.datasets import demo
from routerlab.errors import DataError, UsageError

FORMATS = ["csv", "jsonl", "parquet"]


def sample_logs(n: int = 40, seed: int = 3) -> tuple[RoutingTable, Logs]:
    table = demo(n, seed=seed)
    rng = np.random.default_rng(seed)
    dist = rng.dirichlet(np.ones(table.n_actors), size=n)  # propensities that are not round numbers
    actor, propensity = draw_actions(dist, rng)
    rewards = {"dcg": rng.random(n), "l_dcg": rng.random(n) / 3}
    return table, Logs(Feedback.logged(table, actor, propensity), rewards, policy="test")


def assert_same_log(a: Logs, b: Logs) -> None:
    ta, tb = a.table, b.table
    assert ta.queries.ids.tolist() == tb.queries.ids.tolist()
    for key in ("text", "dataset", "split"):
        assert getattr(ta.queries, key).tolist() == getattr(tb.queries, key).tolist(), key
    assert ta.actor_names == tb.actor_names
    for key in MATRIX_FIELDS:
        ma, mb = getattr(ta, key), getattr(tb, key)
        assert (ma is None) == (mb is None), key
        if ma is not None:
            np.testing.assert_array_equal(ma, mb, err_msg=key)
    np.testing.assert_array_equal(a.actor, b.actor)
    np.testing.assert_array_equal(a.propensity, b.propensity)  # exact: float64 survives the text formats
    assert sorted(a.rewards) == sorted(b.rewards)
    for key in a.rewards:
        np.testing.assert_array_equal(a.rewards[key], b.rewards[key], err_msg=key)


@pytest.mark.parametrize("ext", FORMATS)
def test_round_trip(tmp_path: Path, ext: str) -> None:
    table, logs = sample_logs()
    out, side = write_logs(logs, tmp_path / f"logs.{ext}")
    assert out.is_file() and side == tmp_path / f"logs.actors.{ext}" and side.is_file()
    back = read_logs(out)  # the side-file beside the log is found
    assert_same_log(logs, back)
    assert back.feedback.kind == "logged" and back.policy is None
    np.testing.assert_array_equal(back.table.actors.ttft_ms, table.actors.ttft_ms)
    with_table = read_logs([out], table=table)
    assert_same_log(logs, with_table)
    assert not list(tmp_path.glob(".*")), "no temporary file is left behind"


def test_one_row_per_query_with_the_logged_cell(tmp_path: Path) -> None:
    table, logs = sample_logs(25)
    out, _ = write_logs(logs, tmp_path / "l.csv")
    lines = out.read_text().splitlines()
    header = lines[0].replace('"', "").split(",")
    assert header[:5] == ["query_id", "actor", "text", "dataset", "split"]
    assert header[-3:] == ["propensity", "dcg", "l_dcg"]
    assert len(lines) == 26
    rows = np.arange(25)
    np.testing.assert_array_equal(logs.table.score[rows, logs.actor], table.score[rows, logs.actor])


def test_without_table_or_side_file_actors_are_the_logged_ones(tmp_path: Path) -> None:
    _, logs = sample_logs(30)
    out, side = write_logs(logs, tmp_path / "l.jsonl")
    side.unlink()
    back = read_logs(out)
    logged = list(dict.fromkeys(logs.table.actor_names[a] for a in logs.actor))
    assert back.table.actor_names == logged
    np.testing.assert_array_equal(back.propensity, logs.propensity)


def test_table_supplies_text_and_actor_order(tmp_path: Path) -> None:
    table = demo(30, seed=1)
    path = tmp_path / "prod.csv"
    ids = table.queries.ids
    path.write_text("query_id,actor,score,propensity,latency_s\n"
                    f"{ids[4]},{table.actor_names[2]},1,0.25,0.5\n"
                    f"new-query,{table.actor_names[0]},0,1,1.5\n".replace("new-query", "new-query"))
    with pytest.raises(DataError, match=r"prod.csv, row 3, field 'text': query 'new-query' has no text"):
        read_logs(path, table=table)
    path.write_text("query_id,actor,score,propensity,latency_s,text,split\n"
                    f"{ids[4]},{table.actor_names[2]},1,0.25,0.5,ignored,test\n"
                    f"new-query,{table.actor_names[0]},0,1,1.5,a new question,train\n")
    logs = read_logs(path, table=table)
    assert logs.table.actor_names == table.actor_names
    assert logs.table.queries.text.tolist() == [table.queries.text[4], "a new question"]
    assert logs.table.queries.split.tolist() == [table.queries.split[4], "train"]
    assert logs.actor.tolist() == [2, 0] and logs.propensity.tolist() == [0.25, 1.0]
    assert logs.table.latency_s is not None and logs.table.latency_s[0, 2] == 0.5
    assert logs.rewards == {}


@pytest.mark.parametrize("body,needle", [
    ("query_id,actor,text,score\nq1,a,x,1\n", "has no 'propensity' column; logs need"),
    ("query_id,actor,text,score,propensity\nq1,a,x,1,0.5\nq2,b,y,0,0\n",
     "row 3, field 'propensity': propensity 0.0 must be in (0, 1]"),
    ("query_id,actor,text,score,propensity\nq1,a,x,1,0.5\nq2,b,y,0,1.5\n", "row 3, field 'propensity'"),
    ("query_id,actor,text,score,propensity\nq1,a,x,1,nan\n", "row 2, field 'propensity': propensity is empty"),
    ("query_id,actor,text,score,propensity\nq1,a,x,1,inf\n", "row 2, field 'propensity'"),
    ("query_id,actor,text,score,propensity\nq1,a,x,1,\n", "row 2, field 'propensity': propensity is empty"),
    ("query_id,actor,text,score,propensity\nq1,a,x,1,often\n", "row 2, field 'propensity': propensity 'often' is "
     "not a number"),
    ("query_id,actor,text,score,propensity\nq1,a,x,,0.5\n", "row 2, field 'score': score is empty"),
    ("query_id,actor,text,score,propensity\nq1,a,x,1,0.5\nq2,b,y,0,1\nq1,b,x,0,0.5\n",
     "row 4, field 'query_id': query 'q1' is logged twice ({f} row 2 and {f} row 4)"),
    ("query_id,actor,text,score,propensity,dcg\nq1,a,x,1,0.5,1.2\n", "row 2, field 'dcg': dcg 1.2 is outside [0, 1]"),
    ("query_id,actor,text,score,propensity\nq1,a,,1,0.5\n", "row 2, field 'text': query 'q1' has no text"),
    ("query_id,actor,text,score,propensity\n", "holds no logged query"),
    ("query_id,actor,text,score,propensity\n,a,x,1,0.5\n", "row 2, field 'query_id': query_id is empty"),
])
def test_bad_logs_name_file_row_and_field(tmp_path: Path, body: str, needle: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(body)
    with pytest.raises(DataError) as err:
        read_logs(path)
    message = str(err.value)
    assert needle.format(f=path) in message and str(path) in message
    assert "\n" not in message


def test_logged_actor_must_be_in_the_table(tmp_path: Path) -> None:
    table = demo(20, seed=0)
    path = tmp_path / "l.jsonl"
    path.write_text('{"query_id": "z", "actor": "gpt-9", "text": "hi", "score": 1, "propensity": 0.5}\n')
    with pytest.raises(DataError, match=r"l.jsonl, row 1, field 'actor': actor 'gpt-9' is not an actor of table"):
        read_logs(path, table=table)


def test_renamed_production_columns(tmp_path: Path) -> None:
    path = tmp_path / "prod.csv"
    path.write_text("id,model,prompt,reward,prob\nq1,a,hello,1,0.2\nq2,b,bye,0,0.8\n")
    logs = read_logs(path, rename="id=query_id,model=actor,prompt=text,reward=score,prob=propensity")
    assert logs.table.actor_names == ["a", "b"] and logs.propensity.tolist() == [0.2, 0.8]


def test_logs_invariants() -> None:
    table = demo(12, seed=0).select_queries(np.arange(10))
    fb = Feedback.logged(table, np.zeros(10, dtype=np.intp), np.full(10, 0.5))
    with pytest.raises(UsageError, match="unknown reward column 'mu'"):
        Logs(fb, {"mu": np.zeros(10)})
    with pytest.raises(UsageError, match=r"reward dcg .* must be in \[0, 1\]"):
        Logs(fb, {"dcg": np.full(10, 2.0)})
    with pytest.raises(UsageError, match="need logged feedback"):
        Logs(Feedback.full(table))
    score = fb.table.score.copy()
    score[3, 0] = np.nan
    with pytest.raises(UsageError, match="'demo-00003' of the log has no observed outcome"):
        Logs(Feedback(replace(fb.table, score=score), np.ones(10)))
    assert set(REWARD_COLUMNS) >= {"acc_at_1_l", "dcg", "l_dcg"}


@pytest.mark.parametrize("ext", FORMATS)
def test_a_log_imports_as_a_table(tmp_path: Path, ext: str) -> None:
    """A log is a long file: the table importer reads it (with its side-file: every actor), propensity checked
    and left out of the table."""
    _, logs = sample_logs(20)
    out, side = write_logs(logs, tmp_path / f"l.{ext}")
    table = read("long", out, side)
    assert table.actor_names == logs.table.actor_names
    np.testing.assert_array_equal(table.score, logs.table.score)
    assert read_long([out]).n_queries == 20


@pytest.mark.parametrize("ext,row", [("csv", 4), ("jsonl", 3), ("parquet", 3)])
def test_long_importer_checks_a_propensity_column(tmp_path: Path, ext: str, row: int) -> None:
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    rows = pa.table({"query_id": ["q1", "q1", "q2"], "actor": ["a", "b", "a"], "score": [1.0, 0.0, 1.0],
                     "propensity": [0.5, None, 2.0]})
    path = tmp_path / f"t.{ext}"
    if ext == "csv":
        pcsv.write_csv(rows, str(path))
    elif ext == "parquet":
        pq.write_table(rows, str(path))
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows.to_pylist()))
    with pytest.raises(DataError, match=rf"t.{ext}, row {row}, field 'propensity': propensity 2.0 must be in "
                                        r"\(0, 1\]"):
        read_long([path])
    with pytest.raises(DataError, match=rf"t.{ext}, row {row}, field 'propensity'"):
        read("long", path)
    path = tmp_path / "renamed.csv"
    path.write_text("query_id,actor,score,p\nq1,a,1,0.5\nq1,b,0,\nq2,a,1,1\n")
    t = read_long([path], rename="p=propensity")  # empty = unknown is fine in a table
    assert t.n_queries == 2 and t.n_actors == 2
