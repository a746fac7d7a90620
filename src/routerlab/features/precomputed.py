"""Vectors the user computed elsewhere: a ``.npy`` aligned with the table's query order, or a
Parquet / ``.npz`` file with a ``query_id`` column joined to the table by id.

Every problem is a :class:`DataError` naming the file, the row (1-based) and the field, because
these files come from outside routerlab and a silent misalignment would corrupt every result.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from routerlab.errors import DataError, UsageError
from routerlab.features.registry import Encoder, encoder

if TYPE_CHECKING:
    from routerlab.data.table import RoutingTable

ID_FIELD = "query_id"


@encoder("precomputed")
class PrecomputedEncoder(Encoder):
    """Reads vectors from ``path``; nothing to fit and nothing to cache (they are on disk already)."""

    summary = "vectors from a .npy (table order) or Parquet/.npz with query_id (joined by id)"
    defaults: ClassVar[dict[str, Any]] = {"path": ""}
    cacheable = False

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        if not str(self.options["path"]):
            raise UsageError("encoder 'precomputed' needs a file: precomputed:path=vectors.npy")
        self.path = Path(str(self.options["path"])).expanduser()

    def _transform(self, texts: list[str]) -> npt.NDArray[np.float32]:
        raise UsageError("precomputed vectors are joined by query id, not by text; "
                         "use encode(table, 'precomputed:path=...')")

    def encode_table(self, table: RoutingTable) -> npt.NDArray[np.float32]:
        ids, X, fields = self.read()
        if ids is None:
            if X.shape[0] != table.n_queries:
                raise DataError(
                    f"has {X.shape[0]} vectors for a table of {table.n_queries} queries; a .npy must hold one row "
                    f"per query in table order (use Parquet or .npz with a {ID_FIELD!r} column to join by id)",
                    file=self.path,
                )
            return X
        return _join(self.path, ids, X, fields, table)

    def read(self) -> tuple[npt.NDArray[np.object_] | None, npt.NDArray[np.float32], list[str]]:
        """(ids or None, vectors (n, d), field name per vector column) from the file, checked for NaN."""
        if not self.path.exists():
            raise DataError("file not found", file=self.path)
        suffix = self.path.suffix.lower()
        ids: npt.NDArray[np.object_] | None
        fields: list[str]
        if suffix == ".npy":
            ids, X, fields = None, _read_npy(self.path), []
        elif suffix == ".npz":
            ids, X, fields = _read_npz(self.path)
        elif suffix in {".parquet", ".pq"}:
            ids, X, fields = _read_parquet(self.path)
        else:
            raise DataError(f"unknown vector file type {suffix!r}; expected .npy, .npz or .parquet", file=self.path)
        if X.ndim != 2 or X.shape[1] == 0:
            raise DataError(f"vectors have shape {X.shape}, expected (n, d) with d >= 1", file=self.path)
        bad = ~np.isfinite(X)
        if bad.any():
            row, col = (int(v) for v in np.argwhere(bad)[0])
            field = fields[col] if len(fields) > 1 else (fields[0] if fields else None)
            where = f"component {col}" + (f" of query {ids[row]!r}" if ids is not None else "")
            raise DataError(f"vector value {X[row, col]} is not finite ({where})", file=self.path, row=row + 1,
                            field=field)
        return ids, X, fields


def _as_float(values: Any, path: Path, field: str | None) -> npt.NDArray[np.float32]:
    try:
        return np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise DataError(f"vectors are not numeric ({exc})", file=path, field=field) from exc


def _read_npy(path: Path) -> npt.NDArray[np.float32]:
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise DataError(f"cannot read .npy ({exc})", file=path) from exc
    return _as_float(arr, path, None)


def _read_npz(path: Path) -> tuple[npt.NDArray[np.object_], npt.NDArray[np.float32], list[str]]:
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError) as exc:
        raise DataError(f"cannot read .npz ({exc})", file=path) from exc
    if ID_FIELD not in arrays:
        raise DataError(f"no {ID_FIELD!r} array (arrays: {sorted(arrays)})", file=path, field=ID_FIELD)
    ids = np.array([str(v) for v in arrays.pop(ID_FIELD).ravel()], dtype=object)
    matrices = [k for k, v in arrays.items() if v.ndim == 2]
    if len(matrices) == 1 and len(arrays) == 1:
        name = matrices[0]
        X, fields = _as_float(arrays[name], path, name), [name]
    elif arrays and all(v.ndim == 1 for v in arrays.values()):
        fields = list(arrays)
        X = np.column_stack([_as_float(arrays[k], path, k) for k in fields])
    else:
        raise DataError(f"expected {ID_FIELD!r} plus one 2-D vector array or 1-D vector columns, found "
                        f"{ {k: v.shape for k, v in arrays.items()} }", file=path)
    _check_rows(path, ids, X, fields)
    return ids, X, fields


def _read_parquet(path: Path) -> tuple[npt.NDArray[np.object_], npt.NDArray[np.float32], list[str]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        tab = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"cannot read Parquet ({exc})", file=path) from exc
    if ID_FIELD not in tab.column_names:
        raise DataError(f"no {ID_FIELD!r} column (columns: {tab.column_names})", file=path, field=ID_FIELD)
    id_col = tab.column(ID_FIELD)
    if id_col.null_count:
        row = int(np.flatnonzero(id_col.is_null().to_numpy(zero_copy_only=False))[0])
        raise DataError("query id is missing", file=path, row=row + 1, field=ID_FIELD)
    ids = np.array([str(v) for v in id_col.to_pylist()], dtype=object)
    rest = [c for c in tab.column_names if c != ID_FIELD]
    lists = [c for c in rest if pa.types.is_list(tab.schema.field(c).type)
             or pa.types.is_large_list(tab.schema.field(c).type)
             or pa.types.is_fixed_size_list(tab.schema.field(c).type)]
    numeric = [c for c in rest if pa.types.is_integer(tab.schema.field(c).type)
               or pa.types.is_floating(tab.schema.field(c).type)]
    if len(lists) == 1:
        name = lists[0]
        X, fields = _list_column(path, tab.column(name).to_pylist(), name), [name]
    elif not lists and numeric:
        fields = numeric
        for c in fields:
            col = tab.column(c)
            if col.null_count:
                row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
                raise DataError("vector value is missing", file=path, row=row + 1, field=c)
        X = np.column_stack([tab.column(c).to_numpy().astype(np.float32) for c in fields]) if len(ids) else \
            np.zeros((0, len(fields)), dtype=np.float32)
    else:
        raise DataError(f"expected {ID_FIELD!r} plus one list column or numeric vector columns; found list columns "
                        f"{lists} and numeric columns {numeric}", file=path)
    _check_rows(path, ids, X, fields)
    return ids, X, fields


def _list_column(path: Path, values: list[Any], field: str) -> npt.NDArray[np.float32]:
    if not values:
        return np.zeros((0, 0), dtype=np.float32)
    width = None
    for i, v in enumerate(values):
        if v is None:
            raise DataError("vector is missing", file=path, row=i + 1, field=field)
        if width is None:
            width = len(v)
        elif len(v) != width:
            raise DataError(f"vector has {len(v)} values, the first row has {width}", file=path, row=i + 1,
                            field=field)
        if any(x is None for x in v):
            raise DataError("vector has a missing value", file=path, row=i + 1, field=field)
    return _as_float(values, path, field)


def _check_rows(path: Path, ids: npt.NDArray[np.object_], X: npt.NDArray[np.float32], fields: list[str]) -> None:
    if X.shape[0] != ids.shape[0]:
        raise DataError(f"{ids.shape[0]} query ids but {X.shape[0]} vectors", file=path, field=fields[0])
    seen: dict[str, int] = {}
    for i, q in enumerate(ids.tolist()):
        if q in seen:
            raise DataError(f"query id {q!r} repeats (first at row {seen[q] + 1})", file=path, row=i + 1,
                            field=ID_FIELD)
        seen[q] = i


def _join(path: Path, ids: npt.NDArray[np.object_], X: npt.NDArray[np.float32], fields: list[str],
          table: RoutingTable) -> npt.NDArray[np.float32]:
    """Rows of ``X`` in the table's query order; every table query must have a vector (extra rows are fine)."""
    position = {q: i for i, q in enumerate(ids.tolist())}
    wanted = [str(q) for q in table.queries.ids]
    missing = [q for q in wanted if q not in position]
    if missing:
        raise DataError(f"{len(missing)} of the table's {len(wanted)} queries have no vector (first: {missing[0]!r})",
                        file=path, field=ID_FIELD)
    return np.ascontiguousarray(X[np.array([position[q] for q in wanted], dtype=np.intp)])
