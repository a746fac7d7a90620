"""Logging policies (SPEC 1 "logged", SPEC 5 cold-start; routerworld.txt 5.2, 5.4): who chose the one actor whose
outcome a log holds, and with what probability.

Specs (:func:`parse_policy`):

- ``uniform``: every actor with probability 1/m (the Cold-Start default).
- ``eps-greedy:ROUTER:EPS``: the trained router's argmax with probability 1 - EPS, plus EPS spread uniformly
  (the argmax gets 1 - EPS + EPS/m); EPS in [0, 1].
- ``softmax:ROUTER:T``: softmax of the trained router's scores / T; T > 0, finite (small T -> greedy).
- ``router:ROUTER``: a warm-up router (routerworld 5.4) deployed as it is: it acts through
  :meth:`routerlab.routers.base.Router.act` (its argmax with propensity 1, or, for an exploring bandit router,
  a draw from its own distribution with that draw's probability).

ROUTER is any router spec and may itself hold ``:`` and ``,`` (``eps-greedy:knn:k=10:0.1``): the kind is
before the first ``:``, the number after the last. A policy's router is trained on the train split with full
feedback (a bound such as the oracle is revealed the logged part's outcomes, as its definition needs).

Decision where SPEC is silent: a simulated policy only logs actors whose outcome the table holds. On a query
with unobserved cells the policy is restricted to the observed actors (uniform over them, the router's best
observed actor, its softmax over them) and the propensity is that of the restricted policy; on complete tables
(llmrouter, the demo) this changes nothing. A query with no observed cell cannot be logged: an error.

Draws come from ``numpy.random.default_rng([seed, 0x434F4C44])``, the stream the cold-start protocol uses, so a
uniform log of a complete part equals the protocol's own; one vectorised draw for all queries.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from routerlab.data.feedback import Feedback, draw_actions, draw_rows
from routerlab.data.logs import Logs
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.metrics.selection import softmax
from routerlab.routers.base import Router, Routing, get_router

FloatMatrix = npt.NDArray[np.float64]
LOG_STREAM = 0x434F4C44  # "COLD": the logging draws (shared with the cold-start protocol)
PARTS = ("train", "test", "all")

POLICY_HELP = "uniform, eps-greedy:ROUTER:EPS, softmax:ROUTER:T or router:ROUTER"


@dataclass(frozen=True)
class LoggingPolicy(ABC):
    """A logging policy: draws one actor per query of a part of a table, with its probability (propensity)."""

    kind: ClassVar[str]
    spec: str  # as parsed, normalised (provenance)

    @property
    def router(self) -> str | None:
        """The spec of the policy's router, None for a policy without one."""
        return None

    def describe(self) -> dict[str, Any]:
        """What a result records about the policy."""
        return {"policy": self.kind, "spec": self.spec}

    def log(
        self,
        part: RoutingTable,
        fpart: Features | None = None,
        *,
        train: RoutingTable | None = None,
        ftrain: Features | None = None,
        seed: int = 0,
    ) -> Feedback:
        """Logged feedback on ``part``: one actor per query drawn by this policy (seeded: same seed, same log), only
        that cell observed, with its propensity. A policy with a router trains it on ``train`` (features ``ftrain``,
        full feedback) and routes ``fpart``."""
        actor, propensity = self.draw(part, fpart, train=train, ftrain=ftrain, seed=seed)
        return Feedback.logged(part, actor, propensity)

    def draw(
        self,
        part: RoutingTable,
        fpart: Features | None = None,
        *,
        train: RoutingTable | None = None,
        ftrain: Features | None = None,
        seed: int = 0,
    ) -> tuple[npt.NDArray[np.intp], FloatMatrix]:
        """(actor, propensity) per query of ``part``: what :meth:`log` logs, without the (n, m) logged table, for a
        caller that rebuilds the feedback (``Feedback.logged(part, actor, propensity)``) only while it is needed."""
        available = np.isnan(part.score)
        np.logical_not(available, out=available)  # in place: one (n, m) mask
        empty = ~available.any(axis=1)
        if empty.any():
            q = part.queries.ids[int(np.flatnonzero(empty)[0])]
            raise UsageError(f"query {q!r} has no observed outcome: no policy can log it ({int(empty.sum())} such "
                             "queries); leave them out of the logged part")
        rng = np.random.default_rng([int(seed), LOG_STREAM])
        return self._draw(part, fpart, train, ftrain, seed, available, rng)

    @abstractmethod
    def _draw(self, part: RoutingTable, fpart: Features | None, train: RoutingTable | None,
              ftrain: Features | None, seed: int, available: npt.NDArray[np.bool_], rng: np.random.Generator
              ) -> tuple[npt.NDArray[np.intp], FloatMatrix]: ...


