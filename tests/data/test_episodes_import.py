"""``routerlab import steps``: agentic episodes from one row per step. The cells' values are recomputed here from the
example file with the csv module; every bad input is one error naming file, row and field; ``info`` shows episodes."""

from __future__ import annotations

import csv
import json
import math
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routerlab.cli import main
from routerlab.data.importers import importers, read
from routerlab.data.longformat.steps import read_steps
from routerlab.data.store import load
from routerlab.datasets import demo
from routerlab.errors import DataError, UsageError
from routerlab.reports.text import info_text
from tests.data.importer_checks import assert_names

EXAMPLE = Path(__file__).parent / "episodes"
STEPS, QUERIES, ACTORS = EXAMPLE / "steps.csv", EXAMPLE / "steps.queries.csv", EXAMPLE / "steps.actors.csv"
NUMBERS = ("step", "tokens_in", "tokens_out", "ttft_s", "itl_s", "latency_s", "env_s", "score")


def _rows(path: Path = STEPS) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _expected_cells() -> dict[tuple[str, str], dict[str, float]]:
    """Each cell's values from the example file alone: score = the last step's, latency = sum of latency_s + env_s,
    tokens = sums, cost = tokens x the actors file's prices per million tokens."""
    prices = {r["actor"]: (float(r["input_price"]), float(r["output_price"])) for r in _rows(ACTORS)}
    steps: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for r in _rows():
        steps[(r["query_id"], r["actor"])].append(r)
    out = {}
    for cell, rows in steps.items():
        rows.sort(key=lambda r: int(r["step"]))
        tin = sum(float(r["tokens_in"] or 0) for r in rows)
        tout = sum(float(r["tokens_out"] or 0) for r in rows)
        ip, op = prices[cell[1]]
        out[cell] = {"score": float(rows[-1]["score"]),
                     "latency_s": sum(float(r["latency_s"] or 0) + float(r["env_s"] or 0) for r in rows),
                     "tokens_in": tin, "tokens_out": tout, "cost_usd": (tin * ip + tout * op) / 1e6,
                     "steps": len(rows)}
    return out


def test_the_example_imports_with_cells_derived_from_its_steps() -> None:
    table = read("steps", STEPS, QUERIES, ACTORS, visible="task")
    expected = _expected_cells()
    assert table.queries.ids.tolist() == [r["query_id"] for r in _rows(QUERIES)]  # the queries file's order
    assert table.actor_names == ["small-1b", "mid-8b", "large-70b"]  # the actors file's order
    assert table.queries.visible == {"task"} and table.queries.hidden == ("answer",)
    assert table.split_counts() == {"test": 5, "train": 7}
    assert table.episode_mask.all() and table.episodes is not None and table.episodes.n_cells == len(expected)
    assert len(table.episodes) == len(_rows())
    for (q, a), cell in expected.items():
        i, j = table.queries.ids.tolist().index(q), table.actor_names.index(a)
        for key in ("score", "latency_s", "tokens_in", "tokens_out", "cost_usd"):
            got = getattr(table, key)[i, j]
            assert got == np.float32(cell[key]), (q, a, key, got, cell[key])  # float32 matrices, float64 sums
    assert table.meta["format"] == "steps" and table.meta["source"] == [str(STEPS)]


def _typed(rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The CSV's rows with numbers as numbers and empty cells left out (as a JSON writer would)."""
    out = []
    for r in rows:
        rec: dict[str, Any] = {}
        for k, v in r.items():
            if v == "":
                continue
            rec[k] = (int(v) if k == "step" else float(v)) if k in NUMBERS else v
        out.append(rec)
    return out


@pytest.mark.parametrize("kind", ["jsonl", "json", "parquet", "tsv"])
def test_jsonl_json_parquet_and_tsv_give_the_same_table(tmp_path: Path, kind: str) -> None:
    rows = _rows()
    path = tmp_path / f"steps.{kind}"
    if kind == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in _typed(rows)))
    elif kind == "json":
        path.write_text(json.dumps(_typed(rows)))
    elif kind == "tsv":
        path.write_text("\n".join("\t".join(r) for r in [list(rows[0]), *[list(r.values()) for r in rows]]) + "\n")
    else:
        cols = {k: [r[k] for r in rows] for k in rows[0]}
        arrays = {k: (pa.array([None if x == "" else float(x) for x in v], pa.float64()) if k in NUMBERS[1:]
                      else pa.array([int(x) for x in v], pa.int64()) if k == "step" else pa.array(v, pa.string()))
                  for k, v in cols.items()}
        pq.write_table(pa.table(arrays), path)
    want = read("steps", STEPS, queries=QUERIES, actors=ACTORS)
    got = read("steps", path, queries=QUERIES, actors=ACTORS)
    assert got.content_hash == want.content_hash


