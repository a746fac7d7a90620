"""Named per-query metrics and ``evaluate_choices``: every applicable metric of one choice vector with
its 95% bootstrap interval in one call (SPEC 4, 5, 7).

A metric is registered with ``@metric(name, needs=(...))``: a function of ``MetricInputs`` returning
either per-query values (the metric is their mean) or a ``RatioTerms`` pair (the metric is
mean(numerator) / mean(denominator), e.g. V_B). ``needs`` names the optional inputs without which the
metric is skipped. All metrics of a call are resampled over the same bootstrap draws.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from routerlab.metrics._arrays import (
    Float32Array,
    FloatArray,
    IntArray,
    ScoreNanPolicy,
    ValueNanPolicy,
    as_actor_matrix,
    as_choice,
    as_float_matrix,
    as_matrix,
    chosen,
    chosen_scores,
    where_nan_message,
)
from routerlab.metrics.bootstrap import Estimate, bootstrap_means, percentile_interval
from routerlab.metrics.latency import LatencyRanks, answerable, latency_ranks
from routerlab.metrics.selection import best_single_performance, entropy_bits


@dataclass(frozen=True)
class RatioTerms:
    """Per-query numerator and denominator of a ratio-of-means metric."""

    numerator: FloatArray
    denominator: FloatArray


@dataclass(frozen=True)
class MetricInputs:
    """Everything a registered metric may read; optional fields are None when not given."""

    score: FloatArray | Float32Array  # a float32 matrix stays float32: widen what you pick before summing
    choice: IntArray
    latency: FloatArray | None = None
    cost: FloatArray | None = None
    distribution: FloatArray | None = None
    reference: float | None = None
    best_single: int | None = None
    threshold: float = 0.5
    nan_policy: ScoreNanPolicy = "raise"
    value_nan_policy: ValueNanPolicy = "raise"

    @cached_property
    def chosen_score(self) -> FloatArray:
        """The chosen scores after the NaN rule."""
        return chosen_scores(self.score, self.choice, self.nan_policy)

    @cached_property
    def ranks(self) -> LatencyRanks:
        """The SPEC 5 per-query terms (needs latency)."""
        if self.latency is None:
            raise ValueError("latency is required")
        return latency_ranks(self.score, self.choice, self.latency, self.threshold, self.nan_policy)


PerQuery = FloatArray | RatioTerms
MetricFunction = Callable[[MetricInputs], PerQuery]


@dataclass(frozen=True)
class RegisteredMetric:
    name: str
    function: MetricFunction
    needs: tuple[str, ...]


_REGISTRY: dict[str, RegisteredMetric] = {}


def metric(name: str, needs: Sequence[str] = ()) -> Callable[[MetricFunction], MetricFunction]:
    """Register a per-query metric under ``name``; it runs only when every input in ``needs`` is given."""
    unknown = set(needs) - set(MetricInputs.__dataclass_fields__)
    if unknown:
        raise ValueError(f"metric {name!r} needs unknown inputs {sorted(unknown)}")

    def register(function: MetricFunction) -> MetricFunction:
        if name in _REGISTRY:
            raise ValueError(f"a metric named {name!r} is already registered")
        _REGISTRY[name] = RegisteredMetric(name, function, tuple(needs))
        return function

    return register


def registered_metrics() -> tuple[str, ...]:
    """Names of the registered metrics, in registration order."""
    return tuple(_REGISTRY)


@metric("mu_o")
def _mu_o(inputs: MetricInputs) -> PerQuery:
    """Mean chosen score (SPEC 4)."""
    return inputs.chosen_score


@metric("v_b")
def _v_b(inputs: MetricInputs) -> PerQuery:
    """mu_o / Perf(best single actor on the test split), the actor fixed on the whole split and its
    mean resampled with the router's (SPEC 4)."""
    n, m = inputs.score.shape
    if inputs.best_single is None:
        actor, _ = best_single_performance(inputs.score, None, inputs.nan_policy)
        fixed = np.full(n, actor, dtype=np.intp)
    else:  # the actor is given: check it as a choice, without a float64 copy of the score matrix
        fixed = as_choice(np.full(n, inputs.best_single, dtype=np.intp), n, m)
    return RatioTerms(inputs.chosen_score, chosen_scores(inputs.score, fixed, inputs.nan_policy))


@metric("v_r", needs=("reference",))
def _v_r(inputs: MetricInputs) -> PerQuery:
    """mu_o / Perf(reference), a constant (SPEC 4)."""
    assert inputs.reference is not None
    if inputs.reference == 0:
        raise ValueError("reference performance must be non-zero")
    return inputs.chosen_score / float(inputs.reference)


@metric("e_p", needs=("distribution",))
def _e_p(inputs: MetricInputs) -> PerQuery:
    """Entropy in bits of the router's selection distribution (SPEC 4)."""
    assert inputs.distribution is not None
    return entropy_bits(inputs.distribution)


@metric("acc_at_1")
def _acc_at_1(inputs: MetricInputs) -> PerQuery:
    """1[chosen is correct] (SPEC 5)."""
    with np.errstate(invalid="ignore"):
        return (inputs.chosen_score >= inputs.threshold).astype(np.float64)


