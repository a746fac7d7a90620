"""Long format, steps: multi-step episodes read from one row per step (the ``steps`` importer).

A cell (query, actor) may hold an episode, the ordered steps an actor took on a task: model calls, tool calls
and environment steps. One row per step, in CSV/TSV, JSON lines (or a JSON array) or Parquet, columns in any
order, more ignored:

=============  ==============  ===================================================================
column         needed          meaning (times in seconds; every number finite and >= 0)
=============  ==============  ===================================================================
query_id       yes             the task's query id (integers are read as their decimal text)
actor          yes             the model or agent that ran the episode
step           yes             the step's number in its episode, an integer >= 0 (its order)
kind           yes             ``model`` (a model call), ``tool`` (a tool call) or ``env`` (environment)
score          yes (column)    the step's score in [0, 1]; empty = none. Each episode's last step
                               needs one: it is the episode's outcome
latency_s      model steps     a model call's wall time; on a model step an empty value is derived
                               from tokens_out, ttft_s and itl_s (the step's own, else the actor's
                               ttft_ms and itl_ms from an actors file); on tool/env steps 0 or empty
env_s          tool/env steps  the tool's or environment's time; on model steps 0 or empty
tokens_in      no              a model call's tokens read and written; empty or absent = unknown;
tokens_out     no              on tool/env steps 0 or empty
ttft_s         no              a model call's time to first token and inter-token latency; empty or
itl_s          no              absent = unknown; on tool/env steps 0 or empty
tool           no              the tool a tool step called (text); empty or absent = ""
=============  ==============  ===================================================================

A column that is absent reads as empty on every row. Each second of an episode is counted once: a model call's
time in ``latency_s``, a tool's or the environment's in ``env_s``, so that the episode's latency is the sum of
``latency_s + env_s`` over its steps. A JSON record may leave out a key (its value is empty); the first record of
a JSON file names ``query_id``, ``actor``, ``step`` and ``kind``.

Optional side-files: a queries file (``queries=PATH`` or an input named ``*.queries.<ext>``) with columns
``query_id`` (or ``id``), ``text``, ``dataset``, ``split`` and any others, kept as query metadata hidden from
routers unless named in ``visible``; every step's query must be in it, and its order is the table's. An actors
file (``actors=PATH`` or ``*.actors.<ext>``) as the long format reads it (``actor`` or ``name``, ``params_b``,
``ttft_ms``, ``itl_ms``, ``input_price``, ``output_price``): prices give the cells' cost.

Every bad input is one :class:`DataError` naming file, row and field (rows 1-based as the long format counts
them: CSV's header is row 1, JSON lines count lines, Parquet and JSON arrays count records).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from routerlab._words import plural, verb
from routerlab.data._files import expand_paths, load_json, warn
from routerlab.data.episodes import STEP_KINDS, Episodes, episode_table
from routerlab.data.longformat.actors import read_actors, read_side_table
from routerlab.data.longformat.columns import _decode, _strings
from routerlab.data.longformat.ingest import _check_ids, _pad_extra, _parsed, _table_name
from routerlab.data.longformat.readers import _batches, _prefetch, _py_records, _slices
from routerlab.data.longformat.sources import (
    _COMPRESSED,
    _KINDS,
    _Batch,
    _header_columns,
    _kind,
    _Source,
    _stream_head,
    is_actors_file,
)
from routerlab.data.table import Actors, Queries, RoutingTable
from routerlab.errors import DataError, UsageError

STEP_REQUIRED: tuple[str, ...] = ("query_id", "actor", "step", "kind", "score")
"""Columns a CSV or Parquet steps file must have (in JSON, the first record's keys but for ``score``)."""

STEP_TEXT: tuple[str, ...] = ("query_id", "actor", "kind", "tool")
"""Columns read as text."""

STEP_NUMBERS: tuple[str, ...] = ("step", "tokens_in", "tokens_out", "ttft_s", "itl_s", "latency_s", "env_s", "score")
"""Columns read as numbers (float64: a step's seconds keep their precision in the steps file)."""

_LARGEST = 1e30
"""No step time or token count is larger (a table's matrices are float32: their sums must stay finite there)."""
_AMOUNTS = ("tokens_in", "tokens_out", "ttft_s", "itl_s", "latency_s", "env_s")


def is_queries_file(path: Path) -> bool:
    """True for a file named ``<anything>.queries.<ext>``: a queries side-file among the inputs."""
    name = path.name.lower()
    for comp in _COMPRESSED:
        name = name.removesuffix(comp)
    return Path(Path(name).stem).suffix == ".queries"


@dataclass(frozen=True)
class _Steps:
    """Every step row of the input files, column by column, and where each row came from."""

    files: tuple[Path, ...]
    text: dict[str, npt.NDArray[np.object_]]
    numbers: dict[str, npt.NDArray[np.float64]]
    file: npt.NDArray[np.intp]
    row: npt.NDArray[np.int64]
    present: frozenset[str]  # columns some file has

    def __len__(self) -> int:
        return int(self.row.shape[0])

    def error(self, i: int, message: str, field: str | None = None) -> DataError:
        return DataError(message, file=self.files[int(self.file[i])], row=int(self.row[i]), field=field)

    def where(self, i: int, other: int) -> str:
        """How row ``other`` is named from row ``i``'s error: ``row R``, or ``FILE row R`` in another file."""
        same = int(self.file[i]) == int(self.file[other])
        return f"row {int(self.row[other])}" + ("" if same else f" of {self.files[int(self.file[other])]}")


def read_steps(
    paths: Sequence[str | Path],
    *,
    queries: str | Path | None = None,
    actors: str | Path | None = None,
    visible: str | Sequence[str] | None = None,
    name: str | None = None,
    batch_rows: int = 1 << 16,
) -> RoutingTable:
    """A routing table whose cells hold the episodes of the steps files ``paths`` (module docstring).

    The cells' matrices are derived from the steps: score = the last step's score, latency_s = the sum of
    ``latency_s + env_s`` over the steps, tokens = the sums, cost from the actors' prices when the actors
    file gives them. ``visible`` names the queries file's metadata columns routers may read."""
    batch_rows = int(batch_rows)
    if batch_rows < 1:
        raise UsageError(f"batch_rows must be >= 1, got {batch_rows}")
    files = expand_paths([Path(p) for p in paths],
                         suffixes=tuple(s + c for s in _KINDS for c in ("", *_COMPRESSED)), what="steps files")
    query_side = [p for p in files if is_queries_file(p)]
    actor_side = [p for p in files if is_actors_file(p)]
    files = [p for p in files if p not in query_side and p not in actor_side]
    if queries is not None:
        query_side.insert(0, Path(queries))
    if actors is not None:
        actor_side.insert(0, Path(actors))
    for what, side in (("queries", query_side), ("actors", actor_side)):
        if len(side) > 1:
            raise UsageError(f"more than one {what} file: {', '.join(str(p) for p in side)}")
    if not files:
        raise UsageError("no steps file among the inputs (only side-files)")
    wanted_visible = _names(visible)
    if wanted_visible and not query_side:
        raise UsageError("visible= names columns of the queries file; give one (queries=PATH or an input named "
                         "*.queries.<ext>)")
    qfile = _read_queries(query_side[0], wanted_visible) if query_side else None
    actor_info = read_actors(actor_side[0]) if actor_side else None

    steps = _read_all(files, batch_rows)
    if len(steps) == 0:
        raise DataError("holds no steps (no data rows)", file=files[0] if len(files) == 1 else None)
    times: dict[str, bool] = {}
    if actor_info is not None:
        ttft, itl = actor_info[1]["ttft_ms"], actor_info[1]["itl_ms"]
        times = {a: bool(~np.isnan(t) & ~np.isnan(v)) for a, t, v in zip(actor_info[0], ttft, itl, strict=True)}
    _check_rows(steps, times)
    order = _check_cells(steps)
    if qfile is not None:
        _check_queries_known(steps, qfile)

    num = steps.numbers
    try:  # every rule was checked above, naming the file's rows; this is the data model's own check
        ep = Episodes.create(
            steps.text["query_id"][order], steps.text["actor"][order], steps.numbers["step"][order].astype(np.int64),
            steps.text["kind"][order], tokens_in=num["tokens_in"][order], tokens_out=num["tokens_out"][order],
            ttft_s=num["ttft_s"][order], itl_s=num["itl_s"][order], latency_s=num["latency_s"][order],
            env_s=num["env_s"][order], score=num["score"][order], tool=steps.text["tool"][order],
        )
    except DataError as exc:  # a rule the checks above missed: name the input row all the same
        if exc.row is None:
            raise DataError(exc.detail, file=files[0] if len(files) == 1 else None, field=exc.field) from None
        raise steps.error(int(order[exc.row - 1]), exc.detail, exc.field) from None
    step_actors = list(dict.fromkeys(steps.text["actor"].tolist()))
    act = _actors(step_actors, actor_info, actor_side[0] if actor_side else None)
    try:
        return episode_table(ep, queries=qfile.queries if qfile is not None else None, actors=act,
                             name=name or _table_name(files),
                             meta={"source": [str(p) for p in files], "format": "steps"})
    except DataError as exc:  # a derived cell out of range (checked by the table): name the steps file
        raise DataError(exc.detail, file=exc.file or (files[0] if len(files) == 1 else None), field=exc.field) from None


# -------------------------------------------------------------------------------------------- reading the steps


def _open(path: Path, index: int) -> _Source:
    kind = _kind(path)
    header = _header_columns(path, kind)
    every = (*STEP_TEXT, *STEP_NUMBERS)
    if kind in ("csv", "tsv", "parquet") or header:  # JSON lines: the first record's keys, but for a score
        missing = [c for c in STEP_REQUIRED if c not in header and (c != "score" or kind not in ("json", "jsonl"))]
        if missing:
            shown = ", ".join(" ".join(h.split())[:40] for h in header[:20]) + (", ..." if len(header) > 20 else "")
            raise DataError(f"missing required column {missing[0]!r}; a steps file has the columns "
                            f"{', '.join(STEP_REQUIRED)} (and optional ones); the file has: {shown or 'none'}",
                            file=path, field=missing[0])
    names = {c: c for c in every if kind in ("json", "jsonl") or c in header}
    return _Source(path=path, kind=kind, names=names, split="", index=index,
                   text_columns=frozenset(("kind", "tool")))


def _json_array_batches(src: _Source, batch_rows: int) -> Iterator[_Batch]:
    """A JSON array of step records (read whole), checked for the required keys on its first record."""
    data = load_json(src.path)
    if not isinstance(data, list):
        raise DataError(f"expected JSON lines or a JSON array of records, got a {type(data).__name__}",
                        file=src.path)
    records = [(i + 1, obj) for i, obj in enumerate(data)]
    if records and isinstance(records[0][1], dict):
        missing = [c for c in STEP_REQUIRED if c not in records[0][1] and c != "score"]
        if missing:
            raise DataError(f"missing required column {missing[0]!r} (record 1 has no such key)", file=src.path,
                            row=1, field=missing[0])
    cols, rows = _py_records(records, src.names, src.path, src.text_columns)
    for lo, part in _slices(cols, len(records), batch_rows):
        yield _Batch(part, lo + 1, rows[lo : lo + batch_rows])


def _file_batches(src: _Source, batch_rows: int) -> Iterator[_Batch]:
    if src.kind == "json" and _stream_head(src.path, 4096).removeprefix(b"\xef\xbb\xbf").lstrip()[:1] == b"[":
        return _json_array_batches(src, batch_rows)
    return _batches(src, list(src.names), batch_rows)


def _read_all(files: Sequence[Path], batch_rows: int) -> _Steps:
    text: dict[str, list[npt.NDArray[np.object_]]] = {c: [] for c in STEP_TEXT}
    numbers: dict[str, list[npt.NDArray[np.float64]]] = {c: [] for c in STEP_NUMBERS}
    file_idx: list[npt.NDArray[np.intp]] = []
    rows: list[npt.NDArray[np.int64]] = []
    present: set[str] = set()
    for index, path in enumerate(files):
        src = _open(path, index)
        if not src.json:
            present |= set(src.names)
        with closing(_prefetch(_file_batches(src, batch_rows))) as it:
            for batch in it:
                k = len(batch)
                if k == 0:
                    continue
                if batch.keys is not None:
                    present |= batch.keys
                elif src.json:
                    present |= {c for c, a in batch.cols.items() if a.null_count < len(a)}
                for c in ("query_id", "actor"):
                    _check_ids(_strings(batch.cols[c]), batch, src, c)
                for c in STEP_TEXT:
                    arr = batch.cols.get(c)
                    if arr is None:
                        text[c].append(np.full(k, "", dtype=object))
                    else:
                        arr = _decode(_strings(arr)).fill_null("")
                        if c == "kind":
                            arr = pc.utf8_trim_whitespace(arr)
                        vals = arr.to_numpy(zero_copy_only=False)
                        text[c].append(np.asarray(vals, dtype=object))
                for c in STEP_NUMBERS:
                    arr = batch.cols.get(c)
                    numbers[c].append(np.full(k, np.nan) if arr is None
                                      else np.asarray(_parsed(arr, c, batch, src, pa.float64()), dtype=np.float64))
                file_idx.append(np.full(k, index, dtype=np.intp))
                rows.append(np.asarray(batch.lines, dtype=np.int64) if batch.lines is not None
                            else batch.start + np.arange(k, dtype=np.int64))
    return _Steps(
        files=tuple(files),
        text={c: _cat(v, object) for c, v in text.items()},
        numbers={c: _cat(v, np.float64) for c, v in numbers.items()},
        file=_cat(file_idx, np.intp),
        row=_cat(rows, np.int64),
        present=frozenset(present),
    )


def _cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


# ---------------------------------------------------------------------------------------------- the checks


def _first(mask: npt.NDArray[np.bool_]) -> int | None:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else None


def _check_rows(s: _Steps, actor_times: dict[str, bool]) -> None:
    """Row by row: the kind, the step number, the ranges and what each kind of step must and must not have (the
    first bad row named). ``actor_times``: whether the actors file gives an actor both TTFT and ITL.

    A model step's empty ``env_s`` becomes 0; so do a tool or environment step's empty ``latency_s`` and tokens."""
    kind = s.text["kind"]  # trimmed as read
    i = _first(~np.logical_or.reduce([kind == k for k in STEP_KINDS]))
    if i is not None:
        what = "is empty" if kind[i] == "" else f"{kind[i]!r} is unknown"
        raise s.error(i, f"step kind {what}; a step is one of {', '.join(STEP_KINDS)}", "kind")
    step = s.numbers["step"]
    with np.errstate(invalid="ignore"):
        i = _first(np.isnan(step) | np.isinf(step) | (step < 0) | (step != np.floor(step)))
    if i is not None:
        v = step[i]
        raise s.error(i, "step is empty: every row needs its step number" if np.isnan(v)
                      else f"step {v:g} is not an integer >= 0", "step")
    for c in _AMOUNTS:
        vals = s.numbers[c]
        with np.errstate(invalid="ignore"):
            i = _first((vals < 0) | (np.abs(vals) > _LARGEST))
        if i is not None:
            v = float(vals[i])
            raise s.error(i, f"{c} {v:g} is too large (at most {_LARGEST:g})" if 0 <= v < math.inf
                          else f"{c} {v} must be finite and >= 0", c)
    score = s.numbers["score"]
    with np.errstate(invalid="ignore"):
        i = _first((score < 0) | (score > 1) | np.isinf(score))
    if i is not None:
        raise s.error(i, f"score {score[i]} is outside [0, 1]", "score")
    model = kind == "model"
    num = s.numbers
    with np.errstate(invalid="ignore"):
        i = _first(model & ~np.isnan(num["env_s"]) & (num["env_s"] != 0))
    if i is not None:
        raise s.error(i, f"a model step has env_s {num['env_s'][i]:g}; a model call's time goes in latency_s and "
                      "its env_s is 0 or empty (each second is counted once)", "env_s")
    num["env_s"][model & np.isnan(num["env_s"])] = 0.0
    for c in ("latency_s", "tokens_in", "tokens_out", "ttft_s", "itl_s"):
        with np.errstate(invalid="ignore"):
            i = _first(~model & ~np.isnan(num[c]) & (num[c] != 0))
        if i is not None:
            why = ("a tool's or environment's time goes in env_s" if c.endswith("_s")
                   else "a tool or env step calls no model (what a tool returns counts in the next model step's "
                        "tokens_in)")
            raise s.error(i, f"a {kind[i]} step has {c} {num[c][i]:g}; {why}, so its {c} is 0 or empty", c)
        if c in ("latency_s", "tokens_in", "tokens_out"):
            num[c][~model & np.isnan(num[c])] = 0.0
    i = _first(~model & np.isnan(num["env_s"]))
    if i is not None:
        absent = "" if "env_s" in s.present else "; the file has no env_s column"
        raise s.error(i, f"a {kind[i]} step needs env_s (the tool's or environment's time in seconds){absent}",
                      "env_s")
    # a model step's latency: measured, or derived from its tokens_out and TTFT/ITL (its own, else its actor's)
    own = ~np.isnan(num["ttft_s"]) & ~np.isnan(num["itl_s"])
    names, codes = _distinct(s.text["actor"])
    theirs = np.array([actor_times.get(a, False) for a in names], dtype=bool)[codes]
    i = _first(model & np.isnan(num["latency_s"]) & (np.isnan(num["tokens_out"]) | ~(own | theirs)))
    if i is not None:
        absent = "" if "latency_s" in s.present else " (the file has no latency_s column)"
        raise s.error(i, f"a model step needs latency_s{absent}, the call's wall time in seconds, or tokens_out with "
                      "ttft_s and itl_s (its own, or its actor's ttft_ms and itl_ms in an actors file) to derive it",
                      "latency_s")


def _check_cells(s: _Steps) -> npt.NDArray[np.intp]:
    """Per (query, actor) cell: no step number twice, and a score on the last step. Returns the row order
    that sorts the steps by cell (in order of first appearance) then step."""
    q_codes = _codes(s.text["query_id"])
    a_codes = _codes(s.text["actor"])
    cell = q_codes * (int(a_codes.max()) + 1) + a_codes
    cell_first = _codes(cell)  # cells in order of first appearance
    step = s.numbers["step"]
    order = np.lexsort((step, cell_first))  # stable: repeated steps of a cell stay in input order
    sc, ss = cell_first[order], step[order]
    same = (sc[1:] == sc[:-1]) & (ss[1:] == ss[:-1])
    if same.any():
        # the repeat that comes first in the files: of each repeated pair, the later row
        later = np.maximum(order[1:][same], order[:-1][same])
        earlier = np.minimum(order[1:][same], order[:-1][same])
        j = int(np.argmin(later))
        i, first = int(later[j]), int(earlier[j])
        raise s.error(i, f"step {int(step[i])} of query {s.text['query_id'][i]!r}, actor {s.text['actor'][i]!r} "
                      f"repeats {s.where(i, first)}: a step number appears once per episode", "step")
    last = np.sort(order[np.append(sc[1:] != sc[:-1], True)])  # each cell's last step, in input order
    k = _first(np.isnan(s.numbers["score"][last]))
    if k is not None:
        r = int(last[k])
        raise s.error(r, f"the last step ({int(step[r])}) of query {s.text['query_id'][r]!r}, actor "
                      f"{s.text['actor'][r]!r} has no score: the last step's score is the episode's outcome", "score")
    return np.asarray(order, dtype=np.intp)


def _distinct(values: np.ndarray) -> tuple[list[Any], npt.NDArray[np.int64]]:
    """The distinct values in order of first appearance, and each value's position among them (Arrow's
    dictionary encoding: a hash pass, no sort of the strings)."""
    arr = pa.array(values, type=pa.string()) if values.dtype == object else pa.array(values)
    enc = pc.dictionary_encode(arr)
    return enc.dictionary.to_pylist(), np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)


