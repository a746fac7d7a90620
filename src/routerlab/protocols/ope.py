"""Off-policy evaluation (SPEC 1 logged observability, SPEC 4-5 metrics, SPEC 7 intervals): how good would a
router be, estimated from logs another policy collected, without deploying it.

Routers train on the training side (``table``'s train split: full feedback; or ``train_logs``: logged feedback, one
outcome per query with its propensity), then route the logged queries (features from an encoder fitted on the
training texts). A router's *target policy* is how it acts when deployed (:meth:`Router.act`): its argmax (pi(a|x)
= 1[choice = a]) for most routers, the distribution it samples for an exploring one (``explores``: the bandits and
``random``; ``Routing.policy``). That is the same rule by which ``evaluate``, cold-start and Voyager score a router
(docs/bandits.md, "One value per router"), so the truth below is the value ``evaluate`` reports for the router on
the same queries. IPS, SNIPS and DR (:mod:`routerlab.metrics.offpolicy`) estimate the mean of each metric's reward
under that policy on the logged queries, each with a 95% interval (a percentile bootstrap over the logged queries,
all estimators and metrics on the same resamples, by default; or each estimator's own normal approximation).

Metrics and the rewards they average (a metric is estimable only where its reward of the logged actor is known
on every logged query):

- ``mu_o``: the logged score; ``mean_cost`` / ``mean_latency``: the logged ``cost_usd`` / ``latency_s`` (when
  logged on every row);
- ``acc_at_1_l``, ``dcg``, ``l_dcg`` (SPEC 5): only from the log's reward columns. They depend on every actor's
  correctness and latency on the query, which a real log does not hold; a log simulated from a full table
  (``routerlab log``) carries them. Otherwise they are listed under ``unavailable`` with the reason.

Choices (documented in docs/off-policy.md):

- Bounds that read test outcomes (``oracle``, ``oracle-p``) are refused: they route by every actor's outcome on
  the query, which a log does not hold, and giving them the one logged outcome would evaluate a different rule.
- Logged queries that are also training queries (by id) are left out of training, with a warning: otherwise a
  router would be evaluated on outcomes it learnt (an optimistic leak). The run records how many.
- DR's reward model is fitted once per run on the logs (it does not depend on the router): per actor a ridge
  regression of every metric's reward on the query features of that actor's logged rows, cross-fitted over
  ``folds`` seeded folds (no query's reward predicts itself); an actor with fewer than ``min_rows`` rows outside
  a fold falls back to its mean logged reward, and the record counts those cells.
- ``truth``: when every logged query id is in ``table``, the router's true value of each estimated metric on
  exactly the logged queries under the same target policy (mean over queries of sum_a pi(a|x) reward(x, a), the
  per-query expectation :func:`routerlab.metrics.selection.expected_per_query` that ``evaluate`` takes for an
  exploring router), for each metric whose cells the policy can pick are all known in the table (the SPEC 5
  metrics also need every correct actor's latency); when the ids are not all there, absent, with the reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from routerlab.data.feedback import Feedback
from routerlab.data.logs import Logs
from routerlab.data.provenance import Provenance
from routerlab.data.splits import TEST_NAMES, Split, make_split
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.registry import Encoder
from routerlab.metrics import offpolicy as op
from routerlab.metrics.selection import expected_per_query
from routerlab.progress import task, track
from routerlab.protocols.base import (
    ENCODER_HELP,
    NBOOT,
    NBOOT_HELP,
    MetricRecord,
    Options,
    Protocol,
    ProtocolSettings,
    Result,
    RunContext,
    SettingError,
    check_encoder,
    check_split,
    register_protocol,
    setting,
)
from routerlab.protocols.full import RouterLike, _class_path, applicable_routers, interval, router_label
from routerlab.routers.base import get_router

METRICS: tuple[str, ...] = ("mu_o", "acc_at_1_l", "dcg", "l_dcg", "mean_cost", "mean_latency")
"""Every metric off-policy evaluation can estimate, in report order."""
LOG_REWARD_METRICS: tuple[str, ...] = ("acc_at_1_l", "dcg", "l_dcg")
INTERVALS: tuple[str, ...] = ("bootstrap", "normal")
REWARD_MODELS: tuple[str, ...] = ("ridge", "mean")


class OffPolicyWarning(UserWarning):
    """Off-policy estimates that deserve doubt: tiny propensities, a low effective sample size, a leak."""


@dataclass
class OPERouterResult:
    """One router's off-policy estimates: ``estimates[estimator][metric] = (value, lo, hi)``, ``truth[metric]``
    when the table holds the logged queries' full outcomes, and the importance-weight diagnostics."""

    router: str
    spec: str
    params: dict[str, Any]
    policy: str  # "argmax" or "distribution": what pi(a|x) is
    estimates: dict[str, dict[str, tuple[float, float, float]]]
    truth: dict[str, float] | None
    diagnostics: op.WeightDiagnostics
    fit_seconds: float
    score_seconds: float
    router_class: str | None = None
    # the actor the router picks on each logged query (its argmax), for per-query decision files; not in to_dict
    choice: npt.NDArray[np.intp] | None = field(default=None, repr=False)
    # an exploring router's expected score on each logged query under its target policy, where the table holds
    # the logged queries' full outcomes (its mean is the truth's mu_o); None otherwise. Not in to_dict.
    deployed_score: npt.NDArray[np.float64] | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "router": self.spec, "name": self.router, "params": self.params, "policy": self.policy,
            "estimates": {est: {m: {"value": v, "ci": [lo, hi]} for m, (v, lo, hi) in by_metric.items()}
                          for est, by_metric in self.estimates.items()},
        }
        if self.truth is not None:
            out["truth"] = self.truth
        out["diagnostics"] = self.diagnostics.to_dict()
        out["fit_seconds"] = round(self.fit_seconds, 4)
        out["score_seconds"] = round(self.score_seconds, 4)
        if self.router_class is not None:
            out["class"] = self.router_class
        return out


