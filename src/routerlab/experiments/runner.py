"""Run an experiment: expand it into cells, skip the cells the store already holds, run the rest through an
executor, and store each finished cell at once.

A cell is table x protocol x router x seed x settings; its id is the sha256 of its canonical JSON, the table's
content hash and the routerlab version, so a rerun (or another experiment naming the same cell) reuses it and a
changed table or version does not. Cells are grouped into tasks of one table x seed x settings: a task
splits and encodes the table once and runs every protocol with the routers still missing, so featurization is
never redone per router, while the store keeps one row per router and metric. Tables are loaded once, in the
driver, and handed to the executor as its ``shared`` input (sent to each worker once, not per task).
"""

from __future__ import annotations

import hashlib
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from routerlab.errors import RouterlabError, UsageError
from routerlab.execute.base import Executor
from routerlab.experiments.schema import Experiment, ProtocolSpec, TableSpec, canonical
from routerlab.experiments.store import CellRecord, Outcome, ResultStore, check_store_dir


@dataclass(frozen=True)
class Cell:
    """One table x protocol x router x seed x settings of an experiment, with its deterministic id."""

    cell_id: str
    table: str
    data_hash: str
    split: str
    protocol: ProtocolSpec
    router: str
    seed: int
    settings: dict[str, Any]

    @property
    def settings_json(self) -> str:
        """The settings this cell ran with, protocol options included, as canonical JSON (the store's column)."""
        return canonical({**self.settings, **self.protocol.options})


def cell_id(table: TableSpec, data_hash: str, protocol: ProtocolSpec, router: str, seed: int,
            settings: dict[str, Any], version: str) -> str:
    """sha256 of the cell's canonical JSON (table name and split, protocol and its options, router, seed,
    settings) + the table's content hash + the routerlab version."""
    ident = {"table": table.name, "split": table.split, "protocol": protocol.name, "options": protocol.options,
             "router": router, "seed": seed, "settings": settings}
    h = hashlib.sha256()
    for part in (canonical(ident), data_hash, version):
        h.update(part.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


def expand(exp: Experiment, hashes: dict[str, str], version: str) -> list[Cell]:
    """Every cell of ``exp`` in a fixed order (table, settings, seed, protocol, router); ``hashes`` maps a
    table name to its content hash."""
    cells = []
    for t in exp.tables:
        for settings in exp.settings_grid:
            for seed in exp.seeds:
                for p in exp.protocols:
                    for r in exp.routers:
                        cid = cell_id(t, hashes[t.name], p, r, seed, settings, version)
                        cells.append(Cell(cid, t.name, hashes[t.name], t.split, p, r, seed, dict(settings)))
    return cells


@dataclass(frozen=True)
class Task:
    """What a worker runs: one table x seed x settings, every protocol with the routers it still needs
    (``runs``: (protocol, routers, their cell ids))."""

    table: str
    split: str
    seed: int
    settings: dict[str, Any]
    runs: tuple[tuple[ProtocolSpec, tuple[str, ...], tuple[str, ...]], ...]

    @property
    def label(self) -> str:
        n = sum(len(r) for _, r, _ in self.runs)
        return f"{self.table} seed {self.seed} {canonical(self.settings)} ({n} cells)"


def plan(cells: list[Cell]) -> list[Task]:
    """Group the cells to run into tasks of one table x seed x settings (see the module docstring)."""
    groups: dict[tuple[str, int, str], dict[str, list[Cell]]] = {}
    for c in cells:
        key = (c.table, c.seed, canonical(c.settings))
        groups.setdefault(key, {}).setdefault(canonical([c.protocol.name, c.protocol.options]), []).append(c)
    tasks = []
    for by_protocol in groups.values():
        first = next(iter(by_protocol.values()))[0]
        runs = tuple((cs[0].protocol, tuple(c.router for c in cs), tuple(c.cell_id for c in cs))
                     for cs in by_protocol.values())
        tasks.append(Task(first.table, first.split, first.seed, dict(first.settings), runs))
    return tasks


def _num(x: Any) -> float | None:
    v = float(x)
    return v if math.isfinite(v) else None


def run_task(shared: dict[str, Any], task: Task) -> list[Outcome]:
    """The executor's task function: split and encode the table once, then every protocol of the task.

    Module-level (picklable by reference); deterministic in the task alone, so every executor gives the
    same outcomes. A router or protocol error names the cell's table, protocol and seed."""
    from routerlab.data.splits import make_split
    from routerlab.protocols.full import evaluate, featurize

    table = shared[task.table]
    encoder = task.settings["encoder"]
    where = f"table {task.table!r}, seed {task.seed}"
    try:
        sp = make_split(table, task.split, task.seed)
        train, test = sp.apply(table)
        features = featurize(train, test, encoder)
    except RouterlabError as exc:
        raise UsageError(f"{where}: {exc}") from None
    common: dict[str, Any] = {"split": sp, "encoder": encoder, "seed": task.seed, "n_boot": task.settings["n_boot"],
                              "features": features, "skip_inapplicable": task.settings["skip_inapplicable"],
                              "compare_to": None}
    out: list[Outcome] = []
    for protocol, routers, ids in task.runs:
        try:
            if protocol.name == "full":
                ev = evaluate(table, list(routers), **common)
            elif protocol.name == "cold-start":
                from routerlab.protocols.partial import cold_start

                ev = cold_start(table, list(routers), logging=protocol.options.get("logging", "uniform"), **common)
            else:
                from routerlab.protocols.partial import voyager

                ev = voyager(table, list(routers), rounds=protocol.options.get("rounds", 5),
                             order=protocol.options.get("order", "given"), **common)
        except RouterlabError as exc:
            raise UsageError(f"{where}, protocol {protocol.label}: {exc}") from None
        by_spec = {r.spec: r for r in ev.results}
        skipped: dict[str, str] = {str(k): str(v) for k, v in dict(ev.extra.get("skipped", {})).items()}
        n_train = int(ev.split.get("n_train", 0) or 0)
        n_test = int(ev.split.get("n_test", 0) or 0) - int(ev.excluded_test_queries)
        for router, cid in zip(routers, ids, strict=True):
            res = by_spec.get(router)
            if res is None:
                out.append(Outcome(cid, "skipped", skipped.get(router, "not applicable to this table or protocol"),
                                   n_train, n_test, 0.0, ()))
                continue
            metrics = []
            for name, value in res.metrics.items():
                lo, hi = res.ci.get(name, (math.nan, math.nan))
                metrics.append((name, _num(value), _num(lo), _num(hi)))
            out.append(Outcome(cid, "ok", "", n_train, n_test, float(res.fit_seconds), tuple(metrics)))
    return out


@dataclass
class RunSummary:
    """What a run did: its id, the cells (total, reused, run), rows written, seconds, backend."""

    run_id: str
    experiment: str
    store: Path
    backend: str
    workers: int
    cells_total: int
    cells_reused: int
    cells_run: int
    cells_skipped: int
    rows_written: int
    tasks: int
    seconds: float
    cell_ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "experiment": self.experiment, "store": str(self.store),
                "backend": self.backend, "workers": self.workers, "cells_total": self.cells_total,
                "cells_reused": self.cells_reused, "cells_run": self.cells_run, "cells_skipped": self.cells_skipped,
                "rows_written": self.rows_written, "tasks": self.tasks, "seconds": round(self.seconds, 3)}


