"""What the store and society report about themselves (issue 21): the runs table counts the cells a run stored
(an interrupted one too), ``results query`` runs exactly one statement (DuckDB's parser decides: a ';' in a string
literal or a comment is no separator), and ``society --json`` names the rows it used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routerlab.cli import main
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.execute.base import SerialExecutor
from routerlab.experiments.runner import run_experiment
from routerlab.experiments.schema import load_experiment
from routerlab.experiments.store import query
from tests.experiments.helpers import write_experiment
from tests.experiments.test_runner import _OneThenCrash


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), RuntimeError("worker lost")])
def test_runs_records_the_cells_an_interrupted_run_stored(tmp_path: Path, exc: BaseException) -> None:
    exp = load_experiment(write_experiment(tmp_path))  # 12 cells in 2 tasks of 6
    store = tmp_path / "store"
    with pytest.raises(type(exc)):
        run_experiment(exp, store, executor=_OneThenCrash(exc))
    stored = query(store, "SELECT count(*) FROM cells")[1][0][0]
    assert stored == 6
    assert query(store, "SELECT cells_total, cells_reused, cells_run FROM runs")[1] == [(12, 0, 6)]
    run_experiment(exp, store, executor=SerialExecutor())  # the resume runs the other 6
    assert query(store, "SELECT cells_total, cells_reused, cells_run, status FROM runs ORDER BY started_at")[1] == [
        (12, 0, 6, "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"), (12, 6, 6, "finished")]
    run_experiment(exp, store, executor=SerialExecutor())  # nothing left to run
    assert query(store, "SELECT cells_run FROM runs ORDER BY started_at")[1][-1] == (0,)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("st")
    path = root / "store"
    run_experiment(load_experiment(write_experiment(root, routers='"best-single"', seeds="0")), path)
    return path


@pytest.mark.parametrize("sql", ["SELECT 1; SELECT 2", "SELECT 1;SELECT 2;", "SELECT ';'; SELECT 2",
                                 "SELECT count(*) FROM results; DELETE FROM results"])
def test_more_than_one_statement_is_refused(store: Path, sql: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UsageError, match=r"^results query runs one SQL statement, got 2: run them one at a time"):
        query(store, sql)
    assert main(["results", "query", sql, "--store", str(store)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ("routerlab: error: results query runs one SQL statement, got 2: "
                                                   "run them one at a time (a single trailing ';' is fine)\n")


@pytest.mark.parametrize(("sql", "value"), [("SELECT 1 AS x;", 1), ("SELECT 'a;b' AS x", "a;b"),
                                            ("SELECT 2 AS x -- one; two\n", 2), ("SELECT /* ; */ 3 AS x;", 3),
                                            ('SELECT ";" FROM (SELECT 4 AS ";")', 4)])
def test_one_statement_with_semicolons_inside_runs(store: Path, sql: str, value: object) -> None:
    assert query(store, sql)[1] == [(value,)]


def test_only_separators_is_empty(store: Path) -> None:
    with pytest.raises(UsageError, match="the SQL is empty"):
        query(store, ";;")


def test_society_json_names_the_rows_it_used(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labelled = demo(200, seed=1)
    unlabelled = labelled.with_split([""] * labelled.n_queries)
    labelled.save(tmp_path / "labelled")
    unlabelled.save(tmp_path / "unlabelled")
    assert main(["society", str(tmp_path / "unlabelled"), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["split"] == "all" and record["n_items"] == 200  # every query, not "train"
    assert record["notes"] == ["table 'demo(seed=1)' has no split labels; HSE uses all 200 queries"]
    assert main(["society", str(tmp_path / "labelled"), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["split"] == "train" and record["n_items"] == 160  # the train rows it used