@dataclass
class OPEResult:
    """Everything one off-policy evaluation produced, with its run record first (SPEC 7)."""

    provenance: Provenance
    n_logged: int
    logs: dict[str, Any]
    estimators: list[str]
    metrics: list[str]
    unavailable: dict[str, str]
    interval: dict[str, Any]
    reward_model: dict[str, Any]
    training: dict[str, Any]
    results: list[OPERouterResult]
    truth_note: str | None = None
    warnings: list[str] = field(default_factory=list)
    # the logged queries' ids, in the order of each result's ``choice``; not in to_dict
    query_ids: list[str] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            **self.provenance.to_dict(),
            "n_logged": self.n_logged,
            "logs": self.logs,
            "training": self.training,
            "estimators": self.estimators,
            "metrics": self.metrics,
            "unavailable": self.unavailable,
            "interval": self.interval,
            "reward_model": self.reward_model,
            "results": [r.to_dict() for r in self.results],
        }
        if self.truth_note is not None:
            out["truth_note"] = self.truth_note
        out["warnings"] = list(self.warnings)
        return out


def parse_estimators(estimators: str | Sequence[str], option: str = "estimators") -> list[str]:
    """``"ips,dr"`` or a sequence -> a checked list of estimators (non-empty, known, no repeats)."""
    items = [e.strip() for e in estimators.split(",")] if isinstance(estimators, str) else [str(e) for e in estimators]
    items = [e for e in items if e]
    if not items:
        raise UsageError(f"{option} needs at least one of {', '.join(op.ESTIMATORS)}")
    unknown = [e for e in items if e not in op.ESTIMATORS]
    if unknown:
        raise UsageError(f"{option}: unknown estimator {unknown[0]!r}; estimators are {', '.join(op.ESTIMATORS)}")
    if len(set(items)) != len(items):
        raise UsageError(f"{option} names an estimator twice: {', '.join(items)}")
    return items


def refuse_bounds(specs: Sequence[RouterLike]) -> None:
    """A bound that reads the outcomes of the queries it routes (the oracle) cannot be evaluated from logs: one
    UsageError naming it, before any data is read."""
    for item in specs:
        router = get_router(item) if isinstance(item, str) else item
        if router.uses_test_labels:
            raise UsageError(f"router {router_label(item)!r} is a bound that reads every actor's outcome on the "
                             "queries it routes; a log holds one outcome per query, so it cannot be evaluated "
                             "off-policy (leave it out)")


