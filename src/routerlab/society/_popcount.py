"""numba kernels for exact 0/1 HSE (SPEC 2): a bit-packed AND + popcount Gram matrix and a Prim MST.

Imported only through :mod:`routerlab.society._fast` (numba is a core dependency, imported lazily).
Nothing here rounds: the Gram entries are integer counts, and the Prim forms each distance
with the same float64 operations, in the same order, as :func:`routerlab.society.distances._binary_formula`,
so its tree (edges, weights and tie order) is the one the NumPy Prim in :mod:`.entropy` builds.

* **Packing**: actor j's 0/1 scores become bits of ``ceil(L / 512) * 8`` uint64 words (zero padded to
  whole 512-bit vectors); the row count is padded to a multiple of 4 with zero rows.
* **Gram**: ``G_jk = sum_w popcount(P_jw & P_kw)``. The inner kernel takes 4 x 4 actors at once over
  512-bit vectors (8 loads for 16 ``vpopcntq``), written as explicit ``<8 x i64>`` LLVM IR because
  LLVM's loop vectoriser stops at 256-bit registers on these CPUs. Packed rows start on 64-byte
  boundaries (no load straddles two cache lines). Rectangular tiles of actors (``_TILE_I`` x
  ``_TILE_J``) of the upper triangle are handed to numba's threads one at a time (dynamic, so a
  slower core takes fewer); each 16-count block is written to both triangles as it is done.
  The loop is 3 vector uops per 512 x 1 bit pairs (and, popcount, add), on the two 512-bit ports:
  about 1.5 cycles per ``vpopcntq``, the limit of this formulation (~1.6 measured).
* **Prim**: dense O(N^2), reading Gram entries (or a dense matrix) and forming distances on the fly;
  the next vertex's argmin is found in the same pass that updates the distances.

Compiled code is cached on disk (numba's ``cache=True``: next to this file, or in numba's user-wide
cache directory when that is read-only, or in ``$NUMBA_CACHE_DIR``); where no cache location is
writable at all, the kernels are compiled in memory on every first call instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
import numpy.typing as npt
from llvmlite import ir
from numba import prange
from numba import types as _types
from numba.core import cgutils as _cgutils
from numba.extending import intrinsic

from routerlab.society.distances import Distances, GramDistances

types: Any = _types  # numba's own annotations are partial: used untyped here
cgutils: Any = _cgutils


_LANES = 8  # uint64 lanes per 512-bit vector
_WORDS = 64 * _LANES  # items per vector
_BLOCK = 4  # actors per side of the register block (4 x 4 counts per sweep)
_UNROLL = 2  # 512-bit steps per loop iteration (fewer pointer increments among the vector ops)
_TILE_I = 512  # actors per tile row (measured on 2 Xeon cores at 8,500 x 36,000: 256-1024 x 64-128 within noise)
_TILE_J = 64  # actors per tile column: 64 packed rows of 36,000 items stay in L2
METRIC_CODE = {"cosine": 0, "correlation": 1, "euclidean": 2, "manhattan": 3}


def _jit(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    """``numba.njit(cache=True, ...)``, or without the disk cache where numba finds no writable place."""

    def deco(fn: Callable[..., Any]) -> Any:
        try:
            return numba.njit(cache=True, **options)(fn)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            return numba.njit(cache=False, **options)(fn)

    return deco


# --------------------------------------------------------------------------- packing
@_jit(parallel=True)
def _pack(B: Any, P: Any) -> None:  # pragma: no cover - compiled
    n, L = B.shape
    full = L // 64
    for i in prange(n):
        for k in range(full):
            base = k * 64
            x = np.uint64(0)
            for b in range(64):
                if B[i, base + b] != 0:
                    x |= np.uint64(1) << np.uint64(b)
            P[i, k] = x
        if full * 64 < L:
            x = np.uint64(0)
            for b in range(L - full * 64):
                if B[i, full * 64 + b] != 0:
                    x |= np.uint64(1) << np.uint64(b)
            P[i, full] = x


def _aligned_zeros(rows: int, words: int) -> npt.NDArray[np.uint64]:
    """A zeroed ``rows x words`` uint64 matrix whose rows start on 64-byte boundaries (``words`` is a
    multiple of 8): NumPy's large allocations sit 16 bytes past a page, so every 512-bit load of an
    unaligned copy would straddle two cache lines (measured ~10% of the Gram's time)."""
    buf = np.zeros(rows * words + _LANES, dtype=np.uint64)
    skip = (-buf.ctypes.data // 8) % _LANES
    return buf[skip:skip + rows * words].reshape(rows, words)


def pack_rows(B: np.ndarray) -> npt.NDArray[np.uint64]:
    """The 0/1 rows of ``B`` as bits (nonzero = 1), zero padded as the Gram kernel needs."""
    n, L = B.shape
    words = -(-L // _WORDS) * _LANES
    rows = -(-n // _BLOCK) * _BLOCK
    P = _aligned_zeros(rows, max(words, _LANES))
    if n and L:
        if B.flags.c_contiguous:
            _pack(B, P)
        else:  # e.g. a table's scores transposed: packed in row blocks of ~32 MB, not copied whole
            step = max(1, (1 << 22) // L)
            for r0 in range(0, n, step):
                _pack(np.ascontiguousarray(B[r0:r0 + step]), P[r0:r0 + step])
    return P


# --------------------------------------------------------------------------- Gram
def _and_popcount_4x4_typing(typingctx: Any, P: Any, i: Any, j: Any) -> Any:  # pragma: no cover
    """Counts ``popcount(P[i + r] & P[j + c])`` summed over the whole row, for r, c in 0..3."""
    sig = types.UniTuple(types.uint64, _BLOCK * _BLOCK)(P, i, j)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        arr, iv, jv = args
        ary = context.make_array(signature.args[0])(context, builder, arr)
        i64 = ir.IntType(64)
        vec = ir.VectorType(i64, _LANES)
        words = builder.extract_value(ary.shape, 1)

        def row(base: Any, k: int) -> Any:
            start = builder.mul(builder.add(base, ir.Constant(i64, k)), words)
            return builder.gep(ary.data, [start])

        a_rows = [row(iv, r) for r in range(_BLOCK)]
        b_rows = [row(jv, c) for c in range(_BLOCK)]
        accs = [cgutils.alloca_once_value(builder, ir.Constant(vec, None)) for _ in range(_BLOCK * _BLOCK)]
        ctpop = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec]),
                                               f"llvm.ctpop.v{_LANES}i64")
        steps = builder.udiv(words, ir.Constant(i64, _LANES))

        def load(ptr: Any, w: Any) -> Any:
            return builder.load(builder.bitcast(builder.gep(ptr, [w]), vec.as_pointer()), align=8)

        def step(index: Any) -> None:  # one 512-bit slice of the 8 rows: 16 and + popcount + add
            w = builder.mul(index, ir.Constant(i64, _LANES))
            a = [load(p, w) for p in a_rows]
            for c in range(_BLOCK):
                b = load(b_rows[c], w)
                for r in range(_BLOCK):
                    acc = accs[r * _BLOCK + c]
                    count = builder.call(ctpop, [builder.and_(a[r], b)])
                    builder.store(builder.add(builder.load(acc), count), acc)

        unroll = ir.Constant(i64, _UNROLL)
        with cgutils.for_range(builder, builder.udiv(steps, unroll)) as loop:
            first = builder.mul(loop.index, unroll)
            for u in range(_UNROLL):
                step(builder.add(first, ir.Constant(i64, u)))
        tail = builder.mul(builder.udiv(steps, unroll), unroll)
        with cgutils.for_range(builder, steps, start=tail) as loop:
            step(loop.index)
        reduce = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [vec]),
                                                f"llvm.vector.reduce.add.v{_LANES}i64")
        out = [builder.call(reduce, [builder.load(acc)]) for acc in accs]
        return context.make_tuple(builder, signature.return_type, out)

    return sig, codegen