@dataclass(frozen=True)
class Uniform(LoggingPolicy):
    """Every (observed) actor equally likely: propensity 1/m on a complete table."""

    kind: ClassVar[str] = "uniform"

    def _draw(self, part: RoutingTable, fpart: Features | None, train: RoutingTable | None,
              ftrain: Features | None, seed: int, available: npt.NDArray[np.bool_], rng: np.random.Generator
              ) -> tuple[npt.NDArray[np.intp], FloatMatrix]:
        def rows_of(rows: slice) -> FloatMatrix:
            part = available[rows]
            return np.asarray(part / part.sum(axis=1, keepdims=True), dtype=np.float64)

        return draw_rows(available.shape[0], available.shape[1], rows_of, rng)  # no (n, m) float64 matrix


@dataclass(frozen=True)
class _RouterPolicy(LoggingPolicy):
    """A policy built around a router trained on the train split."""

    router_spec: str

    @property
    def router(self) -> str | None:
        return self.router_spec

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "router": self.router_spec}

    def trained(self, part: RoutingTable, fpart: Features | None, train: RoutingTable | None,
                ftrain: Features | None, seed: int) -> tuple[Router, Features]:
        """The policy's router fitted on ``train`` with full feedback (and revealed ``part`` when it is a bound)."""
        if train is None or ftrain is None or fpart is None:
            raise UsageError(f"logging policy {self.spec!r} trains router {self.router_spec!r}: pass train, "
                             "ftrain and fpart")
        if fpart.n != part.n_queries:
            raise UsageError(f"{fpart.n} feature rows for the {part.n_queries} queries to log")
        router = get_router(self.router_spec, seed=int(seed))
        router.fit(train, ftrain)
        if router.uses_test_labels:
            router.reveal(part)
        return router, Features(fpart.X, part, fpart.encoder)



@dataclass(frozen=True)
class _ScoredPolicy(_RouterPolicy):
    """A policy whose action distribution is a function of the router's scoring pass."""

    def _draw(self, part: RoutingTable, fpart: Features | None, train: RoutingTable | None,
              ftrain: Features | None, seed: int, available: npt.NDArray[np.bool_], rng: np.random.Generator
              ) -> tuple[npt.NDArray[np.intp], FloatMatrix]:
        router, feats = self.trained(part, fpart, train, ftrain, seed)
        return draw_actions(self.distribution(router.route(feats), available), rng)

    @abstractmethod
    def distribution(self, routed: Routing, available: npt.NDArray[np.bool_]) -> FloatMatrix:
        """The policy's (n, m) action distribution given the router's scoring pass, on the available actors."""


def _greedy(scores: FloatMatrix, available: npt.NDArray[np.bool_]) -> npt.NDArray[np.intp]:
    """The best available actor by score (first on ties), as the router's argmax is on a complete row."""
    return np.asarray(np.where(available, scores, -np.inf).argmax(axis=1), dtype=np.intp)


@dataclass(frozen=True)
class EpsGreedy(_ScoredPolicy):
    """(1 - eps) on the router's argmax plus eps uniformly over the actors."""

    kind: ClassVar[str] = "eps-greedy"
    epsilon: float = 0.1

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "epsilon": self.epsilon}

    def distribution(self, routed: Routing, available: npt.NDArray[np.bool_]) -> FloatMatrix:
        n = available.shape[0]
        dist = self.epsilon * available / available.sum(axis=1, keepdims=True)
        dist[np.arange(n), _greedy(routed.scores, available)] += 1.0 - self.epsilon
        return np.asarray(dist, dtype=np.float64)


@dataclass(frozen=True)
class Softmax(_ScoredPolicy):
    """Softmax of the router's scores / T over the actors."""

    kind: ClassVar[str] = "softmax"
    temperature: float = 1.0

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "temperature": self.temperature}

    def distribution(self, routed: Routing, available: npt.NDArray[np.bool_]) -> FloatMatrix:
        return softmax(np.where(available, routed.scores, -np.inf), self.temperature)  # ruled-out actors: mass 0


@dataclass(frozen=True)
class Deployed(_RouterPolicy):
    """A warm-up router deployed as it is (routerworld 5.4): it acts through ``Router.act``."""

    kind: ClassVar[str] = "router"

    def _draw(self, part: RoutingTable, fpart: Features | None, train: RoutingTable | None,
              ftrain: Features | None, seed: int, available: npt.NDArray[np.bool_], rng: np.random.Generator
              ) -> tuple[npt.NDArray[np.intp], FloatMatrix]:
        router, feats = self.trained(part, fpart, train, ftrain, seed)
        actor, propensity = router.act(feats, rng)
        rows = np.arange(part.n_queries)
        missing = ~available[rows, actor]
        if missing.any():  # the router chose an actor whose outcome the table lacks: its choice among the others
            routed = router.route(feats.take(np.flatnonzero(missing)))
            avail = available[missing]
            if router.explores:
                dist = np.where(avail, routed.policy, 0.0)
                mass = dist.sum(axis=1, keepdims=True)
                greedy = np.eye(avail.shape[1])[_greedy(routed.scores, avail)]
                dist = np.where(mass > 0, dist / np.where(mass > 0, mass, 1.0), greedy)
                a2, p2 = draw_actions(dist, rng)
            else:
                a2, p2 = _greedy(routed.scores, avail), np.ones(int(missing.sum()))
            actor, propensity = actor.copy(), np.asarray(propensity, dtype=np.float64).copy()
            actor[missing], propensity[missing] = a2, p2
        return np.asarray(actor, dtype=np.intp), np.asarray(propensity, dtype=np.float64)


