"""The off-policy promotion gate (docs/promote.md): should a candidate router replace the current one, judged on
the traffic the current deployment logged?

Both routers are scored on the *same* logged rows. For each row i the chosen estimator (IPS, SNIPS or DR from
:mod:`routerlab.metrics.offpolicy`) gives a term for the candidate and one for the current router; the gate
estimates ``Delta = V(candidate) - V(current)`` (V = the mean score the router would get if deployed) from the
per-row differences, so everything the two share (the same queries, the same logged outcome, the same reward
model) cancels, and the interval is that of the difference, not two intervals side by side.

Interval (two-sided 95%, SPEC 7's level):

- ``normal`` (default): ``Delta +- 1.96 se``. IPS and DR are means of per-row terms, so ``se`` is the standard
  error of the per-row differences ``t_cand_i - t_cur_i``; SNIPS is a difference of two ratios: its jackknife
  standard error, floored at the IPS difference's (see :func:`paired_normal` for why). Deterministic, and
  exactly zero when the candidate acts as the current router on every row.
- ``bootstrap``: the percentile interval of the difference over ``n_boot`` resamples of the logged rows, the
  candidate's and the current's terms resampled together (a paired bootstrap, vectorised).

Decision: ``promote`` iff the interval's lower bound exceeds ``margin`` (default 0). The lower bound of a
two-sided 95% interval is a one-sided 97.5% bound, so when the candidate is truly no better than the current
router by more than ``margin`` the nominal chance of a false promotion is at most 2.5%; the other 2.5% is the
slack that a normal or bootstrap approximation of heavy-tailed importance weights needs (measured by
``benchmarks/bench_promote.py``). The gate says ``undecided`` (and never promotes) when the data cannot carry a
decision: fewer than ``MIN_QUERIES`` logged rows (no interval at all), an undefined estimate, or thin support
(:func:`support_diagnostics`). ``keep`` otherwise.
"""

from __future__ import annotations

import hashlib
import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from routerlab.data.logs import Logs
from routerlab.data.provenance import Provenance
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.metrics import offpolicy as op
from routerlab.metrics.bootstrap import MIN_QUERIES, bootstrap_means, percentile_interval

FloatArray = npt.NDArray[np.float64]

ESTIMATORS: tuple[str, ...] = ("dr", "ips", "snips")
"""The gate's estimators, the default first."""
INTERVALS: tuple[str, ...] = ("normal", "bootstrap")
DECISIONS: tuple[str, ...] = ("promote", "keep", "undecided")
LEVEL = 0.95
"""The interval's level: two-sided 95%, so its lower bound is a one-sided 97.5% bound."""
ALPHA = 0.05
NOMINAL_FALSE_PROMOTION = 0.025
"""The nominal chance of promoting a candidate that is truly no better (by more than the margin): 2.5%."""
Z = 1.959963984540054  # the 0.975 quantile of the standard normal
MIN_SUPPORT_ROWS = 5
"""Rows where the routers disagree must include at least this many logged with an actor each router would pick,
for each of them: fewer, and that router's side of the difference rests on a handful of heavily weighted rows
(or, for DR, on the reward model alone)."""
MIN_ESS = op.MIN_ESS  # 30: the effective sample size below which no interval is trusted
_SAME = 1e-12  # two target distributions closer than this on a row act the same there


class PromotionWarning(UserWarning):
    """A promotion gate that cannot decide, or decides on thin support."""


@dataclass(frozen=True)
class PairedEstimate:
    """``V(candidate) - V(current)`` on one log with its two-sided 95% interval (NaN below MIN_QUERIES rows or
    where the estimate is undefined); ``se`` is the normal interval's standard error (the bootstrap replicates'
    sd for the bootstrap); ``candidate``/``current`` are the two values the difference is made of."""

    value: float
    lo: float
    hi: float
    se: float
    candidate: float
    current: float


