"""Long format, ingest: :func:`read_long`, streaming the files into preallocated matrices.

Pass 1 collects query ids and actor names (:class:`_Vocab`); pass 2 scatters each batch's values into
float32 matrices, checking duplicate cells and per-query attributes (:class:`_State`, :class:`_Attr`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from routerlab._words import plural, verb
from routerlab.data._files import expand_paths, split_in_name, warn
from routerlab.data.longformat.actors import read_actors
from routerlab.data.longformat.columns import (
    CELL_FIELDS,
    ON_DUPLICATE,
    PROPENSITY,
    QUERY_ATTRS,
    _decode,
    _first_bad,
    _indices,
    _strings,
    column_map,
)
from routerlab.data.longformat.readers import _batches, _prefetch
from routerlab.data.longformat.sources import _COMPRESSED, _KINDS, _Batch, _open_source, _Source, is_actors_file
from routerlab.data.table import Actors, Queries, RoutingTable
from routerlab.errors import DataError, UsageError
from routerlab.progress import Progress

_SENTINEL = np.uint32(0x7FC0_0001)  # a NaN payload no input value carries: "cell not yet seen"


_NAN_BITS = np.float32(np.nan).view(np.uint32)


def _check_ids(arr: pa.Array, batch: _Batch, src: _Source, what: str) -> None:
    """Ids must be present and non-empty: name the first row that has none (checked on the dictionary)."""
    if pa.types.is_dictionary(arr.type):
        d = arr.dictionary
        bad_entry = pc.or_kleene(pc.is_null(d), pc.equal(pc.utf8_length(d), 0)).fill_null(True)
        if arr.null_count == 0 and not pc.any(bad_entry).as_py():
            return
        bad = np.take(np.append(np.asarray(bad_entry.to_numpy(zero_copy_only=False), dtype=bool), True), _indices(arr))
    else:
        if arr.null_count == 0 and not pc.any(pc.equal(pc.utf8_length(arr), 0)).as_py():
            return
        bad = np.asarray(pc.or_kleene(pc.is_null(arr), pc.equal(pc.utf8_length(arr), 0)).fill_null(True), dtype=bool)
    i = int(np.flatnonzero(bad)[0])
    raise DataError(f"{what} is empty", file=src.path, row=batch.row(i), field=what)


class _Vocab:
    """Distinct strings in order of first appearance, grown batch by batch without a Python loop per row."""

    def __init__(self, initial: Sequence[str] = ()) -> None:
        self.values: pa.Array = pa.array(list(initial), type=pa.string())
        self._last: tuple[pa.Array, npt.NDArray[np.int64]] | None = None

    def add(self, arr: pa.Array) -> None:
        """Append the values of ``arr`` not yet known, in order of first appearance."""
        if pa.types.is_dictionary(arr.type):
            dcodes = self._dict_codes(arr.dictionary)
            if dcodes.size == 0 or dcodes.min() >= 0:
                return  # every dictionary entry is known: so is every row
            idx = _indices(arr)
            idx = idx[idx >= 0]
            rows = idx[np.take(dcodes, idx) < 0]  # dictionary positions of the rows with new values
            if rows.size == 0:
                return
            first = np.full(len(dcodes), rows.size, dtype=np.int64)
            first[rows[::-1]] = np.arange(rows.size - 1, -1, -1)  # the last write is the first appearance
            used = np.flatnonzero(first < rows.size)
            uniq = arr.dictionary.take(pa.array(used[np.argsort(first[used], kind="stable")]))
        else:
            uniq = pc.unique(arr.drop_null())
            if len(self.values):
                uniq = uniq.filter(pc.invert(pc.is_in(uniq, value_set=self.values)))
        if len(uniq):
            self.values = pa.concat_arrays([self.values, uniq.cast(pa.string())])
            self._last = None  # cached codes may now be stale

    def _dict_codes(self, dictionary: pa.Array) -> npt.NDArray[np.int64]:
        # consecutive batches of a Parquet row group carry equal dictionaries: compare, do not re-hash
        if self._last is not None and len(self._last[0]) == len(dictionary) and self._last[0].equals(dictionary):
            return self._last[1]
        codes = np.asarray(pc.index_in(dictionary, value_set=self.values).fill_null(-1), dtype=np.int64)
        self._last = (dictionary, codes)
        return codes

    def codes(self, arr: pa.Array) -> npt.NDArray[np.int64]:
        """Position of each value in the vocabulary (all values are known after pass 1)."""
        if pa.types.is_dictionary(arr.type):
            out: npt.NDArray[np.int64] = np.take(self._dict_codes(arr.dictionary), _indices(arr))
            return out
        return np.asarray(pc.index_in(arr, value_set=self.values).fill_null(-1), dtype=np.int64)

    def __len__(self) -> int:
        return len(self.values)


def _parsed(arr: pa.Array, name: str, batch: _Batch, src: _Source, to: pa.DataType) -> np.ndarray:
    """A numeric column (numbers, or text parsed correctly rounded straight to ``to``) as numpy, NaN for missing;
    a value that is not a number names its file, row and field."""
    arr = _decode(arr)
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        arr = pc.utf8_trim_whitespace(arr)
        arr = pc.if_else(pc.equal(arr, ""), pa.scalar(None, arr.type), arr)
    elif not (pa.types.is_floating(t) or pa.types.is_integer(t) or pa.types.is_boolean(t)
              or pa.types.is_decimal(t) or pa.types.is_null(t)):
        raise DataError(f"{name} has type {t}, expected numbers", file=src.path, field=name)
    try:
        num = pc.cast(arr, to)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        i = _first_bad(arr, to)
        raise DataError(f"{name} {arr[i].as_py()!r} is not a number", file=src.path, row=batch.row(i),
                        field=name) from None
    return np.array(num.to_numpy(zero_copy_only=False), dtype=to.to_pandas_dtype())


def _check_range(vals: np.ndarray, name: str, batch: _Batch, src: _Source, *, unit: bool = False) -> None:
    """Range rules (NaN = missing passes): score (and ``unit`` columns) in [0, 1]; propensity in (0, 1];
    every other column finite and >= 0. The first bad value names its file, row and field."""
    with np.errstate(invalid="ignore"):
        if name == "score" or unit:
            bad = (vals < 0) | (vals > 1) | np.isinf(vals)
            what = "is outside [0, 1]"
        elif name == PROPENSITY:
            bad = (vals <= 0) | (vals > 1) | np.isinf(vals)
            what = "must be in (0, 1]: the logging policy's probability of the row's actor"
        else:
            bad = (vals < 0) | np.isinf(vals)
            what = "must be finite and >= 0"
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"{name} {vals[i]} {what}", file=src.path, row=batch.row(i), field=name)


def _numbers(arr: pa.Array, name: str, batch: _Batch, src: _Source) -> npt.NDArray[np.float32]:
    """A cell column as float32 with NaN for missing, checked: score in [0, 1], others finite and >= 0."""
    vals: npt.NDArray[np.float32] = _parsed(arr, name, batch, src, pa.float32())
    _check_range(vals, name, batch, src)
    nan = np.isnan(vals)
    if nan.any():
        vals[nan] = np.float32(np.nan)  # one NaN bit pattern, never the "unseen" sentinel
    return vals


def _numbers64(arr: pa.Array, name: str, batch: _Batch, src: _Source, *, unit: bool = False
               ) -> npt.NDArray[np.float64]:
    """A per-row number (propensity, a log's reward) as float64, NaN for missing, range-checked as
    :func:`_check_range` says: probabilities keep their full precision."""
    vals: npt.NDArray[np.float64] = _parsed(arr, name, batch, src, pa.float64())
    _check_range(vals, name, batch, src, unit=unit)
    return vals


@dataclass
class _Attr:
    """One per-query attribute: a code per query into ``values`` (-1 unset), and the file and row that gave it.

    Values are interned to small integers, so that checking a batch is integer compares, not string ones.
    """

    n: int
    values: list[str] = field(default_factory=list)
    intern: dict[str, int] = field(default_factory=dict)
    code: npt.NDArray[np.int32] = field(init=False)
    row: npt.NDArray[np.int64] = field(init=False)
    file: npt.NDArray[np.int32] = field(init=False)
    scratch: npt.NDArray[np.int64] = field(init=False)
    mark: npt.NDArray[np.bool_] = field(init=False)
    _last: tuple[pa.Array, npt.NDArray[np.int32]] | None = None

    def __post_init__(self) -> None:
        self.code = np.full(self.n, -1, dtype=np.int32)
        self.row = np.zeros(self.n, dtype=np.int64)
        self.file = np.full(self.n, -1, dtype=np.int32)
        self.scratch = np.zeros(self.n, dtype=np.int64)
        self.mark = np.zeros(self.n, dtype=bool)

    def dict_codes(self, dictionary: pa.Array) -> npt.NDArray[np.int32]:
        """Interned code of each dictionary value, -1 for null or empty, plus a trailing -1 for null indices."""
        if self._last is not None and len(self._last[0]) == len(dictionary) and self._last[0].equals(dictionary):
            return self._last[1]
        out = np.empty(len(dictionary) + 1, dtype=np.int32)
        for i, v in enumerate(dictionary.cast(pa.string()).to_pylist()):
            if not v:
                out[i] = -1
                continue
            c = self.intern.get(v)
            if c is None:
                c = self.intern[v] = len(self.values)
                self.values.append(v)
            out[i] = c
        out[-1] = -1
        self._last = (dictionary, out)
        return out

    def final(self) -> list[str]:
        vals = [*self.values, ""]
        return [vals[c] for c in self.code.tolist()]


@dataclass
class _State:
    """Everything pass 2 accumulates, and what it needs to place and name rows: one per :func:`read_long`."""

    n: int
    m: int
    mats: dict[str, npt.NDArray[np.float32]]  # flat views
    on_duplicate: str
    sources: list[_Source]  # every input file, by index (errors name the file that gave a value)
    qv: _Vocab  # query ids, complete after pass 1
    av: _Vocab  # actor names, complete after pass 1
    qualify: bool  # ids become <dataset>/<query_id>
    attrs: dict[str, _Attr] = field(default_factory=dict)
    kept: tuple[str, ...] = ()  # per-query metadata columns kept (visible= and hidden=), checked as attributes
    dup_cells: list[npt.NDArray[np.int64]] = field(default_factory=list)
    dup_values: dict[str, list[npt.NDArray[np.float32]]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Rows:
    """One batch being ingested: its rows, the file they come from, and each row's query position."""

    batch: _Batch
    src: _Source
    q: npt.NDArray[np.int64]


def _check_attr(st: _State, name: str, arr: pa.Array, part: _Rows) -> None:
    """Record the first non-empty value of ``name`` per query; a different later value is an error."""
    at = st.attrs[name]
    batch, src, q = part.batch, part.src, part.q
    d = arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)
    g = np.take(at.dict_codes(d.dictionary), _indices(d))  # interned code per row, -1 = no value
    stored = np.take(at.code, q)
    todo = (stored != g) & (g >= 0)  # the usual batch repeats known values: one pass, nothing to do
    if not todo.any():
        return
    rows = np.flatnonzero(todo)
    if (np.take(stored, rows) >= 0).any():  # a known query with another value
        _attr_error(st, name, g, part)
    gs, qs = np.take(g, rows), np.take(q, rows)
    if qs.size < 2 or bool(np.all(qs[1:] >= qs[:-1])):
        # rows grouped by query (query-major files): compare neighbours, no scatter
        same_q = qs[1:] == qs[:-1]
        if (same_q & (gs[1:] != gs[:-1])).any():
            _attr_error(st, name, g, part)
        starts = np.flatnonzero(np.concatenate([[True], ~same_q]))
        new_q, first = qs[starts], rows[starts]
    else:
        at.scratch[qs] = gs  # the last row of each new query wins ...
        if (np.take(at.scratch, qs) != gs).any():  # ... so a row that disagrees with it is a conflict
            _attr_error(st, name, g, part)
        at.scratch[qs[::-1]] = rows[::-1]  # now the first row of each new query wins
        at.mark[qs] = True
        new_q = np.flatnonzero(at.mark)  # O(n queries), not O(rows)
        at.mark[new_q] = False
        first = np.take(at.scratch, new_q)
    at.code[new_q] = np.take(g, first)
    at.row[new_q] = batch.lines[first] if batch.lines is not None else batch.start + first
    at.file[new_q] = src.index


