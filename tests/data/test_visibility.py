"""Query metadata columns are hidden from routers unless declared visible (README "What a router sees"): the
declaration lives on the queries, survives every selection, concat, join and the store (old tables get their
importer's declaration), and each importer declares exactly the columns a deployed router would know."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from routerlab import read
from routerlab.data.demo import demo
from routerlab.data.join import join
from routerlab.data.store import MANIFEST, load, save
from routerlab.data.table import Actors, HiddenColumnError, Queries, QueryColumns, RoutingTable, concat
from routerlab.data.visibility import DECLARED
from routerlab.errors import DataError, UsageError


def _table(visible: tuple[str, ...] = ("task",), ids: tuple[str, ...] = ("q0", "q1", "q2"),
           split: tuple[str, ...] = ("train", "train", "test")) -> RoutingTable:
    n = len(ids)
    queries = Queries.create(ids, text=[f"t {i}" for i in ids], dataset=["d"] * n, split=split,
                             extra={"task": ["x", "y", "x"][:n], "gold": ["1", "2", "3"][:n]}, visible=visible)
    return RoutingTable(queries=queries, actors=Actors.create(["a", "b"]),
                        score=np.eye(n, 2, dtype=np.float32), name="t")


# ------------------------------------------------------------------------------------------ data model
def test_default_deny_and_the_declaration_checked() -> None:
    q = Queries.create(["q0"], extra={"task": ["x"], "gold": ["1"]})
    assert q.visible == frozenset() and q.hidden == ("gold", "task")
    q = Queries.create(["q0"], extra={"task": ["x"], "gold": ["1"]}, visible=["task"])
    assert q.visible == {"task"} and q.hidden == ("gold",)
    with pytest.raises(DataError, match=r"visible column\(s\) \['nope'\] are not query metadata columns"):
        Queries.create(["q0"], extra={"task": ["x"]}, visible=["nope"])


def test_with_visible_and_with_hidden() -> None:
    t = _table(visible=())
    shown = t.with_visible("task, gold")  # one comma-separated string, as on a command line
    assert shown.queries.visible == {"task", "gold"} and shown.queries.hidden == ()
    assert shown.with_hidden(["gold"]).queries.visible == {"task"}
    assert t.queries.visible == frozenset()  # tables are immutable
    assert shown.content_hash == t.content_hash  # a declaration, not data
    with pytest.raises(UsageError, match="no query column 'difficulty'; the table's query metadata columns are "
                                         "gold, task"):
        t.with_visible(["difficulty"])


def test_selections_keep_the_declaration() -> None:
    t = _table()
    for view in (t.select_split("train"), t.select_queries([2, 0]), t.select_actors(["b"]),
                 t.select_datasets(["d"]), t.with_split(["test"] * 3)):
        assert view.queries.visible == {"task"} and view.queries.hidden == ("gold",)


def test_visible_only_names_the_hidden_columns_it_dropped() -> None:
    t = _table()
    seen = t.visible_only()
    extra = seen.queries.extra
    assert isinstance(extra, QueryColumns) and list(extra) == ["task"] and extra.hidden == {"gold"}
    assert "gold" not in extra and extra.get("gold") is None  # in and get treat it as absent
    with pytest.raises(HiddenColumnError, match=r"query column 'gold' is hidden from routers.*--visible gold"):
        extra["gold"]
    with pytest.raises(KeyError):
        extra["nothing"]
    assert seen.select_queries([1]).queries.extra.hidden == {"gold"}  # a take keeps the names
    assert t.visible_only().content_hash == RoutingTable(
        queries=Queries.create(t.queries.ids, text=t.queries.text, dataset=t.queries.dataset,
                               split=t.queries.split, extra={"task": t.queries.extra["task"]}, visible=["task"]),
        actors=t.actors, score=t.score).content_hash  # the hash of what it holds
    plain = _table(visible=("task", "gold"))
    assert plain.visible_only() is plain


def test_concat_is_visible_only_where_every_table_says_so() -> None:
    a = _table(visible=("task", "gold"), ids=("q0", "q1"), split=("train", "test"))
    b = _table(visible=("task",), ids=("r0", "r1"), split=("train", "test"))
    assert concat([a, b]).queries.visible == {"task"}  # hidden in b: hidden in the result
    c = RoutingTable.from_arrays(np.ones((1, 2)), actors=["a", "b"], query_ids=["s0"])  # has no column at all
    assert concat([a, c]).queries.visible == {"task", "gold"}


def test_join_takes_each_columns_declaration_from_its_table() -> None:
    left = _table(visible=("task",))
    q = left.queries
    right = RoutingTable(
        queries=Queries.create(q.ids, text=q.text, extra={"task": ["?"] * 3, "cluster": ["c1", "c2", "c1"],
                                                          "answer": ["1", "2", "3"]}, visible=["task", "cluster"]),
        actors=Actors.create(["c"]), score=np.ones((3, 1), dtype=np.float32))
    joined = join([left, right])
    assert joined.queries.visible == {"task", "cluster"}
    assert joined.queries.hidden == ("answer", "gold")
    assert joined.queries.extra["task"].tolist() == ["x", "y", "x"]  # the first table's column, its declaration


# ------------------------------------------------------------------------------------------ store
def test_store_round_trip(tmp_path: Path) -> None:
    t = _table()
    save(t, tmp_path / "t")
    manifest = json.loads((tmp_path / "t" / MANIFEST).read_text())
    assert manifest["visible_columns"] == ["task"]
    back = load(tmp_path / "t")
    assert back.queries.visible == {"task"} and back.queries.hidden == ("gold",)
    assert back.content_hash == t.content_hash
    save(t.with_visible(["gold"]), tmp_path / "u")
    assert load(tmp_path / "u").queries.visible == {"task", "gold"}
    assert load(tmp_path / "u").content_hash == t.content_hash


def _drop_visible(path: Path, meta: dict[str, object] | None = None) -> None:
    """Make ``path`` look like a table saved before visibility was recorded."""
    manifest = json.loads((path / MANIFEST).read_text())
    del manifest["visible_columns"]
    if meta is not None:
        manifest["meta"] = meta
    (path / MANIFEST).write_text(json.dumps(manifest))


@pytest.mark.parametrize(("fmt", "visible"), [
    ("routerdc", {"cluster_id", "task_name"}),  # never ground_truth
    ("routerbench", set()),
    ("plugin-format", set()),  # a format routerlab does not know: every column hidden
    (None, set()),
])
def test_old_tables_get_their_importers_declaration(tmp_path: Path, fmt: str | None, visible: set[str]) -> None:
    extra = {"cluster_id": ["0", "1"], "ground_truth": ["A", "B"], "task_name": ["mmlu", "gsm8k"]}
    t = RoutingTable(queries=Queries.create(["a", "b"], extra=extra, visible=extra), actors=Actors.create(["m"]),
                     score=np.ones((2, 1), dtype=np.float32), meta={} if fmt is None else {"format": fmt})
    save(t, tmp_path / "t")
    _drop_visible(tmp_path / "t")
    back = load(tmp_path / "t")
    assert back.queries.visible == visible
    assert back.content_hash == t.content_hash  # still verifies: visibility is not in the hash


def test_an_old_demo_table_keeps_everything_hidden(tmp_path: Path) -> None:
    t = demo(60)
    save(t.with_visible(["tier"]), tmp_path / "d")
    _drop_visible(tmp_path / "d")
    assert load(tmp_path / "d").queries.hidden == ("difficulty", "tier")


@pytest.mark.parametrize(("listed", "error"), [
    ("task", "must be a list of column names"),
    (["task", 3], "must be a list of column names"),
    (["task", "nope"], r"names \['nope'\], which are not query metadata columns"),
])
def test_a_bad_manifest_declaration_is_a_data_error(tmp_path: Path, listed: object, error: str) -> None:
    save(_table(), tmp_path / "t")
    manifest = json.loads((tmp_path / "t" / MANIFEST).read_text())
    manifest["visible_columns"] = listed
    (tmp_path / "t" / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=error) as info:
        load(tmp_path / "t")
    assert "manifest.json" in str(info.value) and "visible_columns" in str(info.value)


# ------------------------------------------------------------------------------------------ importers
def test_the_demo_hides_its_latent_variables() -> None:
    t = demo(50)
    assert t.queries.visible == frozenset() and t.queries.hidden == ("difficulty", "tier")
    assert t.describe()["query_columns"] == {"visible": [], "hidden": ["difficulty", "tier"]}


@pytest.mark.parametrize(("name", "visible", "hidden"), [
    ("routerbench", {"sample_id"}, ("oracle_model_to_route_to",)),
    ("llmrouter", {"cluster_id", "task_name", "metric", "choices", "task_id"}, ("ground_truth",)),
    ("routeprofile", {"metric", "choices", "task_id", "domain"}, ("ground_truth",)),
    ("mmlu-pro", {"src", "options"}, ("answer", "answer_differs")),
])
def test_real_importers_declare_what_a_deployed_router_knows(
        real_table: Callable[[str], RoutingTable], name: str, visible: set[str], hidden: tuple[str, ...]) -> None:
    t = real_table(name)
    assert t.queries.visible == visible
    assert t.queries.hidden == hidden


def test_every_declared_column_has_a_reason() -> None:
    for fmt, columns in DECLARED.items():
        for column, why in columns.items():
            assert len(why.split()) >= 5, (fmt, column)
    # what must never be visible, whatever a format declares
    answers = {"oracle_model_to_route_to", "ground_truth", "gold", "answer", "answer_differs", "difficulty", "tier"}
    assert not answers & {c for columns in DECLARED.values() for c in columns}


# ------------------------------------------------------------------------------------------ long format
ROWS = [
    {"query_id": "q1", "actor": "a", "score": 1, "text": "hello", "task": "math", "gold": "4", "junk": "x"},
    {"query_id": "q1", "actor": "b", "score": 0, "task": "math", "gold": "4", "junk": "y"},
    {"query_id": "q2", "actor": "a", "score": 0, "text": "bye", "task": "code", "junk": "z"},
    {"query_id": "q2", "actor": "b", "score": 1, "text": "bye", "gold": "ret", "junk": "z"},
]


def _write(tmp_path: Path, kind: str) -> Path:
    if kind == "parquet":
        path = tmp_path / "x.parquet"
        pq.write_table(pa.Table.from_pylist(ROWS), str(path))
    elif kind == "jsonl":
        path = tmp_path / "x.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    else:
        path = tmp_path / "x.csv"
        cols = ["query_id", "actor", "score", "text", "task", "gold", "junk"]
        path.write_text(",".join(cols) + "\n" + "".join(",".join(str(r.get(c, "")) for c in cols) + "\n"
                                                        for r in ROWS))
    return path


@pytest.mark.parametrize("kind", ["csv", "jsonl", "parquet"])
def test_long_keeps_the_named_columns_only(tmp_path: Path, kind: str) -> None:
    path = _write(tmp_path, kind)
    plain = read("long", path, progress=False)
    assert dict(plain.queries.extra) == {}  # nothing unnamed is kept, as before
    t = read("long", path, visible="task", hidden=["gold"], progress=False)
    assert t.queries.visible == {"task"} and t.queries.hidden == ("gold",)
    assert t.queries.extra["task"].tolist() == ["math", "code"]
    assert t.queries.extra["gold"].tolist() == ["4", "ret"]  # first non-empty value per query
    assert t.content_hash != plain.content_hash  # kept columns are data


def test_long_refuses_bad_names(tmp_path: Path) -> None:
    for kind in ("csv", "jsonl", "parquet"):  # JSON: known after the first pass; the others: from the header
        with pytest.raises(UsageError, match="no input file has the column 'nope'"):
            read("long", _write(tmp_path, kind), visible="nope", progress=False)
    path = _write(tmp_path, "csv")
    with pytest.raises(UsageError, match="'text' is a long-format column"):
        read("long", path, visible="text", progress=False)
    with pytest.raises(UsageError, match="named both visible and hidden"):
        read("long", path, visible="task", hidden="task", progress=False)
    with pytest.raises(UsageError, match="file column 'task' fills the long-format column 'dataset'"):
        read("long", path, visible="task", rename="task=dataset", progress=False)
    with pytest.raises(DataError, match="junk 'y' contradicts 'x' given for query 'q1'"):
        read("long", path, hidden="junk", progress=False)


def test_read_declares_visible_on_any_importers_table(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"  # routerbench's wide layout, whose importer takes no `visible` itself
    path.write_text(",sample_id,prompt,eval_name,m1,m1|total_cost,oracle_model_to_route_to\n"
                    "0,s0,['x'],e,1.0,0.1,m1\n1,s1,['y'],e,0.0,0.1,no_model_correct\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert read("routerbench", path).queries.visible == {"sample_id"}
        shown = read("routerbench", path, visible="oracle_model_to_route_to")
        assert shown.queries.visible == {"sample_id", "oracle_model_to_route_to"}
        with pytest.raises(UsageError, match="no query column 'nope'"):
            read("routerbench", path, visible="nope")
