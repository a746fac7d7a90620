"""What a router learns from (SPEC 1, observability): the training outcomes it is allowed to see.

*Full* feedback is every observed cell of the training queries (full observability). *Logged* feedback is at
most one observed cell per query, the actor a logging policy chose, with the probability it had of choosing it
(its propensity), as in a deployment where only the chosen model's outcome is ever seen. Outcomes reach a router
only through :meth:`routerlab.routers.base.Router.fit`, as one of these; query features never carry them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from routerlab.data.table import MATRIX_FIELDS, RoutingTable
from routerlab.errors import UsageError
from routerlab.metrics._arrays import row_blocks

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
        score = self.table.score
        several = np.zeros(n, dtype=bool)
        for rows in row_blocks(*score.shape):  # observed cells per query, without a full-size mask
            several[rows] = np.count_nonzero(~np.isnan(score[rows]), axis=1) > 1
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
        rows = np.arange(n)
        masked: dict[str, Any] = {}
        for key in MATRIX_FIELDS:
            mat = getattr(table, key)
            if mat is not None:
                out = np.full((n, m), np.nan, dtype=np.float32)  # one new matrix: no mask, no second copy
                out[rows, a] = mat[rows, a]
                masked[key] = out
        return cls(replace(table, **masked), np.asarray(propensity, dtype=np.float64))


def draw_actions(distribution: npt.ArrayLike, rng: np.random.Generator
                 ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """One actor per row drawn from ``distribution`` (n, m) (rows summing to 1), vectorised (one uniform per row,
    inverse CDF), with its probability: (actor, propensity). What a logging policy does to one batch of queries."""
    p = np.asarray(distribution, dtype=np.float64)
    if p.ndim != 2:
        raise UsageError(BAD_DISTRIBUTION)
    return draw_rows(p.shape[0], p.shape[1], lambda rows: p[rows], rng)


BAD_DISTRIBUTION = "a logging distribution must be an (n, m) matrix of probabilities with rows summing to 1"


def draw_rows(n: int, m: int, rows_of: Callable[[slice], npt.NDArray[np.float64]], rng: np.random.Generator
              ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """:func:`draw_actions` of the (n, m) distribution whose rows ``rows_of(block)`` gives a block at a time
    (each query's draw is its own: one uniform per row, drawn for all rows first), so a policy over a
    28,799 x 8,500 training split never builds its whole distribution and CDF."""
    if m == 0:
        raise UsageError(BAD_DISTRIBUTION)
    u = rng.random(n)
    actor = np.empty(n, dtype=np.intp)
    propensity = np.empty(n)
    for rows in row_blocks(n, m):
        p = rows_of(rows)
        if not np.isfinite(p).all() or (p < 0).any() or not np.allclose(p.sum(axis=1), 1.0, atol=1e-6):
            raise UsageError(BAD_DISTRIBUTION)
        cdf = np.cumsum(p, axis=1)
        a = np.minimum((cdf <= (u[rows] * cdf[:, -1])[:, None]).sum(axis=1), m - 1)
        # never land on a zero-probability actor through rounding at the top of the CDF
        at = np.arange(p.shape[0])
        zero = p[at, a] <= 0
        if zero.any():
            a[zero] = p[zero].argmax(axis=1)
        actor[rows] = a
        propensity[rows] = p[at, a]
    return actor, propensity


def as_feedback(train: RoutingTable | Feedback) -> Feedback:
    """A training table is full feedback; feedback stays as it is."""
    return train if isinstance(train, Feedback) else Feedback.full(train)
