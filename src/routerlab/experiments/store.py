"""The results store: one DuckDB database, ``DIR/results.duckdb``, that every experiment run appends to.

Tables (the README's "Experiments as files" lists every column):

- ``results``: one row per metric of a finished cell (table x protocol x router x seed x settings), with its
  value and 95% bootstrap interval (SPEC 7) and what identifies the cell (``cell_id``, ``data_hash``,
  ``settings`` as canonical JSON, ``routerlab_version``).
- ``cells``: one row per finished cell (status ``ok`` or ``skipped`` with the reason), what a rerun checks to
  reuse it.
- ``runs``: one row per ``routerlab run`` (experiment name, file hash, backend, start and finish, status, wall
  ``seconds`` and ``peak_rss_mb``; ``cells_run`` counts the cells the run stored, so an interrupted run records what
  it kept, not what it planned).

Only the driver process writes (workers return rows); each cell is written in one transaction, so a crash
loses only the cells in flight. Queries go through a read-only connection with file access off, so a
``results query`` can neither change the store nor read or write other files.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from routerlab._atomic import probe_writable
from routerlab.errors import UsageError

DB_NAME = "results.duckdb"
DEFAULT_STORE = Path("routerlab-results")

RESULT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "VARCHAR"),
    ("cell_id", "VARCHAR"),
    ("experiment", "VARCHAR"),
    ("table_name", "VARCHAR"),
    ("data_hash", "VARCHAR"),
    ("split", "VARCHAR"),
    ("protocol", "VARCHAR"),
    ("router", "VARCHAR"),
    ("seed", "BIGINT"),
    ("settings", "VARCHAR"),
    ("metric", "VARCHAR"),
    ("slice", "VARCHAR"),
    ("value", "DOUBLE"),
    ("ci_low", "DOUBLE"),
    ("ci_high", "DOUBLE"),
    ("routerlab_version", "VARCHAR"),
    ("created_at", "TIMESTAMP"),
)
CELL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("cell_id", "VARCHAR"),
    ("run_id", "VARCHAR"),
    ("experiment", "VARCHAR"),
    ("table_name", "VARCHAR"),
    ("data_hash", "VARCHAR"),
    ("split", "VARCHAR"),
    ("protocol", "VARCHAR"),
    ("router", "VARCHAR"),
    ("seed", "BIGINT"),
    ("settings", "VARCHAR"),
    ("status", "VARCHAR"),
    ("note", "VARCHAR"),
    ("n_train", "BIGINT"),
    ("n_test", "BIGINT"),
    ("fit_seconds", "DOUBLE"),
    ("routerlab_version", "VARCHAR"),
    ("created_at", "TIMESTAMP"),
)
RUN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "VARCHAR"),
    ("experiment", "VARCHAR"),
    ("file", "VARCHAR"),
    ("file_hash", "VARCHAR"),
    ("backend", "VARCHAR"),
    ("workers", "INTEGER"),
    ("cells_total", "INTEGER"),
    ("cells_reused", "INTEGER"),
    ("cells_run", "INTEGER"),
    ("status", "VARCHAR"),
    ("started_at", "TIMESTAMP"),
    ("finished_at", "TIMESTAMP"),
    ("routerlab_version", "VARCHAR"),
    ("seconds", "DOUBLE"),
    ("peak_rss_mb", "DOUBLE"),
)


@dataclass(frozen=True)
class Outcome:
    """What a task returns for one cell: its metric records (router or actor set, metric, value, 95% interval,
    slice) or why it was skipped."""

    cell_id: str
    status: str
    note: str
    n_train: int
    n_test: int
    fit_seconds: float
    metrics: tuple[tuple[str, str, float | None, float | None, float | None, str], ...]
    peak_rss_mb: float | None = None
    """The peak resident memory of the worker process that ran the cell (its whole life so far), in MiB."""


@dataclass(frozen=True)
class CellRecord:
    """A finished cell as the driver stores it: what identifies it (its ``cells`` and ``results`` key columns)
    and the task's :class:`Outcome` (the ``cells`` row's status and sizes, one ``results`` row per metric)."""

    table_name: str
    data_hash: str
    split: str
    protocol: str
    router: str
    seed: int
    settings: str
    outcome: Outcome


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _create(name: str, columns: tuple[tuple[str, str], ...]) -> str:
    return f"CREATE TABLE IF NOT EXISTS {name} ({', '.join(f'{c} {t}' for c, t in columns)})"


def _duckdb() -> Any:
    import duckdb

    return duckdb


def check_store_dir(directory: Path) -> None:
    """Refuse, before any work, a store directory that cannot hold the database: a file in the way, a
    database path that is a directory, or no permission to write there. One UsageError naming it."""
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"--store {directory}: is an existing file, not a directory")
    db = directory / DB_NAME
    if db.is_dir():
        raise UsageError(f"--store {directory}: {db} is a directory, not a DuckDB database")
    probe = directory
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError(f"--store {directory}: cannot create a directory under {probe}, which is a file")
    if not probe_writable(probe):
        raise UsageError(f"--store {directory}: cannot write there ({probe} is not writable)")
    if db.exists() and not os.access(db, os.W_OK):
        raise UsageError(f"--store {directory}: {db} is not writable")


LOCK_WAIT_SECONDS = 30.0
"""How long a writer or reader waits for another process's hold on the database file before giving up."""


