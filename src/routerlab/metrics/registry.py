"""Named per-query metrics and ``evaluate_choices``: every applicable metric of one router's decisions with
its 95% bootstrap interval in one call (SPEC 4, 5, 7).

A metric is registered with ``@metric(name, needs=(...), label=, unit=, direction=, cells=)``: a function of
``MetricInputs`` returning either per-query values (the metric is their mean) or a ``RatioTerms`` pair (the
metric is mean(numerator) / mean(denominator), e.g. V_B). ``needs`` names the optional inputs without which the
metric is skipped; ``label``, ``unit`` and ``direction`` say how it is shown and which way is better.

One value per router (docs/bandits.md, "One value per router"): a router's value is its policy *as deployed*.
A router that acts by its argmax is scored at its choice (``policy="argmax"``). A router that acts by sampling
its selection distribution (``Router.explores``) is scored by the expectation under that distribution
(``policy="distribution"``): every metric that depends on the chosen actor is a per-query function of it, so its
expectation is exact, ``sum_a p(a|q) cells[q, a]`` with ``cells[q, a]`` the metric's value had actor a been chosen
(the ``cells`` function of its registration). Beside it, under the name ``<metric>_greedy``, the same metric at
the router's argmax. A metric that does not depend on the choice (E_p) is registered with ``choice_free=True`` and
has no greedy twin; a choice metric registered without ``cells`` has only its greedy value under a distribution
policy (its expectation is not defined). All metrics of a call are resampled over the same bootstrap draws.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

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
from routerlab.metrics.bootstrap import Estimate, bootstrap_means, enough_queries, percentile_interval
from routerlab.metrics.latency import LatencyRanks, answerable, latency_ranks, latency_rewards
from routerlab.metrics.selection import best_single_performance, checked_distribution, entropy_bits

Policy = Literal["argmax", "distribution"]
POLICIES: tuple[str, ...] = ("argmax", "distribution")
"""How a router acts when deployed: by its argmax, or by sampling its selection distribution (it explores)."""
Direction = Literal["higher", "lower"]
GREEDY_SUFFIX = "_greedy"
"""``mu_o_greedy``: an exploring router's metric at its argmax, beside its deployed (expected) value."""

# Cells per block when a metric's per-cell values are taken in expectation: keeps each (rows, m) float64
# block near 32 MB whatever the table's size.
_BLOCK_CELLS = 1 << 22


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
    # the distribution an exploring router draws from when deployed (policy "distribution"): the selection
    # distribution, or the router's own acting one (r_o(p)); None under the argmax policy
    acting: FloatArray | None = None
    reference: float | None = None
    # V_R's reference as an actor of the table (its index): Perf(reference) is then that actor's mean score on the
    # same queries, resampled with the router's (a ratio of means, as V_B); ``reference`` holds its point value
    reference_actor: int | None = None
    best_single: int | None = None
    threshold: float = 0.5
    nan_policy: ScoreNanPolicy = "raise"
    value_nan_policy: ValueNanPolicy = "raise"
    # the SPEC 5 per-cell rewards of the last block of rows asked for (``rewards``): the three latency metrics
    # of one block share one row-wise sort
    _rewards: dict[tuple[int, int], dict[str, FloatArray]] = field(default_factory=dict, repr=False, compare=False)

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

    @cached_property
    def reference_scores(self) -> FloatArray:
        """Per query, the score of V_R's reference actor (``reference_actor``) after the NaN rule."""
        assert self.reference_actor is not None
        fixed = as_choice(np.full(self.score.shape[0], self.reference_actor, dtype=np.intp), *self.score.shape)
        return chosen_scores(self.score, fixed, self.nan_policy)

    @cached_property
    def best_single_scores(self) -> FloatArray:
        """Per query, the score of V_B's best single actor (fixed on the whole split) after the NaN rule."""
        actor, _ = best_single_performance(self.score, self.best_single, self.nan_policy)
        return chosen_scores(self.score, np.full(self.score.shape[0], actor, dtype=np.intp), self.nan_policy)

    def score_cells(self, rows: slice) -> FloatArray:
        """(rows, m): the score of every actor on the queries ``rows`` after the NaN rule (``zero``: an unobserved
        cell counts 0; ``raise``: it stays NaN, an error where the policy may draw it)."""
        s = np.asarray(self.score[rows], dtype=np.float64)  # one block widened: the matrix may be float32
        if self.nan_policy == "zero":
            return np.where(np.isnan(s), 0.0, s)
        if self.nan_policy != "raise":
            raise ValueError(f"nan_policy must be 'raise' or 'zero', got {self.nan_policy!r}")
        return s

    def rewards(self, rows: slice) -> dict[str, FloatArray]:
        """The SPEC 5 per-cell terms (:func:`routerlab.metrics.latency.latency_rewards`) of the queries ``rows``;
        an unobserved cell is NaN under ``raise`` and 0 (not correct) under ``zero``, as for a chosen cell."""
        key = (int(rows.start or 0), int(rows.stop))
        if key not in self._rewards:
            self._rewards.clear()
            cells = latency_rewards(self.score[rows], None if self.latency is None else self.latency[rows],
                                    self.threshold)
            if self.nan_policy == "zero":
                cells = {k: np.where(np.isnan(v), 0.0, v) for k, v in cells.items()}
            self._rewards[key] = cells
        return self._rewards[key]


