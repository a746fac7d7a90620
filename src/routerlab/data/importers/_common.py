"""Helpers every importer shares: warnings that name file/row/field, safe literal parsing, unique ids.

The file helpers (read errors, JSON parsing, file lists, split names) live in
:mod:`routerlab.data._files`, below both the importers and the long format; they are re-exported
here so that importers keep one place to import from.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from routerlab.data._files import (
    DataWarning,
    expand_paths,
    iter_jsonl,
    json_start,
    load_json,
    normalise_split,
    parse_json,
    read_errors,
    split_in_name,
    warn,
)
from routerlab.errors import DataError

__all__ = [
    "DataWarning",
    "as_amount",
    "as_score",
    "expand_paths",
    "float_column",
    "iter_jsonl",
    "json_start",
    "json_text",
    "load_json",
    "normalise_split",
    "parse_json",
    "parse_py_literal",
    "parse_size_b",
    "read_errors",
    "split_from_filename",
    "split_in_name",
    "unique_ids",
    "warn",
]

_SPLIT_SUFFIX = re.compile(r"^(?P<dataset>.+?)[_\-.](?P<split>train|test|val|valid|validation|dev)$", re.I)


def parse_py_literal(text: str, *, file: Path | str, row: int, field: str) -> Any:
    """Parse a Python-repr string (``"['a', 'b']"``, ``"{'text': [...]}"``) without running code."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        raise DataError(f"not a Python literal ({type(exc).__name__})", file=file, row=row, field=field) from None


def split_from_filename(path: Path) -> tuple[str, str]:
    """``mmlu_train.json`` -> (mmlu, train); ``gsm8k-test.json`` -> (gsm8k, test); ``x.json`` -> (x, '')."""
    stem = path.name.split(".")[0] if path.suffix else path.name
    m = _SPLIT_SUFFIX.match(stem)
    if not m:
        if stem.lower() in {"train", "test", "val", "valid", "validation", "dev"}:
            return "", normalise_split(stem)
        return stem, ""
    return m.group("dataset"), normalise_split(m.group("split"))


def unique_ids(ids: Iterable[str], *, file: Path | str | None = None, field: str = "id") -> list[str]:
    """Make ids unique by appending ``#2``, ``#3`` ... to repeats, with one warning giving the count."""
    seen: dict[str, int] = {}
    out: list[str] = []
    repeats = 0
    first: str | None = None
    taken = set()
    for raw in ids:
        k = seen.get(raw, 0) + 1
        seen[raw] = k
        new = raw if k == 1 else f"{raw}#{k}"
        while new in taken:
            k += 1
            new = f"{raw}#{k}"
        if new != raw:
            repeats += 1
            first = first or raw
        taken.add(new)
        out.append(new)
    if repeats:
        warn(f"{repeats} repeated ids made unique with a '#k' suffix (first: {first!r})", file=file, field=field)
    return out


def as_score(value: Any, *, file: Path | str, row: int, field: str) -> float:
    """A score cell: a number in [0, 1], or None / '' for unobserved (NaN). Anything else is an error."""
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return float("nan")
    if isinstance(value, bool):
        return float(value)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise DataError(f"score {value!r} is not a number", file=file, row=row, field=field) from None
    if x != x:
        return x
    if not 0.0 <= x <= 1.0:
        raise DataError(f"score {x} is outside [0, 1]", file=file, row=row, field=field)
    return x


# ---------------------------------------------------------------- helpers added for the file importers

_SIZE = re.compile(r"^\s*(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>[kmbt])?\s*$", re.I)
_SIZE_UNIT_B = {"k": 1e-6, "m": 1e-3, "b": 1.0, "t": 1e3}


def parse_size_b(label: Any) -> float:
    """Parameters in billions from a size label: ``"7B"`` -> 7.0, ``"350M"`` -> 0.35, a bare number = billions.

    Returns NaN for anything else (e.g. ``"8x7B"``), so the caller decides whether that deserves a warning.
    """
    if isinstance(label, bool) or label is None:
        return float("nan")
    if isinstance(label, int | float):
        return float(label) if label >= 0 else float("nan")
    m = _SIZE.match(str(label))
    if not m:
        return float("nan")
    return float(m.group("num")) * _SIZE_UNIT_B[(m.group("unit") or "b").lower()]


def as_amount(value: Any, *, file: Path | str, row: int | None, field: str) -> float:
    """A non-negative finite number (tokens, cost, a price); None / '' -> NaN. Anything else is an error."""
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return float("nan")
    if isinstance(value, bool):
        raise DataError(f"expected a number, got {value!r}", file=file, row=row, field=field)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise DataError(f"{value!r} is not a number", file=file, row=row, field=field) from None
    if x != x:
        return x
    if x < 0 or x == float("inf"):
        raise DataError(f"{x} must be finite and >= 0", file=file, row=row, field=field)
    return x


def float_column(
    values: list[Any],
    *,
    file: Path | str,
    rows: list[int],
    field: str,
    score: bool,
) -> np.ndarray:
    """One column of cells as float64 (None / '' -> NaN), vectorised, with the exact bad cell named on error.

    ``score=True`` checks [0, 1] (:func:`as_score`); otherwise the cells must be finite and >= 0 (:func:`as_amount`).
    """
    check = as_score if score else as_amount
    try:
        arr = np.array(
            [np.nan if v is None or (isinstance(v, str) and not v.strip()) else v for v in values], dtype=np.float64
        )
        if arr.shape != (len(values),):
            raise ValueError("not a flat column")
    except (TypeError, ValueError, OverflowError):
        for v, r in zip(values, rows, strict=True):
            check(v, file=file, row=r, field=field)
        raise DataError("cells are not numbers", file=file, field=field) from None
    with np.errstate(invalid="ignore"):
        bad = ~np.isnan(arr) & (((arr < 0) | (arr > 1)) if score else ((arr < 0) | np.isinf(arr)))
    if bad.any() or (not score and any(isinstance(v, bool) for v in values)):
        for v, r in zip(values, rows, strict=True):
            check(v, file=file, row=r, field=field)
    return arr


def json_text(value: Any) -> str:
    """Metadata kept as canonical JSON text ('' for None): stable in Parquet and in the content hash."""
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, default=str)