def _attr_error(st: _State, name: str, g: npt.NDArray[np.int32], part: _Rows) -> None:
    """Walk the batch in row order to name the first row that contradicts an earlier value (error path)."""
    at, sources, qids = st.attrs[name], st.sources, st.qv.values
    batch, src, q = part.batch, part.src, part.q
    first_in_batch: dict[int, tuple[int, int]] = {}
    for i in np.flatnonzero(g >= 0).tolist():
        qq, c = int(q[i]), int(g[i])
        if at.code[qq] >= 0:
            first, fr = int(at.code[qq]), int(at.row[qq])
            where = f"row {fr}" + ("" if int(at.file[qq]) == src.index else f" of {sources[int(at.file[qq])].path}")
        elif qq in first_in_batch:
            first, fr = first_in_batch[qq]
            where = f"row {fr}"
        else:
            first_in_batch[qq] = (c, batch.row(i))
            continue
        if c != first:
            hint = "; if ids repeat across datasets, pass qualify_ids=True" if name == "dataset" else ""
            raise DataError(
                f"{name} {_short(at.values[c])} contradicts {_short(at.values[first])} given for query "
                f"{qids[qq].as_py()!r} in {where}{hint}",
                file=src.path, row=batch.row(i), field=name,
            )
    raise AssertionError("a conflict was detected but not located")  # pragma: no cover


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _ingest(st: _State, batch: _Batch, src: _Source) -> None:
    """Scatter one batch of file ``src`` into the matrices; check duplicates and per-query attributes."""
    qv, av = st.qv, st.av
    k = len(batch)
    if k == 0:
        return
    qid = _strings(batch.cols["query_id"])
    if st.qualify:
        qid = _qualified(qid, batch.cols.get("dataset"))
    q = qv.codes(qid)
    a = av.codes(_strings(batch.cols["actor"]))
    for name in (*QUERY_ATTRS, *st.kept):  # first: a contradiction explains a duplicate cell better than the reverse
        arr = batch.cols.get(name) if src.has(name) else None
        if arr is None and name == "split" and src.split:
            arr = pa.DictionaryArray.from_arrays(pa.array(np.zeros(k, dtype=np.int32)), pa.array([src.split]))
        if arr is not None:
            _check_attr(st, name, _strings(arr), _Rows(batch, src, q))
    if src.has(PROPENSITY) and PROPENSITY in batch.cols:
        _numbers64(batch.cols[PROPENSITY], PROPENSITY, batch, src)  # checked; a table does not keep it
    cells = q * st.m + a
    values = {f: _numbers(batch.cols[f], f, batch, src) for f in CELL_FIELDS if f in batch.cols and f in st.mats}
    if "score" not in values:  # JSON records without the key anywhere in this batch
        values["score"] = np.full(k, np.nan, dtype=np.float32)
    bits = st.mats["score"].view(np.uint32)
    ordered = _still_ordered(src, cells, q=q, a=a, n=st.n)
    earlier = inner = np.zeros(k, dtype=bool)
    if not ordered or src.after_others:
        prior = bits[cells]
        earlier = prior != _SENTINEL  # the cell was filled by an earlier batch or file
    if not ordered:
        pos = np.arange(k, dtype=np.uint32)
        bits[cells] = pos  # mark each cell with the row that wrote it last ...
        later = bits[cells]
        bits[cells[earlier]] = prior[earlier]  # ... and put back what earlier batches wrote
        inner = later != pos  # a later row of this batch has the same cell
    if inner.any() or earlier.any():
        if st.on_duplicate == "error":
            cand = [(int(i), "repeats an earlier row") for i in np.flatnonzero(earlier)[:1]]
            if inner.any():
                second, first = _first_repeat(cells)
                cand.append((second, f"repeats row {batch.row(first)}"))
            i, what = min(cand)
            row = batch.row(i)
            raise DataError(
                f"duplicate cell: query {qv.values[int(q[i])].as_py()!r}, actor "
                f"{av.values[int(a[i])].as_py()!r} {what}; pass on_duplicate='last' or 'mean' to combine",
                file=src.path, row=row, field="actor",
            )
        if st.on_duplicate == "last":
            keep = ~inner
        else:  # mean: first occurrences go to the matrices, the rest to a side list combined at the end
            side = inner | earlier
            keep = ~side
            st.dup_cells.append(cells[side])
            for f, v in values.items():
                st.dup_values.setdefault(f, []).append(v[side])
        cells = cells[keep]
        values = {f: v[keep] for f, v in values.items()}
    for f, v in values.items():
        st.mats[f][cells] = v