PerQuery = FloatArray | RatioTerms
MetricFunction = Callable[[MetricInputs], PerQuery]
CellFunction = Callable[[MetricInputs, slice], PerQuery]
"""A metric's value had each actor been chosen, on a block of queries: (rows, m) cells (an unknown cell NaN), or
a ``RatioTerms`` whose parts are (rows, m) cells or (rows,) values that do not depend on the choice."""


@dataclass(frozen=True)
class RegisteredMetric:
    """A registered metric: its per-query function (at the router's choice), the optional inputs it needs, how it
    is shown (label, unit, which direction is better) and, for a metric that depends on the chosen actor, its
    per-cell function (the expectation under a distribution policy). ``greedy_of`` names the metric a greedy twin
    (``<name>_greedy``) is the argmax value of; ``choice_free`` marks a metric that does not depend on the choice."""

    name: str
    function: MetricFunction
    needs: tuple[str, ...]
    label: str = ""
    unit: str = ""
    direction: Direction = "higher"
    cells: CellFunction | None = None
    choice_free: bool = False
    greedy_of: str | None = None


_REGISTRY: dict[str, RegisteredMetric] = {}


def metric(name: str, needs: Sequence[str] = (), *, label: str | None = None, unit: str = "",
           direction: Direction = "higher", cells: CellFunction | None = None, choice_free: bool = False
           ) -> Callable[[MetricFunction], MetricFunction]:
    """Register a per-query metric under ``name``; it runs only when every input in ``needs`` is given.

    ``cells`` gives its value had each actor been chosen (what an exploring router's expectation is taken over);
    ``choice_free`` says it does not depend on the chosen actor. Unless it is choice-free, the metric's greedy
    twin ``<name>_greedy`` (an exploring router's value at its argmax) is registered with it."""
    unknown = set(needs) - set(MetricInputs.__dataclass_fields__)
    if unknown:
        raise ValueError(f"metric {name!r} needs unknown inputs {sorted(unknown)}")
    if direction not in ("higher", "lower"):
        raise ValueError(f"metric {name!r}: direction must be 'higher' or 'lower', got {direction!r}")
    if choice_free and cells is not None:
        raise ValueError(f"metric {name!r} is choice-free: it has no per-cell values")

    def register(function: MetricFunction) -> MetricFunction:
        twin = name + GREEDY_SUFFIX
        if name in _REGISTRY or (not choice_free and twin in _REGISTRY):
            raise ValueError(f"a metric named {name!r} is already registered")
        shown = label or name
        _REGISTRY[name] = RegisteredMetric(name, function, tuple(needs), shown, unit, direction, cells, choice_free)
        if not choice_free:
            _REGISTRY[twin] = RegisteredMetric(twin, function, tuple(needs), f"{shown} (greedy)", unit, direction,
                                               greedy_of=name)
        return function

    return register


