"""The long format: one row per (query, actor) cell, read by streaming and written in blocks.

Columns (any order; more are ignored):

=============  ========  =====================================================================
column         needed    meaning
=============  ========  =====================================================================
query_id       yes       query id (strings; integers are read as their decimal text)
actor          yes       model / agent name
score          yes       in [0, 1]; empty / null / NaN = not observed
text           no        query text        \\
dataset        no        dataset (domain)   } per query: the first non-empty value wins; a later
split          no        split             /  different non-empty value is an error
tokens_in      no        per-cell numbers, finite and >= 0; empty = unknown
tokens_out     no
latency_s      no
cost_usd       no
=============  ========  =====================================================================

Files are CSV (``.csv``, ``.tsv``), JSON lines (``.jsonl``, ``.ndjson``, ``.json``; a ``.json`` holding
one JSON array is read whole) or Parquet (``.parquet``, ``.pq``), optionally compressed (``.gz``,
``.bz2``, ``.zst``, ``.lz4``) for the text formats. Several files make one table, e.g. ``train.csv``
and ``test.csv``; a file without a ``split`` column takes its split from a word of its name
(``routereval_test.parquet`` -> test). Actor attributes come from an optional side-file with columns
``actor`` (or ``name``), ``params_b``, ``ttft_ms``, ``itl_ms``, ``input_price``, ``output_price`` and
any extra columns, given as ``actors=PATH`` or as an input path named ``*.actors.<ext>``.

Other layouts come in by renaming columns, ``columns={"query_id": "prompt_id"}`` (canonical ->
file) or ``rename="prompt_id=query_id"`` (file -> canonical, handy on a command line):

- EmbedLLM (``train.csv`` / ``val.csv`` / ``test.csv``: ``prompt_id, model_id, label, model_name, ...``):
  ``rename="prompt_id=query_id,model_name=actor,label=score"``; the split comes from the file names.
- RouterEval performance records flattened to rows (benchmark, per-benchmark sample index, model,
  0/1 score), e.g. columns ``benchmark, sample_id, model, performance``:
  ``rename="benchmark=dataset,sample_id=query_id,model=actor,performance=score"`` with
  ``qualify_ids=True``, which makes the ids ``<dataset>/<sample_id>`` so that sample 0 of ARC and
  sample 0 of MMLU stay two queries.

Row numbers in errors are 1-based: CSV counts the header line (row 2 is the first record; a quoted
value that spans lines shifts the editor line), JSON lines gives the line number, Parquet the record.

Memory: the importer never holds the long table. Pass 1 reads only the id columns and collects the
query ids and actor names in order of first appearance; pass 2 maps each batch's ids to positions
(``pyarrow.compute.index_in`` on the batch's dictionary) and scatters its values into preallocated
float32 matrices. Peak memory is the matrices plus a few batches (about 0.3 GB at the default
``batch_rows``; 1.55 GB in all for RouterEval's 36,000 x 8,500). A file sorted query-major or
actor-major (as exported files usually are) cannot repeat a cell, which lets the duplicate checks
skip two of their four passes over each batch; other orders are checked in full.
"""

from __future__ import annotations

import csv
import io
import json
import math
import queue
import re
import threading
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.parquet as pq

from routerlab.data._files import expand_paths, iter_jsonl, load_json, split_in_name, warn
from routerlab.data.table import ACTOR_NUMERIC_FIELDS, MATRIX_FIELDS, Actors, Queries, RoutingTable
from routerlab.errors import DataError, UsageError
from routerlab.progress import Progress

REQUIRED: tuple[str, ...] = ("query_id", "actor", "score")
"""Columns every long file has (after renaming)."""
QUERY_ATTRS: tuple[str, ...] = ("text", "dataset", "split")
"""Per-query columns: repeated on the rows of a query, or given on one of them."""
CELL_FIELDS: tuple[str, ...] = MATRIX_FIELDS
"""Per-cell numeric columns: ``score`` and the optional matrices."""
LONG_COLUMNS: tuple[str, ...] = ("query_id", "actor", *QUERY_ATTRS, *CELL_FIELDS)
"""Every column the long format knows, in the order :func:`write_long` writes them."""
ON_DUPLICATE = ("error", "last", "mean")

_COMPRESSED = (".gz", ".bz2", ".zst", ".lz4")
_KINDS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json",
          ".parquet": "parquet", ".pq": "parquet"}
_TEXT_CHUNK = 16 << 20  # bytes of a JSON-lines chunk and of a CSV block
_SENTINEL = np.uint32(0x7FC0_0001)  # a NaN payload no input value carries: "cell not yet seen"
_NAN_BITS = np.float32(np.nan).view(np.uint32)


# ---------------------------------------------------------------------------------------- options


def parse_rename(spec: str | Mapping[str, str] | None) -> dict[str, str]:
    """``"prompt_id=query_id,label=score"`` -> ``{"prompt_id": "query_id", "label": "score"}`` (file -> canonical)."""
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        return {str(k): str(v) for k, v in spec.items()}
    out: dict[str, str] = {}
    for part in str(spec).split(","):
        if not part.strip():
            continue
        src, sep, dst = part.partition("=")
        if not sep or not src.strip() or not dst.strip():
            raise UsageError(f"rename entry {part.strip()!r} is not FILE_COLUMN=CANONICAL_COLUMN")
        out[src.strip()] = dst.strip()
    return out


def column_map(
    columns: Mapping[str, str] | None = None, rename: str | Mapping[str, str] | None = None
) -> dict[str, str]:
    """Canonical column -> column name in the files, from ``columns`` (canonical -> file) and ``rename``."""
    mapping = {c: c for c in LONG_COLUMNS}
    given: dict[str, str] = {}
    for canonical, source in (columns or {}).items():
        given[str(canonical)] = str(source)
    for source, canonical in parse_rename(rename).items():
        if canonical in given and given[canonical] != source:
            raise UsageError(f"column {canonical!r} is mapped from both {given[canonical]!r} and {source!r}")
        given[canonical] = source
    unknown = sorted(set(given) - set(LONG_COLUMNS))
    if unknown:
        raise UsageError(f"cannot map to unknown columns {unknown}; the long format knows {list(LONG_COLUMNS)}")
    mapping.update(given)
    sources = list(mapping.values())
    clash = sorted({s for s in sources if sources.count(s) > 1})
    if clash:
        raise UsageError(f"file column(s) {clash} would fill two long-format columns; rename one of them")
    return mapping


