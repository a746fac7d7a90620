"""Reference routers: random, the oracle r_o and r_o(p) (SPEC 4), the query-blind single-actor
policies best-single, largest, smallest, cheapest, fastest and ``fixed:actor=NAME`` (RouterWorld's naive routers
and its Route-To-X rows), and best-per-dataset (OpenRouterBench's Max Expert: the best training actor of each
query's dataset).

The single-actor policies always pick one actor (best-per-dataset one per dataset), so their selection
distribution is that actor's one-hot vector (E_p = 0): they are hard-assignment routers in SPEC 4's sense, not
score-based ones.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from routerlab._spec import Constraint, Interval, Options
from routerlab.data.table import RoutingTable, column_means
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.metrics._arrays import row_blocks
from routerlab.metrics.selection import oracle_choice, oracle_distribution, oracle_p_choice
from routerlab.routers._common import (
    UNKNOWN_SCORE,
    FloatMatrix,
    expected_actor_cost,
    expected_actor_latency,
    finite_rank_scores,
    observed_rows,
    one_hot,
)
from routerlab.routers.base import Router, register


@register
class RandomRouter(Router):
    """Uniform random routing. Scores are seeded uniform noise, so the argmax (``choose``) is a
    uniform random actor per query, the same for the same seed and query order; its selection
    distribution is uniform over all m actors (it cannot see which cells are observed)."""

    name = "random"
    logged_recipe = "native"  # learns nothing from training outcomes: any feedback will do
    explores = True  # deployed, it draws from its (uniform) distribution: propensity 1/m, not 1
    summary = "uniform random actor per query (seeded); distribution uniform, E_p = log2 m"

    def _fit(self, train: RoutingTable, features: Features) -> None:
        pass

    def _scores(self, features: Features) -> npt.ArrayLike:
        rng = np.random.default_rng([self.seed, 0x52414E44])
        return rng.random((features.n, len(self.actor_names)))

    def _distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        m = len(self.actor_names)
        return np.full((features.n, m), 1.0 / m)


def _oracle_choices(table: RoutingTable) -> npt.NDArray[np.intp]:
    """The oracle's actor per query (ties: fastest, cheapest, first; 0 where nothing is observed), a block of
    queries at a time, as :func:`_oracle_scores`."""
    n, m = table.score.shape
    out = np.zeros(n, dtype=np.intp)
    for block in row_blocks(n, m):
        s = np.asarray(table.score[block], dtype=np.float64)
        rows = observed_rows(s)
        if rows.any():
            lat = None if table.latency_s is None else table.latency_s[block][rows]
            cost = None if table.cost_usd is None else table.cost_usd[block][rows]
            part = out[block]  # a view: written in place
            part[rows] = oracle_choice(s[rows], lat, cost)
    return out


def _oracle_scores(table: RoutingTable) -> FloatMatrix:
    """The oracle's scores: each query's own scores (NaN -> -1) with a 1e-6 bonus on its oracle actor. Every
    query is on its own, so a block of queries at a time: no (queries x actors) float64 temporaries."""
    n, m = table.score.shape
    out = np.empty((n, m))
    for block in row_blocks(n, m):
        s = np.asarray(table.score[block], dtype=np.float64)
        rows = observed_rows(s)
        choice = np.zeros(s.shape[0], dtype=np.intp)
        if rows.any():
            lat = None if table.latency_s is None else table.latency_s[block][rows]
            cost = None if table.cost_usd is None else table.cost_usd[block][rows]
            choice[rows] = oracle_choice(s[rows], lat, cost)
        out[block] = np.where(np.isnan(s), UNKNOWN_SCORE, s) + 1e-6 * one_hot(choice, m)
    return out


def _oracle_dist(table: RoutingTable) -> FloatMatrix:
    n, m = table.score.shape
    out = np.full((n, m), 1.0 / m)
    for block in row_blocks(n, m):  # a block of queries at a time, as in _oracle_scores
        s = np.asarray(table.score[block], dtype=np.float64)
        rows = observed_rows(s)
        if rows.any():
            part = out[block]  # a view: written in place
            part[rows] = oracle_distribution(s[rows])
    return out


@register
class OracleRouter(Router):
    """The oracle r_o (SPEC 4): reads the routed queries' scores and picks a best actor, ties to the
    fastest, then the cheapest, then the first. Scores are the query's own scores (unobserved -1)
    with a 1e-6 bonus on the chosen actor so that the argmax follows the tie rule. Distribution:
    the scores normalised to sum 1 (uniform when all are 0), as RouterEval's code."""

    name = "oracle"
    summary = "upper bound r_o: the best actor of each query from its test scores (ties: fastest, cheapest)"
    uses_test_labels = True
    logged_recipe = "native"  # reads test outcomes only (reveal); training feedback is ignored

    def _fit(self, train: RoutingTable, features: Features) -> None:
        pass

    def _scores(self, features: Features) -> npt.ArrayLike:
        return _oracle_scores(self.outcomes(features))

    def _distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        return _oracle_dist(self.outcomes(features))