def _still_ordered(
    src: _Source, cells: npt.NDArray[np.int64], *, q: npt.NDArray[np.int64], a: npt.NDArray[np.int64], n: int
) -> bool:
    """Whether the file's cells so far strictly increase query-major or actor-major (as sorted files do).

    Then no cell of the file repeats and the duplicate checks can skip their scatter passes; a file
    that is not sorted simply takes the general path.
    """
    ok = False
    for order in ("query", "actor"):
        last = src.order.get(order, -1)
        if last is None:
            continue
        key = cells if order == "query" else a * n + q
        if key[0] > last and bool(np.all(key[1:] > key[:-1])):
            src.order[order] = int(key[-1])
            ok = True
        else:
            src.order[order] = None
    return ok


def _first_repeat(cells: npt.NDArray[np.int64]) -> tuple[int, int]:
    """(index of the first row whose cell an earlier row of the batch has, index of that earlier row)."""
    order = np.argsort(cells, kind="stable")
    sc = cells[order]
    again = np.flatnonzero(sc[1:] == sc[:-1]) + 1  # sorted positions of second and later occurrences
    j = again[np.argmin(order[again])]
    start = int(np.searchsorted(sc, sc[j]))  # the first occurrence of that cell
    return int(order[j]), int(order[start])


def _qualified(qid: pa.Array, dataset: pa.Array | None) -> pa.Array:
    """``<dataset>/<query_id>`` where the row names a dataset; the bare id where it does not."""
    if dataset is None:
        return qid
    ds = _decode(_strings(dataset))
    ids = _decode(qid)
    joined = pc.binary_join_element_wise(ds, ids, "/")
    has = pc.and_kleene(pc.is_valid(ds), pc.not_equal(pc.utf8_length(ds.fill_null("")), 0))
    return pc.if_else(has.fill_null(False), joined, ids)


