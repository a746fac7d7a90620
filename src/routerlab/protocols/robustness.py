"""Routing robustness (SPEC 3; hse-diversity-and-routing-robustness.txt sec. 5): train routers as ``evaluate``
does, route the test queries and their meaning-preserving variants, and report rho overall, per level and per
actor, with bootstrap intervals over test queries, and the invariance check of rho's assumption.

Choices where SPEC is silent:

- The originals and all variant texts are routed in ONE batch (originals first), encoded by the encoder fitted
  on the training texts only, so a variant lives in the same space as its original, and a seeded random router
  draws its original and variant choices independently (a separate batch would repeat its first draws).
- Bounds that read the outcomes of the queries they route (``oracle``, ``oracle-p``) are skipped and listed
  under ``skipped``: the variants have no test labels to reveal. Their robustness is what the invariance check
  measures (does the optimal actor change?).
- "The optimal actor" of a query is its SET of optimal actors, SPEC 4's selection vector (actors scoring at least
  95% of the row maximum; every actor when none scores above 0): binary scores tie often, and an arg-max would
  turn every tie into an arbitrary pick. A perturbation changes the optimal actor when that set changes. Sets are
  encoded as integer bit masks (m <= 62 actors) so the metrics' invariance functions apply. The arg-max
  convention (SPEC 4's oracle tie-break: fastest, then cheapest, then first; latency and cost only where both the
  originals and the variants have them) is reported beside it as ``changed_share_argmax``.
- A variant's outcome is known when the outcomes table has a row for its key (``qid#level#j``) with every
  actor's score observed; other variants count as unknown (never as unchanged). ``perturbed_accuracy`` is the
  mean score of the router's chosen actor over the variants with known outcomes.
- Intervals: one bootstrap resampling of test queries per replicate, shared by every statistic of a run; each
  statistic is a ratio of sums over the resampled queries (e.g. rho: sum of rho_i over queries with variants /
  their count), so its point value is exactly the metric's. A replicate where a ratio is 0/0 is left out; an
  interval that does not contain its own estimate is reported as undefined (null), as in ``evaluate``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from routerlab._spec import Interval as Range
from routerlab.data.feedback import as_feedback
from routerlab.data.provenance import Provenance
from routerlab.data.splits import Split, make_split
from routerlab.data.table import Queries, RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.features.registry import Encoder
from routerlab.metrics.bootstrap import percentile_interval, resample_indices
from routerlab.metrics.robustness import invariance_by_level, invariance_check, rho, rho_by_level, rho_per_actor
from routerlab.metrics.selection import collapsed, oracle_choice, selection_shares, selection_vector
from routerlab.perturb.base import DEFAULT_ASK, LEVELS, MAX_VARIANTS, PerturbationSet
from routerlab.progress import task, track
from routerlab.protocols.base import (
    ENCODER_HELP,
    NBOOT,
    NBOOT_HELP,
    SPLIT_HELP,
    MetricRecord,
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
from routerlab.protocols.full import (
    Bench,
    RouterLike,
    _class_path,
    applicable_routers,
    complete_rows,
    fit_router,
    interval,
    make_bench,
    router_label,
)
from routerlab.routers.base import Router

UNTESTED_NOTE = ("untested: no outcomes of the variants (run routerlab collect --variants FILE ... and pass "
                 "--outcomes)")
"""What the result says about rho's assumption when the variants' outcomes are unknown (SPEC 3: never pretend)."""

MAX_SET_ACTORS = 62
"""Optimal-actor sets are int64 bit masks: at most this many actors."""

Interval = tuple[float, float]
NAN_INTERVAL: Interval = (math.nan, math.nan)


@dataclass
class RobustnessResult:
    """One router's robustness on the test split and its variants (SPEC 3). ``choice`` (n,) and
    ``perturbed_choice`` (n, P, -1 = no such variant) are kept for reports, not written by :meth:`to_dict`."""

    router: str
    spec: str
    params: dict[str, Any]
    rho: float
    rho_ci: Interval
    rho_by_level: dict[str, float]
    rho_by_level_ci: dict[str, Interval]
    rho_by_actor: dict[str, float]
    rho_by_actor_ci: dict[str, Interval]
    accuracy: float
    accuracy_ci: Interval
    perturbed_accuracy: float | None
    perturbed_accuracy_ci: Interval | None
    perturbed_accuracy_by_level: dict[str, float] | None
    perturbed_accuracy_by_level_ci: dict[str, Interval] | None
    invariance: dict[str, Any]
    selection: dict[str, float]
    collapsed: bool
    choice: npt.NDArray[np.intp]
    perturbed_choice: npt.NDArray[np.intp]
    fit_seconds: float
    score_seconds: float
    diagnostics: dict[str, Any] | None = None
    router_class: str | None = None

    def weakest_level(self) -> str | None:
        """The level with the lowest rho (first in level order on ties); None without levels."""
        known = [(v, lv) for lv, v in self.rho_by_level.items() if not math.isnan(v)]
        return min(known, key=lambda t: t[0])[1] if known else None

    def to_dict(self) -> dict[str, Any]:
        """The issue's fields, values as plain numbers (NaN stays NaN here: writers turn it into null)."""
        out: dict[str, Any] = {
            "router": self.spec, "name": self.router, "params": self.params,
            "rho": self.rho, "rho_ci": list(self.rho_ci),
            "rho_by_level": dict(self.rho_by_level),
            "rho_by_level_ci": {k: list(v) for k, v in self.rho_by_level_ci.items()},
            "rho_by_actor": dict(self.rho_by_actor),
            "rho_by_actor_ci": {k: list(v) for k, v in self.rho_by_actor_ci.items()},
            "accuracy": self.accuracy, "accuracy_ci": list(self.accuracy_ci),
            "perturbed_accuracy": self.perturbed_accuracy,
            "perturbed_accuracy_ci": None if self.perturbed_accuracy_ci is None else list(self.perturbed_accuracy_ci),
            "perturbed_accuracy_by_level": self.perturbed_accuracy_by_level,
            "perturbed_accuracy_by_level_ci": None if self.perturbed_accuracy_by_level_ci is None else
            {k: list(v) for k, v in self.perturbed_accuracy_by_level_ci.items()},
            "invariance": self.invariance,
            "selection": self.selection, "collapsed": self.collapsed,
            "fit_seconds": round(self.fit_seconds, 4), "score_seconds": round(self.score_seconds, 4),
        }
        if self.diagnostics is not None:
            out["diagnostics"] = self.diagnostics
        if self.router_class is not None:
            out["class"] = self.router_class
        return out


