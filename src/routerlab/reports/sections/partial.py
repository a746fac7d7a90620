"""Audit section: the same routers under full observability and under cold-start (SPEC 1, 5; routerworld.txt 3.3,
5.2): which routers hold up when they learn only one logged outcome per training query, which collapse onto one
actor, and how far Acc@1 and L-DCG move.

routerworld.txt (Table 3) reports that routers trained on logs become risk-averse: Acc@1 rises (+24.7 pp on
average there) while L-DCG falls (-0.16), some collapsing onto the largest model. Every sentence here is computed
from this run's numbers and says whether this table shows that pattern, the opposite, or neither.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from routerlab._words import plural
from routerlab.data.table import RoutingTable
from routerlab.metrics.bootstrap import MIN_QUERIES, unavailable
from routerlab.metrics.catalog import label as metric_label
from routerlab.protocols.base import run_protocol
from routerlab.protocols.full import Evaluation, RouterResult
from routerlab.reports.audit import AuditContext, audit_section
from routerlab.reports.blocks import Block, Finding, Paragraph, Section, Table
from routerlab.reports.sections.leaderboard import decisions, evaluation_settings, n_boot, router_specs

BOUNDS = {"oracle", "oracle-p", "random"}
"""Routers whose test choices do not depend on training feedback: shown, but not counted in the findings."""

TABLE_ID = "partial-table"


def shown_metrics(ev: Evaluation) -> tuple[list[str], str]:
    """(the columns shown, the efficiency metric of the findings): Acc@1, Acc@1-L, DCG, L-DCG with latency;
    mu_o and Acc@1 without (L-DCG needs latency, SPEC 5)."""
    if ev.results and "l_dcg" in ev.results[0].metrics:
        return ["acc_at_1", "acc_at_1_l", "dcg", "l_dcg"], "l_dcg"
    return ["mu_o", "acc_at_1"], "mu_o"


def compare(full: Evaluation, cold: Evaluation) -> dict[str, Any]:
    """Per router present in both runs: each shown metric under full and cold-start, the shifts, the collapse flags,
    whether the router held up (its cold-start value of the efficiency metric at or above the lower end of its
    full-observability 95% interval), whether it is a bound and whether any of its test choices changed."""
    cols, eff = shown_metrics(full)
    by_spec = {r.spec: r for r in cold.results}
    rows: dict[str, dict[str, Any]] = {}
    for f in full.results:
        c = by_spec.get(f.spec)
        if c is None:
            continue
        lo = f.ci.get(eff, (float("nan"), float("nan")))[0]
        few = int(full.split.get("n_test", 0) or 0) < MIN_QUERIES  # no interval to hold up within
        rows[f.spec] = {
            "full": {k: f.metrics[k] for k in cols}, "cold_start": {k: c.metrics[k] for k in cols},
            "shift": {k: c.metrics[k] - f.metrics[k] for k in cols},
            "collapsed_full": f.collapsed, "collapsed_cold_start": c.collapsed,
            "held_up": None if few else bool(c.metrics[eff] >= (lo if lo == lo else f.metrics[eff]) - 1e-12),
            "bound": f.router in BOUNDS,
            "changed": _changed(f, c),
        }
    return {"metrics": cols, "efficiency_metric": eff, "routers": rows}


def _changed(full: RouterResult, cold: RouterResult) -> bool:
    """Whether the router's test decisions differ between the two runs: any argmax choice, or, for a router that
    samples its distribution when deployed, any query's expected score (its policy as deployed moved)."""
    if (full.choice != cold.choice).any():
        return True
    a, b = full.deployed_score, cold.deployed_score
    if a is None or b is None:
        return (a is None) != (b is None)
    return not np.array_equal(a, b)


