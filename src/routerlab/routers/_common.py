"""Array helpers shared by the router families (private: not a router module).

Everything here is vectorised and NaN-aware: a NaN training cell is *unobserved* and never counts
as a 0. Nearest-neighbour search is blocked so that 36,000 x 30,000 queries fit in a few hundred MB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from routerlab.data.table import RoutingTable, column_means
from routerlab.errors import UsageError
from routerlab.metrics._arrays import column_blocks, row_blocks
from routerlab.metrics.latency import correct_mask

if TYPE_CHECKING:
    import scipy.sparse as sp

FloatMatrix = npt.NDArray[np.float64]
FloatVector = npt.NDArray[np.float64]
IntMatrix = npt.NDArray[np.intp]
Metric = Literal["cosine", "euclidean"]

# Elements of one block of the (queries x train) similarity matrix: 2**24 float32 = 64 MB.
_BLOCK_ELEMENTS = 1 << 24
# Output tokens assumed when only TTFT/ITL are known (a nominal answer length, for ranking only).
NOMINAL_OUTPUT_TOKENS = 256
# Score put on an actor a router knows nothing about: below every score in [0, 1].
UNKNOWN_SCORE = -1.0


def prior_means(score: npt.ArrayLike) -> FloatVector:
    """Per-actor mean observed training score, with the overall mean (or 0.5) for an actor never
    observed: the fallback every learner uses where it has no evidence. The overall mean is summed a block
    of rows at a time (0/1 scores: exactly the one-pass mean; graded ones: up to the last bits of float64)."""
    means = column_means(score)
    unknown = np.isnan(means)
    if not unknown.any():  # the usual case: no pass for an overall mean nobody needs
        return means
    s = np.asarray(score)
    total, count = 0.0, 0
    for rows in row_blocks(*s.shape):  # a block of rows at a time: no float64 copy of a logged training table
        block = np.asarray(s[rows], dtype=np.float64)
        observed = ~np.isnan(block)
        total += float(block[observed].sum())
        count += int(observed.sum())
    overall = total / count if count else 0.5
    return np.where(unknown, overall, means)


def one_hot(index: npt.ArrayLike, m: int) -> FloatMatrix:
    idx = np.asarray(index, dtype=np.intp)
    out = np.zeros((idx.shape[0], m))
    out[np.arange(idx.shape[0]), idx] = 1.0
    return out


def finite_rank_scores(values: npt.ArrayLike, higher_is_better: bool = True) -> FloatVector:
    """Turn a per-actor attribute (NaN = unknown) into finite scores: known values keep their order,
    unknown ones rank below every known one."""
    v = np.asarray(values, dtype=np.float64)
    if not higher_is_better:
        v = -v
    known = ~np.isnan(v)
    if not known.any():
        return np.zeros(v.shape[0])
    low = float(v[known].min()) - 1.0 - float(np.ptp(v[known]))
    return np.where(known, v, low)


def l2_normalize(X: npt.ArrayLike) -> npt.NDArray[np.float32]:
    x = np.asarray(X, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.asarray(x / np.where(norms > 0, norms, 1.0), dtype=np.float32)


@dataclass(frozen=True)
class SearchBase:
    """The rows ``nearest`` searches, prepared once (L2-normalised for cosine, with their squared norms for
    euclidean): a router that searches the same training rows on every call (a server routing one request at
    a time) prepares them at fit instead of per call. The numbers are those of preparing them per call."""

    rows: npt.NDArray[np.float32]
    metric: Metric
    sq: npt.NDArray[np.float32] | None = None


def search_base(base: npt.ArrayLike, metric: Metric = "cosine") -> SearchBase:
    """``base`` prepared for :func:`nearest` with ``metric`` (exactly what :func:`nearest` does to it per call)."""
    b = np.asarray(base, dtype=np.float32)
    if metric == "cosine":
        return SearchBase(l2_normalize(b), metric)
    if metric == "euclidean":
        return SearchBase(b, metric, np.einsum("ij,ij->i", b, b))
    raise UsageError(f"unknown metric {metric!r}; use cosine or euclidean")


def nearest(
    query: npt.ArrayLike,
    base: npt.ArrayLike | SearchBase,
    k: int,
    metric: Metric = "cosine",
    exclude_self: bool = False,
) -> tuple[IntMatrix, FloatMatrix]:
    """The ``k`` nearest rows of ``base`` for every row of ``query``: (indices, similarities), both
    (n, k), nearest first (equal similarities: lower index first; which of several rows tied at the
    k-th place is kept is deterministic but unspecified). Similarity is the cosine, or minus the
    squared Euclidean distance. Blocked matrix products, no per-query loop. ``exclude_self`` drops
    the diagonal (query and base are the same matrix, e.g. a train-train graph). ``base`` may be a
    :class:`SearchBase` prepared once with the same metric (same results, no per-call preparation)."""
    q = np.asarray(query, dtype=np.float32)
    if metric not in ("cosine", "euclidean"):
        raise UsageError(f"unknown metric {metric!r}; use cosine or euclidean")
    prepared = base if isinstance(base, SearchBase) else search_base(base, metric)
    if prepared.metric != metric:
        raise ValueError(f"nearest: the search base was prepared for {prepared.metric}, asked for {metric}")
    b, b_sq = prepared.rows, prepared.sq
    if metric == "cosine":
        q = l2_normalize(q)
    n, n_base = q.shape[0], b.shape[0]
    k = int(min(k, n_base - (1 if exclude_self else 0)))
    if k < 1:
        raise UsageError("nearest-neighbour search needs at least one other training query")
    idx = np.empty((n, k), dtype=np.intp)
    sim = np.empty((n, k), dtype=np.float64)
    step = max(1, _BLOCK_ELEMENTS // max(n_base, 1))
    for start in range(0, n, step):
        stop = min(n, start + step)
        s = q[start:stop] @ b.T
        if b_sq is not None:
            q_sq = np.einsum("ij,ij->i", q[start:stop], q[start:stop])
            s = 2.0 * s - b_sq[None, :] - q_sq[:, None]  # = -||q - b||^2
        if exclude_self:
            rows = np.arange(start, stop)
            s[rows - start, rows] = -np.inf
        part = _top_k(s, k)
        vals = np.take_along_axis(s, part, axis=1)
        order = np.lexsort((part, -vals), axis=1)  # by similarity desc, then index asc
        idx[start:stop] = np.take_along_axis(part, order, axis=1)
        sim[start:stop] = np.take_along_axis(vals, order, axis=1)
    return idx, sim


def _top_k(s: npt.NDArray[np.float32], k: int, group: int = 64) -> IntMatrix:
    """Column indices of the k largest entries of each row (unordered). For long rows: the k-th
    largest of the row's group maxima (groups of 64 columns) is a lower bound of its k-th largest
    entry, so only the entries above it are candidates; ~4x faster than argpartition on the full row."""
    r, n = s.shape
    if k >= n:
        return np.asarray(np.broadcast_to(np.arange(n), (r, n)).copy(), dtype=np.intp)
    n_groups = n // group
    if n_groups < 4 * k:
        return np.asarray(np.argpartition(-s, k - 1, axis=1)[:, :k], dtype=np.intp)
    gmax = s[:, : n_groups * group].reshape(r, n_groups, group).max(axis=2)
    bound = np.partition(gmax, n_groups - k, axis=1)[:, n_groups - k]
    rows, cols = np.nonzero(s >= bound[:, None])
    counts = np.bincount(rows, minlength=r)
    width = int(counts.max())
    pos = np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)
    cand = np.full((r, width), -np.inf, dtype=s.dtype)
    cand_idx = np.zeros((r, width), dtype=np.intp)
    cand[rows, pos] = s[rows, cols]
    cand_idx[rows, pos] = cols
    if width > k:
        sel = np.argpartition(-cand, k - 1, axis=1)[:, :k]
        return np.asarray(np.take_along_axis(cand_idx, sel, axis=1), dtype=np.intp)
    return cand_idx


def neighbour_matrix(idx: IntMatrix, weights: npt.ArrayLike, n_base: int) -> sp.csr_matrix:
    """Sparse (n, n_base) matrix with ``weights[i, j]`` at column ``idx[i, j]``."""
    import scipy.sparse as sp  # here, not at the top: listing the routers needs no scipy

    n, k = idx.shape
    w = np.broadcast_to(np.asarray(weights, dtype=np.float64), (n, k))
    rows = np.repeat(np.arange(n), k)
    return sp.csr_matrix((w.ravel(), (rows, idx.ravel())), shape=(n, n_base))


def propagate(
    W: sp.csr_matrix, score: npt.ArrayLike, prior: FloatVector, prior_weight: float = 0.0
) -> FloatMatrix:
    """Weighted mean of the observed scores of each row's neighbours, per actor:
    ``(W @ y + c * prior) / (W @ observed + c)``. An actor that no neighbour observed gets ``prior``."""
    score_arr = np.asarray(score)
    out = np.broadcast_to(prior, (W.shape[0], score_arr.shape[1])).copy()
    if W.nnz * 4 < score_arr.shape[0]:
        # few neighbours (a server routing one request): only their training rows are read. The columns of W
        # are renumbered in the same order and each row keeps its entries in place, so the sparse product adds
        # the same products in the same order: the same numbers as over the whole training matrix
        import scipy.sparse as sp

        used, inverse = np.unique(W.indices, return_inverse=True)
        W = sp.csr_matrix((W.data, inverse.astype(W.indices.dtype), W.indptr), shape=(W.shape[0], used.size))
        score_arr = score_arr[used]
    # a block of actors at a time (a sparse product gives every column the same sums whatever the block), so
    # the float64 copies are of one block, not of the 28,799 x 8,500 training matrix
    for cols in column_blocks(score_arr.shape[0], score_arr.shape[1]):
        s = np.asarray(score_arr[:, cols], dtype=np.float64)
        obs = ~np.isnan(s)
        num = np.asarray(W @ np.where(obs, s, 0.0)) + prior_weight * prior[None, cols]
        den = np.asarray(W @ obs.astype(np.float64)) + prior_weight
        np.divide(num, den, out=out[:, cols], where=den > 1e-12)
    return out


# ---------------------------------------------------------------------------- actor expectations
def expected_actor_cost(train: RoutingTable) -> tuple[FloatVector, str]:
    """Expected USD per query of each actor: its mean observed training cost; where a table has no
    cost, the blended price ``input_price + output_price`` (USD per 1M tokens, ranking use only).
    NaN = unknown. Returns (values, source)."""
    if train.cost_usd is not None:
        means = column_means(train.cost_usd)
        if not np.isnan(means).all():
            return means, "mean train cost_usd"
    a = train.actors
    price = np.where(np.isnan(a.input_price), 0.0, a.input_price) + a.output_price
    return np.asarray(price, dtype=np.float64), "input_price + output_price (per 1M tokens)"


def expected_actor_latency(train: RoutingTable) -> tuple[FloatVector, str]:
    """Expected seconds per query of each actor: its mean observed training latency; else
    ``(TTFT + 255 * ITL) / 1000`` for a nominal 256-token answer (TTFT or ITL alone when only one
    is known). NaN = unknown. Returns (values, source)."""
    if train.latency_s is not None:
        means = column_means(train.latency_s)
        if not np.isnan(means).all():
            return means, "mean train latency_s"
    a = train.actors
    ttft, itl = a.ttft_ms, a.itl_ms
    known = ~np.isnan(ttft) | ~np.isnan(itl)
    est = (np.nan_to_num(ttft) + (NOMINAL_OUTPUT_TOKENS - 1) * np.nan_to_num(itl)) / 1000.0
    return np.where(known, est, np.nan), f"(TTFT + {NOMINAL_OUTPUT_TOKENS - 1} * ITL) / 1000"


# ---------------------------------------------------------------------------- latency-aware labels
def ldcg_matrix(score: npt.ArrayLike, latency: npt.ArrayLike, threshold: float = 0.5) -> FloatMatrix:
    """Per cell, the L-DCG (SPEC 5, RouterWorld eq. 3) the query would get if routed to that actor,
    computed with ``metrics.latency.latency_ranks`` (so ranks and ties match the metric); NaN where
    the cell is unobserved. A query where some correct actor's latency is unknown gets plain
    correctness (1/0) instead, since its ranks are undefined."""
    from routerlab.metrics.latency import latency_ranks

    s = np.asarray(score, dtype=np.float64)
    lat = np.asarray(latency, dtype=np.float64)
    m = s.shape[1]
    correct = correct_mask(s, threshold)
    ok = ~(correct & np.isnan(lat)).any(axis=1)
    out = correct.astype(np.float64)
    if ok.any():
        s_ok, lat_ok = s[ok], np.where(np.isnan(lat[ok]), 0.0, lat[ok])
        for a in range(m):
            choice = np.full(s_ok.shape[0], a, dtype=np.intp)
            out[ok, a] = latency_ranks(s_ok, choice, lat_ok, threshold, nan_policy="zero").l_dcg
    return np.where(np.isnan(s), np.nan, out)


def observed_rows(score: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    return np.asarray((~np.isnan(np.asarray(score, dtype=np.float64))).any(axis=1))
