"""File helpers below both the importers and the long format: read errors, JSON parsing, file lists.

They live here, not in :mod:`routerlab.data.importers._common` (which re-exports them), so that
:mod:`routerlab.data.longformat` can use them without importing the importers package: the long
format sits below the importers (``importers/long.py`` wraps it), and a lower module must not
import a higher one.
"""

from __future__ import annotations

import csv
import json
import re
import sys
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from routerlab.errors import DataError

_SPLIT_NAMES = frozenset({"train", "test", "val", "valid", "validation", "dev"})


class DataWarning(UserWarning):
    """A recoverable problem in input data that routerlab handled in a documented way."""


def warn(message: str, *, file: str | Path | None = None, row: int | None = None, field: str | None = None) -> str:
    """Emit a :class:`DataWarning` whose text names file, row and field; returns the text."""
    text = str(DataError(message, file=file, row=row, field=field))
    warnings.warn(text, DataWarning, stacklevel=3)
    return text


def normalise_split(name: str) -> str:
    """A split name in canonical form: ``valid``/``validation`` -> ``val``, otherwise lower case."""
    low = name.lower()
    return {"valid": "val", "validation": "val"}.get(low, low)


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


@contextmanager
def read_errors(path: Path, expected: str) -> Iterator[None]:
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
    with read_errors(path, "a JSON file"), path.open("rb") as fh:
        return parse_json(fh, path)


def iter_jsonl(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-empty line of a JSON-lines file."""
    with read_errors(path, "a JSON-lines file"), path.open("r", encoding="utf-8") as fh:
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


def allow_long_csv_fields() -> None:
    """Lift the csv module's 128 KB field limit (process-wide): a RouterBench prompt or a served request can be
    longer, and a row must never be refused, or read as a cut-off tail, for its size."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
