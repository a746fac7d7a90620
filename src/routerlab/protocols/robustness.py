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
  mean score of the router's chosen actor over the variants with known outcomes. ``perturbed_accuracy_orig`` is the
  HSE paper's perturbed accuracy, measured with or without outcomes: the chosen actor of each variant scored with
  its ORIGINAL query's outcome (the paper's premise that a variant asks the same thing), a mean over variants.
- Intervals: one bootstrap resampling of test queries per replicate, shared by every statistic of a run; each
  statistic is a ratio of sums over the resampled queries (e.g. rho: sum of rho_i over queries with variants /
  their count), so its point value is exactly the metric's. A replicate where a ratio is 0/0 is left out; an
  interval that does not contain its own estimate is reported as undefined (null), as in ``evaluate``.
- kappa_rho (SPEC 3) corrects rho by rho_chance = sum_a p_a^2, p the shares of the router's choices on the
  originals that rho counts: the same choices rho is measured on (a random router's one seeded draw per query, not
  its mean selection distribution), so rho and its chance term value the router once (docs/bandits.md). Its
  interval recomputes rho and p on each resample; a resample with one actor only (no kappa) is left out. Null and
  flagged ``collapsed`` where rho_chance = 1.
- A meaning-changing level (``control``, or a level a variants file marks so) is measured per level but left out of
  every summary over levels (rho, kappa_rho, per actor, the invariance check and perturbed accuracy as a whole); with
  outcomes, :func:`control_check` compares its changed share with every meaning-preserving level's (the falsifier).
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
from routerlab._words import plural, verb
from routerlab.data.feedback import as_feedback
from routerlab.data.provenance import Provenance
from routerlab.data.splits import Split, make_split
from routerlab.data.table import Queries, RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.features.registry import Encoder
from routerlab.metrics.bootstrap import enough_queries, percentile_interval, resample_indices
from routerlab.metrics.robustness import (
    chance_corrected,
    invariance_by_level,
    invariance_check,
    kappa_rho,
    kappa_rho_per_actor,
    rho,
    rho_by_level,
    rho_chance,
    rho_per_actor,
)
from routerlab.metrics.selection import collapsed, oracle_choice, selection_shares, selection_vector
from routerlab.metrics.sources import cite
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
Ratios = dict[str, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]
"""Ratio statistics by name: (per-query values v, weights w) of sum(v w) / sum(w)."""


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
    kappa: KappaRho | None = None
    changing_levels: tuple[str, ...] = ()
    perturbed_accuracy_orig: float = math.nan
    perturbed_accuracy_orig_ci: Interval = NAN_INTERVAL
    perturbed_accuracy_orig_by_level: dict[str, float] = field(default_factory=dict)
    perturbed_accuracy_orig_by_level_ci: dict[str, Interval] = field(default_factory=dict)

    def _preserving_rhos(self) -> list[tuple[str, float]]:
        """(level, rho) of the meaning-preserving levels with a rho, in level order: a meaning-changing level
        (``changing_levels``, the control level) is never a candidate for the weakest."""
        return [(lv, v) for lv, v in self.rho_by_level.items()
                if not math.isnan(v) and lv not in self.changing_levels]

    def lowest_levels(self) -> list[str]:
        """The meaning-preserving levels that share the lowest rho (level order); [] without a level's rho."""
        known = self._preserving_rhos()
        if not known:
            return []
        low = min(v for _, v in known)
        return [lv for lv, v in known if math.isclose(v, low, rel_tol=1e-12, abs_tol=1e-12)]

    def weakest_level(self) -> str | None:
        """The one level whose rho is below every other level's; None when no level is weaker than the rest:
        fewer than two levels with a rho, every level's rho equal (rho 1 everywhere), or a tie for the lowest."""
        known = len(self._preserving_rhos())
        lowest = self.lowest_levels()
        return lowest[0] if known >= 2 and len(lowest) == 1 else None

    def weakest_cell(self) -> str:
        """The weakest level as a table cell: its name; ``a = b`` when levels tie for the lowest rho; ``none``
        when every level's rho is equal; ``-`` with fewer than two levels."""
        known = len(self._preserving_rhos())
        lowest = self.lowest_levels()
        if known < 2:
            return "-"
        return "none" if len(lowest) == known else " = ".join(lowest)

    def weakest_phrase(self) -> str | None:
        """The weakest level in a sentence: ``lowest at `a` (0.750)``, ``lowest at `a` and `b` (0.750 each)``
        or ``no level is weaker (1.000 at every level)``; None with fewer than two levels."""
        known = len(self._preserving_rhos())
        lowest = self.lowest_levels()
        if known < 2:
            return None
        value = self.rho_by_level[lowest[0]]
        if len(lowest) == known:
            return f"no level is weaker ({value:.3f} at every level)"
        if len(lowest) > 1:
            names = ", ".join(f"`{lv}`" for lv in lowest[:-1]) + f" and `{lowest[-1]}`"
            return f"lowest at {names} ({value:.3f} each)"
        return f"lowest at `{lowest[0]}` ({value:.3f})"

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
            "perturbed_accuracy_orig": self.perturbed_accuracy_orig,
            "perturbed_accuracy_orig_ci": list(self.perturbed_accuracy_orig_ci),
            "perturbed_accuracy_orig_by_level": dict(self.perturbed_accuracy_orig_by_level),
            "perturbed_accuracy_orig_by_level_ci": {k: list(v) for k, v in
                                                    self.perturbed_accuracy_orig_by_level_ci.items()},
            **(self.kappa.to_dict() if self.kappa is not None else {}),
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
    meaning_changing: list[str] = field(default_factory=list)
    falsifier: dict[str, Any] | None = None

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
        if self.meaning_changing:
            out["meaning_changing_levels"] = list(self.meaning_changing)
        if self.falsifier is not None:
            out["falsifier"] = self.falsifier
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
    from routerlab.perturb.control import changes_meaning

    changing = [lv for lv in used.generated_levels if changes_meaning(lv, used.settings)]
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
                              router_class=_class_path(router) if spec in labels else None, changing=changing))
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
    falsifier = control_check(truth, columns, changing, n, n_boot, seed) if changing and truth.tested else None
    if changing and not truth.tested:
        notes.append(f"meaning-changing level {', '.join(changing)} (the falsifier) is untested: no outcomes of "
                     "the variants")
    return Robustness(provenance, described, results, levels, used.p, n, list(bench.test.actor_names),
                      truth.tested, test_ids, columns, bench.excluded, missing, skipped, notes, changing, falsifier)


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
            extra = int(found.sum() - complete.sum())
            notes.append(f"{plural(extra, 'variant')} {verb(extra, 'has', 'have')} outcomes with an unobserved actor "
                         f"and {verb(extra, 'counts', 'count')} as unknown")
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