def registered_metrics() -> tuple[str, ...]:
    """Names of the registered metrics (greedy twins included, each after its metric), in registration order."""
    return tuple(_REGISTRY)


def metric_info(name: str) -> RegisteredMetric:
    """The registration of metric ``name`` (label, unit, direction, ...); ``ValueError`` for an unknown name."""
    entry = _REGISTRY.get(name)
    if entry is None:
        raise ValueError(f"unknown metric {name!r}; registered: {list(_REGISTRY)}")
    return entry


# -- per-cell values: what a query is worth if actor a is chosen ------------------------------------------------
def _score_cells(inputs: MetricInputs, rows: slice) -> PerQuery:
    return inputs.score_cells(rows)


def _v_b_cells(inputs: MetricInputs, rows: slice) -> PerQuery:
    return RatioTerms(inputs.score_cells(rows), inputs.best_single_scores[rows])


def _v_r_cells(inputs: MetricInputs, rows: slice) -> PerQuery:
    assert inputs.reference is not None
    if inputs.reference_actor is not None:
        return RatioTerms(inputs.score_cells(rows), inputs.reference_scores[rows])
    if inputs.reference == 0:
        raise ValueError("reference performance must be non-zero")
    return inputs.score_cells(rows) / float(inputs.reference)


def _acc_at_1_cells(inputs: MetricInputs, rows: slice) -> PerQuery:
    s = inputs.score_cells(rows)
    with np.errstate(invalid="ignore"):
        return np.where(np.isnan(s), np.nan, (s >= inputs.threshold).astype(np.float64))


def _reward_cells(key: str) -> CellFunction:
    def cells(inputs: MetricInputs, rows: slice) -> PerQuery:
        return inputs.rewards(rows)[key]

    return cells


def _known_cells(key: str) -> CellFunction:
    """Cost or latency of every cell: NaN stays NaN under ``raise``; under ``omit`` the mean runs over the known
    cells (the expected known value over the probability that the drawn cell is known)."""

    def cells(inputs: MetricInputs, rows: slice) -> PerQuery:
        matrix = getattr(inputs, key)
        assert matrix is not None
        values = np.asarray(matrix[rows], dtype=np.float64)
        if inputs.value_nan_policy != "omit":
            return values
        missing = np.isnan(values)
        return RatioTerms(np.where(missing, 0.0, values), (~missing).astype(np.float64))

    return cells


# -- the metrics ------------------------------------------------------------------------------------------------
@metric("mu_o", label="mu_o", unit="score", cells=_score_cells)
def _mu_o(inputs: MetricInputs) -> PerQuery:
    """Mean chosen score (SPEC 4)."""
    return inputs.chosen_score


@metric("v_b", label="V_B", unit="ratio", cells=_v_b_cells)
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


@metric("v_r", needs=("reference",), label="V_R", unit="ratio", cells=_v_r_cells)
def _v_r(inputs: MetricInputs) -> PerQuery:
    """mu_o / Perf(reference) (SPEC 4): a given constant, or with ``reference_actor`` that actor's mean score on the
    same queries, the two means resampled together (as V_B's)."""
    assert inputs.reference is not None
    if inputs.reference_actor is not None:
        return RatioTerms(inputs.chosen_score, inputs.reference_scores)
    if inputs.reference == 0:
        raise ValueError("reference performance must be non-zero")
    return inputs.chosen_score / float(inputs.reference)


@metric("e_p", needs=("distribution",), label="E_p", unit="bits", choice_free=True)
def _e_p(inputs: MetricInputs) -> PerQuery:
    """Entropy in bits of the router's selection distribution (SPEC 4)."""
    assert inputs.distribution is not None
    return entropy_bits(inputs.distribution)


@metric("acc_at_1", label="Acc@1", unit="share", cells=_acc_at_1_cells)
def _acc_at_1(inputs: MetricInputs) -> PerQuery:
    """1[chosen is correct] (SPEC 5)."""
    with np.errstate(invalid="ignore"):
        return (inputs.chosen_score >= inputs.threshold).astype(np.float64)