def _connect(path: Path, directory: Path, *, read_only: bool, wait: float = LOCK_WAIT_SECONDS) -> Any:
    """A DuckDB connection to ``path`` with file and network access off, waiting up to ``wait`` seconds while
    another process holds the file (DuckDB allows one writing process, and no reader beside it)."""
    duckdb = _duckdb()
    deadline = time.monotonic() + wait
    pause = 0.02
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only, config={"enable_external_access": False})
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise UsageError(f"--store {directory}: cannot open {path}: {_first_line(exc)}") from None
            if time.monotonic() >= deadline:
                raise UsageError(f"--store {directory}: {path} is held by another process (a run still writing?) "
                                 f"after waiting {wait:.0f} s") from None
            time.sleep(pause)
            pause = min(pause * 2, 0.5)
        except duckdb.Error as exc:
            raise UsageError(f"--store {directory}: {path} is not a DuckDB results store: "
                             f"{_first_line(exc)}") from None


class ResultStore:
    """The writer: creates ``DIR/results.duckdb`` with its three tables when needed. It holds the file only
    while it writes (a run's start, each task's cells, its end), so ``results query`` works during a run;
    another writer waits its turn."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / DB_NAME
        check_store_dir(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._open() as con:
            for name, cols in (("results", RESULT_COLUMNS), ("cells", CELL_COLUMNS), ("runs", RUN_COLUMNS)):
                con.execute(_create(name, cols))
                have = {r[0] for r in con.execute(f"DESCRIBE {name}").fetchall()}
                if name == "results" and "slice" not in have and "metric" in have:  # a store from before slices
                    con.execute("ALTER TABLE results ADD COLUMN slice VARCHAR DEFAULT ''")
                    have.add("slice")
                if name == "runs" and "run_id" in have:  # a store from before runs recorded time and memory
                    for col in ("seconds", "peak_rss_mb"):
                        if col not in have:
                            con.execute(f"ALTER TABLE runs ADD COLUMN {col} DOUBLE")
                            have.add(col)
                missing = [c for c, _ in cols if c not in have]
                if missing:
                    raise UsageError(f"--store {self.directory}: table {name} of {self.path} lacks columns "
                                     f"{', '.join(missing)}; it was not written by this routerlab")

    @contextmanager
    def _open(self) -> Iterator[Any]:
        con = _connect(self.path, self.directory, read_only=False)
        try:
            yield con
        except RuntimeError as exc:
            if "interrupted" in str(exc).lower():
                # DuckDB turns a Ctrl-C during any statement (a COMMIT too) into RuntimeError("Query interrupted")
                raise KeyboardInterrupt from None
            raise
        finally:
            con.close()

    def finished(self, cell_ids: Sequence[str]) -> set[str]:
        """The cells among ``cell_ids`` already in the store."""
        if not cell_ids:
            return set()
        with self._open() as con:
            rows = con.execute("SELECT DISTINCT cell_id FROM cells WHERE list_contains(?, cell_id)",
                               [list(cell_ids)]).fetchall()
        return {r[0] for r in rows}

    def start_run(self, run_id: str, *, experiment: str, file: str, file_hash: str, backend: str, workers: int,
                  cells_total: int, cells_reused: int, version: str) -> None:
        with self._open() as con:
            # cells_run counts the cells this run stored, as each is written (an interrupted run keeps its true
            # count, never the planned cells_total - cells_reused)
            con.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, 'running', ?, NULL, ?, NULL, NULL)",
                        [run_id, experiment, file, file_hash, backend, workers, cells_total, cells_reused, _now(),
                         version])

    def finish_run(self, run_id: str, status: str, seconds: float | None = None,
                   peak_rss_mb: float | None = None) -> None:
        """Mark a run finished (or failed, interrupted) with its wall time and the peak resident memory of the
        processes that ran it."""
        with self._open() as con:
            con.execute("UPDATE runs SET status = ?, finished_at = ?, seconds = ?, peak_rss_mb = ? WHERE run_id = ?",
                        [status, _now(), seconds, peak_rss_mb, run_id])

    def write_cells(self, run_id: str, experiment: str, version: str, cells: Sequence[CellRecord]) -> None:
        """Store finished cells, each (its ``cells`` row and every metric row) in its own transaction; a cell
        already stored (another run finished it meanwhile) is replaced, never doubled."""
        now = _now()
        with self._open() as con:
            for cell in cells:
                o = cell.outcome
                key = [cell.table_name, cell.data_hash, cell.split, cell.protocol, cell.router, cell.seed,
                       cell.settings]
                con.execute("BEGIN TRANSACTION")
                try:
                    con.execute("DELETE FROM results WHERE cell_id = ?", [o.cell_id])
                    con.execute("DELETE FROM cells WHERE cell_id = ?", [o.cell_id])
                    con.execute("INSERT INTO cells VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                [o.cell_id, run_id, experiment, *key, o.status, o.note, o.n_train,
                                 o.n_test, o.fit_seconds, version, now])
                    if o.metrics:
                        # by column name: a store from before the slice column holds it last
                        con.executemany(
                            f"INSERT INTO results ({', '.join(c for c, _ in RESULT_COLUMNS)}) VALUES "
                            f"({', '.join('?' * len(RESULT_COLUMNS))})",
                            [[run_id, o.cell_id, experiment, *key[:4], router, *key[5:], m, sl, _finite(v),
                              _finite(lo), _finite(hi), version, now] for router, m, v, lo, hi, sl in o.metrics])
                    con.execute("UPDATE runs SET cells_run = cells_run + 1 WHERE run_id = ?", [run_id])
                    con.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(Exception):  # an interrupted COMMIT may leave no transaction to undo
                        con.execute("ROLLBACK")
                    raise


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:400]


def open_read_only(directory: Path) -> Any:
    """A read-only DuckDB connection to ``DIR/results.duckdb`` with file and network access off."""
    path = Path(directory) / DB_NAME
    if not path.is_file():
        raise UsageError(f"--store {directory}: no results store there ({path} does not exist); "
                         "run 'routerlab run EXPERIMENT.toml' first")
    return _connect(path, Path(directory), read_only=True)


def query(directory: Path, sql: str, params: Sequence[Any] | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run ``sql`` read-only over the store; (column names, rows). A bad statement, or one that would change
    the store, is one UsageError carrying DuckDB's message."""
    empty = UsageError("results query: the SQL is empty; e.g. \"SELECT router, avg(value) FROM results "
                       "WHERE metric = 'mu_o' GROUP BY router\"")
    if not sql.strip():
        raise empty
    duckdb = _duckdb()
    con = open_read_only(directory)
    try:
        # DuckDB's own parser splits the statements (a ';' in a string literal or a comment is no separator)
        statements = con.extract_statements(sql)
        if not statements:
            raise empty
        if len(statements) > 1:
            raise UsageError(f"results query runs one SQL statement, got {len(statements)}: run them one at a time "
                             "(a single trailing ';' is fine)")
        cur = con.execute(sql, list(params) if params is not None else None)
        if cur.description is None:
            return [], []
        columns = [d[0] for d in cur.description]
        return columns, [tuple(r) for r in cur.fetchall()]
    except duckdb.Error as exc:
        raise UsageError(f"results query: {_first_line(exc)}") from None
    finally:
        con.close()


