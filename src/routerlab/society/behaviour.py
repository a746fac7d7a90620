"""The behaviour matrix B (actors x evaluation items) that society diversity is measured on (SPEC 2).

A :class:`Society` is B plus actor names. It comes from a NumPy array, from a routing table
(``B = table.score[split rows].T``) or from a synthetic construction (:mod:`.synthetic`).

NaN rule (SPEC is silent; routerlab's choice): HSE compares actors on a *shared* evaluation set, so
by default (``nan="drop"``) every item that some actor has not been observed on is left out, with a
warning that says how many. ``nan="zero"`` counts an unobserved cell as a failure instead, and
``nan="raise"`` refuses. When dropping leaves no item, a :class:`DataError` says so.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Union

import numpy as np
import numpy.typing as npt

from routerlab._words import plural, verb
from routerlab.errors import DataError, UsageError
from routerlab.society import _fast

if TYPE_CHECKING:
    from routerlab.data.table import RoutingTable

NanRule = Literal["drop", "zero", "raise"]
_FAST_SCAN = 1 << 22  # cells from which the input scan runs in numba (with >= SMALL_N actors)


@dataclass(frozen=True, eq=False)
class Society:
    """Actors and their behaviour vectors: ``matrix`` is (N actors, L items) with values in [0, 1]."""

    matrix: np.ndarray
    names: list[str]
    notes: list[str] = field(default_factory=list)

    @property
    def n_actors(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def n_items(self) -> int:
        return int(self.matrix.shape[1])

    def subset(self, index: npt.ArrayLike) -> Society:
        idx = np.asarray(index, dtype=np.intp)
        return Society(self.matrix[idx], [self.names[i] for i in idx], list(self.notes))


SocietyLike = Union[np.ndarray, "RoutingTable", Society, Any]


def _default_names(n: int) -> list[str]:
    return [f"actor{i}" for i in range(n)]


def from_table(table: RoutingTable, split: str | None = "train") -> Society:
    """B = the table's scores on ``split`` (all queries when ``None``), transposed to actors x items.

    A table without any split labels is read whole, with a warning, when ``split="train"`` (the
    default); a table that has splits but no ``split`` rows is an error.
    """
    notes: list[str] = []
    rows: npt.NDArray[np.intp] | None = None  # None: every query
    if split is not None:
        labels = table.queries.split.astype(str)
        mask = labels == split
        if mask.any():
            rows = np.flatnonzero(mask)
        elif split == "train" and not np.any(labels != ""):
            msg = f"table {table.name!r} has no split labels; HSE uses all {table.n_queries} queries"
            warnings.warn(msg, RuntimeWarning, stacklevel=3)
            notes.append(msg)
        else:
            present = sorted(set(labels.tolist()))
            raise UsageError(f"no query has split {split!r}; splits are {present} (pick one, or all queries)")
    return Society(_transposed(table.score, rows), table.actor_names, notes)


def _transposed(score: np.ndarray, rows: npt.NDArray[np.intp] | None) -> np.ndarray:
    """``score[rows].T`` as a new C-contiguous (actors x items) matrix, filled a block of items at a time: the
    selected rows are never copied whole before the transpose (at RouterEval scale that copy is 0.9 GiB)."""
    n_items = score.shape[0] if rows is None else rows.size
    out = np.empty((score.shape[1], n_items), dtype=score.dtype)
    step = max(1, (1 << 22) // max(1, score.shape[1]))
    for start in range(0, n_items, step):
        stop = min(start + step, n_items)
        out[:, start:stop] = (score[start:stop] if rows is None else score[rows[start:stop]]).T
    return out


def as_society(obj: SocietyLike, *, split: str | None = "train", names: list[str] | None = None) -> Society:
    """Coerce an array, a routing table or a :class:`Society` to a :class:`Society` (no NaN rule yet)."""
    from routerlab.data.table import RoutingTable

    if isinstance(obj, Society):
        return obj
    if isinstance(obj, RoutingTable):
        return from_table(obj, split)
    arr = np.asarray(obj)
    if arr.ndim != 2:
        raise UsageError(f"a behaviour matrix must be 2-D (actors x items), got shape {arr.shape}")
    if arr.dtype.kind not in "biuf":
        raise DataError(f"a behaviour matrix must be numeric, got dtype {arr.dtype}")
    if names is not None and len(names) != arr.shape[0]:
        raise UsageError(f"{len(names)} names for {arr.shape[0]} actors")
    return Society(arr, list(names) if names is not None else _default_names(arr.shape[0]))


def _scan(B: np.ndarray) -> tuple[npt.NDArray[np.bool_] | None, float, float, bool]:
    """One blocked pass over B: columns holding NaN/inf (None if none), min, max, and whether every
    value is exactly 0 or 1 (for x in [0, 1], ``x (1 - x) == 0`` iff x is 0 or 1; NaN fails it)."""
    n, L = B.shape
    if B.dtype == np.bool_:
        return None, 0.0, 1.0, True
    if B.dtype.kind in "iu":
        lo, hi = (float(B.min()), float(B.max())) if B.size else (0.0, 0.0)
        return None, lo, hi, lo >= 0 and hi <= 1
    if B.size >= _FAST_SCAN and n >= _fast.SMALL_N and B.dtype in (np.float32, np.float64) and B.flags.c_contiguous:
        kernels = _fast.kernels()
        # 0/1 scores (the common large case) are recognised in one parallel numba pass; anything else
        # falls through to the full scan below. Fewer actors than SMALL_N never load numba: the
        # popcount route would not run, and numba's start-up costs more than this scan saves
        found = None if kernels is None else kernels.scan01(B)
        if found is not None:
            return None, float(found[0]), float(found[1]), True
    colsum = np.zeros(L)
    lo, hi, binary = np.inf, -np.inf, True
    step = max(1, (1 << 20) // max(1, L))
    for r0 in range(0, n, step):
        blk = B[r0:r0 + step]
        colsum += blk.sum(axis=0, dtype=np.float64)
        lo, hi = min(lo, float(blk.min())), max(hi, float(blk.max()))
        if binary and np.any(blk * (1 - blk)):
            binary = False
    bad = ~np.isfinite(colsum)
    return (bad if bad.any() else None), lo, hi, binary


def clean(society: Society, nan: NanRule = "drop") -> tuple[Society, int, bool]:
    """Apply the NaN rule and check values lie in [0, 1].

    Returns the society, the number of items dropped and whether every score is exactly 0 or 1.
    """
    B = society.matrix
    if nan not in ("drop", "zero", "raise"):
        raise UsageError(f"unknown NaN rule {nan!r}; use drop, zero or raise")
    if B.shape[1] == 0:
        raise DataError("the behaviour matrix has no items")
    dropped = 0
    notes = list(society.notes)
    bad, lo, hi, binary = _scan(B)
    if bad is not None:
        if np.isinf(B[:, bad]).any():
            raise DataError("the behaviour matrix has an infinite value; scores must be in [0, 1]")
        n_bad = int(bad.sum())
        if nan == "raise":
            raise DataError(f"{n_bad} items have an unobserved (NaN) score; choose nan='drop' or 'zero'")
        if nan == "drop":
            keep = ~bad
            if not keep.any():
                raise DataError(
                    f"no item is observed for all {B.shape[0]} actors, so they share no evaluation "
                    "set; use nan='zero' to count unobserved cells as failures"
                )
            B = B[:, keep]
            dropped = n_bad
            msg = (f"{n_bad} of {plural(bad.size, 'item')} {verb(n_bad, 'has', 'have')} an unobserved score for some "
                   f"actor and {verb(n_bad, 'is', 'are')} left out of the behaviour matrix (NaN rule 'drop')")
        else:
            B = np.where(np.isnan(B), 0, B)
            msg = f"unobserved scores on {plural(n_bad, 'item')} count as 0 (NaN rule 'zero')"
        warnings.warn(msg, RuntimeWarning, stacklevel=3)
        notes.append(msg)
        _, lo, hi, binary = _scan(B)
    if B.size and (lo < 0 or hi > 1):
        raise DataError(f"behaviour values must be in [0, 1], found {lo}..{hi}")
    return Society(B, society.names, notes), dropped, binary