def off_policy_evaluate(
    table: RoutingTable,
    logs: Logs,
    routers: Sequence[RouterLike],
    *,
    estimators: str | Sequence[str] = op.ESTIMATORS,
    split: str | Split = "given",
    encoder: str | Encoder = "tfidf",
    seed: int = 0,
    n_boot: int = 1000,
    interval_method: str = "bootstrap",
    train_logs: Logs | None = None,
    reward_model: str = "ridge",
    folds: int = 5,
    ridge_alpha: float = 1.0,
    min_rows: int = 10,
    cache_dir: str | None = None,
) -> OPEResult:
    """Estimate each router's metrics on the logged queries of ``logs`` from the logs alone (see the module
    docstring): IPS / SNIPS / DR with 95% intervals, the weight diagnostics, and the truth where ``table`` has it.

    ``table`` gives the actors (the log's must be the same, in order), the training side (its ``split``'s train
    part, unless ``train_logs`` is given) and, where it holds them, the logged queries' full outcomes for
    ``truth``. ``interval_method`` is ``bootstrap`` (percentile, ``n_boot`` resamples of the logged queries,
    seeded) or ``normal`` (each estimator's own normal approximation). ``reward_model`` is ``ridge`` (cross-fitted
    per-actor ridge on the features) or ``mean`` (cross-fitted per-actor mean).
    """
    ests = parse_estimators(estimators)
    if interval_method not in INTERVALS:
        raise UsageError(f"interval must be one of {', '.join(INTERVALS)}, got {interval_method!r}")
    if reward_model not in REWARD_MODELS:
        raise UsageError(f"reward model must be one of {', '.join(REWARD_MODELS)}, got {reward_model!r}")
    if n_boot < 1 or folds < 1 or min_rows < 1 or not ridge_alpha > 0:
        raise UsageError("n_boot, folds and min_rows must be >= 1 and ridge_alpha > 0")
    if not routers:
        raise UsageError("name at least one router, e.g. --routers knn,best-single")
    refuse_bounds(routers)
    _check_actors(table, logs, "the log")
    if train_logs is not None:
        _check_actors(table, train_logs, "the training log")
    labels = [router_label(r) for r in routers]
    from_objects = {router_label(r) for r in routers if not isinstance(r, str)}
    run_warnings: list[str] = []
    logged = logs.table
    n, m = logged.n_queries, logged.n_actors

    # the training side, without the logged queries (no router learns an outcome it is evaluated on)
    sp: Split | dict[str, Any]
    if train_logs is None:
        sp = training_split(table, split, seed)
        train_table, _ = sp.apply(table)
        propensity = None
    else:
        sp = {"kind": "logs", "n_train": train_logs.n, "policy": train_logs.policy}
        train_table, propensity = train_logs.table, train_logs.propensity
    train_table, kept = without_logged_queries(train_table, logged, run_warnings, "evaluate")
    if propensity is not None and not kept.all():
        propensity = propensity[kept]
    train: RoutingTable | Feedback = train_table if propensity is None else Feedback(train_table, propensity)
    training = {"feedback": "full" if propensity is None else "logged", "n_train": int(train_table.n_queries),
                "left_out_logged_queries": int((~kept).sum())}
    chosen, _ = applicable_routers(routers, train, seed)

    from routerlab.features import encode_pair

    with task("ope: encode queries"):
        ftrain, flog = encode_pair(train_table, logged, encoder, cache_dir=cache_dir)
    action, p = logs.actor, logs.propensity
    rewards, unavailable = logged_rewards(logs)
    metric_names = [k for k in METRICS if k in rewards]
    reward_matrix = np.column_stack([rewards[k] for k in metric_names])
    rhat: npt.NDArray[np.float64] | None = None
    model_info: dict[str, Any] = {"kind": None}
    if "dr" in ests:
        with task("ope: reward model"):
            fold = op.fold_assignment(n, folds, seed)
            x = flog.X if reward_model == "ridge" else np.zeros((n, 0))
            rhat, fallback = op.ridge_reward_model(x, action, reward_matrix, m, fold, alpha=ridge_alpha,
                                                   min_rows=min_rows if reward_model == "ridge" else 1)
        model_info = {"kind": reward_model, "folds": int(fold.max()) + 1, "seed": seed}
        if reward_model == "ridge":
            model_info.update({"alpha": ridge_alpha, "min_rows": min_rows, "mean_fallback_cells": fallback,
                               "features": flog.encoder})
    truth_rows, truth_note = _truth_rows(table, logged)

    results: list[OPERouterResult] = []
    for spec, router in track(chosen, "ope: router", unit="router", label=lambda item: item[0]):
        t0 = time.perf_counter()
        router.fit(train, ftrain)
        t1 = time.perf_counter()
        routed = router.route(flog)
        t2 = time.perf_counter()
        target = routed.policy if router.explores else np.eye(m)[routed.choice]
        w = op.importance_weights(op.target_probability(target, action), p)
        diag = op.weight_diagnostics(w, p, m)
        run_warnings.extend(f"{spec}: {msg}" for msg in diag.warnings)
        estimates = _estimates(ests, metric_names, reward_matrix, action, p, target, rhat,
                               interval_method, n_boot, seed)
        full = None if truth_rows is None else table.select_queries(truth_rows)
        truth = None if full is None else _truth(full, target, metric_names)
        deployed = None
        if full is not None and router.explores and not np.isnan(full.score[target > 0]).any():
            deployed = expected_per_query(full.score, target, "score")
        results.append(OPERouterResult(
            router=router.name, spec=spec, params={**router.params, "seed": router.seed},
            policy="distribution" if router.explores else "argmax", estimates=estimates, truth=truth,
            diagnostics=diag, fit_seconds=t1 - t0, score_seconds=t2 - t1,
            router_class=_class_path(router) if spec in from_objects else None,
            choice=np.asarray(routed.choice, dtype=np.intp), deployed_score=deployed,
        ))
    for msg in run_warnings:
        warnings.warn(msg, OffPolicyWarning, stacklevel=2)
    return OPEResult(
        provenance=Provenance.of(table, sp, seed=seed, encoder=flog.encoder, routers=labels),
        n_logged=n, logs=_describe_logs(logs), estimators=ests, metrics=metric_names, unavailable=unavailable,
        interval=({"method": "bootstrap", "kind": "percentile over logged queries", "level": 0.95,
                   "n_boot": n_boot, "seed": seed} if interval_method == "bootstrap" else
                  {"method": "normal", "kind": "estimator's own normal approximation", "level": 0.95}),
        reward_model=model_info, training=training, results=results, truth_note=truth_note, warnings=run_warnings,
        query_ids=[str(q) for q in logged.queries.ids],
    )


