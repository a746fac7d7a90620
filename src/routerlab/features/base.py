"""What a router sees of the queries it routes: their vectors, the queries and the actors' descriptions.

Never an outcome: a :class:`Features` keeps the queries (ids, text, dataset, split and the *visible* metadata
columns) and the actors (names, sizes, prices, TTFT/ITL) of the table it was made from, and drops the score,
token, latency and cost matrices and every hidden metadata column (a gold answer, the oracle's pick, a latent
difficulty), so a router cannot read the outcomes of the queries it routes, by accident or on purpose. This is
enforced here, where every :class:`Features` is built, so no protocol can bypass it; reading a hidden column by
name is a UsageError naming it (README "What a router sees"). Training outcomes reach a router through ``fit``
(whose table has its hidden columns dropped too); the bounds that are allowed to read test outcomes (the oracle)
receive them explicitly through :meth:`routerlab.routers.base.Router.reveal`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from routerlab.data.table import Actors, Queries, QueryColumns, RoutingTable
from routerlab.errors import DataError, UsageError

# How to get each per-query signal of a small model (two-model routing, SPEC 6), for error messages.
SIGNAL_SOURCES = {
    "hidden": "the small model's per-layer hidden states",
    "option_logits": "the small model's option-letter logits",
    "self_ask": "the small model's self-assessment (logit Yes - No)",
    "samples": "the small model's sampled answers",
}


@dataclass(frozen=True, eq=False, init=False)
class Features:
    """Vectors ``X`` (n, d) of n ``queries``, in the same order, made by ``encoder``; the ``actors`` a router
    chooses among. Built from a table (``Features(X, table, encoder)``) whose outcomes and hidden query columns
    it does not keep: ``queries.extra`` holds the visible columns only (a :class:`QueryColumns` naming the hidden
    ones when there are any).

    ``signals`` holds per-query arrays beyond ``X`` whose first axis is the queries, in the same order: the small
    model's own signals for two-model routing (SPEC 6; ``hidden`` (n, layers, dim), ``option_logits`` (n, K) NaN
    beyond a question's options, ``self_ask`` (n,), ``samples`` (n, k) answer-cluster codes, -1 = none; see
    :mod:`routerlab.features.signals`). ``take`` slices them with the rows."""

    X: npt.NDArray[np.float32]
    queries: Queries
    actors: Actors
    encoder: str
    signals: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __init__(self, X: npt.ArrayLike, table: RoutingTable, encoder: str) -> None:
        self._set(X, table.queries, table.actors, encoder)

    @classmethod
    def of(cls, X: npt.ArrayLike, queries: Queries, actors: Actors, encoder: str) -> Features:
        """Features from their parts (no table needed)."""
        out = cls.__new__(cls)
        out._set(X, queries, actors, encoder)
        return out

    def with_signals(self, signals: Mapping[str, npt.ArrayLike]) -> Features:
        """These features with ``signals`` added (replacing any of the same name); each array's first axis must
        be the n queries."""
        merged = {**self.signals}
        for name, value in signals.items():
            arr = np.asarray(value)
            if arr.ndim == 0 or arr.shape[0] != self.n:
                raise DataError(f"signal {name!r} has shape {arr.shape}, expected ({self.n}, ...)")
            merged[name] = arr
        out = Features.of(self.X, self.queries, self.actors, self.encoder)
        object.__setattr__(out, "signals", MappingProxyType(merged))
        return out

    def signal(self, name: str, router: str = "") -> np.ndarray:
        """The per-query signal ``name``; a UsageError saying how to get it when these features lack it."""
        if name not in self.signals:
            who = f"router {router!r} needs" if router else "this needs"
            what = SIGNAL_SOURCES.get(name, f"the signal {name!r}")
            raise UsageError(f"{who} {what}, which these features lack: extract them with `routerlab extract "
                             "--model local:MODEL --questions TABLE -o DIR` and pass --features DIR")
        return self.signals[name]

    def _set(self, X: npt.ArrayLike, queries: Queries, actors: Actors, encoder: str) -> None:
        x = np.asarray(X, dtype=np.float32)
        n = len(queries.ids)
        if x.ndim != 2 or x.shape[0] != n:
            raise DataError(f"features have shape {x.shape}, expected ({n}, d)")
        if not np.isfinite(x).all():
            row = int(np.argwhere(~np.isfinite(x))[0, 0])
            raise DataError(f"feature vector is not finite (query {queries.ids[row]!r})", row=row + 1)
        object.__setattr__(self, "X", x)
        object.__setattr__(self, "queries", queries.visible_only())  # the one place: no Features holds more
        object.__setattr__(self, "actors", actors)
        object.__setattr__(self, "encoder", encoder)
        object.__setattr__(self, "signals", MappingProxyType({}))

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def actor_names(self) -> list[str]:
        return [str(a) for a in self.actors.names.tolist()]

    @property
    def hidden_columns(self) -> tuple[str, ...]:
        """The names of the query metadata columns kept from routers (sorted); their values are not here."""
        extra = self.queries.extra
        return tuple(sorted(extra.hidden)) if isinstance(extra, QueryColumns) else ()

    def take(self, rows: npt.NDArray[np.intp]) -> Features:
        out = Features.of(self.X[rows], self.queries.take(rows), self.actors, self.encoder)
        if self.signals:
            object.__setattr__(out, "signals", MappingProxyType({k: v[rows] for k, v in self.signals.items()}))
        return out