@dataclass
class Robustness:
    """Everything one robustness run produced, with what is needed to reproduce it (SPEC 3, 7)."""

    provenance: Provenance
    perturbations: dict[str, Any]
    results: list[RobustnessResult]
    levels: list[str]
    p: int
    n_test: int
    actor_names: list[str]
    invariance_tested: bool
    test_ids: npt.NDArray[np.object_]
    column_levels: list[str]
    excluded_test_queries: int = 0
    queries_without_variants: int = 0
    skipped: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def data(self) -> dict[str, Any]:
        return self.provenance.data

    @property
    def uniform_rho(self) -> float:
        """rho of a uniform random router in expectation: 1/N (SPEC 3's lower anchor)."""
        return 1.0 / len(self.actor_names)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            **self.provenance.to_dict(),
            "perturbations": self.perturbations,
            "levels": list(self.levels), "p": self.p, "n_test": self.n_test, "actors": list(self.actor_names),
            "excluded_test_queries": self.excluded_test_queries,
            "queries_without_variants": self.queries_without_variants,
            "invariance_tested": self.invariance_tested,
            "results": [r.to_dict() for r in self.results],
        }
        if not self.invariance_tested:
            out["invariance_note"] = UNTESTED_NOTE
        if self.skipped:
            out["skipped"] = dict(self.skipped)
        if self.notes:
            out["notes"] = list(self.notes)
        return out


# ----------------------------------------------------------------------------------------------- the run
def robustness(
    table: RoutingTable,
    routers: Sequence[RouterLike],
    variants: PerturbationSet,
    *,
    split: str | Split = "given",
    encoder: str | Encoder = "tfidf",
    seed: int = 0,
    n_boot: int = 1000,
    outcomes: RoutingTable | None = None,
    backend: Any | None = None,
    cache_dir: str | None = None,
) -> Robustness:
    """Fit each router on the train split as ``evaluate`` does, route the test queries and their ``variants``
    in one batch, and report rho (overall, per level, per actor) with 95% bootstrap intervals, accuracy, and,
    when ``outcomes`` (a table whose query ids are variant keys ``qid#level#j``) is given, the perturbed
    accuracy and the invariance check (module docstring). ``backend`` is attached to routers that need an LLM
    backend and were not given one."""
    if not routers:
        raise UsageError("name at least one router, e.g. --routers best-single,random,knn")
    if not isinstance(variants, PerturbationSet):
        raise UsageError(f"variants must be a PerturbationSet (routerlab.perturb), got {type(variants).__name__}")
    if n_boot < 1:
        raise UsageError(f"n_boot must be >= 1, got {n_boot}")
    from routerlab.features import encode_pair, get_encoder
    from routerlab.features.encoding import FitCache, encode

    enc = get_encoder(encoder)
    if not enc.cacheable:
        raise UsageError(f"encoder {enc.spec!r} reads precomputed vectors, which the variant texts do not have; "
                         "use a text encoder (tfidf, minilm)")
    sp = split if isinstance(split, Split) else make_split(table, split, seed)
    train, test = sp.apply(table)
    chosen, skipped = applicable_routers(routers, train, seed, False, backend=backend)
    kept: list[tuple[str, Router]] = []
    for spec, router in chosen:
        if router.uses_test_labels:
            skipped[spec] = ("a bound that reads the outcomes of the queries it routes; the variants have no test "
                             "labels (the invariance check measures whether the optimal actor changes)")
        else:
            kept.append((spec, router))
    if not kept:
        raise UsageError(f"no router left to measure: {skipped}")
    fits = FitCache()
    features = encode_pair(train, test, enc, cache_dir, fits=fits)
    bench = make_bench(sp, train, test, encoder=enc, cache_dir=cache_dir, features=features)
    test_ids = bench.test.queries.ids
    ids = [str(q) for q in test_ids.tolist()]
    used = variants.for_queries(ids)
    if not len(used):
        raise UsageError(f"none of the {len(variants)} variants belongs to one of the {len(ids)} evaluated test "
                         "queries of this split: were they made for another split or table?")
    columns, grid = used.grid(ids)
    n = bench.test.n_queries
    with task(f"robustness: encoding {len(used)} variant texts"):
        fvar = encode(_variant_table(used, bench), enc, cache_dir, fit_on=train if enc.needs_fit else None,
                      fits=fits)
    batch = _batch(bench, used, fvar)
    truth = _Truth.make(bench, used, grid, outcomes)
    labels = {router_label(r) for r in routers if not isinstance(r, str)}
    feedback = as_feedback(train)
    results = []
    for spec, router in track(kept, "robustness: router", unit="router", label=lambda item: item[0]):
        fit_seconds = fit_router(router, feedback, bench.ftrain, bench)
        t0 = time.perf_counter()
        routed = router.route(batch)
        score_seconds = time.perf_counter() - t0
        choice = np.asarray(routed.choice[:n], dtype=np.intp)
        pert = np.full(grid.shape, -1, dtype=np.intp)
        have = grid >= 0
        pert[have] = routed.choice[n + grid[have]]
        report = getattr(router, "diagnostics", None)
        diag = dict(report()) if callable(report) else None
        results.append(_score(spec, router, choice, pert, columns, bench, truth, seed=seed, n_boot=n_boot,
                              fit_seconds=fit_seconds, score_seconds=score_seconds, diagnostics=diag,
                              router_class=_class_path(router) if spec in labels else None))
    levels = used.generated_levels
    provenance = Provenance.of(table, bench.split, seed=seed, encoder=bench.ftrain.encoder,
                               routers=[router_label(r) for r in routers], split_extra={"n_test": n})
    described = {**variants.describe(), "n_variants_used": len(used),
                 "n_variants_other_queries": len(variants) - len(used)}
    notes = list(bench.notes)
    missing = int((~have_any(grid)).sum())
    if missing:
        notes.append(f"{missing} evaluated test queries have no variant and are left out of every rho")
    if truth.notes:
        notes.extend(truth.notes)
    return Robustness(provenance, described, results, levels, used.p, n, list(bench.test.actor_names),
                      truth.tested, test_ids, columns, bench.excluded, missing, skipped, notes)


