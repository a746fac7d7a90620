"""Logged feedback on disk (SPEC 1, observability "logged"): one row per logged query, in the long format.

A log row is what a deployment sees: the query, the one actor the logging policy chose, that actor's observed
outcome (score and, where known, tokens, latency, cost) and ``propensity``, the policy's probability of having
chosen that actor (what importance weighting divides by). Logs simulated from a full table may also carry
``reward`` columns of the logged actor (:data:`REWARD_COLUMNS`, the SPEC 5 per-query values from
:func:`routerlab.metrics.latency.latency_rewards`); they need the hidden full table (the other actors' outcomes
and latencies), which only a simulation has, so a real production log usually lacks them.

Files are the long format (:mod:`routerlab.data.longformat`): CSV, JSON lines or Parquet by extension, plus the
actors side-file ``<stem>.actors.<ext>`` that keeps every actor (also those never chosen) and its attributes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from routerlab.data.feedback import Feedback
from routerlab.data.longformat.actors import actors_path_for, read_actors
from routerlab.data.longformat.columns import PROPENSITY
from routerlab.data.longformat.rows import LongRows, read_rows
from routerlab.data.longformat.writer import write_long
from routerlab.data.served import read_served_log as read_served_log  # request log + feedback (routerlab serve)
from routerlab.data.table import MATRIX_FIELDS, Actors, Queries, RoutingTable
from routerlab.errors import DataError, UsageError

if TYPE_CHECKING:
    from routerlab.data.served import ServedCounts

REWARD_COLUMNS: tuple[str, ...] = ("acc_at_1", "acc_at_1_l", "dcg", "l_dcg")
"""Optional per-row reward columns of a log (the logged actor's SPEC 5 values), each in [0, 1]."""

FloatVector = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class Logs:
    """A log: ``feedback`` (logged: exactly one observed actor per query, with its propensity), optional
    ``rewards`` (name in :data:`REWARD_COLUMNS` -> (n,) values of the logged actor, NaN = unknown) and the
    logging ``policy`` spec when known (a simulation records it; a file does not carry it). Logs read from a
    request log of ``routerlab serve`` joined with its feedback say in ``served`` what was kept and left out."""

    feedback: Feedback
    rewards: dict[str, FloatVector] = field(default_factory=dict)
    policy: str | None = None
    served: ServedCounts | None = None

    def __post_init__(self) -> None:
        fb = self.feedback
        if fb.propensity is None:
            raise UsageError("logs need logged feedback: one observed actor per query with its propensity")
        table = fb.table
        counts = (~np.isnan(table.score)).sum(axis=1)
        if (counts != 1).any():
            i = int(np.flatnonzero(counts != 1)[0])
            raise UsageError(f"query {table.queries.ids[i]!r} of the log has no observed outcome; every logged "
                             "query carries the score of the actor it was routed to")
        n = table.n_queries
        clean: dict[str, FloatVector] = {}
        for key, values in self.rewards.items():
            if key not in REWARD_COLUMNS:
                raise UsageError(f"unknown reward column {key!r}; logs know {', '.join(REWARD_COLUMNS)}")
            arr = np.asarray(values, dtype=np.float64)
            if arr.shape != (n,):
                raise UsageError(f"reward column {key!r} has shape {arr.shape}, expected ({n},)")
            with np.errstate(invalid="ignore"):
                bad = (arr < 0) | (arr > 1) | np.isinf(arr)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise UsageError(f"reward {key} of query {table.queries.ids[i]!r} is {arr[i]!r}; it must be in [0, 1]")
            clean[key] = arr
        object.__setattr__(self, "rewards", clean)

    @property
    def table(self) -> RoutingTable:
        """The logged table: NaN everywhere but each query's logged cell."""
        return self.feedback.table

    @property
    def actor(self) -> npt.NDArray[np.intp]:
        """The logged actor of each query (index into the table's actors)."""
        return np.asarray(np.argmax(~np.isnan(self.feedback.table.score), axis=1), dtype=np.intp)

    @property
    def propensity(self) -> FloatVector:
        """The logging policy's probability of each logged actor."""
        assert self.feedback.propensity is not None  # checked in __post_init__
        return self.feedback.propensity

    @property
    def n(self) -> int:
        return self.feedback.table.n_queries

    def describe(self) -> dict[str, Any]:
        """Size, policy, per-actor share and the smallest propensity: what ``routerlab log`` prints."""
        m = self.table.n_actors
        share = np.bincount(self.actor, minlength=m) / max(self.n, 1)
        out: dict[str, Any] = {"n_logged": self.n, "policy": self.policy,
                               "shares": {a: float(s) for a, s in zip(self.table.actor_names, share, strict=True)},
                               "min_propensity": float(self.propensity.min()) if self.n else None,
                               "rewards": sorted(self.rewards)}
        if self.served is not None:
            out["served"] = self.served.to_dict()
        return out


def write_logs(logs: Logs, path: str | Path) -> tuple[Path, Path]:
    """Write ``logs`` to ``path`` in the long format (CSV, JSON lines or Parquet by extension; atomic), one row
    per logged query: query_id, actor, text, dataset, split, score, tokens/latency/cost where known,
    ``propensity`` and the reward columns; every actor and its attributes go to the side-file
    ``<stem>.actors.<ext>``. Returns (log file, side-file)."""
    table = logs.table
    n, m = table.n_queries, table.n_actors
    rows = np.arange(n)
    cols: dict[str, npt.NDArray[np.float64]] = {}
    for key, values in {PROPENSITY: logs.propensity, **logs.rewards}.items():
        mat = np.full((n, m), np.nan)
        mat[rows, logs.actor] = values
        cols[key] = mat
    return write_long(table, path, cell_columns=cols)


def read_logs(
    paths: str | Path | Sequence[str | Path],
    table: RoutingTable | None = None,
    *,
    columns: Mapping[str, str] | None = None,
    rename: str | Mapping[str, str] | None = None,
) -> Logs:
    """Read logs written by :func:`write_logs` or exported by a deployment (one row per query with a
    ``propensity`` column; other column names map with ``columns``/``rename`` as in :func:`read_long`).

    With ``table``: the actors are the table's, in its order (a logged actor not among them is an error), and a
    query whose id is in the table takes its text, dataset and split from it. Without: the actors come from the
    actors side-file (given among ``paths``, or found beside a single log file), then any others in order of
    first appearance. A query without text in the table or the log is an error (routers read the text).

    A request log of ``routerlab serve`` (a CSV with its header) is joined with the feedback file beside it
    (:func:`routerlab.data.served.read_served_log`: rows without feedback, forced rows and aborted rows without
    feedback are left out and counted in ``logs.served``).
    """
    from routerlab.data.served import FEEDBACK_SUFFIX, is_served_log

    given = [paths] if isinstance(paths, str | Path) else list(paths)
    for p in given:
        if str(p).lower().endswith(FEEDBACK_SUFFIX):
            log = str(p)[: -len(FEEDBACK_SUFFIX)] + ".csv"
            raise UsageError(f"{p}: is the feedback file of a request log; give the log ({log}): its feedback "
                             "is read from beside it")
    served = [is_served_log(p) for p in given]
    if any(served):
        if not all(served):
            which = ", ".join(str(p) for p, s in zip(given, served, strict=True) if s)
            raise UsageError("request logs of routerlab serve and other logs cannot be read together; give them "
                             f"apart (request logs: {which})")
        if columns or rename:
            raise UsageError("a request log of routerlab serve has its own columns; columns and rename do not apply")
        return read_served_log(given, table)
    rows = read_rows(given, extra=REWARD_COLUMNS, unit=REWARD_COLUMNS, columns=columns, rename=rename)
    if PROPENSITY not in rows.present:
        raise DataError(f"has no {PROPENSITY!r} column; logs need the logging policy's probability of each "
                        "logged actor (to read outcomes alone as a table, use 'routerlab import long')",
                        file=rows.files[0], field=PROPENSITY)
    if len(rows) == 0:
        raise DataError("holds no logged query", file=rows.files[0])
    return logs_from_rows(rows, table)


def logs_from_rows(rows: LongRows, table: RoutingTable | None = None, *,
                   served: ServedCounts | None = None) -> Logs:
    """:class:`Logs` of rows read by :func:`read_rows` (checked: one row per query, each with its score and
    propensity), against ``table``'s actors when given (see :func:`read_logs`)."""
    _check_rows(rows)
    actors = _actors(rows, table)
    names = [str(a) for a in actors.names]
    actor_idx = _positions(rows.strings["actor"], actors.names)
    if (actor_idx < 0).any():  # only with a table: without one every logged actor was added
        i = int(np.flatnonzero(actor_idx < 0)[0])
        raise rows.error(i, f"actor {rows.strings['actor'][i]!r} is not an actor of table "
                            f"{table.name if table is not None else ''!r} (its actors: {', '.join(names)})", "actor")
    queries = _queries(rows, table)
    n, m = len(rows), len(names)
    mats: dict[str, Any] = {}  # matrices by field name
    for key in MATRIX_FIELDS:
        if key in rows.numbers:
            mat = np.full((n, m), np.nan, dtype=np.float32)
            mat[np.arange(n), actor_idx] = rows.numbers[key]
            mats[key] = mat
    name = table.name if table is not None else rows.files[0].name.split(".")[0] or "logs"
    logged = RoutingTable(queries=queries, actors=actors, name=name,
                          meta={"source": [str(p) for p in rows.files], "format": "logs"}, **mats)
    rewards = {k: rows.numbers[k] for k in REWARD_COLUMNS if k in rows.numbers}
    return Logs(Feedback(logged, rows.numbers[PROPENSITY]), rewards, served=served)


def _check_rows(rows: LongRows) -> None:
    """One row per query, each with its score and its propensity."""
    for key, what in (("score", "the logged actor's observed outcome"),
                      (PROPENSITY, "the logging policy's probability of the logged actor")):
        values = rows.numbers.get(key)
        missing = np.ones(len(rows), dtype=bool) if values is None else np.isnan(values)
        if missing.any():
            i = int(np.flatnonzero(missing)[0])
            raise rows.error(i, f"{key} is empty; every log row needs {what}", key)
    ids = rows.strings["query_id"].astype(str)
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    again = np.flatnonzero(first[inverse] != np.arange(ids.size))
    if again.size:
        i = int(again[0])
        j = int(first[inverse[i]])
        raise rows.error(i, f"query {str(ids[i])!r} is logged twice ({rows.where(j)} and {rows.where(i)}); a log has "
                            "one row per query", "query_id")


def _actors(rows: LongRows, table: RoutingTable | None) -> Actors:
    """The table's actors; else the side-file's (given, or beside a single log file), then the log's others."""
    if table is not None:
        return table.actors
    side = list(rows.actors_files)
    if not side and len(rows.files) == 1 and actors_path_for(rows.files[0]).is_file():
        side = [actors_path_for(rows.files[0])]
    if len(side) > 1:
        raise UsageError(f"more than one actors side-file: {[str(p) for p in side]}")
    values, first = np.unique(rows.strings["actor"].astype(str), return_index=True)
    logged = [str(a) for a in values[np.argsort(first)]]  # in order of first appearance
    if not side:
        return Actors.create(logged)
    names, attrs, extra = read_actors(side[0])
    known = set(names)
    others = [a for a in logged if a not in known]
    pad = len(others)
    return Actors.create(
        [*names, *others],
        **{k: np.concatenate([v, np.full(pad, np.nan)]) for k, v in attrs.items()},
        extra={k: (np.concatenate([v, np.full(pad, np.nan)]) if v.dtype.kind == "f"
                   else np.concatenate([v.astype(object), np.full(pad, None, dtype=object)]))
               for k, v in extra.items()},
    )


def _queries(rows: LongRows, table: RoutingTable | None) -> Queries:
    """The logged queries in row order; text, dataset and split from ``table`` where the id is there."""
    ids = rows.strings["query_id"]
    attrs = {k: rows.strings[k].copy() for k in ("text", "dataset", "split")}
    if table is not None:
        where = _positions(ids, table.queries.ids)
        known = where >= 0
        for key in attrs:
            attrs[key][known] = getattr(table.queries, key)[where[known]]
    no_text = attrs["text"].astype(str) == ""
    if no_text.any():
        i = int(np.flatnonzero(no_text)[0])
        elsewhere = "" if table is None else f" and table {table.name!r} does not hold the query"
        raise rows.error(i, f"query {str(ids[i])!r} has no text in the log{elsewhere}; routers need the text", "text")
    return Queries.create(ids, text=attrs["text"], dataset=attrs["dataset"], split=attrs["split"])


def _positions(values: npt.NDArray[np.object_], keys: npt.NDArray[np.object_]) -> npt.NDArray[np.intp]:
    """Position of each of ``values`` in ``keys`` (unique strings), -1 where absent; sorted search, no Python loop."""
    k = keys.astype(str)
    v = values.astype(str)
    if k.size == 0:
        return np.full(v.shape, -1, dtype=np.intp)
    order = np.argsort(k, kind="stable")
    sorted_keys = k[order]
    at = np.minimum(np.searchsorted(sorted_keys, v), k.size - 1)
    return np.where(sorted_keys[at] == v, order[at], -1).astype(np.intp)
