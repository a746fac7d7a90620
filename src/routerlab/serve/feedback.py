"""Feedback for a request log: join scores that arrive after serving onto the log's rows.

``routerlab serve`` logs each request before anyone knows how good the answer was, so its ``score`` column is
empty, and :func:`routerlab.data.logs.read_logs` (hence ``routerlab ope`` and the cold-start routers) needs a
score on every row. :func:`attach_feedback` writes a scored copy of the log: the rows whose query id has a score
(a mapping ``query_id -> score`` or a CSV file with ``query_id`` and ``score`` columns), in log order.

Rows without a score are left out, as are ``forced`` rows (the client named the actor) unless asked for: a
forced row has propensity 1 for its actor and 0 for every other, so a router that would pick another actor on it
has no support there and importance weighting cannot count it. Dropping unscored rows is unbiased only when
whether feedback arrives does not depend on the actor chosen; the returned counts say how many were dropped.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from routerlab.data._files import allow_long_csv_fields
from routerlab.errors import DataError, UsageError
from routerlab.serve.log import LOG_COLUMNS, OLD_LOG_COLUMNS


@dataclass(frozen=True)
class FeedbackResult:
    """What :func:`attach_feedback` did: rows ``written``; rows left out for lack of a score
    (``unscored``) or because they were forced (``forced``); scores whose id the log lacks (``unmatched``)."""

    path: Path
    written: int
    unscored: int
    forced: int
    unmatched: int


def read_scores(path: str | Path) -> dict[str, float]:
    """``query_id -> score`` from a CSV file with those two columns (others ignored); a repeated id, an empty or
    non-numeric score, or one outside [0, 1] is an error naming the row."""
    p = Path(path)
    try:
        fh = p.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{p}: cannot read the scores ({exc.strerror})") from None
    with fh:
        reader = csv.DictReader(fh)
        fields = reader.fieldnames or []
        for col in ("query_id", "score"):
            if col not in fields:
                raise DataError(f"has no {col!r} column; feedback files have query_id and score", file=p)
        out: dict[str, float] = {}
        for i, row in enumerate(reader, start=2):
            qid, raw = row["query_id"] or "", (row["score"] or "").strip()
            try:
                value = float(raw)
            except ValueError:
                raise DataError(f"score {raw!r} is not a number", file=p, row=i, field="score") from None
            if qid in out:
                raise DataError(f"query {qid!r} is scored twice", file=p, row=i, field="query_id")
            out[qid] = _check_score(value, qid, p, i)
    return out


def _check_score(value: float, qid: str, file: Path | None = None, row: int | None = None) -> float:
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise DataError(f"score {value!r} of query {qid!r} must be in [0, 1]", file=file, row=row, field="score")
    return float(value)


def attach_feedback(log: str | Path, scores: Mapping[str, float] | str | Path, output: str | Path, *,
                    keep_forced: bool = False) -> FeedbackResult:
    """Write to ``output`` (a ``.csv`` path, atomically) the rows of the request log ``log`` that ``scores``
    scores, with their score filled in; see the module docstring for what is left out. The result reads with
    :func:`routerlab.data.logs.read_logs` and ``routerlab ope TABLE OUTPUT``."""
    from routerlab._atomic import atomic_write

    src, out = Path(log), Path(output)
    if out.suffix.lower() != ".csv":
        raise UsageError(f"{out}: the scored log is a CSV file; give a name ending in .csv")
    if out.resolve() == src.resolve():
        raise UsageError(f"{out}: write the scored log to a new file, not over the request log")
    table = dict(scores) if isinstance(scores, Mapping) else read_scores(scores)
    for qid, value in table.items():
        _check_score(float(value), str(qid))
    try:
        fh = src.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{src}: cannot read the request log ({exc.strerror})") from None
    kept: list[list[str]] = []
    seen: set[str] = set()
    unscored = forced = 0
    with fh:
        allow_long_csv_fields()
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None or tuple(header) not in (LOG_COLUMNS, OLD_LOG_COLUMNS):
            raise DataError(f"is not a routerlab serve log (its columns should be {','.join(LOG_COLUMNS)})",
                            file=src)
        columns = tuple(header)
        at = {c: i for i, c in enumerate(columns)}
        for row in reader:
            if len(row) != len(columns):
                raise DataError(f"has {len(row)} fields, expected {len(columns)}", file=src,
                                row=reader.line_num)
            qid = row[at["query_id"]]
            seen.add(qid)
            if row[at["mode"]] == "forced" and not keep_forced:
                forced += 1
                continue
            if qid not in table:
                unscored += 1
                continue
            row[at["score"]] = repr(float(table[qid]))
            kept.append(row)
    if not kept:
        raise UsageError(f"{src}: no row of the request log has a score ({unscored} unscored, {forced} forced "
                         "left out); nothing to write")

    def write(tmp: str) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(columns)
            w.writerows(kept)

    atomic_write(out, write)
    return FeedbackResult(out, len(kept), unscored, forced, sum(1 for q in table if q not in seen))
