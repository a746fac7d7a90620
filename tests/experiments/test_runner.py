"""Running experiments into the DuckDB store: cells, reuse, added seeds and routers, executors, crashes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import routerlab.protocols.full as full
from routerlab.data.store import save
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.execute.base import SerialExecutor
from routerlab.experiments.runner import run_experiment
from routerlab.experiments.schema import load_experiment
from routerlab.experiments.store import query
from tests import require_module
from tests.experiments.helpers import write_experiment

REQUIRED = {"run_id", "table_name", "data_hash", "protocol", "router", "seed", "metric", "value", "ci_low",
            "ci_high", "routerlab_version", "cell_id", "settings", "split", "created_at"}
N_METRICS = 11  # the demo has cost and latency: every SPEC 7 metric applies; + top_share, collapsed_flag
STABLE = ("cell_id, table_name, data_hash, split, protocol, router, seed, settings, metric, value, ci_low, ci_high, "
          "routerlab_version")


def _rows(store: Path) -> list[tuple[Any, ...]]:
    return query(store, f"SELECT {STABLE} FROM results ORDER BY cell_id, metric")[1]


def _count_fits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    fitted: list[str] = []
    real = full.fit_router

    def counting(router: Any, *args: Any, **kwargs: Any) -> float:
        fitted.append(type(router).__name__)
        return real(router, *args, **kwargs)

    monkeypatch.setattr(full, "fit_router", counting)
    return fitted


def test_run_stores_every_cell_and_metric(tmp_path: Path) -> None:
    exp = load_experiment(write_experiment(tmp_path))
    store = tmp_path / "store"
    seen: list[tuple[int, int]] = []
    summary = run_experiment(exp, store, on_reuse=lambda a, b: seen.append((a, b)))
    assert seen == [(0, 12)]
    assert (summary.cells_total, summary.cells_run, summary.cells_reused, summary.tasks) == (12, 12, 0, 2)
    columns, rows = query(store, "SELECT * FROM results")
    assert set(columns) >= REQUIRED
    assert len(rows) == 12 * N_METRICS == summary.rows_written
    per_cell = query(store, "SELECT router, protocol, seed, count(*) FROM results GROUP BY ALL ORDER BY ALL")[1]
    assert len(per_cell) == 12 and {r[3] for r in per_cell} == {N_METRICS}
    assert {r[0] for r in per_cell} == {"oracle", "best-single", "knn"}
    assert {r[1] for r in per_cell} == {"full", "cold-start"}
    bad = query(store, "SELECT count(*) FROM results WHERE NOT (ci_low <= value AND value <= ci_high)")[1]
    assert bad == [(0,)]
    oracle = query(store, "SELECT min(value) FROM results WHERE router = 'oracle' AND metric = 'mu_o'")[1][0][0]
    best = query(store, "SELECT max(value) FROM results WHERE router = 'best-single' AND metric = 'mu_o'")[1][0][0]
    assert oracle > best  # the oracle bound is above any single model on the demo
    runs = query(store, "SELECT experiment, backend, status, cells_total, file_hash FROM runs")[1]
    assert runs == [("small", "serial", "finished", 12, exp.file_hash)]
    # seeds draw their own random split: the seed is in the data, not only a label
    splits = query(store, "SELECT count(DISTINCT value) FROM results WHERE router = 'best-single' "
                          "AND metric = 'mu_o' AND protocol = 'full'")[1]
    assert splits == [(2,)]


def test_rerun_reuses_every_cell_without_fitting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exp = load_experiment(write_experiment(tmp_path))
    store = tmp_path / "store"
    fitted = _count_fits(monkeypatch)
    run_experiment(exp, store)
    assert len(fitted) == 12
    before = _rows(store)
    fitted.clear()
    summary = run_experiment(exp, store)
    assert fitted == []
    assert (summary.cells_reused, summary.cells_run, summary.rows_written) == (12, 0, 0)
    assert _rows(store) == before
    assert query(store, "SELECT count(*) FROM runs WHERE status = 'finished'")[1] == [(2,)]

    def no_executor() -> SerialExecutor:
        raise AssertionError("an executor was started although every cell is stored")

    summary = run_experiment(exp, store, executor=no_executor)
    assert (summary.cells_run, summary.backend, summary.workers) == (0, "none", 0)
    made: list[SerialExecutor] = []

    def make() -> SerialExecutor:
        made.append(SerialExecutor())
        return made[-1]

    summary = run_experiment(load_experiment(write_experiment(tmp_path, seeds="0, 1, 4")), store, executor=make)
    assert (summary.cells_run, summary.backend, len(made)) == (6, "serial", 1)


def test_added_seed_and_router_run_only_new_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "store"
    run_experiment(load_experiment(write_experiment(tmp_path)), store)
    before = _rows(store)
    fitted = _count_fits(monkeypatch)
    summary = run_experiment(load_experiment(write_experiment(tmp_path, seeds="0, 1, 2")), store)
    assert (summary.cells_reused, summary.cells_run) == (12, 6)
    assert len(fitted) == 6
    after = _rows(store)
    assert set(before) <= set(after) and len(after) == 18 * N_METRICS
    # a router added later gets its own cells; the others' rows stay as they were
    summary = run_experiment(load_experiment(write_experiment(
        tmp_path, routers='"oracle", "best-single", "knn", "linear"', seeds="0, 1, 2")), store)
    assert (summary.cells_reused, summary.cells_run) == (18, 6)
    assert set(after) <= set(_rows(store))


def test_results_do_not_depend_on_the_other_routers_of_a_task(tmp_path: Path) -> None:
    """A cell's rows are the same whether its router ran alone or with others (what makes reuse sound)."""
    together, alone = tmp_path / "together", tmp_path / "alone"
    run_experiment(load_experiment(write_experiment(tmp_path, name="a.toml")), together)
    run_experiment(load_experiment(write_experiment(tmp_path, routers='"knn"', name="b.toml")), alone)
    knn = [r for r in _rows(together) if r[5] == "knn"]
    assert knn == _rows(alone)


