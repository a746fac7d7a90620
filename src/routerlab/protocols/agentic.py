"""RouterWorld-Agentic's analyses on an episode table (RouterWorld section 5.3 and appendix I; SPEC 1, 5, 7, 9).

An episode table holds, in some cells, a whole episode of steps (model calls, tool calls, environment steps); its
score is the episode's final outcome and its latency the episode's (the model time plus the tool and environment
time of every step, SPEC 9). The protocol ``agentic`` runs four analyses on it:

1. **Routers on episodes.** Routers choose one actor per task from the task's text; the full-observability
   evaluation (:mod:`routerlab.protocols.full`, run as it is, not copied) scores them, so Acc@1-L, DCG and L-DCG
   rank actors by episode latency, with their 95% bootstrap intervals.
2. **Steps per actor** (every episode of the table, not only the test queries: a description of the pool): the
   episodes, the median and mean number of model, tool and all steps with bootstrap intervals over episodes, the
   share of correct episodes, the median episode latency and, when the step limit is known, the share of episodes
   that reached it.
3. **Planning steps against latency.** routerlab reads the paper's *planning steps* as an episode's model calls
   (each call plans the next action or answers). Per actor and over all episodes: Spearman's correlation between
   them and the episode latency, and the least-squares slope of latency on them (the seconds one more model call
   adds), each with a bootstrap interval over episodes; and the share of correct episodes per bucket of model
   steps.
4. **Performance compression** (RouterWorld's Figure 3, appendix I.2): the variance across the non-collapsed
   learned routers of each of Acc@1, Acc@1-L, DCG and L-DCG, in percentage points squared (the paper's sigma^2:
   the population variance of the routers' values in %, which reproduces its 4.35 from its Table 9), on the
   agentic table and on a single-turn table of the same actors (``single_turn``), and their ratio. A router is
   left out when it is a bound (oracle, r_o(p), random), when one actor takes at least ``collapse`` of its test
   queries (collapsed, as the paper leaves them out), or when it samples its selection distribution (its per-query
   expected values are not kept). The interval of each variance resamples the queries of each table and
   recomputes every router's metric from its fixed per-query decisions (routers are fitted once).

Below MIN_QUERIES episodes (or test queries) an interval is not computed: it is reported as unavailable.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from routerlab.data.table import RoutingTable
from routerlab.errors import DataError, UsageError
from routerlab.metrics.bootstrap import MIN_QUERIES, Estimate, bootstrap_means, enough_queries, percentile_interval
from routerlab.metrics.bootstrap import resample_indices as _resamples
from routerlab.metrics.selection import shares_collapsed
from routerlab.protocols.base import (
    SKIP_HELP,
    Interval,
    MetricRecord,
    Protocol,
    Result,
    RunContext,
    register_protocol,
    setting,
)
from routerlab.protocols.full import Evaluation, EvaluationSettings, FullSettings, RouterResult, router_records

if TYPE_CHECKING:
    from routerlab.data.episodes import EpisodeSummary

FloatArray = npt.NDArray[np.float64]

THRESHOLD = 0.5
"""An episode is correct when its final score is at least this (the metrics' correctness threshold, SPEC 5)."""
STEP_KINDS = ("model", "tool", "all")
"""The step counts the analyses describe: model calls (planning steps), tool calls, and every step."""
COMPRESSION_METRICS = ("acc_at_1", "acc_at_1_l", "dcg", "l_dcg")
"""The metrics whose spread across routers the compression analysis compares (the paper's Figure 3)."""
BOUND_ROUTERS = frozenset({"oracle", "oracle-p", "random"})
"""Routers that are bounds, not routing methods: left out of the compression, as the paper's sigma^2 leaves out its
naive baselines."""
LEARNED_ROUTERS = ("knn", "prknn", "linear", "naive-bayes", "svm", "cluster", "mlp", "hybrid")
"""The learned routers of the default set (cheap enough for a table of a few hundred tasks)."""
DEFAULT_BINS = (1, 2, 3, 5, 9, 17)
POOLED = "all actors"
"""The name the pooled rows carry (every actor's episodes together)."""
POINTS2 = 1e4
"""A variance of shares in [0, 1] times this is in percentage points squared."""
LIMIT_KEYS = ("step_limit", "max_steps")
"""The table metadata keys that record an agentic collection's step limit (in model calls)..."""
LIMIT_PLACES = ("collect", "agent")
"""... at the top level of the metadata or under one of these keys (``collect --agent`` writes
``meta["collect"]["max_steps"]``)."""


# ------------------------------------------------------------------------------------------------- settings
def _check_bins(value: tuple[int, ...]) -> tuple[int, ...]:
    """Bucket lower edges: increasing, starting at 1 or above."""
    if any(b <= a for a, b in itertools.pairwise(value)):
        raise UsageError(f"must be increasing lower edges, e.g. 1,2,3,5,9,17; got {','.join(map(str, value))}")
    return value


def _check_table_dir(value: str) -> str:
    """A single-turn table is a saved table directory; its contents are read when the run starts."""
    path = Path(value).expanduser()
    if not path.is_dir():
        what = "is a file, not a table directory" if path.exists() else "does not exist"
        raise UsageError(f"{value}: {what}")
    return value


SINGLE_TURN_HELP = ("a saved single-turn table of the same actors (matched by name; its queries may differ): the "
                    "compression compares the routers' spread on it with that on the episodes; none = the "
                    "agentic side only")
COLLAPSE_HELP = ("a router that sends at least this share of the test queries to one actor is collapsed and left "
                 "out of the compression, as RouterWorld leaves collapsed routers out")
BINS_HELP = "lower edges of the buckets of model steps (planning steps) the success-by-steps table uses"
LIMIT_HELP = ("the agent's step limit, in model calls (an episode that made this many reached it); none = read "
              "from the table's metadata (max_steps, as collect --agent records it), else not reported")


@dataclass(frozen=True)
class AgenticSettings(EvaluationSettings):
    """The full evaluation's settings (split, encoder, resamples, paired comparison) and the analyses' own."""

    skip_inapplicable: bool = setting(True, SKIP_HELP + " (on by default: the default routers are many)")
    single_turn: str | None = setting(None, SINGLE_TURN_HELP, check=_check_table_dir, path=True)
    collapse: float = setting(0.95, COLLAPSE_HELP, Interval(float, 0.5, 1.0, closed="right"))
    step_bins: tuple[int, ...] = setting(DEFAULT_BINS, BINS_HELP, Interval(int, 1, 1_000_000), check=_check_bins)
    step_limit: int | None = setting(None, LIMIT_HELP, Interval(int, 1, 1_000_000))

    def full(self) -> FullSettings:
        """The settings of the full evaluation the routers run under."""
        return FullSettings(split=self.split, encoder=self.encoder, n_boot=self.n_boot, compare_to=self.compare_to,
                            skip_inapplicable=self.skip_inapplicable)


# ------------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class ActorSteps:
    """One actor's episodes (or every actor's, ``actor == POOLED``): counts, steps, accuracy and latency."""

    actor: str
    episodes: int
    median: dict[str, Estimate]  # step kind -> median with its interval
    mean: dict[str, Estimate]  # step kind -> mean with its interval
    accuracy: Estimate  # share of episodes whose final score is >= 0.5
    latency_median: Estimate  # seconds, over the episodes whose latency is known
    latency_known: int
    limit_share: float | None  # share of episodes that reached the step limit; None when the limit is unknown

    def to_dict(self) -> dict[str, Any]:
        return {"actor": self.actor, "episodes": self.episodes,
                "median": {k: _est(v) for k, v in self.median.items()},
                "mean": {k: _est(v) for k, v in self.mean.items()}, "accuracy": _est(self.accuracy),
                "latency_median_s": _est(self.latency_median), "latency_known": self.latency_known,
                "limit_share": self.limit_share}


@dataclass(frozen=True)
class PlanningLatency:
    """Planning steps (model calls) against episode latency, for one actor or every actor's episodes."""

    actor: str
    episodes: int  # episodes with a known latency
    spearman: Estimate
    slope_s: Estimate  # seconds of episode latency per extra model call (least squares)
    intercept_s: float
    reason: str = ""  # why the numbers are undefined (NaN), when they are

    def to_dict(self) -> dict[str, Any]:
        return {"actor": self.actor, "episodes": self.episodes, "spearman": _est(self.spearman),
                "slope_s_per_step": _est(self.slope_s), "intercept_s": _num(self.intercept_s),
                **({"reason": self.reason} if self.reason else {})}


@dataclass(frozen=True)
class StepBucket:
    """The share of correct episodes among those whose model steps fall in one bucket."""

    actor: str
    bucket: str
    episodes: int
    accuracy: Estimate

    def to_dict(self) -> dict[str, Any]:
        return {"actor": self.actor, "bucket": self.bucket, "episodes": self.episodes,
                "accuracy": _est(self.accuracy)}


@dataclass(frozen=True)
class Spread:
    """The routers' spread on one table (``setting`` agentic or single-turn): who is compared, who is left out
    and why, each router's value in points, and the variance of each metric in points squared."""

    setting: str
    n_queries: int
    routers: list[str]
    excluded: dict[str, str]
    values: dict[str, dict[str, float]]  # router -> metric -> value in percentage points
    variance: dict[str, Estimate]  # metric -> variance across the compared routers, points squared
    replicates: dict[str, FloatArray] = field(default_factory=dict, repr=False)  # metric -> bootstrap variances

    def to_dict(self) -> dict[str, Any]:
        return {"setting": self.setting, "n_queries": self.n_queries, "routers": list(self.routers),
                "excluded": dict(self.excluded), "values_points": self.values,
                "variance_points2": {k: _est(v) for k, v in self.variance.items()}}


@dataclass(frozen=True)
class Compression:
    """The agentic spread, the single-turn spread (None without a single-turn table) and, per metric, the ratio
    agentic / single-turn with its interval (below 1 = the routers are compressed on episodes)."""

    agentic: Spread
    single_turn: Spread | None
    ratio: dict[str, Estimate]
    collapse: float

    def to_dict(self) -> dict[str, Any]:
        return {"collapse": self.collapse, "agentic": self.agentic.to_dict(),
                "single_turn": None if self.single_turn is None else self.single_turn.to_dict(),
                "ratio": {k: _est(v) for k, v in self.ratio.items()}}


@dataclass
class AgenticAnalysis:
    """Everything the ``agentic`` protocol computed: the routers' evaluation on the episodes (and on the
    single-turn table), the step analyses and the compression."""

    evaluation: Evaluation
    single_turn: Evaluation | None
    steps: list[ActorSteps]
    planning: list[PlanningLatency]
    buckets: list[StepBucket]
    compression: Compression
    episodes: int
    step_limit: int | None
    bucket_edges: tuple[int, ...] = DEFAULT_BINS
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**self.evaluation.to_dict(), "episodes": self.episodes, "step_limit": self.step_limit,
                "step_bins": list(self.bucket_edges),
                "steps": [s.to_dict() for s in self.steps], "planning": [p.to_dict() for p in self.planning],
                "success_by_steps": [b.to_dict() for b in self.buckets],
                "compression": self.compression.to_dict(),
                "single_turn": None if self.single_turn is None else self.single_turn.to_dict(),
                "notes": [*self.evaluation.extra.get("notes", []), *self.notes]}


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _est(e: Estimate) -> dict[str, Any]:
    return {"value": _num(e.value), "ci": [_num(e.lo), _num(e.hi)]}


