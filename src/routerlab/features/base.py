"""What a router sees of the queries it routes: their vectors, and the table rows they come from."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from routerlab.data.table import RoutingTable
from routerlab.errors import DataError


@dataclass(frozen=True, eq=False)
class Features:
    """Vectors ``X`` (n, d) for the ``table``'s n queries, in the same order, made by ``encoder``.

    ``table`` gives routers the query metadata and actor attributes. Only bounds that are allowed to
    look at outcomes (the oracle) read ``table.score``; a learned router must not.
    """

    X: npt.NDArray[np.float32]
    table: RoutingTable
    encoder: str

    def __post_init__(self) -> None:
        X = np.asarray(self.X, dtype=np.float32)
        if X.ndim != 2 or X.shape[0] != self.table.n_queries:
            raise DataError(f"features have shape {X.shape}, expected ({self.table.n_queries}, d)")
        if not np.isfinite(X).all():
            row = int(np.argwhere(~np.isfinite(X))[0, 0])
            raise DataError(f"feature vector is not finite (query {self.table.queries.ids[row]!r})", row=row + 1)
        object.__setattr__(self, "X", X)

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    def take(self, rows: npt.NDArray[np.intp]) -> Features:
        return Features(self.X[rows], self.table.select_queries(rows), self.encoder)
