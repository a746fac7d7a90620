"""Pairwise behavioural distances between actors (SPEC 2): cosine, correlation, euclidean, manhattan.

All four come from one Gram matrix ``G = B B^T`` except graded manhattan. The Gram matrix is the
whole cost of HSE, so it is computed the cheapest way that is still exact:

* **0/1 behaviour, popcount route** (``gram="popcount"``; the default when numba is installed, the
  ``fast`` extra): each actor's scores are packed into bits and ``G_jk = popcount(b_j AND b_k)``
  summed over 64-bit words, in integers (:mod:`._popcount`): exact by construction, and about 10x
  fewer operations than the float route below.
* **0/1 behaviour, BLAS route** (``gram="blas"``; the default without numba): every entry of ``G``
  is an integer count <= L. Float32 BLAS adds integers exactly while every partial sum stays below
  2^24, so ``sgemm`` is exact. We go one step
  further and pack two actors into one float32 (``x_a + 4096 x_b``) over item chunks of 4,095: each
  product entry is then ``G_ac + 4096 G_bc < 2^24``, still exact, and the two counts are split again
  with one ``floor``. This halves the multiplications; only the upper block triangle is computed,
  which halves them again: N^2 L / 4 multiply-adds in all, against N^2 L / 2 for a symmetric
  ``ssyrk``. Distances are formed in float64 from the exact integers (one or two roundings) when
  they are needed, block by block, so single-linkage HSE never holds an N x N float64 matrix.
* **graded behaviour**: float64 BLAS (relative error ~1e-16 per entry, the same as scipy's pdist);
  near-equal euclidean pairs, where ``|x|^2 + |y|^2 - 2 x.y`` would cancel, are recomputed directly.
  Manhattan has no Gram form for graded scores and is computed directly (scipy's cdist, O(N^2 L)).

Equal actors get distance exactly 0 on every route: for 0/1 scores by the integer arithmetic (for
correlation, by checking ``G_jk = n_j = n_k``), for graded scores by hashing the rows (one pass).

Degenerate vectors follow the paper's rule (sec. 4.2, SPEC 2): cosine distance is 1 when either
vector has zero norm, even when both are zero. Correlation is undefined for a constant vector; by
the same rule its distance is then 1 (that of uncorrelated actors), even between two equal constant
vectors. This choice is routerlab's, the paper being silent.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt

from routerlab.errors import UsageError
from routerlab.society import _fast

Metric = Literal["cosine", "correlation", "euclidean", "manhattan"]
METRICS: tuple[str, ...] = get_args(Metric)

FloatArray = npt.NDArray[np.float64]

_PACK = 4096.0  # 2^12: the second actor of a packed pair lives in the high 12 bits of the float32
_CHUNK = 4095  # items per packed product: counts <= 4095 keep G_a + 4096 G_b < 2^24 (exact float32)
_ROW_BLOCK = 640  # actors per block row of the upper block triangle (tuned on 2 Zen 4 cores)
_SMALL_N = 384  # below this many actors a plain float32 product is as fast as packing


class Distances(ABC):
    """Distances between N actors, with what they were made from (SPEC 2).

    Two storages, one interface: :class:`DenseDistances` holds a symmetric float64 matrix;
    :class:`GramDistances` holds, for 0/1 scores, the exact integer Gram matrix from which any block
    of distances is formed on demand (the same formula, so the same numbers, as the dense matrix
    would hold): HSE under single linkage then never materialises N x N float64. ``d_max`` is the
    largest distance the metric can take between vectors in [0,1]^L: cosine 1, correlation 2,
    euclidean sqrt(L), manhattan L (SPEC 2); normalised HSE divides by it.
    """

    lazy: bool = False
    """True while the distances live as a Gram matrix (0/1 scores) and are formed on demand."""

    def __init__(self, metric: str, n_items: int, binary: bool) -> None:
        self.metric = metric
        self.n_items = int(n_items)
        self.binary = bool(binary)

    @property
    @abstractmethod
    def n(self) -> int:
        """The number of actors."""

    @property
    def d_max(self) -> float:
        return d_max(self.metric, self.n_items)

    @property
    def gram(self) -> np.ndarray | None:
        """The exact integer Gram matrix of 0/1 scores this was made from, if it was."""
        return None

    @property
    @abstractmethod
    def matrix(self) -> FloatArray:
        """The dense N x N matrix."""

    @abstractmethod
    def row(self, x: int, cols: npt.NDArray[np.intp]) -> FloatArray:
        """Distances from actor ``x`` to the actors ``cols`` (none of which may be ``x``)."""

    @abstractmethod
    def block(self, rows: npt.ArrayLike, cols: npt.ArrayLike) -> FloatArray:
        """The distances ``D[rows][:, cols]``."""

    def _row_range(self, r0: int, r1: int) -> FloatArray:
        """Rows ``r0:r1`` of the full matrix (all columns)."""
        return self.block(np.arange(r0, r1), np.arange(self.n))

    def subset(self, index: npt.ArrayLike) -> DenseDistances:
        """The distances among the actors at ``index`` (in that order), dense."""
        idx = np.asarray(index, dtype=np.intp)
        return DenseDistances(self.block(idx, idx), self.metric, self.n_items, self.binary)

    def farthest_pair(self) -> tuple[int, int]:
        """The pair (j, k), j < k, at the largest distance; the first in row-major order on ties."""
        n = self.n
        if n < 2:
            raise UsageError("a pair needs at least two actors")
        best, pair = -np.inf, (0, 1)
        step = max(1, (1 << 20) // n)
        for r0 in range(0, n, step):
            r1 = min(n, r0 + step)
            blk = self._row_range(r0, r1)
            # only the part above the diagonal: mask the rest
            blk = np.where(np.arange(n)[None, :] > np.arange(r0, r1)[:, None], blk, -np.inf)
            p = int(np.argmax(blk))
            if blk.flat[p] > best:
                best, pair = float(blk.flat[p]), (r0 + p // n, p % n)
        return pair


class DenseDistances(Distances):
    """Distances held as a dense symmetric float64 matrix (graded scores, subsets, plain matrices)."""

    def __init__(self, matrix: npt.ArrayLike, metric: str, n_items: int, binary: bool) -> None:
        super().__init__(metric, n_items, binary)
        self._dense: FloatArray = np.asarray(matrix, dtype=np.float64)

    @property
    def n(self) -> int:
        return int(self._dense.shape[0])

    @property
    def matrix(self) -> FloatArray:
        return self._dense

    def row(self, x: int, cols: npt.NDArray[np.intp]) -> FloatArray:
        return np.asarray(self._dense[x, cols])

    def block(self, rows: npt.ArrayLike, cols: npt.ArrayLike) -> FloatArray:
        r = np.asarray(rows, dtype=np.intp)
        c = np.asarray(cols, dtype=np.intp)
        return np.asarray(self._dense[np.ix_(r, c)])

    def _row_range(self, r0: int, r1: int) -> FloatArray:
        return self._dense[r0:r1]


class GramDistances(Distances):
    """Distances of 0/1 scores held as their exact integer Gram matrix, formed on demand.

    ``counts`` (the diagonal: each actor's number of successes) and ``degenerate`` (some actor is a
    zero or constant vector, which takes the degenerate rule) are what the formula needs besides
    the Gram entries; the compiled Prim (:mod:`._popcount`) reads them as they are.
    """

    lazy = True

    def __init__(self, gram: np.ndarray, metric: str, n_items: int, binary: bool = True) -> None:
        super().__init__(metric, n_items, binary)
        self._gram = gram
        self.counts: FloatArray = np.diagonal(gram).astype(np.float64)
        # zero (cosine) or constant (correlation) 0/1 vectors, which take the degenerate rule
        self.degenerate = bool(((self.counts == 0) | (self.counts == n_items)).any())
        self._formed: FloatArray | None = None

    @property
    def n(self) -> int:
        return int(self._gram.shape[0])

    @property
    def gram(self) -> np.ndarray:
        return self._gram

    def _formula(self, g: np.ndarray, cr: Any, cc: FloatArray) -> FloatArray:
        return _binary_formula(g, cr, cc, self.metric, self.n_items, self.degenerate)

    @property
    def matrix(self) -> FloatArray:
        """The dense N x N matrix (formed once, in row blocks, when first asked for)."""
        if self._formed is None:
            G, cnt, n = self._gram, self.counts, self.n
            D = np.empty((n, n), dtype=np.float64)
            step = max(1, (1 << 20) // max(1, n))
            for r0 in range(0, n, step):
                D[r0:r0 + step] = self._formula(G[r0:r0 + step], cnt[r0:r0 + step, None], cnt)
            np.fill_diagonal(D, 0.0)
            self._formed = D
        return self._formed

    def row(self, x: int, cols: npt.NDArray[np.intp]) -> FloatArray:
        return self._formula(self._gram[x, cols], self.counts[x], self.counts[cols])

    def block(self, rows: npt.ArrayLike, cols: npt.ArrayLike) -> FloatArray:
        r = np.asarray(rows, dtype=np.intp)
        c = np.asarray(cols, dtype=np.intp)
        out = self._formula(self._gram[np.ix_(r, c)], self.counts[r, None], self.counts[c])
        out[r[:, None] == c[None, :]] = 0.0
        return out


def as_distances(D: np.ndarray | Distances) -> Distances:
    """Wrap a plain square matrix (metric unknown) or pass a :class:`Distances` through."""
    if isinstance(D, Distances):
        return D
    return DenseDistances(np.asarray(D, dtype=np.float64), "cosine", 1, False)


def check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise UsageError(f"unknown distance metric {metric!r}; use one of {', '.join(METRICS)}")
    return metric


def d_max(metric: str, n_items: int) -> float:
    """The largest distance ``metric`` can give between two vectors in [0,1]^L (SPEC 2)."""
    check_metric(metric)
    return {"cosine": 1.0, "correlation": 2.0, "euclidean": float(np.sqrt(n_items)),
            "manhattan": float(n_items)}[metric]


def is_binary(B: np.ndarray) -> bool:
    """True when every value is exactly 0 or 1 (checked in row blocks to bound the memory)."""
    if B.dtype == np.bool_:
        return True
    if B.dtype.kind in "iu":
        return bool(B.size == 0 or (B.min() >= 0 and B.max() <= 1))
    step = max(1, (1 << 22) // max(1, B.shape[1]))
    for r0 in range(0, B.shape[0], step):
        blk = B[r0:r0 + step]
        # for x in [0, 1], x * (1 - x) == 0 exactly iff x is 0 or 1 (no underflow to 0 is possible)
        if np.any(blk * (1 - blk)):
            return False
    return True


# --------------------------------------------------------------------------- Gram matrices
def _fill_lower(G: np.ndarray, block: int) -> None:
    n = G.shape[0]
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        G[r1:, r0:r1] = G[r0:r1, r1:].T


def _unpack(part: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """Add the low digits of packed counts ``P`` to ``lo`` and the high digits to ``hi`` (whose rows
    may be fewer: the last packed row can lack a high partner)."""
    P, lo, hi = part
    T = np.multiply(P, np.float32(1.0 / _PACK))
    np.floor(T, out=T)  # exact: P < 2^24 is an integer and 1/4096 a power of two
    hi += T[: hi.shape[0]]
    T *= np.float32(_PACK)
    P -= T
    lo += P


def binary_gram(B: np.ndarray) -> npt.NDArray[np.float32]:
    """Exact ``B B^T`` of a 0/1 matrix as float32 integer counts (see the module docstring).

    Exact for any L below 2^24 items; larger L is accumulated in float64 chunks of 2^24 - 1.
    """
    n, L = B.shape
    if L >= 1 << 24:
        acc = np.zeros((n, n), dtype=np.float64)
        for c0 in range(0, L, (1 << 24) - 1):
            acc += binary_gram(B[:, c0:c0 + (1 << 24) - 1])
        return acc  # type: ignore[return-value]
    if n < _SMALL_N:
        X = np.ascontiguousarray(B, dtype=np.float32)
        return np.asarray(X @ X.T, dtype=np.float32)
    G = np.zeros((n, n), dtype=np.float32)
    with ThreadPoolExecutor(max_workers=2) as pool:
        for c0 in range(0, L, _CHUNK):
            X = B[:, c0:c0 + _CHUNK]
            if X.dtype != np.float32 or X.strides[1] != 4:
                X = np.ascontiguousarray(X, dtype=np.float32)  # float32 row-major B is used in place
            for r0 in range(0, n, _ROW_BLOCK):
                r1 = min(n, r0 + _ROW_BLOCK)
                h = (r1 - r0 + 1) // 2  # rows r0..r0+h-1 in the low digit, the rest in the high digit
                k = r1 - r0 - h
                A = X[r0:r0 + h].copy()
                A[:k] += np.float32(_PACK) * X[r0 + h:r1]
                P = A @ X[r0:].T  # (h, n - r0): G_lo + 4096 G_hi, integers < 2^24, exact
                # split the counts again, in two threads (numpy releases the GIL; BLAS is idle here)
                mid = h // 2
                parts = [(P[:mid], G[r0:r0 + mid, r0:], G[r0 + h:r0 + h + min(mid, k), r0:]),
                         (P[mid:], G[r0 + mid:r0 + h, r0:], G[r0 + h + min(mid, k):r1, r0:])]
                list(pool.map(_unpack, parts))
    _fill_lower(G, _ROW_BLOCK)
    return G


def float_gram(X: np.ndarray) -> FloatArray:
    """``X X^T`` in float64, upper block triangle only, mirrored."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    n = X.shape[0]
    if n < _SMALL_N:
        return np.asarray(X @ X.T)
    G = np.empty((n, n), dtype=np.float64)
    for r0 in range(0, n, _ROW_BLOCK):
        r1 = min(n, r0 + _ROW_BLOCK)
        G[r0:r1, r0:] = X[r0:r1] @ X[r0:].T
    _fill_lower(G, _ROW_BLOCK)
    return G


