"""Greedy max-HSE coresets and the diminishing-returns curve (SPEC 2; paper sec. 7, app. 15).

Rule (SPEC 2): start from the pair at the largest distance, then repeatedly add the actor that
raises HSE most; ties go to the lower index. For the start pair a tie goes to the pair (j, k), j < k,
that comes first in row-major order; for an added actor, candidates whose score is within 1e-10
(relative) of the best count as tied, so that floating-point noise never decides between actors
that are equal in exact arithmetic. The joint criterion maximises
``alpha * normHSE(S) + (1 - alpha) * oracle_accuracy(S)`` with the same rule (the start pair is the
pair with the best joint score, which for alpha = 1 is the SPEC's farthest pair); oracle accuracy is
the mean over items of the best score in S, on the same behaviour matrix as the HSE.

Single linkage is scored for all candidates at once, without rebuilding anything per candidate.
When actor c joins subset S, the clusters of S + c at level h are those of S at h, except that every
S-cluster holding an actor within distance h of c fuses with c. So a node v of S's dendrogram (alive
on [birth_v, death_v)) stays apart from c until ``min(death_v, min_{i in v} d(c, i))``: one vectorised
min per dendrogram node gives every candidate's cluster-size events, and a sort plus cumulative sums
along them gives every candidate's exact HSE. Cost per step: O(N s log s) array work for subset size
s, against O(N s^2) Python-level work for rebuilding the dendrogram per candidate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from routerlab._words import plural
from routerlab.errors import UsageError
from routerlab.progress import Progress
from routerlab.society.behaviour import NanRule, SocietyLike
from routerlab.society.distances import Distances, as_distances, exact_gram, is_binary, pairwise_distances
from routerlab.society.entropy import (
    check_linkage,
    hse_from_linkage,
    linkage_matrix,
    normalize,
    prepare,
    subset_hse,
)

FloatArray = npt.NDArray[np.float64]
TIE_RTOL = 1e-10


@dataclass(frozen=True)
class CurvePoint:
    """One point of the greedy curve: the first ``size`` actors of the order."""

    size: int
    hse: float
    hse_normalized: float
    oracle_accuracy: float | None = None
    objective: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"size": self.size, "hse": self.hse, "hse_normalized": self.hse_normalized}
        if self.oracle_accuracy is not None:
            out["oracle_accuracy"] = self.oracle_accuracy
        if self.objective is not None:
            out["objective"] = self.objective
        return out


@dataclass(frozen=True, eq=False)
class Coreset:
    """The greedy order, its curve, and the smallest sizes reaching 90% / 95% of the full HSE.

    ``order`` may run past ``k`` (the greedy goes on until 95% of the full society's HSE is
    reached, within ``max_size``); :attr:`selected` is the coreset of size ``k``.
    """

    k: int
    order: list[int]
    names: list[str]
    curve: list[CurvePoint]
    full_hse: float
    full_hse_normalized: float
    size_90: int | None
    size_95: int | None
    alpha: float
    metric: str
    linkage: str
    notes: list[str] = field(default_factory=list)

    @property
    def selected(self) -> list[int]:
        return self.order[: self.k]

    @property
    def selected_names(self) -> list[str]:
        return [self.names[i] for i in self.selected]

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "alpha": self.alpha,
            "order": self.selected_names,
            "curve": [p.to_dict() for p in self.curve],
            "greedy_order": [self.names[i] for i in self.order],
            "full_hse": self.full_hse,
            "full_hse_normalized": self.full_hse_normalized,
            "size_90": self.size_90,
            "size_95": self.size_95,
            "notes": self.notes,
        }


# --------------------------------------------------------------------------- single-linkage scoring
def candidate_hse_single(
    D: np.ndarray | Distances, subset: npt.ArrayLike, candidates: npt.ArrayLike,
) -> FloatArray:
    """Exact single-linkage HSE of ``subset + [c]`` for every c in ``candidates`` (see module doc)."""
    dist = as_distances(D)
    S = np.asarray(subset, dtype=np.intp)
    C = np.asarray(candidates, dtype=np.intp)
    s = S.size
    if C.size == 0:
        return np.empty(0)
    if s == 0:
        return np.zeros(C.size)
    if s == 1:
        return dist.block(C, S)[:, 0]  # two actors: H = 1 bit on [0, d)
    Z = linkage_matrix(dist.subset(S), "single")
    step = max(1, (1 << 21) // (4 * s))  # candidates per batch: bounded temporary arrays
    out = np.empty(C.size)
    for c0 in range(0, C.size, step):
        out[c0:c0 + step] = _score_batch(Z, s, dist.block(C[c0:c0 + step], S))
    return out


def _score_batch(Z: np.ndarray, s: int, a: np.ndarray) -> FloatArray:
    """Exact HSE of S + c for a batch of candidates, given S's dendrogram ``Z`` and ``a = d(c, S)``."""
    nodes = 2 * s - 1
    birth = np.zeros(nodes)
    birth[s:] = Z[:, 2]
    death = np.full(nodes, np.inf)
    kids = Z[:, :2].astype(np.intp)
    death[kids[:, 0]] = Z[:, 2]
    death[kids[:, 1]] = Z[:, 2]
    size = np.ones(nodes)
    size[s:] = Z[:, 3]
    M = np.empty((a.shape[0], nodes))
    M[:, :s] = a
    for t in range(s - 1):
        np.minimum(M[:, kids[t, 0]], M[:, kids[t, 1]], out=M[:, s + t])
    end = np.minimum(M, death)
    np.maximum(end, birth, out=end)  # a node already fused with c at birth is never apart
    pos = np.concatenate([np.broadcast_to(birth, end.shape), end], axis=1)
    xlogx = size * np.log2(size)
    wW = np.concatenate([size, -size])
    wF = np.concatenate([xlogx, -xlogx])
    order = np.argsort(pos, axis=1, kind="stable")
    ps = np.take_along_axis(pos, order, axis=1)
    W = np.cumsum(wW[order], axis=1)  # actors of S still apart from c
    F = np.cumsum(wF[order], axis=1)  # sum of n log2 n over their clusters
    total = s + 1.0
    x = np.clip(total - W, 1.0, None)  # c's cluster (ties make transient values; widths are 0 there)
    H = np.log2(total) - (F + x * np.log2(x)) / total
    width = np.diff(ps, axis=1)
    return np.asarray(np.einsum("ij,ij->i", H[:, :-1], width))


