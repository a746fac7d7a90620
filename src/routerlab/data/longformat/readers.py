"""Long format, readers: a file's rows as batches of canonical columns, one reader per kind.

CSV/TSV and Parquet through Arrow's streaming readers; JSON lines in chunks (Arrow's reader, falling
back to Python where Arrow refuses a chunk); a JSON array whole. :func:`_prefetch` decodes ahead in a thread.
"""

from __future__ import annotations

import io
import json
import queue
import re
import threading
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.parquet as pq

from routerlab.data._files import load_json
from routerlab.data.longformat.columns import QUERY_ATTRS, REQUIRED, STRING_FIELDS
from routerlab.data.longformat.sources import _Batch, _missing, _one_line, _Source, _stream_head
from routerlab.errors import DataError

_TEXT_CHUNK = 16 << 20  # bytes of a JSON-lines chunk and of a CSV block


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
        raise DataError(f"cannot parse CSV: {_one_line(exc)}", file=src.path) from None


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
    records: Sequence[tuple[int, Any]], wanted: dict[str, str], path: Path,
    text_columns: frozenset[str] = frozenset(),
) -> tuple[dict[str, pa.Array], npt.NDArray[np.int64]]:
    """Columns from parsed JSON records, with their row numbers; used where Arrow's reader refuses a chunk.
    ``text_columns`` are read as text beside :data:`STRING_FIELDS` (kept query metadata columns)."""
    strings = STRING_FIELDS + tuple(text_columns)
    cols: dict[str, list[Any]] = {c: [] for c in wanted}
    rows = np.fromiter((r for r, _ in records), dtype=np.int64, count=len(records))
    for r, obj in records:
        if not isinstance(obj, dict):
            raise DataError(f"expected a JSON object, got {type(obj).__name__}", file=path, row=r)
        for canonical, src in wanted.items():
            v = obj.get(src)
            if canonical not in strings:
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
        c: pa.array(v, type=pa.string() if c in strings else pa.float64()) for c, v in cols.items()
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
                    cols[c] = pa.nulls(n, pa.string() if c in STRING_FIELDS or c in src.text_columns
                                       else pa.float64())
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
            cols, lines = _py_records(records, wanted, src.path, src.text_columns)
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
    cols, rows = _py_records(records, wanted, src.path, src.text_columns)
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