def counts(cmp: dict[str, Any]) -> dict[str, Any]:
    """What the findings quote, over the routers the log changed (not a bound, some test choice different from
    full observability; a router that ignores training outcomes, such as ``smallest``, is listed as unchanged): how
    many, which rose or fell in Acc@1 and in the efficiency metric, the mean shifts, which collapsed only under
    cold-start."""
    eff = cmp["efficiency_metric"]
    rows = {k: v for k, v in cmp["routers"].items() if not v["bound"] and v["changed"]}
    n = len(rows)

    def moved(key: str, sign: int) -> list[str]:
        return sorted(k for k, v in rows.items() if sign * v["shift"][key] > 1e-12)

    return {"n": n, "efficiency_metric": eff, "counted": sorted(rows),
            "unchanged": sorted(k for k, v in cmp["routers"].items() if not v["bound"] and not v["changed"]),
            "acc_up": moved("acc_at_1", 1), "acc_down": moved("acc_at_1", -1),
            "eff_up": moved(eff, 1), "eff_down": moved(eff, -1),
            "mean_acc_shift": sum(v["shift"]["acc_at_1"] for v in rows.values()) / n if n else 0.0,
            "mean_eff_shift": sum(v["shift"][eff] for v in rows.values()) / n if n else 0.0,
            "newly_collapsed": sorted(k for k, v in rows.items()
                                      if v["collapsed_cold_start"] and not v["collapsed_full"])}


def _trend(up: list[str], down: list[str], n: int) -> str:
    return "rose" if len(up) * 2 > n else "fell" if len(down) * 2 > n else "moved both ways"


RISK_AVERSION = "RouterWorld (section 5.2)"
"""Where the finding the cold-start comparison checks is reported: under partial observability routers favour
accuracy over latency (Acc@1 up, L-DCG down)."""


def verdict(c: dict[str, Any]) -> str:
    """Whether the counts show routerworld.txt's risk-aversion (Acc@1 up and L-DCG down for most routers), its
    opposite (Acc@1 down, L-DCG up), or neither; without latency only the Acc@1 half can be judged."""
    n = c["n"]
    acc = _trend(c["acc_up"], c["acc_down"], n)
    if c["efficiency_metric"] != "l_dcg":
        return f"Acc@1 {acc} for most routers; without latency the L-DCG side cannot be checked"
    eff = _trend(c["eff_up"], c["eff_down"], n)
    if (acc, eff) == ("rose", "fell"):
        return f"the risk-aversion {RISK_AVERSION} reports (Acc@1 up, L-DCG down)"
    if (acc, eff) == ("fell", "rose"):
        return f"the opposite of the risk-aversion {RISK_AVERSION} reports (Acc@1 down, L-DCG up)"
    return f"not the risk-aversion {RISK_AVERSION} reports (for most routers Acc@1 {acc} and L-DCG {eff})"


def findings(cmp: dict[str, Any], full: Evaluation, cold: Evaluation) -> list[str]:
    """One sentence per finding, every number computed from ``cmp`` (never a fixed claim)."""
    eff = cmp["efficiency_metric"]
    c = counts(cmp)
    rows = {k: cmp["routers"][k] for k in c["counted"]}
    n = c["n"]
    unchanged = (f" {_names(c['unchanged'])} chose exactly as under full observability and are not counted."
                 if c["unchanged"] else "")
    if not n:
        return ["No router's test choices changed under cold-start, so there is no shift to report." + unchanged]
    out = []
    if eff == "l_dcg":
        out.append(f"Trained on one logged outcome per training query, Acc@1 rose for {len(c['acc_up'])} of the {n} "
                   f"routers whose choices changed and L-DCG fell for {len(c['eff_down'])} of them (mean shift "
                   f"{100 * c['mean_acc_shift']:+.1f} pp Acc@1, {c['mean_eff_shift']:+.4f} L-DCG): {verdict(c)}."
                   f"{unchanged}")
    else:
        out.append(f"Trained on one logged outcome per training query, Acc@1 rose for {len(c['acc_up'])} of the {n} "
                   f"routers whose choices changed and mu_o fell for {len(c['eff_down'])} of them (mean shift "
                   f"{100 * c['mean_acc_shift']:+.1f} pp Acc@1): {verdict(c)}.{unchanged}")
    held = sorted(k for k, v in rows.items() if v["held_up"])
    fell = sorted(k for k, v in rows.items() if v["held_up"] is False)
    label = metric_label(eff)
    n_test = int(full.split.get("n_test", 0) or 0)
    if n_test < MIN_QUERIES:
        out.append(f"Whether each router held up (cold-start {label} at or above the lower end of its "
                   f"full-observability 95% interval) is not judged: that interval is {unavailable(n_test)}.")
    if held:
        out.append(f"Held up (cold-start {label} at or above the lower end of its full-observability 95% interval): "
                   f"{_names(held)}.")
    if fell:
        out.append(f"Fell below that interval: {_names(fell)}.")
    newly = c["newly_collapsed"]
    if newly:
        actors = {r.spec: max(r.selection, key=lambda a: r.selection[a]) for r in cold.results if r.spec in newly}
        out.append("Collapsed onto one actor only under cold-start: "
                   + ", ".join(f"`{k}` (onto `{actors[k]}`)" for k in newly) + ".")
    else:
        out.append("No router collapsed under cold-start that did not already under full observability.")
    fair = {k for k, v in cmp["routers"].items() if not v["bound"]}
    best_full = _best(full, eff, fair)
    best_cold = _best(cold, eff, fair)
    if best_full is not None and best_cold is not None:
        same = "the same router" if best_full.spec == best_cold.spec else f"under full observability `{best_full.spec}`"
        out.append(f"Best by {label} under cold-start: `{best_cold.spec}` ({best_cold.metrics[eff]:.4f}); "
                   f"{same} ({best_full.metrics[eff]:.4f} with every training outcome).")
    return out


