"""Audit section: the model-level scaling curve and candidate groups (SPEC 4; routereval.txt sections 3 and 4.2).

The scaling curve draws seeded random m-actor pools for a grid of pool sizes m and reports, over the pools, the
mean and the 5-95% band of mu_o for r_o(p) (p in DEFAULT_P) and of the best single actor (picked on train), on
the audit's evaluated test queries. Candidate groups (all-strong, all-weak, strong-to-weak) are picked on the
training split by the SPEC 4 rule at a few m and each is evaluated with a few routers (best-single, knn, linear)
on the audit's split, features encoded once. Every sentence is computed from this run's numbers. Both parts run
the registered protocols (``scaling`` and ``groups``) on the audit's split; the section picks their settings
and renders.

Choices: the pool-size grid is every m up to ``ALL_M_UP_TO`` actors, else a geometric grid; subsets per m shrink
so that the cells scanned stay under a budget (``CELL_BUDGET``), so a RouterEval-scale table (thousands of actors)
still takes seconds; ``--quick`` uses fewer pool sizes, subsets, draws, group sizes, routers and resamples.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.metrics.bootstrap import MIN_QUERIES, bootstrap_ci, unavailable
from routerlab.metrics.bounds import best_single_actor
from routerlab.metrics.catalog import label
from routerlab.metrics.sources import cite
from routerlab.protocols.full import Evaluation
from routerlab.protocols.groups import CandidateGroup, GroupsSettings, eligible_actors
from routerlab.protocols.groups_eval import GroupEvaluations, groups_result
from routerlab.protocols.scaling import DEFAULT_P, PoolSizes, ScalingCurve, ScalingSettings, scaling_result
from routerlab.reports.audit import (
    AuditContext,
    audit_section,
    display_name,
    left_out,
    skipped_sentence,
    too_few_queries,
)
from routerlab.reports.blocks import Block, Decisions, Figure, Finding, Paragraph, Section, Table
from routerlab.reports.scaling_plot import plot_scaling
from routerlab.reports.sections.leaderboard import decisions as evaluation_decisions

NAME = "scaling"
TITLE = "Scaling curve and candidate groups"
PLOT = "scaling_curve.png"
CURVE_TABLE_ID = "scaling-curve"
GROUPS_TABLE_ID = "candidate-groups"
ALL_M_UP_TO = 12
"""Tables with at most this many actors get every pool size 1..N; larger ones a geometric grid."""
CELL_BUDGET = {False: 4e9, True: 6e8}
"""Most (test query x actor) cells the scaling curve scans, by quick mode: subsets per m shrink to fit."""
SETTINGS: dict[bool, dict[str, Any]] = {
    False: {"grid": 9, "samples": 100, "draws": 1000, "group_m": (2, 4, 8), "routers": ("best-single", "knn", "linear"),
            "n_boot": 1000},
    True: {"grid": 5, "samples": 20, "draws": 100, "group_m": (4,), "routers": ("best-single", "knn"), "n_boot": 200},
}
"""What the section runs, full and ``--quick``."""
MIN_SAMPLES = 5
GAIN_SHARE = 0.9
"""The plateau finding: the smallest pool size whose mean oracle reaches this share of the whole pool's gain."""
MIN_GAIN = 1e-9
"""A whole pool whose mean oracle rises less than this over one actor's has no gain to take a share of."""


