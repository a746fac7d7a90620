"""Long format, columns: the canonical column names, renaming, and Arrow type conversions of id columns.

The lowest module of the package: it knows column names and Arrow types, not files.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from routerlab.data.table import MATRIX_FIELDS
from routerlab.errors import UsageError

REQUIRED: tuple[str, ...] = ("query_id", "actor", "score")
"""Columns every long file has (after renaming)."""


QUERY_ATTRS: tuple[str, ...] = ("text", "dataset", "split")
"""Per-query columns: repeated on the rows of a query, or given on one of them."""


CELL_FIELDS: tuple[str, ...] = MATRIX_FIELDS
"""Per-cell numeric columns: ``score`` and the optional matrices."""


PROPENSITY = "propensity"
"""The optional per-row column of logged feedback (SPEC 1): the logging policy's probability of the row's
actor, finite and in (0, 1]. A routing table has no place for it: :func:`read_long` checks it and leaves it
out; :func:`routerlab.data.logs.read_logs` keeps it."""


LONG_COLUMNS: tuple[str, ...] = ("query_id", "actor", *QUERY_ATTRS, *CELL_FIELDS, PROPENSITY)
"""Every column the long format knows, in the order :func:`write_long` writes them."""


STRING_FIELDS: tuple[str, ...] = ("query_id", "actor", *QUERY_ATTRS)
"""Columns read as text; every other column the readers are asked for is a number."""


ON_DUPLICATE = ("error", "last", "mean")


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
