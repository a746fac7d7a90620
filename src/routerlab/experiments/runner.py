"""Run an experiment: expand it into cells, skip the cells the store already holds, run the rest through an
executor, and store each finished cell at once.

A cell is table x protocol x router x seed x settings; its id is the sha256 of its canonical JSON, the table's
content hash and the routerlab version, so a rerun (or another experiment naming the same cell) reuses it and a
changed table or version does not. A protocol that takes no routers (``society``, ``scaling``) has one cell per
table x seed x settings, router ``""``; a cell's settings are only those its protocol reads, so sweeping the
encoder does not repeat a society cell. Cells are grouped into tasks of one table x seed x settings: a task
splits and encodes the table once (a :class:`~routerlab.protocols.base.RunContext` shared by its protocols)
and runs every protocol with the routers still missing, through the protocol layer's ``run`` as the CLI and
the audit do, while the store keeps one row per metric record (router, metric, slice). Tables are loaded once,
in the driver, and handed to the executor as its ``shared`` input (sent to each worker once, not per task).
"""

from __future__ import annotations

import hashlib
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from routerlab.errors import Interrupted, RouterlabError, UsageError
from routerlab.execute.base import Executor
from routerlab.experiments.schema import Experiment, ProtocolSpec, TableSpec, canonical
from routerlab.experiments.store import CellRecord, Outcome, ResultStore, check_store_dir
from routerlab.metrics.bootstrap import FewQueriesWarning, enough_queries, warn_few_queries


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
    table name to its content hash. A cell's settings are the experiment settings its protocol reads."""
    from routerlab.protocols.base import get_protocol

    cells: list[Cell] = []
    seen: set[str] = set()
    for t in exp.tables:
        for grid in exp.settings_grid:
            for seed in exp.seeds:
                for p in exp.protocols:
                    proto = get_protocol(p.name)
                    settings = {k: v for k, v in grid.items() if k in proto.Settings.names()}
                    if t.dev is not None and "dev" in proto.Settings.names() and "dev" not in p.options:
                        settings["dev"] = t.dev  # the table's development part (a protocol's own dev wins)
                    for r in (exp.routers if proto.uses_routers else [""]):
                        cid = cell_id(t, hashes[t.name], p, r, seed, settings, version)
                        if cid not in seen:
                            seen.add(cid)
                            cells.append(Cell(cid, t.name, hashes[t.name], t.split, p, r, seed, settings))
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


def protocol_settings(protocol: ProtocolSpec, split: str, settings: dict[str, Any]) -> Any:
    """The settings a cell's protocol runs with: its TOML options, the table's split, the experiment's settings
    it reads, and no paired comparison (a cell's numbers must not depend on the routers run beside it)."""
    from routerlab.protocols.base import get_protocol

    cls = get_protocol(protocol.name).Settings
    names = cls.names()
    injected = {"split": split, **settings, "compare_to": "none"}
    return cls.from_mapping({**{k: v for k, v in injected.items() if k in names}, **protocol.options})


def run_task(shared: dict[str, Any], task: Task) -> list[Outcome]:
    """The executor's task function: every protocol of the task through the protocol layer, sharing one
    :class:`RunContext` (the split's features encoded once per encoder).

    Module-level (picklable by reference); deterministic in the task alone, so every executor gives the
    same outcomes. A router or protocol error names the cell's table, protocol and seed."""
    from routerlab.protocols.base import RunContext, get_protocol

    table = shared[task.table]
    where = f"table {task.table!r}, seed {task.seed}"
    context = RunContext()
    out: list[Outcome] = []
    for protocol, routers, ids in task.runs:
        proto = get_protocol(protocol.name)
        try:
            settings = protocol_settings(protocol, task.split, task.settings)
            with warnings.catch_warnings():  # in a worker it would print once per worker: the driver warns instead
                warnings.simplefilter("ignore", FewQueriesWarning)
                result = proto.run(table, settings, task.seed, list(routers) if proto.uses_routers else [], context)
        except RouterlabError as exc:
            raise UsageError(f"{where}, protocol {protocol.label}: {exc}") from None
        fit = result.native.results if hasattr(result.native, "results") else []
        fit_seconds = {getattr(r, "spec", ""): float(getattr(r, "fit_seconds", 0.0)) for r in fit}
        for router, cid in zip(routers, ids, strict=True):
            if not proto.uses_routers:
                records = result.records
            else:
                records = [rec for rec in result.records if rec.router == router]
            if proto.uses_routers and (router in result.skipped or not records):
                note = result.skipped.get(router, "not applicable to this table or protocol")
                out.append(Outcome(cid, "skipped", note, result.n_train, result.n_test, 0.0, ()))
                continue
            rows = tuple((rec.router, rec.metric, rec.value, rec.ci_low, rec.ci_high, rec.slice) for rec in records)
            out.append(Outcome(cid, "ok", "", result.n_train, result.n_test, fit_seconds.get(router, 0.0), rows))
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
    peak_rss_mb: float | None = None
    hashes: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "experiment": self.experiment, "store": str(self.store),
                "backend": self.backend, "workers": self.workers, "cells_total": self.cells_total,
                "cells_reused": self.cells_reused, "cells_run": self.cells_run, "cells_skipped": self.cells_skipped,
                "rows_written": self.rows_written, "tasks": self.tasks, "seconds": round(self.seconds, 3),
                "peak_rss_mb": None if self.peak_rss_mb is None else round(self.peak_rss_mb, 1)}