# ---------------------------------------------------------------------------------------- sources


def _kind(path: Path) -> str:
    name = path.name.lower()
    for comp in _COMPRESSED:
        if name.endswith(comp):
            name = name[: -len(comp)]
            break
    kind = _KINDS.get(Path(name).suffix)
    if kind is None:
        raise DataError(
            f"unknown long-format file type; use one of {', '.join(sorted(_KINDS))} (optionally compressed)",
            file=path,
        )
    if kind == "parquet" and name != path.name.lower():
        raise DataError("Parquet files are compressed inside; do not compress the file itself", file=path)
    return kind


def is_actors_file(path: Path) -> bool:
    """True for a file named ``<anything>.actors.<ext>``: an actors side-file among the inputs."""
    name = path.name.lower()
    for comp in _COMPRESSED:
        name = name.removesuffix(comp)
    return Path(Path(name).stem).suffix == ".actors"


@dataclass
class _Batch:
    """Some consecutive rows of one file: canonical column -> array, and how to name a row."""

    cols: dict[str, pa.Array]
    start: int  # the row number reported for the batch's first row
    lines: npt.NDArray[np.int64] | None = None  # exact row numbers, when rows are not consecutive
    keys: frozenset[str] | None = None  # JSON: the columns some record of the batch has (others are null)

    def __len__(self) -> int:
        return len(next(iter(self.cols.values()))) if self.cols else 0

    def row(self, i: int) -> int:
        return int(self.lines[i]) if self.lines is not None else self.start + int(i)


@dataclass
class _Source:
    """One input file: where it is, what kind, which canonical columns it has under which names."""

    path: Path
    kind: str
    names: dict[str, str]  # canonical -> column in this file, for the columns the file has
    split: str  # the split a file without a split column takes from its name
    rows: int = 0
    index: int = 0
    seen: set[str] = field(default_factory=set)  # JSON: the columns some record has
    order: dict[str, int | None] = field(default_factory=dict)  # last cell key while the file is sorted
    after_others: bool = False  # an earlier file wrote cells: this one may repeat them

    @property
    def json(self) -> bool:
        return self.kind in ("json", "jsonl")

    def has(self, canonical: str) -> bool:
        """Whether the file has this column (JSON: whether any record has the key; known after pass 1)."""
        return canonical in (self.seen if self.json else self.names)


def _stream_head(path: Path, nbytes: int | None = 1 << 20) -> bytes:
    """The first ``nbytes`` (None: all) of a file, decompressed."""
    try:
        with pa.input_stream(str(path), compression="detect") as fh:
            return bytes(fh.read(nbytes) if nbytes is not None else fh.read())
    except (OSError, pa.ArrowInvalid) as exc:
        raise DataError(f"cannot read: {exc}", file=path) from None


def _header_columns(path: Path, kind: str) -> list[str]:
    """The column names of a CSV/TSV header, JSON-lines first record or Parquet schema."""
    if kind == "parquet":
        try:
            return list(pq.ParquetFile(str(path)).schema_arrow.names)
        except (OSError, pa.ArrowInvalid) as exc:
            raise DataError(f"not a readable Parquet file: {exc}", file=path) from None
    head = _stream_head(path).removeprefix(b"\xef\xbb\xbf")
    if kind in ("csv", "tsv"):
        text = head.decode("utf-8", errors="replace")
        row = next(csv.reader(io.StringIO(text), delimiter="\t" if kind == "tsv" else ","), None)
        if not row:
            raise DataError("empty file: no header line", file=path)
        return row
    if kind == "json" and head.lstrip()[:1] == b"[":
        return []  # a JSON array: checked record by record
    for lineno, line in enumerate(head.split(b"\n"), start=1):
        if line.strip():
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                if len(head) >= (1 << 20) and lineno == len(head.split(b"\n")):
                    return []  # the first record is longer than what was read; records are checked later
                raise DataError(f"invalid JSON: {exc.msg}", file=path, row=lineno) from None
            if not isinstance(obj, dict):
                raise DataError(f"expected a JSON object, got {type(obj).__name__}", file=path, row=lineno)
            return list(obj)
    return []


def _open_source(path: Path, mapping: dict[str, str], index: int) -> _Source:
    kind = _kind(path)
    header = _header_columns(path, kind)
    if kind in ("jsonl", "json"):
        # records may leave keys out; every known column is read and absent keys are null
        names = dict(mapping)
        if header:
            missing = [c for c in REQUIRED if mapping[c] not in header]
            if missing:
                raise _missing(path, missing[0], mapping, header)
    else:
        missing = [c for c in REQUIRED if mapping[c] not in header]
        if missing:
            raise _missing(path, missing[0], mapping, header)
        names = {c: mapping[c] for c in LONG_COLUMNS if mapping[c] in header}

    return _Source(path=path, kind=kind, names=names, split=split_in_name(path), index=index)


def _missing(path: Path, canonical: str, mapping: dict[str, str], header: list[str]) -> DataError:
    src = mapping[canonical]
    via = f" (mapped from {src!r})" if src != canonical else ""
    shown = ", ".join(header[:20]) + (", ..." if len(header) > 20 else "")
    return DataError(
        f"missing required column {canonical!r}{via}; the file has: {shown}. "
        "Map other names with columns={...} or rename='file_col=canonical'",
        file=path,
        field=canonical,
    )


# ---------------------------------------------------------------------------------------- readers


def _slices(cols: dict[str, pa.Array], n: int, batch_rows: int) -> Iterator[tuple[int, dict[str, pa.Array]]]:
    for lo in range(0, n, batch_rows):
        yield lo, {k: v.slice(lo, batch_rows) for k, v in cols.items()}


