"""The router contract and its registry.

A router implements two methods: ``_fit(train, features)`` and ``_scores(features) -> (n, m)``
(higher = better actor). The public :meth:`Router.fit` / :meth:`Router.scores` are template methods
that validate what the subclass returns, so a wrong shape or a NaN cannot slip into a metric.
Decisions (:meth:`Router.choose`), selection distributions (:meth:`Router.distribution`, default
softmax of the scores, SPEC 4) and cost/latency-aware utilities all come from one scoring pass.

Routers register with ``@register``; third-party routers join through the ``routerlab.routers``
entry-point group. ``routerlab routers`` lists them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Self, TypeVar

import numpy as np
import numpy.typing as npt

from routerlab._registry import Registry
from routerlab._spec import Constraint, Interval, check_constraints, check_option_type, parse_spec
from routerlab.data.feedback import Feedback, FeedbackKind, as_feedback, draw_actions
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.metrics.selection import softmax

FloatMatrix = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Routing:
    """One scoring pass of a router over n queries: ``scores`` (n, m), ``choice`` (n,) = their argmax (first
    on ties), ``distribution`` (n, m) = the selection distribution (rows sum to 1)."""

    scores: FloatMatrix
    choice: npt.NDArray[np.intp]
    distribution: FloatMatrix


class Router(ABC):
    """Base class of every router. Subclasses set ``name`` and ``summary`` and implement
    ``_fit`` and ``_scores``; they may override ``_distribution`` when they have their own."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    uses_test_labels: ClassVar[bool] = False  # True only for bounds such as the oracle
    # True for routers that act by sampling their selection distribution when deployed (bandits: their
    # distribution is their real action distribution); False = they act by their argmax (see ``act``).
    explores: ClassVar[bool] = False
    defaults: ClassVar[dict[str, Any]] = {}
    # The allowed range of every option in ``defaults`` (scikit-learn's ``_parameter_constraints``):
    # checked once here, so a router body can trust its options. Every option must have one.
    constraints: ClassVar[dict[str, Constraint]] = {}

    def __init__(self, **params: Any) -> None:
        unknown = set(params) - set(self.defaults) - {"seed"}
        if unknown:
            raise UsageError(f"router {self.name!r} has no option {sorted(unknown)}; options: "
                             f"{', '.join(sorted(self.defaults)) or 'none'}")
        owner = f"router {self.name!r}"
        for key, value in params.items():
            check_option_type(owner, key, value, self.defaults.get(key))
        self.params: dict[str, Any] = {**self.defaults, **params}
        check_constraints(owner, self.params, {**self.constraints, "seed": _SEED})
        self.seed: int = int(params.get("seed", 0))
        self.actor_names: list[str] = []
        self._fitted = False
        self.feedback_kind: FeedbackKind = "full"  # what the last fit learned from
        self.propensity: npt.NDArray[np.float64] | None = None

    # -- template methods ------------------------------------------------------------
    def fit(self, train: RoutingTable | Feedback, features: Features) -> Self:
        """Learn from training feedback (a training table is full feedback; :class:`Feedback` may also be logged:
        one observed actor per query with its propensity, kept as ``self.propensity``) and the query features."""
        feedback = as_feedback(train)
        train = feedback.table
        self.feedback_kind = feedback.kind
        self.propensity = feedback.propensity
        if features.n != train.n_queries:
            raise UsageError(f"{features.n} feature rows for {train.n_queries} training queries")
        if train.n_queries == 0:
            raise UsageError(f"router {self.name!r} cannot fit on an empty training set")
        self.check_applicable(train)
        self.actor_names = train.actor_names
        self._fit(train, features)
        self._fitted = True
        return self

    def scores(self, features: Features) -> FloatMatrix:
        """(n, m) actor scores for the queries of ``features``; higher = better actor."""
        self._check_ready(features)
        s = np.asarray(self._scores(features), dtype=np.float64)
        expected = (features.n, len(self.actor_names))
        if s.shape != expected:
            raise RuntimeError(f"router {self.name!r} returned scores of shape {s.shape}, expected {expected}")
        if not np.isfinite(s).all():
            raise RuntimeError(f"router {self.name!r} returned non-finite scores")
        return s

    def route(self, features: Features) -> Routing:
        """Scores, choice and selection distribution of the queries of ``features`` from one scoring pass:
        what every metric reads (the choice for mu_o and latency metrics, the distribution for E_p)."""
        s = self.scores(features)
        p = np.asarray(self._distribution(features, s), dtype=np.float64)
        if p.shape != s.shape or not np.isfinite(p).all() or (p < -1e-12).any() or not np.allclose(
                p.sum(axis=1), 1.0, atol=1e-6):
            raise RuntimeError(f"router {self.name!r} returned an invalid selection distribution")
        return Routing(s, np.asarray(s.argmax(axis=1), dtype=np.intp), p)

    def distribution(self, features: Features) -> FloatMatrix:
        """(n, m) selection distribution, rows summing to 1 (SPEC 4: softmax of scores by default)."""
        return self.route(features).distribution

    def choose(self, features: Features) -> npt.NDArray[np.intp]:
        """The chosen actor per query: argmax of the scores (first on ties)."""
        return np.asarray(self.scores(features).argmax(axis=1), dtype=np.intp)

    def act(self, features: Features, rng: np.random.Generator
            ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
        """How the router acts when deployed (a Voyager round, a warm-up logging policy): (actor, propensity) per
        query. An exploring router (``explores``) samples its selection distribution and reports the drawn
        actor's probability; any other takes its argmax, with propensity 1, as a deployed router does."""
        routed = self.route(features)
        if self.explores:
            return draw_actions(routed.distribution, rng)
        return routed.choice, np.ones(features.n)

    def check_applicable(self, train: RoutingTable) -> None:
        """Raise a UsageError saying why this router cannot be trained on ``train`` (``cheapest``
        without costs or prices, a ``k`` larger than the training set, ...); cheap, so a protocol
        checks every router of a run before training any. ``fit`` calls it too. Default: any table."""
        return None

    # -- for subclasses --------------------------------------------------------------
    @abstractmethod
    def _fit(self, train: RoutingTable, features: Features) -> None: ...

    @abstractmethod
    def _scores(self, features: Features) -> npt.ArrayLike: ...

    def _distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        """The selection distribution given this pass's ``scores`` (default: their softmax, SPEC 4); a router
        with a distribution of its own (cluster membership, the oracle's) overrides it."""
        return softmax(scores)

    def _check_ready(self, features: Features) -> None:
        if not self._fitted:
            raise UsageError(f"router {self.name!r} is used before fit()")
        if features.actor_names != self.actor_names:
            raise UsageError(f"router {self.name!r} was fitted on actors {self.actor_names}, "
                             f"asked to route among {features.actor_names}")

    # -- bounds only ------------------------------------------------------------------
    def reveal(self, outcomes: RoutingTable) -> Self:
        """Hand a bound (``uses_test_labels``, e.g. the oracle) the outcomes of the queries it will route.

        Query features never carry outcomes, so this is the one, explicit, way a router reads them; any
        other router refuses."""
        if not self.uses_test_labels:
            raise UsageError(f"router {self.name!r} learns from training feedback only; it must not see test "
                             "outcomes")
        self._outcomes = outcomes
        return self

    def outcomes(self, features: Features) -> RoutingTable:
        """The revealed outcomes of exactly the queries of ``features`` (bounds only)."""
        revealed: RoutingTable | None = getattr(self, "_outcomes", None)
        if revealed is None:
            raise UsageError(f"router {self.name!r} reads the outcomes of the queries it routes: pass them "
                             "first with reveal(table)")
        if revealed.n_queries != features.n or not np.array_equal(revealed.queries.ids, features.queries.ids):
            raise UsageError(f"router {self.name!r} was revealed the outcomes of other queries than it is "
                             "asked to route")
        return revealed

    def describe(self) -> dict[str, Any]:
        return {"router": self.name, "params": dict(self.params), "seed": self.seed}

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({opts})"


_SEED = Interval(int, 0, None)  # numpy's SeedSequence refuses negative seeds


def check_at_most_train(router: Router, key: str, train: RoutingTable) -> None:
    """A count option (``k`` neighbours or clusters) may not exceed the training queries: with more, the
    router would silently fall back to fewer and report a setting it did not use."""
    k = int(router.params[key])
    if k > train.n_queries:
        raise UsageError(f"router {router.name!r}: option {key}={k} is larger than the training set "
                         f"({train.n_queries} queries); use {key} <= {train.n_queries}")


R = TypeVar("R", bound=type[Router])
_REGISTRY: Registry[type[Router]] = Registry(
    "router", package="routerlab.routers", group="routerlab.routers", skip=("base",)
)
"""Every router class by name: the router modules of this package, then ``routerlab.routers``
entry points."""


def register(cls: R) -> R:
    """Class decorator: add a router to the registry under ``cls.name``."""
    _REGISTRY.add(cls.name, cls)
    return cls


def routers() -> dict[str, type[Router]]:
    """Every known router class by name, built-in and plugin."""
    return _REGISTRY.as_dict()


def parse_router_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``knn:k=10,metric=cosine`` -> ("knn", {"k": 10, "metric": "cosine"})."""
    return parse_spec(spec, "router")


def get_router(spec: str, **overrides: Any) -> Router:
    """Instantiate a router from a spec string such as ``knn:k=5``."""
    name, params = parse_router_spec(spec)
    return _REGISTRY.get(name)(**{**params, **overrides})


def split_router_list(text: str) -> list[str]:
    """``knn:k=10,metric=cosine,mlp`` -> ["knn:k=10,metric=cosine", "mlp"]: a part with ``=`` and no
    ``:`` continues the options of the router before it."""
    out: list[str] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" in part and ":" not in part and out:
            out[-1] += "," + part
        else:
            out.append(part)
    return out