def load_tables(exp: Experiment) -> dict[str, Any]:
    """Every table of the experiment, loaded once in the driver (a bad table directory is one error line
    naming the experiment file and the table)."""
    from routerlab.data.splits import make_split
    from routerlab.progress import task

    out: dict[str, Any] = {}
    for i, t in enumerate(exp.tables, start=1):
        what = "deriving" if t.derived_from else "importing" if t.source and t.source.kind == "import" else "loading"
        with task(f"run: {what} table {t.name}"):
            try:
                out[t.name] = t.load(out, exp.seeds[0])
            except RouterlabError as exc:
                raise UsageError(f"{exp.source}: [[tables]][{i}] ({t.name}): {exc}") from None
        try:  # a table without split labels under split = "given" fails here, not in a worker
            make_split(out[t.name], t.split, exp.seeds[0])
        except RouterlabError as exc:
            raise UsageError(f"{exp.source}: [[tables]][{i}].split ({t.name}): {exc}") from None
        if t.dev is not None:  # a fraction that leaves no development (or training) queries fails here too
            try:
                make_split(out[t.name], t.split, exp.seeds[0], dev=t.dev)
            except RouterlabError as exc:
                raise UsageError(f"{exp.source}: [[tables]][{i}].dev ({t.name}): {exc}") from None
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
    from routerlab.protocols.base import get_protocol

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
                evaluates = get_protocol(c.protocol.name).uses_routers  # society, scaling: no test queries
                if o.status == "ok" and evaluates and not enough_queries(o.n_test, warn=False):  # NULL intervals
                    warn_few_queries(f"only {o.n_test} evaluated test queries in table {c.table!r}")
                records.append(CellRecord(
                    table_name=c.table, data_hash=c.data_hash, split=c.split, protocol=c.protocol.name,
                    router=c.router, seed=c.seed, settings=c.settings_json, outcome=o))
                rows += len(o.metrics)
                skipped += o.status != "ok"
            store.write_cells(run_id, exp.name, __version__, records)
        status = "finished"
    except KeyboardInterrupt:
        status = "interrupted"
        stored = len(store.finished([c.cell_id for c in cells]))  # this run's finished cells and those reused
        raise Interrupted(f"{stored} of {len(cells)} cells stored in {store.path}; rerun the same command to "
                          "resume") from None
    finally:
        store.finish_run(run_id, status, time.perf_counter() - started, peak_rss_mb())
        if made and tasks:
            ex.close()
    return RunSummary(run_id=run_id, experiment=exp.name, store=store.path, backend=backend,
                      workers=n_workers, cells_total=len(cells), cells_reused=len(cells) - len(todo),
                      cells_run=len(todo), cells_skipped=skipped, rows_written=rows, tasks=len(tasks),
                      seconds=time.perf_counter() - started, cell_ids=[c.cell_id for c in cells],
                      peak_rss_mb=peak_rss_mb(), hashes=hashes)


def peak_rss_mb() -> float | None:
    """The peak resident memory, in MiB, of this process or of the largest worker process it waited for (local
    workers; a Dask cluster's workers are not counted); None where the platform does not tell."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    import sys

    kib = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return kib / (1024 * 1024 if sys.platform == "darwin" else 1024)