def have_any(grid: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
    """Per query: does it have at least one variant?"""
    return np.asarray((grid >= 0).any(axis=1)) if grid.shape[1] else np.zeros(grid.shape[0], dtype=bool)


def _variant_table(used: PerturbationSet, bench: Bench) -> RoutingTable:
    """The variant texts as a table without outcomes (what ``encode`` reads): ids = variant keys."""
    row = {str(q): i for i, q in enumerate(bench.test.queries.ids.tolist())}
    src = np.array([row[v.query_id] for v in used.variants], dtype=np.intp)
    q = bench.test.queries
    return RoutingTable.from_arrays(np.full((len(used), bench.test.n_actors), np.nan, dtype=np.float32),
                                    actors=bench.test.actors, query_ids=[v.key for v in used.variants],
                                    text=[v.text for v in used.variants], dataset=q.dataset[src].tolist(),
                                    split=q.split[src].tolist())


def _batch(bench: Bench, used: PerturbationSet, fvar: Features) -> Features:
    """Originals then variants as one set of features: variant rows copy their original's dataset, split and
    metadata and carry their own key and text."""
    q = bench.test.queries
    row = {str(x): i for i, x in enumerate(q.ids.tolist())}
    src = np.array([row[v.query_id] for v in used.variants], dtype=np.intp)
    vq = q.take(src)
    keys = np.array([v.key for v in used.variants], dtype=object)
    texts = np.array([v.text for v in used.variants], dtype=object)
    queries = Queries(ids=np.concatenate([q.ids, keys]), text=np.concatenate([q.text, texts]),
                      dataset=np.concatenate([q.dataset, vq.dataset]), split=np.concatenate([q.split, vq.split]),
                      extra={k: np.concatenate([v, vq.extra[k]]) for k, v in q.extra.items()}, visible=q.visible)
    queries.check_unique()
    return Features.of(np.vstack([bench.ftest.X, fvar.X]), queries, bench.test.actors, bench.ftest.encoder)


# ------------------------------------------------------------------------------------ outcomes and optima
@dataclass(frozen=True)
class _Truth:
    """What the variants' outcomes say, laid out on the (n, P) grid: scores of each cell's variant
    (NaN rows where unknown), the optimal-actor sets as bit masks and the oracle's arg-max (-1 = unknown), and
    the same for the original test queries."""

    tested: bool
    score: npt.NDArray[np.float64] | None  # (n, P, m)
    opt_set: npt.NDArray[np.int64] | None  # (n, P)
    opt_arg: npt.NDArray[np.intp] | None  # (n, P)
    orig_set: npt.NDArray[np.int64] | None  # (n,)
    orig_arg: npt.NDArray[np.intp] | None  # (n,)
    notes: list[str]

    @classmethod
    def make(cls, bench: Bench, used: PerturbationSet, grid: npt.NDArray[np.intp],
             outcomes: RoutingTable | None) -> _Truth:
        if outcomes is None:
            return cls(False, None, None, None, None, None, [])
        names = list(bench.test.actor_names)
        m = len(names)
        if m > MAX_SET_ACTORS:
            raise UsageError(f"the invariance check encodes optimal-actor sets as bit masks: at most "
                             f"{MAX_SET_ACTORS} actors, this table has {m}")
        have = {str(a): j for j, a in enumerate(outcomes.actor_names)}
        lacking = [a for a in names if a not in have]
        if lacking:
            raise UsageError(f"the outcomes table lacks actor(s) {', '.join(map(repr, lacking))} of the routing "
                             f"table; it has {', '.join(map(repr, have))}")
        cols = np.array([have[a] for a in names], dtype=np.intp)
        row = {str(q): i for i, q in enumerate(outcomes.queries.ids.tolist())}
        keys = [v.key for v in used.variants]
        at = np.array([row.get(k, -1) for k in keys], dtype=np.intp)
        vscore = np.full((len(keys), m), np.nan)
        found = at >= 0
        vscore[found] = np.asarray(outcomes.score, dtype=np.float64)[at[found]][:, cols]
        complete = found & ~np.isnan(vscore).any(axis=1)
        notes = []
        if not complete.any():
            notes.append("the outcomes table has no complete row for any variant of the evaluated test queries "
                         "(its ids must be variant keys qid#level#j)")
        elif int(found.sum()) > int(complete.sum()):
            notes.append(f"{int(found.sum() - complete.sum())} variants have outcomes with an unobserved actor "
                         "and count as unknown")
        lat_o = _rows_known(outcomes.latency_s, at, cols)
        cost_o = _rows_known(outcomes.cost_usd, at, cols)
        # SPEC 4's tie-break reads latency and cost only where originals and variants both have them
        use_lat = lat_o if bench.latency is not None else None
        use_cost = cost_o if bench.cost is not None else None
        v_set = np.full(len(keys), -1, dtype=np.int64)
        v_arg = np.full(len(keys), -1, dtype=np.intp)
        if complete.any():
            v_set[complete] = set_masks(vscore[complete])
            v_arg[complete] = oracle_choice(vscore[complete], None if use_lat is None else use_lat[complete],
                                            None if use_cost is None else use_cost[complete])
        s = np.asarray(bench.test.score, dtype=np.float64)
        o_set = set_masks(s)
        o_arg = oracle_choice(s, None if use_lat is None else bench.latency,
                              None if use_cost is None else bench.cost)
        have_cell = grid >= 0
        safe = np.where(have_cell, grid, 0)
        score = np.where(have_cell[..., None], vscore[safe], np.nan)
        opt_set = np.where(have_cell, v_set[safe], -1)
        opt_arg = np.where(have_cell, v_arg[safe], -1)
        return cls(True, score, opt_set, opt_arg.astype(np.intp), o_set, o_arg, notes)


def _rows_known(matrix: npt.NDArray[Any] | None, at: npt.NDArray[np.intp],
                cols: npt.NDArray[np.intp]) -> npt.NDArray[np.float64] | None:
    """``matrix`` rows ``at`` (columns ``cols``) when every found row is fully known, else None."""
    if matrix is None:
        return None
    out = np.full((at.size, cols.size), np.nan)
    found = at >= 0
    out[found] = np.asarray(matrix, dtype=np.float64)[at[found]][:, cols]
    return None if np.isnan(out[found]).any() else out


def set_masks(score: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Each row's optimal-actor set (SPEC 4's selection vector) as an int64 bit mask: bit k = actor k."""
    sel = selection_vector(score)
    if sel.shape[1] > MAX_SET_ACTORS:
        raise UsageError(f"optimal-actor sets as bit masks: at most {MAX_SET_ACTORS} actors, got {sel.shape[1]}")
    weights = np.left_shift(np.int64(1), np.arange(sel.shape[1], dtype=np.int64))
    return np.asarray(sel.astype(np.int64) @ weights, dtype=np.int64)


# ------------------------------------------------------------------------------------------ per router
def _score(spec: str, router: Router, choice: npt.NDArray[np.intp], pert: npt.NDArray[np.intp], columns: list[str],
           bench: Bench, truth: _Truth, *, seed: int, n_boot: int, fit_seconds: float, score_seconds: float,
           diagnostics: dict[str, Any] | None, router_class: str | None) -> RobustnessResult:
    """Every number of one router (SPEC 3) with its interval from one shared bootstrap (module docstring)."""
    names = list(bench.test.actor_names)
    n, m = bench.test.n_queries, bench.test.n_actors
    labels = np.asarray(columns)
    levels = list(dict.fromkeys(columns))
    exists = pert >= 0
    same = (pert == choice[:, None]) & exists
    ratios: dict[str, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]] = {}

    def rate(hit: npt.NDArray[np.bool_], use: npt.NDArray[np.bool_]) -> tuple[Any, Any]:
        """(per-query rate over the columns ``use``, 0 where none; 1 where the query counts)."""
        cnt = use.sum(axis=1).astype(np.float64)
        val = np.divide((hit & use).sum(axis=1), cnt, out=np.zeros(n), where=cnt > 0)
        return val, (cnt > 0).astype(np.float64)

    rho_i, has = rate(same, exists)
    ratios["rho"] = (rho_i, has)
    for lv in levels:
        ratios[f"level:{lv}"] = rate(same, exists & (labels == lv)[None, :])
    for k, a in enumerate(names):
        ratios[f"actor:{a}"] = (rho_i, has * (choice == k))
    rows = np.arange(n)
    ratios["accuracy"] = (np.asarray(bench.test.score, dtype=np.float64)[rows, choice], np.ones(n))

    inv: dict[str, Any] = {"tested": False, "note": UNTESTED_NOTE}
    pacc = pacc_ci = None
    pacc_lv: dict[str, float] | None = None
    pacc_lv_ci: dict[str, Interval] | None = None
    checks: dict[str, Any] = {}
    if truth.tested:
        assert truth.score is not None and truth.opt_set is not None and truth.opt_arg is not None
        assert truth.orig_set is not None and truth.orig_arg is not None
        known = truth.opt_set >= 0
        safe = np.where(exists, pert, 0)
        chosen = np.take_along_axis(np.nan_to_num(truth.score), safe[..., None], axis=2)[..., 0]
        changed = known & (truth.opt_set != truth.orig_set[:, None])
        invariant = known & ~changed
        for key, mask in [("", np.ones(labels.size, dtype=bool)), *[(f":{lv}", labels == lv) for lv in levels]]:
            use = known & mask[None, :]
            cnt = use.sum(axis=1).astype(np.float64)
            # per-query means weighted by the query's known variants: a mean over variants, as the metric
            ratios["pacc" + key] = (_per(np.where(use, chosen, 0.0).sum(axis=1), cnt), cnt)
            ratios["changed" + key] = (_per((changed & use).sum(axis=1), cnt), cnt)
            ratios["rho_inv" + key] = rate(same, invariant & mask[None, :])
        checks["all"] = invariance_check(truth.orig_set, truth.opt_set, choice, pert)
        checks.update(invariance_by_level(truth.orig_set, truth.opt_set, choice, pert, columns))
        arg_all = invariance_check(truth.orig_arg, truth.opt_arg, choice, pert)
        arg_lv = invariance_by_level(truth.orig_arg, truth.opt_arg, choice, pert, columns)

    cis = ratio_intervals(ratios, n, n_boot, seed)
    point = {k: _ratio(v, w) for k, (v, w) in ratios.items()}

    rho_all = rho(choice, pert) if exists.any() else math.nan
    by_level = rho_by_level(choice, pert, columns) if columns else {}
    by_actor_vals = rho_per_actor(choice, pert, m)
    by_actor = {a: float(by_actor_vals[k]) for k, a in enumerate(names)}
    by_actor_ci = {a: (interval(by_actor[a], *cis[f"actor:{a}"]) if point[f"actor:{a}"] == point[f"actor:{a}"]
                       else NAN_INTERVAL) for a in names}
    acc = float(point["accuracy"])
    if truth.tested:
        pacc = point["pacc"]
        pacc_ci = interval(pacc, *cis["pacc"])
        pacc_lv = {lv: point[f"pacc:{lv}"] for lv in levels}
        pacc_lv_ci = {lv: interval(pacc_lv[lv], *cis[f"pacc:{lv}"]) for lv in levels}

        def block(key: str, check: Any, arg: Any) -> dict[str, Any]:
            return {"n_perturbations": check.n_perturbations, "n_known": check.n_known,
                    "changed_share": check.changed_share,
                    "changed_share_ci": list(interval(check.changed_share, *cis["changed" + key])),
                    "changed_share_argmax": arg.changed_share, "rho_all": check.rho_all,
                    "rho_invariant": check.rho_invariant,
                    "rho_invariant_ci": list(interval(check.rho_invariant, *cis["rho_inv" + key]))}

        inv = {"tested": True, "optimal": "set (SPEC 4 selection vector; argmax with oracle tie-break beside it)",
               **block("", checks["all"], arg_all),
               "by_level": {lv: block(f":{lv}", checks[lv], arg_lv[lv]) for lv in levels}}
    shares = selection_shares(choice, m)
    return RobustnessResult(
        router=router.name, spec=spec, params={**router.params, "seed": router.seed},
        rho=rho_all, rho_ci=interval(rho_all, *cis["rho"]),
        rho_by_level=by_level, rho_by_level_ci={lv: interval(by_level[lv], *cis[f"level:{lv}"]) for lv in levels},
        rho_by_actor=by_actor, rho_by_actor_ci=by_actor_ci,
        accuracy=acc, accuracy_ci=interval(acc, *cis["accuracy"]),
        perturbed_accuracy=pacc, perturbed_accuracy_ci=pacc_ci,
        perturbed_accuracy_by_level=pacc_lv, perturbed_accuracy_by_level_ci=pacc_lv_ci,
        invariance=inv,
        selection={a: float(s) for a, s in zip(names, shares, strict=True) if s > 0},
        collapsed=bool(collapsed(choice, m)), choice=choice, perturbed_choice=pert,
        fit_seconds=fit_seconds, score_seconds=score_seconds, diagnostics=diagnostics, router_class=router_class,
    )


def _per(total: npt.ArrayLike, count: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """total / count per query, 0 where count is 0."""
    return np.divide(np.asarray(total, dtype=np.float64), count, out=np.zeros(count.shape), where=count > 0)


def _ratio(values: npt.NDArray[np.float64], weights: npt.NDArray[np.float64]) -> float:
    den = float(weights.sum())
    return float((values * weights).sum() / den) if den > 0 else math.nan


def ratio_intervals(ratios: dict[str, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]], n: int,
                    n_boot: int, seed: int) -> dict[str, Interval]:
    """Percentile 95% intervals of ratio statistics sum(v_i w_i) / sum(w_i) over bootstrap resamples of the n
    queries (SPEC 7), all from the same resamples; a 0/0 replicate is left out."""
    keys = list(ratios)
    if not keys:
        return {}
    W = np.column_stack([ratios[k][1] for k in keys]).astype(np.float64)
    VW = np.column_stack([ratios[k][0] for k in keys]).astype(np.float64) * W
    parts = []
    for idx in resample_indices(n, n_boot, seed):
        rows = idx.shape[0]
        offsets = (np.arange(rows, dtype=np.intp) * n)[:, None]
        counts = np.bincount((idx + offsets).ravel(), minlength=rows * n).reshape(rows, n).astype(np.float64)
        num, den = counts @ VW, counts @ W
        parts.append(np.divide(num, den, out=np.full(num.shape, np.nan), where=den > 0))
    reps = np.concatenate(parts, axis=0)
    return {k: percentile_interval(reps[:, j]) for j, k in enumerate(keys)}


# ----------------------------------------------------------------------------------- the registered protocol
DEFAULT_P = 5
"""Variants per query per level when none is asked for (and no variants file is given)."""


class NoVariants(UsageError):
    """No level gave a variant of any evaluated test query; ``skipped`` says why, per level."""

    def __init__(self, message: str, skipped: dict[str, str]) -> None:
        super().__init__(message)
        self.skipped = skipped


def _check_levels(value: tuple[str, ...]) -> tuple[str, ...]:
    """Level names (``all`` alone = the paper's five), each a registered level."""
    from routerlab.perturb.base import level_names

    if value == ("all",):
        return LEVELS
    known = level_names()
    for lv in value:
        if lv not in known:
            raise UsageError(f"unknown level {lv!r}; known: {', '.join(known)}, or all")
    return value


def _check_path(value: str) -> str:
    if not Path(value).exists():
        raise UsageError(f"{value}: no such file or directory")
    return value


def _check_backend(value: str) -> str:
    """A backend spec ``KIND:MODEL[,key=value...]``, parsed (never loaded) so a bad one fails before any work."""
    from routerlab.llm.base import parse_backend_spec

    try:
        parse_backend_spec(value, option="")
    except UsageError as exc:  # its messages start with the option, which the settings layer puts first
        raise UsageError(str(exc).strip()) from None
    return value


def _check_cache_dir(value: str) -> str:
    if Path(value).exists() and not Path(value).is_dir():
        raise UsageError(f"{value}: is a file, not a directory")
    return value


@dataclass(frozen=True)
class RobustnessSettings(ProtocolSettings):
    """``routerlab robustness``'s settings: which variants (generated at some levels, or read from a file), the
    variants' outcomes for the invariance check, the LLM backend of the LLM levels, and the evaluation's split,
    encoder and resamples."""

    levels: tuple[str, ...] | None = setting(
        None, "perturbation levels: character, word, syntax, paraphrase, rambling, or all; none = all (with "
              "variants_file: every level of the file, else only these)", check=_check_levels)
    variants: int | None = setting(
        None, f"variants per query per level, p; none = {DEFAULT_P} (with variants_file: every variant, else the "
              "first p)", Range(int, 1, MAX_VARIANTS))
    variants_file: str | None = setting(
        None, "bring your own variants (routerlab perturb's JSON lines) instead of generating them",
        check=_check_path, path=True)
    outcomes: str | None = setting(
        None, "a table of the variants' outcomes (routerlab collect --variants): tests the invariance assumption",
        check=_check_path, path=True)
    reviewed: str | None = setting(
        None, "a review file a person marked (routerlab perturb --review N FILE.csv): variants marked changed are "
              "dropped and each level's share marked changed is reported", check=_check_path, path=True)
    backend: str | None = setting(
        None, "LLM backend KIND:MODEL[,key=value...] that writes the paraphrase and rambling levels (without it "
              "they are not generated) and that the prompted router asks, e.g. local:smollm2-135m,threads=1",
        check=_check_backend)
    ask: int = setting(DEFAULT_ASK, "rewrites the LLM is asked for per query and level (paraphrase, rambling; the "
                                    "paper asks 10 and keeps distinct ones); fewer is cheaper on a CPU",
                       Range(int, 1, 100))
    cache_dir: str | None = setting(
        None, "call cache directory of the backend (default: $ROUTERLAB_CACHE_DIR/llm or ~/.cache/routerlab/llm); "
              "it changes no number", check=_check_cache_dir, path=True)
    max_queries: int | None = setting(
        None, "perturb at most this many evaluable test queries, a seeded sample (none = every test query)",
        Range(int, 1, None))
    skip_unavailable_levels: bool = setting(
        False, "leave out (and list) a level that cannot be generated here (its perturber fails, e.g. WordNet "
               "missing, or an LLM level without backend) instead of stopping the run")
    encoder: str = setting("tfidf", ENCODER_HELP, check=check_encoder)
    split: str = setting("given", SPLIT_HELP, check=check_split)
    n_boot: int = setting(1000, NBOOT_HELP, NBOOT)

    def validate(self) -> None:
        from routerlab.perturb.base import level_class

        if self.variants_file is None and self.backend is None and not self.skip_unavailable_levels:
            names = self.levels or LEVELS
            if all(not level_class(lv).offline for lv in names):
                raise SettingError("levels", f"{','.join(names)}: written by an LLM, and no backend is given (e.g. "
                                             "local:smollm2-135m,threads=1), or add an offline level: character, "
                                             "word, syntax")


def routers_wanting_backend(specs: Sequence[RouterLike]) -> list[str]:
    """The routers that route by asking an LLM (``needs_backend``, the ``prompted`` one) and name no backend of
    their own in their spec: they take the run's ``backend``."""
    from routerlab.routers.base import get_router

    out = []
    for item in specs:
        router = get_router(item) if isinstance(item, str) else item
        if getattr(type(router), "needs_backend", False) and not router.params.get("backend") \
                and not router.has_backend():
            out.append(router_label(item))
    return out


def check_backend_for(routers: Sequence[RouterLike], settings: RobustnessSettings) -> list[str]:
    """The routers that need the run's backend; a SettingError naming ``backend`` when some do and none is given
    (checked before any data is read)."""
    wanting = routers_wanting_backend(routers)
    if wanting and settings.backend is None:
        raise SettingError("backend", f"router {', '.join(wanting)} asks an LLM: give one (KIND:MODEL, e.g. "
                                      "local:smollm2-135m,threads=1) or prompted:backend=KIND:MODEL")
    return wanting


def filter_variants(pset: PerturbationSet, levels: Sequence[str] | None, p: int | None, source: str
                    ) -> PerturbationSet:
    """A variants file narrowed by ``levels`` (levels it lacks are an error) and ``p`` (variant numbers below p
    kept). Variant numbers are renumbered 0.. per query and level so the grid has no gaps."""
    if levels is not None:
        missing = [lv for lv in levels if lv not in pset.levels]
        if missing:
            raise SettingError("variants_file", f"{source} has no variant at level {', '.join(missing)} (it has "
                                                f"{', '.join(pset.levels)})")
    if p is None:
        return pset
    numbers: dict[tuple[str, str], list[int]] = {}
    for v in pset.variants:
        numbers.setdefault((v.query_id, v.level), []).append(v.variant)
    rank = {(q, lv, j): r for (q, lv), js in numbers.items() for r, j in enumerate(sorted(js))}
    # file order kept: a seeded random router's draws follow the order the variants are routed in
    kept = [replace(v, variant=rank[(v.query_id, v.level, v.variant)]) for v in pset.variants
            if rank[(v.query_id, v.level, v.variant)] < p]
    stats = {lv: {"queries": len({v.query_id for v in kept if v.level == lv}),
                  "variants": sum(v.level == lv for v in kept)} for lv in pset.levels}
    return replace(pset, variants=tuple(kept), p=min(p, pset.p), stats=stats)


def check_variants_cover(pset: PerturbationSet, table: RoutingTable, positions: Any, source: str) -> None:
    """A variants file must hold variants of at least one test query of the table (else nothing can be measured)."""
    test_ids = {str(x) for x in table.queries.ids[positions].tolist()}
    if not any(v.query_id in test_ids for v in pset.variants):
        raise SettingError("variants_file", f"{source}: none of its {len(pset.variants)} variants is of a test "
                                            f"query of {table.name} ({len(test_ids)} test queries); check the split "
                                            "and the table")


def sample_test(table: RoutingTable, sp: Split, max_queries: int | None, seed: int) -> tuple[Split, bool]:
    """With ``max_queries``: the split with its test side cut to the evaluable queries (every actor's score
    observed) and, when more than ``max_queries`` remain, a seeded sample of them (positions kept in order); and
    whether it sampled. Without: the split as it is."""
    if max_queries is None:
        return sp, False
    test = sp.test[complete_rows(table.select_queries(sp.test))]
    sampled = test.size > max_queries
    if sampled:
        test = test[np.sort(np.random.default_rng(seed).choice(test.size, max_queries, replace=False))]
    return Split(sp.train, test, sp.kind, sp.seed, dict(sp.params)), sampled


def make_variants(table: RoutingTable, positions: Any, levels: Sequence[str], p: int, seed: int, backend: Any,
                  ask: int, skip_unavailable: bool) -> tuple[PerturbationSet, dict[str, str]]:
    """The variants of the queries at ``positions`` at every level, and the levels left out with why: none
    unless ``skip_unavailable``, where a level that fails or makes no variant is left out instead of stopping
    the run (the set then holds only the levels made)."""
    from routerlab.perturb.base import perturb_queries

    if not skip_unavailable:
        pset = perturb_queries(table, positions, levels, p, seed, backend, ask)
        if not len(pset):
            raise NoVariants(f"no variant could be made of the {len(positions)} test queries at level "
                             f"{', '.join(levels)}: {pset.describe()['stats']}", dict(pset.not_generated))
        return pset, {}
    skipped: dict[str, str] = {}
    sets: list[PerturbationSet] = []
    for level in levels:
        try:
            made = perturb_queries(table, positions, [level], p, seed, backend, ask)
        except Exception as exc:  # a missing or broken level is reported, never fatal here
            skipped[level] = f"{type(exc).__name__}: {exc}".strip().rstrip(".")
            continue
        if not len(made):
            skipped[level] = made.not_generated.get(level, "no variant could be made for any query")
            continue
        sets.append(made)
    if not sets:
        raise NoVariants("no perturbation level could be generated: " + "; ".join(
            f"{k}: {v}" for k, v in skipped.items()), skipped)
    return PerturbationSet(tuple(v for s in sets for v in s.variants), tuple(lv for s in sets for lv in s.levels),
                           p, seed, {}, {k: v for s in sets for k, v in s.stats.items()},
                           {k: v for s in sets for k, v in s.settings.items()}), skipped


def robustness_records(rob: Robustness) -> list[MetricRecord]:
    """The metric records of a robustness run, per router: ``rho`` (whole, ``level=L``, ``actor=A`` for the actors
    it routed test queries to) and
    ``accuracy`` with their 95% intervals; with the variants' outcomes, ``perturbed_accuracy`` and the invariance
    check (``changed_share``, ``changed_share_argmax``, ``rho_all``, ``rho_invariant``), whole and per level."""
    out: list[MetricRecord] = []
    for r in rob.results:
        out.append(MetricRecord.of(r.spec, "rho", r.rho, r.rho_ci))
        out += [MetricRecord.of(r.spec, "rho", v, r.rho_by_level_ci.get(lv), f"level={lv}")
                for lv, v in r.rho_by_level.items()]
        # per actor only where the router sent queries: SPEC 3's 0 for an actor it never chose is no measurement
        out += [MetricRecord.of(r.spec, "rho", v, r.rho_by_actor_ci.get(a), f"actor={a}")
                for a, v in r.rho_by_actor.items() if r.selection.get(a, 0.0) > 0]
        out.append(MetricRecord.of(r.spec, "accuracy", r.accuracy, r.accuracy_ci))
        if r.perturbed_accuracy is not None:
            out.append(MetricRecord.of(r.spec, "perturbed_accuracy", r.perturbed_accuracy, r.perturbed_accuracy_ci))
            out += [MetricRecord.of(r.spec, "perturbed_accuracy", v, (r.perturbed_accuracy_by_level_ci or {}).get(lv),
                                    f"level={lv}") for lv, v in (r.perturbed_accuracy_by_level or {}).items()]
        inv = r.invariance
        if inv.get("tested"):
            for where, block in [("", inv), *((f"level={lv}", b) for lv, b in inv.get("by_level", {}).items())]:
                out.append(MetricRecord.of(r.spec, "changed_share", block["changed_share"],
                                           block["changed_share_ci"], where))
                out.append(MetricRecord.of(r.spec, "changed_share_argmax", block["changed_share_argmax"], None,
                                           where))
                out.append(MetricRecord.of(r.spec, "rho_all", block["rho_all"], None, where))
                out.append(MetricRecord.of(r.spec, "rho_invariant", block["rho_invariant"],
                                           block["rho_invariant_ci"], where))
    return out


@register_protocol("robustness")
class RoutingRobustness(Protocol):
    summary = ("rho: the share of a test query's meaning-preserving variants routed like the query, per router, "
               "level and actor, with 95% CIs; with the variants' outcomes, the invariance check")
    spec = "SPEC 3, 7"
    Settings = RobustnessSettings

    def run(self, table: RoutingTable, settings: Any, seed: int = 0, routers: Sequence[Any] = (),
            context: RunContext | None = None) -> Result:
        """Variants of the test queries (generated, or read from ``variants_file`` and narrowed by ``levels`` and
        ``variants``), then :func:`robustness`; the variants used are the artifact ``variants`` (a
        :class:`PerturbationSet`) and the levels left out ``skipped_levels``."""
        s: RobustnessSettings = settings
        wanting = check_backend_for(list(routers), s)
        sp, sampled = sample_test(table, make_split(table, s.split, seed), s.max_queries, seed)
        positions = np.sort(sp.test)
        pset: PerturbationSet | None = None
        names = list(s.levels) if s.levels is not None else None
        if s.variants_file is not None:
            from routerlab.perturb.files import read_variants

            pset = filter_variants(read_variants(s.variants_file, levels=names), names, s.variants, s.variants_file)
            check_variants_cover(pset, table, positions, s.variants_file)
            llm = False
        else:
            names = names if names is not None else list(LEVELS)
            from routerlab.perturb.base import level_class

            llm = any(not level_class(lv).offline for lv in names)
        outcome_table = None
        if s.outcomes is not None:
            from routerlab.data.store import load

            outcome_table = load(s.outcomes)
        model = None
        if s.backend is not None and (llm or wanting):
            from routerlab.llm.base import load_backend, parse_backend_spec

            model = load_backend(parse_backend_spec(s.backend),
                                 cache_dir=Path(s.cache_dir) if s.cache_dir is not None else None)
        skipped_levels: dict[str, str] = {}
        try:
            if pset is None:
                assert names is not None
                pset, skipped_levels = make_variants(table, positions, names, s.variants or DEFAULT_P, seed, model,
                                                     s.ask, s.skip_unavailable_levels)
            review = None
            if s.reviewed is not None:
                from routerlab.perturb.review import apply_review, read_review

                pset, review = apply_review(pset, read_review(s.reviewed),
                                            {str(q) for q in table.queries.ids.tolist()})
            rob = robustness(table, list(routers), pset, split=sp, encoder=s.encoder, seed=seed, n_boot=s.n_boot,
                             outcomes=outcome_table, backend=model,
                             cache_dir=context.cache_dir if context is not None else None)
            if review is not None:
                rob.perturbations["review"] = review
        finally:
            if model is not None:
                model.close()
        notes = [f"a seeded sample of {sp.test.size} evaluable test queries"] if sampled else []
        notes += [f"level {k} left out: {v}" for k, v in skipped_levels.items()]
        return Result(self.name, rob.provenance, s, robustness_records(rob), native=rob, skipped=dict(rob.skipped),
                      n_train=int(sp.train.size), n_test=rob.n_test,
                      artifacts={"variants": pset, "skipped_levels": skipped_levels}, notes=notes)