def control_check(truth: _Truth, columns: list[str], changing: Sequence[str], n: int, n_boot: int, seed: int
                  ) -> dict[str, Any]:
    """The review's falsifier (SPEC 3): per meaning-changing level C (the control level), the share of its variants
    whose optimal actor set changed against every meaning-preserving level's, each with its 95% interval, and the
    paired difference (C minus the level, per bootstrap resample of the queries: the same resamples as every other
    statistic of the run) with its interval; whether C's share exceeds every level's, whether its interval lies
    above every level's (``intervals_separate``), whether every paired difference's interval lies above 0, and one
    sentence saying so. A level without variants with outcomes is listed, not compared."""
    assert truth.opt_set is not None and truth.orig_set is not None
    labels = np.asarray(columns)
    levels = list(dict.fromkeys(columns))
    known = truth.opt_set >= 0
    changed = known & (truth.opt_set != truth.orig_set[:, None])
    ratios: Ratios = {}
    n_known: dict[str, int] = {}
    for lv in levels:
        use = known & (labels == lv)[None, :]
        cnt = use.sum(axis=1).astype(np.float64)
        ratios[lv] = (_per((changed & use).sum(axis=1), cnt), cnt)
        n_known[lv] = int(use.sum())
    reps, _ = ratio_replicates(ratios, n, n_boot, seed)
    point = {lv: _ratio(*ratios[lv]) for lv in levels}
    ci = {lv: interval(point[lv], *percentile_interval(reps[lv])) for lv in levels}
    out: dict[str, Any] = {}
    for c in changing:
        versus: dict[str, Any] = {}
        untested = []
        for lv in levels:
            if lv in changing:
                continue
            if math.isnan(point[lv]):
                untested.append(lv)
                continue
            diff = point[c] - point[lv]
            versus[lv] = {"changed_share": point[lv], "changed_share_ci": list(ci[lv]), "n_known": n_known[lv],
                          "difference": diff,
                          "difference_ci": list(interval(diff, *percentile_interval(reps[c] - reps[lv])))}
        comparable = bool(versus) and not math.isnan(point[c])
        exceeds = all(point[c] > v["changed_share"] for v in versus.values()) if comparable else None
        separate = (all(ci[c][0] > v["changed_share_ci"][1] for v in versus.values())
                    if comparable and not any(math.isnan(x) for v in versus.values()
                                              for x in (*v["changed_share_ci"], *ci[c])) else None)
        apart = (all(v["difference_ci"][0] > 0 for v in versus.values())
                 if comparable and not any(math.isnan(v["difference_ci"][0]) for v in versus.values()) else None)
        block = {"changed_share": point[c], "changed_share_ci": list(ci[c]), "n_known": n_known[c],
                 "versus": versus, "exceeds_every_level": exceeds, "intervals_separate": separate,
                 "differences_above_zero": apart}
        if untested:
            block["levels_without_outcomes"] = untested
        block["sentence"] = falsifier_sentence(c, block)
        out[c] = block
    return out


