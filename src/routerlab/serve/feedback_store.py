"""Feedback while serving: ``POST /v1/feedback`` stores an outcome for a logged request, durably, beside the log.

The store is the append-only CSV file ``<log stem>.feedback.csv`` beside the request log (``served.csv`` ->
``served.feedback.csv``; columns ``query_id, score, metadata, created``), read back by
:func:`routerlab.data.served.read_served_log` (so ``routerlab ope`` and ``--train-logs`` take the log as it is).
It is written like the request log: each record encoded whole, one ``os.write`` on a file opened ``O_APPEND``,
under a lock, then ``os.fsync`` before the client is answered; a record cut short by a power loss is cut off when
the store opens again (with a warning); an advisory lock (``flock``) keeps a second server out.

The rules (:meth:`FeedbackStore.submit`; the HTTP status in brackets):

- ``score`` is a finite number in [0, 1] [400 naming the field]; ``metadata``, when given, is a JSON object of at
  most :data:`MAX_METADATA_BYTES` bytes encoded [400];
- the query id must be a row of the request log [404]; a request still in flight (routed, not yet answered and
  logged) is a 409 ``query_not_answered``: the id will exist, so the client retries rather than gives up;
- feedback is write-once: the same score again is accepted and not written twice [200, ``recorded`` false; the
  first metadata stays]; a different score is a 409 ``feedback_conflict``;
- a ``forced`` row (the client named the actor) and an ``aborted`` row (the client left before the answer ended)
  take feedback like any other: the outcome is real (a user who gave up may well be scored 0). OPE leaves forced
  rows out, and keeps aborted rows with their feedback (docs/serve.md, "Feedback").

Listeners (``serve --learn``) are called after each newly recorded score, outside the lock.
"""

from __future__ import annotations

import json
import math
import os
import threading
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from routerlab.data.served import (
    FEEDBACK_COLUMNS,
    LOG_COLUMNS,
    OLD_LOG_COLUMNS,
    FeedbackEntry,
    csv_records,
    encode_csv_row,
    feedback_path_for,
    parse_feedback,
)
from routerlab.errors import UsageError
from routerlab.serve.log import RequestLog, open_append_locked

MAX_METADATA_BYTES = 4096
"""The largest ``metadata`` object a feedback record may carry, JSON-encoded (UTF-8 bytes)."""

MAX_QUERY_ID = 200
"""The longest query id accepted (as ``metadata.query_id`` of a chat request)."""


class FeedbackRejected(UsageError):
    """Feedback the store refuses: ``status`` is the HTTP status (400, 404 or 409), ``code`` and ``param`` the
    OpenAI-style error's fields."""

    def __init__(self, status: int, message: str, *, code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.param = param


@dataclass(frozen=True)
class ServedRow:
    """What the request log says about one served request: the routed text, the actor that answered, the
    propensity it had when the policy decided, ``mode`` (routed/forced), ``status`` (answered/aborted)."""

    query_id: str
    text: str
    dataset: str
    actor: str
    propensity: float
    mode: str
    status: str


@dataclass(frozen=True)
class ServedFeedback:
    """A newly recorded score with its log row: what a listener (``serve --learn``) receives."""

    row: ServedRow
    entry: FeedbackEntry


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def check_feedback(body: Any) -> tuple[str, float, dict[str, Any] | None]:
    """(query id, score, metadata) of a parsed ``/v1/feedback`` body; a :class:`FeedbackRejected` (400) naming
    the first bad field."""
    if not isinstance(body, dict):
        raise FeedbackRejected(400, "the request body must be a JSON object {query_id, score, metadata?}")
    unknown = sorted(set(body) - {"query_id", "score", "metadata"})
    if unknown:
        raise FeedbackRejected(400, f"unknown field {unknown[0]!r}; feedback has query_id, score and metadata",
                               param=unknown[0])
    qid = body.get("query_id")
    if qid is None:
        raise FeedbackRejected(400, "you must provide a query_id (the routerlab.query_id of the answer)",
                               param="query_id", code="missing_required_parameter")
    if not isinstance(qid, str) or not qid or len(qid) > MAX_QUERY_ID or any(c in qid for c in "\r\n"):
        raise FeedbackRejected(400, f"query_id must be a non-empty one-line string of at most {MAX_QUERY_ID} "
                               "characters", param="query_id")
    score = body.get("score")
    if score is None:
        raise FeedbackRejected(400, "you must provide a score, a number in [0, 1]", param="score",
                               code="missing_required_parameter")
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score) \
            or not 0 <= score <= 1:
        raise FeedbackRejected(400, f"score must be a finite number in [0, 1], got {json.dumps(score)[:40]}",
                               param="score")
    metadata = body.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise FeedbackRejected(400, "metadata must be a JSON object", param="metadata")
        size = len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        if size > MAX_METADATA_BYTES:
            raise FeedbackRejected(400, f"metadata is {size} bytes encoded; at most {MAX_METADATA_BYTES}",
                                   param="metadata")
    return qid, float(score), metadata