def _candidate_hse_generic(dist: Distances, subset: list[int], candidates: np.ndarray, linkage: str) -> FloatArray:
    out = np.empty(candidates.size)
    for i, c in enumerate(candidates.tolist()):
        out[i] = subset_hse(dist, [*subset, c], linkage)
    return out


# --------------------------------------------------------------------------- oracle accuracy
class _Oracle:
    """Oracle accuracy (mean best score in S) of S + c for every candidate c, kept incrementally."""

    def __init__(self, B: np.ndarray) -> None:
        self.B = B
        self.binary = is_binary(B)
        self.L = B.shape[1]
        self.best = np.zeros(self.L)

    def pair_matrix(self, gram: np.ndarray | None = None) -> FloatArray:
        """Oracle accuracy of every pair; ``gram`` (exact 0/1 counts of B) saves recomputing it."""
        B = self.B
        if self.binary:
            G = (exact_gram(B) if gram is None else gram).astype(np.float64)
            cnt = np.diagonal(G).copy()
            return np.asarray((np.add.outer(cnt, cnt) - G) / self.L)
        tot = B.sum(axis=1, dtype=np.float64)
        man = pairwise_distances(B, "manhattan", binary=False).matrix
        # max(x, y) = (x + y + |x - y|) / 2
        return np.asarray((np.add.outer(tot, tot) + man) / (2 * self.L))

    def add(self, j: int) -> None:
        np.maximum(self.best, self.B[j], out=self.best)

    def value(self) -> float:
        return float(self.best.mean())

    def with_each(self, C: np.ndarray) -> FloatArray:
        base = self.best.sum()
        if self.binary:
            # items each actor would newly solve: 0/1 counts < 2^24, exact in float32 BLAS
            miss = (1.0 - self.best).astype(np.float32)
            gain = np.empty(self.B.shape[0])
            step = max(1, (1 << 22) // max(1, self.L))
            for r0 in range(0, self.B.shape[0], step):
                gain[r0:r0 + step] = np.asarray(self.B[r0:r0 + step], dtype=np.float32) @ miss
            return np.asarray((base + gain[C]) / self.L)
        out = np.empty(C.size)
        step = max(1, (1 << 22) // max(1, self.L))
        for r0 in range(0, C.size, step):
            blk = np.asarray(self.B[C[r0:r0 + step]], dtype=np.float64)
            out[r0:r0 + step] = np.maximum(blk, self.best).sum(axis=1) / self.L
        return out


def _first_max(values: np.ndarray) -> int:
    """Index of the first value within TIE_RTOL of the maximum (ties go to the lower index)."""
    top = float(np.max(values))
    tol = TIE_RTOL * max(1.0, abs(top))
    return int(np.flatnonzero(values >= top - tol)[0])


def _thresholds(curve: list[CurvePoint], full: float) -> tuple[int | None, int | None]:
    tol = 1e-12 * max(1.0, abs(full))
    out: list[int | None] = []
    for frac in (0.9, 0.95):
        hit = next((p.size for p in curve if p.hse >= frac * full - tol), None)
        out.append(hit)
    return out[0], out[1]


def greedy_coreset(
    dist: Distances, k: int | None = None, linkage: str = "single", *, alpha: float = 1.0,
    behaviour: np.ndarray | None = None, names: list[str] | None = None, max_size: int | None = None,
    full_hse: float | None = None, stop_fraction: float | None = 0.95,
) -> Coreset:
    """The greedy order over precomputed distances (SPEC 2 rule; see the module docstring).

    The greedy goes past ``k`` actors until the curve reaches ``stop_fraction`` of the full
    society's HSE (``None``: on to ``max_size``), and never beyond ``max_size`` (default: all
    actors). ``behaviour`` (the matrix the distances come from) is needed for the joint criterion,
    ``alpha < 1``, and adds oracle accuracy to the curve.
    """
    check_linkage(linkage)
    n = dist.n
    if not 0.0 <= alpha <= 1.0:
        raise UsageError(f"alpha must be in [0, 1], got {alpha}")
    if alpha < 1.0 and behaviour is None:
        raise UsageError("the joint HSE + accuracy criterion (alpha < 1) needs the behaviour matrix")
    if n < 1:
        raise UsageError("a coreset needs at least one actor")
    k = n if k is None else int(k)
    if not 1 <= k <= n:
        raise UsageError(f"coreset size must be in 1..{n}, got {k}")
    limit = n if max_size is None else max(k, min(n, int(max_size)))
    names = list(names) if names is not None else [f"actor{i}" for i in range(n)]
    dmax = dist.d_max
    if full_hse is None:
        full_hse = hse_from_linkage(linkage_matrix(dist, linkage), n)
    full_norm = normalize(full_hse, n, dmax)
    oracle = _Oracle(behaviour) if behaviour is not None else None

    # start: the best pair (row-major first on ties)
    if n == 1:
        order = [0]
    else:
        if oracle is not None and alpha < 1.0:
            D = dist.matrix
            pairs = oracle.pair_matrix(dist.gram if dist.n == oracle.B.shape[0] else None)
            score = alpha * (D / dmax if dmax > 0 else np.zeros_like(D)) + (1.0 - alpha) * pairs
            np.fill_diagonal(score, -np.inf)
            # symmetric: the first maximum in row-major order is the lexicographically first pair j < i
            j, i = divmod(int(np.argmax(score)), n)
            order = [j, i]
        else:
            order = list(dist.farthest_pair())
    curve: list[CurvePoint] = []

    def point(size: int) -> CurvePoint:
        """The curve point of the first ``size`` actors; the oracle must hold exactly those."""
        h = subset_hse(dist, order[:size], linkage) if size > 1 else 0.0
        hn = normalize(h, size, dmax)
        acc = obj = None
        if oracle is not None:
            acc = oracle.value()
            obj = alpha * hn + (1.0 - alpha) * acc
        return CurvePoint(size, h, hn, acc, obj)

    for size in range(1, len(order) + 1):
        if oracle is not None:
            oracle.add(order[size - 1])
        curve.append(point(size))
    in_set = np.zeros(n, dtype=bool)
    in_set[order] = True
    bar = Progress("coreset", limit, initial=len(order), unit="actor", enabled=None if n > 500 else False)
    while len(order) < limit:
        bar.update(1)
        if (len(order) >= k and stop_fraction is not None
                and curve[-1].hse >= stop_fraction * full_hse - 1e-12 * max(1.0, abs(full_hse))):
            break
        C = np.flatnonzero(~in_set)
        if linkage == "single":
            vals = candidate_hse_single(dist, order, C)
        else:
            vals = _candidate_hse_generic(dist, order, C, linkage)
        s1 = len(order) + 1
        if oracle is not None and alpha < 1.0:
            norm = vals / (np.log2(s1) * dmax) if dmax > 0 else np.zeros_like(vals)
            vals = alpha * norm + (1.0 - alpha) * oracle.with_each(C)
        c = int(C[_first_max(vals)])
        order.append(c)
        in_set[c] = True
        if oracle is not None:
            oracle.add(c)
        curve.append(point(len(order)))
    bar.close()
    s90, s95 = _thresholds(curve, full_hse)
    notes = []
    if s95 is None:
        notes.append(f"the greedy stopped at {len(order)} of {plural(n, 'actor')} (max_size) before reaching 95% "
                     "of the full society's HSE")
    return Coreset(k=k, order=order, names=names, curve=curve, full_hse=full_hse,
                   full_hse_normalized=full_norm, size_90=s90, size_95=s95, alpha=alpha,
                   metric=dist.metric, linkage=linkage, notes=notes)


def coreset(
    society: SocietyLike, k: int | None = None, metric: str = "cosine", linkage: str = "single", *,
    alpha: float = 1.0, split: str | None = "train", nan: NanRule = "drop", max_size: int | None = None,
) -> Coreset:
    """Greedy max-HSE coreset of a society (SPEC 2): the first ``k`` actors of the greedy order.

    ``alpha < 1`` uses the joint criterion ``alpha * normHSE + (1 - alpha) * oracle_accuracy``.
    The curve runs on until 95% of the full HSE is reached, so ``size_90`` / ``size_95`` are known.
    """
    soc, dist, _ = prepare(society, metric, split=split, nan=nan)
    return greedy_coreset(dist, k, linkage, alpha=alpha, behaviour=soc.matrix, names=soc.names,
                          max_size=max_size)


@dataclass(frozen=True)
class RandomCurve:
    """HSE of random subsets by size: the mean and a 10th-90th percentile band (the greedy's baseline)."""

    sizes: npt.NDArray[np.intp]
    mean: FloatArray
    low: FloatArray
    high: FloatArray
    n_draws: int
    seed: int


def random_subsets_curve(
    dist: Distances, sizes: npt.ArrayLike | None = None, linkage: str = "single", *,
    n_draws: int = 30, seed: int = 0,
) -> RandomCurve:
    """HSE of ``n_draws`` uniformly random subsets per size (seeded), for comparison with the greedy."""
    n = dist.n
    sz = np.arange(1, n + 1) if sizes is None else np.asarray(sizes, dtype=np.intp)
    rng = np.random.default_rng(seed)
    vals = np.zeros((sz.size, n_draws))
    for i, s in enumerate(sz.tolist()):
        for r in range(n_draws):
            if s > 1:
                vals[i, r] = subset_hse(dist, np.sort(rng.choice(n, size=s, replace=False)), linkage)
    return RandomCurve(sz, vals.mean(axis=1), np.percentile(vals, 10, axis=1),
                       np.percentile(vals, 90, axis=1), n_draws, seed)