_and_popcount_4x4: Any = intrinsic(_and_popcount_4x4_typing)


@_jit(nogil=True)
def _tile(P: Any, G: Any, i0: int, i1: int, j0: int, j1: int, n: int) -> None:  # pragma: no cover
    for i in range(i0, i1, 4):
        for j in range(j0, j1, 4):
            if j + 4 <= i:  # wholly below the diagonal
                continue
            s = _and_popcount_4x4(P, i, j)
            for r in range(4):
                ii = i + r
                if ii >= n:
                    break
                for c in range(4):
                    jj = j + c
                    if jj < ii or jj >= n:
                        continue
                    G[ii, jj] = s[r * 4 + c]
                    G[jj, ii] = s[r * 4 + c]


@_jit(parallel=True)
def _gram(P: Any, G: Any, n: int, ti: int, tj: int) -> None:  # pragma: no cover - compiled
    count = 0
    for i0 in range(0, n, ti):
        count += (n - i0 + tj - 1) // tj
    tiles = np.empty((count, 2), dtype=np.int64)
    t = 0
    for i0 in range(0, n, ti):
        for j0 in range(i0, n, tj):
            tiles[t, 0] = i0
            tiles[t, 1] = j0
            t += 1
    for k in prange(count):  # handed out one tile at a time (the caller's chunk size 1), in this order
        i0 = tiles[k, 0]
        j0 = tiles[k, 1]
        _tile(P, G, i0, min(i0 + ti, n), j0, min(j0 + tj, n), n)