def _names(specs: list[str]) -> str:
    return ", ".join(f"`{s}`" for s in specs)


def _best(ev: Evaluation, key: str, among: set[str]) -> RouterResult | None:
    cands = [r for r in ev.results if r.spec in among]
    return max(cands, key=lambda r: r.metrics[key]) if cands else None


def _cell(full: float, cold: float) -> str:
    return f"{full:.4f} → {cold:.4f}"


def describe_actor(table: RoutingTable, test: RoutingTable, actor: str) -> str:
    """What the table knows about ``actor`` beyond its name, for a sentence: "the largest" (most parameters),
    "the cheapest" (lowest mean cost on the test queries) or "the most expensive", joined by "and"; "" when it is
    none of these or the table has no such column."""
    names = table.actor_names
    k = names.index(actor)
    said = []
    params = np.asarray(table.actors.params_b, dtype=np.float64)
    if np.isfinite(params).sum() >= 2 and np.nanargmax(params) == k:
        said.append("the largest")
    cost = test.cost_usd
    if cost is not None and not np.isnan(cost).all():
        mean = np.nanmean(np.asarray(cost, dtype=np.float64), axis=0)
        if np.isfinite(mean).sum() >= 2:
            if np.nanargmin(mean) == k:
                said.append("the cheapest")
            elif np.nanargmax(mean) == k:
                said.append("the most expensive")
    return " and ".join(said)


def collapse_findings(table: RoutingTable, test: RoutingTable, c: dict[str, Any], cold: Evaluation
                      ) -> tuple[list[Finding], dict[str, Any]]:
    """The issue's "under partial feedback 3 routers collapse onto the largest model": the routers that collapsed
    only under cold-start, grouped by the actor they collapsed onto (described where the table knows its size or
    cost), or one sentence saying none did."""
    newly = c["newly_collapsed"]
    onto: dict[str, list[str]] = {}
    for r in cold.results:
        if r.spec in newly:
            onto.setdefault(max(r.selection, key=lambda a: r.selection[a]), []).append(r.spec)
    data = {"n_newly_collapsed": len(newly), "onto": onto}
    if not newly:
        return [Finding(f"Under partial feedback (one logged outcome per training query) none of the {c['n']} "
                        "routers the log changed collapses onto one actor.", TABLE_ID,
                        {"n_newly_collapsed": 0, "n_changed": c["n"]})], data
    out = []
    for actor, specs in sorted(onto.items(), key=lambda kv: -len(kv[1])):
        what = describe_actor(table, test, actor)
        who = f"{what} actor, `{actor}`" if what else f"`{actor}`"
        n = len(specs)
        out.append(Finding(
            f"Under partial feedback {n} {'router collapses' if n == 1 else 'routers collapse'} onto {who} "
            f"(>= 99% of test queries): {_names(specs)}; with every outcome {'it does' if n == 1 else 'they do'} "
            "not.", TABLE_ID, {"n_collapsed": n, "actor": actor}))
    return out, data