class _OneThenCrash:
    """An executor whose second task dies (a lost worker, or Ctrl-C)."""

    name = "crashy"
    workers = 1

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def run(self, fn: Callable[[Any, Any], Any], items: Sequence[Any], *, shared: Any = None
            ) -> Iterator[tuple[int, Any]]:
        yield 0, fn(shared, items[0])
        raise self.exc

    def close(self) -> None:
        return None


@pytest.mark.parametrize(("exc", "status"), [(RuntimeError("worker lost"), "failed"),
                                             (KeyboardInterrupt(), "interrupted")])
def test_crash_keeps_finished_cells(tmp_path: Path, exc: BaseException, status: str) -> None:
    exp = load_experiment(write_experiment(tmp_path))
    store = tmp_path / "store"
    with pytest.raises(type(exc)):
        run_experiment(exp, store, executor=_OneThenCrash(exc))
    assert query(store, "SELECT count(DISTINCT cell_id) FROM results")[1] == [(6,)]
    assert query(store, "SELECT status FROM runs")[1] == [(status,)]
    summary = run_experiment(exp, store, executor=SerialExecutor())
    assert (summary.cells_reused, summary.cells_run) == (6, 6)


def _no_sizes_experiment(tmp_path: Path, skip: bool) -> Path:
    """An experiment on a table whose actors have no known size, so that ``largest`` cannot run."""
    table = demo(n_queries=200)
    actors = dataclasses.replace(table.actors, params_b=np.full(len(table.actor_names), np.nan))
    save(dataclasses.replace(table, actors=actors), tmp_path / "nosizes")
    path = tmp_path / "exp.toml"
    path.write_text(f"""name = "nosizes"
routers = ["oracle", "largest"]
seeds = [0, 1]
protocols = ["full"]
[settings]
n_boot = 40
skip_inapplicable = {str(skip).lower()}
[[tables]]
path = "nosizes"
""", encoding="utf-8")
    return path


