"""The router contract and its registry.

A router implements two methods: ``_fit(train, features)`` and ``_scores(features) -> (n, m)``
(higher = better actor). The public :meth:`Router.fit` / :meth:`Router.scores` are template methods
that validate what the subclass returns, so a wrong shape or a NaN cannot slip into a metric.
Decisions (:meth:`Router.choose`), selection distributions (:meth:`Router.distribution`, default
softmax of the scores, SPEC 4) and cost/latency-aware utilities all come from one scoring pass.

Training feedback is full or logged (SPEC 1, observability). A router class says how it learns from logged
feedback with ``logged_recipe`` (routerworld appendix G: ``correct-only`` or ``masked``; ``native`` when it reads
the logged table and propensities itself; None when it cannot); routers with a recipe take the option ``logged``
(``paper``, ``correct-only``, ``masked``, ``iw``, ``dr``; see :mod:`routerlab.routers.logged`).

A development part (:class:`DevPart`: outcomes and features of queries held out of training, ``Split.dev``) may
be handed to ``fit`` beside the training feedback. Routers that make a choice of their own while training
(``uses_dev``: the epoch to stop at) make it there and record it in ``early_stopping``; the others ignore it.

Routers register with ``@register``; third-party routers join through the ``routerlab.routers``
entry-point group. ``routerlab routers`` lists them.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Self, TypeVar

import numpy as np
import numpy.typing as npt

from routerlab._registry import Registry
from routerlab._spec import Constraint, Interval, Options, check_constraints, check_option_type, parse_spec
from routerlab.data.feedback import Feedback, FeedbackKind, as_feedback, draw_actions
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.metrics.selection import softmax

FloatMatrix = npt.NDArray[np.float64]

# What a router class does with logged feedback (routerworld appendix G): train its full-feedback code on the
# correct-only subset or on the masked table, read the logged table itself ("native"), or refuse (None).
LOGGED_RECIPES = ("correct-only", "masked", "native")
# Values of the universal option ``logged`` of the routers whose recipe is correct-only or masked.
LOGGED_OPTION = Options({"paper", "correct-only", "masked", "iw", "dr"})


@dataclass(frozen=True)
class DevPart:
    """A development part handed to :meth:`Router.fit` beside the training feedback: the full outcomes of queries
    held out of training (``Split.dev``) and their features, from the encoder fitted on the training texts only.
    A router that chooses something while training (the epoch to stop at) chooses it on these queries; the test
    queries never choose anything."""

    table: RoutingTable
    features: Features

    @classmethod
    def of(cls, dev: DevPart | tuple[RoutingTable, Features]) -> DevPart:
        """A :class:`DevPart` from itself or a ``(table, features)`` pair; anything else is a UsageError."""
        if isinstance(dev, DevPart):
            return dev
        if isinstance(dev, tuple) and len(dev) == 2 and isinstance(dev[0], RoutingTable) \
                and isinstance(dev[1], Features):
            return cls(dev[0], dev[1])
        raise UsageError(f"dev must be a DevPart or a (table, features) pair, got {type(dev).__name__}")


@dataclass(frozen=True)
class Routing:
    """One scoring pass of a router over n queries: ``scores`` (n, m), ``choice`` (n,) = their argmax (first
    on ties), ``distribution`` (n, m) = the selection distribution (rows sum to 1, SPEC 4's for E_p), and
    ``acting`` (n, m), the distribution an exploring router draws from when deployed where it differs from the
    selection distribution (r_o(p): the oracle's own actor with probability p), else None."""

    scores: FloatMatrix
    choice: npt.NDArray[np.intp]
    distribution: FloatMatrix
    acting: FloatMatrix | None = None

    @property
    def policy(self) -> FloatMatrix:
        """What an exploring router samples when deployed (``Router.act``) and is scored by: ``acting`` where the
        router has one, else its selection distribution."""
        return self.distribution if self.acting is None else self.acting


class Router(ABC):
    """Base class of every router. Subclasses set ``name`` and ``summary`` and implement
    ``_fit`` and ``_scores``; they may override ``_distribution`` when they have their own."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    uses_test_labels: ClassVar[bool] = False  # True only for bounds such as the oracle
    needs_backend: ClassVar[bool] = False  # True for routers that call an LLM (prompted): give one with attach_backend
    # True for routers that act by sampling their selection distribution when deployed (bandits: their
    # distribution is their real action distribution); False = they act by their argmax (see ``act``).
    explores: ClassVar[bool] = False
    # True where ``_scores`` returns a new array on every call that nothing of the router holds: a scoring pass
    # that does not keep its scores (:meth:`decisions`) may then write the default softmax over them (declared on
    # the class that defines ``_scores``; a subclass overriding ``_scores`` declares it again or gets False)
    fresh_scores: ClassVar[bool] = False
    # How the router learns from logged feedback (one observed actor per query, SPEC 1): "correct-only" or
    # "masked" (routerworld appendix G; such routers take the option ``logged``, added to ``defaults`` here),
    # "native" (the logged table and ``self.propensity`` reach ``_fit`` as they are: bandits, and routers that
    # learn nothing from training outcomes), or None: it cannot, and fitting it on logged feedback is an error.
    logged_recipe: ClassVar[str | None] = None
    # True for routers that use a development part handed to ``fit`` (early stopping: they implement ``_fit_dev``);
    # the others fit as they would without it
    uses_dev: ClassVar[bool] = False
    defaults: ClassVar[dict[str, Any]] = {}
    # The allowed range of every option in ``defaults`` (scikit-learn's ``_parameter_constraints``):
    # checked once here, so a router body can trust its options. Every option must have one.
    constraints: ClassVar[dict[str, Constraint]] = {}
    # Options whose value is text taken as written from a spec string (an actor's name such as
    # ``meta-llama/Llama-3-8b`` or ``7``), never coerced to a number, bool or ``a/b`` tuple.
    text_options: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Give every class whose ``logged_recipe`` is correct-only or masked the option ``logged`` (and take it
        away from a subclass that cannot use it); keep a subclass's own ``check_applicable(table)`` working when
        it is handed :class:`Feedback` (new code overrides ``_check_table`` instead)."""
        super().__init_subclass__(**kwargs)
        recipe = cls.logged_recipe
        if recipe is not None and recipe not in LOGGED_RECIPES:
            raise TypeError(f"{cls.__name__}.logged_recipe must be one of {LOGGED_RECIPES} or None, got {recipe!r}")
        if recipe in ("correct-only", "masked") and not cls.uses_test_labels:
            if "logged" not in cls.defaults:
                cls.defaults = {**cls.defaults, "logged": "paper"}
            cls.constraints = {**cls.constraints, "logged": LOGGED_OPTION}
        elif cls.constraints.get("logged") is LOGGED_OPTION:  # inherited from a parent that takes it
            cls.defaults = {k: v for k, v in cls.defaults.items() if k != "logged"}
            cls.constraints = {k: v for k, v in cls.constraints.items() if k != "logged"}
        own = cls.__dict__.get("check_applicable")
        if own is not None and not getattr(own, "_takes_feedback", False):
            cls.check_applicable = _converting(own)  # type: ignore[method-assign,assignment]

    def __init__(self, **params: Any) -> None:
        if "logged" in params and "logged" not in self.defaults:
            raise UsageError(f"router {self.name!r} takes no option logged: {self._no_logged_option()}")
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
        # how the last fit turned logged feedback into its training table (None: full feedback or native)
        self.recipe: str | None = None
        # what the last fit chose on its development part (``uses_dev`` routers fitted with one; None otherwise):
        # the metric, the epoch kept, the epochs run, the patience and the development curve
        self.early_stopping: dict[str, Any] | None = None

    # -- template methods ------------------------------------------------------------
    def fit(self, train: RoutingTable | Feedback, features: Features,
            dev: DevPart | tuple[RoutingTable, Features] | None = None) -> Self:
        """Learn from training feedback (a training table is full feedback; :class:`Feedback` may also be logged:
        one observed actor per query with its propensity, kept as ``self.propensity``) and the query features.

        ``dev`` (a :class:`DevPart`, or a ``(table, features)`` pair) is a development part of full outcomes,
        disjoint from the training queries: a router with ``uses_dev`` stops its training there (the epoch kept is
        in ``early_stopping``); any other router fits exactly as without it. It is checked in either case.

        Logged feedback reaches ``_fit`` through the router's recipe (option ``logged``, default its appendix-G
        ``logged_recipe``): :func:`routerlab.routers.logged.training_table` builds the table (and the matching
        feature rows) it trains on; ``self.recipe`` records which. Under full feedback the option does nothing.
        The training table's hidden query metadata columns are dropped before anything of the router sees it
        (:meth:`RoutingTable.visible_only`): a router reads visible columns only, in training as in routing."""
        feedback = as_feedback(train)
        if feedback.table.queries.hidden:
            feedback = replace(feedback, table=feedback.table.visible_only())
        table = feedback.table
        if features.n != table.n_queries:
            raise UsageError(f"{features.n} feature rows for {table.n_queries} training queries")
        if table.n_queries == 0:
            raise UsageError(f"router {self.name!r} cannot fit on an empty training set")
        part = None if dev is None else self._checked_dev(DevPart.of(dev), table)
        self.check_applicable(feedback)
        self.feedback_kind = feedback.kind
        self.propensity = feedback.propensity
        self.recipe = self.recipe_for(feedback)
        self.actor_names = table.actor_names
        self.early_stopping = None
        if self.recipe is not None:
            from routerlab.routers.logged import training_table

            table, features = training_table(feedback, features, self.recipe, self.seed,
                                             threshold=self._threshold(), router=self.name)
        if part is not None and self.uses_dev:
            self._fit_dev(table, features, part)
        else:
            self._fit(table, features)
        self._fitted = True
        return self

    def _checked_dev(self, dev: DevPart, train: RoutingTable) -> DevPart:
        """``dev`` with its hidden query columns dropped (as training's are), checked to be a non-empty part with a
        feature row per query, the training actors, and no training query (a UsageError otherwise)."""
        table = dev.table.visible_only() if dev.table.queries.hidden else dev.table
        if table.n_queries == 0:
            raise UsageError(f"router {self.name!r}: the development part is empty")
        if dev.features.n != table.n_queries or not np.array_equal(dev.features.queries.ids, table.queries.ids):
            raise UsageError(f"router {self.name!r}: the development features are not those of the development "
                             f"queries ({dev.features.n} feature rows for {table.n_queries} queries)")
        if table.actor_names != train.actor_names:
            raise UsageError(f"router {self.name!r}: the development part has actors {table.actor_names}, the "
                             f"training feedback {train.actor_names}")
        shared = set(table.queries.ids.tolist()) & set(train.queries.ids.tolist())
        if shared:
            raise UsageError(f"router {self.name!r}: {len(shared)} development queries are also training queries "
                             f"(first: {sorted(map(str, shared))[0]!r}); the development part must be held out")
        return DevPart(table, dev.features)

    def recipe_for(self, feedback: RoutingTable | Feedback) -> str | None:
        """The recipe that turns ``feedback`` into this router's training table: None for full feedback and for
        routers that read logged feedback as it is (``native``, the bounds); else ``correct-only``, ``masked``,
        ``iw-correct-only``, ``iw-masked`` or ``dr`` (the option ``logged``, where ``paper`` = the class's
        ``logged_recipe``). A router that cannot learn from logged feedback is a UsageError saying so."""
        fb = as_feedback(feedback)
        if fb.kind == "full" or self.uses_test_labels:
            return None
        if self.logged_recipe is None:
            raise UsageError(f"router {self.name!r} cannot learn from logged feedback (one observed actor per "
                             f"query): {self._no_logged_option()}")
        if self.logged_recipe == "native":
            return None
        option = str(self.params.get("logged", "paper"))
        if option == "paper":
            return self.logged_recipe
        if option == "iw":
            return f"iw-{self.logged_recipe}"
        return option

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
        what every metric reads (the distribution for E_p; for mu_o and the latency metrics the choice of a router
        that acts by its argmax, the expectation under ``Routing.policy`` for one that ``explores``)."""
        s = self.scores(features)
        p = self._checked(self._distribution(features, s), s, "selection distribution")
        acting = self._acting_distribution(features, s) if self.explores else None
        return Routing(s, np.asarray(s.argmax(axis=1), dtype=np.intp), p,
                       None if acting is None else self._checked(acting, s, "acting distribution"))

    def decisions(self, features: Features) -> tuple[npt.NDArray[np.intp], FloatMatrix, FloatMatrix]:
        """(choice, selection distribution, policy) of one scoring pass, as :meth:`route` gives them, for a caller
        that reads no scores (a protocol scoring the router): where the distribution is the default softmax and
        the router's scores are its own new array (``fresh_scores``), the softmax is written over them, so the
        pass holds one (n, m) float64 matrix instead of two. The numbers are those of :meth:`route`."""
        default = type(self)._distribution is Router._distribution
        # the promise binds the class that defines ``_scores``: a subclass overriding it without saying so is not
        # taken at its parent's word
        owner = next(c for c in type(self).__mro__ if "_scores" in vars(c))
        fresh = bool(vars(owner).get("fresh_scores", False))
        if not (fresh and default and not self.explores):
            routed = self.route(features)
            return routed.choice, routed.distribution, routed.policy
        s = self.scores(features)
        choice = np.asarray(s.argmax(axis=1), dtype=np.intp)
        if not s.flags.writeable:
            s = s.copy()
        p = self._checked(softmax(s, out=s), s, "selection distribution")
        return choice, p, p

    def _checked(self, dist: npt.ArrayLike, s: FloatMatrix, what: str) -> FloatMatrix:
        p = np.asarray(dist, dtype=np.float64)
        if p.shape != s.shape or not np.isfinite(p).all() or (p < -1e-12).any() or not np.allclose(
                p.sum(axis=1), 1.0, atol=1e-6):
            raise RuntimeError(f"router {self.name!r} returned an invalid {what}")
        return p

    def distribution(self, features: Features) -> FloatMatrix:
        """(n, m) selection distribution, rows summing to 1 (SPEC 4: softmax of scores by default)."""
        return self.route(features).distribution

    def choose(self, features: Features) -> npt.NDArray[np.intp]:
        """The chosen actor per query: argmax of the scores (first on ties)."""
        return np.asarray(self.scores(features).argmax(axis=1), dtype=np.intp)

    def act(self, features: Features, rng: np.random.Generator
            ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
        """How the router acts when deployed (a Voyager round, a warm-up logging policy): (actor, propensity) per
        query. An exploring router (``explores``) samples its policy (``Routing.policy``: its selection
        distribution unless it has a separate acting one) and reports the drawn actor's probability; any other
        takes its argmax, with propensity 1, as a deployed router does."""
        routed = self.route(features)
        if self.explores:
            return draw_actions(routed.policy, rng)
        return routed.choice, np.ones(features.n)

    def check_applicable(self, train: RoutingTable | Feedback) -> None:
        """Raise a UsageError saying why this router cannot be trained on ``train`` (a training table, or
        :class:`Feedback`: a router without a logged recipe refuses logged feedback; ``cheapest`` without costs
        or prices, a ``k`` larger than the training set, ...); cheap, so a protocol checks every router of a run
        before training any. ``fit`` calls it too. Subclasses add their checks in ``_check_table``."""
        self._check_table(self._table_to_check(train))

    def _check_table(self, train: RoutingTable) -> None:
        """The router's own applicability checks, on the table it would train on (for logged feedback, the
        recipe's table, or the logged table where building that one is not cheap). Default: any table."""
        return None

    def _table_to_check(self, train: RoutingTable | Feedback) -> RoutingTable:
        """The table ``_check_table`` sees: the training table for full feedback; for logged feedback the
        correct-only subset where the recipe keeps only that (an empty one is a UsageError naming the router),
        else the logged table itself (the masked, importance-resampled and DR tables have its queries)."""
        feedback = as_feedback(train)
        recipe = self.recipe_for(feedback)
        if recipe is None:
            return feedback.table
        from routerlab.routers.logged import check_table

        return check_table(feedback, recipe, threshold=self._threshold(), router=self.name)

    def _threshold(self) -> float:
        """Correctness threshold of the correct-only recipe: the router's own ``threshold`` option where it has
        one (hybrid, avenger), else SPEC 5's 0.5."""
        return float(self.params.get("threshold", 0.5))

    def _no_logged_option(self) -> str:
        """Why this router has no ``logged`` option, in words (for error messages)."""
        if self.uses_test_labels:
            return "it is a bound that reads test outcomes and learns nothing from training feedback"
        if self.logged_recipe == "native":
            return "it reads logged feedback as it is (it learns nothing from training outcomes, or learns " \
                   "from logs natively), so it has no recipe to choose"
        return (f"{type(self).__name__} declares no logged_recipe (routerworld appendix G: correct-only or "
                "masked), so it would train on the logged table as if it were full feedback")

    # -- for subclasses --------------------------------------------------------------
    @abstractmethod
    def _fit(self, train: RoutingTable, features: Features) -> None: ...

    @abstractmethod
    def _scores(self, features: Features) -> npt.ArrayLike: ...

    def _fit_dev(self, train: RoutingTable, features: Features, dev: DevPart) -> None:
        """``_fit`` with a development part (checked by ``fit``): routers with ``uses_dev`` override it to stop
        their training on ``dev`` and set ``early_stopping``. Default: ``_fit``, the part unused."""
        self._fit(train, features)

    def _distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        """The selection distribution given this pass's ``scores`` (default: their softmax, SPEC 4); a router
        with a distribution of its own (cluster membership, the oracle's) overrides it."""
        return softmax(scores)

    def _acting_distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike | None:
        """The distribution an exploring router draws from when deployed, where it differs from its selection
        distribution (r_o(p)); None (default) = it draws from its selection distribution."""
        return None

    def _check_ready(self, features: Features) -> None:
        if not self._fitted:
            raise UsageError(f"router {self.name!r} is used before fit()")
        if features.actor_names != self.actor_names:
            raise UsageError(f"router {self.name!r} was fitted on actors {self.actor_names}, "
                             f"asked to route among {features.actor_names}")

    # -- routers that call an LLM (needs_backend) --------------------------------------
    def has_backend(self) -> bool:
        """Whether the router has an LLM backend to call (its own or attached); always False for a router that
        calls none. Protocols attach theirs to a router with ``needs_backend`` that has none."""
        return False

    def attach_backend(self, backend: Any) -> Self:
        """Hand a router that calls an LLM an already-loaded backend; a router that calls none refuses it."""
        raise UsageError(f"router {self.name!r} calls no LLM backend")

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
        out = {"router": self.name, "params": dict(self.params), "seed": self.seed}
        if self.early_stopping is not None:
            out["early_stopping"] = self.early_stopping
        return out

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({opts})"


_SEED = Interval(int, 0, None)  # numpy's SeedSequence refuses negative seeds


def _converting(check: Callable[[Any, RoutingTable], None]) -> Callable[[Router, RoutingTable | Feedback], None]:
    """A subclass's own ``check_applicable(table)`` made to accept :class:`Feedback` too: the base's logged
    checks first, then the subclass's on the table it would train on."""

    @functools.wraps(check)
    def check_applicable(self: Router, train: RoutingTable | Feedback) -> None:
        check(self, self._table_to_check(train))

    check_applicable._takes_feedback = True  # type: ignore[attr-defined]
    return check_applicable


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
    """Instantiate a router from a spec string such as ``knn:k=5``. An unknown name is the error before its
    options are read (``nope:k`` names the router ``nope``, not its option ``k``)."""
    cls = _REGISTRY.get(spec.strip().partition(":")[0].strip())
    _, params = parse_router_spec(spec)
    if cls.text_options:  # text options as written: an actor named ``a/b`` or ``7`` stays that text
        raw = parse_spec(spec, "router", coerce_values=False)[1]
        params.update({k: v for k, v in raw.items() if k in cls.text_options})
    return cls(**{**params, **overrides})


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