def without_logged_queries(train_table: RoutingTable, logged: RoutingTable, run_warnings: list[str], verb: str
                           ) -> tuple[RoutingTable, npt.NDArray[np.bool_]]:
    """``train_table`` without the queries of the log (no router learns an outcome it is judged on) and the mask of
    the rows kept; a warning in ``run_warnings`` when some were left out, a UsageError when all were (``verb`` says
    what the command does with logs: evaluate, judge)."""
    leak = np.isin(train_table.queries.ids.astype(str), logged.queries.ids.astype(str))
    n_leak = int(leak.sum())
    if not n_leak:
        return train_table, ~leak
    if n_leak == train_table.n_queries:
        raise UsageError(f"every one of the {n_leak} training queries is a logged query; {verb} logs of "
                         "queries the routers do not train on (e.g. routerlab log --part test)")
    run_warnings.append(leak_warning(n_leak))
    return train_table.select_queries(~leak), ~leak


def leak_warning(n_leak: int) -> str:
    """The warning of a run whose training split holds ``n_leak`` logged queries (left out of training)."""
    return (f"{n_leak} logged quer{'y is' if n_leak == 1 else 'ies are'} also in the training split; left out of "
            "training so that no router learns an outcome it is evaluated on")


def training_split(table: RoutingTable, split: str | Split, seed: int) -> Split:
    """The split whose train part the routers learn from. Off-policy evaluation needs no test part, so besides
    every spec of :func:`make_split` it takes ``all`` (every query of the table trains) and ``given`` on a table
    with only ``train`` labels (a table of training data beside logs from a deployment)."""
    if isinstance(split, Split):
        return split
    if split == "all":
        return Split(np.arange(table.n_queries), np.zeros(0, dtype=np.intp), "all")
    if split == "given":
        labels = table.queries.split.astype(str)
        if "train" in set(labels.tolist()) and not set(labels.tolist()) & set(TEST_NAMES):
            return Split(np.flatnonzero(labels == "train"), np.zeros(0, dtype=np.intp), "given",
                         params={"test_split": None})
    return make_split(table, split, seed)