def _arrays(tbl: pa.Table | pa.RecordBatch, wanted: dict[str, str]) -> dict[str, pa.Array]:
    out: dict[str, pa.Array] = {}
    names = tbl.schema.names
    for canonical, src in wanted.items():
        if src in names:
            col = tbl.column(src)
            out[canonical] = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return out


def _read_parquet(src: _Source, wanted: dict[str, str], batch_rows: int) -> Iterator[_Batch]:
    strings = [wanted[c] for c in ("query_id", "actor", *QUERY_ATTRS) if c in wanted]
    try:
        pf = pq.ParquetFile(str(src.path), read_dictionary=strings)
        start = 1
        # one reader per row group: a single reader over the file keeps every row group's dictionaries
        # (pyarrow 26: ~1 MB a batch at RouterEval scale, 0.5 GB by the end)
        for group in range(pf.metadata.num_row_groups):
            for rb in pf.iter_batches(batch_size=batch_rows, columns=list(wanted.values()), row_groups=[group],
                                      use_threads=True):
                yield _Batch(_arrays(rb, wanted), start)
                start += rb.num_rows
    except (OSError, pa.ArrowInvalid) as exc:
        raise DataError(f"cannot read Parquet data: {exc}", file=src.path) from None


def _read_csv(src: _Source, wanted: dict[str, str], batch_rows: int) -> Iterator[_Batch]:
    cols = list(wanted.values())
    try:
        reader = pcsv.open_csv(
            str(src.path),
            read_options=pcsv.ReadOptions(block_size=_TEXT_CHUNK, use_threads=True),
            parse_options=pcsv.ParseOptions(delimiter="\t" if src.kind == "tsv" else ",", newlines_in_values=True),
            convert_options=pcsv.ConvertOptions(
                column_types={c: pa.string() for c in cols},
                include_columns=cols,
                strings_can_be_null=True,
                quoted_strings_can_be_null=True,
                null_values=[""],
            ),
        )
        start = 2  # the header is row 1
        for rb in reader:
            cols_rb = _arrays(rb, wanted)
            for lo, part in _slices(cols_rb, rb.num_rows, batch_rows):
                yield _Batch(part, start + lo)
            start += rb.num_rows
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"cannot parse CSV: {exc}", file=src.path) from None