@metric("acc_at_1_l", needs=("latency",))
def _acc_at_1_l(inputs: MetricInputs) -> PerQuery:
    """1[chosen is the fastest correct actor] (SPEC 5)."""
    return inputs.ranks.acc_at_1_l


@metric("dcg", needs=("latency",))
def _dcg(inputs: MetricInputs) -> PerQuery:
    """Latency-rank DCG (SPEC 5)."""
    return inputs.ranks.dcg


@metric("l_dcg", needs=("latency",))
def _l_dcg(inputs: MetricInputs) -> PerQuery:
    """Latency-aware DCG (SPEC 5)."""
    return inputs.ranks.l_dcg


def _known_mean_terms(values: FloatArray, name: str, policy: ValueNanPolicy) -> PerQuery:
    """Chosen cost/latency as a mean over the queries where it is known (``omit``) or all (``raise``)."""
    missing = np.isnan(values)
    if not missing.any():
        return values
    if policy != "omit":
        raise ValueError(f"the chosen actor's {name} is unknown (NaN) at {where_nan_message(missing)}")
    return RatioTerms(np.where(missing, 0.0, values), (~missing).astype(np.float64))


@metric("mean_cost", needs=("cost",))
def _mean_cost(inputs: MetricInputs) -> PerQuery:
    """Cost of the chosen actor."""
    assert inputs.cost is not None
    return _known_mean_terms(chosen(inputs.cost, inputs.choice), "cost", inputs.value_nan_policy)


@metric("mean_latency", needs=("latency",))
def _mean_latency(inputs: MetricInputs) -> PerQuery:
    """Latency of the chosen actor."""
    assert inputs.latency is not None
    return _known_mean_terms(chosen(inputs.latency, inputs.choice), "latency", inputs.value_nan_policy)


def evaluate_choices(
    score: npt.ArrayLike,
    choice: npt.ArrayLike,
    latency: npt.ArrayLike | None = None,
    cost: npt.ArrayLike | None = None,
    distribution: npt.ArrayLike | None = None,
    reference: float | None = None,
    best_single: int | None = None,
    seed: int = 0,
    n_boot: int = 1000,
    alpha: float = 0.05,
    threshold: float = 0.5,
    nan_policy: ScoreNanPolicy = "raise",
    value_nan_policy: ValueNanPolicy = "raise",
    answerable_only: bool = False,
    names: Sequence[str] | None = None,
) -> dict[str, Estimate]:
    """Every registered metric whose inputs are given, as (value, lo, hi) with a percentile bootstrap
    interval over queries (SPEC 7). Always: mu_o, v_b, acc_at_1; with ``reference``: v_r; with
    ``distribution``: e_p; with ``latency``: acc_at_1_l, dcg, l_dcg, mean_latency; with ``cost``:
    mean_cost. ``answerable_only`` keeps the queries with a correct actor (SPEC 5's view); ``names``
    restricts the set. Deterministic for a seed."""
    s = as_float_matrix(score)  # float32 stays float32: the metrics pick cells, they never sum the matrix
    n, m = s.shape
    inputs = MetricInputs(
        score=s,
        choice=as_choice(choice, n, m),
        latency=None if latency is None else as_actor_matrix(latency, n, m, "latency"),
        cost=None if cost is None else as_actor_matrix(cost, n, m, "cost"),
        distribution=None if distribution is None else as_matrix(distribution, "distribution"),
        reference=reference,
        best_single=best_single,
        threshold=threshold,
        nan_policy=nan_policy,
        value_nan_policy=value_nan_policy,
    )
    if inputs.distribution is not None and inputs.distribution.shape != (n, m):
        raise ValueError(f"distribution must have shape {(n, m)}, got {inputs.distribution.shape}")
    wanted = registered_metrics() if names is None else tuple(names)
    missing_names = [name for name in wanted if name not in _REGISTRY]
    if missing_names:
        raise ValueError(f"unknown metrics {missing_names}; registered: {list(_REGISTRY)}")
    keep = answerable(s, threshold) if answerable_only else np.ones(n, dtype=bool)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if not keep.any():
        raise ValueError("no query left to evaluate (answerable_only with no answerable query)")

    columns: list[FloatArray] = []
    layout: dict[str, tuple[int, int | None]] = {}
    for name in wanted:
        entry = _REGISTRY[name]
        if any(getattr(inputs, need) is None for need in entry.needs):
            continue
        terms = entry.function(inputs)
        if isinstance(terms, RatioTerms):
            columns += [terms.numerator[keep], terms.denominator[keep]]
            layout[name] = (len(columns) - 2, len(columns) - 1)
        else:
            columns.append(np.asarray(terms, dtype=np.float64)[keep])
            layout[name] = (len(columns) - 1, None)
    if not columns:
        return {}
    table = np.column_stack(columns)
    point = table.mean(axis=0)
    reps = bootstrap_means(table, n_boot, seed)
    out: dict[str, Estimate] = {}
    for name, (num, den) in layout.items():
        if den is None:
            value, replicates = float(point[num]), reps[:, num]
        else:
            value = float(point[num] / point[den]) if point[den] != 0 else float("nan")
            with np.errstate(divide="ignore", invalid="ignore"):
                replicates = np.where(reps[:, den] != 0, reps[:, num] / reps[:, den], np.nan)
        lo, hi = percentile_interval(replicates, alpha)
        out[name] = Estimate(value, lo, hi)
    return out
