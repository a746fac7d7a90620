"""Full-observability evaluation (SPEC 4-5, 7): train on train, route the test split, score every metric.

One scoring pass per router feeds its choices (argmax), its selection distribution (E_p) and every metric with a
bootstrap interval. A router is scored as it is deployed (docs/bandits.md, "One value per router"): one that acts
by its argmax at its choices; one that explores (``Router.explores``: it samples its selection distribution) by the
expectation of every metric under that distribution, with its argmax value beside it as ``<metric>_greedy``; its
selection shares are then the expected shares. Test queries with an unobserved cell are left out of evaluation (and
counted), since no metric can score a choice whose outcome is unknown. The result records the router and its
settings, the data name and hash, the split, the seed and the routerlab version.

With a development part (``dev=F``: a seeded fraction of the training side, ``Split.dev``), routers fit on the rest
of the training side, and the routers that train by epochs (``Router.uses_dev``: ``mlp``, ``barp``, the probes) stop
on the development queries; each result then records the epoch kept (``early_stopping``) and the run record the
part's fraction, seed and size. The development features come from the encoder fitted on the training texts only;
the test queries choose nothing.

Routers may be given as spec strings (``"knn:k=5"``) or as :class:`Router` instances, mixed in one
list, so a router class written in a notebook is evaluated without registering it; the encoder may be
a spec or an :class:`Encoder` instance. A spec string is recorded as written; an instance as its
class name and options (``MyRouter(k=5)``, with ``class`` = its importable path), so the result
still says what ran.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from routerlab.data.feedback import Feedback, as_feedback
from routerlab.data.provenance import Provenance
from routerlab.data.splits import Split, make_split, with_dev
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.features.registry import Encoder
from routerlab.metrics._arrays import row_blocks
from routerlab.metrics.bootstrap import MIN_QUERIES, FewQueriesWarning
from routerlab.metrics.bounds import best_single_actor
from routerlab.metrics.latency import answerable, oracle_best_of_n
from routerlab.metrics.registry import Policy, evaluate_choices
from routerlab.metrics.selection import expected_per_query, expected_shares, selection_shares, shares_collapsed
from routerlab.progress import task, track
from routerlab.protocols.base import (
    COMPARE_HELP,
    DEV_HELP,
    ENCODER_HELP,
    NBOOT,
    NBOOT_HELP,
    SKIP_HELP,
    SPLIT_HELP,
    MetricRecord,
    Options,
    Protocol,
    ProtocolSettings,
    Result,
    RunContext,
    check_dev,
    check_encoder,
    check_split,
    register_protocol,
    setting,
)
from routerlab.routers.base import DevPart, Router, get_router


@dataclass
class RouterResult:
    """One router's outcome on the test split."""

    router: str
    spec: str
    params: dict[str, Any]
    metrics: dict[str, float]
    ci: dict[str, tuple[float, float]]
    selection: dict[str, float]
    collapsed: bool
    choice: npt.NDArray[np.intp]
    fit_seconds: float
    score_seconds: float
    sweep: dict[str, Any] | None = None
    paired: dict[str, Any] | None = None

    router_class: str | None = None  # the router's module.qualname, for instances only
    # what the router learned from when a protocol records it per router (Voyager: its own logged choices)
    feedback: dict[str, Any] | None = None
    # how the router acts when deployed: "argmax", or "distribution" (it explores: its metrics are expectations
    # under its selection distribution, ``choice`` is its argmax and ``<metric>_greedy`` that argmax's value)
    policy: str = "argmax"
    # an exploring router's expected score on each test query, sum_a p(a|q) score(q, a) (mean = its mu_o); None
    # for an argmax router, whose per-query score is score[q, choice[q]]. Not in to_dict.
    deployed_score: npt.NDArray[np.float64] | None = field(default=None, repr=False)
    # with ``by="dataset"``: every metric again on each dataset's evaluated test queries, name -> {n, metrics, ci}
    # (:func:`dataset_breakdown`); None when the run was not broken down
    by_dataset: dict[str, dict[str, Any]] | None = None
    # what a router that trains by epochs chose on the development part (``Router.early_stopping``: the epoch kept,
    # the epochs run, the development curve); None without a development part or for other routers
    early_stopping: dict[str, Any] | None = None

    def query_scores(self, score: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The router's score on each test query as deployed (``score``: the test table's scores, in the order of
        ``choice``): the expected score for an exploring router, the chosen actor's for any other."""
        if self.deployed_score is not None:
            return np.asarray(self.deployed_score, dtype=np.float64)
        s = np.asarray(score)
        return np.asarray(s[np.arange(s.shape[0]), self.choice], dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        out = {"router": self.router, "spec": self.spec, "params": self.params, "policy": self.policy,
               "metrics": self.metrics, "ci": {k: list(v) for k, v in self.ci.items()}, "selection": self.selection,
               "collapsed": self.collapsed, "fit_seconds": round(self.fit_seconds, 4),
               "score_seconds": round(self.score_seconds, 4)}
        if self.router_class is not None:
            out["class"] = self.router_class
        if self.sweep is not None:
            out["sweep"] = self.sweep
        if self.paired is not None:
            out["paired"] = self.paired
        if self.feedback is not None:
            out["feedback"] = self.feedback
        if self.by_dataset is not None:
            out["by_dataset"] = {name: {"n": d["n"], "metrics": d["metrics"],
                                        "ci": {k: list(v) for k, v in d["ci"].items()}}
                                 for name, d in self.by_dataset.items()}
        if self.early_stopping is not None:
            out["early_stopping"] = self.early_stopping
        return out


@dataclass
class Evaluation:
    """Everything one ``evaluate`` run produced, with what is needed to reproduce it."""

    provenance: Provenance
    results: list[RouterResult]
    oracle_best_of_n: dict[str, float]
    test_ids: npt.NDArray[np.object_]
    actor_names: list[str]
    excluded_test_queries: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def data(self) -> dict[str, Any]:
        return self.provenance.data

    @property
    def split(self) -> dict[str, Any]:
        return self.provenance.split if isinstance(self.provenance.split, dict) else {"kind": self.provenance.split}

    @property
    def encoder(self) -> str:
        return self.provenance.encoder or ""

    @property
    def seed(self) -> int:
        return int(self.provenance.seed or 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.provenance.to_dict(),
            "excluded_test_queries": self.excluded_test_queries,
            "results": [r.to_dict() for r in self.results],
            "oracle_best_of_n": self.oracle_best_of_n,
            **self.extra,
        }


def complete_rows(table: RoutingTable) -> npt.NDArray[np.bool_]:
    """Queries whose every actor score is observed (a block of rows at a time: no full-size mask)."""
    score = table.score
    keep = np.empty(score.shape[0], dtype=bool)
    for rows in row_blocks(*score.shape):
        keep[rows] = ~np.isnan(score[rows]).any(axis=1)
    return keep


RouterLike = str | Router
"""A router as a spec string (``knn:k=5``) or an instance (registered or not)."""


def router_label(router: RouterLike) -> str:
    """How a run names and records a router: a spec string as written, an instance as its class name
    and options (its ``repr``, e.g. ``MyRouter(k=5)``)."""
    return router if isinstance(router, str) else repr(router)


def resolve_compare_to(compare_to: str | None, labels: list[str], *, option: str = "compare_to") -> str | None:
    """The router every other is compared with (paired bootstrap): None or 'none' = no comparison, 'auto' =
    best-single when it is in the run (else none); anything else must be one of the run's ``labels``."""
    if compare_to is None or compare_to == "none":
        return None
    if compare_to == "auto":
        return "best-single" if "best-single" in labels else None
    if compare_to not in labels:
        raise UsageError(f"{option} {compare_to!r} is not a router of this run ({', '.join(labels)}); "
                         "name one of them, or 'none'")
    return compare_to


def featurize(train: RoutingTable, test: RoutingTable, encoder: str | Encoder, cache_dir: str | None = None
              ) -> tuple[Features, Features]:
    """Encode train and test texts with an encoder fitted on the training texts only."""
    from routerlab.features import encode_pair

    return encode_pair(train, test, encoder, cache_dir=cache_dir)


def featurize_dev(train: RoutingTable, dev: RoutingTable, encoder: str | Encoder, cache_dir: str | None = None,
                  test: RoutingTable | None = None) -> tuple[Features, ...]:
    """Features of the development queries from one encoder fitted on the training texts only (as the test
    features are): ``(fdev,)``, or with ``test`` the three parts ``(ftrain, ftest, fdev)`` from one fit."""
    from routerlab.features import encode, get_encoder

    enc = get_encoder(encoder)
    fit_on = train if enc.needs_fit else None
    parts = (dev,) if test is None else (train, test, dev)
    return tuple(encode(part, enc, cache_dir, fit_on=fit_on) for part in parts)


def evaluate(
    table: RoutingTable,
    router_specs: Sequence[RouterLike],
    *,
    split: str | Split = "given",
    encoder: str | Encoder = "tfidf",
    seed: int = 0,
    n_boot: int = 1000,
    cache_dir: str | None = None,
    features: tuple[Features, Features] | None = None,
    skip_inapplicable: bool = False,
    sweep: str | None = None,
    lambdas: npt.ArrayLike | None = None,
    compare_to: str | None = "auto",
    by: str = "none",
    dev: float | None = None,
    dev_features: Features | None = None,
    answerable_only: bool = False,
    reference: str | float | None = None,
) -> Evaluation:
    """Fit each router on the train split and evaluate it on the test split (full observability).

    ``dev`` (a fraction in (0, 1)) moves a seeded share of the training side to a development part (or the
    ``split`` given as a :class:`Split` has one): routers fit on the rest, and those that train by epochs stop on
    it (module docstring). ``dev_features`` may carry its precomputed vectors (encoder fitted on the training
    texts), as ``features`` carries the train and test ones.

    ``features`` may carry precomputed (train, test) vectors for the split's train and test queries
    (before incomplete test rows are dropped), so that several evaluations share one encoding pass.
    With ``skip_inapplicable`` a router that cannot fit this table (e.g. ``fastest`` without latency
    data) is left out and listed under ``skipped`` with its reason, instead of stopping the run.
    Every router is built and checked against the training split before any is trained, so a bad
    option or an inapplicable router costs no training time. ``compare_to`` names the router of the
    run the others are compared with (paired bootstrap); "auto" is best-single when it is in the run,
    None switches the comparison off; it names a router by its label (:func:`router_label`). ``by="dataset"``
    also scores every router on each dataset's evaluated test queries (:func:`dataset_breakdown`).
    ``answerable_only`` scores only the test queries some actor answers correctly (SPEC 5's answerable view; the
    others are counted in ``extra["answerable_only"]``); ``reference`` adds V_R (SPEC 4): an actor of the table
    (Perf = its mean on the evaluated test queries) or a number (a published Perf(reference)), see
    :func:`resolve_reference`.

    ``router_specs`` may mix spec strings and :class:`Router` instances. An instance is fitted in
    place (so it can be used after the run) and keeps its own seed when it was given one
    (``MyRouter(seed=3)``); otherwise it gets the run's ``seed``, as a spec string's router does.
    ``encoder`` may be an :class:`Encoder` instance; it is fitted on the training texts when it
    needs fitting.
    """
    if not router_specs:
        raise UsageError("name at least one router, e.g. --routers oracle,knn,best-single")
    labels = [router_label(r) for r in router_specs]
    from_objects = {router_label(r) for r in router_specs if not isinstance(r, str)}
    compare_to = resolve_compare_to(compare_to, labels)
    if sweep is not None and sweep not in {"cost", "latency"}:
        raise UsageError(f"sweep must be 'cost' or 'latency', got {sweep!r}")
    check_by(by)
    sp = split_with_dev(table, split, seed, dev)
    train, test = sp.apply(table)
    dev_table = sp.apply_dev(table) if sp.has_dev else None
    record = Provenance.of(table, sp, seed=seed)  # what the run record needs of the whole table
    del table  # the split's parts are all the run reads: a caller that keeps no reference frees the rest
    split_counts = split_dataset_counts(test, by)  # before any training: a breakdown without labels is an error
    chosen, skipped = applicable_routers(router_specs, train, seed, skip_inapplicable)
    part = None
    if dev_table is not None:
        if features is None:  # the three parts from one encoder fitted on the training texts
            ftrain, ftest, dev_features = featurize_dev(train, dev_table, encoder, cache_dir, test=test)
            features = (ftrain, ftest)
        elif dev_features is None:
            (dev_features,) = featurize_dev(train, dev_table, encoder, cache_dir)
        part = DevPart(dev_table, Features(dev_features.X, dev_table, dev_features.encoder))
    bench = make_bench(sp, train, test, encoder=encoder, cache_dir=cache_dir, features=features)
    del test  # the bench holds the evaluable test rows (a copy when some rows were incomplete)
    observed = _dataset_counts(dataset_labels(bench.test)) if split_counts is not None and answerable_only else None
    bench, views = with_views(bench, answerable_only, reference)
    results, fair = run_routers(chosen, train, bench, "evaluate", skipped=skipped,
                                skip_inapplicable=skip_inapplicable, from_objects=from_objects, seed=seed,
                                n_boot=n_boot, sweep=sweep, lambdas=lambdas, by=by, dev=part)
    with task("evaluate: paired bootstrap and Oracle best-of-N"):
        bon = compare_and_bound(results, fair, bench, compare_to, seed=seed, n_boot=n_boot)
    breakdown, notes = breakdown_summary(split_counts, bench, observed)
    return Evaluation(
        provenance=bench.provenance(record, seed),
        results=results, oracle_best_of_n=bon,
        test_ids=bench.test.queries.ids, actor_names=bench.test.actor_names, excluded_test_queries=bench.excluded,
        extra={**({"notes": bench.notes + notes} if bench.notes or notes else {}),
               **({"skipped": skipped} if skipped else {}), **breakdown, **views},
    )


# -- the breakdown by dataset --------------------------------------------------------------------------------

BY_OPTIONS = ("none", "dataset")
"""What an evaluation can be broken down by: nothing, or the dataset label of each test query."""
NO_DATASET = "(no dataset)"
"""The group of test queries whose dataset label is empty, in a breakdown of a table where some queries have one."""


def check_by(by: str) -> str:
    """``by`` when it is one of :data:`BY_OPTIONS`, else a UsageError listing them."""
    if by not in BY_OPTIONS:
        raise UsageError(f"by must be one of {', '.join(BY_OPTIONS)}, got {by!r}")
    return by


def dataset_labels(table: RoutingTable) -> npt.NDArray[np.object_]:
    """Each query's dataset label as a breakdown groups it: the label, or :data:`NO_DATASET` when it is empty."""
    labels = table.queries.dataset.astype(str)
    return np.where(labels == "", NO_DATASET, labels).astype(object)


def split_dataset_counts(test: RoutingTable, by: str) -> dict[str, int] | None:
    """The test split's queries per dataset (every test query, before those with an unobserved cell are left out)
    when the run is broken down by dataset, else None. A test split none of whose queries has a dataset label is a
    UsageError: there is nothing to break down (a table gets labels from its importer's dataset column)."""
    if by != "dataset":
        return None
    labels = dataset_labels(test)
    if labels.size and (labels == NO_DATASET).all():
        raise UsageError("by dataset: no test query has a dataset label (the table has no dataset column), so "
                         "there is nothing to break down; leave --by at none")
    return _dataset_counts(labels)


def dataset_breakdown(bench: Bench, choice: npt.NDArray[np.intp], distribution: npt.ArrayLike | None,
                      acting: npt.ArrayLike | None, policy: Policy, *, seed: int, n_boot: int
                      ) -> dict[str, dict[str, Any]]:
    """Every metric of a router's scoring pass again on each dataset's evaluated test queries (the bench's test
    rows): dataset -> ``{"n", "metrics", "ci"}``, the metrics the same names as the overall result, computed the
    same way (same policy, best single actor, seed and resamples). Below MIN_QUERIES queries a dataset's
    intervals are unavailable (NaN, JSON null) and not warned about one by one: the summary says how many are.
    The counts add up to the evaluated test queries, and a mean metric (mu_o) of the whole test split is the
    count-weighted mean of the datasets' values."""
    test = bench.test
    labels = dataset_labels(test)
    dist = None if distribution is None else np.asarray(distribution)
    act = None if acting is None else np.asarray(acting)
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(set(labels.tolist())):
        rows = np.flatnonzero(labels == name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FewQueriesWarning)
            values = evaluate_choices(
                test.score[rows], choice[rows],
                latency=None if bench.latency is None else bench.latency[rows],
                cost=None if bench.cost is None else bench.cost[rows],
                distribution=None if dist is None else dist[rows], best_single=bench.best, seed=seed,
                n_boot=n_boot, policy=policy, acting=None if act is None else act[rows])
        out[name] = {"n": int(rows.size), "metrics": {k: float(v[0]) for k, v in values.items()},
                     "ci": {k: interval(v[0], v[1], v[2]) for k, v in values.items()}}
    return out


def _dataset_counts(labels: npt.NDArray[Any]) -> dict[str, int]:
    """Queries per dataset label."""
    names, counts = np.unique(labels.astype(str), return_counts=True)
    return {str(k): int(v) for k, v in zip(names, counts, strict=True)}


def breakdown_summary(split_counts: dict[str, int] | None, bench: Bench, observed: dict[str, int] | None = None
                      ) -> tuple[dict[str, Any], list[str]]:
    """The run-level part of a breakdown by dataset (``{"breakdown": ...}``, empty when the run has none) and its
    notes: per dataset the evaluated test queries and those left out for an unobserved cell, their totals (the
    evaluated counts add up to the queries every metric was computed on), and a note when the test split holds a
    single dataset or some datasets are below MIN_QUERIES (their intervals unavailable). ``observed``: the counts
    before an answerable-only cut, whose left-out queries are then counted apart (``unanswerable``)."""
    if split_counts is None:
        return {}, []
    evaluated = _dataset_counts(dataset_labels(bench.test))
    kept = evaluated if observed is None else observed
    datasets = {name: {"n": evaluated.get(name, 0), "excluded": total - kept.get(name, 0),
                       **({} if observed is None else {"unanswerable": kept.get(name, 0) - evaluated.get(name, 0)})}
                for name, total in sorted(split_counts.items())}
    n = int(bench.test.n_queries)
    notes = []
    if len(datasets) == 1:
        notes.append(f"by dataset: the test split holds one dataset ({next(iter(datasets))}), so its row repeats "
                     "the leaderboard")
    few = [k for k, d in datasets.items() if 0 < d["n"] < MIN_QUERIES]
    if few:
        notes.append(f"by dataset: {len(few)} of {len(datasets)} datasets have fewer than {MIN_QUERIES} evaluated "
                     f"test queries ({', '.join(few)}): their values are shown, their intervals are not")
    empty = [k for k, d in datasets.items() if d["n"] == 0]
    if empty:
        notes.append(f"by dataset: every test query of {', '.join(empty)} has an unobserved cell: "
                     "nothing is evaluated there")
    summary = {"by": "dataset", "n_evaluated": n, "excluded_test_queries": int(bench.excluded),
               "datasets": datasets,
               "counts": "each dataset's n counts its evaluated test queries (every actor's score observed); they "
                         "add up to n_evaluated, the queries every metric was computed on; excluded counts the "
                         "dataset's test queries left out for an unobserved cell"}
    return {"breakdown": summary}, notes


@dataclass(frozen=True)
class Bench:
    """What every router of a run is scored against (SPEC 4-5, 7), built once per run and shared by the full,
    cold-start and voyager protocols: the split, the training table with its features (the hidden full
    outcomes: the protocol decides how much of them a router sees), the evaluable test queries (every actor's
    score observed) with their features, the latency and cost matrices when every test cell is known (else
    None, with a note), and V_B's best single actor, picked on the full training split (README "Choices": a
    router could not know the test split; under partial observability the metric still reads the hidden full
    table, SPEC 1, so V_B means the same in every protocol)."""

    split: Split
    train: RoutingTable
    ftrain: Features
    test: RoutingTable
    ftest: Features
    latency: npt.NDArray[np.float32] | None
    cost: npt.NDArray[np.float32] | None
    best: int
    excluded: int
    notes: list[str]
    # V_R's reference (SPEC 4; :func:`with_views`): an actor's index (Perf = its mean on the evaluated queries,
    # resampled with the router's), or a given number Perf(reference); both None = no V_R
    reference_actor: int | None = None
    reference_value: float | None = None

    def provenance(self, table: RoutingTable | Provenance, seed: int) -> Provenance:
        """The run record of an evaluation on this bench (SPEC 7). ``table`` is the split table, or a record
        :meth:`Provenance.of` made of it (a protocol that lets the table go once it is split keeps that)."""
        base = table if isinstance(table, Provenance) else Provenance.of(table, self.split)
        return replace(base, split={**self.split.describe(), "n_test": int(self.test.n_queries)}, seed=seed,
                       encoder=self.ftrain.encoder)


def make_bench(sp: Split, train: RoutingTable, test: RoutingTable, *, encoder: str | Encoder = "tfidf",
               cache_dir: str | None = None, features: tuple[Features, Features] | None = None) -> Bench:
    """The :class:`Bench` of ``sp`` (whose train and test tables are ``train`` and ``test``): encodes the
    texts unless ``features`` (train, test vectors of the split, before incomplete test rows are dropped) are
    given, and cuts the test side to its complete rows (a UsageError when none is complete)."""
    keep = complete_rows(test)
    excluded = int((~keep).sum())
    if not keep.any():
        raise UsageError("no test query has every actor observed; nothing can be evaluated")
    if features is None:
        features = featurize(train, test, encoder, cache_dir)
    # re-attach the vectors to the tables actually routed (actor subsets, complete test rows)
    ftrain = Features(features[0].X, train, features[0].encoder)
    if excluded:  # a complete test side is routed as it is, not copied
        test = test.select_queries(keep)
    ftest = Features(features[1].X[keep], test, features[1].encoder)
    latency, cost, omitted = _known(test.latency_s, "latency"), _known(test.cost_usd, "cost"), []
    for name, full, kept in (("latency", test.latency_s, latency), ("cost", test.cost_usd, cost)):
        if full is not None and kept is None:
            omitted.append(f"{name} metrics omitted: {int(np.isnan(full).sum())} test cells are unknown")
    return Bench(sp, train, ftrain, test, ftest, latency, cost, int(best_single_actor(train.score)), excluded,
                     omitted)


def split_with_dev(table: RoutingTable, split: str | Split, seed: int, dev: float | None) -> Split:
    """The run's split: ``split`` as it is (a :class:`Split`) or made from its spec, with a development part of
    fraction ``dev`` when one is asked for (drawn with ``seed``); a :class:`Split` that already has another one is
    a UsageError."""
    if not isinstance(split, Split):
        return make_split(table, split, seed, dev=dev)
    if dev is None:
        return split
    if split.has_dev:
        if float(split.params.get("dev_fraction", math.nan)) != check_dev(dev):
            raise UsageError(f"the split already has a development part of fraction "
                             f"{split.params.get('dev_fraction')}; dev={dev!r} asks for another")
        return split
    return with_dev(table, split, dev, seed)


ANSWERABLE_THRESHOLD = 0.5
"""SPEC 5's correctness threshold: a query is answerable when some actor scores at least this on it."""


def with_views(bench: Bench, answerable_only: bool = False, reference: str | float | None = None
               ) -> tuple[Bench, dict[str, Any]]:
    """The bench cut to its answerable test queries (``answerable_only``: some actor scores >= 0.5, SPEC 5) and
    given V_R's reference (SPEC 4; :func:`resolve_reference`), with what the run record says of both:
    ``{"answerable_only": {"threshold", "answerable", "unanswerable"}, "reference": {...}}``. Routers then route,
    and every metric, paired comparison and Oracle(Best-of-N) is taken on, the same queries."""
    views: dict[str, Any] = {}
    if answerable_only:
        keep = answerable(bench.test.score, ANSWERABLE_THRESHOLD)
        n_keep = int(keep.sum())
        views["answerable_only"] = {"threshold": ANSWERABLE_THRESHOLD, "answerable": n_keep,
                                    "unanswerable": int(keep.size - n_keep)}
        if n_keep == 0:
            raise UsageError(f"answerable-only: no evaluated test query has an actor scoring >= "
                             f"{ANSWERABLE_THRESHOLD:g}; nothing is left to evaluate")
        if n_keep < keep.size:
            test = bench.test.select_queries(keep)
            bench = replace(bench, test=test, ftest=Features(bench.ftest.X[keep], test, bench.ftest.encoder),
                            latency=None if bench.latency is None else bench.latency[keep],
                            cost=None if bench.cost is None else bench.cost[keep])
    if reference is not None:
        actor, value = resolve_reference(reference, bench.test.actor_names)
        if actor is not None:
            perf = float(np.mean(bench.test.score[:, actor], dtype=np.float64))
            if perf == 0:
                raise UsageError(f"reference {bench.test.actor_names[actor]!r}: its mean score on the evaluated "
                                 "test queries is 0, so V_R = mu_o / Perf(reference) is undefined")
            views["reference"] = {"actor": bench.test.actor_names[actor], "perf": perf}
        else:
            views["reference"] = {"value": value, "perf": value}
        bench = replace(bench, reference_actor=actor, reference_value=value)
    return bench, views


def resolve_reference(reference: str | float, actors: Sequence[str]) -> tuple[int | None, float | None]:
    """V_R's reference (SPEC 4) as (actor index, None) or (None, number): an actor's name of the table (an exact
    name wins), else a finite non-zero number, Perf(reference) as a paper reports it (RouterEval's GPT-4 row); any
    other text is a UsageError naming it and listing the actors."""
    if isinstance(reference, str):
        text = reference.strip()
        if text in actors:
            return list(actors).index(text), None
        try:
            value = float(text)
        except ValueError:
            import difflib

            close = difflib.get_close_matches(text, list(actors), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            shown = ", ".join(actors[:20]) + ("" if len(actors) <= 20 else f", ... ({len(actors)} in all)")
            raise UsageError(f"reference {text!r} is neither an actor of this table nor a number; {hint}its "
                             f"actors: {shown}") from None
    else:
        value = float(reference)
    if not math.isfinite(value) or value == 0:
        raise UsageError(f"reference {reference!r}: Perf(reference) must be a finite, non-zero number (V_R = mu_o "
                         "/ Perf(reference))")
    return None, value


def fit_router(router: Router, train: RoutingTable | Feedback, ftrain: Features, bench: Bench,
               dev: DevPart | None = None) -> float:
    """Fit ``router`` on ``train`` (the training table = full feedback, or a logged :class:`Feedback`) with
    ``ftrain``, the features of its queries, and ``dev``, a development part when the run has one (handed to the
    routers that use one, ``uses_dev``: they stop training there), and hand a bound (``uses_test_labels``) the
    bench's test outcomes; returns the seconds it took. A UsageError (a router that cannot learn from this
    feedback) propagates, for the protocol to stop or skip the router."""
    t0 = time.perf_counter()
    if dev is None or not router.uses_dev:  # a class overriding fit with the two-argument signature still works
        router.fit(train, ftrain)
    else:
        router.fit(train, ftrain, dev=dev)
    if router.uses_test_labels:  # a bound (the oracle): the only routers handed the test outcomes
        router.reveal(bench.test)
    return time.perf_counter() - t0


def score_router(spec: str, router: Router, bench: Bench, *, fit_seconds: float, seed: int, n_boot: int,
                 sweep: str | None = None, lambdas: npt.ArrayLike | None = None,
                 sweep_train: RoutingTable | None = None, router_class: str | None = None,
                 by: str = "none") -> RouterResult:
    """Route the bench's test queries with a fitted ``router`` in one scoring pass and score every metric with
    its bootstrap interval, the selection shares and the collapse flag (SPEC 4-5, 7): the step every protocol
    repeats per router (and per Voyager round), after :func:`fit_router`. The router is scored as deployed
    (module docstring): an exploring router by expectations under its distribution, its argmax values beside
    them as ``<metric>_greedy``, its shares the expected ones. ``sweep`` adds the cost- or latency-quality curve,
    its penalty read from ``sweep_train`` (what the router was trained on). ``by="dataset"`` adds every metric
    per dataset (:func:`dataset_breakdown`)."""
    t1 = time.perf_counter()
    # one scoring pass: choices and the selection distribution (the metrics read no scores, so none are kept)
    choice, dist, acting = router.decisions(bench.ftest)
    t2 = time.perf_counter()
    test = bench.test
    policy: Policy = "distribution" if router.explores else "argmax"
    values = evaluate_choices(
        test.score, choice, latency=bench.latency, cost=bench.cost, distribution=dist,
        best_single=bench.best, seed=seed, n_boot=n_boot, policy=policy, acting=acting,
        reference=bench.reference_value, reference_actor=bench.reference_actor,
    )
    m = test.n_actors
    deployed = None
    if router.explores:
        deployed = expected_per_query(test.score, acting, "score")
        shares = expected_shares(acting)
    else:
        shares = selection_shares(choice, m)
    curve = None
    if sweep is not None and not router.uses_test_labels:
        curve = _sweep(router, sweep_train, bench.ftest, test, sweep, lambdas)
    by_dataset = None
    if by == "dataset":
        by_dataset = dataset_breakdown(bench, choice, dist, acting, policy, seed=seed, n_boot=n_boot)
    return RouterResult(
        router=router.name, spec=spec, params={**router.params, "seed": router.seed},
        metrics={k: float(v[0]) for k, v in values.items()},
        ci={k: interval(v[0], v[1], v[2]) for k, v in values.items()},
        selection={a: float(s) for a, s in zip(test.actor_names, shares, strict=True) if s > 0},
        collapsed=shares_collapsed(shares), choice=choice, fit_seconds=fit_seconds, score_seconds=t2 - t1,
        sweep=curve, router_class=router_class, policy=policy, deployed_score=deployed, by_dataset=by_dataset,
        early_stopping=router.early_stopping,
    )


def run_routers(chosen: list[tuple[str, Router]], train: RoutingTable | Feedback | Callable[[], Feedback],
                bench: Bench, what: str, *, skipped: dict[str, str], skip_inapplicable: bool, from_objects: set[str],
                seed: int, n_boot: int, sweep: str | None = None, lambdas: npt.ArrayLike | None = None,
                by: str = "none", dev: DevPart | None = None) -> tuple[list[RouterResult], list[bool]]:
    """Fit every router of ``chosen`` on ``train`` (full feedback, or a cold-start log; ``dev``: the development
    part, when the run has one) and score it on the bench: the loop the full and cold-start protocols share. A
    router that cannot be fitted stops the run, or with ``skip_inapplicable`` is recorded in ``skipped``. Returns
    the results and, per result, whether the router routes without test outcomes (what Oracle(Best-of-N) is taken
    over). ``chosen`` is emptied as the
    routers are run, so each is let go once scored (:func:`_drained`). ``train`` may be a function making the
    feedback: it is called once per router and its feedback let go once the router is fitted (unless a sweep
    reads it), so a cold-start log's (queries x actors) table is not held while routers score. ``by`` is passed to
    :func:`score_router` (a breakdown by dataset)."""
    results: list[RouterResult] = []
    fair: list[bool] = []
    kind = "full"
    for spec, router in track(_drained(chosen), f"{what}: router", unit="router", label=lambda item: item[0],
                              total=len(chosen)):
        feedback: Feedback | None = train() if callable(train) else as_feedback(train)
        assert feedback is not None
        kind = feedback.kind
        try:
            fit_seconds = fit_router(router, feedback, bench.ftrain, bench, dev)
        except UsageError as exc:
            if not skip_inapplicable:
                raise
            skipped[spec] = str(exc)
            continue
        finally:  # the feedback a sweep does not read is let go before the router scores (and the next is made)
            sweep_train = feedback.table if sweep is not None else None
            feedback = None
        results.append(score_router(spec, router, bench, fit_seconds=fit_seconds, seed=seed, n_boot=n_boot,
                                    sweep=sweep, lambdas=lambdas, sweep_train=sweep_train,
                                    router_class=_class_path(router) if spec in from_objects else None, by=by))
        del sweep_train
        fair.append(not router.uses_test_labels)
    if not results:
        raise UsageError(f"no router could be fitted{'' if kind == 'full' else ' on the logged feedback'}: "
                         f"{skipped}")
    return results, fair


def _drained(chosen: list[tuple[str, Router]]) -> Iterator[tuple[str, Router]]:
    """The items of ``chosen``, each taken out of the list as it is handed over: once the loop moves on, a router
    built from a spec string (which nobody else holds) is freed with what it learned (a knn router's training
    matrix), so the routers of a run are not all kept alive until its end. Instances the caller passed stay
    with the caller, fitted."""
    while chosen:
        yield chosen.pop(0)


def compare_and_bound(results: list[RouterResult], fair: list[bool], bench: Bench, compare_to: str | None, *,
                      seed: int, n_boot: int) -> dict[str, float]:
    """The paired bootstrap of every router against ``compare_to`` (stored in each result's ``paired``; a router's
    per-query scores as deployed, expected ones for an exploring router) and Oracle(Best-of-N) (SPEC 5) over the
    routers marked ``fair`` (those that route without test outcomes; all of them when none is), returned as
    metric -> value. Best-of-N takes each router's argmax pick (an exploring router's greedy choice): a bound
    over sampled picks would depend on the draw."""
    _paired(results, bench.test, compare_to, seed, n_boot)
    picks = [r.choice for r, ok in zip(results, fair, strict=True) if ok] or [r.choice for r in results]
    bon_choice = oracle_best_of_n(bench.test.score, bench.latency, np.stack(picks), bench.cost)
    bon = evaluate_choices(bench.test.score, bon_choice, latency=bench.latency, cost=bench.cost,
                           best_single=bench.best, seed=seed, n_boot=n_boot, reference=bench.reference_value,
                           reference_actor=bench.reference_actor)
    return {k: float(v[0]) for k, v in bon.items()}


def applicable_routers(specs: Sequence[RouterLike], train: RoutingTable | Feedback, seed: int,
                       skip_inapplicable: bool = False, backend: Any | None = None
                       ) -> tuple[list[tuple[str, Router]], dict[str, str]]:
    """Build every router of ``specs`` and check it can be trained on ``train`` (a training table, or the logged
    :class:`Feedback` of a partial-observability protocol), before any training:
    a bad spec is always an error; an inapplicable router is an error, or with ``skip_inapplicable``
    left out and returned in ``skipped`` (label -> reason). A router that calls an LLM (``needs_backend``) gets
    ``backend`` unless it has its own, and without either it is inapplicable. Returns (label, router) pairs; an
    instance is used as is, given ``seed`` unless it was built with its own."""
    chosen: list[tuple[str, Router]] = []
    skipped: dict[str, str] = {}
    for item in specs:
        spec = router_label(item)
        router = get_router(item, seed=seed) if isinstance(item, str) else _seeded(item, seed)
        try:
            if router.needs_backend:
                _give_backend(router, backend)
            router.check_applicable(train)
        except UsageError as exc:
            if not skip_inapplicable:
                raise
            skipped[spec] = str(exc)
            continue
        chosen.append((spec, router))
    if not chosen:
        raise UsageError(f"no router can be trained on this table: {skipped}")
    return chosen, skipped


def _give_backend(router: Router, backend: Any | None) -> None:
    """Attach ``backend`` to a router that calls an LLM and has none of its own; a UsageError when it has neither."""
    if router.has_backend():
        return
    if backend is None:
        raise UsageError(f"router {router.name!r} asks an LLM and none is given: pass a backend (--backend "
                         f"KIND:MODEL) or {router.name}:backend=KIND:MODEL")
    router.attach_backend(backend)


def _seeded(router: Router, seed: int) -> Router:
    """``router`` itself, given the run's ``seed`` unless its own was passed to its constructor."""
    if not isinstance(router, Router):
        raise UsageError(f"a router is a spec string or a Router instance, got {type(router).__name__}")
    if "seed" not in router.params:
        router.seed = seed
    return router


def _class_path(router: Router) -> str:
    """``module.QualName`` of a router's class: where an instance's code lives."""
    cls = type(router)
    return f"{cls.__module__}.{cls.__qualname__}"


def interval(estimate: float, lo: float, hi: float) -> tuple[float, float]:
    """A bootstrap interval, or (NaN, NaN) = undefined when it does not contain its own estimate (too
    few resamples, or a skewed statistic): such an interval would mislead rather than inform."""
    est, low, high = float(estimate), float(lo), float(hi)
    if math.isfinite(est) and not (low - 1e-12 <= est <= high + 1e-12):
        return math.nan, math.nan
    return low, high


def _known(matrix: npt.NDArray[np.float32] | None, what: str) -> npt.NDArray[np.float32] | None:
    """The matrix when every cell is known, else None: a metric over partly unknown latency or cost
    would silently compare routers on different queries."""
    if matrix is None or np.isnan(matrix).any():
        return None
    return matrix


DEFAULT_LAMBDAS = np.concatenate([[0.0], np.geomspace(0.01, 1e4, 31)])


def _sweep(router: Any, train: RoutingTable | None, ftest: Features, test: RoutingTable, by: str,
           lambdas: npt.ArrayLike | None) -> dict[str, Any]:
    """Cost- (or latency-) quality curve of one fitted router on the test split, with Pareto and AIQ."""
    from routerlab.metrics.cost import aiq, pareto_frontier
    from routerlab.routers.utility import lambda_sweep

    truth = test.cost_usd  # ``by`` was checked by evaluate before any work if by == "cost" else test.latency_s
    if truth is None or np.isnan(truth).any():
        raise UsageError(f"a {by} sweep needs the test split's {by} for every cell, which this table lacks")
    grid = DEFAULT_LAMBDAS if lambdas is None else np.asarray(lambdas, dtype=np.float64)
    sw = lambda_sweep(router, ftest, grid, by=by, train=train)  # type: ignore[arg-type]
    rows = np.arange(test.n_queries)
    x = np.array([float(truth[rows, c].mean()) for c in sw.choices])
    y = np.array([float(test.score[rows, c].mean()) for c in sw.choices])
    front = pareto_frontier(np.column_stack([x, y]))
    return {"by": by, "lambdas": sw.lambdas.tolist(), by: x.tolist(), "mu_o": y.tolist(),
            "pareto": front.tolist(), "aiq": aiq(x, y)}


def _paired(results: list[RouterResult], test: RoutingTable, ref_spec: str | None, seed: int, n_boot: int) -> None:
    """Paired bootstrap of each router's per-query score as deployed against the reference router's (SPEC 7)."""
    from routerlab.metrics.bootstrap import paired_bootstrap

    ref = next((r for r in results if ref_spec is not None and r.spec == ref_spec), None)
    if ref is None:
        return
    base = ref.query_scores(test.score)
    for r in results:
        if r is ref:
            continue
        cmp = paired_bootstrap(r.query_scores(test.score), base, n_boot=n_boot, seed=seed)
        r.paired = {"versus": ref.spec, "mu_o_difference": cmp.diff, "ci": list(interval(cmp.diff, cmp.lo, cmp.hi)),
                    "p_value": cmp.p_value}


# -- the registered protocol ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvaluationSettings(ProtocolSettings):
    """What the full, cold-start and Voyager protocols share: the split, the encoder, the resamples, the paired
    comparison and whether an inapplicable router stops the run."""

    split: str = setting("given", SPLIT_HELP, check=check_split)
    encoder: str = setting("tfidf", ENCODER_HELP, check=check_encoder)
    n_boot: int = setting(1000, NBOOT_HELP, NBOOT)
    compare_to: str = setting("auto", COMPARE_HELP)
    skip_inapplicable: bool = setting(False, SKIP_HELP)


SWEEP_HELP = "also sweep lambda in score - lambda * penalty: cost or latency (none = off)"
BY_HELP = ("also score every router on each dataset's test queries, each with its own 95% CI: none or dataset "
           "(counts add up to the evaluated test queries)")


ANSWERABLE_HELP = ("score only the test queries some actor answers correctly (score >= 0.5; the answerable view "
                   "of RouterWorld, section 4.4); the others are counted")
REFERENCE_HELP = ("add V_R = mu_o / Perf(reference) (RouterEval, section 5.1): an actor of the table (its mean on the "
                  "evaluated test queries) or a number (a published Perf(reference)); none = off")


def _check_reference(value: str) -> str:
    """A reference is an actor's name (checked against the table when the run starts) or a finite, non-zero
    number; text that reads as a number must be one (``nan``, ``inf`` and ``0`` are refused here)."""
    try:
        number = float(value)
    except ValueError:
        return value
    if not math.isfinite(number) or number == 0:
        raise UsageError(f"must be an actor's name or a finite, non-zero number, got {value!r}")
    return value


@dataclass(frozen=True)
class FullSettings(EvaluationSettings):
    sweep: str | None = setting(None, SWEEP_HELP, Options({"cost", "latency"}))
    by: str = setting("none", BY_HELP, Options(set(BY_OPTIONS)))
    dev: float | None = setting(None, DEV_HELP, check=check_dev)
    answerable_only: bool = setting(False, ANSWERABLE_HELP)
    reference: str | None = setting(None, REFERENCE_HELP, check=_check_reference)


def router_records(results: Sequence[RouterResult | dict[str, Any]], bon: dict[str, float], slice: str = ""
                   ) -> list[MetricRecord]:
    """The metric records of one evaluation's routers (objects, or their ``to_dict`` form as Voyager keeps each
    round): every metric with its interval, the paired difference against the reference router
    (``mu_o_difference``), the sweep's AIQ, the largest selection share (``top_share``) and the collapse flag
    (``collapsed_flag``, 1 when that share is >= 99%: RouterWorld's collapsed routers), then Oracle(Best-of-N)
    without interval."""
    out: list[MetricRecord] = []
    for r in results:
        d = r.to_dict() if isinstance(r, RouterResult) else r
        for name, value in d["metrics"].items():
            out.append(MetricRecord.of(d["spec"], name, value, d.get("ci", {}).get(name), slice))
        if d.get("selection"):
            out.append(MetricRecord.of(d["spec"], "top_share", max(d["selection"].values()), None, slice))
            out.append(MetricRecord.of(d["spec"], "collapsed_flag", float(bool(d["collapsed"])), None, slice))
        if d.get("paired"):
            p = d["paired"]
            out.append(MetricRecord.of(d["spec"], "mu_o_difference", p["mu_o_difference"], p["ci"], slice))
        if d.get("sweep"):
            out.append(MetricRecord.of(d["spec"], "aiq", d["sweep"]["aiq"], None, slice))
    out += [MetricRecord.of("oracle best-of-N", name, value, None, slice) for name, value in bon.items()]
    return out


def dataset_records(results: Sequence[RouterResult]) -> list[MetricRecord]:
    """The records of a breakdown by dataset: every router's metrics on each dataset, slice ``dataset=NAME``."""
    out: list[MetricRecord] = []
    for r in results:
        for dataset, d in (r.by_dataset or {}).items():
            out += [MetricRecord.of(r.spec, name, value, d["ci"].get(name), f"dataset={dataset}")
                    for name, value in d["metrics"].items()]
    return out


def evaluation_result(name: str, ev: Evaluation, settings: ProtocolSettings) -> Result:
    """A full / cold-start / Voyager :class:`Evaluation` as the protocol layer's :class:`Result`."""
    records = router_records(ev.results, ev.oracle_best_of_n) + dataset_records(ev.results)
    for rnd in ev.extra.get("rounds", []):
        records += router_records(rnd["results"], rnd["oracle_best_of_n"], f"round={rnd['round']}")
    n_train = int(ev.split.get("n_train", 0) or 0)
    n_test = int(ev.split.get("n_test", 0) or 0)  # the run record's n_test counts the evaluated queries already
    skipped = {str(k): str(v) for k, v in dict(ev.extra.get("skipped", {})).items()}
    return Result(name, ev.provenance, settings, records, native=ev, skipped=skipped, n_train=n_train,
                  n_test=n_test, notes=list(ev.extra.get("notes", [])))


def shared_features(table: RoutingTable, settings: EvaluationSettings, seed: int, context: RunContext | None
                    ) -> tuple[Split, tuple[Features, Features] | None]:
    """The split (with a development part when the settings have ``dev``) and, when a caller shares a
    :class:`RunContext`, the features encoded once for every protocol run on the same table, split, development
    part, encoder and seed."""
    sp, features, _ = shared_parts(table, settings, seed, context)
    return sp, features


def shared_parts(table: RoutingTable, settings: EvaluationSettings, seed: int, context: RunContext | None
                 ) -> tuple[Split, tuple[Features, Features] | None, Features | None]:
    """:func:`shared_features` and the development part's features (None without a context or a development
    part). The context's keys hold the development fraction: a training side with its development part taken out
    is another training side (another encoder fit), never the one of a run without it."""
    dev = getattr(settings, "dev", None)
    sp = make_split(table, settings.split, seed, dev=dev)
    if context is None:
        return sp, None, None
    split_key = settings.split if dev is None else f"{settings.split} dev={dev!r}"
    key = (split_key, settings.encoder, seed)
    dev_key = (f"{split_key} development part", settings.encoder, seed)
    if key not in context.features or (sp.has_dev and dev_key not in context.features):
        train, test = sp.apply(table)
        if context.encode is not None:
            context.features[key] = context.encode(train, test, settings.encoder)
            if sp.has_dev:
                context.features[dev_key] = context.encode(train, sp.apply_dev(table), settings.encoder)[1]
        elif sp.has_dev:
            ftrain, ftest, fdev = featurize_dev(train, sp.apply_dev(table), settings.encoder, context.cache_dir,
                                                test=test)
            context.features[key], context.features[dev_key] = (ftrain, ftest), fdev
        else:
            context.features[key] = featurize(train, test, settings.encoder, context.cache_dir)
    return sp, context.features[key], context.features.get(dev_key) if sp.has_dev else None


@register_protocol("full")
class FullObservability(Protocol):
    summary = "train on every training outcome, route the test split, every metric with a 95% CI"
    spec = "SPEC 4, 5, 7"
    Settings = FullSettings

    def run(self, table: RoutingTable, settings: Any, seed: int = 0, routers: Sequence[Any] = (),
            context: RunContext | None = None) -> Result:
        s: FullSettings = settings
        sp, features, dev_features = shared_parts(table, s, seed, context)
        held = [table]
        # handed over, not kept: evaluate lets the whole table go once it is split. The three evaluation protocols
        # spell this call out instead of sharing a helper that forwards **options: a call with ** packs the
        # positional table into an argument tuple that stays alive for the whole run (tests/protocols/test_memory)
        del table
        ev = evaluate(held.pop(), list(routers), split=sp, encoder=s.encoder, seed=seed, n_boot=s.n_boot,
                      features=features, skip_inapplicable=s.skip_inapplicable, sweep=s.sweep,
                      compare_to=s.compare_to, cache_dir=context.cache_dir if context else None, by=s.by,
                      dev_features=dev_features, answerable_only=s.answerable_only,
                      reference=s.reference)
        return evaluation_result(self.name, ev, s)