def popcount_gram(B: np.ndarray) -> npt.NDArray[np.int32]:
    """Exact ``B B^T`` of a 0/1 matrix (nonzero counts as 1) as int32 counts, by AND + popcount."""
    n, L = B.shape
    if L >= 1 << 31:
        raise ValueError("the popcount Gram counts in int32: fewer than 2^31 items")
    G = np.empty((n, n), dtype=np.int32)
    if n:
        P = pack_rows(B)
        # dynamic scheduling: a thread that runs slower (a busy or throttled core) takes fewer tiles,
        # where equal static shares left the other core idle for up to half the Gram's time
        previous = numba.set_parallel_chunksize(1)
        try:
            _gram(P, G, n, _TILE_I, _TILE_J)
        finally:
            numba.set_parallel_chunksize(previous)
    return G


# --------------------------------------------------------------------------- Prim
@_jit(nogil=True)
def _distance(g: float, cr: float, cc: float, metric: int, L: float,
              degenerate: bool) -> float:  # pragma: no cover - compiled
    # the operations of distances._binary_formula, one entry at a time
    if metric == 0:
        if degenerate and (cr == 0.0 or cc == 0.0):
            return 1.0
        return 1.0 - g / math.sqrt(cr * cc)
    if metric == 1:
        vr = cr * (L - cr)
        vc = cc * (L - cc)
        if degenerate and (vr == 0.0 or vc == 0.0):
            return 1.0
        if g == cr and cr == cc:
            return 0.0
        out = 1.0 - (L * g - cr * cc) / math.sqrt(vr * vc)
        if out < 0.0:
            return 0.0
        if out > 2.0:
            return 2.0
        return out
    ham = cr + cc - 2.0 * g
    if ham < 0.0:
        ham = 0.0
    if metric == 2:
        return math.sqrt(ham)
    return ham


@_jit(nogil=True)
def _prim_scan(G: Any, cnt: Any, metric: int, L: float, degenerate: bool, x: int, rem: Any, crem: Any,
               best: Any, parent: Any, size: int, first: bool) -> int:  # pragma: no cover - compiled
    # updates best/parent over rem[:size] with vertex x (first: sets them) and returns the first k
    # with the least best[k] that is below +inf and not NaN, or -1 when there is none
    cx = cnt[x]
    j = -1
    bj = np.inf
    for k in range(size):
        d = _distance(float(G[x, rem[k]]), cx, crem[k], metric, L, degenerate)
        if first:
            best[k] = d
            b = d
        else:
            b = best[k]
            if d < b:
                best[k] = d
                parent[k] = x
                b = d
        if b < bj:
            j = k
            bj = b
    return j