def _jsonl_chunks(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number of the chunk's first line, chunk of whole lines) of about 16 MiB each."""
    lineno = 1
    rest = b""
    try:
        with pa.input_stream(str(path), compression="detect") as fh:
            first = True
            while True:
                buf = bytes(fh.read(_TEXT_CHUNK))
                if first:
                    buf = buf.removeprefix(b"\xef\xbb\xbf")
                    first = False
                if not buf:
                    break
                data = rest + buf
                cut = data.rfind(b"\n")
                if cut < 0:
                    rest = data
                    continue
                chunk, rest = data[: cut + 1], data[cut + 1 :]
                yield lineno, chunk
                lineno += chunk.count(b"\n")
    except OSError as exc:
        raise DataError(f"cannot read: {exc}", file=path) from None
    if rest.strip():
        yield lineno, rest


_BLANK_LINE = re.compile(rb"\n[ \t\r]*\n")  # starts with a literal: the scan jumps from newline to newline


def _line_numbers(chunk: bytes, first_line: int) -> npt.NDArray[np.int64] | None:
    """Line numbers of the non-blank lines of a chunk; None when every line is a record (one regex scan)."""
    if not _BLANK_LINE.search(b"\n" + chunk if chunk.endswith(b"\n") else b"\n" + chunk + b"\n"):
        return None
    lines = chunk.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    blank = [i for i, ln in enumerate(lines) if not ln.strip()]
    if not blank:
        return None
    keep = np.ones(len(lines), dtype=bool)
    keep[blank] = False
    return np.flatnonzero(keep).astype(np.int64) + first_line


def _py_records(
    records: Sequence[tuple[int, Any]], wanted: dict[str, str], path: Path
) -> tuple[dict[str, pa.Array], npt.NDArray[np.int64]]:
    """Columns from parsed JSON records, with their row numbers; used where Arrow's reader refuses a chunk."""
    cols: dict[str, list[Any]] = {c: [] for c in wanted}
    rows = np.fromiter((r for r, _ in records), dtype=np.int64, count=len(records))
    for r, obj in records:
        if not isinstance(obj, dict):
            raise DataError(f"expected a JSON object, got {type(obj).__name__}", file=path, row=r)
        for canonical, src in wanted.items():
            v = obj.get(src)
            if canonical in CELL_FIELDS:
                if isinstance(v, str):
                    v = v.strip()
                    if v == "":
                        v = None
                    else:
                        try:
                            v = float(v)
                        except ValueError:
                            raise DataError(f"{canonical} {v!r} is not a number", file=path, row=r,
                                            field=canonical) from None
                elif v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                    raise DataError(f"{canonical} {v!r} is not a number", file=path, row=r, field=canonical)
                cols[canonical].append(None if v is None else float(v))
            else:
                if v is not None and (isinstance(v, bool) or not isinstance(v, str | int | float)):
                    raise DataError(f"expected a string, got {type(v).__name__} {json.dumps(v)[:40]}",
                                    file=path, row=r, field=canonical)
                text = None if v is None else str(v)
                if text is not None and not text.isascii():
                    try:
                        text.encode("utf-8")
                    except UnicodeEncodeError:
                        raise DataError("text holds a lone UTF-16 surrogate escape (\\ud800-\\udfff without its "
                                        "pair): not valid Unicode", file=path, row=r, field=canonical) from None
                cols[canonical].append(text)
    out = {
        c: pa.array(v, type=pa.float64() if c in CELL_FIELDS else pa.string()) for c, v in cols.items()
    }
    return out, rows


def _read_jsonl(src: _Source, wanted: dict[str, str], batch_rows: int) -> Iterator[_Batch]:
    for first_line, chunk in _jsonl_chunks(src.path):
        try:
            tbl = pjson.read_json(
                io.BytesIO(chunk),
                read_options=pjson.ReadOptions(block_size=max(1 << 20, min(len(chunk) + 1, 4 << 20))),
            )
            cols = _arrays(tbl, wanted)
            keys = frozenset(cols)
            lines = _line_numbers(chunk, first_line)
            n = tbl.num_rows
            for c in wanted:  # keys no record of this chunk has
                if c not in cols:
                    cols[c] = pa.nulls(n, pa.float64() if c in CELL_FIELDS else pa.string())
        except pa.ArrowInvalid:
            # mixed types (ids as numbers and strings), a line Arrow cannot parse: read it record by record
            records = []
            for i, line in enumerate(chunk.split(b"\n")):
                if line.strip():
                    try:
                        records.append((first_line + i, json.loads(line)))
                    except json.JSONDecodeError as exc:
                        raise DataError(f"invalid JSON: {exc.msg}", file=src.path, row=first_line + i) from None
                    except UnicodeDecodeError:
                        raise DataError("not UTF-8 text", file=src.path, row=first_line + i) from None
            cols, lines = _py_records(records, wanted, src.path)
            keys = frozenset(c for c in wanted if any(wanted[c] in obj for _, obj in records))
            n = len(records)
        for lo, part in _slices(cols, n, batch_rows):
            yield _Batch(part, first_line + lo, None if lines is None else lines[lo : lo + batch_rows], keys)


def _read_json_array(src: _Source, wanted: dict[str, str], batch_rows: int) -> Iterator[_Batch]:

    data = load_json(src.path)
    if not isinstance(data, list):
        raise DataError(f"expected JSON lines or a JSON array of records, got a {type(data).__name__}",
                        file=src.path)
    records = [(i + 1, obj) for i, obj in enumerate(data)]
    if records and not isinstance(records[0][1], dict):
        raise DataError(f"expected a JSON object, got {type(records[0][1]).__name__}", file=src.path, row=1)
    if records:
        missing = [c for c in REQUIRED if all(wanted[c] not in obj for _, obj in records[:1])]
        if missing:
            raise _missing(src.path, missing[0], wanted, list(records[0][1]))
    cols, rows = _py_records(records, wanted, src.path)
    keys = frozenset(c for c in wanted if any(wanted[c] in obj for _, obj in records if isinstance(obj, dict)))
    for lo, part in _slices(cols, len(records), batch_rows):
        yield _Batch(part, lo + 1, rows[lo : lo + batch_rows], keys)


def _batches(src: _Source, fields: Sequence[str], batch_rows: int) -> Iterator[_Batch]:
    """The file's rows in order, as batches of at most ``batch_rows`` rows of the wanted canonical columns."""
    wanted = {c: src.names[c] for c in fields if c in src.names}
    if src.kind == "parquet":
        return _read_parquet(src, wanted, batch_rows)
    if src.kind in ("csv", "tsv"):
        return _read_csv(src, wanted, batch_rows)
    if src.kind == "json" and _stream_head(src.path, 4096).removeprefix(b"\xef\xbb\xbf").lstrip()[:1] == b"[":
        return _read_json_array(src, wanted, batch_rows)
    return _read_jsonl(src, wanted, batch_rows)


_T = TypeVar("_T")


def _prefetch(items: Iterator[_T], depth: int = 2) -> Generator[_T, None, None]:
    """Run ``items`` in a helper thread, ``depth`` ahead: decoding the next batch (Arrow, no GIL) overlaps
    with processing this one. Errors surface in the caller; leaving the loop early stops the helper."""
    box: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                box.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for x in items:
                if not put(("item", x)):
                    return
            put(("done", None))
        except BaseException as exc:  # handed to the consumer, which re-raises it
            put(("error", exc))

    worker = threading.Thread(target=run, name="routerlab-long-reader", daemon=True)
    worker.start()
    try:
        while True:
            kind, x = box.get()
            if kind == "item":
                yield x
            elif kind == "error":
                raise x
            else:
                return
    finally:
        stop.set()
        worker.join()


# ---------------------------------------------------------------------------------------- columns


def _strings(arr: pa.Array) -> pa.Array:
    """A string (or dictionary-of-string) array from ids given as text, integers or dictionaries."""
    t = arr.type
    if pa.types.is_dictionary(t):
        if t.value_type == pa.string():
            return arr
        return pa.DictionaryArray.from_arrays(arr.indices, pc.cast(arr.dictionary, pa.string()), safe=False)
    if t == pa.string():
        return arr
    return pc.cast(arr, pa.string())


def _decode(arr: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(arr.type):
        return arr.dictionary.take(arr.indices)
    return arr


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


def _indices(arr: pa.DictionaryArray) -> npt.NDArray[np.signedinteger[Any]]:
    """The dictionary indices as numpy (zero-copy, int32 as Arrow has them); a null reads index -1.

    Used with ``np.take``, which takes int32 indices as they are (fancy indexing would first convert
    them to int64, doubling the cost of the gather).
    """
    idx = arr.indices
    if idx.null_count:
        idx = idx.fill_null(-1)
    return np.asarray(idx.to_numpy(zero_copy_only=False))


def _first_bad(arr: pa.Array, dtype: pa.DataType) -> int:
    """Index of the first value that does not cast to ``dtype`` (bisection: O(log n) casts)."""
    lo, hi = 0, len(arr)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            pc.cast(arr.slice(lo, mid - lo), dtype)
            lo = mid
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            hi = mid
    return lo


def _numbers(arr: pa.Array, name: str, batch: _Batch, src: _Source) -> npt.NDArray[np.float32]:
    """A cell column as float32 with NaN for missing, checked: score in [0, 1], others finite and >= 0."""
    arr = _decode(arr)
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        arr = pc.utf8_trim_whitespace(arr)
        arr = pc.if_else(pc.equal(arr, ""), pa.scalar(None, arr.type), arr)
    elif not (pa.types.is_floating(t) or pa.types.is_integer(t) or pa.types.is_boolean(t)
              or pa.types.is_decimal(t) or pa.types.is_null(t)):
        raise DataError(f"{name} has type {t}, expected numbers", file=src.path, field=name)
    try:
        num = pc.cast(arr, pa.float32())  # text is parsed straight to float32: correctly rounded
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        i = _first_bad(arr, pa.float32())
        raise DataError(f"{name} {arr[i].as_py()!r} is not a number", file=src.path, row=batch.row(i),
                        field=name) from None
    vals: npt.NDArray[np.float32] = np.array(num.to_numpy(zero_copy_only=False), dtype=np.float32)
    with np.errstate(invalid="ignore"):
        if name == "score":
            bad = (vals < 0) | (vals > 1) | np.isinf(vals)
            what = "is outside [0, 1]"
        else:
            bad = (vals < 0) | np.isinf(vals)
            what = "must be finite and >= 0"
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"{name} {vals[i]} {what}", file=src.path, row=batch.row(i), field=name)
    nan = np.isnan(vals)
    if nan.any():
        vals[nan] = np.float32(np.nan)  # one NaN bit pattern, never the "unseen" sentinel
    return vals


# ---------------------------------------------------------------------------------------- the reader


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
    n: int
    m: int
    mats: dict[str, npt.NDArray[np.float32]]  # flat views
    on_duplicate: str
    attrs: dict[str, _Attr] = field(default_factory=dict)
    dup_cells: list[npt.NDArray[np.int64]] = field(default_factory=list)
    dup_values: dict[str, list[npt.NDArray[np.float32]]] = field(default_factory=dict)


def _check_attr(
    st: _State, name: str, arr: pa.Array, q: npt.NDArray[np.int64], batch: _Batch, src: _Source,
    sources: list[_Source], qids: pa.Array,
) -> None:
    """Record the first non-empty value of ``name`` per query; a different later value is an error."""
    at = st.attrs[name]
    d = arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)
    g = np.take(at.dict_codes(d.dictionary), _indices(d))  # interned code per row, -1 = no value
    stored = np.take(at.code, q)
    todo = (stored != g) & (g >= 0)  # the usual batch repeats known values: one pass, nothing to do
    if not todo.any():
        return
    rows = np.flatnonzero(todo)
    if (np.take(stored, rows) >= 0).any():  # a known query with another value
        _attr_error(at, name, g, q, batch, src, sources, qids)
    gs, qs = np.take(g, rows), np.take(q, rows)
    if qs.size < 2 or bool(np.all(qs[1:] >= qs[:-1])):
        # rows grouped by query (query-major files): compare neighbours, no scatter
        same_q = qs[1:] == qs[:-1]
        if (same_q & (gs[1:] != gs[:-1])).any():
            _attr_error(at, name, g, q, batch, src, sources, qids)
        starts = np.flatnonzero(np.concatenate([[True], ~same_q]))
        new_q, first = qs[starts], rows[starts]
    else:
        at.scratch[qs] = gs  # the last row of each new query wins ...
        if (np.take(at.scratch, qs) != gs).any():  # ... so a row that disagrees with it is a conflict
            _attr_error(at, name, g, q, batch, src, sources, qids)
        at.scratch[qs[::-1]] = rows[::-1]  # now the first row of each new query wins
        at.mark[qs] = True
        new_q = np.flatnonzero(at.mark)  # O(n queries), not O(rows)
        at.mark[new_q] = False
        first = np.take(at.scratch, new_q)
    at.code[new_q] = np.take(g, first)
    at.row[new_q] = batch.lines[first] if batch.lines is not None else batch.start + first
    at.file[new_q] = src.index


