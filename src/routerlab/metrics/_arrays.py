"""Shared array checks of the metrics layer: shapes, choice vectors and the NaN rule.

NaN rule (SPEC 1, NaN = not observed), the same in every module:
- metrics take the test table's full observed matrix;
- a *chosen* unobserved cell raises ``ValueError`` naming the query index(es), unless the caller asks
  for ``nan_policy="zero"`` (score counted as 0, i.e. a wrong answer) — or, for cost and latency,
  ``nan_policy="omit"`` (the mean is taken over the queries whose chosen cell is known);
- an unobserved cell that is *not* chosen is never a candidate: it is not optimal, not correct,
  and not in C_q (an unobserved answer cannot be counted as correct).
"""

from __future__ import annotations

import itertools
from typing import Literal

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
Float32Array = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.intp]
BoolArray = npt.NDArray[np.bool_]

ScoreNanPolicy = Literal["raise", "zero"]
ValueNanPolicy = Literal["raise", "omit"]

_SHOWN = 5

BLOCK_CELLS = 1 << 22
"""Cells of one block of a blocked pass over a matrix (4M: 32 MiB as float64), so that a row or column
statistic of a RouterEval-sized matrix (36,000 x 8,500) needs a few blocks' memory on top of its inputs
and outputs, not full-size float64 temporaries."""