@register
class OracleP(Router):
    """r_o(p) (SPEC 4, RouterEval): the oracle's actor with probability ``p``, else an actor drawn
    uniformly from the query's observed actors. Scores are the one-hot vector of one seeded draw (so its argmax,
    the ``_greedy`` value, is that draw); selection distribution (E_p) ``p * oracle + (1 - p) * uniform`` with the
    oracle's normalised scores; as deployed it draws ``p * one_hot(r_o) + (1 - p) * uniform``, so its value is
    that expectation (the scaling curve's r_o(p))."""

    name = "oracle-p"
    summary = "r_o(p): the oracle's actor with probability p, else a uniform random one (option p=0.5)"
    uses_test_labels = True
    logged_recipe = "native"  # reads test outcomes only (reveal); training feedback is ignored
    explores = True  # deployed, it draws from p * one_hot(r_o) + (1 - p) * uniform, and logs that probability
    defaults: ClassVar[dict[str, Any]] = {"p": 0.5}
    constraints: ClassVar[dict[str, Constraint]] = {"p": Interval(float, 0, 1)}

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.p = float(self.params["p"])

    def _fit(self, train: RoutingTable, features: Features) -> None:
        pass

    def _scores(self, features: Features) -> npt.ArrayLike:
        t = self.outcomes(features)
        s = np.asarray(t.score, dtype=np.float64)
        rows = observed_rows(s)
        m = s.shape[1]
        rng = np.random.default_rng([self.seed, 0x4F52])
        # rows with nothing observed: uniform over all actors
        choice = np.asarray(rng.integers(0, m, size=s.shape[0]), dtype=np.intp)
        if rows.any():
            lat = None if t.latency_s is None else t.latency_s[rows]
            cost = None if t.cost_usd is None else t.cost_usd[rows]
            choice[rows] = oracle_p_choice(s[rows], self.p, seed=self.seed, latency=lat, cost=cost)
        return one_hot(choice, m)

    def _distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        t = self.outcomes(features)
        return np.asarray(self.p * _oracle_dist(t) + (1.0 - self.p) * _observed_uniform(t))

    def _acting_distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        """As deployed, r_o(p) is SPEC 4's r_o with probability p (the oracle's own actor, ties to the fastest,
        then the cheapest), else a uniform observed actor: ``p * one_hot(r_o) + (1 - p) * uniform``. Its E_p
        distribution (``_distribution``) spreads the oracle's part over the normalised scores instead."""
        t = self.outcomes(features)
        choice = _oracle_choices(t)
        return np.asarray(self.p * one_hot(choice, t.n_actors) + (1.0 - self.p) * _observed_uniform(t))


def _observed_uniform(table: RoutingTable) -> FloatMatrix:
    """Uniform over each query's observed actors (over all actors where none is observed)."""
    s = np.asarray(table.score, dtype=np.float64)
    obs = ~np.isnan(s)
    count = obs.sum(axis=1, keepdims=True)
    return np.asarray(np.where(count > 0, obs / np.maximum(count, 1), 1.0 / s.shape[1]))


class _ConstantRouter(Router):
    """A query-blind router: per-actor scores learned once; picks their argmax (first on ties) for
    every query; its distribution is the one-hot vector of that actor."""

    # means over the observed cells (appendix G "masked"): the mean score, cost or latency of each actor over
    # the queries where it was logged
    logged_recipe = "masked"
    _actor_scores: npt.NDArray[np.float64]

    def _fit(self, train: RoutingTable, features: Features) -> None:
        self._actor_scores = self._per_actor(train)

    def _per_actor(self, train: RoutingTable) -> npt.NDArray[np.float64]:
        raise NotImplementedError

    @property
    def actor(self) -> str:
        """The name of the actor this router always picks."""
        return self.actor_names[int(np.argmax(self._actor_scores))]

    def _scores(self, features: Features) -> npt.ArrayLike:
        return np.broadcast_to(self._actor_scores, (features.n, self._actor_scores.shape[0]))

    def _distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        return one_hot(np.full(features.n, int(np.argmax(self._actor_scores))), self._actor_scores.shape[0])