def _pct_text(v: float, ci: Sequence[float] | None = None) -> str:
    if math.isnan(v):
        return "-"
    if ci is None or any(math.isnan(x) for x in ci):
        return f"{100 * v:.1f}%"
    return f"{100 * v:.1f}% [{100 * ci[0]:.1f}%, {100 * ci[1]:.1f}%]"


def _names(levels: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = list(levels)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def falsifier_sentence(level: str, block: dict[str, Any]) -> str:
    """One sentence: does the meaning-changing ``level`` change the optimal actor set more often than every
    meaning-preserving level, and do the 95% intervals separate (computed from ``block``, never fixed)."""
    if math.isnan(block["changed_share"]):
        return f"Falsifier (level {level}): none of its variants has outcomes, so the falsifier is untested."
    share = _pct_text(block["changed_share"], block["changed_share_ci"])
    head = f"Falsifier (level {level}, meaning-changing edits): the optimal actor set changed for {share} of its " \
           f"{block['n_known']} variants with outcomes"
    versus = block["versus"]
    if not versus:
        return f"{head}, but no meaning-preserving level has variants with outcomes to compare it with."
    top = max(versus, key=lambda lv: versus[lv]["changed_share"])
    top_text = f"{top} {_pct_text(versus[top]['changed_share'], versus[top]['changed_share_ci'])}"
    if block["exceeds_every_level"]:
        verdict = f"more often than at every meaning-preserving level (the highest: {top_text})"
    else:
        at_least = [lv for lv, v in versus.items() if v["changed_share"] >= block["changed_share"]]
        verdict = (f"NOT more often than at every meaning-preserving level ({_names(at_least)} at least as often; "
                   f"the highest: {top_text})")
    low = block["changed_share_ci"][0]
    overlap = [lv for lv, v in versus.items() if not low > v["changed_share_ci"][1]]
    reach = [lv for lv, v in versus.items() if not v["difference_ci"][0] > 0]
    if block["intervals_separate"] is None or block["differences_above_zero"] is None:
        apart = "; some 95% interval is undefined, so whether they separate is not known"
    elif block["intervals_separate"] and block["differences_above_zero"]:
        apart = (f"; the 95% intervals separate: {level}'s lies above every level's, and every paired "
                 "difference's lies above 0")
    elif block["intervals_separate"]:
        apart = (f"; {level}'s 95% interval lies above every level's, but the paired difference's interval "
                 f"reaches 0 for {_names(reach)}")
    else:
        tail = f", and the paired difference's interval reaches 0 for {_names(reach)}" if reach else \
            ", though every paired difference's interval lies above 0"
        apart = f"; the 95% intervals do not separate: {level}'s overlaps {_names(overlap)}'s{tail}"
    return f"{head}, {verdict}{apart}."


# ------------------------------------------------------------------------------------------ per router
def _score(spec: str, router: Router, choice: npt.NDArray[np.intp], pert: npt.NDArray[np.intp], columns: list[str],
           bench: Bench, truth: _Truth, *, seed: int, n_boot: int, fit_seconds: float, score_seconds: float,
           diagnostics: dict[str, Any] | None, router_class: str | None,
           changing: Sequence[str] = ()) -> RobustnessResult:
    """Every number of one router (SPEC 3) with its interval from one shared bootstrap (module docstring). The
    levels in ``changing`` (meaning-changing, the control level) are measured per level but left out of every
    summary over levels (rho, kappa_rho, rho per actor, the invariance check and perturbed accuracy as a whole)."""
    names = list(bench.test.actor_names)
    n, m = bench.test.n_queries, bench.test.n_actors
    labels = np.asarray(columns)
    levels = list(dict.fromkeys(columns))
    keep = ~np.isin(labels, list(changing)) if len(changing) else np.ones(labels.size, dtype=bool)
    exists = pert >= 0
    same = (pert == choice[:, None]) & exists
    ratios: Ratios = {}
    hot = np.eye(m)[choice]
    shares: Ratios = {}

    def rate(hit: npt.NDArray[np.bool_], use: npt.NDArray[np.bool_]) -> tuple[Any, Any]:
        """(per-query rate over the columns ``use``, 0 where none; 1 where the query counts)."""
        cnt = use.sum(axis=1).astype(np.float64)
        val = np.divide((hit & use).sum(axis=1), cnt, out=np.zeros(n), where=cnt > 0)
        return val, (cnt > 0).astype(np.float64)

    rho_i, has = rate(same, exists & keep[None, :])
    ratios["rho"] = (rho_i, has)
    shares["rho"] = (has, hot)
    for lv in levels:
        ratios[f"level:{lv}"] = rate(same, exists & (labels == lv)[None, :])
        shares[f"level:{lv}"] = (ratios[f"level:{lv}"][1], hot)
    for k, a in enumerate(names):
        ratios[f"actor:{a}"] = (rho_i, has * (choice == k))
    rows = np.arange(n)
    test_score = np.asarray(bench.test.score, dtype=np.float64)
    ratios["accuracy"] = (test_score[rows, choice], np.ones(n))
    # the paper's perturbed accuracy: each variant's chosen actor scored with its ORIGINAL's outcome (a variant
    # asks the same thing), a mean over variants; needs no outcomes of the variants
    orig_hit = np.where(exists, test_score[rows[:, None], np.where(exists, pert, 0)], 0.0)
    for key, mask in [("", keep), *[(f":{lv}", labels == lv) for lv in levels]]:
        use = exists & mask[None, :]
        cnt = use.sum(axis=1).astype(np.float64)
        ratios["pacc_orig" + key] = (_per(np.where(use, orig_hit, 0.0).sum(axis=1), cnt), cnt)

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
        for key, mask in [("", keep), *[(f":{lv}", labels == lv) for lv in levels]]:
            use = known & mask[None, :]
            cnt = use.sum(axis=1).astype(np.float64)
            # per-query means weighted by the query's known variants: a mean over variants, as the metric
            ratios["pacc" + key] = (_per(np.where(use, chosen, 0.0).sum(axis=1), cnt), cnt)
            ratios["changed" + key] = (_per((changed & use).sum(axis=1), cnt), cnt)
            ratios["rho_inv" + key] = rate(same, invariant & mask[None, :])
        checks["all"] = invariance_check(truth.orig_set, truth.opt_set[:, keep], choice, pert[:, keep])
        checks.update(invariance_by_level(truth.orig_set, truth.opt_set, choice, pert, columns))
        arg_all = invariance_check(truth.orig_arg, truth.opt_arg[:, keep], choice, pert[:, keep])
        arg_lv = invariance_by_level(truth.orig_arg, truth.opt_arg, choice, pert, columns)

    reps, share_reps = ratio_replicates(ratios, n, n_boot, seed, shares)
    cis = {k: percentile_interval(v) for k, v in reps.items()}
    point = {k: _ratio(v, w) for k, (v, w) in ratios.items()}

    rho_all = rho(choice, pert[:, keep]) if exists[:, keep].any() else math.nan
    by_level = rho_by_level(choice, pert, columns) if columns else {}
    by_actor_vals = rho_per_actor(choice, pert[:, keep], m)
    by_actor = {a: float(by_actor_vals[k]) for k, a in enumerate(names)}
    by_actor_ci = {a: (interval(by_actor[a], *cis[f"actor:{a}"]) if point[f"actor:{a}"] == point[f"actor:{a}"]
                       else NAN_INTERVAL) for a in names}
    kappa = _kappa(choice, pert, keep, columns, levels, names, reps, share_reps)
    acc = float(point["accuracy"])
    pacc_orig = point["pacc_orig"]
    pacc_orig_lv = {lv: point[f"pacc_orig:{lv}"] for lv in levels}
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

        inv = {"tested": True, "optimal": f"set (the selection vector of {cite('4')}; argmax with oracle tie-break "
                          "beside it)",
               **block("", checks["all"], arg_all),
               "by_level": {lv: block(f":{lv}", checks[lv], arg_lv[lv]) for lv in levels}}
    shares_all = selection_shares(choice, m)
    return RobustnessResult(
        router=router.name, spec=spec, params={**router.params, "seed": router.seed},
        rho=rho_all, rho_ci=interval(rho_all, *cis["rho"]),
        rho_by_level=by_level, rho_by_level_ci={lv: interval(by_level[lv], *cis[f"level:{lv}"]) for lv in levels},
        rho_by_actor=by_actor, rho_by_actor_ci=by_actor_ci,
        accuracy=acc, accuracy_ci=interval(acc, *cis["accuracy"]),
        perturbed_accuracy=pacc, perturbed_accuracy_ci=pacc_ci,
        perturbed_accuracy_by_level=pacc_lv, perturbed_accuracy_by_level_ci=pacc_lv_ci,
        invariance=inv,
        selection={a: float(s) for a, s in zip(names, shares_all, strict=True) if s > 0},
        collapsed=bool(collapsed(choice, m)), choice=choice, perturbed_choice=pert,
        fit_seconds=fit_seconds, score_seconds=score_seconds, diagnostics=diagnostics, router_class=router_class,
        kappa=kappa, changing_levels=tuple(lv for lv in levels if lv in set(changing)),
        perturbed_accuracy_orig=pacc_orig, perturbed_accuracy_orig_ci=interval(pacc_orig, *cis["pacc_orig"]),
        perturbed_accuracy_orig_by_level=pacc_orig_lv,
        perturbed_accuracy_orig_by_level_ci={lv: interval(v, *cis[f"pacc_orig:{lv}"]) for lv, v in
                                             pacc_orig_lv.items()},
    )


@dataclass(frozen=True)
class KappaRho:
    """A router's chance-corrected rho (SPEC 3): ``kappa_rho`` with its interval, ``rho_chance`` (sum_a p_a^2, p
    = the router's shares of the original queries that rho counts), the same per level and per actor (chance
    p_k), and ``collapsed``: the slices (``''`` whole, ``level=L``) where every counted original went to one
    actor, so rho_chance = 1 and kappa_rho is undefined (NaN, written null), never 1."""

    value: float
    ci: Interval
    rho_chance: float
    by_level: dict[str, float]
    by_level_ci: dict[str, Interval]
    rho_chance_by_level: dict[str, float]
    by_actor: dict[str, float]
    by_actor_ci: dict[str, Interval]
    collapsed: tuple[str, ...]

    def flag(self, where: str = "") -> str | None:
        """``"collapsed"`` where that slice has rho_chance = 1, else None."""
        return "collapsed" if where in self.collapsed else None

    def to_dict(self) -> dict[str, Any]:
        return {"kappa_rho": self.value, "kappa_rho_ci": list(self.ci), "kappa_rho_flag": self.flag(),
                "rho_chance": self.rho_chance,
                "kappa_rho_by_level": dict(self.by_level),
                "kappa_rho_by_level_ci": {k: list(v) for k, v in self.by_level_ci.items()},
                "kappa_rho_by_level_flag": {lv: self.flag(f"level={lv}") for lv in self.by_level
                                            if self.flag(f"level={lv}")},
                "rho_chance_by_level": dict(self.rho_chance_by_level),
                "kappa_rho_by_actor": dict(self.by_actor),
                "kappa_rho_by_actor_ci": {k: list(v) for k, v in self.by_actor_ci.items()}}


def _kappa(choice: npt.NDArray[np.intp], pert: npt.NDArray[np.intp], keep: npt.NDArray[np.bool_],
           columns: list[str], levels: list[str], names: list[str], reps: dict[str, npt.NDArray[np.float64]],
           share_reps: dict[str, npt.NDArray[np.float64]]) -> KappaRho:
    """kappa_rho whole (the meaning-preserving columns ``keep``), per level and per actor, each interval from the
    bootstrap replicates of rho and of the choice shares on the same resamples; a resample whose counted originals
    all went to one actor has no kappa_rho and is left out, as a 0/0 replicate of a ratio is."""
    m = len(names)
    labels = np.asarray(columns)
    sub = pert[:, keep]
    whole = kappa_rho(choice, sub, m) if (sub >= 0).any() else math.nan
    chance = rho_chance(choice, m, sub) if (sub >= 0).any() else math.nan

    def ci(value: float, key: str) -> Interval:
        p = share_reps[key]
        rep = chance_corrected(reps[key], (p * p).sum(axis=1))
        return interval(value, *percentile_interval(rep)) if value == value else NAN_INTERVAL

    collapsed_at = [""] if chance >= 1.0 else []
    by_level: dict[str, float] = {}
    chance_lv: dict[str, float] = {}
    by_level_ci: dict[str, Interval] = {}
    for lv in levels:
        cols = pert[:, labels == lv]
        chance_lv[lv] = rho_chance(choice, m, cols) if (cols >= 0).any() else math.nan
        by_level[lv] = kappa_rho(choice, cols, m) if (cols >= 0).any() else math.nan
        by_level_ci[lv] = ci(by_level[lv], f"level:{lv}")
        if chance_lv[lv] >= 1.0:
            collapsed_at.append(f"level={lv}")
    per_actor = kappa_rho_per_actor(choice, sub, m) if (sub >= 0).any() else np.full(m, np.nan)
    p_rep = share_reps["rho"]
    by_actor = {a: float(per_actor[k]) for k, a in enumerate(names)}
    by_actor_ci = {}
    for k, a in enumerate(names):
        rep = chance_corrected(reps[f"actor:{a}"], p_rep[:, k])
        rep[p_rep[:, k] == 0] = np.nan
        by_actor_ci[a] = interval(by_actor[a], *percentile_interval(rep)) if by_actor[a] == by_actor[a] \
            else NAN_INTERVAL
    return KappaRho(whole, ci(whole, "rho"), chance, by_level, by_level_ci, chance_lv, by_actor, by_actor_ci,
                    tuple(collapsed_at))


def _per(total: npt.ArrayLike, count: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """total / count per query, 0 where count is 0."""
    return np.divide(np.asarray(total, dtype=np.float64), count, out=np.zeros(count.shape), where=count > 0)


def _ratio(values: npt.NDArray[np.float64], weights: npt.NDArray[np.float64]) -> float:
    den = float(weights.sum())
    return float((values * weights).sum() / den) if den > 0 else math.nan



def ratio_replicates(ratios: Ratios, n: int, n_boot: int, seed: int, shares: Ratios | None = None
                     ) -> tuple[dict[str, npt.NDArray[np.float64]], dict[str, npt.NDArray[np.float64]]]:
    """Bootstrap replicates (n_boot,) of ratio statistics sum(v_i w_i) / sum(w_i) over resamples of the n queries,
    and of choice shares (n_boot, m): ``shares[k] = (w, onehot)`` gives sum(w_i onehot_i) / sum(w_i), the weighted
    share of each actor among the queries that count; all from the same resamples (SPEC 7), a 0/0 replicate NaN."""
    keys = list(ratios)
    skeys = list(shares or {})
    if not enough_queries(n):  # below MIN_QUERIES every interval is unavailable (NaN): none is computed
        return ({k: np.full(1, np.nan) for k in keys},
                {k: np.full((1, (shares or {})[k][1].shape[1]), np.nan) for k in skeys})
    W = np.column_stack([ratios[k][1] for k in keys]).astype(np.float64) if keys else np.zeros((n, 0))
    VW = (np.column_stack([ratios[k][0] for k in keys]).astype(np.float64) * W) if keys else np.zeros((n, 0))
    parts: list[npt.NDArray[np.float64]] = []
    sparts: dict[str, list[npt.NDArray[np.float64]]] = {k: [] for k in skeys}
    for idx in resample_indices(n, n_boot, seed):
        rows = idx.shape[0]
        offsets = (np.arange(rows, dtype=np.intp) * n)[:, None]
        counts = np.bincount((idx + offsets).ravel(), minlength=rows * n).reshape(rows, n).astype(np.float64)
        num, den = counts @ VW, counts @ W
        parts.append(np.divide(num, den, out=np.full(num.shape, np.nan), where=den > 0))
        for k in skeys:
            w, hot = (shares or {})[k]
            tot = (counts @ w)[:, None]
            cnt = counts @ (hot * w[:, None])
            sparts[k].append(np.divide(cnt, tot, out=np.full(cnt.shape, np.nan), where=tot > 0))
    reps = np.concatenate(parts, axis=0) if parts else np.zeros((0, len(keys)))
    return ({k: reps[:, j] for j, k in enumerate(keys)},
            {k: np.concatenate(v, axis=0) for k, v in sparts.items()})


def ratio_intervals(ratios: Ratios, n: int, n_boot: int, seed: int) -> dict[str, Interval]:
    """Percentile 95% intervals of ratio statistics sum(v_i w_i) / sum(w_i) over bootstrap resamples of the n
    queries (SPEC 7), all from the same resamples; a 0/0 replicate is left out. Below MIN_QUERIES queries every
    interval is (NaN, NaN): unavailable, not computed."""
    reps, _ = ratio_replicates(ratios, n, n_boot, seed)
    return {k: percentile_interval(v) for k, v in reps.items()}


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


def _check_similarity(value: str) -> str:
    """A text encoder the variants' similarity can be measured with (minilm or tfidf, with options)."""
    from routerlab.features.registry import get_encoder

    if get_encoder(value).name not in ("minilm", "tfidf"):
        raise UsageError(f"{value}: the similarity is measured with a text encoder, minilm or tfidf")
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
              "variants_file: every level of the file, else only these); control (opt-in, never in all) adds "
              "meaning-changing edits, the invariance check's falsifier", check=_check_levels)
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
    similarity: str | None = setting(
        None, "text encoder that scores each generated variant's similarity to its original and sets the word "
              "level's bar: minilm or tfidf; none = the default encoder (minilm where installed, else tfidf); "
              "tfidf is much faster on a CPU", check=_check_similarity)
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
                  ask: int, skip_unavailable: bool, similarity: str | None = None
                  ) -> tuple[PerturbationSet, dict[str, str]]:
    """The variants of the queries at ``positions`` at every level, and the levels left out with why: none
    unless ``skip_unavailable``, where a level that fails or makes no variant is left out instead of stopping
    the run (the set then holds only the levels made). ``similarity`` names the encoder that scores them (None:
    the default encoder)."""
    from routerlab.perturb.base import perturb_queries

    if not skip_unavailable:
        pset = perturb_queries(table, positions, levels, p, seed, backend, ask, similarity=similarity)
        if not len(pset):
            raise NoVariants(f"no variant could be made of the {len(positions)} test queries at level "
                             f"{', '.join(levels)}: {pset.describe()['stats']}", dict(pset.not_generated))
        return pset, {}
    skipped: dict[str, str] = {}
    sets: list[PerturbationSet] = []
    for level in levels:
        try:
            made = perturb_queries(table, positions, [level], p, seed, backend, ask, similarity=similarity)
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
    """The metric records of a robustness run, per router: ``rho`` and ``kappa_rho`` (whole, ``level=L``,
    ``actor=A`` for the actors it routed test queries to; kappa_rho null where collapsed) and
    ``accuracy`` and ``perturbed_accuracy_orig`` (whole and ``level=L``) with their 95% intervals; with the
    variants' outcomes, ``perturbed_accuracy`` and the invariance
    check (``changed_share``, ``changed_share_argmax``, ``rho_all``, ``rho_invariant``), whole and per level."""
    out: list[MetricRecord] = []
    for r in rob.results:
        out.append(MetricRecord.of(r.spec, "rho", r.rho, r.rho_ci))
        out += [MetricRecord.of(r.spec, "rho", v, r.rho_by_level_ci.get(lv), f"level={lv}")
                for lv, v in r.rho_by_level.items()]
        # per actor only where the router sent queries: SPEC 3's 0 for an actor it never chose is no measurement
        out += [MetricRecord.of(r.spec, "rho", v, r.rho_by_actor_ci.get(a), f"actor={a}")
                for a, v in r.rho_by_actor.items() if r.selection.get(a, 0.0) > 0]
        k = r.kappa
        if k is not None:
            out.append(MetricRecord.of(r.spec, "kappa_rho", k.value, k.ci))
            out += [MetricRecord.of(r.spec, "kappa_rho", v, k.by_level_ci.get(lv), f"level={lv}")
                    for lv, v in k.by_level.items()]
            out += [MetricRecord.of(r.spec, "kappa_rho", v, k.by_actor_ci.get(a), f"actor={a}")
                    for a, v in k.by_actor.items() if r.selection.get(a, 0.0) > 0]
        out.append(MetricRecord.of(r.spec, "accuracy", r.accuracy, r.accuracy_ci))
        out.append(MetricRecord.of(r.spec, "perturbed_accuracy_orig", r.perturbed_accuracy_orig,
                                   r.perturbed_accuracy_orig_ci))
        out += [MetricRecord.of(r.spec, "perturbed_accuracy_orig", v, r.perturbed_accuracy_orig_by_level_ci.get(lv),
                                f"level={lv}") for lv, v in r.perturbed_accuracy_orig_by_level.items()]
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
                                                     s.ask, s.skip_unavailable_levels, s.similarity)
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