@dataclass(frozen=True)
class Support:
    """How much the log says about the difference (see :func:`support_diagnostics`)."""

    n: int
    ess_candidate: float
    ess_current: float
    n_disagree: int
    n_disagree_logged_candidate: int
    n_disagree_logged_current: int
    unsupported_rows: int
    unsupported_actors: list[str]
    min_propensity: float
    max_weight_candidate: float
    deterministic_log: bool
    reasons: list[str] = field(default_factory=list)

    @property
    def thin(self) -> bool:
        return bool(self.reasons)

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "ess_candidate": self.ess_candidate, "ess_current": self.ess_current,
                "n_disagree": self.n_disagree, "n_disagree_logged_candidate": self.n_disagree_logged_candidate,
                "n_disagree_logged_current": self.n_disagree_logged_current,
                "unsupported_rows": self.unsupported_rows, "unsupported_actors": list(self.unsupported_actors),
                "min_propensity": self.min_propensity, "max_weight_candidate": self.max_weight_candidate,
                "deterministic_log": self.deterministic_log, "thin": self.thin, "reasons": list(self.reasons)}


@dataclass(frozen=True)
class GateOutcome:
    """The gate on one log: the paired estimate, the support, the decision and why."""

    estimator: str
    interval: str
    margin: float
    estimate: PairedEstimate
    support: Support
    decision: str
    reason: str

    @property
    def promote(self) -> bool:
        return self.decision == "promote"


# -- the paired estimate ------------------------------------------------------------------------------------
def paired_terms(estimator: str, reward: npt.ArrayLike, action: npt.ArrayLike, propensity: npt.ArrayLike,
                 target_current: npt.ArrayLike, target_candidate: npt.ArrayLike,
                 reward_hat: npt.ArrayLike | None = None) -> tuple[op.Contributions, op.Contributions]:
    """The per-row terms of ``estimator`` for the candidate and for the current router on the same logged rows
    (target distributions (..., n, m); DR needs the reward model ``reward_hat`` (..., n, m), shared by both)."""
    if estimator not in ESTIMATORS:
        raise UsageError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {estimator!r}")
    cand = op.contributions(estimator, reward, action, propensity, target_candidate, reward_hat)
    cur = op.contributions(estimator, reward, action, propensity, target_current, reward_hat)
    return cand, cur


