"""The long format: lossless round trips through CSV / JSON lines / Parquet, streaming, and bad input."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from routerlab.data.importers import _REGISTRY, importers, read
from routerlab.data.importers._common import DataWarning
from routerlab.data.longformat import actors_path_for, column_map, parse_rename, read_long, write_long
from routerlab.data.table import MATRIX_FIELDS, Actors, RoutingTable
from routerlab.errors import DataError, UsageError
from tests.data.importer_checks import assert_names, same_cells

FORMATS = ["csv", "jsonl", "parquet", "tsv", "csv.gz", "jsonl.gz"]


def sample_table(n: int = 9, m: int = 4, seed: int = 0) -> RoutingTable:
    rng = np.random.default_rng(seed)
    score = rng.random((n, m)).astype(np.float32)
    score[rng.random((n, m)) < 0.3] = np.nan
    score[:, 1] = np.where(rng.random(n) < 0.5, 0.0, 1.0)
    score[3] = np.nan  # a query with no observed cell at all
    tokens = rng.integers(1, 500, (n, m)).astype(np.float32)
    tokens[rng.random((n, m)) < 0.2] = np.nan
    tokens[3] = np.nan
    tokens[5, 2] = 17.0
    score[5, 2] = np.nan  # tokens known, score not: the cell still travels
    cost = (rng.random((n, m)) / 1000).astype(np.float32)
    cost[np.isnan(tokens)] = np.nan
    actors = Actors.create(
        ["gpt,4", 'say "hi"', "ünï/cødé", "plain"][:m],
        params_b=[1.5, np.nan, 70, 8][:m],
        ttft_ms=[120, 80, np.nan, 30][:m],
        itl_ms=[10, 12, 9, np.nan][:m],
        input_price=[0.2, np.nan, 1.0, 0.1][:m],
        output_price=[0.6, 0.3, np.nan, 0.2][:m],
        extra={"family": np.array(["a", "b", "c", "d"][:m], dtype=object), "year": np.arange(2020, 2020 + m)},
    )
    texts = ["hello, world", "two\nlines", 'a "quoted" word', "", "tab\there", "émoji 🙂", "back\\slash",
             "x" * 200, "comma,\"and\"\nnewline"]
    return RoutingTable.from_arrays(
        score,
        actors=actors,
        query_ids=[f"q{i}" for i in range(n)],
        text=[texts[i % len(texts)] for i in range(n)],
        dataset=["mmlu" if i % 3 else "gsm8k" for i in range(n)],
        split=["train" if i < n - 2 else "test" for i in range(n)],
        tokens_out=tokens,
        cost_usd=cost,
        name="sample",
    )


def assert_same_table(a: RoutingTable, b: RoutingTable) -> None:
    """Every value equal (NaN in the same places), then the content hash too."""
    for key in ("ids", "text", "dataset", "split"):
        assert getattr(a.queries, key).tolist() == getattr(b.queries, key).tolist(), key
    assert a.actor_names == b.actor_names
    for key in ("params_b", "ttft_ms", "itl_ms", "input_price", "output_price"):
        np.testing.assert_array_equal(getattr(a.actors, key), getattr(b.actors, key), err_msg=key)
    assert sorted(a.actors.extra) == sorted(b.actors.extra)
    for key in a.actors.extra:
        assert a.actors.extra[key].tolist() == b.actors.extra[key].tolist(), key
    for key in MATRIX_FIELDS:
        assert same_cells(getattr(a, key), getattr(b, key)), key
    assert a.content_hash == b.content_hash


# ---------------------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("ext", FORMATS)
def test_round_trip_is_lossless(tmp_path: Path, ext: str) -> None:
    table = sample_table()
    out, side = write_long(table, tmp_path / f"t.{ext}")
    assert side == actors_path_for(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, side.name])  # no temporary files left
    if ext.endswith(".gz"):
        assert out.read_bytes()[:2] == side.read_bytes()[:2] == b"\x1f\x8b"
    back = read_long([out], actors=side)
    assert_same_table(table, back)
    assert back.name == "t" and back.meta["format"] == "long"


@pytest.mark.parametrize("ext", ["csv", "jsonl", "parquet"])
def test_round_trip_with_repeated_text_and_side_file_among_paths(tmp_path: Path, ext: str) -> None:
    table = sample_table()
    out, side = write_long(table, tmp_path / f"t.{ext}", repeat_text=True)
    back = read("long", out, side)  # the *.actors.* file is recognised among the inputs
    assert_same_table(table, back)


def test_written_rows_are_the_observed_cells(tmp_path: Path) -> None:
    table = sample_table()
    out, _ = write_long(table, tmp_path / "t.parquet")
    rows = pq.read_table(out)
    any_value = np.zeros(table.score.shape, dtype=bool)
    for mat in table.matrices().values():
        any_value |= ~np.isnan(mat)
    empty_queries = int((~any_value.any(axis=1)).sum())
    assert rows.num_rows == int(any_value.sum()) + empty_queries
    assert rows.column("text").null_count > 0  # text on the first row of each query only


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_name = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8)


@st.composite
def tables(draw: st.DrawFn) -> RoutingTable:
    n = draw(st.integers(0, 6))
    m = draw(st.integers(1, 4))
    qids = draw(st.lists(_name, min_size=n, max_size=n, unique=True))
    names = draw(st.lists(_name, min_size=m, max_size=m, unique=True))
    cell = st.one_of(st.just(np.nan), st.sampled_from([0.0, 1.0, 0.5]), st.floats(0, 1, width=32))
    score = np.array(draw(st.lists(cell, min_size=n * m, max_size=n * m)), dtype=np.float32).reshape(n, m)
    mats = {}
    for key in draw(st.sets(st.sampled_from(["tokens_in", "tokens_out", "latency_s", "cost_usd"]))):
        amount = st.one_of(st.just(np.nan), st.floats(0, 1e6, width=32))
        mats[key] = np.array(draw(st.lists(amount, min_size=n * m, max_size=n * m)), dtype=np.float32).reshape(n, m)
    attr = st.one_of(st.just(np.nan), st.floats(0, 1e4))
    actors = Actors.create(
        names,
        params_b=draw(st.lists(attr, min_size=m, max_size=m)),
        ttft_ms=draw(st.lists(attr, min_size=m, max_size=m)),
        itl_ms=draw(st.lists(attr, min_size=m, max_size=m)),
    )
    return RoutingTable.from_arrays(
        score,
        actors=actors,
        query_ids=qids,
        text=draw(st.lists(_text, min_size=n, max_size=n)),
        dataset=draw(st.lists(st.sampled_from(["", "a", "b,c", "d\"e"]), min_size=n, max_size=n)),
        split=draw(st.lists(st.sampled_from(["", "train", "test"]), min_size=n, max_size=n)),
        **mats,
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=tables(), ext=st.sampled_from(["csv", "jsonl", "parquet"]), batch_rows=st.sampled_from([1, 3, 1 << 20]),
       repeat_text=st.booleans())
def test_round_trip_property(tmp_path: Path, table: RoutingTable, ext: str, batch_rows: int,
                             repeat_text: bool) -> None:
    # JSON lines has no header: an empty table there cannot say which optional matrices it had
    assume(ext != "jsonl" or table.n_queries > 0)
    out, side = write_long(table, tmp_path / f"h.{ext}", repeat_text=repeat_text)
    back = read_long([out], actors=side, batch_rows=batch_rows)
    assert_same_table(table, back)


# ---------------------------------------------------------------------------------------- streaming


def _with_duplicates(tmp_path: Path, ext: str) -> Path:
    rng = np.random.default_rng(3)
    rows = []
    for i in range(60):
        q, a = f"q{rng.integers(0, 12)}", f"a{rng.integers(0, 5)}"
        rows.append({"query_id": q, "actor": a, "score": float(rng.integers(0, 2)) if i % 7 else None,
                     "tokens_out": float(rng.integers(1, 99)), "dataset": f"d{q[1:]}", "text": f"text of {q}"})
    tbl = pa.Table.from_pylist(rows)
    path = tmp_path / f"dups.{ext}"
    if ext == "parquet":
        pq.write_table(tbl, path)
    elif ext == "csv":
        import pyarrow.csv as pcsv

        pcsv.write_csv(tbl, path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("ext", ["csv", "jsonl", "parquet"])
@pytest.mark.parametrize("on_duplicate", ["last", "mean"])
def test_batch_size_does_not_change_the_result(tmp_path: Path, ext: str, on_duplicate: str) -> None:
    path = _with_duplicates(tmp_path, ext)
    whole = read_long([path], on_duplicate=on_duplicate)
    for batch_rows in (1, 7, 13):
        part = read_long([path], on_duplicate=on_duplicate, batch_rows=batch_rows)
        assert_same_table(whole, part)


def test_big_round_trip_in_small_batches(tmp_path: Path) -> None:
    table = sample_table(n=300, m=4, seed=5)
    for ext in ("csv", "jsonl", "parquet"):
        out, side = write_long(table, tmp_path / f"big.{ext}", block_cells=50)
        assert_same_table(table, read_long([out], actors=side, batch_rows=7))


def test_duplicate_policies(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("query_id,actor,score,tokens_out\nq1,a,0,10\nq1,b,1,\nq1,a,1,\nq2,a,,5\nq1,a,0.5,30\n")
    last = read_long([path], on_duplicate="last")
    assert last.score[0, 0] == np.float32(0.5) and last.tokens_out is not None and last.tokens_out[0, 0] == 30
    mean = read_long([path], on_duplicate="mean", batch_rows=2)
    assert mean.score[0, 0] == np.float32(0.5)  # (0 + 1 + 0.5) / 3
    assert mean.tokens_out is not None and mean.tokens_out[0, 0] == 20  # (10 + 30) / 2: empty cells do not count
    assert np.isnan(mean.score[1, 0]) and mean.tokens_out[1, 0] == 5
    with pytest.raises(UsageError):
        read_long([path], on_duplicate="first")


# ---------------------------------------------------------------------------------------- bad input


def test_missing_required_column(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text("query_id,actor,label\nq1,a,1\n")
    with pytest.raises(DataError) as err:
        read_long([path])
    assert_names(err.value, path, field="score")
    assert "label" in str(err.value)
    pq.write_table(pa.table({"query_id": ["q"], "score": [1.0]}), tmp_path / "m.parquet")
    with pytest.raises(DataError) as err:
        read_long([tmp_path / "m.parquet"])
    assert_names(err.value, tmp_path / "m.parquet", field="actor")
    (tmp_path / "m.jsonl").write_text('{"query_id": "q", "actor": "a"}\n')
    with pytest.raises(DataError) as err:
        read_long([tmp_path / "m.jsonl"])
    assert_names(err.value, tmp_path / "m.jsonl", field="score")


@pytest.mark.parametrize("batch_rows", [1, 1 << 20])
def test_bad_score_names_file_row_field(tmp_path: Path, batch_rows: int) -> None:
    csv = tmp_path / "b.csv"
    csv.write_text("query_id,actor,score\nq1,a,1\nq1,b,0\nq2,a,abc\n")
    with pytest.raises(DataError) as err:
        read_long([csv], batch_rows=batch_rows)
    assert_names(err.value, csv, row=4, field="score")  # CSV rows count the header line
    assert "abc" in str(err.value)
    csv.write_text("query_id,actor,score\nq1,a,1\nq1,b,1.5\n")
    with pytest.raises(DataError) as err:
        read_long([csv], batch_rows=batch_rows)
    assert_names(err.value, csv, row=3, field="score")
    jl = tmp_path / "b.jsonl"
    jl.write_text('{"query_id": "q1", "actor": "a", "score": 1}\n\n{"query_id": "q1", "actor": "b", "score": -1}\n')
    with pytest.raises(DataError) as err:
        read_long([jl], batch_rows=batch_rows)
    assert_names(err.value, jl, row=3, field="score")  # the line number: the blank line counts
    jl.write_text('{"query_id": 1, "actor": "a", "score": 1}\n{"query_id": "x", "actor": "b", "score": "high"}\n')
    with pytest.raises(DataError) as err:
        read_long([jl], batch_rows=batch_rows)
    assert_names(err.value, jl, row=2, field="score")
    pqf = tmp_path / "b.parquet"
    pq.write_table(pa.table({"query_id": ["q1", "q2", "q3"], "actor": ["a"] * 3, "score": [0.0, 1.0, 2.0]}), pqf)
    with pytest.raises(DataError) as err:
        read_long([pqf], batch_rows=batch_rows)
    assert_names(err.value, pqf, row=3, field="score")
    csv.write_text("query_id,actor,score,tokens_out\nq1,a,1,-3\n")
    with pytest.raises(DataError) as err:
        read_long([csv], batch_rows=batch_rows)
    assert_names(err.value, csv, row=2, field="tokens_out")


@pytest.mark.parametrize("batch_rows", [1, 2, 1 << 20])
def test_duplicate_cell_names_the_repeating_row(tmp_path: Path, batch_rows: int) -> None:
    path = tmp_path / "dup.csv"
    path.write_text("query_id,actor,score\nq1,a,1\nq1,b,0\nq2,a,1\nq1,a,0\nq2,a,0\n")
    with pytest.raises(DataError) as err:
        read_long([path], batch_rows=batch_rows)
    assert_names(err.value, path, row=5, field="actor")
    assert "'q1'" in str(err.value) and "'a'" in str(err.value)


@pytest.mark.parametrize("batch_rows", [1, 3, 1 << 20])
def test_contradicting_text_names_both_rows(tmp_path: Path, batch_rows: int) -> None:
    path = tmp_path / "c.csv"
    path.write_text('query_id,actor,score,text\nq1,a,1,"first, text"\nq1,b,0,\nq2,a,1,other\nq1,c,0,changed\n')
    with pytest.raises(DataError) as err:
        read_long([path], batch_rows=batch_rows)
    assert_names(err.value, path, row=5, field="text")
    assert "row 2" in str(err.value) and "'first, text'" in str(err.value)
    path.write_text("query_id,actor,score,dataset\nq1,a,1,x\nq1,b,0,x\nq2,a,1,y\nq2,b,1,z\n")  # grouped by query
    with pytest.raises(DataError) as err:
        read_long([path], batch_rows=batch_rows)
    assert_names(err.value, path, row=5, field="dataset")
    assert "row 4" in str(err.value) and "qualify_ids" in str(err.value)


def test_contradiction_across_files_and_split_from_file_names(tmp_path: Path) -> None:
    (tmp_path / "bench_train.csv").write_text("query_id,actor,score\nq1,a,1\nq2,a,0\n")
    (tmp_path / "bench_test.csv").write_text("query_id,actor,score\nq3,a,1\n")
    table = read_long([tmp_path / "bench_train.csv", tmp_path / "bench_test.csv"])
    assert table.queries.split.tolist() == ["train", "train", "test"]
    assert table.name == "bench"
    (tmp_path / "bench_test.csv").write_text("query_id,actor,score\nq3,a,1\nq1,b,1\n")
    with pytest.raises(DataError) as err:
        read_long([tmp_path / "bench_train.csv", tmp_path / "bench_test.csv"])
    assert_names(err.value, tmp_path / "bench_test.csv", row=3, field="split")
    assert "bench_train.csv" in err.value.detail


def test_empty_ids_and_unknown_types(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text("query_id,actor,score\nq1,a,1\nq2,,1\n")
    with pytest.raises(DataError) as err:
        read_long([path])
    assert_names(err.value, path, row=3, field="actor")
    (tmp_path / "x.xlsx").write_text("")
    with pytest.raises(DataError):
        read_long([tmp_path / "x.xlsx"])


# ---------------------------------------------------------------------------------------- options


def test_embedllm_style_rename(tmp_path: Path) -> None:
    head = "model_id,prompt_id,label,model_name,category_id\n"
    (tmp_path / "train.csv").write_text(head + "0,10,1,m-a,3\n1,10,0,m-b,3\n0,11,0,m-a,4\n")
    (tmp_path / "test.csv").write_text(head + "1,12,1,m-b,3\n")
    table = read_long([tmp_path / "train.csv", tmp_path / "test.csv"],
                      rename="prompt_id=query_id, model_name=actor, label=score")
    assert table.queries.ids.tolist() == ["10", "11", "12"]
    assert table.actor_names == ["m-a", "m-b"]
    assert table.queries.split.tolist() == ["train", "train", "test"]
    np.testing.assert_array_equal(table.score, [[1, 0], [0, np.nan], [np.nan, 1]])
    same = read_long([tmp_path / "train.csv", tmp_path / "test.csv"],
                     columns={"query_id": "prompt_id", "actor": "model_name", "score": "label"})
    assert same.content_hash == table.content_hash


def test_routereval_style_qualified_ids(tmp_path: Path) -> None:
    rows = [{"benchmark": b, "sample_id": i, "model": m, "performance": float((i + j) % 2)}
            for b in ("arc", "mmlu") for i in range(3) for j, m in enumerate(("x/1", "y/2"))]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "re.parquet")
    rename = "benchmark=dataset,sample_id=query_id,model=actor,performance=score"
    table = read_long([tmp_path / "re.parquet"], rename=rename, qualify_ids=True)
    assert table.queries.ids.tolist() == [f"{b}/{i}" for b in ("arc", "mmlu") for i in range(3)]
    assert table.dataset_counts() == {"arc": 3, "mmlu": 3}
    with pytest.raises(DataError) as err:  # without qualification sample 0 of arc and of mmlu collide
        read_long([tmp_path / "re.parquet"], rename=rename)
    assert err.value.field == "dataset"


def test_rename_errors() -> None:
    assert parse_rename("a=query_id, b=score") == {"a": "query_id", "b": "score"}
    with pytest.raises(UsageError):
        parse_rename("a:query_id")
    with pytest.raises(UsageError):
        column_map(rename="a=nonsense")
    with pytest.raises(UsageError):
        column_map(columns={"query_id": "x"}, rename="y=query_id")
    with pytest.raises(UsageError):
        column_map(rename="score=actor")  # file column 'score' -> actor, while 'score' is also itself


def test_actors_side_file_order_and_unknown_actor(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text("query_id,actor,score\nq1,b,1\nq1,z,0\nq2,a,1\n")
    (tmp_path / "models.json").write_text(json.dumps([
        {"name": "a", "params_b": 7, "input_price": "0.5", "vendor": "x"},
        {"name": "b", "ttft_ms": 40.0, "vendor": "y"},
        {"name": "c", "output_price": 1.5},
    ]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = read_long([tmp_path / "r.csv"], actors=tmp_path / "models.json")
    assert any(issubclass(w.category, DataWarning) and "'z'" in str(w.message) for w in caught)
    assert table.actor_names == ["a", "b", "c", "z"]  # side-file order, then actors it does not list
    assert table.actors.params_b[0] == 7 and table.actors.input_price[0] == 0.5 and np.isnan(table.actors.params_b[3])
    assert table.actors.extra["vendor"].tolist() == ["x", "y", None, None]
    assert np.isnan(table.score[:, 2]).all()
    (tmp_path / "bad.actors.csv").write_text("actor,params_b\na,big\n")
    with pytest.raises(DataError) as err:
        read_long([tmp_path / "r.csv", tmp_path / "bad.actors.csv"])
    assert_names(err.value, tmp_path / "bad.actors.csv", row=2, field="params_b")


def test_registered_with_summary() -> None:
    assert "long" in importers()
    assert _REGISTRY["long"].summary.startswith("Generic long rows")


@pytest.mark.parametrize("batch_rows", [1, 1 << 20])
def test_duplicate_across_sorted_files(tmp_path: Path, batch_rows: int) -> None:
    (tmp_path / "a.csv").write_text("query_id,actor,score\nq1,a,1\nq1,b,0\nq2,a,1\n")
    (tmp_path / "b.csv").write_text("query_id,actor,score\nq2,b,1\nq3,a,1\nq3,b,1\n")
    assert read_long([tmp_path / "a.csv", tmp_path / "b.csv"], batch_rows=batch_rows).n_queries == 3
    (tmp_path / "b.csv").write_text("query_id,actor,score\nq1,b,1\nq3,a,1\nq3,b,1\n")  # sorted, yet repeats a.csv
    with pytest.raises(DataError) as err:
        read_long([tmp_path / "a.csv", tmp_path / "b.csv"], batch_rows=batch_rows)
    assert_names(err.value, tmp_path / "b.csv", row=2, field="actor")
    last = read_long([tmp_path / "a.csv", tmp_path / "b.csv"], on_duplicate="last", batch_rows=batch_rows)
    assert last.score[0, 1] == 1.0


def test_folder_json_array_and_empty_inputs(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "a_train.json").write_text(json.dumps([
        {"query_id": "q1", "actor": "m1", "score": 1, "text": "hi"},
        {"query_id": "q1", "actor": "m2", "score": "0.25"},
    ]))
    (folder / "b_test.csv").write_text("query_id,actor,score\n")  # a header and no rows
    (folder / "models.actors.csv").write_text("actor,params_b\nm2,7\nm1,70\n")
    (folder / "notes.txt").write_text("not data")  # ignored: not a long-format extension
    table = read_long([folder], progress=False)
    assert table.queries.ids.tolist() == ["q1"] and table.queries.text.tolist() == ["hi"]
    assert table.actor_names == ["m2", "m1"] and table.actors.params_b.tolist() == [7.0, 70.0]
    np.testing.assert_array_equal(table.score, [[0.25, 1.0]])
    assert table.split_counts() == {"train": 1}
    with pytest.raises(UsageError):
        read_long([folder / "models.actors.csv"])  # a side-file alone is no data


def test_progress_bar_can_be_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, side = write_long(sample_table(), tmp_path / "p.parquet")
    read_long([out], actors=side, progress=True)
    assert "long: cells" in capsys.readouterr().err