def column_blocks(n_rows: int, n_cols: int, cells: int | None = None) -> list[slice]:
    """Slices that cut ``n_cols`` columns into blocks of about ``cells`` cells (``n_rows`` rows each; default
    :data:`BLOCK_CELLS`).

    Every block is at least two columns wide (unless the matrix has one column): numpy sums a one-column
    block pairwise but a wider one row by row, so with blocks this wide a per-column sum over the rows is
    bit for bit the sum over the whole matrix at once."""
    width = max(2, (BLOCK_CELLS if cells is None else cells) // max(n_rows, 1))
    k = max(1, n_cols // width)  # rounded down: every block is at least ``width`` columns wide
    edges = np.linspace(0, n_cols, k + 1).round().astype(np.intp)
    return [slice(int(a), int(b)) for a, b in itertools.pairwise(edges.tolist())]


def row_blocks(n_rows: int, n_cols: int, cells: int | None = None) -> list[slice]:
    """Slices that cut ``n_rows`` rows into blocks of about ``cells`` cells (default :data:`BLOCK_CELLS`; at
    least one row each): a row-wise computation (a softmax, an entropy, a per-query pick) done block by block
    is the same, value for value."""
    step = max(1, (BLOCK_CELLS if cells is None else cells) // max(n_cols, 1))
    return [slice(a, min(a + step, n_rows)) for a in range(0, n_rows, step)] or [slice(0, 0)]


def as_matrix(values: npt.ArrayLike, name: str = "score") -> FloatArray:
    """``values`` as a float64 (n, m) matrix; raises ``ValueError`` for any other shape."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-d (queries x actors) array, got shape {arr.shape}")
    return arr


def as_float_matrix(values: npt.ArrayLike, name: str = "score") -> FloatArray | Float32Array:
    """``values`` as an (n, m) float matrix, a float32 one kept as it is: for code that only compares or picks
    cells (each picked cell then widened to float64, the same number), so a 7,200 x 8,500 test matrix is not
    copied to float64 just to read one cell per query. Any other shape is a ``ValueError``."""
    arr = np.asarray(values)
    if arr.dtype != np.float32:
        arr = np.asarray(arr, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-d (queries x actors) array, got shape {arr.shape}")
    return arr


def as_vector(values: npt.ArrayLike, name: str, n: int | None = None) -> FloatArray:
    """``values`` as a float64 1-d array of length ``n`` (when given)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-d array, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries, expected {n}")
    return arr


def as_actor_matrix(values: npt.ArrayLike, n: int, m: int, name: str) -> FloatArray:
    """A per-cell (n, m) matrix or a per-actor (m,) vector, broadcast to (n, m)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape == (m,):
        return np.broadcast_to(arr, (n, m))
    if arr.shape != (n, m):
        raise ValueError(f"{name} must have shape ({n}, {m}) or ({m},), got {arr.shape}")
    return arr


def as_choice(choice: npt.ArrayLike, n: int | None, m: int | None, name: str = "choice") -> IntArray:
    """A vector of actor indices in [0, m); raises ``ValueError`` on a non-integer or out-of-range entry."""
    arr = np.asarray(choice)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-d array of actor indices, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries, expected one per query ({n})")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        as_float = arr.astype(np.float64)
        if not np.array_equal(as_float, np.round(as_float)):
            raise ValueError(f"{name} must hold integer actor indices")
    out = arr.astype(np.intp)
    if m is not None and out.size and (out.min() < 0 or out.max() >= m):
        bad = np.flatnonzero((out < 0) | (out >= m))
        raise ValueError(f"{name} has an actor index outside [0, {m}) at query {_first(bad)}")
    return out


def _first(indices: IntArray) -> str:
    shown = ", ".join(str(int(i)) for i in indices[:_SHOWN])
    more = f" and {indices.size - _SHOWN} more" if indices.size > _SHOWN else ""
    return shown + more


def where_nan_message(mask: npt.ArrayLike) -> str:
    """'queries 3, 7 and 2 more' for the True entries of a per-query mask."""
    idx = np.flatnonzero(np.asarray(mask))
    return f"quer{'y' if idx.size == 1 else 'ies'} {_first(idx)}"


def chosen(matrix: FloatArray | Float32Array, choice: IntArray) -> FloatArray:
    """The chosen cell of every row: ``matrix[q, choice[q]]``."""
    return np.asarray(matrix[np.arange(matrix.shape[0]), choice], dtype=np.float64)


def chosen_scores(score: FloatArray | Float32Array, choice: IntArray, nan_policy: ScoreNanPolicy) -> FloatArray:
    """The chosen scores, with the NaN rule of this module applied (raise, or count as 0)."""
    values = chosen(score, choice)
    missing = np.isnan(values)
    if missing.any():
        if nan_policy == "zero":
            return np.where(missing, 0.0, values)
        if nan_policy != "raise":
            raise ValueError(f"nan_policy must be 'raise' or 'zero', got {nan_policy!r}")
        raise ValueError(
            f"the chosen actor's score is unobserved (NaN) at {where_nan_message(missing)}; "
            "evaluate on the full observed table or pass nan_policy='zero'"
        )
    return values


def require_observed_rows(score: FloatArray) -> BoolArray:
    """The observed mask of ``score``; raises when a query has no observed actor at all."""
    observed = ~np.isnan(score)
    empty = ~observed.any(axis=1)
    if empty.any():
        raise ValueError(f"no actor has an observed score at {where_nan_message(empty)}")
    return observed


def pick_best(
    candidates: BoolArray,
    score: FloatArray,
    latency: FloatArray | None,
    cost: FloatArray | None,
) -> IntArray:
    """Per query, among ``candidates`` (at least one per row): the highest score, then the lowest
    latency, then the lowest cost, then the lowest index. Unknown (NaN) latency or cost sorts last.
    This one tie rule serves the oracle r_o and Oracle(Best-of-N) alike (SPEC 4-5)."""
    s = np.where(candidates, score, -np.inf)
    return break_ties(candidates & (s == s.max(axis=1, keepdims=True)), latency, cost)


def break_ties(candidates: BoolArray, latency: FloatArray | None, cost: FloatArray | None) -> IntArray:
    """Per query, among ``candidates``: the lowest latency, then the lowest cost, then the lowest
    index (unknown latency or cost sorts last; a row without candidates gets 0). The tie rule shared
    by :func:`pick_best` and ``latency.fastest_correct``."""
    cand = candidates
    for key in (latency, cost):
        if key is None:
            continue
        k = np.where(cand & ~np.isnan(key), key, np.inf)
        cand = cand & (k == k.min(axis=1, keepdims=True))
    return np.asarray(np.argmax(cand, axis=1), dtype=np.intp)