def _combine_mean(st: _State) -> None:
    """Replace each duplicated cell by the mean of its non-missing values (per matrix)."""
    if not st.dup_cells:
        return
    cells = np.concatenate(st.dup_cells)
    uniq, inv = np.unique(cells, return_inverse=True)
    for f, parts in st.dup_values.items():
        flat = st.mats[f]
        v = np.concatenate(parts).astype(np.float64)
        first = flat[uniq].astype(np.float64)
        ok_first = ~np.isnan(first)
        ok = ~np.isnan(v)
        total = np.where(ok_first, first, 0.0) + np.bincount(inv, weights=np.where(ok, v, 0.0), minlength=uniq.size)
        count = ok_first + np.bincount(inv, weights=ok.astype(np.float64), minlength=uniq.size)
        with np.errstate(invalid="ignore", divide="ignore"):
            flat[uniq] = np.where(count > 0, total / count, np.nan).astype(np.float32)


def _unseen_to_nan(flat: npt.NDArray[np.float32], chunk: int = 1 << 24) -> None:
    bits = flat.view(np.uint32)
    for lo in range(0, bits.size, chunk):
        part = bits[lo : lo + chunk]
        part[part == _SENTINEL] = _NAN_BITS


def read_long(
    paths: Sequence[str | Path],
    *,
    actors: str | Path | None = None,
    columns: Mapping[str, str] | None = None,
    rename: str | Mapping[str, str] | None = None,
    on_duplicate: str = "error",
    qualify_ids: bool = False,
    batch_rows: int = 1 << 20,
    name: str | None = None,
    progress: bool | None = None,
    visible: str | Sequence[str] | None = None,
    hidden: str | Sequence[str] | None = None,
) -> RoutingTable:
    """Read long-format files (one row per query x actor cell) into a routing table, streaming.

    ``on_duplicate``: a second row for the same cell is an error (default), replaces the first
    (``"last"``: the whole cell, every column), or is averaged with it (``"mean"``, per column over
    the non-missing values). ``batch_rows`` bounds the rows processed at once; results do not depend
    on it. ``progress=None`` shows progress on stderr (a bar on a terminal, lines elsewhere); False hides it.

    Other file columns are ignored unless named: ``visible`` (names, or ``"a,b"``) keeps per-query columns as
    query metadata routers may read (a task or cluster label a deployed router would know), ``hidden`` keeps
    them hidden from routers (a gold answer, for reports). Both are text, read like ``dataset``: the first
    non-empty value of a query wins and a different later one is an error. A name no input file has is a
    UsageError.
    """
    kept_visible, kept_hidden = _names(visible), _names(hidden)
    kept = (*kept_visible, *kept_hidden)
    if on_duplicate not in ON_DUPLICATE:
        raise UsageError(f"on_duplicate must be one of {ON_DUPLICATE}, got {on_duplicate!r}")
    batch_rows = int(batch_rows)
    if batch_rows < 1:
        raise UsageError(f"batch_rows must be >= 1, got {batch_rows}")

    files = expand_paths(
        [Path(p) for p in paths],
        suffixes=tuple(s + c for s in _KINDS for c in ("", *_COMPRESSED)),
        what="long-format files",
    )
    side = [p for p in files if is_actors_file(p)]
    files = [p for p in files if not is_actors_file(p)]
    if actors is not None:
        side.insert(0, Path(actors))
    if len(side) > 1:
        raise UsageError(f"more than one actors side-file: {[str(p) for p in side]}")
    if not files:
        raise UsageError("no long-format data file among the inputs (only an actors side-file)")
    mapping = column_map(columns, rename)
    _check_kept(kept_visible, kept_hidden, mapping)
    mapping.update({c: c for c in kept})
    sources = [_open_source(p, mapping, i) for i, p in enumerate(files)]
    for src in sources:
        src.text_columns = frozenset(kept)
    if not any(src.json for src in sources):
        _check_kept_present(kept, sources)  # headers tell already: fail before reading the data
    actor_info = read_actors(side[0]) if side else None
    enabled = progress

    # pass 1: ids only
    qv = _Vocab()
    av = _Vocab(actor_info[0] if actor_info else ())
    id_fields = ["query_id", "actor", *(["dataset"] if qualify_ids else [])]
    all_fields = ["query_id", "actor", *QUERY_ATTRS, *CELL_FIELDS, PROPENSITY, *kept]
    with Progress("long: ids", unit="row", unit_scale=True, enabled=enabled) as bar:
        for src in sources:
            # JSON is parsed whole anyway: read every key to learn which columns the file has
            with closing(_prefetch(_batches(src, all_fields if src.json else id_fields, batch_rows))) as it:
                for batch in it:
                    if batch.keys is not None:
                        src.seen |= batch.keys
                    qid = _strings(batch.cols["query_id"])
                    _check_ids(qid, batch, src, "query_id")
                    act = _strings(batch.cols["actor"])
                    _check_ids(act, batch, src, "actor")
                    if qualify_ids:
                        qid = _qualified(qid, batch.cols.get("dataset"))
                    qv.add(qid)
                    av.add(act)
                    src.rows += len(batch)
                    bar.update(len(batch))

    _check_kept_present(kept, sources)  # JSON: some record has the key
    n, m = len(qv), len(av)
    present = {f for src in sources for f in CELL_FIELDS if src.has(f)}
    present.add("score")
    mats = {f: np.full(n * m, np.nan, dtype=np.float32) for f in CELL_FIELDS if f in present and f != "score"}
    mats["score"] = np.full(n * m, _SENTINEL, dtype=np.uint32).view(np.float32)
    st = _State(n=n, m=m, mats=mats, on_duplicate=on_duplicate, sources=sources, qv=qv, av=av, qualify=qualify_ids,
                kept=kept)
    for a in (*QUERY_ATTRS, *kept):
        st.attrs[a] = _Attr(n)

    # pass 2: everything
    total = sum(s.rows for s in sources)
    with Progress("long: cells", total, unit="row", unit_scale=True, enabled=enabled) as bar:
        for i, src in enumerate(sources):
            src.after_others = any(s.rows for s in sources[:i])
            with closing(_prefetch(_batches(src, all_fields, batch_rows))) as it:
                for batch in it:
                    _ingest(st, batch, src)
                    bar.update(len(batch))
    if on_duplicate == "mean":
        _combine_mean(st)
    _unseen_to_nan(mats["score"])
    pa.default_memory_pool().release_unused()  # hand the batches' memory back before the table checks

    queries = Queries.create(
        qv.values.to_pylist(),
        text=st.attrs["text"].final(),
        dataset=st.attrs["dataset"].final(),
        split=st.attrs["split"].final(),
        extra={c: np.array(st.attrs[c].final(), dtype=object) for c in kept},
        visible=kept_visible,
    )
    if actor_info is not None:
        names, attrs, extra = actor_info
        known = len(names)
        if m > known:
            warn(f"{plural(m - known, 'actor')} {verb(m - known, 'is', 'are')} not in the actors side-file (first: "
                 f"{av.values[known].as_py()!r}); "
                 "their attributes are unknown", file=side[0], field="actor")
        pad = m - known
        act = Actors.create(
            av.values.to_pylist(),
            **{k: np.concatenate([v, np.full(pad, np.nan)]) for k, v in attrs.items()},
            extra={k: _pad_extra(v, pad) for k, v in extra.items()},
        )
    else:
        act = Actors.create(av.values.to_pylist())
    matrices: dict[str, Any] = {f: v.reshape(n, m) for f, v in mats.items()}
    meta = {"source": [str(p) for p in files], "format": "long"}
    return RoutingTable(queries=queries, actors=act, name=name or _table_name(files), meta=meta, **matrices)


