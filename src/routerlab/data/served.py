"""Served request logs and their feedback files, read as logged feedback (the data side of ``routerlab serve``).

``routerlab serve --log served.csv`` appends one row per answered request (columns :data:`LOG_COLUMNS`) with an
empty ``score``: the outcome arrives later, through ``POST /v1/feedback``, which appends one row per scored
request to the **feedback file** beside the log, ``served.feedback.csv`` (:func:`feedback_path_for`; columns
:data:`FEEDBACK_COLUMNS`: ``query_id``, ``score`` in [0, 1], ``metadata`` (a JSON object, or empty) and
``created``). Both files are append-only; a record cut short by a crash (no final newline) is skipped here and cut
off by the server when it opens the file again.

:func:`read_served_log` joins the two into :class:`~routerlab.data.logs.Logs` (what ``routerlab ope`` and routers
trained on ``--train-logs`` read; :func:`routerlab.data.logs.read_logs` calls it for any file with the request-log
header). Which rows are kept, and why (:class:`ServedCounts` counts each kind left out):

- a row's score is the feedback file's score for its query id, else the row's own ``score`` cell (a log written
  by ``attach_feedback`` carries it); a row with neither is left out (``unscored``). That is unbiased only when
  whether feedback arrives does not depend on the actor chosen;
- ``forced`` rows (the client named the actor: propensity 1 for it, 0 for every other) are left out unless
  ``keep_forced`` (or the log itself scores them: ``attach_feedback(keep_forced=True)`` kept them on purpose):
  a router that would choose another actor there has no support;
- ``aborted`` rows (the client left, or the deadline passed, after the decision) are kept when they have a score
  (feedback may well say the user gave up: score 0), with their latency and output tokens unknown (the answer
  never ended: the time to the abort is not the actor's latency, so a log holding one makes OPE's latency
  estimate "not estimable" rather than biased low); without a score they are left out and counted
  (``aborted_unscored``), or scored ``aborted_score`` when given (e.g. 0: abandonment counts as a failure,
  the honest choice when the actor may cause the abandonment);
- ``latency_s`` is the latency measured for that request, also for a cached answer (``cached=1``); the
  ``original_latency_s`` of a cached answer (its first measurement) is never read.

This module is the data layer: it does not import :mod:`routerlab.serve`; the server's writers use its column
names and its record parser.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from routerlab.data._files import allow_long_csv_fields
from routerlab.errors import DataError, UsageError

if TYPE_CHECKING:
    from routerlab.data.logs import Logs
    from routerlab.data.longformat.rows import LongRows
    from routerlab.data.table import RoutingTable

LOG_COLUMNS: tuple[str, ...] = ("query_id", "text", "dataset", "split", "actor", "score", "propensity",
                                "tokens_in", "tokens_out", "latency_s", "mode", "cached", "original_latency_s",
                                "status", "created")
"""The columns of a request log, in file order: the long format's log columns, then ``mode``, ``cached``,
``original_latency_s``, ``status`` and ``created`` (extra columns that readers of the long format ignore)."""

OLD_LOG_COLUMNS: tuple[str, ...] = ("query_id", "text", "dataset", "split", "actor", "score", "propensity",
                                    "tokens_in", "tokens_out", "latency_s", "mode", "cached", "created")
"""The columns of a log written before ``original_latency_s`` and ``status`` existed: still read (every row
answered, latencies as logged), never appended to."""

FEEDBACK_COLUMNS: tuple[str, ...] = ("query_id", "score", "metadata", "created")
"""The columns of a feedback file, in file order."""

FEEDBACK_SUFFIX = ".feedback.csv"
"""``served.csv`` -> ``served.feedback.csv``."""


def feedback_path_for(log: str | Path) -> Path:
    """The feedback file beside the request log ``log``: ``<stem>.feedback.csv`` in the same folder."""
    p = Path(log)
    return p.with_name(p.stem + FEEDBACK_SUFFIX)


def csv_records(data: bytes) -> Iterator[tuple[list[str], int, bool]]:
    """Each CSV record of ``data`` with the byte offset just after it and whether it ended with a newline (a
    record without one is the cut-off tail of an interrupted write); an unterminated quote at the end stops it."""
    pieces = data.split(b"\n")
    lines = [p + b"\n" for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    consumed = 0
    last_complete = True

    def feed() -> Iterator[str]:
        nonlocal consumed, last_complete
        for line in lines:
            consumed += len(line)
            last_complete = line.endswith(b"\n")
            yield line.decode("utf-8", errors="replace")

    allow_long_csv_fields()  # else a row whose text is over 128 KB would read as a cut-off tail and be dropped
    reader = csv.reader(feed())
    try:
        for rec in reader:
            yield rec, consumed, last_complete
    except csv.Error:  # an unterminated quote at the end: the tail is cut off
        return


def encode_csv_row(fields: Sequence[str]) -> bytes:
    """One CSV record as UTF-8 bytes ending in a newline (a field's own newlines stay inside its quotes)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(list(fields))
    return buf.getvalue().encode("utf-8")


def is_served_log(path: str | Path) -> bool:
    """Whether ``path`` is a CSV file whose first record is the request-log header (this or the earlier layout)."""
    p = Path(path)
    if p.suffix.lower() != ".csv" or not p.is_file():
        return False
    try:
        with p.open("rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    first = next(csv_records(head.split(b"\n", 1)[0] + b"\n"), None)
    return first is not None and tuple(first[0]) in (LOG_COLUMNS, OLD_LOG_COLUMNS)


# ------------------------------------------------------------------------------------------------ feedback file
@dataclass(frozen=True)
class FeedbackEntry:
    """One outcome of a served request: its ``score`` in [0, 1], the client's ``metadata`` (a JSON object) and
    when it arrived (``created``, UTC ISO 8601)."""

    query_id: str
    score: float
    metadata: dict[str, Any] | None
    created: str

    def row(self) -> list[str]:
        meta = "" if self.metadata is None else json.dumps(self.metadata, ensure_ascii=False, sort_keys=True,
                                                           separators=(",", ":"))
        return [self.query_id, repr(float(self.score)), meta, self.created]


def check_score(value: float, what: str = "score") -> float:
    """A finite score in [0, 1] (a UsageError naming ``what`` otherwise)."""
    v = float(value)
    if not (math.isfinite(v) and 0.0 <= v <= 1.0):
        raise UsageError(f"{what} must be a finite number in [0, 1], got {value!r}")
    return v


def parse_feedback(data: bytes, path: Path | None = None) -> tuple[dict[str, FeedbackEntry], int]:
    """(query id -> entry, byte offset after the last complete record) of a feedback file's bytes. A bad header,
    a bad score or an id scored twice with different scores is a DataError naming the row; the same score twice
    is kept once; an incomplete last record is skipped."""
    out: dict[str, FeedbackEntry] = {}
    records = csv_records(data)
    first = next(records, None)
    if first is None:
        return out, 0
    if not first[2]:
        return out, 0  # a header cut off by a crash: nothing was scored yet
    if tuple(first[0]) != FEEDBACK_COLUMNS:
        raise DataError(f"is not a routerlab feedback file (its columns should be {','.join(FEEDBACK_COLUMNS)})",
                        file=path)
    end = first[1]
    for i, (rec, offset, complete) in enumerate(records, start=2):
        if not complete:
            break
        end = offset
        if not rec:
            continue
        if len(rec) != len(FEEDBACK_COLUMNS):
            raise DataError(f"has {len(rec)} fields, expected {len(FEEDBACK_COLUMNS)}", file=path, row=i)
        qid, raw, meta, created = rec
        try:
            score = check_score(float(raw))
        except (ValueError, UsageError):
            raise DataError(f"score {raw!r} is not a number in [0, 1]", file=path, row=i, field="score") from None
        metadata: dict[str, Any] | None = None
        if meta:
            try:
                metadata = json.loads(meta)
            except ValueError:
                raise DataError("metadata is not JSON", file=path, row=i, field="metadata") from None
        old = out.get(qid)
        if old is not None:
            if old.score != score:
                raise DataError(f"query {qid!r} is scored twice, {old.score!r} and {score!r}", file=path, row=i,
                                field="score")
            continue
        out[qid] = FeedbackEntry(qid, score, metadata, created)
    return out, end


def read_feedback(path: str | Path) -> dict[str, FeedbackEntry]:
    """The entries of the feedback file ``path`` (see :func:`parse_feedback`); a missing file is empty."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UsageError(f"{p}: cannot read the feedback file ({exc.strerror})") from None
    return parse_feedback(data, p)[0]


# ------------------------------------------------------------------------------------------------ the join
@dataclass(frozen=True)
class ServedCounts:
    """What :func:`read_served_log` kept and left out: ``rows`` in the log(s); ``kept``; ``scored_by_feedback``
    (kept rows scored from the feedback file); left out: ``unscored`` (answered rows without a score),
    ``forced``, ``aborted_unscored``; ``aborted_kept`` (aborted rows kept with a score); ``unmatched`` (feedback
    whose query id no row holds)."""

    rows: int
    kept: int
    scored_by_feedback: int
    unscored: int
    forced: int
    aborted_kept: int
    aborted_unscored: int
    unmatched: int

    def to_dict(self) -> dict[str, int]:
        return {k: int(getattr(self, k)) for k in self.__dataclass_fields__}

    def describe(self) -> str:
        """One line: what was kept and what was left out."""
        left = [f"{n} {what}" for n, what in ((self.unscored, "without feedback"), (self.forced, "forced"),
                                              (self.aborted_unscored, "aborted without feedback")) if n]
        extra = f"; {self.aborted_kept} aborted kept with their feedback" if self.aborted_kept else ""
        return (f"{self.kept} of {self.rows} served rows kept" + (f" (left out: {', '.join(left)})" if left else "")
                + extra)


def _status_columns(path: Path) -> tuple[list[str], list[str], list[str]]:
    """(query_id, mode, status) of every complete record of the request log ``path``, in file order."""
    data = path.read_bytes()
    records = csv_records(data)
    first = next(records, None)
    if first is None or tuple(first[0]) not in (LOG_COLUMNS, OLD_LOG_COLUMNS):
        raise DataError(f"is not a routerlab serve log (its columns should be {','.join(LOG_COLUMNS)})", file=path)
    columns = tuple(first[0])
    at = {c: i for i, c in enumerate(columns)}
    ids, modes, statuses = [], [], []
    for rec, _, complete in records:
        if not complete:
            break
        if not rec:
            continue
        if len(rec) != len(columns):
            raise DataError(f"a record has {len(rec)} fields, expected {len(columns)}", file=path)
        ids.append(rec[0])
        modes.append(rec[at["mode"]])
        statuses.append(rec[at["status"]] if "status" in at else "answered")
    return ids, modes, statuses


def served_rows(log_path: str | Path | Sequence[str | Path], *, feedback: str | Path | None = None,
                keep_forced: bool = False, aborted_score: float | None = None) -> tuple[LongRows, ServedCounts]:
    """(the kept rows as :class:`~routerlab.data.longformat.rows.LongRows`, scores filled in; the counts) of the
    request log(s) joined with their feedback (see the module docstring). ``feedback`` names the feedback file
    of a single log (default: the one beside it)."""
    from routerlab.data.longformat.rows import LongRows, read_rows

    paths = [Path(log_path)] if isinstance(log_path, str | Path) else [Path(p) for p in log_path]
    if not paths:
        raise UsageError("no request log given")
    if feedback is not None and len(paths) != 1:
        raise UsageError("a feedback file goes with one request log; give one log, or leave the feedback files "
                         "beside their logs")
    if aborted_score is not None:
        aborted_score = check_score(aborted_score, "aborted_score")
    for p in paths:
        if not p.is_file():
            raise UsageError(f"{p}: no such request log")
    rows = read_rows(paths)
    if len(rows) == 0:
        raise DataError("holds no served request", file=paths[0])
    ids: list[str] = []
    modes: list[str] = []
    statuses: list[str] = []
    scores: dict[str, float] = {}
    n_feedback = 0
    for p in paths:
        file_ids, file_modes, file_statuses = _status_columns(p)
        ids += file_ids
        modes += file_modes
        statuses += file_statuses
        entries = read_feedback(feedback if feedback is not None else feedback_path_for(p))
        n_feedback += len(entries)
        scores.update({q: e.score for q, e in entries.items()})
    if len(ids) != len(rows) or list(rows.strings["query_id"].astype(str)) != ids:
        raise DataError("its rows could not be read consistently (a record cut short? the server cuts it off when "
                        "it opens the log again)", file=paths[0])
    logged_score = rows.numbers.get("score", np.full(len(rows), np.nan))
    score = np.array([scores.get(q, np.nan) for q in ids], dtype=np.float64)
    from_feedback = ~np.isnan(score)
    both = from_feedback & ~np.isnan(logged_score) & (score != logged_score)
    if both.any():
        i = int(np.flatnonzero(both)[0])
        raise rows.error(i, f"query {ids[i]!r} has score {logged_score[i]!r} in the log and {score[i]!r} in its "
                            "feedback file", "score")
    score = np.where(from_feedback, score, logged_score)
    forced = np.array([m == "forced" for m in modes])
    aborted = np.array([s == "aborted" for s in statuses])
    if aborted_score is not None:
        score = np.where(aborted & np.isnan(score), aborted_score, score)
    has = ~np.isnan(score)
    # a forced row scored in the log itself was kept on purpose (attach_feedback(keep_forced=True) wrote it)
    eligible = ~forced | keep_forced | ~np.isnan(logged_score)
    keep = has & eligible
    counts = ServedCounts(
        rows=len(ids), kept=int(keep.sum()),
        scored_by_feedback=int((keep & from_feedback).sum()),
        unscored=int((~has & ~aborted & eligible).sum()),
        forced=int((~eligible).sum()),
        aborted_kept=int((keep & aborted).sum()),
        aborted_unscored=int((~has & aborted & eligible).sum()),
        unmatched=len(set(scores) - set(ids)) if n_feedback else 0)
    if not keep.any():
        raise UsageError(f"{paths[0]}: no row of the request log has feedback ({counts.describe()}); send scores "
                         f"with POST /v1/feedback (they go to {feedback_path_for(paths[0]).name})")
    idx = np.flatnonzero(keep)
    numbers = {k: v[idx].copy() for k, v in rows.numbers.items()}
    numbers["score"] = score[idx]
    was_aborted = aborted[idx]
    for key in ("latency_s", "tokens_out"):  # an aborted answer never ended: its latency and length are unknown
        if key in numbers:
            numbers[key][was_aborted] = np.nan
    kept = LongRows(files=rows.files, actors_files=rows.actors_files,
                      strings={k: v[idx] for k, v in rows.strings.items()}, numbers=numbers,
                      file=rows.file[idx], row=rows.row[idx], present=rows.present | {"score"})
    return kept, counts


def read_served_log(log_path: str | Path | Sequence[str | Path], table: RoutingTable | None = None, *,
                    feedback: str | Path | None = None, keep_forced: bool = False,
                    aborted_score: float | None = None) -> Logs:
    """The request log(s) of ``routerlab serve`` joined with their feedback, as logs (read against ``table``'s
    actors when given, as :func:`routerlab.data.logs.read_logs` does); what was left out is in
    ``logs.served`` (:class:`ServedCounts`). See the module docstring for the rules."""
    from routerlab.data.logs import logs_from_rows

    rows, counts = served_rows(log_path, feedback=feedback, keep_forced=keep_forced, aborted_score=aborted_score)
    return logs_from_rows(rows, table, served=counts)