def _check_actors(table: RoutingTable, logs: Logs, what: str) -> None:
    if logs.table.actor_names != table.actor_names:
        raise UsageError(f"{what} has actors {logs.table.actor_names}, the table {table.actor_names}; read it with "
                         "read_logs(paths, table) so that its actors are the table's, in order")


def logged_rewards(logs: Logs) -> tuple[dict[str, npt.NDArray[np.float64]], dict[str, str]]:
    """Each estimable metric's reward of the logged actor on every logged query, and why the others are not
    estimable (metric -> reason)."""
    table, rows, a = logs.table, np.arange(logs.n), logs.actor
    out: dict[str, npt.NDArray[np.float64]] = {"mu_o": table.score[rows, a].astype(np.float64)}
    why: dict[str, str] = {}
    for metric, key, what in (("mean_cost", "cost_usd", "cost"), ("mean_latency", "latency_s", "latency")):
        mat = getattr(table, key)
        if mat is None:
            why[metric] = f"the log has no {what} column"
            continue
        values = mat[rows, a].astype(np.float64)
        if np.isnan(values).any():
            why[metric] = f"the {what} of {int(np.isnan(values).sum())} logged queries is unknown"
            continue
        out[metric] = values
    for metric in LOG_REWARD_METRICS:
        values = logs.rewards.get(metric)
        if values is None:
            why[metric] = ("needs the log's reward column: it depends on every actor's correctness and latency on "
                           "the query, which a real log does not hold (a log simulated by 'routerlab log' from a "
                           "table with latency has it)")
        elif np.isnan(values).any():
            why[metric] = f"the log's {metric} reward is unknown on {int(np.isnan(values).sum())} logged queries"
        else:
            out[metric] = np.asarray(values, dtype=np.float64)
    return out, {k: why[k] for k in METRICS if k in why}


def _estimates(ests: list[str], metrics: list[str], rewards: npt.NDArray[np.float64], action: npt.NDArray[np.intp],
               p: npt.NDArray[np.float64], target: npt.NDArray[np.float64], rhat: npt.NDArray[np.float64] | None,
               method: str, n_boot: int, seed: int) -> dict[str, dict[str, tuple[float, float, float]]]:
    """Every (estimator, metric) value with its interval; the bootstrap resamples are shared by all of them."""
    keys = [(e, j) for e in ests for j in range(len(metrics))]
    terms = [op.contributions(e, rewards[:, j], action, p, target, None if rhat is None else rhat[:, :, j])
             for e, j in keys]
    if method == "bootstrap":
        bounds = op.bootstrap_intervals(terms, n_boot=n_boot, seed=seed)
    else:
        bounds = [(float(lo), float(hi)) for lo, hi in (t.normal_interval() for t in terms)]
    out: dict[str, dict[str, tuple[float, float, float]]] = {e: {} for e in ests}
    for (e, j), t, (lo, hi) in zip(keys, terms, bounds, strict=True):
        v = float(t.value())
        lo, hi = interval(v, lo, hi) if np.isfinite(v) else (float("nan"), float("nan"))
        out[e][metrics[j]] = (v, lo, hi)
    return out


def _truth_rows(table: RoutingTable, logged: RoutingTable) -> tuple[npt.NDArray[np.intp] | None, str | None]:
    """Positions in ``table`` of the logged queries when all are there (which cells a router's truth needs is
    checked per router, by :func:`_truth`)."""
    ids = table.queries.ids.astype(str)
    order = np.argsort(ids)
    want = logged.queries.ids.astype(str)
    pos = np.searchsorted(ids[order], want)
    pos = np.minimum(pos, max(ids.size - 1, 0))
    found = ids.size > 0 and bool((ids[order][pos] == want).all())
    if not found:
        missing = int((ids[order][pos] != want).sum()) if ids.size else want.size
        return None, f"{missing} logged queries are not in the table: the truth is unknown"
    return order[pos], None