def _number(spec: str, text: str, what: str, ok: Callable[[float], bool], rule: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"logging policy {spec!r}: {what} {text!r} is not a number; {rule}") from None
    if not (math.isfinite(value) and ok(value)):
        raise UsageError(f"logging policy {spec!r}: {what} {text} is out of range; {rule}")
    return value


def _router_spec(spec: str, text: str) -> str:
    router = text.strip()
    if not router:
        raise UsageError(f"logging policy {spec!r} names no router; write {POLICY_HELP}")
    try:
        get_router(router)  # an unknown router or a bad option: one line, before any data is read
    except UsageError as exc:
        raise UsageError(f"logging policy {spec!r}: {exc}") from None
    return router


def parse_policy(spec: str | LoggingPolicy) -> LoggingPolicy:
    """``uniform``, ``eps-greedy:ROUTER:EPS``, ``softmax:ROUTER:T`` or ``router:ROUTER`` -> the policy; every
    malformed spec is one UsageError line."""
    if isinstance(spec, LoggingPolicy):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise UsageError(f"empty logging policy; use {POLICY_HELP}")
    text = spec.strip()
    kind, sep, rest = text.partition(":")
    kind = kind.strip()
    if kind == "uniform":
        if sep:
            raise UsageError(f"logging policy {text!r}: uniform takes no arguments")
        return Uniform("uniform")
    if kind == "router":
        router = _router_spec(text, rest)
        return Deployed(f"router:{router}", router)
    if kind in ("eps-greedy", "softmax"):
        what = "EPS" if kind == "eps-greedy" else "T"
        head, sep2, number = rest.rpartition(":")
        if not sep or not sep2 or not head.strip():
            raise UsageError(f"logging policy {text!r}: {kind} needs a router and {what}, e.g. "
                             f"{kind}:best-single:{'0.1' if kind == 'eps-greedy' else '0.5'}")
        router = _router_spec(text, head)
        if kind == "eps-greedy":
            eps = _number(text, number.strip(), "EPS", lambda v: 0.0 <= v <= 1.0, "EPS must be in [0, 1]")
            return EpsGreedy(f"eps-greedy:{router}:{number.strip()}", router, eps)
        t = _number(text, number.strip(), "T", lambda v: v > 0.0, "T must be a finite number > 0")
        return Softmax(f"softmax:{router}:{number.strip()}", router, t)
    raise UsageError(f"unknown logging policy {text!r}; use {POLICY_HELP}")


def simulate_logs(
    table: RoutingTable,
    policy: str | LoggingPolicy,
    *,
    part: str = "train",
    split: str = "given",
    seed: int = 0,
    encoder: str = "tfidf",
    cache_dir: str | None = None,
) -> Logs:
    """Logs of ``part`` (train, test or all queries of ``table``) drawn by ``policy`` from the full table, as a
    deployment would have produced them.

    The table is split (``split`` spec, seeded), the queries encoded (only for a policy with a router; the encoder
    is fitted on the training texts) and the policy's router trained on the train split. The log keeps the logged
    actor's cell and propensity, plus the reward columns ``acc_at_1_l``, ``dcg``, ``l_dcg`` (SPEC 5) of the logged
    actor for the queries whose correct actors all have a known latency: these read the hidden full table (every
    actor's correctness and latency), which only a simulation has.
    """
    from routerlab.data.splits import make_split
    from routerlab.metrics.latency import correct_mask, latency_rewards

    pol = parse_policy(policy)
    if part not in PARTS:
        raise UsageError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    sp = make_split(table, split, seed)
    train, test = sp.apply(table)
    logged = {"train": train, "test": test, "all": table}[part]
    ftrain = fpart = None
    if pol.router is not None:
        from routerlab.features import encode_pair

        # one encoder fitted on the training texts; the train part reuses the training vectors
        ftrain, fother = encode_pair(train, table if part == "all" else test, encoder, cache_dir=cache_dir)
        fpart = ftrain if part == "train" else fother
    feedback = pol.log(logged, fpart, train=train, ftrain=ftrain, seed=seed)
    rewards: dict[str, FloatMatrix] = {}
    lat = logged.latency_s
    if lat is not None:
        ok = ~(correct_mask(logged.score) & np.isnan(lat)).any(axis=1)
        if ok.any():
            rows = np.flatnonzero(ok)
            actor = np.argmax(~np.isnan(feedback.table.score), axis=1)
            values = latency_rewards(logged.score[rows], lat[rows])
            for key in ("acc_at_1_l", "dcg", "l_dcg"):
                col = np.full(logged.n_queries, np.nan)
                col[rows] = values[key][np.arange(rows.size), actor[rows]]
                rewards[key] = col
    return Logs(feedback, rewards, policy=pol.spec)