@metric("acc_at_1_l", needs=("latency",), label="Acc@1-L", unit="share", cells=_reward_cells("acc_at_1_l"))
def _acc_at_1_l(inputs: MetricInputs) -> PerQuery:
    """1[chosen is the fastest correct actor] (SPEC 5)."""
    return inputs.ranks.acc_at_1_l


@metric("dcg", needs=("latency",), label="DCG", unit="score", cells=_reward_cells("dcg"))
def _dcg(inputs: MetricInputs) -> PerQuery:
    """Latency-rank DCG (SPEC 5)."""
    return inputs.ranks.dcg


@metric("l_dcg", needs=("latency",), label="L-DCG", unit="score", cells=_reward_cells("l_dcg"))
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


@metric("mean_cost", needs=("cost",), label="mean cost", unit="USD/query", direction="lower",
        cells=_known_cells("cost"))
def _mean_cost(inputs: MetricInputs) -> PerQuery:
    """Cost of the chosen actor."""
    assert inputs.cost is not None
    return _known_mean_terms(chosen(inputs.cost, inputs.choice), "cost", inputs.value_nan_policy)


@metric("mean_latency", needs=("latency",), label="mean latency", unit="s", direction="lower",
        cells=_known_cells("latency"))
def _mean_latency(inputs: MetricInputs) -> PerQuery:
    """Latency of the chosen actor."""
    assert inputs.latency is not None
    return _known_mean_terms(chosen(inputs.latency, inputs.choice), "latency", inputs.value_nan_policy)