def _names(columns: str | Sequence[str] | None) -> tuple[str, ...]:
    """Column names from a sequence or one comma-separated string, in order, without repeats."""
    parts = (columns or "").split(",") if isinstance(columns, str | None) else [str(c) for c in columns]
    return tuple(dict.fromkeys(c.strip() for c in parts if c.strip()))


def _check_kept(visible: Sequence[str], hidden: Sequence[str], mapping: Mapping[str, str]) -> None:
    """Refuse a kept column that is a long-format column, fills one, or is named both visible and hidden."""
    both = sorted(set(visible) & set(hidden))
    if both:
        raise UsageError(f"column {both[0]!r} is named both visible and hidden")
    for c in (*visible, *hidden):
        if c in mapping:
            raise UsageError(f"{c!r} is a long-format column; visible=/hidden= name other per-query columns "
                             "to keep as query metadata")
        if c in mapping.values():
            canonical = next(k for k, v in mapping.items() if v == c)
            raise UsageError(f"file column {c!r} fills the long-format column {canonical!r}; it cannot also be "
                             "kept as query metadata")


def _check_kept_present(kept: Sequence[str], sources: Sequence[_Source]) -> None:
    """Every kept column must be in some input file (JSON: some record has the key; known after pass 1)."""
    for c in kept:
        if not any(src.has(c) for src in sources):
            files = ", ".join(str(s.path) for s in sources[:3]) + (", ..." if len(sources) > 3 else "")
            raise UsageError(f"no input file has the column {c!r} named in visible=/hidden= ({files})")


def _pad_extra(v: np.ndarray, pad: int) -> np.ndarray:
    if pad == 0:
        return v
    if v.dtype.kind == "f":
        return np.concatenate([v, np.full(pad, np.nan)])
    return np.concatenate([v.astype(object), np.full(pad, None, dtype=object)])


def _table_name(files: list[Path]) -> str:

    stems = []
    for p in files:
        stem = p.name.split(".")[0]
        sp = split_in_name(p)
        if sp:
            for sep in ("_", "-", "."):
                stem = stem.removesuffix(sep + sp)
        stems.append(stem)
    return stems[0] if len(set(stems)) == 1 and stems[0] not in ("", "train", "test", "val") else "long"