@audit_section("partial", order=35, depends=("quick", "routers", "encoder"))
def partial_section(table: RoutingTable, ctx: AuditContext) -> Section:
    specs = router_specs(ctx)
    settings = evaluation_settings(ctx)  # the features are encoded once, in ctx.run_context
    full = ctx.shared.get("full_evaluation")  # the leaderboard's run: same routers, split, encoder and seed
    if not isinstance(full, Evaluation):
        full = run_protocol("full", table, settings, ctx.seed, specs, ctx.run_context).native
    cold = run_protocol("cold-start", table, settings, ctx.seed, specs, ctx.run_context).native
    cmp = compare(full, cold)
    cols = cmp["metrics"]
    head = ["router", *[f"{metric_label(k)} full → cold" for k in cols],
            *[f"Δ{metric_label(k)}" for k in ("acc_at_1", cmp["efficiency_metric"]) if k in cols],
            "collapsed (full, cold)"]
    body = []
    for spec, row in cmp["routers"].items():
        deltas = [f"{row['shift'][k]:+.4f}" for k in ("acc_at_1", cmp["efficiency_metric"]) if k in cols]
        flags = ", ".join(["yes" if row["collapsed_full"] else "no", "yes" if row["collapsed_cold_start"] else "no"])
        body.append([spec, *[_cell(row["full"][k], row["cold_start"][k]) for k in cols], *deltas, flags])
    lg = cold.extra["logging"]
    correct = f", {lg['correct_share']:.1%} of its outcomes correct" if "correct_share" in lg else ""
    intro = (f"The leaderboard's routers again, each trained twice on the {ctx.split.train.size} training queries: "
             f"with every actor's outcome (full observability), and with one outcome per query drawn by a "
             f"{lg.get('spec', lg['policy'])} logging policy (cold-start, seed {ctx.seed}; the same log for every "
             f"router{correct}). Both are scored on the same {int(full.split['n_test'])} test queries with every "
             "outcome known." + (f" A quick run: {plural(len(specs), 'router')}, {n_boot(ctx)} bootstrap resamples."
                                 if ctx.quick else ""))
    sentences = findings(cmp, full, cold)
    skipped = {**full.extra.get("skipped", {}), **cold.extra.get("skipped", {})}
    sentences += [f"Skipped `{k}`: {v}." for k, v in skipped.items()]
    c = counts(cmp)
    collapse, collapse_data = collapse_findings(table, ctx.test, c, cold)
    shift = Finding(
        f"Trained on one logged outcome per query instead of every outcome, Acc@1 rose for {len(c['acc_up'])} of "
        f"the {plural(c['n'], 'router')} the log changed (mean shift {100 * c['mean_acc_shift']:+.1f} points) and "
        f"{metric_label(c['efficiency_metric'])} fell for {len(c['eff_down'])}: {verdict(c)}.", TABLE_ID,
        {"n_changed": c["n"], "n_acc_up": len(c["acc_up"]), "n_eff_down": len(c["eff_down"]),
         "mean_acc_shift_points": 100 * c["mean_acc_shift"]}) if c["n"] else None
    headline = (f"cold-start vs full: Acc@1 up for {len(c['acc_up'])} of {plural(c['n'], 'router')} the log changed, "
                f"{metric_label(c['efficiency_metric'])} down for {len(c['eff_down'])}: {verdict(c)}"
                + (f"; collapsed only under cold-start: {', '.join(c['newly_collapsed'])}" if c["newly_collapsed"]
                   else ""))
    data = {**cmp, "logging": lg, "findings": sentences, "headline": headline, "quick": ctx.quick,
            "counts": {"n_changed": c["n"], "n_acc_up": len(c["acc_up"]), "n_eff_down": len(c["eff_down"]),
                       "mean_acc_shift_points": 100 * c["mean_acc_shift"]},
            "collapse": collapse_data, "full": full.to_dict(), "cold_start": cold.to_dict()}
    terms = ["full observability", "cold-start", *cols, "shift", "collapsed", "held up"]
    shifted = [k for k in ("acc_at_1", cmp["efficiency_metric"]) if k in cols]
    col_terms: list[str | None] = [None, *cols, *["shift" for _ in shifted], "collapsed"]
    blocks: list[Block] = [Paragraph(intro), Table(head, body, terms=col_terms, sortable=True, id=TABLE_ID),
              Paragraph(" ".join(sentences))]
    return Section("Partial observability: full vs cold-start", blocks, data, [], terms, name="partial",
                   findings=[*collapse, *([shift] if shift is not None else [])],
                   decisions=[decisions("cold-start", cold, ctx.test)])