def _require_known(values: npt.NDArray[np.float64], what: str, router: str) -> None:
    if values.size == 0 or np.isnan(values).all():
        raise UsageError(f"router {router!r} needs {what}, which the table does not give for any actor")


@register
class BestSingle(_ConstantRouter):
    """Always the actor with the highest mean observed training score (RouterEval's best single
    model chosen on train); scores are the train means (never-observed actors -1)."""

    name = "best-single"
    summary = "always the actor with the best mean train score"

    def _per_actor(self, train: RoutingTable) -> npt.NDArray[np.float64]:
        means = column_means(train.score)
        return np.where(np.isnan(means), UNKNOWN_SCORE, means)


@register
class Largest(_ConstantRouter):
    """RouterWorld's Always-Route-To-Largest: the actor with the most parameters (``params_b``);
    actors of unknown size rank last; ties: first."""

    name = "largest"
    logged_recipe = "native"  # actor sizes only: learns nothing from training outcomes
    summary = "always the actor with the most parameters (params_b)"

    def _check_table(self, train: RoutingTable) -> None:
        _require_known(train.actors.params_b, "actor sizes (params_b)", self.name)

    def _per_actor(self, train: RoutingTable) -> npt.NDArray[np.float64]:
        return finite_rank_scores(train.actors.params_b)


@register
class Smallest(_ConstantRouter):
    """RouterWorld's Always-Route-To-Smallest: the actor with the fewest parameters."""

    name = "smallest"
    logged_recipe = "native"  # actor sizes only: learns nothing from training outcomes
    summary = "always the actor with the fewest parameters (params_b)"

    def _check_table(self, train: RoutingTable) -> None:
        _require_known(train.actors.params_b, "actor sizes (params_b)", self.name)

    def _per_actor(self, train: RoutingTable) -> npt.NDArray[np.float64]:
        return finite_rank_scores(train.actors.params_b, higher_is_better=False)


@register
class Cheapest(_ConstantRouter):
    """Always the actor with the lowest mean training cost per query; without cost, the lowest
    blended price (input + output price per 1M tokens)."""

    name = "cheapest"
    summary = "always the cheapest actor (mean train cost, else prices)"

    def _check_table(self, train: RoutingTable) -> None:
        _require_known(expected_actor_cost(train)[0], "cost or prices", self.name)

    def _per_actor(self, train: RoutingTable) -> npt.NDArray[np.float64]:
        return finite_rank_scores(expected_actor_cost(train)[0], higher_is_better=False)


@register
class Fastest(_ConstantRouter):
    """Always the actor with the lowest mean training latency; without latency, the lowest
    ``TTFT + 255 * ITL`` (a nominal 256-token answer)."""

    name = "fastest"
    summary = "always the fastest actor (mean train latency, else TTFT/ITL)"

    def _check_table(self, train: RoutingTable) -> None:
        _require_known(expected_actor_latency(train)[0], "latency or TTFT/ITL", self.name)

    def _per_actor(self, train: RoutingTable) -> npt.NDArray[np.float64]:
        return finite_rank_scores(expected_actor_latency(train)[0], higher_is_better=False)


class _ActorName(Options):
    """An actor's name, as text (checked against the training table's actors before training; empty = not given)."""

    def __init__(self) -> None:
        super().__init__(frozenset())

    def describe(self) -> str:
        return "an actor's name (text)"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str)


def _actor_list(names: Sequence[str], limit: int = 20) -> str:
    """The table's actors for an error message: all of them, or the first ``limit`` and how many there are."""
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown}, ... ({len(names)} in all)"