def paired_normal(cand: op.Contributions, cur: op.Contributions) -> tuple[FloatArray, FloatArray, FloatArray,
                                                                          FloatArray]:
    """(difference, se, candidate value, current value) over the last axis, any leading axes (many logs at once).

    IPS and DR are means of per-row terms: se is the sd of the per-row differences / sqrt(n). SNIPS is a
    difference of two ratios: se is the larger of its jackknife standard error (leave one row out of both
    ratios) and the IPS difference's standard error on the same rows. Why the floor: SNIPS's own se is estimated
    from the same few heavily weighted rows that move its estimate, and comes out small exactly when those rows
    happened to favour the candidate; on truly-equal candidates the jackknife (or delta-method) se alone made the
    gate promote 7.3% [4.9, 10.9] of 300 deployments (benchmarks/bench_promote.py, logs of 20,000 rows), against
    the nominal 2.5%."""
    vc, vr = np.asarray(cand.value(), dtype=np.float64), np.asarray(cur.value(), dtype=np.float64)
    n = cand.n
    if n < 2:
        return np.asarray(vc - vr), np.full(vc.shape, np.nan), vc, vr
    d = cand.numerator - cur.numerator  # IPS's and DR's per-row differences; for SNIPS, IPS's
    se = d.std(axis=-1, ddof=1) / np.sqrt(n)
    if cand.denominator is None or cur.denominator is None:
        return np.asarray(vc - vr), np.asarray(se), vc, vr
    loo = []
    for t in (cand, cur):
        assert t.denominator is not None
        num = t.numerator.sum(axis=-1, keepdims=True) - t.numerator
        den = t.denominator.sum(axis=-1, keepdims=True) - t.denominator
        with np.errstate(invalid="ignore", divide="ignore"):
            loo.append(np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan))
    theta = loo[0] - loo[1]
    jack = np.sqrt((n - 1) / n * ((theta - theta.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1))
    return np.asarray(vc - vr), np.asarray(np.fmax(jack, se)), vc, vr


def paired_estimate(cand: op.Contributions, cur: op.Contributions, *, interval: str = "normal",
                    n_boot: int = 1000, seed: int = 0) -> PairedEstimate:
    """The difference on one log (1-d terms) with its two-sided 95% interval by ``interval`` (see the module
    docstring); NaN interval below MIN_QUERIES rows, NaN everything where an estimate is undefined."""
    if interval not in INTERVALS:
        raise UsageError(f"interval must be one of {', '.join(INTERVALS)}, got {interval!r}")
    if cand.numerator.ndim != 1 or cur.numerator.shape != cand.numerator.shape:
        raise ValueError("paired_estimate takes the 1-d terms of one log, the same rows for both routers")
    diff, se, vc, vr = (float(x) for x in paired_normal(cand, cur))
    nan = float("nan")
    if cand.n < MIN_QUERIES or not math.isfinite(diff):
        return PairedEstimate(diff, nan, nan, nan, vc, vr)
    if interval == "normal":
        return PairedEstimate(diff, diff - Z * se, diff + Z * se, se, vc, vr)
    cols = [cand.numerator, cur.numerator]
    ratio = cand.denominator is not None and cur.denominator is not None
    if cand.denominator is not None and cur.denominator is not None:
        cols += [cand.denominator, cur.denominator]
    reps = bootstrap_means(np.column_stack(cols), n_boot, seed)
    if ratio:
        with np.errstate(invalid="ignore", divide="ignore"):
            c = np.where(reps[:, 2] > 0, reps[:, 0] / np.where(reps[:, 2] > 0, reps[:, 2], 1.0), np.nan)
            r = np.where(reps[:, 3] > 0, reps[:, 1] / np.where(reps[:, 3] > 0, reps[:, 3], 1.0), np.nan)
        rep = c - r
    else:
        rep = reps[:, 0] - reps[:, 1]
    lo, hi = percentile_interval(rep, ALPHA)
    finite = rep[np.isfinite(rep)]
    sd = float(finite.std(ddof=1)) if finite.size > 1 else nan
    return PairedEstimate(diff, lo, hi, sd, vc, vr)


# -- support -------------------------------------------------------------------------------------------------
def support_diagnostics(action: npt.ArrayLike, propensity: npt.ArrayLike, target_current: npt.ArrayLike,
                        target_candidate: npt.ArrayLike, actor_names: Sequence[str], *,
                        min_ess: float = MIN_ESS, min_rows: int = MIN_SUPPORT_ROWS) -> Support:
    """What the log says about the difference, and whether that is too thin to promote on. Thin when

    - the two routers disagree on some rows and the log has no exploration (every propensity 1): where the
      candidate departs from the logged actor it had probability 0 of being logged;
    - the candidate puts mass, on rows where the routers disagree, on an actor the log never holds;
    - either router's importance weights have an effective sample size (Kish) below ``min_ess``;
    - fewer than ``min_rows`` of the disagreeing rows were logged with an actor the candidate (or the current
      router) would pick there: that side of the difference rests on a handful of heavily weighted rows.

    Rows where the two act alike cancel exactly in the paired difference; only the disagreeing rows inform it.
    """
    a = np.asarray(action, dtype=np.intp)
    p = np.asarray(propensity, dtype=np.float64)
    tr = np.asarray(target_current, dtype=np.float64)
    tc = np.asarray(target_candidate, dtype=np.float64)
    n, m = tc.shape
    names = [str(x) for x in actor_names]
    rows = np.arange(n)
    w_c = op.importance_weights(tc[rows, a], p)
    w_r = op.importance_weights(tr[rows, a], p)
    ess_c = float(op.effective_sample_size(w_c)) if n else 0.0
    ess_r = float(op.effective_sample_size(w_r)) if n else 0.0
    disagree = np.abs(tc - tr).max(axis=1) > _SAME if n else np.zeros(0, dtype=bool)
    n_dis = int(disagree.sum())
    logged_c = int((disagree & (w_c > 0)).sum())
    logged_r = int((disagree & (w_r > 0)).sum())
    seen = np.bincount(a, minlength=m) > 0
    mass_unseen = (tc[:, ~seen].sum(axis=1) > _SAME) & disagree
    unsupported = sorted({names[j] for j in np.flatnonzero(~seen) if (tc[disagree, j] > _SAME).any()})
    deterministic = bool(n and (p >= 1.0 - 1e-9).all())
    reasons: list[str] = []
    if deterministic and n_dis:
        reasons.append(f"the log has no exploration (every propensity is 1), and the candidate departs from the "
                       f"logged actor on {n_dis} rows: those actions had probability 0 of being logged")
    if unsupported:
        reasons.append(f"on {int(mass_unseen.sum())} rows where it disagrees with the current router the "
                       f"candidate picks {', '.join(unsupported)}, which the log never holds")
    for who, ess in (("candidate", ess_c), ("current router", ess_r)):
        if ess < min_ess:
            reasons.append(f"the {who}'s effective sample size {ess:.1f} is below {min_ess:g}")
    if n_dis:
        for who, count in (("candidate", logged_c), ("current router", logged_r)):
            if count < min_rows and not (deterministic or unsupported):
                reasons.append(f"of the {n_dis} rows where the routers disagree, {count} "
                               f"{'was' if count == 1 else 'were'} logged with an actor the {who} picks there "
                               f"(fewer than {min_rows})")
    min_p = float(p.min()) if n else float("nan")
    max_w = float(w_c.max()) if n else float("nan")
    return Support(n, ess_c, ess_r, n_dis, logged_c, logged_r, int(mass_unseen.sum()), unsupported, min_p, max_w,
                   deterministic, reasons)


def decide(estimate: PairedEstimate, support: Support, margin: float) -> tuple[str, str]:
    """(decision, reason): ``promote`` iff the interval's lower bound exceeds ``margin`` and the support is
    adequate; ``undecided`` when there is no interval or the support is thin; ``keep`` otherwise."""
    if support.n < MIN_QUERIES:
        return "undecided", (f"only {support.n} logged rows: below {MIN_QUERIES} there is no interval, so the gate "
                             "cannot decide")
    if not math.isfinite(estimate.value) or not math.isfinite(estimate.lo):
        return "undecided", "the estimate is undefined on this log (no logged row carries either router's weight)"
    if support.thin:
        return "undecided", "thin support: " + "; ".join(support.reasons)
    if estimate.lo > margin:
        return "promote", f"the lower bound {estimate.lo:.4g} exceeds the margin {margin:g}"
    return "keep", f"the lower bound {estimate.lo:.4g} does not exceed the margin {margin:g}"


def check_gate_options(*, estimator: str, interval: str, reward_model: str, margin: float,
                       prefix: str = "") -> None:
    """The gate's choices, checked once for the CLI (``prefix="--"``: ``--reward-model``) and for Python (option
    names as the keyword arguments): :class:`UsageError` naming the option and the values it takes."""
    from routerlab.protocols.ope import REWARD_MODELS

    def name(option: str) -> str:
        return prefix + (option.replace("_", "-") if prefix else option)

    for option, value, allowed in (("estimator", estimator, ESTIMATORS), ("interval", interval, INTERVALS),
                                   ("reward_model", reward_model, REWARD_MODELS)):
        if value not in allowed:
            raise UsageError(f"{name(option)} must be one of {', '.join(allowed)}, got {value!r}")
    check_margin(margin, name("margin"))


def check_margin(margin: float, option: str = "margin") -> float:
    """A margin is a difference of mean scores (0.01 = one point): finite, in [0, 1)."""
    if isinstance(margin, bool) or not isinstance(margin, int | float) or not math.isfinite(margin):
        raise UsageError(f"{option} must be a finite number in [0, 1), got {margin!r}")
    if margin < 0:
        raise UsageError(f"{option} must be >= 0 (a negative margin would promote a candidate that may be worse), "
                         f"got {margin:g}")
    if margin >= 1:
        raise UsageError(f"{option} must be below 1: it is a difference of mean scores in [0, 1] (0.01 = one point),"
                         f" got {margin:g}")
    return float(margin)


def gate(estimator: str, reward: npt.ArrayLike, action: npt.ArrayLike, propensity: npt.ArrayLike,
         target_current: npt.ArrayLike, target_candidate: npt.ArrayLike, actor_names: Sequence[str], *,
         reward_hat: npt.ArrayLike | None = None, margin: float = 0.0, interval: str = "normal", n_boot: int = 1000,
         seed: int = 0, min_support: int = MIN_SUPPORT_ROWS) -> GateOutcome:
    """The promotion gate on one log given as arrays: logged rewards, actions and propensities (n,), both
    routers' target distributions (n, m), and (DR) the reward model (n, m). What the CLI and the calibration
    benchmark both run."""
    check_margin(margin)
    cand, cur = paired_terms(estimator, reward, action, propensity, target_current, target_candidate, reward_hat)
    est = paired_estimate(cand, cur, interval=interval, n_boot=n_boot, seed=seed)
    sup = support_diagnostics(action, propensity, target_current, target_candidate, actor_names,
                              min_rows=min_support)
    decision, reason = decide(est, sup, margin)
    return GateOutcome(estimator, interval, float(margin), est, sup, decision, reason)


# -- reading the log and training the routers ---------------------------------------------------------------
def read_gate_log(paths: str | Path | Sequence[str | Path], table: RoutingTable) -> Logs:
    """The logged traffic the gate judges on, read against ``table``'s actors: a log with a score on every row and
    its propensities (``routerlab log`` output, or a served log scored by ``attach_feedback``). The one place the
    gate reads a log, so that a reader of a served log with its feedback file can replace it."""
    from routerlab.data.logs import read_logs

    return read_logs([paths] if isinstance(paths, str | Path) else list(paths), table)


@dataclass
class PromotionResult:
    """Everything ``routerlab promote`` reports: the run record, the log, both routers, the gate's outcome and,
    where the table holds every logged query's full outcomes, the true difference on the logged queries."""

    provenance: Provenance
    log: dict[str, Any]
    training: dict[str, Any]
    current: dict[str, Any]
    candidate: dict[str, Any]
    outcome: GateOutcome
    reward_model: dict[str, Any]
    n_boot: int
    seed: int
    settings: dict[str, Any] = field(default_factory=dict)
    truth: dict[str, float] | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        o, e = self.outcome, self.outcome.estimate
        enough = o.support.n >= MIN_QUERIES

        def num(v: float) -> float | None:
            return v if math.isfinite(v) else None

        out: dict[str, Any] = {
            **self.provenance.to_dict(),
            "settings": self.settings,
            "log": self.log,
            "training": self.training,
            "current": {**self.current, "value": num(e.current) if enough else None},
            "candidate": {**self.candidate, "value": num(e.candidate) if enough else None},
            "estimator": o.estimator,
            "metric": "mu_o",
            "difference": {"value": num(e.value) if enough else None,
                           "ci": [num(e.lo), num(e.hi)] if enough else None,
                           "se": num(e.se) if enough else None},
            "interval": {"method": o.interval, "level": LEVEL, "sides": "two-sided",
                         **({"n_boot": self.n_boot} if o.interval == "bootstrap" else {})},
            "margin": o.margin,
            "nominal_false_promotion": NOMINAL_FALSE_PROMOTION,
            "decision": o.decision,
            "promote": o.promote,
            "reason": o.reason,
            "support": o.support.to_dict(),
            "ess": {"candidate": o.support.ess_candidate, "current": o.support.ess_current},
            "n": o.support.n,
            "reward_model": self.reward_model,
        }
        if self.truth is not None:
            out["truth"] = self.truth
        out["warnings"] = list(self.warnings)
        return out


def _log_hash(logs: Logs) -> str:
    h = hashlib.sha256(logs.table.content_hash.encode())
    h.update(np.ascontiguousarray(logs.propensity, dtype="<f8").tobytes())
    return h.hexdigest()


def promotion_gate(table: RoutingTable, logs: Logs, current: str, candidate: str, *, estimator: str = "dr",
                   margin: float = 0.0, interval: str = "normal", n_boot: int = 1000, seed: int = 0,
                   encoder: str = "tfidf", split: str = "given", reward_model: str = "ridge",
                   log_paths: Sequence[str] | None = None, cache_dir: str | None = None) -> PromotionResult:
    """Train ``current`` and ``candidate`` on ``table``'s training side (its ``split``'s train part, without any
    logged query), route the logged queries, and run :func:`gate` on the log. DR's reward model is the one
    ``routerlab ope`` fits (per actor ridge on the query features, cross-fitted over 5 seeded folds; ``mean``: the
    cross-fitted per-actor mean)."""
    from routerlab.features import encode_pair
    from routerlab.protocols.full import applicable_routers
    from routerlab.protocols.ope import (
        _check_actors,
        _truth_rows,
        refuse_bounds,
        training_split,
        without_logged_queries,
    )

    check_gate_options(estimator=estimator, interval=interval, reward_model=reward_model, margin=margin)
    refuse_bounds([current, candidate])
    _check_actors(table, logs, "the log")
    run_warnings: list[str] = []
    logged = logs.table
    n, m = logged.n_queries, logged.n_actors
    sp = training_split(table, split, seed)
    train_table, _ = sp.apply(table)
    train_table, kept = without_logged_queries(train_table, logged, run_warnings, "judge on")
    chosen, _ = applicable_routers([current, candidate], train_table, seed)
    ftrain, flog = encode_pair(train_table, logged, encoder, cache_dir=cache_dir)
    action, p = logs.actor, logs.propensity
    reward = logged.score[np.arange(n), action].astype(np.float64)
    targets: list[FloatArray] = []
    described: list[dict[str, Any]] = []
    for spec, router in chosen:
        t0 = time.perf_counter()
        router.fit(train_table, ftrain)
        routed = router.route(flog)
        targets.append(np.asarray(routed.policy if router.explores else np.eye(m)[routed.choice], dtype=np.float64))
        described.append({"router": spec, "policy": "distribution" if router.explores else "argmax",
                          "params": {**router.params, "seed": router.seed},
                          "seconds": round(time.perf_counter() - t0, 4)})
    rhat: FloatArray | None = None
    model_info: dict[str, Any] = {"kind": None}
    if estimator == "dr":
        fold = op.fold_assignment(n, 5, seed)
        x = flog.X if reward_model == "ridge" else np.zeros((n, 0))
        rhat, fallback = op.ridge_reward_model(x, action, reward, m, fold, alpha=1.0,
                                               min_rows=10 if reward_model == "ridge" else 1)
        model_info = {"kind": reward_model, "folds": int(fold.max()) + 1 if n else 0, "seed": seed}
        if reward_model == "ridge":
            model_info.update({"alpha": 1.0, "min_rows": 10, "mean_fallback_cells": fallback,
                               "features": flog.encoder})
    outcome = gate(estimator, reward, action, p, targets[0], targets[1], table.actor_names, reward_hat=rhat,
                   margin=margin, interval=interval, n_boot=n_boot, seed=seed)
    if outcome.decision == "undecided":
        run_warnings.append(outcome.reason)
    if outcome.support.thin and not outcome.reason.startswith("thin support"):  # below 30 rows, say both
        run_warnings.append("thin support: " + "; ".join(outcome.support.reasons))
    truth: dict[str, float] | None = None
    rows, _ = _truth_rows(table, logged)
    if rows is not None:
        full = table.select_queries(rows).score.astype(np.float64)
        if not any(np.isnan(full[t > 0]).any() for t in targets):
            from routerlab.metrics.selection import expected_per_query

            vr, vc = (float(expected_per_query(full, t, "score").mean()) for t in targets)
            truth = {"current": vr, "candidate": vc, "difference": vc - vr}
    for msg in run_warnings:
        warnings.warn(msg, PromotionWarning, stacklevel=2)
    log_info = {**({"files": list(log_paths)} if log_paths else {}), "n_logged": n, "policy": logs.policy,
                "min_propensity": float(p.min()), "content_hash": _log_hash(logs)}
    return PromotionResult(
        provenance=Provenance.of(table, sp, seed=seed, encoder=flog.encoder, routers=[current, candidate]),
        log=log_info, training={"n_train": int(train_table.n_queries), "left_out_logged_queries": int((~kept).sum())},
        current=described[0], candidate=described[1], outcome=outcome, reward_model=model_info, n_boot=n_boot,
        seed=seed, truth=truth, warnings=run_warnings,
        settings={"current": current, "candidate": candidate, "estimator": estimator, "margin": float(margin),
                  "interval": interval, "n_boot": n_boot, "reward_model": reward_model, "encoder": encoder,
                  "split": split, "min_support_rows": MIN_SUPPORT_ROWS, "min_ess": MIN_ESS})