# --------------------------------------------------------------------------- distances
def _ratio_distance(G: np.ndarray, sq: FloatArray, *, clip_hi: float | None) -> FloatArray:
    """``1 - G_jk / sqrt(sq_j sq_k)`` in float64 row blocks, clipped to [0, clip_hi]; 1 where either
    ``sq`` is 0 (SPEC 2). Cosine of nonnegative vectors needs no upper clip: ``G >= 0``."""
    n = G.shape[0]
    D = np.empty((n, n), dtype=np.float64)
    zero = sq <= 0
    step = max(1, (1 << 20) // max(1, n))  # row blocks of ~8 MiB: few Python steps, still in cache
    den = np.empty((step, n), dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):  # zero-norm rows are overwritten below
        for r0 in range(0, n, step):
            r1 = min(n, r0 + step)
            d = den[: r1 - r0]
            np.multiply.outer(sq[r0:r1], sq, out=d)
            np.sqrt(d, out=d)  # sqrt(n_j n_k): exactly n when n_j = n_k = n, so equal rows give 0
            blk = D[r0:r1]
            blk[...] = G[r0:r1]  # widen first: a same-type divide is faster than a mixed one
            blk /= d
            np.subtract(1.0, blk, out=blk)
            np.maximum(blk, 0.0, out=blk)
            if clip_hi is not None:
                np.minimum(blk, clip_hi, out=blk)
    if zero.any():
        D[zero, :] = 1.0
        D[:, zero] = 1.0
    np.fill_diagonal(D, 0.0)
    return D


def _duplicate_groups(B: np.ndarray) -> list[npt.NDArray[np.intp]]:
    """Groups (size >= 2) of exactly equal rows: a random projection in row blocks (no copy of B)
    proposes candidates with equal keys, which are then compared element by element."""
    n, L = B.shape
    if n < 2:
        return []
    v = np.random.default_rng(12345).standard_normal(L)
    key = np.empty(n)
    step = max(1, (1 << 18) // max(1, L))
    for r0 in range(0, n, step):
        # a row-wise reduction, not BLAS: every row is summed in the same order wherever it sits,
        # so equal rows get bit-equal keys (a gemv kernel may round rows differently by position)
        key[r0:r0 + step] = (np.asarray(B[r0:r0 + step], dtype=np.float64) * v).sum(axis=1)
    order = np.argsort(key, kind="stable")
    ks = key[order]
    groups: list[npt.NDArray[np.intp]] = []
    bounds = np.flatnonzero(np.diff(ks) != 0) + 1
    for cand in np.split(order, bounds):
        left = sorted(cand.tolist())
        while len(left) > 1:
            same = [j for j in left if np.array_equal(B[j], B[left[0]])]
            if len(same) > 1:
                groups.append(np.array(same, dtype=np.intp))
            left = [j for j in left if j not in same]
    return groups


def _zero_duplicates(B: np.ndarray, D: FloatArray, metric: str) -> None:
    """Equal actors are at distance exactly 0, whatever the rounding of the Gram route (except the
    degenerate vectors of cosine and correlation, which stay at 1 by the paper's rule)."""
    for grp in _duplicate_groups(B):
        row = np.asarray(B[grp[0]], dtype=np.float64)
        if metric == "cosine" and not row.any():
            continue
        if metric == "correlation" and np.ptp(row) == 0:
            continue
        D[np.ix_(grp, grp)] = 0.0


def exact_gram(B: np.ndarray, gram: str = "auto") -> np.ndarray:
    """Exact integer ``B B^T`` of a 0/1 matrix: by popcount (int32) or float32 BLAS (SPEC 2).

    ``gram="auto"`` takes the popcount kernel when numba imports (and N >= 128), else BLAS; both
    give the same counts.
    """
    if _fast.use_popcount(gram, True, B.shape[0]):
        kernels = _fast.kernels()
        assert kernels is not None
        return np.asarray(kernels.popcount_gram(B))
    return binary_gram(B)


def pairwise_distances(B: np.ndarray, metric: str = "cosine", *, binary: bool | None = None,
                       gram: str = "auto") -> Distances:
    """Distances between the rows (actors) of a behaviour matrix with values in [0, 1], no NaN.

    ``binary`` may be passed when the caller already knows whether ``B`` is 0/1; otherwise it is
    checked. ``gram`` picks how 0/1 scores' Gram matrix is counted: ``"popcount"`` (numba),
    ``"blas"`` (float32 BLAS) or ``"auto"`` (popcount when numba imports); the distances are the same
    bit for bit. See the module docstring for how each case stays exact.
    """
    check_metric(metric)
    _fast.check_gram(gram)
    B = np.asarray(B)
    if B.ndim != 2:
        raise UsageError(f"a behaviour matrix must be 2-D (actors x items), got {B.ndim}-D")
    n, L = B.shape
    if binary is None:
        binary = is_binary(B)
    if n == 0:
        return DenseDistances(np.zeros((0, 0)), metric, L, binary)
    if binary:  # equal rows give exactly 0 by the integer arithmetic
        return GramDistances(exact_gram(B, gram), metric, L, binary)
    _fast.use_popcount(gram, False)  # an explicit gram="popcount" on graded scores is an error
    D = _graded_distances(B, metric, L)
    _zero_duplicates(B, D, metric)
    return DenseDistances(D, metric, L, binary)


def _binary_formula(g: np.ndarray, cr: Any, cc: FloatArray, metric: str, L: int,
                    degenerate: bool = True) -> FloatArray:
    """Distances from exact 0/1 Gram entries ``g`` and success counts ``cr`` (rows, broadcast) and
    ``cc`` (columns). Every input is an exact integer, so each distance is rounded once or twice.
    ``degenerate=False`` promises no zero (cosine) or constant (correlation) vector is involved."""
    g = np.asarray(g, dtype=np.float64)
    cr = np.asarray(cr, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if metric == "cosine":
            # sqrt(n_j n_k) is exactly n when n_j = n_k = n (n^2 < 2^53), so equal rows give 0, and
            # G^2 <= n_j n_k holds exactly for integers, so no clipping is needed
            den = np.sqrt(cr * cc)
            np.divide(g, den, out=den)
            out = np.subtract(1.0, den, out=den)
            if degenerate:
                out = np.where((cr == 0) | (cc == 0), 1.0, out)  # zero norm: d = 1 (SPEC 2)
            return np.asarray(out)
        if metric == "correlation":
            # L^2 cov = L G - n_j n_k and L^2 var = n (L - n): exact integers in float64
            vr, vc = cr * (L - cr), cc * (L - cc)
            out = 1.0 - (L * g - cr * cc) / np.sqrt(vr * vc)
            np.clip(out, 0.0, 2.0, out=out)
            out = np.where((g == cr) & (cr == cc), 0.0, out)  # equal rows (the product may round)
            if degenerate:
                out = np.where((vr == 0) | (vc == 0), 1.0, out)  # constant vector: d = 1 (routerlab)
            return np.asarray(out)
    ham = np.maximum(cr + cc - 2.0 * g, 0.0)  # Hamming count |x - y|_1 = |x - y|_2^2, exact
    return np.asarray(np.sqrt(ham) if metric == "euclidean" else ham)


def _graded_distances(B: np.ndarray, metric: str, L: int) -> FloatArray:
    X = np.asarray(B, dtype=np.float64)
    n = X.shape[0]
    if metric == "manhattan":
        from scipy.spatial.distance import cdist

        D = np.empty((n, n), dtype=np.float64)
        step = max(1, (1 << 16) // max(1, n))
        for r0 in range(0, n, step):
            D[r0:r0 + step] = cdist(X[r0:r0 + step], X, "cityblock")
        D = np.maximum(D, D.T)  # cdist is symmetric up to summation order; make it exactly so
    elif metric == "cosine":
        G = float_gram(X)
        D = _ratio_distance(G, np.diagonal(G).copy(), clip_hi=None)
    elif metric == "correlation":
        Xc = X - X.mean(axis=1, keepdims=True)
        G = float_gram(Xc)
        sq = np.diagonal(G).copy()
        # a row that is constant in exact arithmetic can keep a tiny nonzero centred norm
        const = np.ptp(X, axis=1) == 0
        sq[const] = 0.0
        D = _ratio_distance(G, sq, clip_hi=2.0)
    else:  # euclidean
        G = float_gram(X)
        sq = np.diagonal(G).copy()
        d2 = np.add.outer(sq, sq)
        d2 -= 2.0 * G
        np.maximum(d2, 0.0, out=d2)
        # where |x|^2 + |y|^2 - 2 x.y cancels badly, recompute the difference directly
        risky = np.argwhere(np.triu(d2 < 1e-6 * np.add.outer(sq, sq), 1))
        for j, k in risky:
            diff = X[j] - X[k]
            d2[j, k] = d2[k, j] = float(diff @ diff)
        D = np.sqrt(d2)
        D = np.maximum(D, D.T)
    np.fill_diagonal(D, 0.0)
    return D