# ----------------------------------------------------------------------------------------------- bootstrap
def resampled(statistic: Callable[[npt.NDArray[np.intp]], npt.ArrayLike], n: int, n_boot: int, seed: int
              ) -> Estimate:
    """``statistic`` (a (rows, n) index matrix -> (rows,) values) at the identity and its percentile 95% interval
    over ``n_boot`` resamples of the n items; NaN replicates (an undefined statistic) are left out, and below
    MIN_QUERIES items no interval is computed (NaN; the caller says so once)."""
    value = float(np.asarray(statistic(np.arange(n, dtype=np.intp)[None, :]), dtype=np.float64).reshape(-1)[0])
    if not enough_queries(n, warn=False):
        return Estimate(value, math.nan, math.nan)
    reps = np.concatenate([np.asarray(statistic(idx), dtype=np.float64).reshape(-1)
                           for idx in _resamples(n, n_boot, seed)])
    lo, hi = percentile_interval(reps)
    return Estimate(value, lo, hi)


def _median(values: FloatArray) -> Callable[[npt.NDArray[np.intp]], FloatArray]:
    return lambda idx: np.asarray(np.median(values[idx], axis=1), dtype=np.float64)


def _mean(values: FloatArray) -> Callable[[npt.NDArray[np.intp]], FloatArray]:
    return lambda idx: np.asarray(values[idx].mean(axis=1), dtype=np.float64)


