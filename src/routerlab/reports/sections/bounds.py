"""Audit section: oracle, random and best-single bounds on the evaluated test queries (SPEC 4)."""

from __future__ import annotations

from routerlab.data.table import RoutingTable
from routerlab.metrics.bounds import bounds
from routerlab.reports.audit import AuditContext, Section, audit_section


@audit_section("bounds", order=10)
def bounds_section(table: RoutingTable, ctx: AuditContext) -> Section:
    b = bounds(ctx.test.score, ctx.train.score)
    best = table.actor_names[b.best_single_actor]
    headroom = b.oracle - b.best_single
    md = (
        "| bound | mean score on test |\n|---|---|\n"
        f"| oracle (best actor per query) | {b.oracle:.4f} |\n"
        f"| best single actor on train: `{best}` | {b.best_single:.4f} |\n"
        f"| uniform random actor | {b.random:.4f} |\n\n"
        f"Routing can gain at most {headroom:+.4f} over always calling `{best}`; a router below "
        f"{b.random:.4f} is worse than chance. (The {b.n_queries} evaluated test queries, the same as the "
        "leaderboard's.)"
    )
    data = {"oracle": b.oracle, "random": b.random, "best_single": b.best_single,
            "best_single_actor": best, "headroom": headroom, "n_test_queries": b.n_queries}
    return Section("Bounds: oracle, random, best single actor", md, data,
                   terms=["oracle", "best single actor", "random"])