@dataclass(frozen=True)
class BoardRow:
    """One leaderboard line: a router on a table (name, content hash, split) under a protocol and settings,
    over its seeds."""

    table_name: str
    data_hash: str
    split: str
    protocol: str
    settings: str
    router: str
    seeds: int
    mean: float | None
    seed_min: float | None
    seed_max: float | None
    ci_low: float | None
    ci_high: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table_name, "data_hash": self.data_hash, "split": self.split,
                "protocol": self.protocol, "settings": self.settings,
                "router": self.router, "seeds": self.seeds, "mean": self.mean, "seed_min": self.seed_min,
                "seed_max": self.seed_max, "mean_ci_low": self.ci_low, "mean_ci_high": self.ci_high}


LEADERBOARD_SQL = """
SELECT table_name, data_hash, split, protocol, settings, router, count(DISTINCT seed) AS seeds, avg(value) AS mean,
       min(value) AS seed_min, max(value) AS seed_max, avg(ci_low) AS ci_low, avg(ci_high) AS ci_high
FROM results
WHERE metric = ? AND slice = '' {extra}
GROUP BY table_name, data_hash, split, protocol, settings, router
ORDER BY table_name, data_hash, split, protocol, settings, mean {order} NULLS LAST, router
"""


def leaderboard(directory: Path, metric: str, *, cell_ids: Sequence[str] | None = None,
                missing_ok: bool = False) -> list[BoardRow]:
    """Every router x table x protocol x settings of the store (or of ``cell_ids``), on the whole test set (slice
    ``''``): the mean of ``metric`` over seeds, its range over seeds, and the seeds' mean 95% interval bounds,
    best first by the metric's direction in the catalog (lowest first for a lower-is-better one such as
    mean_cost). A table is its name, content hash and split together, so rows of an edited table are never
    averaged with the old ones. A metric the store does not hold is an error, unless ``missing_ok`` (a run whose
    protocols report other metrics: no rows)."""
    from routerlab.metrics.catalog import all_metrics

    lower = any(m.name == metric and m.direction == "lower" for m in all_metrics())
    params: list[Any] = [metric]
    extra = ""
    if cell_ids is not None:
        extra = "AND list_contains(?, cell_id)"
        params.append(list(cell_ids))
    _, rows = query(directory, LEADERBOARD_SQL.format(extra=extra, order="ASC" if lower else "DESC"), params)
    if not rows:
        known = [r[0] for r in query(directory, "SELECT DISTINCT metric FROM results ORDER BY metric")[1]]
        if metric not in known and not missing_ok:
            raise UsageError(f"--metric {metric!r}: no such metric in the store"
                             + (f"; known: {', '.join(known)}" if known else " (it holds no results yet)"))
    return [BoardRow(*r) for r in rows]