def _attr_error(
    at: _Attr, name: str, g: npt.NDArray[np.int32], q: npt.NDArray[np.int64], batch: _Batch, src: _Source,
    sources: list[_Source], qids: pa.Array,
) -> None:
    """Walk the batch in row order to name the first row that contradicts an earlier value (error path)."""
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


def _ingest(
    st: _State, batch: _Batch, src: _Source, sources: list[_Source], qv: _Vocab, av: _Vocab,
    qualify: bool,
) -> None:
    """Scatter one batch into the matrices; check duplicates and per-query attributes."""
    k = len(batch)
    if k == 0:
        return
    qid = _strings(batch.cols["query_id"])
    if qualify:
        qid = _qualified(qid, batch.cols.get("dataset"))
    q = qv.codes(qid)
    a = av.codes(_strings(batch.cols["actor"]))
    for name in QUERY_ATTRS:  # first: a contradiction explains a duplicate cell better than the other way round
        arr = batch.cols.get(name) if src.has(name) else None
        if arr is None and name == "split" and src.split:
            arr = pa.DictionaryArray.from_arrays(pa.array(np.zeros(k, dtype=np.int32)), pa.array([src.split]))
        if arr is not None:
            _check_attr(st, name, _strings(arr), q, batch, src, sources, qv.values)
    cells = q * st.m + a
    values = {f: _numbers(batch.cols[f], f, batch, src) for f in CELL_FIELDS if f in batch.cols and f in st.mats}
    if "score" not in values:  # JSON records without the key anywhere in this batch
        values["score"] = np.full(k, np.nan, dtype=np.float32)
    bits = st.mats["score"].view(np.uint32)
    ordered = _still_ordered(src, cells, q, a, st.n)
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
    src: _Source, cells: npt.NDArray[np.int64], q: npt.NDArray[np.int64], a: npt.NDArray[np.int64], n: int
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
) -> RoutingTable:
    """Read long-format files (one row per query x actor cell) into a routing table, streaming.

    ``on_duplicate``: a second row for the same cell is an error (default), replaces the first
    (``"last"``: the whole cell, every column), or is averaged with it (``"mean"``, per column over
    the non-missing values). ``batch_rows`` bounds the rows processed at once; results do not depend
    on it. ``progress=None`` shows progress on stderr (a bar on a terminal, lines elsewhere); False hides it.
    """
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
    sources = [_open_source(p, mapping, i) for i, p in enumerate(files)]
    actor_info = read_actors(side[0]) if side else None
    enabled = progress

    # pass 1: ids only
    qv = _Vocab()
    av = _Vocab(actor_info[0] if actor_info else ())
    id_fields = ["query_id", "actor", *(["dataset"] if qualify_ids else [])]
    all_fields = ["query_id", "actor", *QUERY_ATTRS, *CELL_FIELDS]
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

    n, m = len(qv), len(av)
    present = {f for src in sources for f in CELL_FIELDS if src.has(f)}
    present.add("score")
    mats = {f: np.full(n * m, np.nan, dtype=np.float32) for f in CELL_FIELDS if f in present and f != "score"}
    mats["score"] = np.full(n * m, _SENTINEL, dtype=np.uint32).view(np.float32)
    st = _State(n=n, m=m, mats=mats, on_duplicate=on_duplicate)
    for a in QUERY_ATTRS:
        st.attrs[a] = _Attr(n)

    # pass 2: everything
    total = sum(s.rows for s in sources)
    with Progress("long: cells", total, unit="row", unit_scale=True, enabled=enabled) as bar:
        for i, src in enumerate(sources):
            src.after_others = any(s.rows for s in sources[:i])
            with closing(_prefetch(_batches(src, all_fields, batch_rows))) as it:
                for batch in it:
                    _ingest(st, batch, src, sources, qv, av, qualify_ids)
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
    )
    if actor_info is not None:
        names, attrs, extra = actor_info
        known = len(names)
        if m > known:
            warn(f"{m - known} actors are not in the actors side-file (first: {av.values[known].as_py()!r}); "
                 "their attributes are unknown", file=side[0], field="actor")
        pad = m - known
        act = Actors.create(
            av.values.to_pylist(),
            **{k: np.concatenate([v, np.full(pad, np.nan)]) for k, v in attrs.items()},
            extra={k: _pad_extra(v, pad) for k, v in extra.items()},
        )
    else:
        act = Actors.create(av.values.to_pylist())
    matrices = {f: v.reshape(n, m) for f, v in mats.items()}
    meta = {"source": [str(p) for p in files], "format": "long"}
    return RoutingTable(queries=queries, actors=act, name=name or _table_name(files), meta=meta, **matrices)


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