def _codes(values: np.ndarray) -> npt.NDArray[np.int64]:
    """Each value's position among the distinct values in order of first appearance."""
    return _distinct(values)[1]


# ------------------------------------------------------------------------------------------------- side-files


@dataclass(frozen=True)
class _QueriesFile:
    path: Path
    queries: Queries


def _read_queries(path: Path, visible: Sequence[str]) -> _QueriesFile:
    """The queries side-file: one row per query, id, text, dataset, split and metadata kept as text."""
    if not path.is_file():
        raise DataError("no such queries file", file=path)
    tbl, rows = read_side_table(path, lambda header: header)  # every column as text
    cols = list(tbl.schema.names)
    key = "query_id" if "query_id" in cols else "id" if "id" in cols else None
    if key is None:
        raise DataError(f"missing column 'query_id' (or 'id'); the file has: {', '.join(cols) or 'none'}",
                        file=path, field="query_id")
    if tbl.num_rows == 0:
        raise DataError("holds no queries (no data rows)", file=path)
    values = {c: [_as_text(v) for v in tbl.column(c).to_pylist()] for c in cols}
    ids = values[key]
    seen: dict[str, int] = {}
    for i, qid in enumerate(ids):
        if not qid:
            raise DataError("query id is empty", file=path, row=int(rows[i]), field=key)
        if qid in seen:
            raise DataError(f"query {qid!r} repeats row {int(rows[seen[qid]])}", file=path, row=int(rows[i]),
                            field=key)
        seen[qid] = i
    extra_cols = [c for c in cols if c not in (key, "text", "dataset", "split", "query_id", "id")]
    unknown = [c for c in visible if c not in extra_cols]
    if unknown:
        raise UsageError(f"visible column {unknown[0]!r} is not a metadata column of the queries file {path} "
                         f"(its metadata columns: {', '.join(extra_cols) or 'none'}; id, text, dataset and split are "
                         "always visible)")
    n = len(ids)
    queries = Queries.create(
        ids, text=values.get("text", [""] * n), dataset=values.get("dataset", [""] * n),
        split=values.get("split", [""] * n),
        extra={c: np.array(values[c], dtype=object) for c in extra_cols}, visible=visible,
    )
    return _QueriesFile(path, queries)


