"""Checks the importer tests share: a DataError names file, row and field; tables compare cell by cell."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np

from routerlab.data.table import RoutingTable
from routerlab.errors import DataError


def assert_names(err: DataError, file: Path | str, row: int | None = None, field: str | None = None) -> None:
    """``str(err)`` names the file (by its name), and the row and field when given; so do the attributes."""
    text = str(err)
    assert Path(file).name in text, text
    assert err.file is not None and Path(file).name in err.file, text
    if row is not None:
        assert re.search(rf"\brow {row}\b", text), text
        assert err.row == row, text
    if field is not None:
        assert f"field {field!r}" in text, text
        assert err.field == field, text


def same_cells(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Equal matrices with NaN in the same places (float32 compare)."""
    if a is None or b is None:
        return a is None and b is None
    a32, b32 = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    return a32.shape == b32.shape and bool(np.array_equal(a32, b32, equal_nan=True))


def warning_texts(records: list[warnings.WarningMessage]) -> list[str]:
    return [str(r.message) for r in records]


def has_warning(texts: list[str], pattern: str) -> bool:
    return any(re.search(pattern, t) for t in texts)


def mean_scores(table: RoutingTable) -> dict[str, float]:
    obs = ~np.isnan(table.score)
    sums = np.where(obs, table.score, 0).sum(axis=0, dtype=np.float64)
    return {a: float(s / max(c, 1)) for a, s, c in zip(table.actor_names, sums, obs.sum(axis=0), strict=True)}