def test_side_files_by_option_or_by_name_are_the_same(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    by_name, by_option = tmp_path / "a", tmp_path / "b"
    assert main(["import", "steps", str(STEPS), str(QUERIES), str(ACTORS), "--visible", "task",
                 "-o", str(by_name)]) == 0
    assert f"100% observed, 36 episodes of {len(_rows())} steps, hash" in capsys.readouterr().out
    assert main(["import", "steps", str(STEPS), "-O", f"queries={QUERIES}", "-O", f"actors={ACTORS}",
                 "--visible", "task", "-o", str(by_option)]) == 0
    a, b = load(by_name), load(by_option)
    assert a.content_hash == b.content_hash and a.queries.visible == b.queries.visible == {"task"}
    assert (by_name / "steps.parquet").is_file()


def test_without_side_files_ids_come_from_the_steps() -> None:
    table = read_steps([STEPS])
    first_seen = list(dict.fromkeys(r["query_id"] for r in _rows()))
    assert table.queries.ids.tolist() == first_seen and set(table.queries.text) == {""}
    assert table.cost_usd is not None and np.isnan(table.cost_usd).all()  # no prices: cost unknown
    assert table.latency_s is not None and not np.isnan(table.latency_s).any()


def test_formats_lists_steps(capsys: pytest.CaptureFixture[str]) -> None:
    assert "steps" in importers()
    assert main(["formats"]) == 0
    assert any(line.startswith("steps ") for line in capsys.readouterr().out.splitlines())


def test_queries_without_steps_stay_unobserved_and_unlisted_actors_warn(tmp_path: Path) -> None:
    steps = tmp_path / "s.csv"
    steps.write_text("query_id,actor,step,kind,latency_s,env_s,score\n"
                     "q1,x,0,model,0.5,,\nq1,x,1,tool,,0.25,\nq1,x,2,model,0.125,,1\n"
                     "q1,y,0,model,2,,0\n")
    queries = tmp_path / "q.csv"
    queries.write_text("id,text,split,gold\nq1,first,train,4\nq2,second,test,5\n")
    actors = tmp_path / "a.csv"
    actors.write_text("name,input_price\nx,1\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = read_steps([steps], queries=queries, actors=actors)
    assert any("not in the actors file (first: 'y')" in str(w.message) for w in caught)
    assert table.actor_names == ["x", "y"] and table.queries.ids.tolist() == ["q1", "q2"]
    assert table.latency_s is not None and table.latency_s[0].tolist() == [0.875, 2.0]
    assert np.isnan(table.score[1]).all() and table.queries.hidden == ("gold",)
    assert table.episode_mask.tolist() == [[True, True], [False, False]]


def test_a_model_step_without_latency_is_derived_from_its_tokens_and_ttft_itl(tmp_path: Path) -> None:
    steps = tmp_path / "s.csv"
    steps.write_text("query_id,actor,step,kind,tokens_out,ttft_s,itl_s,latency_s,score\n"
                     "q1,x,0,model,11,0.5,0.25,,1\n"   # own TTFT/ITL: 0.5 + 10 x 0.25 = 3
                     "q1,y,0,model,5,,,,1\n")           # the actor's: 100 ms + 4 x 50 ms = 0.3 s
    actors = tmp_path / "a.csv"
    actors.write_text("actor,ttft_ms,itl_ms\ny,100,50\n")
    with pytest.warns(UserWarning, match="not in the actors file"):
        table = read_steps([steps], actors=actors)
    assert table.actor_names == ["y", "x"]  # the actors file's first
    assert table.latency_s is not None and table.latency_s[0].tolist() == pytest.approx([0.3, 3.0])


# ------------------------------------------------------------------------------------------------- bad input

GOOD = ("query_id,actor,step,kind,tokens_in,tokens_out,latency_s,env_s,score,tool\n"
        "q1,a,0,model,10,20,0.5,,,\n"
        "q1,a,1,tool,,,,0.25,,calculator\n"
        "q1,a,2,model,40,5,0.125,,1,\n"
        "q2,a,0,model,10,20,0.5,,0,\n")


def _with(row: int, field: str, value: str) -> str:
    """GOOD with one cell changed (``row`` counted as an editor counts CSV lines: the header is row 1)."""
    lines = GOOD.splitlines()
    header = lines[0].split(",")
    cells = lines[row - 1].split(",")
    cells[header.index(field)] = value
    lines[row - 1] = ",".join(cells)
    return "\n".join(lines) + "\n"


BAD = [
    # (steps file text, row, field, words of the message)
    (_with(3, "kind", "planning"), 3, "kind", "'planning' is unknown"),
    (_with(3, "kind", ""), 3, "kind", "is empty"),
    (_with(2, "latency_s", "-0.5"), 2, "latency_s", "must be finite and >= 0"),
    (_with(3, "env_s", "inf"), 3, "env_s", "must be finite and >= 0"),
    (_with(3, "env_s", "nan"), 3, "env_s", "a tool step needs env_s"),
    (_with(3, "env_s", ""), 3, "env_s", "a tool step needs env_s"),
    (_with(5, "latency_s", ""), 5, "latency_s", "a model step needs latency_s"),
    (_with(2, "env_s", "0.5"), 2, "env_s", "a model step has env_s 0.5"),
    (_with(3, "latency_s", "1"), 3, "latency_s", "a tool step has latency_s 1"),
    (_with(3, "tokens_out", "7"), 3, "tokens_out", "a tool step has tokens_out 7"),
    (_with(4, "step", "0"), 4, "step", "step 0 of query 'q1', actor 'a' repeats row 2"),
    (_with(3, "step", "1.5"), 3, "step", "step 1.5 is not an integer >= 0"),
    (_with(3, "step", ""), 3, "step", "step is empty"),
    (_with(4, "score", ""), 4, "score", "the last step (2) of query 'q1', actor 'a' has no score"),
    (_with(4, "score", "1.5"), 4, "score", "outside [0, 1]"),
    (_with(2, "tokens_out", "many"), 2, "tokens_out", "'many' is not a number"),
    (_with(5, "actor", ""), 5, "actor", "actor is empty"),
]


@pytest.mark.parametrize(("text", "row", "field", "words"), BAD)
def test_a_bad_step_is_one_error_naming_file_row_and_field(tmp_path: Path, text: str, row: int, field: str,
                                                           words: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "steps.csv"
    path.write_text(text)
    with pytest.raises(DataError) as err:
        read_steps([path])
    assert_names(err.value, path, row=row, field=field)
    assert words in str(err.value), str(err.value)
    assert main(["import", "steps", str(path), "-o", str(tmp_path / "out")]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and len(cap.err.strip().splitlines()) == 1 and "Traceback" not in cap.err
    assert not (tmp_path / "out").exists()


def test_the_good_file_of_those_checks_imports(tmp_path: Path) -> None:
    path = tmp_path / "steps.csv"
    path.write_text(GOOD)
    table = read_steps([path])
    assert table.latency_s is not None and table.latency_s[:, 0].tolist() == [0.875, 0.5]
    assert table.score[:, 0].tolist() == [1.0, 0.0]


def test_rows_are_counted_as_jsonl_lines_and_parquet_records(tmp_path: Path) -> None:
    recs = [{"query_id": "q1", "actor": "a", "step": 0, "kind": "model", "latency_s": 0.5},
            {"query_id": "q1", "actor": "a", "step": 1, "kind": "tool", "env_s": 0.5, "score": 1},
            {"query_id": "q2", "actor": "a", "step": 0, "kind": "robot", "latency_s": 0.5, "score": 1}]
    jl = tmp_path / "s.jsonl"
    jl.write_text(json.dumps(recs[0]) + "\n\n" + "\n".join(json.dumps(r) for r in recs[1:]) + "\n")  # a blank line
    with pytest.raises(DataError) as err:
        read_steps([jl])
    assert_names(err.value, jl, row=4, field="kind")
    pqf = tmp_path / "s.parquet"
    keys = list(dict.fromkeys(k for r in recs for k in r))
    pq.write_table(pa.table({k: [r.get(k) for r in recs] for k in keys}), pqf)
    with pytest.raises(DataError) as err:
        read_steps([pqf])
    assert_names(err.value, pqf, row=3, field="kind")


def test_duplicate_steps_across_files_name_both(tmp_path: Path) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("query_id,actor,step,kind,latency_s,score\nq1,x,0,model,1,\n")
    b.write_text("query_id,actor,step,kind,latency_s,score\nq1,x,1,model,1,1\nq1,x,0,model,2,\n")
    with pytest.raises(DataError) as err:
        read_steps([a, b])
    assert_names(err.value, b, row=3, field="step")
    assert f"repeats row 2 of {a}" in str(err.value)


def test_a_step_whose_query_is_not_in_the_queries_file(tmp_path: Path) -> None:
    steps, queries = tmp_path / "s.csv", tmp_path / "s.queries.csv"
    steps.write_text(GOOD)
    queries.write_text("query_id,text\nq1,first\n")
    with pytest.raises(DataError) as err:
        read_steps([steps, queries])
    assert_names(err.value, steps, row=5, field="query_id")
    assert "'q2' is not in the queries file" in str(err.value)


@pytest.mark.parametrize(("content", "words"), [("", "empty file"), ("query_id,actor,step,kind,score\n", "no steps")])
def test_an_empty_file(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "steps.csv"
    path.write_text(content)
    with pytest.raises(DataError, match=words) as err:
        read_steps([path])
    assert_names(err.value, path)


def test_a_missing_column_and_bad_side_files(tmp_path: Path) -> None:
    path = tmp_path / "steps.csv"
    path.write_text("query_id,actor,step,latency_s,score\nq1,a,0,1,1\n")
    with pytest.raises(DataError, match="missing required column 'kind'") as err:
        read_steps([path])
    assert_names(err.value, path, field="kind")
    good = tmp_path / "good.csv"
    good.write_text(GOOD)
    queries = tmp_path / "q.csv"
    queries.write_text("query_id,text\nq1,a\nq2,b\nq1,c\n")
    with pytest.raises(DataError, match="query 'q1' repeats row 2") as err:
        read_steps([good], queries=queries)
    assert_names(err.value, queries, row=4, field="query_id")
    queries.write_text("text\nfirst\n")
    with pytest.raises(DataError, match="missing column 'query_id'"):
        read_steps([good], queries=queries)
    queries.write_text("query_id,text,gold\nq1,a,1\nq2,b,2\n")
    with pytest.raises(UsageError, match="visible column 'task' is not a metadata column"):
        read_steps([good], queries=queries, visible="task")
    with pytest.raises(UsageError, match="give one"):
        read_steps([good], visible="gold")
    actors = tmp_path / "a.csv"
    actors.write_text("actor,input_price\na,cheap\n")
    with pytest.raises(DataError) as err:
        read_steps([good], actors=actors)
    assert_names(err.value, actors, row=2, field="input_price")


# ------------------------------------------------------------------------------------------------------ info


def test_info_shows_the_episodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t"
    assert main(["import", "steps", str(STEPS), str(QUERIES), str(ACTORS), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["info", str(out), "--json"]) == 0
    ep = json.loads(capsys.readouterr().out)["episodes"]
    expected = _expected_cells()
    kinds = [r["kind"] for r in _rows()]
    assert ep["cells"] == len(expected) == 36 and ep["steps"] == len(kinds)
    assert ep["steps_by_kind"] == {k: kinds.count(k) for k in ("model", "tool", "env")}
    per_actor = {a: float(np.median([c["steps"] for (_, b), c in expected.items() if b == a]))
                 for a in ("small-1b", "mid-8b", "large-70b")}
    assert ep["median_steps_per_actor"] == per_actor
    assert main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    by_kind = ", ".join(f"{k} {kinds.count(k)}" for k in ("model", "tool", "env"))
    assert f"episodes     36 of 36 cells hold an episode: {len(kinds)} steps ({by_kind})" in text
    assert "median steps per episode: " + ", ".join(f"{a} {v:g}" for a, v in per_actor.items()) in text


def test_info_of_a_table_without_episodes_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    info = demo(n_queries=200).describe()
    assert "episodes" not in info
    assert "episode" not in info_text({**info, "quality": {}})
    assert main(["info", "--json"]) == 0
    assert "episodes" not in json.loads(capsys.readouterr().out)


def test_a_long_import_hashes_as_before_episodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The hash the code before episodes gave this file (computed on that commit): tables without episodes keep it."""
    src = tmp_path / "pin.csv"
    src.write_text("query_id,actor,score,latency_s,tokens_out,text,split\nq1,a,1,0.5,10,what is 2+2,train\n"
                   "q1,b,0,1.25,12,what is 2+2,train\nq2,a,0,0.75,,name a prime,test\n"
                   "q2,b,1,2.0,30,name a prime,test\n")
    assert main(["import", "long", str(src), "-o", str(tmp_path / "t")]) == 0
    capsys.readouterr()
    back = load(tmp_path / "t")
    assert back.episodes is None and not (tmp_path / "t" / "steps.parquet").exists()
    assert back.content_hash == "94d514455b1febcda48291f4577111256f886daa21a6274e23afdc890b5b0c5c"
    assert not math.isnan(float(back.score[0, 0]))


# ---------------------------------------------------------------------------------- generated and mangled files


@st.composite
def episodes(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Step records of a few cells: step numbers with gaps, each kind's time in its own column, the last step
    scored, rows shuffled."""
    cells = draw(st.lists(st.tuples(st.sampled_from(["q0", "q1", "q2", "7"]), st.sampled_from(["a", "b", "c"])),
                          min_size=1, max_size=8, unique=True))
    seconds = st.floats(0, 50, allow_nan=False, allow_infinity=False)
    rows = []
    for q, a in cells:
        numbers = sorted(draw(st.sets(st.integers(0, 40), min_size=1, max_size=5)))
        for k, step in enumerate(numbers):
            kind = draw(st.sampled_from(["model", "tool", "env"]))
            rec: dict[str, Any] = {"query_id": q, "actor": a, "step": step, "kind": kind}
            if kind == "model":
                rec.update(latency_s=draw(seconds), tokens_in=draw(st.integers(0, 500)),
                           tokens_out=draw(st.integers(0, 500)))
            else:
                rec["env_s"] = draw(seconds)
            last = k == len(numbers) - 1
            if last or draw(st.booleans()):
                rec["score"] = draw(st.sampled_from([0.0, 0.25, 1.0]))
            rows.append(rec)
    return draw(st.permutations(rows))


def _csv_text(records: list[dict[str, Any]]) -> str:
    cols = ["query_id", "actor", "step", "kind", "tokens_in", "tokens_out", "latency_s", "env_s", "score"]
    return "\n".join([",".join(cols), *(",".join(repr(r[c]) if isinstance(r.get(c), float) else str(r.get(c, ""))
                                                 for c in cols) for r in records)]) + "\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=episodes())
def test_generated_episodes_import_to_their_sums(tmp_path_factory: pytest.TempPathFactory,
                                                 records: list[dict[str, Any]]) -> None:
    path = tmp_path_factory.mktemp("gen") / "steps.csv"
    path.write_text(_csv_text(records))
    table = read_steps([path])
    by_cell: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_cell[(r["query_id"], r["actor"])].append(r)
    assert table.episodes is not None and len(table.episodes) == len(records)
    assert table.latency_s is not None and table.tokens_out is not None
    ids = table.queries.ids.tolist()
    for (q, a), rs in by_cell.items():
        rs.sort(key=lambda r: r["step"])
        i, j = ids.index(q), table.actor_names.index(a)
        assert float(table.score[i, j]) == rs[-1]["score"]
        assert float(table.latency_s[i, j]) == pytest.approx(
            math.fsum(r.get("latency_s", 0.0) + r.get("env_s", 0.0) for r in rs), rel=1e-6, abs=1e-6)
        assert float(table.tokens_out[i, j]) == sum(r.get("tokens_out", 0) for r in rs)
    assert int(table.episode_mask.sum()) == len(by_cell)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=episodes(), cut=st.integers(0, 5000), junk=st.text(alphabet=',\n"{}:-.0123456789enasmodltfi ',
                                                                   min_size=1, max_size=6),
       as_json=st.booleans())
def test_mangled_files_raise_only_one_line_errors(tmp_path_factory: pytest.TempPathFactory,
                                                   records: list[dict[str, Any]], cut: int, junk: str,
                                                   as_json: bool) -> None:
    tmp = tmp_path_factory.mktemp("bad")
    raw = "".join(json.dumps(r) + "\n" for r in records) if as_json else _csv_text(records)
    at = cut % (len(raw) + 1)
    path = tmp / ("steps.jsonl" if as_json else "steps.csv")
    path.write_text(raw[:at] + junk + raw[at + len(junk):])
    try:
        read_steps([path])
    except DataError as err:
        assert "steps." in str(err) and "\n" not in str(err)
    except UsageError as err:
        assert "\n" not in str(err)
