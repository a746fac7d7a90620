"""Helpers every importer shares: warnings that name file/row/field, safe literal parsing, unique ids."""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np

from routerlab.errors import DataError

_SPLIT_SUFFIX = re.compile(r"^(?P<dataset>.+?)[_\-.](?P<split>train|test|val|valid|validation|dev)$", re.I)


class DataWarning(UserWarning):
    """A recoverable problem in input data that routerlab handled in a documented way."""


def warn(message: str, *, file: str | Path | None = None, row: int | None = None, field: str | None = None) -> str:
    """Emit a :class:`DataWarning` whose text names file, row and field; returns the text."""
    text = str(DataError(message, file=file, row=row, field=field))
    warnings.warn(text, DataWarning, stacklevel=3)
    return text


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


def normalise_split(name: str) -> str:
    low = name.lower()
    return {"valid": "val", "validation": "val"}.get(low, low)


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


@contextmanager
def _read_errors(path: Path, expected: str) -> Iterator[None]:
    """Turn the OS and decoding errors of reading ``path`` into one-line DataErrors naming it."""
    try:
        yield
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text: {exc.reason}", file=path) from None
    except IsADirectoryError:
        raise DataError(f"is a directory, expected {expected}", file=path) from None
    except FileNotFoundError:
        raise DataError("no such file or directory", file=path) from None
    except OSError as exc:
        raise DataError(f"cannot read: {exc.strerror or exc}", file=path) from None


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _lone_surrogate_path(obj: Any, path: str = "") -> str | None:
    """Where in a parsed JSON value a string holds a lone UTF-16 surrogate (``"\\ud800"`` escapes decode to
    one): such text cannot be written, hashed or compared as UTF-8. None when there is none."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError:
            return path or "value"
        return None
    items: Iterable[tuple[str, Any]] = ()
    if isinstance(obj, dict):
        items = ((f"{path}.{k}" if path else str(k), v) for k, v in obj.items())
    elif isinstance(obj, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(obj))
    for sub, value in items:
        bad = _lone_surrogate_path(value, sub)
        if bad is not None:
            return bad
    return None


def _check_unicode(obj: Any, raw: bytes, where: str | Path, row: int | None = None) -> None:
    """Refuse text with a lone surrogate escape, naming where it is (only walked when one may occur)."""
    if _SURROGATE_ESCAPE.search(raw) is None:
        return
    bad = _lone_surrogate_path(obj)
    if bad is not None:
        raise DataError("text holds a lone UTF-16 surrogate escape (\\ud800-\\udfff without its pair): not "
                        "valid Unicode", file=where, row=row, field=bad)


def parse_json(fh: IO[bytes], where: str | Path) -> Any:
    """Parse one JSON document from an open binary file; a syntax error names the line and column, text
    that is not valid Unicode names the field."""
    try:
        raw = fh.read()
        obj = json.loads(raw)
        _check_unicode(obj, raw, where)
        return obj
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON: {exc.msg} (column {exc.colno})", file=where, row=exc.lineno) from None
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text: {exc.reason}", file=where) from None
    except RecursionError:
        raise DataError("invalid JSON: nested too deeply", file=where) from None


def load_json(path: Path) -> Any:
    """Read a JSON file; a syntax error names the line."""
    with _read_errors(path, "a JSON file"), path.open("rb") as fh:
        return parse_json(fh, path)


def iter_jsonl(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-empty line of a JSON-lines file."""
    with _read_errors(path, "a JSON-lines file"), path.open("r", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"invalid JSON: {exc.msg} (column {exc.colno})", file=path, row=lineno) from None
            except RecursionError:
                raise DataError("invalid JSON: nested too deeply", file=path, row=lineno) from None
            if not isinstance(obj, dict):
                raise DataError(f"expected a JSON object, got {type(obj).__name__}", file=path, row=lineno)
            _check_unicode(obj, line.encode("utf-8", "surrogatepass"), path, lineno)
            yield lineno, obj


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

_SPLIT_NAMES = frozenset({"train", "test", "val", "valid", "validation", "dev"})
_SIZE = re.compile(r"^\s*(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>[kmbt])?\s*$", re.I)
_SIZE_UNIT_B = {"k": 1e-6, "m": 1e-3, "b": 1.0, "t": 1e3}


def expand_paths(paths: Iterable[Path], *, suffixes: tuple[str, ...], what: str) -> list[Path]:
    """The files to read: each path as given, a directory replaced by its ``suffixes`` files sorted by name.

    A missing path, or a directory holding none of those files, is a :class:`DataError`.
    """
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.name.lower().endswith(suffixes))
            if not found:
                raise DataError(f"directory holds no {what} ({', '.join(suffixes)} files)", file=path)
            out.extend(found)
        elif path.is_file():
            out.append(path)
        else:
            raise DataError("no such file or directory", file=path)
    return out


def split_in_name(path: Path) -> str:
    """The split named anywhere in a file name, as a ``_ - .`` separated word.

    ``routing_test_data.json`` -> test, ``arc_challenge_train.csv`` -> train, ``data.json`` -> ''. When
    several words name splits the last one wins (it is closest to the usual ``<name>_<split>`` suffix).
    """
    words = re.split(r"[_\-.\s]+", path.name.split(".")[0] if path.suffix else path.name)
    found = [w for w in words if w.lower() in _SPLIT_NAMES]
    return normalise_split(found[-1]) if found else ""


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


def json_start(path: Path) -> str:
    """The first significant character of a JSON file ('[' list, '{' object, '' empty), without parsing it."""
    try:
        with path.open("rb") as fh:
            chunk = fh.read(4096)
    except IsADirectoryError:
        raise DataError("is a directory, expected a JSON file", file=path) from None
    except OSError as exc:
        raise DataError(f"cannot read: {exc.strerror or exc}", file=path) from None
    text = chunk.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
    return chr(text[0]) if text else ""
