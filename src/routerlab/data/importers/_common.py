"""Helpers every importer shares: warnings that name file/row/field, safe literal parsing, unique ids."""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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


def load_json(path: Path) -> Any:
    """Read a JSON file; a syntax error names the line."""
    try:
        with path.open("rb") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON: {exc.msg} (column {exc.colno})", file=path, row=exc.lineno) from None
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text: {exc.reason}", file=path) from None
    except IsADirectoryError:
        raise DataError("is a directory, expected a JSON file", file=path) from None


def iter_jsonl(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-empty line of a JSON-lines file."""
    try:
        with path.open("r", encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(f"invalid JSON: {exc.msg}", file=path, row=lineno) from None
                if not isinstance(obj, dict):
                    raise DataError(f"expected a JSON object, got {type(obj).__name__}", file=path, row=lineno)
                yield lineno, obj
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text: {exc.reason}", file=path) from None


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