# ---------------------------------------------------------------------------------------- actors side-file


def read_actors(path: str | Path) -> tuple[list[str], dict[str, npt.NDArray[np.float64]], dict[str, np.ndarray]]:
    """Names, numeric attributes and extra columns from an actors side-file (CSV, JSON lines/array, Parquet)."""
    p = Path(path)
    if not p.is_file():
        raise DataError("no such actors side-file", file=p)
    kind = _kind(p)
    rows: npt.NDArray[np.int64]
    if kind == "parquet":
        try:
            tbl = pq.read_table(str(p))
        except (OSError, pa.ArrowInvalid) as exc:
            raise DataError(f"cannot read Parquet data: {exc}", file=p) from None
        rows = np.arange(1, tbl.num_rows + 1)
    elif kind in ("csv", "tsv"):
        header = _header_columns(p, kind)
        try:
            tbl = pcsv.read_csv(
                str(p),
                parse_options=pcsv.ParseOptions(delimiter="\t" if kind == "tsv" else ",", newlines_in_values=True),
                convert_options=pcsv.ConvertOptions(
                    column_types={c: pa.string() for c in ("actor", "name") if c in header},
                    strings_can_be_null=True, null_values=[""],
                ),
            )
        except pa.ArrowInvalid as exc:
            raise DataError(f"cannot parse CSV: {exc}", file=p) from None
        rows = np.arange(2, tbl.num_rows + 2)
    else:
        tbl, rows = _json_table(p)
    cols = tbl.schema.names
    key = "actor" if "actor" in cols else "name" if "name" in cols else None
    if key is None:
        raise DataError(f"missing column 'actor' (or 'name'); the file has: {', '.join(cols)}", file=p,
                        field="actor")
    names_arr = _decode(_strings(tbl.column(key).combine_chunks()))
    bad = pc.or_kleene(pc.is_null(names_arr), pc.equal(pc.utf8_length(names_arr), 0)).fill_null(True)
    if pc.any(bad).as_py():
        i = int(np.flatnonzero(bad.to_numpy(zero_copy_only=False))[0])
        raise DataError("actor name is empty", file=p, row=int(rows[i]), field=key)
    names = [str(x) for x in names_arr.to_pylist()]
    seen: dict[str, int] = {}
    for i, nm in enumerate(names):
        if nm in seen:
            raise DataError(f"actor {nm!r} repeats row {int(rows[seen[nm]])}", file=p, row=int(rows[i]), field=key)
        seen[nm] = i
    fake = _Batch({}, 0, rows)
    src = _Source(p, kind, {}, "")
    attrs: dict[str, npt.NDArray[np.float64]] = {}
    for f in ACTOR_NUMERIC_FIELDS:
        if f in cols:
            vals = _numbers_any(tbl.column(f).combine_chunks(), f, fake, src)
            attrs[f] = vals
        else:
            attrs[f] = np.full(len(names), np.nan)
    extra: dict[str, np.ndarray] = {}
    for c in cols:
        if c in (key, *ACTOR_NUMERIC_FIELDS) or (c in ("actor", "name")):
            continue
        arr = tbl.column(c).combine_chunks()
        if pa.types.is_null(arr.type):
            continue
        npv = _decode(arr).to_numpy(zero_copy_only=False)
        if npv.dtype.kind in "USO":
            npv = np.asarray(npv, dtype=object)
        extra[c.removeprefix("x.")] = npv
    return names, attrs, extra


def _numbers_any(arr: pa.Array, name: str, batch: _Batch, src: _Source) -> npt.NDArray[np.float64]:
    """An actor attribute as float64 (NaN missing), finite and >= 0; text is parsed, bad rows named."""
    arr = _decode(arr)
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        arr = pc.utf8_trim_whitespace(arr)
        arr = pc.if_else(pc.equal(arr, ""), pa.scalar(None, arr.type), arr)
    try:
        vals: npt.NDArray[np.float64] = np.array(pc.cast(arr, pa.float64()).to_numpy(zero_copy_only=False),
                                                 dtype=np.float64)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        i = _first_bad(arr, pa.float64())
        raise DataError(f"{name} {arr[i].as_py()!r} is not a number", file=src.path, row=batch.row(i),
                        field=name) from None
    with np.errstate(invalid="ignore"):
        bad = (vals < 0) | np.isinf(vals)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"{name} {vals[i]} must be finite and >= 0", file=src.path, row=batch.row(i), field=name)
    return vals


