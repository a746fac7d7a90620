"""The two-model case of the router contract (SPEC 6, routerxbench-probedirichlet.txt sec. 3).

A small model answers unless the router escalates to a large one. Every two-model router is an ordinary
:class:`~routerlab.routers.base.Router` on a table of exactly two actors, **the small one first**: it
implements ``_small_score(features) -> (n,)``, "the small model will do" (higher = keep the query on the small
model), and its actor scores are ``[s, 0]``, so its selection distribution is ``softmax([s, 0])`` (for a probe
whose ``s`` is a logit, exactly its P(small is good enough)). :func:`two_model_score` reads ``s`` back from any
router's scores, so any router of the zoo restricted to the two actors takes part too: its score is its small
column minus its large one.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.metrics.curves import small_good_enough
from routerlab.routers.base import Router


class TwoModelRouter(Router):
    """Base of the routers that score "the small model will do" (module docstring). Subclasses implement
    ``_small_score`` and, when they learn, ``_fit``; most read a signal of the small model from
    ``features.signal(name, self.name)``."""

    two_model: ClassVar[bool] = True
    logged_recipe = None  # they learn "is the small model good enough", which needs both models' outcomes
    # the small-model signals it reads (features.signals names): a protocol checks them before any training
    reads_signals: ClassVar[tuple[str, ...]] = ()

    def check_signals(self, features: Features) -> None:
        """Raise the UsageError of :meth:`Features.signal` (how to get it) for the first signal this router reads
        that ``features`` lack; cheap, so a protocol checks every router before training any."""
        for name in self.reads_signals:
            features.signal(name, self.name)

    def _check_table(self, train: RoutingTable) -> None:
        if train.n_actors != 2:
            raise UsageError(f"router {self.name!r} routes between two models (small first, then large); the table "
                             f"has {train.n_actors} actors: select two (routerlab two-model --small A --large B)")

    def _fit(self, train: RoutingTable, features: Features) -> None:
        """Default: nothing to learn (confidence signals read off the small model)."""
        return None

    @abstractmethod
    def _small_score(self, features: Features) -> npt.ArrayLike:
        """(n,) "the small model will do" per query; higher keeps the query on the small model."""

    def small_score(self, features: Features) -> npt.NDArray[np.float64]:
        """The validated (n,) two-model score of the queries of ``features``."""
        self._check_ready(features)
        s = np.asarray(self._small_score(features), dtype=np.float64)
        if s.shape != (features.n,):
            raise RuntimeError(f"router {self.name!r} returned a two-model score of shape {s.shape}, "
                               f"expected ({features.n},)")
        if not np.isfinite(s).all():
            raise RuntimeError(f"router {self.name!r} returned a non-finite two-model score")
        return s

    def _scores(self, features: Features) -> npt.ArrayLike:
        s = self.small_score(features)
        return np.column_stack([s, np.zeros_like(s)])


def small_good_enough_labels(train: RoutingTable) -> npt.NDArray[np.bool_]:
    """The training label of a learned two-model router, SPEC 6's router-ability label: the small model (actor
    0) is right on 0/1 scores, small >= large on graded ones. Unobserved cells are a UsageError."""
    if train.n_actors != 2:
        raise UsageError(f"two-model labels need two actors (small, large); got {train.n_actors}")
    small, large = train.score[:, 0], train.score[:, 1]
    missing = np.isnan(small) | np.isnan(large)
    if missing.any():
        qid = train.queries.ids[int(np.flatnonzero(missing)[0])]
        raise UsageError(f"{int(missing.sum())} training queries lack a small or large score (first: {qid!r}); "
                         "two-model routing needs both")
    return small_good_enough(small, large)


def two_model_score(router: Router, scores: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The two-model score s(q) of ``router`` from its (n, 2) actor ``scores`` (small first): its small column
    minus its large one. For a :class:`TwoModelRouter` that is ``s`` itself."""
    m = np.asarray(scores, dtype=np.float64)
    if m.ndim != 2 or m.shape[1] != 2:
        raise UsageError(f"router {router.name!r}: two-model scores need (n, 2) actor scores, got {m.shape}")
    return np.asarray(m[:, 0] - m[:, 1], dtype=np.float64)