def _truth(full: RoutingTable, target: npt.NDArray[np.float64], metrics: list[str]) -> dict[str, float]:
    """The router's true value of each metric on the logged queries (``full``: their full outcomes) under its
    target policy: the mean over queries of sum_a pi(a|x) reward(x, a). A metric whose cells are not all known is
    left out."""
    cells: dict[str, npt.NDArray[np.float64]] = {"mu_o": full.score.astype(np.float64)}
    if full.cost_usd is not None:
        cells["mean_cost"] = full.cost_usd.astype(np.float64)
    if full.latency_s is not None:
        cells["mean_latency"] = full.latency_s.astype(np.float64)
        if any(k in metrics for k in LOG_REWARD_METRICS):
            from routerlab.metrics.latency import latency_rewards

            with contextlib.suppress(ValueError):  # a correct actor's latency is unknown: no SPEC 5 truth
                cells.update(latency_rewards(full.score, full.latency_s))
    out: dict[str, float] = {}
    for k in metrics:
        mat = cells.get(k)
        if mat is None:
            continue
        # a cell the policy never picks may be unknown; one it can pick must be known
        if np.isnan(mat[target > 0]).any():
            continue
        out[k] = float(expected_per_query(mat, target, k).mean())
    return out


def _describe_logs(logs: Logs) -> dict[str, Any]:
    """The log's size, policy, shares, smallest propensity and a content hash (its table and propensities)."""
    h = hashlib.sha256(logs.table.content_hash.encode())
    h.update(np.ascontiguousarray(logs.propensity, dtype="<f8").tobytes())
    for key in sorted(logs.rewards):
        h.update(key.encode())
        h.update(np.ascontiguousarray(logs.rewards[key], dtype="<f8").tobytes())
    return {**logs.describe(), "content_hash": h.hexdigest()}


# -- the registered protocol ---------------------------------------------------------------------------------
def _check_estimators(value: tuple[str, ...]) -> tuple[str, ...]:
    unknown = [e for e in value if e not in op.ESTIMATORS]
    if unknown:
        raise UsageError(f"unknown estimator {unknown[0]!r}; estimators are {', '.join(op.ESTIMATORS)}")
    return value


def _check_log_files(value: tuple[str, ...]) -> tuple[str, ...]:
    """Each path names an existing log file (read, and checked against the table, when the protocol runs)."""
    for path in value:
        if Path(path).is_dir():
            raise UsageError(f"{path}: is a directory, not a log file")
        if not Path(path).is_file():
            raise UsageError(f"{path}: no such log file")
    return value


def _check_training_split(value: str) -> str:
    """A split spec, or ``all`` (every query of the table trains: off-policy evaluation needs no test part)."""
    if value != "all":
        check_split(value)
    return value


def _check_policy(value: str) -> str:
    from routerlab.protocols.policies import parse_policy

    parse_policy(value)
    return value


BOUND_SKIPPED = ("a bound that reads every actor's outcome on the queries it routes; a log holds one outcome per "
                 "query, so it cannot be evaluated off-policy")
LOGS_HELP = ("log files (.csv, .jsonl, .parquet: one row per logged query with its propensity; see 'routerlab log') "
             "whose queries the routers are estimated on; none = simulate a log of the split's test part with "
             "'logging'")
LOGGING_HELP = ("without logs: the logging policy that draws the log of the test part (seeded): uniform, "
                "eps-greedy:ROUTER:EPS, softmax:ROUTER:T or router:ROUTER")
OPE_SPLIT_HELP = ("which queries of the table train the routers: given (its 'train' rows), all, random[:F] (seeded, "
                  "the train part) or ood:DS1,DS2 (the other datasets); logged queries never train")


@dataclass(frozen=True)
class OPESettings(ProtocolSettings):
    """``routerlab ope``'s settings: which log (a file, or one simulated from the table), the estimators and their
    intervals, what the routers train on, and DR's reward model."""

    logs: tuple[str, ...] | None = setting(None, LOGS_HELP, check=_check_log_files, option="LOGS", path=True)
    logging: str = setting("uniform", LOGGING_HELP, check=_check_policy)
    estimators: tuple[str, ...] = setting(list(op.ESTIMATORS), "estimators: ips, snips, dr",
                                          check=_check_estimators)
    interval: str = setting("bootstrap", "95% interval: bootstrap (percentile, over logged queries) or normal "
                            "(each estimator's own)", Options(set(INTERVALS)))
    train_logs: tuple[str, ...] | None = setting(None, "train on these logs (logged feedback) instead of the "
                                                 "table's train split", check=_check_log_files, path=True)
    reward_model: str = setting("ridge", "DR's reward model: ridge (cross-fitted, on query features) or mean "
                                "(cross-fitted per-actor mean)", Options(set(REWARD_MODELS)))
    encoder: str = setting("tfidf", ENCODER_HELP, check=check_encoder)
    split: str = setting("given", OPE_SPLIT_HELP, check=_check_training_split)
    n_boot: int = setting(1000, NBOOT_HELP, NBOOT)

    def validate(self) -> None:
        if self.logs is not None and self.logging != "uniform":
            raise SettingError("logging", "draws a simulated log, and log files are named: give one or the other")
        if self.logs is None and self.split == "all":
            raise SettingError("split", "'all' leaves no test part to simulate a log of; name the logs, or a split "
                                        "with a test part")