def test_inapplicable_router_is_skipped_when_asked(tmp_path: Path) -> None:
    path = _no_sizes_experiment(tmp_path, skip=True)
    store = tmp_path / "store"
    summary = run_experiment(load_experiment(path), store)
    assert summary.cells_skipped == 2
    cells = query(store, "SELECT router, status, note FROM cells ORDER BY router, seed")[1]
    assert [(r, s) for r, s, _ in cells] == [("largest", "skipped")] * 2 + [("oracle", "ok")] * 2
    assert "params_b" in cells[0][2]
    assert query(store, "SELECT count(*) FROM results WHERE router = 'largest'")[1] == [(0,)]
    assert run_experiment(load_experiment(path), store).cells_run == 0  # skipped cells are reused too


def test_inapplicable_router_error_names_the_cell(tmp_path: Path) -> None:
    path = _no_sizes_experiment(tmp_path, skip=False)
    with pytest.raises(UsageError, match=r"table 'nosizes', seed 0, protocol full: .*params_b"):
        run_experiment(load_experiment(path), tmp_path / "store")


@pytest.mark.slow
def test_local_processes_give_the_serial_rows(tmp_path: Path) -> None:
    from routerlab.execute import make_executor

    exp = load_experiment(write_experiment(tmp_path))
    run_experiment(exp, tmp_path / "serial", executor=SerialExecutor())
    ex = make_executor("local", workers=2)
    try:
        summary = run_experiment(exp, tmp_path / "local", executor=ex)
    finally:
        ex.close()
    assert summary.backend == "local"
    assert _rows(tmp_path / "local") == _rows(tmp_path / "serial")


@pytest.mark.slow
def test_dask_cluster_gives_the_serial_rows(tmp_path: Path) -> None:
    require_module("distributed", "pip install 'routerlab[distributed]'")
    from routerlab.execute import make_executor

    exp = load_experiment(write_experiment(tmp_path))
    run_experiment(exp, tmp_path / "serial", executor=SerialExecutor())
    ex = make_executor("dask", workers=2)  # a one-machine cluster listening on 127.0.0.1 only
    try:
        summary = run_experiment(exp, tmp_path / "dask", executor=ex)
    finally:
        ex.close()
    assert (summary.backend, summary.cells_run) == ("dask", 12)
    assert _rows(tmp_path / "dask") == _rows(tmp_path / "serial")


def test_voyager_protocol_and_settings_sweep(tmp_path: Path) -> None:
    path = tmp_path / "v.toml"
    path.write_text("""name = "v"
routers = ["best-single", "knn"]
seeds = [3]
protocols = [{ name = "voyager", rounds = 2 }]
[settings]
n_boot = [40, 50]
[[tables]]
path = "demo"
n_queries = 200
""", encoding="utf-8")
    store = tmp_path / "store"
    summary = run_experiment(load_experiment(path), store)
    assert (summary.cells_run, summary.tasks) == (4, 2)
    settings = query(store, "SELECT DISTINCT settings FROM cells ORDER BY settings")[1]
    assert [s[0] for s in settings] == ['{"encoder":"tfidf","n_boot":40,"rounds":2,"skip_inapplicable":false}',
                                        '{"encoder":"tfidf","n_boot":50,"rounds":2,"skip_inapplicable":false}']
    assert query(store, "SELECT DISTINCT protocol, seed FROM results")[1] == [("voyager", 3)]


def test_table_without_split_labels_is_refused_before_running(tmp_path: Path) -> None:
    table = demo(n_queries=100)
    queries = dataclasses.replace(table.queries, split=np.full(100, "", dtype=object))
    save(dataclasses.replace(table, queries=queries), tmp_path / "nosplit")
    path = tmp_path / "exp.toml"
    path.write_text('name = "n"\nrouters = ["knn"]\nseeds = [0]\nprotocols = ["full"]\n'
                    '[[tables]]\npath = "nosplit"\n', encoding="utf-8")
    with pytest.raises(UsageError, match=r"exp.toml: \[\[tables\]\]\[1\].split \(nosplit\): .*random split"):
        run_experiment(load_experiment(path), tmp_path / "store")
    assert not (tmp_path / "store").exists()  # refused before the store was created