def _rowwise_corr(x: FloatArray, y: FloatArray) -> FloatArray:
    """Pearson's correlation of each row of x with the same row of y; NaN where either row is constant."""
    xc = x - x.mean(axis=1, keepdims=True)
    yc = y - y.mean(axis=1, keepdims=True)
    den = np.sqrt((xc * xc).sum(axis=1) * (yc * yc).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (xc * yc).sum(axis=1) / np.where(den > 0, den, 1.0), np.nan)


def _rowwise_slope(x: FloatArray, y: FloatArray) -> FloatArray:
    """The least-squares slope of y on x in each row; NaN where x is constant."""
    xc = x - x.mean(axis=1, keepdims=True)
    yc = y - y.mean(axis=1, keepdims=True)
    sxx = (xc * xc).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sxx > 0, (xc * yc).sum(axis=1) / np.where(sxx > 0, sxx, 1.0), np.nan)


def spearman(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """Spearman's rank correlation (Pearson's on average ranks, ties sharing their mean rank); NaN when either
    variable is constant."""
    from scipy.stats import rankdata

    rx = rankdata(np.asarray(x, dtype=np.float64))[None, :]
    ry = rankdata(np.asarray(y, dtype=np.float64))[None, :]
    return float(_rowwise_corr(rx, ry)[0])


def slope(x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line of y on x; NaN when x is constant."""
    xa = np.asarray(x, dtype=np.float64)[None, :]
    ya = np.asarray(y, dtype=np.float64)[None, :]
    b = float(_rowwise_slope(xa, ya)[0])
    return b, float(ya.mean() - b * xa.mean()) if math.isfinite(b) else math.nan


def planning_latency(actor: str, model_steps: npt.ArrayLike, latency: npt.ArrayLike, *, n_boot: int, seed: int
                     ) -> PlanningLatency:
    """Spearman's correlation of model steps with episode latency and the seconds per extra model step, each with
    its bootstrap interval over the episodes (those with an unknown latency left out)."""
    from scipy.stats import rankdata

    x_all = np.asarray(model_steps, dtype=np.float64)
    y_all = np.asarray(latency, dtype=np.float64)
    known = np.isfinite(y_all)
    x, y = x_all[known], y_all[known]
    n = int(x.size)
    nan = Estimate(math.nan, math.nan, math.nan)
    if n < 3:
        return PlanningLatency(actor, n, nan, nan, math.nan, f"{n} episode(s) with a known latency, fewer than 3")
    if np.all(x == x[0]):
        return PlanningLatency(actor, n, nan, nan, math.nan,
                               f"every episode made the same number of model calls ({int(x[0])})")

    def rho(idx: npt.NDArray[np.intp]) -> FloatArray:
        return _rowwise_corr(rankdata(x[idx], axis=1), rankdata(y[idx], axis=1))

    def b(idx: npt.NDArray[np.intp]) -> FloatArray:
        return _rowwise_slope(x[idx], y[idx])

    _, intercept = slope(x, y)
    return PlanningLatency(actor, n, resampled(rho, n, n_boot, seed), resampled(b, n, n_boot, seed), intercept)


def bucket_labels(bins: Sequence[int]) -> list[str]:
    """``(1, 2, 3, 5)`` -> ``["1", "2", "3-4", "5+"]``; a count below the first edge is ``0-(first - 1)``."""
    labels = []
    edges = list(bins)
    if edges[0] > 0:
        labels.append(f"0-{edges[0] - 1}" if edges[0] > 1 else "0")
    for lo, hi in zip(edges, [*edges[1:], None], strict=True):
        labels.append(f"{lo}+" if hi is None else str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}")
    return labels


def bucket_of(steps: npt.ArrayLike, bins: Sequence[int]) -> npt.NDArray[np.intp]:
    """The bucket index of each step count, in the order of :func:`bucket_labels`."""
    idx = np.searchsorted(np.asarray(bins), np.asarray(steps), side="right")  # 0 = below the first edge
    return np.asarray(idx if bins[0] > 0 else idx - 1, dtype=np.intp)


# ---------------------------------------------------------------------------------------------- step analyses
def require_episodes(table: RoutingTable) -> Any:
    """The table's episodes; a table without any is one UsageError saying how to get some."""
    episodes = getattr(table, "episodes", None)
    if episodes is None or len(episodes) == 0:
        raise UsageError(f"table {table.name!r} holds no episodes (one completion per cell): the agentic analyses "
                         "need a table of agent episodes, from routerlab collect --agent or routerlab import steps")
    return episodes


def table_step_limit(table: RoutingTable, given: int | None) -> int | None:
    """The agent's step limit: ``given``, else the first of :data:`LIMIT_KEYS` in the table's metadata (top level,
    then under :data:`LIMIT_PLACES`) that holds a positive integer, else None."""
    if given is not None:
        return given
    places = [table.meta, *(table.meta.get(k) for k in LIMIT_PLACES)]
    for place in places:
        for key in LIMIT_KEYS:
            value = place.get(key) if isinstance(place, dict) else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def actor_steps(actor: str, summary: EpisodeSummary, rows: npt.NDArray[np.intp], *, limit: int | None, n_boot: int,
                seed: int) -> ActorSteps:
    """The steps, accuracy and latency of the episodes at ``rows`` of the summary."""
    counts = {"model": summary.n_model[rows], "tool": summary.n_tool[rows], "all": summary.n_steps[rows]}
    n = int(rows.size)
    median = {k: resampled(_median(np.asarray(v, dtype=np.float64)), n, n_boot, seed) for k, v in counts.items()}
    mean = {k: resampled(_mean(np.asarray(v, dtype=np.float64)), n, n_boot, seed) for k, v in counts.items()}
    score = np.asarray(summary.score[rows], dtype=np.float64)
    correct = np.where(np.isfinite(score), score >= THRESHOLD, False).astype(np.float64)
    accuracy = resampled(_mean(correct), n, n_boot, seed)
    latency = np.asarray(summary.latency_s[rows], dtype=np.float64)
    lat = latency[np.isfinite(latency)]
    lat_median = (resampled(_median(lat), int(lat.size), n_boot, seed) if lat.size
                  else Estimate(math.nan, math.nan, math.nan))
    share = None if limit is None else float(np.mean(np.asarray(summary.n_model[rows]) >= limit))
    return ActorSteps(actor, n, median, mean, accuracy, lat_median, int(lat.size), share)


def step_analyses(table: RoutingTable, settings: AgenticSettings, seed: int
                  ) -> tuple[list[ActorSteps], list[PlanningLatency], list[StepBucket], int | None, list[str]]:
    """Steps per actor, planning steps against latency and success by steps, on every episode of ``table`` (per
    actor in the table's order, then pooled), with the notes they need."""
    summary = require_episodes(table).summary()
    limit = table_step_limit(table, settings.step_limit)
    actors = np.asarray(summary.actor).astype(str)
    groups = [(a, np.flatnonzero(actors == a)) for a in table.actor_names if (actors == a).any()]
    if len(groups) > 1:
        groups.append((POOLED, np.arange(actors.size, dtype=np.intp)))
    steps, planning, buckets = [], [], []
    labels = bucket_labels(settings.step_bins)
    n_boot = settings.n_boot
    for actor, rows in groups:
        steps.append(actor_steps(actor, summary, rows, limit=limit, n_boot=n_boot, seed=seed))
        planning.append(planning_latency(actor, summary.n_model[rows], summary.latency_s[rows], n_boot=n_boot,
                                         seed=seed))
        score = np.asarray(summary.score[rows], dtype=np.float64)
        correct = np.where(np.isfinite(score), score >= THRESHOLD, False).astype(np.float64)
        which = bucket_of(summary.n_model[rows], settings.step_bins)
        for i, label in enumerate(labels):
            members = correct[which == i]
            if members.size:
                buckets.append(StepBucket(actor, label, int(members.size),
                                          resampled(_mean(members), int(members.size), n_boot, seed)))
    notes = []
    small = [s.actor for s in steps if s.episodes < MIN_QUERIES]
    if small:
        notes.append(f"{', '.join(small)}: fewer than {MIN_QUERIES} episodes, so no interval (shown as n/a)")
    if any(b.episodes < MIN_QUERIES for b in buckets):
        notes.append(f"a bucket of model steps with fewer than {MIN_QUERIES} episodes has no interval for its accuracy")
    if limit is None:
        notes.append("the step limit is unknown (not in the table's metadata; --step-limit gives it), so the share "
                     "of episodes that reached it is not reported")
    return steps, planning, buckets, limit, notes


# ------------------------------------------------------------------------------------------------ compression
def population_variance_points(values_share: npt.ArrayLike) -> float:
    """The variance of the routers' values (shares in [0, 1]) in percentage points squared: the population
    variance (divided by the number of routers) of the values times 100, squared units; NaN for fewer than 2."""
    v = np.asarray(values_share, dtype=np.float64).reshape(-1)
    return float(np.var(v * 100.0)) if v.size >= 2 else math.nan


def compared_routers(results: Sequence[RouterResult], collapse: float) -> tuple[list[RouterResult], dict[str, str]]:
    """The routers whose spread the compression measures, and why each other one is left out: a bound, a router
    that samples its distribution, or a collapsed one (one actor takes >= ``collapse`` of its test queries)."""
    kept: list[RouterResult] = []
    excluded: dict[str, str] = {}
    for r in results:
        share = max(r.selection.values()) if r.selection else 0.0
        top = max(r.selection, key=lambda a: r.selection[a]) if r.selection else ""
        if r.router in BOUND_ROUTERS:
            excluded[r.spec] = "a bound, not a routing method"
        elif r.policy != "argmax":
            excluded[r.spec] = "samples its selection distribution (its per-query expected values are not kept)"
        elif shares_collapsed(list(r.selection.values()), collapse):
            excluded[r.spec] = f"collapsed: {top} takes {share:.0%} of the test queries"
        else:
            kept.append(r)
    return kept, excluded


def per_query_values(test: RoutingTable, choice: npt.ArrayLike, metric: str) -> FloatArray:
    """A router's per-query value of a registered metric (Acc@1, Acc@1-L, DCG, L-DCG) at its choices on ``test``
    (the evaluation's test queries in its order): their mean is the metric the evaluation reports."""
    from routerlab.metrics.registry import MetricInputs
    from routerlab.metrics.registry import metric_info as registered

    latency = None if test.latency_s is None else np.asarray(test.latency_s, dtype=np.float64)
    inputs = MetricInputs(score=np.asarray(test.score, dtype=np.float64), choice=np.asarray(choice, dtype=np.intp),
                          latency=latency, threshold=THRESHOLD)
    out = registered(metric).function(inputs)
    return np.asarray(out, dtype=np.float64)


def evaluated_test(table: RoutingTable, ev: Evaluation) -> RoutingTable:
    """The evaluation's test queries of ``table``, in the evaluation's order and with its actors."""
    pos = {str(q): i for i, q in enumerate(table.queries.ids.tolist())}
    rows = np.array([pos[str(q)] for q in np.asarray(ev.test_ids).tolist()], dtype=np.intp)
    return table.select_queries(rows).select_actors(list(ev.actor_names))


def spread(setting_name: str, table: RoutingTable, ev: Evaluation, collapse: float, *, n_boot: int, seed: int
           ) -> Spread:
    """The variance of each compression metric across the compared routers of ``ev`` (evaluated on ``table``), in
    points squared, with its bootstrap interval: the test queries are resampled and every router's metric is
    recomputed from its fixed choices, the same resample for every router."""
    kept, excluded = compared_routers(ev.results, collapse)
    test = evaluated_test(table, ev)
    n = test.n_queries
    latency_known = test.latency_s is not None and not np.isnan(test.latency_s).any()
    metrics = [m for m in COMPRESSION_METRICS if m == "acc_at_1" or latency_known]
    values: dict[str, dict[str, float]] = {r.spec: {} for r in kept}
    variance: dict[str, Estimate] = {}
    replicates: dict[str, FloatArray] = {}
    enough = enough_queries(n, warn=False)
    for metric in metrics:
        if not kept:
            variance[metric] = Estimate(math.nan, math.nan, math.nan)
            continue
        cols = np.column_stack([per_query_values(test, r.choice, metric) for r in kept])
        means = cols.mean(axis=0)
        for r, m in zip(kept, means, strict=True):
            values[r.spec][metric] = float(100.0 * m)
        point = population_variance_points(means)
        if len(kept) < 2 or not enough:
            variance[metric] = Estimate(point, math.nan, math.nan)
            continue
        reps = np.var(bootstrap_means(cols, n_boot, seed) * 100.0, axis=1)
        replicates[metric] = reps
        lo, hi = percentile_interval(reps)
        variance[metric] = Estimate(point, lo, hi)
    return Spread(setting_name, n, [r.spec for r in kept], excluded, values, variance, replicates)


def compression_ratio(agentic: Spread, single: Spread) -> dict[str, Estimate]:
    """Per metric both sides have, agentic variance / single-turn variance, its interval from the two sides'
    independent bootstrap variances taken pairwise; NaN where the single-turn variance is 0 or undefined."""
    out: dict[str, Estimate] = {}
    for metric, a in agentic.variance.items():
        s = single.variance.get(metric)
        if s is None:
            continue
        value = a.value / s.value if s.value and math.isfinite(s.value) and math.isfinite(a.value) else math.nan
        ra, rs = agentic.replicates.get(metric), single.replicates.get(metric)
        if ra is None or rs is None or not math.isfinite(value):
            out[metric] = Estimate(value, math.nan, math.nan)
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(rs > 0, ra / np.where(rs > 0, rs, 1.0), np.nan)
        lo, hi = percentile_interval(ratio)
        out[metric] = Estimate(value, lo, hi)
    return out


def load_single_turn(path: str, actors: Sequence[str]) -> RoutingTable:
    """The single-turn table at ``path`` with the agentic table's actors, matched by name, in their order; an actor
    it lacks is one UsageError naming it."""
    from routerlab.data.store import load

    table = load(Path(path).expanduser())
    missing = [a for a in actors if a not in table.actor_names]
    if missing:
        raise UsageError(f"single-turn table {path}: lacks the actor(s) {', '.join(missing)} of the episode table "
                         f"(its actors: {', '.join(table.actor_names)}); the compression compares the same actors")
    return table.select_actors(list(actors))


def compression_notes(c: Compression) -> list[str]:
    """What a reader needs to know of the compression: too few routers or queries for a variance or an interval,
    and a variance whose point lies below its interval (resampling adds spread, so the bootstrap of a small
    variance is biased upward)."""
    notes = []
    for side in (c.agentic, c.single_turn):
        if side is None:
            continue
        if len(side.routers) < 2:
            notes.append(f"{side.setting}: {len(side.routers)} router(s) left to compare after the exclusions, so "
                         "no variance is defined")
        elif not enough_queries(side.n_queries, warn=False):
            notes.append(f"{side.setting}: only {side.n_queries} test queries, fewer than the {MIN_QUERIES} an "
                         "interval needs: the variances are shown without intervals")
        low = [m for m, e in side.variance.items() if math.isfinite(e.lo) and e.value < e.lo]
        if low:
            notes.append(f"{side.setting}: the variance of {', '.join(low)} lies below its bootstrap interval "
                         "(resampling the queries adds spread between routers; read the interval as an upper "
                         "range)")
    if c.single_turn is None:
        notes.append("no single-turn table given (--single-turn TABLE): the compression shows the agentic side only")
    return notes


# ------------------------------------------------------------------------------------------------ the protocol
def default_routers(table: RoutingTable) -> list[str]:
    """The routers an agentic run evaluates by default: the bounds, best-single, a router fixed on each actor (the
    paper's Route-To-X rows) and the learned routers cheap on a small table."""
    return ["oracle", "random", "best-single", *(f"fixed:actor={a}" for a in table.actor_names), *LEARNED_ROUTERS]


def agentic_records(a: AgenticAnalysis, bon_single: dict[str, float] | None = None) -> list[MetricRecord]:
    """The metric records of an analysis: the routers' metrics on the episodes (slice ``''``) and on the single-turn
    table (``setting=single-turn``), the steps per actor (``actor=NAME``), planning against latency, success by
    steps (``actor=NAME,model_steps=B``), and the compression (``setting=agentic|single-turn``, the ratio
    unsliced)."""
    out = router_records(a.evaluation.results, a.evaluation.oracle_best_of_n)
    if a.single_turn is not None:
        out += router_records(a.single_turn.results, a.single_turn.oracle_best_of_n, "setting=single-turn")
    for s in a.steps:
        where = f"actor={'all' if s.actor == POOLED else s.actor}"
        out.append(MetricRecord.of(s.actor, "n_episodes", s.episodes, None, where))
        for kind in STEP_KINDS:
            prefix = "steps" if kind == "all" else f"{kind}_steps"
            out.append(MetricRecord.of(s.actor, f"{prefix}_median", s.median[kind].value,
                                       s.median[kind][1:], where))
            out.append(MetricRecord.of(s.actor, f"{prefix}_mean", s.mean[kind].value, s.mean[kind][1:], where))
        out.append(MetricRecord.of(s.actor, "episode_accuracy", s.accuracy.value, s.accuracy[1:], where))
        out.append(MetricRecord.of(s.actor, "episode_latency_median", s.latency_median.value,
                                   s.latency_median[1:], where))
        if s.limit_share is not None:
            out.append(MetricRecord.of(s.actor, "step_limit_share", s.limit_share, None, where))
    for p in a.planning:
        where = f"actor={'all' if p.actor == POOLED else p.actor}"
        out.append(MetricRecord.of(p.actor, "planning_spearman", p.spearman.value, p.spearman[1:], where))
        out.append(MetricRecord.of(p.actor, "seconds_per_step", p.slope_s.value, p.slope_s[1:], where))
    for b in a.buckets:
        where = f"actor={'all' if b.actor == POOLED else b.actor},model_steps={b.bucket}"
        out.append(MetricRecord.of(b.actor, "episode_accuracy", b.accuracy.value, b.accuracy[1:], where))
        out.append(MetricRecord.of(b.actor, "n_episodes", b.episodes, None, where))
    c = a.compression
    for side in (c.agentic, c.single_turn):
        if side is None:
            continue
        for metric, e in side.variance.items():
            out.append(MetricRecord.of("non-collapsed routers", f"{metric}_variance", e.value, e[1:],
                                       f"setting={side.setting}"))
    for metric, e in c.ratio.items():
        out.append(MetricRecord.of("non-collapsed routers", f"{metric}_variance_ratio", e.value, e[1:]))
    return out


def run_agentic(table: RoutingTable, settings: AgenticSettings, seed: int, routers: Sequence[Any],
                context: RunContext | None = None) -> Result:
    """The four analyses (module docstring) on ``table`` with ``routers`` (spec strings or instances)."""
    from routerlab.protocols.base import get_protocol

    episodes = require_episodes(table)
    single = None if settings.single_turn is None else load_single_turn(settings.single_turn, table.actor_names)
    full = get_protocol("full")
    fs = settings.full()
    ev_result = full.run(table, fs, seed, list(routers), context)
    ev: Evaluation = ev_result.native
    st: Evaluation | None = None
    if single is not None:
        try:
            st = full.run(single, fs, seed, list(routers), None).native
        except (UsageError, DataError) as exc:
            raise UsageError(f"single-turn table {settings.single_turn}: {exc}") from None
    steps, planning, buckets, limit, notes = step_analyses(table, settings, seed)
    agentic_side = spread("agentic", table, ev, settings.collapse, n_boot=settings.n_boot, seed=seed)
    single_side = None
    ratio: dict[str, Estimate] = {}
    if st is not None and single is not None:
        single_side = spread("single-turn", single, st, settings.collapse, n_boot=settings.n_boot, seed=seed)
        ratio = compression_ratio(agentic_side, single_side)
    compression = Compression(agentic_side, single_side, ratio, settings.collapse)
    notes += compression_notes(compression)
    analysis = AgenticAnalysis(ev, st, steps, planning, buckets, compression, episodes.n_cells, limit,
                               settings.step_bins, notes)
    return Result("agentic", ev_result.provenance, settings, agentic_records(analysis), native=analysis,
                  skipped=dict(ev_result.skipped), n_train=ev_result.n_train, n_test=ev_result.n_test,
                  notes=[*ev_result.notes, *notes])


@register_protocol("agentic")
class Agentic(Protocol):
    summary = ("routers on agent episodes (episode latency), steps per actor, planning steps against latency and "
               "the compression of the routers' spread against a single-turn table")
    spec = "SPEC 1, 5, 7, 9"
    Settings = AgenticSettings

    def run(self, table: RoutingTable, settings: Any, seed: int = 0, routers: Sequence[Any] = (),
            context: RunContext | None = None) -> Result:
        return run_agentic(table, settings, seed, routers, context)


__all__ = ["POOLED", "ActorSteps", "AgenticAnalysis", "AgenticSettings", "Compression", "PlanningLatency",
           "Spread", "StepBucket", "compared_routers", "default_routers", "planning_latency",
           "population_variance_points", "run_agentic", "spearman", "spread", "step_analyses"]