def _json_table(path: Path) -> tuple[pa.Table, npt.NDArray[np.int64]]:
    """A small JSON-lines or JSON-array file as an Arrow table, via Python (types may mix)."""

    records: list[tuple[int, Any]]
    if _stream_head(path, 4096).removeprefix(b"\xef\xbb\xbf").lstrip()[:1] == b"[":
        data = load_json(path)
        records = list(enumerate(data, start=1))
    elif path.name.lower().endswith(_COMPRESSED):
        raw = _stream_head(path, None)
        records = [(i, json.loads(ln)) for i, ln in enumerate(raw.split(b"\n"), start=1) if ln.strip()]
    else:
        records = list(iter_jsonl(path))
    keys: list[str] = []
    for r, obj in records:
        if not isinstance(obj, dict):
            raise DataError(f"expected a JSON object, got {type(obj).__name__}", file=path, row=r)
        keys.extend(k for k in obj if k not in keys)
    cols: dict[str, pa.Array] = {}
    for k in keys:
        vals = [obj.get(k) for _, obj in records]
        if k in ("actor", "name", *ACTOR_NUMERIC_FIELDS):  # text here; numbers are parsed and checked later
            cols[k] = pa.array([v if v is None or isinstance(v, str) else json.dumps(v) for v in vals], pa.string())
            continue
        try:
            cols[k] = pa.array(vals)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            cols[k] = pa.array([v if v is None or isinstance(v, str) else json.dumps(v) for v in vals], pa.string())
    rows = np.array([r for r, _ in records], dtype=np.int64)
    return pa.table(cols) if cols else pa.table({"actor": pa.array([], pa.string())}), rows


# ---------------------------------------------------------------------------------------- the writer


def actors_path_for(path: str | Path) -> Path:
    """Where :func:`write_long` puts the actors side-file: ``t.csv`` -> ``t.actors.csv``."""
    p = Path(path)
    name = p.name
    comp = next((c for c in _COMPRESSED if name.lower().endswith(c)), "")
    base = name[: len(name) - len(comp)] if comp else name
    stem, dot, ext = base.rpartition(".")
    if not dot:
        return p.with_name(base + ".actors" + comp)
    return p.with_name(f"{stem}.actors.{ext}{comp}")


def _arrow_extra(v: np.ndarray) -> pa.Array:
    v = np.asarray(v)
    if v.dtype.kind == "f":
        return pa.array(v, from_pandas=True)
    if v.dtype != object:
        return pa.array(v)
    try:
        return pa.array(v.tolist())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if x is None else json.dumps(x, default=str) for x in v.tolist()])


def _actors_table(table: RoutingTable) -> pa.Table:
    a = table.actors
    cols: dict[str, pa.Array] = {"actor": pa.array([str(x) for x in a.names], type=pa.string())}
    for f in ACTOR_NUMERIC_FIELDS:
        cols[f] = pa.array(np.asarray(getattr(a, f), dtype=np.float64), from_pandas=True)
    for k, v in a.extra.items():
        key = k if k not in cols and k != "name" and not k.startswith("x.") else f"x.{k}"
        cols[key] = _arrow_extra(v)
    return pa.table(cols)


def _json_lines(tbl: pa.Table) -> bytes:
    out = []
    for rec in tbl.to_pylist():
        clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in rec.items()}
        out.append(json.dumps(clean, ensure_ascii=False, default=str))
    return ("\n".join(out) + ("\n" if out else "")).encode("utf-8")


def _write_small(tbl: pa.Table, path: Path, kind: str) -> None:
    if kind == "parquet":
        pq.write_table(tbl, str(path), compression="zstd")
    elif kind in ("csv", "tsv"):
        with pa.output_stream(str(path), compression="detect") as out:
            pcsv.write_csv(tbl, out, pcsv.WriteOptions(delimiter="\t" if kind == "tsv" else ","))
    else:
        with pa.output_stream(str(path), compression="detect") as out:
            out.write(_json_lines(tbl))


def _json_strings(values: Sequence[Any] | np.ndarray) -> pa.Array:
    return pa.array([json.dumps(str(v), ensure_ascii=False) for v in values], type=pa.string())


def _block(
    table: RoutingTable, q0: int, q1: int, mats: dict[str, npt.NDArray[np.float32]], repeat_text: bool
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.bool_], dict[str, npt.NDArray[np.float32]]]:
    """Rows of queries ``q0:q1``: every cell with any value, and one empty row for a query with none."""
    obs = np.zeros((q1 - q0, table.n_actors), dtype=bool)
    for mat in mats.values():
        obs |= ~np.isnan(mat[q0:q1])
    empty = ~obs.any(axis=1)
    obs[empty, 0] = True
    qi, ai = np.nonzero(obs)
    first = np.ones(qi.size, dtype=bool)
    if not repeat_text:
        first[1:] = qi[1:] != qi[:-1]
    values = {f: mat[q0:q1][qi, ai] for f, mat in mats.items()}
    return qi, ai, first, values