def ope_records(res: OPEResult) -> list[MetricRecord]:
    """The metric records of an off-policy evaluation, per router: each estimated metric under its own name with
    slice ``estimator=ips|snips|dr`` and its 95% interval; the truth (the router's actual value on the logged
    queries) under the metric's name with slice ``''`` where the table holds it; then the importance weights'
    diagnostics ``ess``, ``n_agree``, ``max_weight`` and ``min_propensity``."""
    out: list[MetricRecord] = []
    for r in res.results:
        for est in res.estimators:
            for metric in res.metrics:
                v, lo, hi = r.estimates[est][metric]
                out.append(MetricRecord.of(r.spec, metric, v, (lo, hi), f"estimator={est}"))
        for metric in res.metrics:
            if r.truth is not None and metric in r.truth:
                out.append(MetricRecord.of(r.spec, metric, r.truth[metric]))
        d = r.diagnostics
        out += [MetricRecord.of(r.spec, "ess", d.ess), MetricRecord.of(r.spec, "n_agree", d.n_agree),
                MetricRecord.of(r.spec, "max_weight", d.max_weight),
                MetricRecord.of(r.spec, "min_propensity", d.min_propensity)]
    return out


def protocol_logs(table: RoutingTable, settings: OPESettings, seed: int, cache_dir: str | None = None) -> Logs:
    """The log a run evaluates on: the ``logs`` files read against ``table``'s actors, or, without them, a log of
    the split's test part drawn by the ``logging`` policy (seeded; what ``routerlab log --part test`` writes)."""
    from routerlab.data.logs import read_logs
    from routerlab.protocols.policies import simulate_logs

    if settings.logs:
        return read_logs(list(settings.logs), table)
    with task(f"ope: simulating a {settings.logging} log of the test part"):
        return simulate_logs(table, settings.logging, part="test", split=settings.split, seed=seed,
                             encoder=settings.encoder, cache_dir=cache_dir)


@register_protocol("ope")
class OffPolicy(Protocol):
    summary = ("estimate routers' metrics from a log (a file, or one a logging policy draws of the test part) with "
               "IPS, SNIPS and DR, each with a 95% CI, beside the truth where the table holds it")
    spec = "SPEC 1, 4, 5, 7"
    Settings = OPESettings

    def run(self, table: RoutingTable, settings: Any, seed: int = 0, routers: Sequence[Any] = (),
            context: RunContext | None = None) -> Result:
        from routerlab.data.logs import read_logs

        s: OPESettings = settings
        cache = context.cache_dir if context else None
        # a bound is left out and listed (an experiment runs it beside other routers); with nothing else, refused
        bounds = {router_label(r): BOUND_SKIPPED for r in routers
                  if (get_router(r) if isinstance(r, str) else r).uses_test_labels}
        kept = [r for r in routers if router_label(r) not in bounds]
        if not kept:
            refuse_bounds(list(routers))
        logs = protocol_logs(table, s, seed, cache)
        train_logs = read_logs(list(s.train_logs), table) if s.train_logs else None
        res = off_policy_evaluate(table, logs, kept, estimators=s.estimators, split=s.split,
                                  encoder=s.encoder, seed=seed, n_boot=s.n_boot, interval_method=s.interval,
                                  train_logs=train_logs, reward_model=s.reward_model, cache_dir=cache)
        return Result(self.name, res.provenance, s, ope_records(res), native=res, skipped=bounds,
                      n_train=int(res.training["n_train"]), n_test=res.n_logged, notes=list(res.warnings))
