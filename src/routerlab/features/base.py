"""What a router sees of the queries it routes: their vectors, the queries and the actors' descriptions.

Never an outcome: a :class:`Features` keeps the queries (ids, text, dataset, split, metadata) and the actors
(names, sizes, prices, TTFT/ITL) of the table it was made from, and drops the score, token, latency and cost
matrices, so a router cannot read the outcomes of the queries it routes, by accident or on purpose. Training
outcomes reach a router through ``fit``; the bounds that are allowed to read test outcomes (the oracle) receive
them explicitly through :meth:`routerlab.routers.base.Router.reveal`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from routerlab.data.table import Actors, Queries, RoutingTable
from routerlab.errors import DataError


@dataclass(frozen=True, eq=False, init=False)
class Features:
    """Vectors ``X`` (n, d) of n ``queries``, in the same order, made by ``encoder``; the ``actors`` a router
    chooses among. Built from a table (``Features(X, table, encoder)``) whose outcomes it does not keep."""

    X: npt.NDArray[np.float32]
    queries: Queries
    actors: Actors
    encoder: str

    def __init__(self, X: npt.ArrayLike, table: RoutingTable, encoder: str) -> None:
        self._set(X, table.queries, table.actors, encoder)

    @classmethod
    def of(cls, X: npt.ArrayLike, queries: Queries, actors: Actors, encoder: str) -> Features:
        """Features from their parts (no table needed)."""
        out = cls.__new__(cls)
        out._set(X, queries, actors, encoder)
        return out

    def _set(self, X: npt.ArrayLike, queries: Queries, actors: Actors, encoder: str) -> None:
        x = np.asarray(X, dtype=np.float32)
        n = len(queries.ids)
        if x.ndim != 2 or x.shape[0] != n:
            raise DataError(f"features have shape {x.shape}, expected ({n}, d)")
        if not np.isfinite(x).all():
            row = int(np.argwhere(~np.isfinite(x))[0, 0])
            raise DataError(f"feature vector is not finite (query {queries.ids[row]!r})", row=row + 1)
        object.__setattr__(self, "X", x)
        object.__setattr__(self, "queries", queries)
        object.__setattr__(self, "actors", actors)
        object.__setattr__(self, "encoder", encoder)

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def actor_names(self) -> list[str]:
        return [str(a) for a in self.actors.names.tolist()]

    def take(self, rows: npt.NDArray[np.intp]) -> Features:
        return Features.of(self.X[rows], self.queries.take(rows), self.actors, self.encoder)
