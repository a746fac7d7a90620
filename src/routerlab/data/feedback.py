"""What a router learns from (SPEC 1, observability): the training outcomes it is allowed to see.

*Full* feedback is every observed cell of the training queries (full observability). *Logged* feedback is at
most one observed cell per query, the actor a logging policy chose, with the probability it had of choosing it
(its propensity), as in a deployment where only the chosen model's outcome is ever seen. Outcomes reach a router
only through :meth:`routerlab.routers.base.Router.fit`, as one of these; query features never carry them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from routerlab.data.table import MATRIX_FIELDS, RoutingTable
from routerlab.errors import UsageError

FeedbackKind = Literal["full", "logged"]


@dataclass(frozen=True, eq=False)
class Feedback:
    """Training outcomes: ``table`` (NaN = not observed) and, for logged feedback, ``propensity`` (n,), the
    logging policy's probability of the one actor observed on each query."""

    table: RoutingTable
    propensity: npt.NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        if self.propensity is None:
            return
        p = np.asarray(self.propensity, dtype=np.float64)
        n = self.table.n_queries
        if p.shape != (n,):
            raise UsageError(f"logged feedback needs one propensity per query: got shape {p.shape} for {n} queries")
        bad = ~np.isfinite(p) | (p <= 0) | (p > 1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise UsageError(f"propensity of query {self.table.queries.ids[i]!r} is {p[i]!r}; it must be in (0, 1]")
        several = (~np.isnan(self.table.score)).sum(axis=1) > 1
        if several.any():
            i = int(np.flatnonzero(several)[0])
            raise UsageError(f"logged feedback observes at most one actor per query; query "
                             f"{self.table.queries.ids[i]!r} has {int((~np.isnan(self.table.score[i])).sum())}")
        object.__setattr__(self, "propensity", p)

    @property
    def kind(self) -> FeedbackKind:
        return "full" if self.propensity is None else "logged"

    @classmethod
    def full(cls, table: RoutingTable) -> Feedback:
        """Every observed cell of ``table`` (full observability)."""
        return cls(table)

    @classmethod
    def logged(cls, table: RoutingTable, actor: npt.ArrayLike, propensity: npt.ArrayLike) -> Feedback:
        """Only cell (q, ``actor[q]``) of each query of ``table`` stays observed (score and, where known,
        tokens, latency and cost), with the logging policy's ``propensity`` of that actor."""
        a = np.asarray(actor)
        n, m = table.n_queries, table.n_actors
        if a.shape != (n,) or not np.issubdtype(a.dtype, np.integer) or (n and (a.min() < 0 or a.max() >= m)):
            raise UsageError(f"logged feedback needs one actor index in 0..{m - 1} per query ({n} queries)")
        keep = np.zeros((n, m), dtype=bool)
        keep[np.arange(n), a] = True
        masked: dict[str, Any] = {}
        for key in MATRIX_FIELDS:
            mat = getattr(table, key)
            if mat is not None:
                masked[key] = np.where(keep, mat, np.float32(np.nan)).astype(np.float32)
        return cls(replace(table, **masked), np.asarray(propensity, dtype=np.float64))


def draw_actions(distribution: npt.ArrayLike, rng: np.random.Generator
                 ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """One actor per row drawn from ``distribution`` (n, m) (rows summing to 1), vectorised (one uniform per row,
    inverse CDF), with its probability: (actor, propensity). What a logging policy does to one batch of queries."""
    p = np.asarray(distribution, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] == 0 or not np.isfinite(p).all() or (p < 0).any() or not np.allclose(
            p.sum(axis=1), 1.0, atol=1e-6):
        raise UsageError("a logging distribution must be an (n, m) matrix of probabilities with rows summing to 1")
    cdf = np.cumsum(p, axis=1)
    u = rng.random(p.shape[0]) * cdf[:, -1]
    actor = np.minimum((cdf <= u[:, None]).sum(axis=1), p.shape[1] - 1)
    # never land on a zero-probability actor through rounding at the top of the CDF
    zero = p[np.arange(p.shape[0]), actor] <= 0
    if zero.any():
        actor[zero] = p[zero].argmax(axis=1)
    return actor.astype(np.intp), p[np.arange(p.shape[0]), actor]


def as_feedback(train: RoutingTable | Feedback) -> Feedback:
    """A training table is full feedback; feedback stays as it is."""
    return train if isinstance(train, Feedback) else Feedback.full(train)
