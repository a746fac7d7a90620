"""Long format, actors side-file: reading it (CSV, JSON lines/array, Parquet) and building it for the writer."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from routerlab.data._files import iter_jsonl, load_json
from routerlab.data.longformat.columns import _decode, _first_bad, _strings
from routerlab.data.longformat.sources import (
    _COMPRESSED,
    _Batch,
    _header_columns,
    _kind,
    _one_line,
    _Source,
    _stream_head,
)
from routerlab.data.table import ACTOR_NUMERIC_FIELDS, RoutingTable
from routerlab.errors import DataError


def read_actors(path: str | Path) -> tuple[list[str], dict[str, npt.NDArray[np.float64]], dict[str, np.ndarray]]:
    """Names, numeric attributes and extra columns from an actors side-file (CSV, JSON lines/array, Parquet)."""
    p = Path(path)
    if not p.is_file():
        raise DataError("no such actors side-file", file=p)
    tbl, rows = read_side_table(p, lambda header: [c for c in ("actor", "name") if c in header])
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
    src = _Source(p, _kind(p), {}, "")
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


def read_side_table(path: Path, text_columns: Callable[[list[str]], list[str]]
                    ) -> tuple[pa.Table, npt.NDArray[np.int64]]:
    """A side file (CSV/TSV, JSON lines or array, Parquet) as one Arrow table, with each record's row number as an
    editor counts it (CSV: the header is row 1); ``text_columns(header)`` names the CSV columns read as text."""
    kind = _kind(path)
    if kind == "parquet":
        try:
            tbl = pq.read_table(str(path))
        except (OSError, pa.ArrowInvalid) as exc:
            raise DataError(f"cannot read Parquet data: {exc}", file=path) from None
        return tbl, np.arange(1, tbl.num_rows + 1)
    if kind in ("csv", "tsv"):
        header = _header_columns(path, kind)
        try:
            tbl = pcsv.read_csv(
                str(path),
                parse_options=pcsv.ParseOptions(delimiter="\t" if kind == "tsv" else ",", newlines_in_values=True),
                convert_options=pcsv.ConvertOptions(column_types={c: pa.string() for c in text_columns(header)},
                                                    strings_can_be_null=True, null_values=[""]),
            )
        except pa.ArrowInvalid as exc:
            raise DataError(f"cannot parse CSV: {_one_line(exc)}", file=path) from None
        return tbl, np.arange(2, tbl.num_rows + 2)
    return _json_table(path)


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
