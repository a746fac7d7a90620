"""Long format, sources: an input file's kind (by extension), its header, and which columns it has.

:class:`_Source` is one input file with its column names; :class:`_Batch` some consecutive rows of one.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from routerlab.data._files import split_in_name
from routerlab.data.longformat.columns import REQUIRED
from routerlab.errors import DataError

_COMPRESSED = (".gz", ".bz2", ".zst", ".lz4")


_KINDS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json",
          ".parquet": "parquet", ".pq": "parquet"}


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
    text_columns: frozenset[str] = frozenset()  # per-query metadata columns kept as text (read_long's visible=)

    @property
    def json(self) -> bool:
        return self.kind in ("json", "jsonl")

    def has(self, canonical: str) -> bool:
        """Whether the file has this column (JSON: whether any record has the key; known after pass 1)."""
        return canonical in (self.seen if self.json else self.names)


def _one_line(exc: BaseException, limit: int = 240) -> str:
    """An Arrow error's text on one line, cut at ``limit`` characters: a CSV parse error quotes the rows it read,
    newlines and all, and an error is one line."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
        names = {c: f for c, f in mapping.items() if f in header}  # LONG_COLUMNS, plus a caller's extra ones

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