def write_long(
    table: RoutingTable,
    path: str | Path,
    *,
    actors_path: str | Path | None = None,
    block_cells: int = 1 << 20,
    repeat_text: bool = False,
) -> tuple[Path, Path]:
    """Write ``table`` in the long format (CSV, TSV, JSON lines or Parquet by extension), block by block.

    Rows are the cells where any matrix has a value, query by query; a query with no such cell gets
    one row with empty values so that it survives the round trip. The query text is written on each
    query's first row only (``repeat_text=True`` repeats it); dataset and split are on every row.
    Actor attributes go to the side-file ``actors_path`` (default ``<stem>.actors.<ext>``). Reading
    both back with :func:`read_long` gives a table with the same content hash. Not carried: query
    metadata columns (``Queries.extra``), and, for a table with no queries written as JSON lines (no
    header line), which optional matrices it had.
    """
    out = Path(path)
    kind = _kind(out)
    side = Path(actors_path) if actors_path is not None else actors_path_for(out)
    if table.n_actors == 0 and table.n_queries > 0:
        raise UsageError("a table without actors has no cells to write in the long format")
    out.parent.mkdir(parents=True, exist_ok=True)
    mats = table.matrices()
    names = pa.array(table.actor_names, type=pa.string())
    step = max(1, int(block_cells) // max(1, table.n_actors))
    # written beside the targets and renamed into place: a failure never leaves half a file
    tmp, tmp_side = out.with_name(f".part-{out.name}"), side.with_name(f".part-{side.name}")  # same suffix
    try:
        if kind == "parquet":
            _write_long_parquet(table, tmp, mats, names, step, repeat_text)
        elif kind in ("csv", "tsv"):
            _write_long_csv(table, tmp, kind, mats, names, step, repeat_text)
        else:
            _write_long_jsonl(table, tmp, mats, step, repeat_text)
        _write_small(_actors_table(table), tmp_side, _kind(side))
        tmp.replace(out)
        tmp_side.replace(side)
    finally:
        tmp.unlink(missing_ok=True)
        tmp_side.unlink(missing_ok=True)
    return out, side


def _long_batch(
    table: RoutingTable, q0: int, q1: int, mats: dict[str, npt.NDArray[np.float32]], names: pa.Array,
    repeat_text: bool, dictionary: bool,
) -> pa.Table:
    """One block of long rows as an Arrow table; dictionary columns for Parquet, plain ones for CSV."""
    qi, ai, first, values = _block(table, q0, q1, mats, repeat_text)
    qidx = pa.array(qi.astype(np.int32))
    q = table.queries

    def per_query(col: np.ndarray, mask: npt.NDArray[np.bool_] | None = None) -> pa.Array:
        d = pa.array([str(x) for x in col[q0:q1]], type=pa.string())
        idx = qidx if mask is None else pa.array(qi.astype(np.int32), mask=~mask)
        arr = pa.DictionaryArray.from_arrays(idx, d)
        return arr if dictionary else arr.dictionary.take(arr.indices)

    aidx = pa.array(ai.astype(np.int32))
    cols: dict[str, pa.Array] = {
        "query_id": per_query(q.ids),
        "actor": pa.DictionaryArray.from_arrays(aidx, names) if dictionary else names.take(aidx),
        "text": per_query(q.text, first),
        "dataset": per_query(q.dataset),
        "split": per_query(q.split),
    }
    for f in CELL_FIELDS:
        if f in values:
            cols[f] = pa.array(values[f], from_pandas=True)  # NaN -> null
    return pa.table(cols)


def _write_long_parquet(
    table: RoutingTable, out: Path, mats: dict[str, npt.NDArray[np.float32]], names: pa.Array,
    step: int, repeat_text: bool,
) -> None:
    writer: pq.ParquetWriter | None = None
    try:
        for q0 in range(0, max(table.n_queries, 1), step):
            tbl = _long_batch(table, q0, min(q0 + step, table.n_queries), mats, names, repeat_text, True)
            if writer is None:
                writer = pq.ParquetWriter(str(out), tbl.schema, compression="zstd", compression_level=1)
            writer.write_table(tbl, row_group_size=max(tbl.num_rows, 1))
    finally:
        if writer is not None:
            writer.close()


def _write_long_csv(
    table: RoutingTable, out: Path, kind: str, mats: dict[str, npt.NDArray[np.float32]],
    names: pa.Array, step: int, repeat_text: bool,
) -> None:
    with pa.output_stream(str(out), compression="detect") as sink:
        writer: pcsv.CSVWriter | None = None
        try:
            for q0 in range(0, max(table.n_queries, 1), step):
                tbl = _long_batch(table, q0, min(q0 + step, table.n_queries), mats, names, repeat_text, False)
                if writer is None:
                    writer = pcsv.CSVWriter(sink, tbl.schema,
                                            write_options=pcsv.WriteOptions(delimiter="\t" if kind == "tsv" else ","))
                writer.write_table(tbl)
        finally:
            if writer is not None:
                writer.close()


def _write_long_jsonl(
    table: RoutingTable, out: Path, mats: dict[str, npt.NDArray[np.float32]], step: int, repeat_text: bool
) -> None:
    """JSON lines assembled by Arrow string kernels: no Python loop per row."""
    q = table.queries
    actor_json = _json_strings(table.actor_names)
    with pa.output_stream(str(out), compression="detect") as sink:
        for q0 in range(0, table.n_queries, step):
            q1 = min(q0 + step, table.n_queries)
            qi, ai, first, values = _block(table, q0, q1, mats, repeat_text)
            qidx = pa.array(qi.astype(np.int32))
            parts: list[pa.Array | str] = ['{"query_id":', _json_strings(q.ids[q0:q1]).take(qidx),
                                           ',"actor":', actor_json.take(pa.array(ai.astype(np.int32)))]
            text = pa.array([",\"text\":" + json.dumps(str(t), ensure_ascii=False) if t else ""
                             for t in q.text[q0:q1]], type=pa.string())
            parts.append(text.take(pa.array(qi.astype(np.int32), mask=~first)).fill_null(""))
            for col in ("dataset", "split"):
                vals = getattr(q, col)[q0:q1]
                enc = pa.array([f',"{col}":' + json.dumps(str(t), ensure_ascii=False) if t else "" for t in vals],
                               type=pa.string())
                parts.append(enc.take(qidx))
            for f in CELL_FIELDS:
                if f in values:
                    num = pc.cast(pa.array(values[f], from_pandas=True), pa.string()).fill_null("null")
                    parts += [f',"{f}":', num]
            parts.append("}\n")
            lines = pc.binary_join_element_wise(*parts, "")
            offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset : lines.offset + len(lines) + 1]
            data = lines.buffers()[2]
            if data is not None and offsets.size:
                sink.write(memoryview(data)[int(offsets[0]) : int(offsets[-1])])

