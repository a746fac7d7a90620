"""Audit section: oracle, random and best-single bounds on the evaluated test queries (SPEC 4)."""

from __future__ import annotations

from routerlab.data.table import RoutingTable
from routerlab.metrics.bounds import bounds
from routerlab.reports.audit import AuditContext, audit_section
from routerlab.reports.blocks import Block, Paragraph, Section, Table


@audit_section("bounds", order=10)
def bounds_section(table: RoutingTable, ctx: AuditContext) -> Section:
    b = bounds(ctx.test.score, ctx.train.score)
    best = table.actor_names[b.best_single_actor]
    headroom = b.oracle - b.best_single
    blocks: list[Block] = [
        Table(["bound", "mean score on test"], [
            ["oracle (best actor per query)", f"{b.oracle:.4f}"],
            [f"best single actor on train: `{best}`", f"{b.best_single:.4f}"],
            ["uniform random actor", f"{b.random:.4f}"],
        ]),
        Paragraph(f"Routing can gain at most {headroom:+.4f} over always calling `{best}`; a router below "
                  f"{b.random:.4f} is worse than chance. (The {b.n_queries} evaluated test queries, the same as the "
                  "leaderboard's.)"),
    ]
    data = {"oracle": b.oracle, "random": b.random, "best_single": b.best_single,
            "best_single_actor": best, "headroom": headroom, "n_test_queries": b.n_queries}
    return Section("Bounds: oracle, random, best single actor", blocks, data,
                   terms=["oracle", "best single actor", "random"])