def load_tables(exp: Experiment) -> dict[str, Any]:
    """Every table of the experiment, loaded once in the driver (a bad table directory is one error line
    naming the experiment file and the table)."""
    from routerlab.data.splits import make_split
    from routerlab.progress import task

    out: dict[str, Any] = {}
    for i, t in enumerate(exp.tables, start=1):
        with task(f"run: loading table {t.name}"):
            try:
                out[t.name] = t.load()
            except RouterlabError as exc:
                raise UsageError(f"{exp.source}: [[tables]][{i}] ({t.name}): {exc}") from None
        try:  # a table without split labels under split = "given" fails here, not in a worker
            make_split(out[t.name], t.split, exp.seeds[0])
        except RouterlabError as exc:
            raise UsageError(f"{exp.source}: [[tables]][{i}].split ({t.name}): {exc}") from None
    return out


def run_experiment(exp: Experiment, store_dir: Path, *, executor: Executor | Callable[[], Executor] | None = None,
                   on_reuse: Callable[[int, int], None] | None = None) -> RunSummary:
    """Run every cell of ``exp`` the store in ``store_dir`` does not hold yet, through ``executor`` (this
    process when None), writing each finished cell at once. ``on_reuse(reused, total)`` is called before
    any cell runs (the CLI prints "N of M cells reused").

    ``executor`` may be a function that makes one: it is called only when some cell must run (a rerun that
    reuses everything starts no worker or cluster), and the executor it made is closed at the end."""
    from routerlab._version import __version__
    from routerlab.execute.base import SerialExecutor
    from routerlab.progress import track

    started = time.perf_counter()
    check_store_dir(store_dir)
    tables = load_tables(exp)
    hashes = {name: t.content_hash for name, t in tables.items()}
    store = ResultStore(store_dir)
    cells = expand(exp, hashes, __version__)
    done = store.finished([c.cell_id for c in cells])
    todo = [c for c in cells if c.cell_id not in done]
    if on_reuse is not None:
        on_reuse(len(cells) - len(todo), len(cells))
    tasks = plan(todo)
    made = executor is not None and not isinstance(executor, Executor)
    if executor is None or (made and not tasks):
        ex: Executor = SerialExecutor()
    elif isinstance(executor, Executor):
        ex = executor
    else:
        ex = executor()
    # a rerun that reuses every cell starts no executor: the run records backend "none"
    backend, n_workers = ("none", 0) if made and not tasks else (ex.name, ex.workers)
    run_id = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"
    store.start_run(run_id, experiment=exp.name, file=str(exp.source), file_hash=exp.file_hash,
                    backend=backend, workers=n_workers, cells_total=len(cells),
                    cells_reused=len(cells) - len(todo), version=__version__)
    by_id = {c.cell_id: c for c in todo}
    rows = skipped = 0
    status = "failed"
    try:
        needed = {t.table for t in tasks}
        shared = {name: tables[name] for name in needed}
        results = ex.run(run_task, tasks, shared=shared) if tasks else iter(())
        for _, outcomes in track(results, "run", total=len(tasks), unit="task",
                                 label=lambda pair: tasks[pair[0]].label):
            records = []
            for o in outcomes:
                c = by_id[o.cell_id]
                records.append(CellRecord(
                    table_name=c.table, data_hash=c.data_hash, split=c.split, protocol=c.protocol.name,
                    router=c.router, seed=c.seed, settings=c.settings_json, outcome=o))
                rows += len(o.metrics)
                skipped += o.status != "ok"
            store.write_cells(run_id, exp.name, __version__, records)
        status = "finished"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        store.finish_run(run_id, status)
        if made and tasks:
            ex.close()
    return RunSummary(run_id=run_id, experiment=exp.name, store=store.path, backend=backend,
                      workers=n_workers, cells_total=len(cells), cells_reused=len(cells) - len(todo),
                      cells_run=len(todo), cells_skipped=skipped, rows_written=rows, tasks=len(tasks),
                      seconds=time.perf_counter() - started, cell_ids=[c.cell_id for c in cells])
