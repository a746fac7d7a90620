"""``choose``: the router and operating point a deployer should run under one constraint, picked on development
queries, with a prediction of its test quality and what the test queries then gave (issue 23; docs/choose.md).

Four steps. (1) Every router is fitted on the training part. (2) On the development part (``Split.dev``) every
candidate is measured and the one that best meets the constraint is chosen:

- ``call_rate`` X (a small/large pair): each router's threshold on s(q) that sends the share X of the development
  queries to the large model (:func:`~routerlab.metrics.operating_points.threshold_for_rate`, a seeded coin at tied
  scores); the router with the best development quality wins;
- ``max_cost`` / ``max_latency``: each (router, lambda) of ``argmax(score - lambda * penalty)`` (the penalty each
  actor's expected cost or latency on the training part, :func:`~routerlab.routers.utility.expected_penalty`); the
  best development quality among those whose development mean cost (latency) is within the limit wins;
- ``min_quality`` Q: the cheapest (router, lambda) (by cost, or latency on a table without cost) whose *one-sided
  95% lower confidence bound* of development quality is at least Q.

(3) The test value is predicted with a 95% prediction interval: ``x_dev - optimism +- t * sd * sqrt(1/n_dev +
1/n_test)``. ``sd`` is the per-query standard deviation of the chosen candidate on the development queries (the
coin's own variance added at tied scores); the two terms under the root are the sampling noise of the development
and the test queries. ``optimism`` is the selection bias of taking the best of many candidates on the same queries
it is measured on, estimated by the bootstrap: the whole choice is repeated on resamples of the development queries
and the mean excess of each resample's winner over its value on the full development part is subtracted. (4) The
choice is applied unchanged to the test queries (the threshold and coin, or the lambda) and what they give is
reported beside the prediction.

Nothing feasible on development: the result has ``choice`` None and the closest option (``closest``); the CLI says
so in one line and exits 2.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from routerlab._spec import Interval
from routerlab._words import plural
from routerlab.data.provenance import Provenance
from routerlab.data.splits import make_split
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.metrics.bootstrap import MIN_QUERIES, resample_indices, warn_few_queries
from routerlab.metrics.operating_points import (
    PACE_BAND,
    Threshold,
    escalate,
    paced_bound,
    paced_escalate,
    threshold_for_rate,
)
from routerlab.progress import track
from routerlab.protocols.base import (
    DEV_HELP,
    ENCODER_HELP,
    SPLIT_HELP,
    MetricRecord,
    Protocol,
    ProtocolSettings,
    Result,
    RunContext,
    SettingError,
    check_dev,
    check_encoder,
    check_split,
    option_name,
    register_protocol,
    setting,
)
from routerlab.protocols.full import RouterLike, applicable_routers, featurize, router_label
from routerlab.routers.base import Router

FloatArray = npt.NDArray[np.float64]

KINDS = ("call_rate", "max_cost", "max_latency", "min_quality")
"""The constraint families; exactly one is given."""
LEVEL = 0.95
LAMBDAS = np.concatenate([[0.0], np.geomspace(1e-3, 1e3, 61)])
"""The lambdas of ``argmax(score - lambda * penalty)`` tried for the cost and latency constraints (the penalty
divided by its largest value, so lambda is in score units per the most expensive actor's penalty)."""
N_OPTIMISM = 1000
"""Bootstrap resamples of the development queries for the selection-bias estimate."""
RATE_TOLERANCE = 0.03
"""The call-rate gap the run warns about when the sizes cannot keep a perfect threshold within it (95%)."""
COIN_STREAM = 0x636F696E
"""Mixed into the seed of the coin at tied scores on the test queries."""
ARRIVAL_STREAM = 0x61727276
"""Mixed into the seed of the order in which the test queries arrive (the rate controller's stream)."""
MEASURES = ("quality", "call_rate", "cost", "latency")
METRIC_OF = {"quality": "mu_o", "call_rate": "call_rate", "cost": "mean_cost", "latency": "mean_latency"}
"""The metric-catalog name of each measure (records)."""


class ChooseWarning(UserWarning):
    """A choice whose sizes cannot deliver what the constraint asks (the call rate's own sampling noise)."""


# ------------------------------------------------------------------------------------------------ settings
PAIR_HELP = "(default: the pair the table designates); call_rate only"


@dataclass(frozen=True)
class ChooseSettings(ProtocolSettings):
    """The constraint (exactly one of call_rate, max_cost, max_latency, min_quality), the pair for a call rate, and
    the split with its development part."""

    call_rate: float | None = setting(
        None, "target share of the queries sent to the large model, in (0, 1): each router's threshold is fixed on "
              "the development queries", Interval(float, 0, 1, closed="neither"))
    small: str | None = setting(None, f"the small model of the call-rate pair {PAIR_HELP}")
    large: str | None = setting(None, f"the large model of the call-rate pair {PAIR_HELP}")
    max_cost: float | None = setting(None, "budget: the highest mean cost per query (USD) the choice may have on "
                                           "the development queries", Interval(float, 0, None, closed="neither"))
    max_latency: float | None = setting(None, "target: the highest mean latency per query (seconds) the choice may "
                                              "have on the development queries",
                                      Interval(float, 0, None, closed="neither"))
    min_quality: float | None = setting(None, "the lowest mean score (mu_o, in [0, 1]) the choice must reach: the "
                                              "cheapest candidate whose one-sided 95% lower bound on the development "
                                              "queries reaches it", Interval(float, 0, 1))
    split: str = setting("random:0.2", SPLIT_HELP, check=check_split)
    pace_band: float | None = setting(
        PACE_BAND, "call_rate: the threshold runs with a rate controller that keeps the running call rate within "
                   "band + 1/(2t) of the target as the queries arrive (in a seeded order on test); none = the bare "
                   "threshold",
        Interval(float, 0, 1))
    dev: float = setting(0.25, DEV_HELP.replace("; none = no development part", "") +
                         " (choose always needs one)", check=check_dev)
    encoder: str = setting("tfidf", ENCODER_HELP, check=check_encoder)

    @property
    def kind(self) -> str:
        """The constraint family given."""
        return next(k for k in KINDS if getattr(self, k) is not None)

    @property
    def target(self) -> float:
        """The constraint's number."""
        value = getattr(self, self.kind)
        assert value is not None
        return float(value)

    def validate(self) -> None:
        given = [k for k in KINDS if getattr(self, k) is not None]
        if not given:
            raise UsageError("choose needs one constraint: call_rate, max_cost, max_latency or min_quality "
                             "(--call-rate X, --max-cost USD, --max-latency S or --min-quality Q)")
        if len(given) > 1:
            raise SettingError(given[1], f"cannot be combined with {given[0]} ({option_name(given[0])}): choose "
                                         "meets one constraint at a time")
        kind = given[0]
        for role in ("small", "large"):
            if getattr(self, role) is not None and kind != "call_rate":
                raise SettingError(role, f"names the call-rate pair; it does not apply to {kind} "
                                         f"({option_name(kind)})")
        if kind != "call_rate" and self.pace_band != PACE_BAND:
            raise SettingError("pace_band", f"paces a call-rate threshold; it does not apply to {kind} "
                                            f"({option_name(kind)})")
        if (self.small is None) != (self.large is None):
            have, missing = ("small", "large") if self.small is not None else ("large", "small")
            raise SettingError(missing, f"must be given with {have}: the pair is a small and a large actor")
        if self.small is not None and self.small == self.large:
            raise SettingError("large", f"the small and the large model are both {self.small!r}; name two "
                                        "different actors")


# --------------------------------------------------------------------------------------------- candidates
@dataclass
class _Part:
    """Per-query measures of every candidate on one part (development or test): ``values[m]`` is (n, C) of the
    per-query value (its expectation over the coin on the development part), ``coin_var[m]`` the coin's own
    variance per query (zero off ties, and on the test part, where the coin is thrown)."""

    values: dict[str, FloatArray] = field(default_factory=dict)
    coin_var: dict[str, FloatArray] = field(default_factory=dict)

    def add(self, measure: str, column: FloatArray, var: FloatArray | None = None) -> None:
        col = np.asarray(column, dtype=np.float64)[:, None]
        v = np.zeros_like(col) if var is None else np.asarray(var, dtype=np.float64)[:, None]
        self.values[measure] = col if measure not in self.values else np.hstack([self.values[measure], col])
        self.coin_var[measure] = v if measure not in self.coin_var else np.hstack([self.coin_var[measure], v])

    def means(self, c: int) -> dict[str, float]:
        return {m: float(v[:, c].mean()) for m, v in self.values.items()}


@dataclass
class Candidate:
    """One (router, operating point)."""

    router: str
    operating_point: dict[str, Any]


def _two_model_s(router: Router, features: Features) -> FloatArray:
    """s(q), "the small model will do", of a fitted router over a (small, large) pair (as two-model reads it)."""
    from routerlab.routers.two_model import TwoModelRouter, two_model_score

    if isinstance(router, TwoModelRouter):
        return np.asarray(router.small_score(features), dtype=np.float64)
    return two_model_score(router, router.scores(features))


# ------------------------------------------------------------------------------------------------ results
@dataclass
class ChooseResult:
    """What one ``choose`` run found (docs/choose.md)."""

    provenance: Provenance
    constraint: dict[str, Any]
    n_train: int
    n_dev: int
    n_test: int
    dropped: dict[str, int]
    choice: dict[str, Any] | None
    predicted: dict[str, Any] | None
    realized: dict[str, Any] | None
    inside: bool | None
    runner_up: dict[str, Any] | None
    routers: list[dict[str, Any]]
    closest: dict[str, Any] | None = None
    call_rate_noise: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {**self.provenance.to_dict(), "constraint": self.constraint, "n_train": self.n_train,
               "n_dev": self.n_dev, "n_test": self.n_test, "dropped": dict(self.dropped), "choice": self.choice,
               "predicted": self.predicted, "realized": self.realized, "inside": self.inside,
               "runner_up": self.runner_up, "routers": self.routers, "closest": self.closest}
        if self.call_rate_noise is not None:
            out["call_rate_noise"] = self.call_rate_noise
        out["notes"] = list(self.notes)
        out["skipped"] = dict(self.skipped)
        return out


# ----------------------------------------------------------------------------------------------- the math
def t_quantile(n: int, level: float = LEVEL) -> float:
    """The two-sided ``level`` quantile of Student's t with n - 1 degrees of freedom."""
    from scipy import stats

    return float(stats.t.ppf(0.5 + level / 2.0, max(int(n) - 1, 1)))


def prediction_interval(mean: float, sd: float, n_dev: int, n_test: int, level: float = LEVEL
                        ) -> tuple[float, float]:
    """The interval for the mean over ``n_test`` new queries of a quantity whose mean over ``n_dev`` development
    queries is ``mean`` and per-query standard deviation ``sd``: ``mean +- t * sd * sqrt(1/n_dev + 1/n_test)``
    (the two means are independent, so their difference has variance sd^2 (1/n_dev + 1/n_test))."""
    half = t_quantile(n_dev, level) * sd * math.sqrt(1.0 / n_dev + 1.0 / n_test)
    return mean - half, mean + half


def call_rate_sd(rate: float, n_dev: int, n_test: int) -> float:
    """The standard deviation of the realized call rate's gap from the target for a threshold fixed at the
    target's quantile of ``n_dev`` development queries and applied to ``n_test`` test queries:
    ``sqrt(p (1 - p) (1/n_dev + 1/n_test))`` (the threshold's own escalation share has variance p(1-p)/n_dev,
    the test queries' draw p(1-p)/n_test)."""
    return math.sqrt(rate * (1.0 - rate) * (1.0 / n_dev + 1.0 / n_test))


def queries_for_rate(rate: float, tolerance: float = RATE_TOLERANCE, level: float = LEVEL) -> int:
    """The development and test queries (each, equal sizes) that keep a perfect threshold's realized call rate
    within ``tolerance`` of ``rate`` with probability ``level``: n >= 2 z^2 p (1 - p) / tolerance^2."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    return math.ceil(2.0 * z * z * rate * (1.0 - rate) / tolerance ** 2)


def _sd(part: _Part, measure: str, c: int) -> float:
    """Per-query standard deviation of candidate ``c``'s measure, the coin's variance included."""
    col = part.values[measure][:, c]
    total = float(col.var(ddof=1)) + float(part.coin_var[measure][:, c].mean()) if col.size > 1 else 0.0
    return math.sqrt(max(total, 0.0))


def _lower_bounds(part: _Part) -> FloatArray:
    """One-sided 95% lower confidence bounds of every candidate's mean quality."""
    from statistics import NormalDist

    q = part.values["quality"]
    n = q.shape[0]
    z = NormalDist().inv_cdf(LEVEL)
    var = (q.var(axis=0, ddof=1) if n > 1 else np.zeros(q.shape[1])) + part.coin_var["quality"].mean(axis=0)
    return np.asarray(q.mean(axis=0) - z * np.sqrt(np.maximum(var, 0.0) / n), dtype=np.float64)


def select(kind: str, target: float, quality: FloatArray, bound: FloatArray, cost: FloatArray | None
           ) -> npt.NDArray[np.intp]:
    """The rule of each constraint on rows of candidate means (B, C): the index of the chosen candidate per row,
    -1 where none is feasible. ``bound`` is the lower bound of quality (min_quality), ``cost`` the constrained or
    cheapened measure. Ties: the first candidate in order (routers as given, lambdas increasing)."""
    q = np.atleast_2d(quality)
    if kind == "call_rate":
        return np.asarray(np.argmax(q, axis=1), dtype=np.intp)
    assert cost is not None
    m = np.atleast_2d(cost)
    if kind in ("max_cost", "max_latency"):
        feasible = m <= target * (1.0 + 1e-9)
        # best quality; among equal quality, the lower cost
        key = np.where(feasible, q - 1e-12 * m / max(float(np.abs(m).max()), 1e-300), -np.inf)
        pick = np.argmax(key, axis=1)
    else:
        feasible = np.atleast_2d(bound) >= target - 1e-12
        spread = max(float(np.abs(q).max()), 1e-300)
        key = np.where(feasible, m - 1e-12 * q / spread * max(float(np.abs(m).max()), 1e-300), np.inf)
        pick = np.argmin(key, axis=1)
    return np.where(feasible.any(axis=1), pick, -1).astype(np.intp)


def _optimism(kind: str, target: float, dev: _Part, constrained: str | None, seed: int) -> dict[str, float]:
    """The bootstrap estimate of each measure's selection bias: on each resample of the development queries the
    choice is made again (:func:`select`), and the winner's resample mean less that candidate's mean over all
    resamples (the full-development mean, up to the resampling's own noise, which this centring cancels: a single
    candidate gets exactly 0) is averaged over the resamples where something was feasible. Call-rate thresholds
    are held at their fitted values within the resamples."""
    from statistics import NormalDist

    n = dev.values["quality"].shape[0]
    n_cand = dev.values["quality"].shape[1]
    picked_sum = {m: 0.0 for m in dev.values}
    col_sum = {m: np.zeros(n_cand) for m in dev.values}
    times = np.zeros(n_cand)
    total = 0
    z = NormalDist().inv_cdf(LEVEL)
    coin = dev.coin_var["quality"].mean(axis=0)
    for idx in resample_indices(n, N_OPTIMISM, seed):
        rows = idx.shape[0]
        counts = np.bincount((idx + (np.arange(rows) * n)[:, None]).ravel(), minlength=rows * n)
        w = counts.reshape(rows, n).astype(np.float64) / n
        means = {m: w @ v for m, v in dev.values.items()}
        bound = None
        if kind == "min_quality":
            q = dev.values["quality"]
            second = w @ (q * q)
            var = np.maximum(second - means["quality"] ** 2, 0.0) * n / max(n - 1, 1) + coin
            bound = means["quality"] - z * np.sqrt(var / n)
        pick = select(kind, target, means["quality"], bound if bound is not None else means["quality"],
                      means[constrained] if constrained is not None else None)
        ok = np.flatnonzero(pick >= 0)
        total += rows
        times += np.bincount(pick[ok], minlength=n_cand)
        for m in picked_sum:
            picked_sum[m] += float(means[m][ok, pick[ok]].sum())
            col_sum[m] += means[m].sum(axis=0)
    hits = float(times.sum())
    out = {m: ((picked_sum[m] - float(times @ (col_sum[m] / total))) / hits if hits else 0.0) for m in picked_sum}
    if kind == "call_rate":  # a threshold refitted on any development sample reaches the rate there exactly
        out["call_rate"] = 0.0
    return out


# ------------------------------------------------------------------------------------------------ the run
def _complete(table: RoutingTable, needs: Sequence[str]) -> npt.NDArray[np.bool_]:
    """Queries whose every score (and every cell of the matrices named in ``needs``) is known."""
    keep = ~np.isnan(table.score).any(axis=1)
    for name in needs:
        matrix = getattr(table, name)
        if matrix is not None:
            keep &= ~np.isnan(matrix).any(axis=1)
    return np.asarray(keep)


def _has(table: RoutingTable, name: str) -> bool:
    matrix = getattr(table, name)
    return matrix is not None and not bool(np.isnan(matrix).all())


def choose(table: RoutingTable, routers: Sequence[RouterLike], settings: ChooseSettings, seed: int = 0, *,
           cache_dir: str | None = None, context: RunContext | None = None) -> ChooseResult:
    """Fit ``routers`` on the training part, choose on the development part, predict and apply to the test part
    (module docstring). Same inputs and seed, same numbers."""
    from routerlab.protocols.two_model import pair_table, resolve_pair

    s = settings
    kind, target = s.kind, s.target
    if not routers:
        raise UsageError("name at least one router, e.g. knn,linear,best-single")
    labels = [router_label(r) for r in routers]
    repeated = [x for x in labels if labels.count(x) > 1]
    if repeated:
        raise UsageError(f"router {repeated[0]!r} is named twice; each router of a run needs its own label")

    constraint: dict[str, Any] = {"kind": kind, "target": target, "option": option_name(kind)}
    if kind == "call_rate":
        small, large = resolve_pair(table, s.small, s.large)
        work = pair_table(table, small, large)
        constraint.update(small=small, large=large)
        by: str | None = None
    else:
        work = table
        if kind == "max_cost":
            by = "cost"
        elif kind == "max_latency":
            by = "latency"
        else:
            by = "cost" if _has(table, "cost_usd") else "latency" if _has(table, "latency_s") else None
            if by is None:
                raise UsageError(f"min_quality picks the cheapest candidate, and table {table.name!r} has neither "
                                 "per-query cost nor latency to say which is cheapest")
        matrix = "cost_usd" if by == "cost" else "latency_s"
        if not _has(table, matrix):
            raise UsageError(f"{kind} ({option_name(kind)}) needs the table's per-query {by} ({matrix}); table "
                             f"{table.name!r} has none")
        constraint["by"] = by
    # cost and latency are reported beside the constrained measure where every cell of the table knows them
    extras = [m for m in ("cost_usd", "latency_s") if getattr(work, m) is not None
              and not bool(np.isnan(getattr(work, m)).any())]
    needs = sorted({*extras, *([] if by is None else ["cost_usd" if by == "cost" else "latency_s"])})

    sp = make_split(work, s.split, seed, dev=s.dev)
    train, test_all = sp.apply(work)
    dev_all = sp.apply_dev(work)
    keep_dev, keep_test = _complete(dev_all, needs), _complete(test_all, needs)
    dropped = {"dev": int((~keep_dev).sum()), "test": int((~keep_test).sum())}
    dev = dev_all.select_queries(keep_dev) if dropped["dev"] else dev_all
    test = test_all.select_queries(keep_test) if dropped["test"] else test_all
    n_dev, n_test = dev.n_queries, test.n_queries
    if n_dev == 0 or n_test == 0:
        raise UsageError(f"no {'development' if n_dev == 0 else 'test'} query has every score"
                         f"{' and ' + ', '.join(needs) if needs else ''} known; nothing can be chosen")
    notes: list[str] = []
    for part, k in dropped.items():
        if k:
            notes.append(f"{plural(k, 'query')} of the {'development' if part == 'dev' else 'test'} part left out: "
                         f"a score{' or ' + ', '.join(needs) if needs else ''} unknown")

    chosen, _ = applicable_routers(list(routers), train, seed)
    skipped: dict[str, str] = {}
    runnable = []
    for label, router in chosen:
        if router.uses_test_labels:
            skipped[label] = "a bound that reads the test outcomes: it cannot be deployed, so it is not a candidate"
        else:
            runnable.append((label, router))
    if not runnable:
        raise UsageError(f"no router can be chosen: {'; '.join(f'{k}: {v}' for k, v in skipped.items())}")

    both = work.select_queries(np.concatenate([sp.dev[keep_dev], sp.test[keep_test]]).astype(np.intp))
    if context is not None and context.encode is not None:
        ftrain, fboth = context.encode(train, both, s.encoder)
    else:
        ftrain, fboth = featurize(train, both, s.encoder, cache_dir)
    fdev, ftest = fboth.take(np.arange(n_dev)), fboth.take(np.arange(n_dev, n_dev + n_test))

    dv, tv = _Part(), _Part()
    candidates: list[Candidate] = []
    coin_seed = int(np.random.SeedSequence([int(seed), COIN_STREAM]).generate_state(1)[0])
    arrival = np.random.default_rng([int(seed), ARRIVAL_STREAM]).permutation(n_test)  # the test traffic's order
    unpaced: dict[str, float] = {}
    cost_of = {"cost": "cost_usd", "latency": "latency_s"}
    for label, router in track(runnable, "choose: router", unit="router", label=lambda item: item[0]):
        router.fit(train, ftrain)
        if kind == "call_rate":
            s_dev, s_test = _two_model_s(router, fdev), _two_model_s(router, ftest)
            thr = threshold_for_rate(s_dev, target)
            p = (s_dev < thr.value) + (s_dev == thr.value) * thr.tie_share
            bare = escalate(s_test, thr, coin_seed)
            if s.pace_band is None:
                esc = bare
            else:  # the controller sees the queries as they arrive; its decisions go back to table order
                esc = np.empty_like(bare)
                esc[arrival] = paced_escalate(s_test[arrival], thr, coin_seed, band=s.pace_band)
            unpaced[label] = float(bare.mean())
            for measure, d_matrix, t_matrix in (("quality", dev.score, test.score),
                                                *((m, getattr(dev, cost_of[m]), getattr(test, cost_of[m]))
                                                  for m in ("cost", "latency") if cost_of[m] in extras)):
                d_small, d_large = d_matrix[:, 0].astype(np.float64), d_matrix[:, 1].astype(np.float64)
                dv.add(measure, p * d_large + (1 - p) * d_small, p * (1 - p) * (d_large - d_small) ** 2)
                tv.add(measure, np.where(esc, t_matrix[:, 1], t_matrix[:, 0]))
            dv.add("call_rate", p, p * (1 - p))
            tv.add("call_rate", esc.astype(np.float64))
            candidates.append(Candidate(label, {**_threshold_point(thr), "pace_band": s.pace_band}))
        else:
            from routerlab.routers.utility import expected_penalty, lambda_sweep

            assert by is not None
            penalty = expected_penalty(train, "cost" if by == "cost" else "latency")
            sw_dev = lambda_sweep(router, fdev, LAMBDAS, penalty=penalty)
            sw_test = lambda_sweep(router, ftest, LAMBDAS, penalty=penalty)
            rd, rt = np.arange(n_dev), np.arange(n_test)
            for lam, cd, ct in zip(LAMBDAS, sw_dev.choices, sw_test.choices, strict=True):
                dv.add("quality", dev.score[rd, cd])
                tv.add("quality", test.score[rt, ct])
                for m in ("cost", "latency"):
                    if cost_of[m] in extras or (m == by):
                        dv.add(m, getattr(dev, cost_of[m])[rd, cd])
                        tv.add(m, getattr(test, cost_of[m])[rt, ct])
                candidates.append(Candidate(label, {"lambda": float(lam), "by": by}))

    constrained: str | None = None if kind == "call_rate" else by
    means = {m: v.mean(axis=0) for m, v in dv.values.items()}
    cons = None if constrained is None else means[constrained]
    bound = _lower_bounds(dv)
    pick = int(select(kind, target, means["quality"], bound, cons)[0])

    def summary(c: int) -> dict[str, Any]:
        out: dict[str, Any] = {"router": candidates[c].router, "operating_point": candidates[c].operating_point,
               "dev": dv.means(c), "test": tv.means(c)}
        if kind == "min_quality":
            out["dev"]["quality_lower_bound"] = float(bound[c])
        return out

    per_router: list[dict[str, Any]] = []
    best_of: dict[str, int] = {}
    for label in dict.fromkeys(c.router for c in candidates):
        mine = np.flatnonzero([c.router == label for c in candidates])
        sub = select(kind, target, means["quality"][mine], bound[mine], None if cons is None else cons[mine])[0]
        if sub >= 0:
            best_of[label] = int(mine[sub])
            per_router.append({**summary(int(mine[sub])), "feasible": True})
        else:
            per_router.append({"router": label, "operating_point": None, "feasible": False})
            skipped[label] = "no operating point of this router meets the constraint on the development queries"

    provenance = Provenance.of(table, sp, seed=seed, encoder=ftrain.encoder, routers=labels,
                               split_extra={"n_dev_used": n_dev, "n_test_used": n_test})
    noise = None
    if kind == "call_rate":
        sd = call_rate_sd(target, n_dev, n_test)
        need = queries_for_rate(target)
        noise = {"sd": sd, "half_width_95": 1.959964 * sd, "tolerance": RATE_TOLERANCE,
                 "queries_needed_each": need,
                 "paced_bound": None if s.pace_band is None else paced_bound(s.pace_band, n_test)}
        if s.pace_band is not None:
            if paced_bound(s.pace_band, n_test) > RATE_TOLERANCE:
                warnings.warn(f"the rate controller holds the test call rate within +-{s.pace_band:g} + 1/(2 x "
                              f"{n_test}) = {paced_bound(s.pace_band, n_test):.3f} of {target:g}, wider than "
                              f"+-{RATE_TOLERANCE}",
                              ChooseWarning, stacklevel=2)
        elif 1.959964 * sd > RATE_TOLERANCE:
            warnings.warn(f"with {n_dev} development and {n_test} test queries even a perfect threshold's realized "
                          f"call rate varies by +-{1.959964 * sd:.3f} (95%) around {target:g}; staying within "
                          f"+-{RATE_TOLERANCE} needs about {need} of each", ChooseWarning, stacklevel=2)
    result = ChooseResult(provenance, constraint, int(train.n_queries), n_dev, n_test, dropped, None, None, None,
                          None, None, per_router, call_rate_noise=noise, notes=notes, skipped=skipped)
    if pick < 0:
        result.closest = _closest(kind, candidates, means, bound, constrained, summary)
        return result

    enough = n_dev >= MIN_QUERIES and n_test >= MIN_QUERIES
    if not enough:
        warn_few_queries(f"only {n_dev} development and {n_test} test queries")
    optimism = _optimism(kind, target, dv, constrained, seed) if n_dev >= MIN_QUERIES else {
        m: 0.0 for m in dv.values}
    predicted: dict[str, Any] = {}
    for m in MEASURES:
        if m not in dv.values:
            continue
        value = float(means[m][pick]) - optimism[m]
        predicted[m] = value
        predicted[f"{m}_dev"] = float(means[m][pick])
        predicted[f"{m}_optimism"] = optimism[m]
        predicted[f"{m}_sd"] = _sd(dv, m, pick)
        predicted[f"{m}_ci"] = (list(prediction_interval(value, predicted[f"{m}_sd"], n_dev, n_test))
                                if enough else None)
    if kind == "call_rate" and s.pace_band is not None and enough:  # the controller bounds the rate, not chance
        bound_ = paced_bound(s.pace_band, n_test)
        predicted["call_rate_ci"] = [max(0.0, target - bound_), min(1.0, target + bound_)]
    realized = {m: float(tv.values[m][:, pick].mean()) for m in MEASURES if m in tv.values}
    if kind == "call_rate":
        realized["call_rate_gap"] = realized["call_rate"] - target
        realized["call_rate_unpaced"] = unpaced[candidates[pick].router]  # the bare threshold's rate, for comparison
    ci = predicted["quality_ci"]
    result.choice = {"router": candidates[pick].router, "operating_point": candidates[pick].operating_point}
    result.predicted, result.realized = predicted, realized
    result.inside = None if ci is None else bool(ci[0] <= realized["quality"] <= ci[1])
    others = [c for r, c in best_of.items() if r != candidates[pick].router]
    if others:
        sub = int(select(kind, target, means["quality"][others], bound[others],
                         None if cons is None else cons[others])[0])
        result.runner_up = summary(others[sub]) if sub >= 0 else None
    return result


def _threshold_point(thr: Threshold) -> dict[str, Any]:
    d = thr.to_dict()
    return {"threshold": d["threshold"], "tie_share": d["tie_share"]}


def _closest(kind: str, candidates: list[Candidate], means: dict[str, FloatArray], bound: FloatArray,
             constrained: str | None, summary: Any) -> dict[str, Any]:
    """The option nearest to feasible: the cheapest (fastest) for a budget, the best lower bound for a quality."""
    if kind in ("max_cost", "max_latency"):
        assert constrained is not None
        c = int(np.argmin(means[constrained]))
    else:
        c = int(np.argmax(bound))
    return dict(summary(c))


def describe_point(point: dict[str, Any] | None) -> str:
    """An operating point in words: ``threshold 0.031 (tie share 0.25)`` or ``lambda 0.1 on cost``."""
    if point is None:
        return "none"
    if "threshold" in point:
        t = point["threshold"]
        text = "every query to the large model" if t is None else f"threshold {t:.4g}"
        share = point.get("tie_share", 0.0)
        text += f" (tie share {share:.2f})" if share and 0 < share < 1 else ""
        band = point.get("pace_band")
        return text + (f", paced +-{band:g}" if band is not None else "")
    return f"lambda {point['lambda']:.4g} on {point['by']}"


def infeasible_line(result: ChooseResult) -> str:
    """One line: nothing meets the constraint on the development queries, and the closest option."""
    c = result.constraint
    close = result.closest or {}
    where = f"{close.get('router')} at {describe_point(close.get('operating_point'))}"
    dev = close.get("dev", {})
    if c["kind"] in ("max_cost", "max_latency"):
        unit = "USD" if c["kind"] == "max_cost" else "s"
        measure = c["by"]
        return (f"nothing meets {c['option']} {c['target']:g} on the {result.n_dev} development queries: the "
                f"{'cheapest' if measure == 'cost' else 'fastest'} option, {where}, has mean {measure} "
                f"{dev.get(measure, math.nan):.4g} {unit} per query (mu_o {dev.get('quality', math.nan):.3f})")
    return (f"nothing meets {c['option']} {c['target']:g} on the {result.n_dev} development queries: the closest, "
            f"{where}, has mu_o {dev.get('quality', math.nan):.3f} with 95% lower bound "
            f"{dev.get('quality_lower_bound', math.nan):.3f}")


# ------------------------------------------------------------------------------------------- the protocol
def choose_records(native: ChooseResult) -> list[MetricRecord]:
    """Per router at its own best feasible operating point: each measure on the development part (``part=dev``)
    and on the test part (``part=test``); for the chosen router also the prediction with its 95% prediction
    interval (``part=predicted``)."""
    out: list[MetricRecord] = []
    for r in native.routers:
        if not r.get("feasible"):
            continue
        for part in ("dev", "test"):
            out += [MetricRecord.of(r["router"], METRIC_OF[m], r[part][m], None, f"part={part}")
                    for m in MEASURES if m in r[part]]
    if native.choice is not None and native.predicted is not None:
        out += [MetricRecord.of(native.choice["router"], METRIC_OF[m], native.predicted[m],
                                native.predicted.get(f"{m}_ci"), "part=predicted")
                for m in MEASURES if m in native.predicted]
    return out


def choose_result(native: ChooseResult, settings: ChooseSettings) -> Result:
    notes = list(native.notes)
    if native.choice is None:
        notes.append(infeasible_line(native))
    return Result(Choose.name, native.provenance, settings, choose_records(native), native=native,
                  skipped=dict(native.skipped), n_train=native.n_train, n_test=native.n_test, notes=notes)


@register_protocol("choose")
class Choose(Protocol):
    summary = ("the router and operating point that best meet one constraint (call rate, cost, latency or "
               "quality), chosen on a development part, with a 95% prediction interval and the test outcome")
    spec = "SPEC 6, 7"
    Settings = ChooseSettings

    def run(self, table: RoutingTable, settings: Any, seed: int = 0, routers: Sequence[Any] = (),
            context: RunContext | None = None) -> Result:
        s: ChooseSettings = settings
        native = choose(table, list(routers), s, seed, cache_dir=context.cache_dir if context else None,
                        context=context)
        return choose_result(native, s)


__all__ = ["Choose", "ChooseResult", "ChooseSettings", "call_rate_sd", "choose", "prediction_interval",
           "queries_for_rate", "select"]