def _as_text(value: Any) -> str:
    """A queries-file cell as text: strings as they are, empty for null, anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _check_queries_known(s: _Steps, qfile: _QueriesFile) -> None:
    known = pc.is_in(pa.array(s.text["query_id"], pa.string()), value_set=pa.array(qfile.queries.ids, pa.string()))
    i = _first(~np.asarray(known.to_numpy(zero_copy_only=False), dtype=bool))
    if i is not None:
        raise s.error(i, f"query {s.text['query_id'][i]!r} is not in the queries file {qfile.path}", "query_id")


def _actors(step_actors: list[str], info: tuple[list[str], dict[str, Any], dict[str, np.ndarray]] | None,
            side: Path | None) -> Actors:
    """The table's actors: the actors file's, in its order, then those only the steps name (attributes unknown)."""
    if info is None:
        return Actors.create(step_actors)
    names, attrs, extra = info
    known = set(names)
    more = [a for a in step_actors if a not in known]
    if more:
        warn(f"{plural(len(more), 'actor')} of the steps {verb(len(more), 'is', 'are')} not in the actors file "
             f"(first: {more[0]!r}); {'its' if len(more) == 1 else 'their'} attributes are unknown",
             file=side, field="actor")
    pad = len(more)
    return Actors.create(
        [*names, *more],
        **{k: np.concatenate([np.asarray(v, dtype=np.float64), np.full(pad, np.nan)]) for k, v in attrs.items()},
        extra={k: _pad_extra(v, pad) for k, v in extra.items()},
    )


def _names(columns: str | Sequence[str] | None) -> tuple[str, ...]:
    parts = (columns or "").split(",") if isinstance(columns, str | None) else [str(c) for c in columns]
    return tuple(dict.fromkeys(c.strip() for c in parts if c.strip()))
