"""Audit section: a leaderboard of the standard routers under full observability (SPEC 4-5)."""

from __future__ import annotations

import math

from routerlab.data.table import RoutingTable
from routerlab.protocols.full import evaluate
from routerlab.reports.audit import AuditContext, audit_section, display_name
from routerlab.reports.blocks import Figure, Paragraph, Section
from routerlab.reports.evaluation import leaderboard_table, metric_columns, plot_evaluation

DEFAULT_ROUTERS = ("oracle", "random", "best-single", "smallest", "cheapest", "fastest", "knn", "linear", "mlp",
                   "cluster", "avenger", "mf", "hybrid")
FIXED = {"best-single", "largest", "smallest", "cheapest", "fastest"}


@audit_section("leaderboard", order=30)
def leaderboard_section(table: RoutingTable, ctx: AuditContext) -> Section:
    specs = list(ctx.options.get("routers", DEFAULT_ROUTERS))
    ev = evaluate(table, specs, split=ctx.split, encoder=str(ctx.options.get("encoder", "tfidf")), seed=ctx.seed,
                  skip_inapplicable=True)
    ctx.shared["full_evaluation"] = ev  # the partial-observability section compares with it
    figures = [Figure(f) for f in plot_evaluation(ev, ctx.out_dir, display_name(table))]
    best = max((r for r in ev.results if r.router not in {"oracle", "oracle-p"}), key=lambda r: r.metrics["mu_o"])
    oracle = next((r for r in ev.results if r.router == "oracle"), None)
    single = next((r for r in ev.results if r.router == "best-single"), None)
    n_test = int(ev.split["n_test"])
    sentences = [f"Every router is trained on the {ctx.split.train.size} training queries and scored on the same "
                 f"{n_test} evaluated test queries as the bounds above.",
                 f"The best learned or fixed router here is `{best.spec}` with mu_o {best.metrics['mu_o']:.4f}."]
    headline = f"best router {best.spec}: mu_o {best.metrics['mu_o']:.4f}"
    if single is not None and best.spec != single.spec and best.paired is not None:
        diff, (lo, hi) = best.paired["mu_o_difference"], best.paired["ci"]
        if math.isnan(lo) or math.isnan(hi):
            verdict, interval = "cannot be compared with", "(the paired interval is undefined)"
        else:
            verdict = "beats" if lo > 0 else "does not clearly beat"
            interval = f"[{lo:+.4f}, {hi:+.4f}]"
        sentences.append(f"It {verdict} always calling the best single actor ({single.metrics['mu_o']:.4f}): "
                         f"paired difference {diff:+.4f} {interval} over the same test queries "
                         f"(optimistic: it was picked as the best of {len(ev.results)} routers on this split).")
        headline += (f", {verdict} best-single ({single.metrics['mu_o']:.4f}) by {diff:+.4f} {interval}")
    elif single is not None and best.spec == single.spec:
        sentences.append("No router beats always calling the best single actor.")
        headline += " (the best single actor itself)"
    if oracle is not None:
        gap = oracle.metrics["mu_o"] - best.metrics["mu_o"]
        sentences.append(f"The oracle is {gap:.4f} higher: that is what better routing could still win.")
        headline += f"; oracle {oracle.metrics['mu_o']:.4f}"
    collapsed = [r.spec for r in ev.results if r.collapsed and r.router not in FIXED]
    if collapsed:
        sentences.append(f"Collapsed (one actor takes >= 99% of queries): {', '.join(collapsed)}.")
    for spec, why in ev.extra.get("skipped", {}).items():
        sentences.append(f"Skipped `{spec}`: {why}.")
    for note in ev.extra.get("notes", []):
        sentences.append(f"Note: {note}.")
    data = {**ev.to_dict(), "headline": headline}
    terms = ["full observability", "mu_o", "95% CI", "paired difference",
             *[c for c in metric_columns(ev) if c != "mu_o"], "collapsed", "oracle best-of-N"]
    return Section("Leaderboard (full observability)", [leaderboard_table(ev), Paragraph(" ".join(sentences))], data,
                   figures, terms)