# -- expectation under a distribution ---------------------------------------------------------------------------
def _expected(entries: Sequence[RegisteredMetric], inputs: MetricInputs) -> dict[str, PerQuery]:
    """Each metric's per-query expectation under ``inputs.acting`` (the router draws actor a with probability
    p(a|q)): sum_a p(a|q) cells[q, a] over the actors with p > 0, block by block of queries (blocks bound the
    memory at any table size; the SPEC 5 metrics of a block share one sort). A cell the policy may draw (p > 0)
    whose value is unknown raises ``ValueError`` naming the metric and the queries."""
    w = inputs.acting
    assert w is not None
    n, m = w.shape
    step = max(1, _BLOCK_CELLS // max(m, 1))
    parts: dict[str, list[tuple[FloatArray, FloatArray | None]]] = {e.name: [] for e in entries}
    for start in range(0, n, step):
        rows = slice(start, min(n, start + step))
        wb = w[rows]
        for entry in entries:
            assert entry.cells is not None
            terms = entry.cells(inputs, rows)
            if isinstance(terms, RatioTerms):
                parts[entry.name].append((_expect(entry.name, terms.numerator, wb, start),
                                          _expect(entry.name, terms.denominator, wb, start)))
            else:
                parts[entry.name].append((_expect(entry.name, terms, wb, start), None))
    out: dict[str, PerQuery] = {}
    for entry in entries:
        blocks = parts[entry.name]
        num = np.concatenate([b[0] for b in blocks]) if blocks else np.zeros(0)
        if blocks and blocks[0][1] is not None:
            out[entry.name] = RatioTerms(num, np.concatenate([b[1] for b in blocks if b[1] is not None]))
        else:
            out[entry.name] = num
    return out


def _expect(name: str, values: npt.NDArray[Any], weights: FloatArray, start: int) -> FloatArray:
    """Per query of a block: ``values`` as they are when they do not depend on the choice ((rows,)), else their
    expectation under ``weights`` ((rows, m): sum over the cells with positive probability)."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 1:
        return v
    used = weights > 0
    unknown = (used & np.isnan(v)).any(axis=1)
    if unknown.any():
        rows = np.zeros(start + unknown.size, dtype=bool)
        rows[start:] = unknown
        raise ValueError(f"{name}: the value of an actor the router draws with probability > 0 is unknown (NaN) at "
                         f"{where_nan_message(rows)}; evaluate on the full observed table or pass nan_policy='zero'")
    return np.asarray(np.where(used, weights * np.nan_to_num(v), 0.0).sum(axis=1))


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
    policy: Policy = "argmax",
    acting: npt.ArrayLike | None = None,
    reference_actor: int | None = None,
) -> dict[str, Estimate]:
    """Every registered metric whose inputs are given, as (value, lo, hi) with a percentile bootstrap
    interval over queries (SPEC 7; NaN, unavailable, below MIN_QUERIES evaluated queries). Always: mu_o, v_b,
    acc_at_1; with ``reference`` (a number, Perf(reference)) or ``reference_actor`` (an actor's index: Perf is its
    mean score on the evaluated queries, resampled with the router's): v_r; with ``distribution``: e_p; with
    ``latency``: acc_at_1_l, dcg, l_dcg, mean_latency; with ``cost``: mean_cost. ``answerable_only`` keeps the
    queries with a correct actor (SPEC 5's view); ``names`` restricts the set. Deterministic for a seed.

    ``policy`` is how the router acts when deployed (module docstring): ``argmax`` scores ``choice``;
    ``distribution`` (an exploring router) scores every choice metric as its expectation under the distribution
    it draws from, ``acting`` when given (a router whose acting distribution differs from its selection one,
    r_o(p)) else ``distribution`` (one of them required), and adds ``<metric>_greedy``, the same metric at
    ``choice`` (the argmax), all over the same bootstrap resamples. ``acting`` is ignored under ``argmax``."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    s = as_float_matrix(score)  # float32 stays float32: the metrics pick cells, they never sum the matrix
    n, m = s.shape
    sampling = policy == "distribution"
    dist = None if distribution is None else as_matrix(distribution, "distribution")
    weights = None
    if sampling:
        weights = dist if acting is None else as_matrix(acting, "acting distribution")
        if weights is None:
            raise ValueError("policy='distribution' scores the expectation under the distribution the router draws "
                             "from: pass distribution (or acting)")
        if weights.shape != (n, m):
            raise ValueError(f"the acting distribution must have shape {(n, m)}, got {weights.shape}")
        checked_distribution(weights)
    if reference is not None and reference_actor is not None:
        raise ValueError("give V_R's reference as a number (reference) or as an actor (reference_actor), not both")
    if reference_actor is not None:
        ref_choice = as_choice(np.full(n, reference_actor, dtype=np.intp), n, m)
        reference = float(np.mean(chosen_scores(s, ref_choice, nan_policy)))  # the point value, over all n
    inputs = MetricInputs(
        score=s,
        choice=as_choice(choice, n, m),
        latency=None if latency is None else as_actor_matrix(latency, n, m, "latency"),
        cost=None if cost is None else as_actor_matrix(cost, n, m, "cost"),
        distribution=dist,
        acting=weights,
        reference=reference,
        reference_actor=reference_actor,
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

    # which metrics this call reports, and how: at the choice, or in expectation under the distribution
    run: list[RegisteredMetric] = []
    for name in wanted:
        entry = _REGISTRY[name]
        if any(getattr(inputs, need) is None for need in entry.needs):
            continue
        if entry.greedy_of is not None and not sampling:
            continue  # an argmax router's value is its greedy value: no twin
        if sampling and entry.greedy_of is None and not entry.choice_free and entry.cells is None:
            continue  # no per-cell values: only its greedy twin is defined under a distribution
        run.append(entry)
    expected = _expected([e for e in run if sampling and e.cells is not None], inputs) if sampling else {}

    columns: list[FloatArray] = []
    layout: dict[str, tuple[int, int | None]] = {}
    for entry in run:
        name = entry.name
        terms = expected[name] if name in expected else entry.function(inputs)
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
    # below MIN_QUERIES evaluated queries the intervals are unavailable (NaN), not computed
    reps = bootstrap_means(table, n_boot, seed) if enough_queries(table.shape[0]) else None
    out: dict[str, Estimate] = {}
    for name, (num, den) in layout.items():
        if den is None:
            value = float(point[num])
        else:
            value = float(point[num] / point[den]) if point[den] != 0 else float("nan")
        if reps is None:
            out[name] = Estimate(value, float("nan"), float("nan"))
            continue
        if den is None:
            replicates = reps[:, num]
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                replicates = np.where(reps[:, den] != 0, reps[:, num] / reps[:, den], np.nan)
        lo, hi = percentile_interval(replicates, alpha)
        out[name] = Estimate(value, lo, hi)
    return out