class FeedbackStore:
    """The feedback file of the request log ``log`` (a :class:`~routerlab.serve.log.RequestLog`, whose
    requests in flight it can tell apart from unknown ids, or a log path). Thread-safe; :meth:`close` releases
    the file. See the module docstring for the rules."""

    def __init__(self, log: RequestLog | str | Path) -> None:
        self.request_log = log if isinstance(log, RequestLog) else None
        self.log_path = log.path if isinstance(log, RequestLog) else Path(log)
        self.path = feedback_path_for(self.log_path)
        self._lock = threading.Lock()
        self._entries: dict[str, FeedbackEntry] = {}
        self._rows: dict[str, ServedRow] = {}
        self._log_offset = 0
        self._log_columns: tuple[str, ...] | None = None
        self._listeners: list[Callable[[ServedFeedback], None]] = []
        fd = open_append_locked(self.path, str(self.path), "the feedback file")
        self._fd: int | None = fd
        try:
            self._prepare()
            self._scan_log()
        except BaseException:
            os.close(fd)
            self._fd = None
            raise

    # -- opening -----------------------------------------------------------------------------
    def _prepare(self) -> None:
        data = self.path.read_bytes()
        header = encode_csv_row(FEEDBACK_COLUMNS)
        if header.startswith(data):  # new, or a header cut off by a crash
            if data:
                os.truncate(self.path, 0)
            self._write(header)
            return
        try:
            entries, end = parse_feedback(data, self.path)
        except Exception as exc:
            raise UsageError(f"{self.path}: cannot be appended to: {exc}") from None
        if end < len(data):
            os.truncate(self.path, end)
            assert self._fd is not None
            os.fsync(self._fd)
            warnings.warn(f"{self.path}: cut off an incomplete last record ({len(data) - end} bytes) left by an "
                          "interrupted write", stacklevel=3)
        self._entries = entries

    def _scan_log(self) -> None:
        """Read the request log's records appended since the last scan (complete records only)."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(self._log_offset)
                data = fh.read()
        except FileNotFoundError:
            return
        if not data:
            return
        end = 0
        for rec, offset, complete in csv_records(data):
            if not complete:
                break
            end = offset
            if self._log_columns is None:
                if tuple(rec) not in (LOG_COLUMNS, OLD_LOG_COLUMNS):
                    raise UsageError(f"{self.log_path}: is not a routerlab serve log; feedback needs one")
                self._log_columns = tuple(rec)
                continue
            if len(rec) != len(self._log_columns):
                continue
            at = dict(zip(self._log_columns, rec, strict=True))
            try:
                propensity = float(at["propensity"])
            except ValueError:
                continue
            self._rows[at["query_id"]] = ServedRow(at["query_id"], at["text"], at["dataset"], at["actor"],
                                                   propensity, at["mode"], at.get("status", "answered"))
        self._log_offset += end

    # -- feedback ------------------------------------------------------------------------------
    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)

    def _in_flight(self, query_id: str) -> bool:
        # the request log reserves a client-given id when the request is routed and logs it when answered; an id
        # it holds that the file does not is a request in flight (RequestLog keeps them in ``_ids``)
        held = getattr(self.request_log, "_ids", None)
        return held is not None and query_id in held

    def submit(self, query_id: str, score: float, metadata: Mapping[str, Any] | None = None
               ) -> tuple[FeedbackEntry, bool]:
        """Record ``score`` for the logged request ``query_id``: (the entry, whether it was newly written; False
        for a repeat of the same score). A :class:`FeedbackRejected` for an unknown id (404), a request in flight
        or a different score than the one recorded (409), a bad score or metadata (400)."""
        qid, value, meta = check_feedback({"query_id": query_id, "score": score,
                                           **({} if metadata is None else {"metadata": dict(metadata)})})
        with self._lock:
            if self._fd is None:
                raise UsageError(f"{self.path}: the feedback store is closed")
            old = self._entries.get(qid)
            if old is not None:
                if old.score == value:
                    return old, False
                raise FeedbackRejected(409, f"query {qid!r} already has score {old.score!r}; feedback is "
                                       f"recorded once, so {value!r} is refused", code="feedback_conflict",
                                       param="score")
            if qid not in self._rows:
                self._scan_log()
            row = self._rows.get(qid)
            if row is None:
                if self._in_flight(qid):
                    raise FeedbackRejected(409, f"query {qid!r} is not answered yet; send its feedback once the "
                                           "answer has ended", code="query_not_answered", param="query_id")
                raise FeedbackRejected(404, f"query {qid!r} is not in the request log {self.log_path.name}",
                                       code="query_not_found", param="query_id")
            entry = FeedbackEntry(qid, value, meta, _utc_now())
            self._write(encode_csv_row(entry.row()))
            self._entries[qid] = entry
            listeners = list(self._listeners)
        event = ServedFeedback(row, entry)
        for listener in listeners:
            listener(event)
        return entry, True

    def add_listener(self, listener: Callable[[ServedFeedback], None]) -> None:
        """Call ``listener`` after each newly recorded score (not for repeats)."""
        with self._lock:
            self._listeners.append(listener)

    def scored(self) -> list[ServedFeedback]:
        """Every recorded score whose request is in the log, with its row, in the order they were recorded."""
        with self._lock:
            if any(q not in self._rows for q in self._entries):
                self._scan_log()
            return [ServedFeedback(self._rows[q], e) for q, e in self._entries.items() if q in self._rows]

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> None:
        """Release the lock and close the file (idempotent)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    @property
    def closed(self) -> bool:
        return self._fd is None

    def __enter__(self) -> FeedbackStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