@register
class Fixed(Router):
    """Always the actor named by the option ``actor`` (``fixed:actor=NAME``), whatever training says: the
    "Route-To-X" rows of RouterWorld's tables, a named model as a baseline. Its scores and its distribution are the
    one-hot vector of that actor, so its test mu_o is that actor's mean score on the evaluated test queries. The
    name is checked against the training table's actors before any router trains (an unknown or missing name is
    one UsageError listing them)."""

    name = "fixed"
    logged_recipe = "native"  # learns nothing from training outcomes: any feedback will do
    summary = "always the actor named by option actor (fixed:actor=NAME; RouterWorld's Route-To-X)"
    defaults: ClassVar[dict[str, Any]] = {"actor": ""}
    constraints: ClassVar[dict[str, Constraint]] = {"actor": _ActorName()}
    text_options: ClassVar[frozenset[str]] = frozenset({"actor"})
    _index: int

    def _check_table(self, train: RoutingTable) -> None:
        self._position(train.actor_names)

    def _position(self, names: Sequence[str]) -> int:
        """The index of the named actor among ``names``; a UsageError naming it and listing them otherwise."""
        actor = str(self.params["actor"]).strip()
        if not actor:
            raise UsageError(f"router 'fixed' needs the actor it always picks: write fixed:actor=NAME, NAME one of "
                             f"the table's actors: {_actor_list(names)}")
        if actor not in names:
            close = difflib.get_close_matches(actor, list(names), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UsageError(f"router 'fixed': actor {actor!r} is not an actor of this table; {hint}its actors: "
                             f"{_actor_list(names)}")
        return list(names).index(actor)

    @property
    def actor(self) -> str:
        """The name of the actor this router always picks."""
        return str(self.params["actor"]).strip()

    def _fit(self, train: RoutingTable, features: Features) -> None:
        self._index = self._position(train.actor_names)

    def _scores(self, features: Features) -> npt.ArrayLike:
        return one_hot(np.full(features.n, self._index), len(self.actor_names))

    def _distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        return scores


@register
class BestPerDataset(Router):
    """Per query, the actor with the highest mean observed *training* score on that query's dataset (the
    ``dataset`` label every router may read: README "What a router sees"), OpenRouterBench's "Max Expert". It
    shows how much of a router's gain comes from knowing the dataset alone. A dataset the training split never
    shows (an out-of-domain split) falls back to the overall best single actor (``best-single``'s pick): the one
    choice training supports without the dataset. Within a dataset an actor never observed there scores -1 (as
    best-single's never-observed actors); a dataset where no actor is observed falls back too. Ties: the first
    actor. Scores are the means used; the distribution is the chosen actor's one-hot vector (E_p = 0)."""

    name = "best-per-dataset"
    # means over the observed cells (appendix G "masked"), as best-single: each actor's mean score per dataset
    # over the queries where it was logged
    logged_recipe = "masked"
    summary = "per query, the best mean train actor of its dataset (a dataset unseen in training: best-single)"
    _overall: npt.NDArray[np.float64]
    _by_dataset: dict[str, npt.NDArray[np.float64]]

    def _fit(self, train: RoutingTable, features: Features) -> None:
        overall = column_means(train.score)
        self._overall = np.where(np.isnan(overall), UNKNOWN_SCORE, overall)
        labels, group = np.unique(train.queries.dataset.astype(str), return_inverse=True)
        n, m = train.score.shape
        sums = np.zeros((labels.size, m))
        counts = np.zeros((labels.size, m))
        for rows in row_blocks(n, m):  # a block of queries at a time: no (queries x actors) float64 copy
            block = np.asarray(train.score[rows], dtype=np.float64)
            seen = ~np.isnan(block)
            member = np.zeros((labels.size, block.shape[0]))
            member[group[rows], np.arange(block.shape[0])] = 1.0
            sums += member @ np.where(seen, block, 0.0)
            counts += member @ seen
        self._by_dataset = {}
        for i, label in enumerate(labels.tolist()):
            if not (counts[i] > 0).any():
                continue  # nothing observed on this dataset: the overall fallback
            self._by_dataset[str(label)] = np.where(counts[i] > 0, sums[i] / np.maximum(counts[i], 1), UNKNOWN_SCORE)

    @property
    def actors_by_dataset(self) -> dict[str, str]:
        """Each training dataset's chosen actor by name (any other dataset gets :attr:`fallback_actor`)."""
        return {d: self.actor_names[int(np.argmax(v))] for d, v in self._by_dataset.items()}

    @property
    def fallback_actor(self) -> str:
        """The actor of a dataset training never showed: the overall best single actor."""
        return self.actor_names[int(np.argmax(self._overall))]

    def _scores(self, features: Features) -> npt.ArrayLike:
        labels, group = np.unique(features.queries.dataset.astype(str), return_inverse=True)
        table = np.stack([self._by_dataset.get(str(d), self._overall) for d in labels.tolist()]) if labels.size \
            else np.zeros((0, len(self.actor_names)))
        return table[group]

    def _distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        return one_hot(scores.argmax(axis=1), scores.shape[1])