def pool_sizes(n_actors: int, quick: bool) -> list[int]:
    """The pool sizes m of the scaling curve: 1..N for small pools, else a geometric grid from 1 to N."""
    if n_actors <= (ALL_M_UP_TO if not quick else ALL_M_UP_TO // 2):
        return list(range(1, n_actors + 1))
    grid = np.geomspace(1, n_actors, int(SETTINGS[quick]["grid"]))
    return sorted({round(float(v)) for v in grid} | {n_actors})


def subsets_per_m(n_test: int, m_values: list[int], quick: bool) -> int:
    """Random pools per m: the mode's default, fewer when the cells scanned would pass the budget."""
    wanted = int(SETTINGS[quick]["samples"])
    cells = float(n_test) * float(sum(m_values))
    return max(MIN_SAMPLES, min(wanted, int(CELL_BUDGET[quick] // max(cells, 1.0))))


def plateau(curve: ScalingCurve, share: float = GAIN_SHARE) -> dict[str, Any]:
    """Where the mean oracle r_o(1) levels off: the smallest m of the evaluated grid (``grid``: every m is tried
    only when ``complete``) whose mean reaches ``share`` of the gain from m=1 to the largest m, with the oracle
    there (mean, 5-95% band over pools) and at both ends. ``gain`` is that gain; when it is not positive there is
    nothing to take a share of and ``m`` is None."""
    s = curve.oracle_p[1.0]
    first, last = s["mean"][0], s["mean"][-1]
    grid = list(curve.m)
    common = {"m_max": grid[-1], "oracle_max": last, "oracle_m1": first, "share": share, "gain": last - first,
              "grid": grid, "complete": grid == list(range(grid[0], grid[-1] + 1))}
    if last - first <= MIN_GAIN:
        return {**common, "m": None, "oracle": None, "band": None, "rest_gain": None}
    target = first + share * (last - first)
    k = next(i for i, v in enumerate(s["mean"]) if v >= target - 1e-12)
    return {**common, "m": curve.m[k], "oracle": s["mean"][k], "band": [s["q05"][k], s["q95"][k]],
            "rest_gain": last - s["mean"][k]}


def _group_rows(ctx: AuditContext, group: CandidateGroup, ev: Evaluation | None, n_boot: int
                ) -> dict[str, Any]:
    """One group's record: its actors, train oracle, test oracle with its interval, and each router's mu_o with
    its interval and paired difference from the group's best single actor."""
    cols = ctx.test.actor_index(group.actors)
    est = bootstrap_ci(ctx.test.score[:, cols].max(axis=1).astype(np.float64), n_boot=n_boot, seed=ctx.seed)
    out: dict[str, Any] = {**group.to_dict(), "test_oracle": est.value, "test_oracle_ci": [est.lo, est.hi],
                           "routers": {}}
    if ev is not None:
        for r in ev.results:
            lo, hi = r.ci.get("mu_o", (math.nan, math.nan))
            row: dict[str, Any] = {"mu_o": r.metrics["mu_o"], "ci": [lo, hi], "collapsed": r.collapsed}
            if r.paired is not None:
                row["versus_best_single"] = {"difference": r.paired["mu_o_difference"], "ci": r.paired["ci"]}
            out["routers"][r.spec] = row
    return out


def _fmt_ci(v: float, ci: list[float], n: int | None = None) -> str:
    if n is not None and n < MIN_QUERIES:
        return f"{v:.3f} {unavailable(n)}"
    if any(math.isnan(x) for x in ci):
        return f"{v:.3f}"
    return f"{v:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def _names(actors: list[str], limit: int = 4) -> str:
    shown = ", ".join(f"`{a}`" for a in actors[:limit])
    return shown + (f" and {len(actors) - limit} more" if len(actors) > limit else "")


def _sizes(ms: list[int]) -> str:
    return ", ".join(map(str, ms))


def curve_findings(curve: ScalingCurve) -> tuple[list[Finding], list[dict[str, str]]]:
    """The curve's sentence: where the mean oracle levels off (the bounds section already states the whole pool's
    headroom over the best single actor), claiming only what the evaluated pool sizes show; and the finding left
    out (:func:`~routerlab.reports.audit.left_out`) when the whole pool adds nothing over one actor."""
    out: list[Finding] = []
    if len(curve.m) < 2:
        return out, []
    pl = plateau(curve)
    if pl["m"] is None:
        return out, [left_out(f"the pool size at which the oracle reaches {GAIN_SHARE:.0%} of the whole pool's gain",
                              f"the whole pool of {pl['m_max']} has no gain: its mean oracle, {pl['oracle_max']:.3f}, "
                              f"is no higher than one actor's, {pl['oracle_m1']:.3f}")]
    below = [m for m in pl["grid"] if m < pl["m"]]
    every_below = below == list(range(pl["grid"][0], pl["m"]))  # was every smaller pool size tried?
    if pl["m"] < pl["m_max"]:
        text = (f"Random pools of m={pl['m']} actors already reach {GAIN_SHARE:.0%} of what the whole pool of "
                f"{pl['m_max']} adds to the oracle over one actor (mean oracle {pl['oracle']:.3f}, 5-95% of "
                f"pools {pl['band'][0]:.3f} to {pl['band'][1]:.3f}): the other {pl['m_max'] - pl['m']} actors "
                f"raise it by a further {100 * pl['rest_gain']:.1f} points (to {pl['oracle_max']:.3f}).")
        if not every_below:  # a pool size between the tried ones may reach it too: say which were tried
            text = text[:-1] + f"; of the smaller pool sizes, only m = {_sizes(below)} were tried and do not."
    elif every_below:
        text = (f"The oracle keeps rising up to the whole pool of {pl['m_max']} actors (mean {pl['oracle_max']:.3f} "
                f"against {pl['oracle_m1']:.3f} for one actor): no smaller pool reaches {GAIN_SHARE:.0%} of its "
                "gain.")
    else:  # only the tried sizes are known not to reach it
        text = (f"The oracle keeps rising up to the whole pool of {pl['m_max']} actors (mean {pl['oracle_max']:.3f} "
                f"against {pl['oracle_m1']:.3f} for one actor): none of the smaller pool sizes tried, m = "
                f"{_sizes(below)}, reaches {GAIN_SHARE:.0%} of its gain (sizes in between were not tried).")
    # the band is the spread over random pools, not a confidence interval: a value, not the finding's interval
    out.append(Finding(text, CURVE_TABLE_ID, {"m": pl["m"], "oracle_at_m": pl["oracle"],
                                              "pools_q05": pl["band"][0], "pools_q95": pl["band"][1],
                                              "oracle_all": pl["oracle_max"], "gain_after_m": pl["rest_gain"]}))
    return out, []


def group_findings(groups: list[dict[str, Any]], single: dict[str, Any], n_test: int | None = None
                   ) -> tuple[list[Finding], list[dict[str, str]]]:
    """Sentences about the candidate groups: the all-weak group against the best single actor, and the best
    learned router over its group's best single actor. Both are verdicts of 95% intervals: with fewer than
    MIN_QUERIES test queries (``n_test``) neither is written, and the second list says so."""
    out: list[Finding] = []
    weak = [g for g in groups if g["kind"] == "all-weak"]
    pairs = [(g, spec, r) for g in groups for spec, r in g["routers"].items()
             if spec != "best-single" and "versus_best_single" in r]
    if n_test is not None and n_test < MIN_QUERIES:
        why = too_few_queries(n_test)
        return [], ([left_out("whether the all-weak group's test oracle is above the best single actor's", why)]
                    if weak else []) + ([left_out("whether the best routed candidate group beats its best single "
                                                  "actor", why)] if pairs else [])
    if weak:
        g = max(weak, key=lambda g: g["m"])
        rel = "above" if g["test_oracle_ci"][0] > single["value"] else (
            "below" if g["test_oracle_ci"][1] < single["value"] else "not distinguishable from")
        out.append(Finding(
            f"The all-weak group of {g['m']} ({_names(g['actors'])}) reaches a test oracle of "
            f"{_fmt_ci(g['test_oracle'], g['test_oracle_ci'])}, {rel} the best single actor's "
            f"{single['value']:.3f}: weak actors together {'can' if rel == 'above' else 'do not'} cover what the "
            "strongest one answers.", GROUPS_TABLE_ID,
            {"m": g["m"], "test_oracle": g["test_oracle"], "best_single": single["value"]},
            tuple(g["test_oracle_ci"]) if not any(math.isnan(x) for x in g["test_oracle_ci"]) else None))
    if pairs:
        g, spec, r = max(pairs, key=lambda t: t[2]["versus_best_single"]["difference"])
        d = r["versus_best_single"]
        lo, hi = d["ci"]
        verdict = ("beats" if lo > 0 else "does not clearly beat") if not math.isnan(lo) else "cannot be compared with"
        interval = f"(95% CI [{100 * lo:+.1f}, {100 * hi:+.1f}])" if not math.isnan(lo) else "(interval undefined)"
        out.append(Finding(
            f"The best routed candidate group is {g['kind']} with m={g['m']}: `{spec}` scores "
            f"{_fmt_ci(r['mu_o'], r['ci'])} and {verdict} that group's best single actor by "
            f"{100 * d['difference']:+.1f} points {interval}, against a group oracle of {g['test_oracle']:.3f}.",
            GROUPS_TABLE_ID, {"m": g["m"], "mu_o": r["mu_o"], "difference": d["difference"],
                              "group_oracle": g["test_oracle"]},
            (lo, hi) if not math.isnan(lo) else None))
    return out, []


@audit_section(NAME, order=25, depends=("quick", "encoder"))
def scaling_section(table: RoutingTable, ctx: AuditContext) -> Section:
    quick = ctx.quick
    cfg = SETTINGS[quick]
    n, n_test = table.n_actors, int(ctx.split.test.size)
    terms = ["oracle-p", "pool size m", "best single actor", "oracle", "candidate group", "mu_o", "95% CI",
             "mu_o_difference"]
    t0 = time.perf_counter()
    m_values = pool_sizes(n, quick)
    samples = subsets_per_m(n_test, m_values, quick)
    # the scaling protocol on the audit's own split (a spec cannot say its test side is cut to complete rows)
    curve: ScalingCurve = scaling_result(table, ScalingSettings(m=PoolSizes(m_values), p=DEFAULT_P, samples=samples,
                                                                split=ctx.split_spec), ctx.seed, split=ctx.split).native
    name = display_name(table)
    plot_scaling(curve, ctx.out_dir / PLOT, f"Scaling curve: {name} ({samples} random pools per m)")
    best = int(best_single_actor(ctx.train.score))
    n_boot = int(cfg["n_boot"])
    test = ctx.test.score  # float32: a column and the row maxima are the same numbers in float64
    single_est = bootstrap_ci(test[:, best].astype(np.float64), n_boot=n_boot, seed=ctx.seed)
    oracle_est = bootstrap_ci(test.max(axis=1).astype(np.float64), n_boot=n_boot, seed=ctx.seed)
    single = {"actor": table.actor_names[best], "value": single_est.value, "ci": [single_est.lo, single_est.hi],
              "oracle": oracle_est.value, "oracle_ci": [oracle_est.lo, oracle_est.hi]}
    curve_seconds = time.perf_counter() - t0

    head = ["m", *[f"r_o({p:g}) mean" for p in curve.p], "r_o(1) 5-95%", "best single mean"]
    rows = [[str(m), *[f"{curve.oracle_p[p]['mean'][i]:.3f}" for p in curve.p],
             f"{curve.oracle_p[1.0]['q05'][i]:.3f}-{curve.oracle_p[1.0]['q95'][i]:.3f}",
             f"{curve.best_single['mean'][i]:.3f}"] for i, m in enumerate(curve.m)]
    curve_table = Table(head, rows, ["pool size m", *["oracle-p"] * (len(curve.p) + 1), "best single actor"],
                        sortable=True, id=CURVE_TABLE_ID)
    reduced = samples < int(cfg["samples"])
    intro = (f"For each pool size m, {samples} seeded random pools of m of the {n} actors"
             + (f" (fewer than the usual {cfg['samples']}, to keep the {n_test} x {n} scan fast)" if reduced else "")
             + f"; mu_o on the audit's {n_test} evaluated test queries, the best single actor of each pool picked "
             f"on the training split. The line is the mean over pools, the band the 5-95% range ({cite('4')}).")
    findings, skipped = curve_findings(curve)

    # candidate groups
    t1 = time.perf_counter()
    n_eligible = int(eligible_actors(ctx.train).size)
    cap = n_eligible // 2  # larger groups would overlap so much that the three kinds say the same
    group_m = sorted({min(m, cap) for m in cfg["group_m"] if min(m, cap) >= 2})
    routers = list(cfg["routers"])
    groups_data: list[dict[str, Any]] = []
    decisions: list[Decisions] = []
    group_note = ""
    if not group_m:
        group_note = (f"Candidate groups skipped: only {n_eligible} actors have a train score in [0.1, 0.9]; "
                      "distinct groups of at least 2 need 4.")
    else:
        try:
            # the groups protocol on the audit's split, its features shared through the audit's run context
            settings = GroupsSettings(m=PoolSizes(group_m), draws=int(cfg["draws"]), split=ctx.split_spec,
                                      encoder=str(ctx.options.get("encoder", "tfidf")), n_boot=n_boot,
                                      skip_inapplicable=True)
            found: GroupEvaluations = groups_result(table, settings, ctx.seed, routers, ctx.run_context,
                                                    split=ctx.split).native
            for g, ev in found.groups:
                groups_data.append(_group_rows(ctx, g, ev, n_boot))
                decisions.append(evaluation_decisions(f"group {g.kind} m={g.m}", ev, ctx.test.select_actors(g.actors)))
        except UsageError as exc:  # e.g. too few training queries for knn: reported, never fatal to the audit
            group_note = f"Candidate groups not evaluated: {str(exc).rstrip('.')}."
    group_seconds = time.perf_counter() - t1
    group_found, group_left = group_findings(groups_data, single, n_test)
    findings += group_found
    skipped += group_left

    blocks: list[Block] = [Paragraph(intro), curve_table]
    if groups_data:
        shown = [r for r in routers if any(r in g["routers"] for g in groups_data)]
        ghead = ["group", "m", "actors", label("train_oracle"), "test oracle [95% CI]",
                 *[f"{r} mu_o [95% CI]" for r in shown]]
        grows = [[g["kind"], str(g["m"]), ", ".join(g["actors"]) if len(g["actors"]) <= 8 else _names(g["actors"], 8),
                  f"{g['train_oracle']:.3f}", _fmt_ci(g["test_oracle"], g["test_oracle_ci"], n_test),
                  *[_fmt_ci(g["routers"][r]["mu_o"], g["routers"][r]["ci"], n_test) if r in g["routers"] else "-"
                    for r in shown]] for g in groups_data]
        blocks.append(Paragraph(
            f"Candidate groups ({cite('4')}) at m = {', '.join(map(str, group_m))}, each the best of "
            f"{cfg['draws']} seeded draws by train oracle among the {n_eligible} actors with a train score in "
            f"[0.1, 0.9]; {', '.join(f'`{r}`' for r in routers)} trained on the {ctx.split.train.size} training "
            f"queries and scored on the same test queries, intervals from {n_boot} bootstrap resamples."))
        blocks.append(Table(ghead, grows, ["candidate group", "pool size m", None, "oracle", "oracle",
                                           *["mu_o"] * len(shown)], sortable=True, id=GROUPS_TABLE_ID))
    if quick:
        group_note += (" Quick mode: fewer pool sizes, random pools, draws, group sizes, routers and "
                       "resamples than a full audit.")
    said = [*(f.text for f in findings), *([skipped_sentence(skipped)] if skipped else []),
            *([group_note.strip()] if group_note else [])]
    blocks.append(Paragraph(" ".join(said)))
    data: dict[str, Any] = {
        "measured": True, "quick": quick, "scaling": curve.to_dict(), "best_single": single,
        "plateau": plateau(curve) if len(curve.m) >= 2 else None, "groups": groups_data, "group_m": group_m,
        "routers": routers, "draws": int(cfg["draws"]), "n_boot": n_boot, "note": group_note.strip(),
        "scale": (f"{samples} random pools per m instead of {cfg['samples']}, to keep the {n_test} test queries x "
                  f"{n} actors scan fast" if reduced else ""),
        "findings": [f.text for f in findings], "skipped_findings": skipped,
        "seconds": {"curve": round(curve_seconds, 3),
                                                            "groups": round(group_seconds, 3)},
        "headline": findings[0].text if findings else "",
    }
    figure = Figure(PLOT, f"Scaling curve: mu_o of r_o(p) and of the best single actor against pool size m ({name})",
                    id="scaling-figure")
    return Section(TITLE, blocks, data, [figure], terms, name=NAME, findings=findings, decisions=decisions)