@_jit(nogil=True)
def _prim_gram(G: Any, cnt: Any, metric: int, L: float, degenerate: bool,
               u: Any, v: Any, w: Any) -> None:  # pragma: no cover - compiled
    # The NumPy Prim's tree: the same remaining-vertex order (swap-remove) and the same argmin (the
    # first least entry; index 0 when best[0] is NaN or nothing is below +inf), found in the same
    # pass that updates the distances.
    n = G.shape[0]
    size = n - 1
    rem = np.arange(1, n)
    crem = cnt[1:].copy()  # cnt[rem[k]], kept in rem's order
    parent = np.zeros(size, dtype=np.intp)
    best = np.empty(size, dtype=np.float64)
    j = _prim_scan(G, cnt, metric, L, degenerate, 0, rem, crem, best, parent, size, True)
    for e in range(n - 1):
        if j < 0 or np.isnan(best[0]):
            j = 0
        x = rem[j]
        u[e] = parent[j]
        v[e] = x
        w[e] = best[j]
        size -= 1
        rem[j] = rem[size]
        best[j] = best[size]
        parent[j] = parent[size]
        crem[j] = crem[size]
        j = _prim_scan(G, cnt, metric, L, degenerate, x, rem, crem, best, parent, size, False)


@_jit(nogil=True)
def _prim_dense(D: Any, u: Any, v: Any, w: Any) -> None:  # pragma: no cover - compiled
    n = D.shape[0]
    size = n - 1
    rem = np.arange(1, n)
    parent = np.zeros(size, dtype=np.intp)
    best = np.empty(size, dtype=np.float64)
    for k in range(size):
        best[k] = D[0, rem[k]]
    for e in range(n - 1):
        j = 0
        for k in range(1, size):
            if best[k] < best[j]:
                j = k
        x = rem[j]
        u[e] = parent[j]
        v[e] = x
        w[e] = best[j]
        size -= 1
        rem[j] = rem[size]
        best[j] = best[size]
        parent[j] = parent[size]
        for k in range(size):
            d = D[x, rem[k]]
            if d < best[k]:
                best[k] = d
                parent[k] = x


def prim(dist: Distances) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """The minimum spanning tree of :func:`routerlab.society.entropy.minimum_spanning_tree`, compiled."""
    n = dist.n
    u = np.empty(max(n - 1, 0), dtype=np.intp)
    v = np.empty(max(n - 1, 0), dtype=np.intp)
    w = np.empty(max(n - 1, 0), dtype=np.float64)
    if n < 2:
        return u, v, w
    if isinstance(dist, GramDistances):  # distances formed entry by entry from the Gram matrix
        _prim_gram(np.ascontiguousarray(dist.gram), dist.counts, METRIC_CODE[dist.metric],
                   float(dist.n_items), dist.degenerate, u, v, w)
    else:
        _prim_dense(np.ascontiguousarray(dist.matrix), u, v, w)
    return u, v, w


# --------------------------------------------------------------------------- input scan
@_jit(parallel=True)
def _scan01(B: Any, chunks: int, flags: Any) -> None:  # pragma: no cover - compiled
    n, L = B.shape
    step = (n + chunks - 1) // chunks
    for c in prange(chunks):
        for i in range(c * step, min(n, (c + 1) * step)):
            other = False  # a value that is not exactly 0 or 1 (NaN included)
            zero = False
            one = False
            for k in range(L):
                x = B[i, k]
                other |= (x != 0) & (x != 1)
                zero |= x == 0
                one |= x == 1
            flags[c, 1] |= zero
            flags[c, 2] |= one
            if other:
                flags[c, 0] = True
                break


def scan01(B: np.ndarray) -> tuple[float, float] | None:
    """One parallel pass over a C-contiguous float matrix: ``(min, max)`` when every value is exactly
    0 or 1 (so none is NaN or infinite), else None (the caller's full NumPy scan then decides)."""
    n = B.shape[0]
    chunks = max(1, min(n, 16))
    flags = np.zeros((chunks, 3), dtype=np.bool_)
    _scan01(B, chunks, flags)
    if flags[:, 0].any():
        return None
    return (0.0 if flags[:, 1].any() else 1.0), (1.0 if flags[:, 2].any() else 0.0)

