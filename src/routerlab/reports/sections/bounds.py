"""Audit section: oracle, random and best-single bounds on the evaluated test queries (SPEC 4), and the headroom
routing has (oracle minus best single actor) with a bootstrap interval over the test queries (SPEC 7)."""

from __future__ import annotations

import numpy as np

from routerlab.data.table import RoutingTable
from routerlab.metrics.bootstrap import bootstrap_ci, unavailable
from routerlab.metrics.bounds import bounds
from routerlab.reports.audit import AuditContext, audit_section
from routerlab.reports.blocks import Block, Finding, Paragraph, Section, Table

TABLE_ID = "bounds-table"


@audit_section("bounds", order=10, depends=())
def bounds_section(table: RoutingTable, ctx: AuditContext) -> Section:
    test = ctx.test.score
    b = bounds(test, ctx.train.score)
    best = table.actor_names[b.best_single_actor]
    headroom = b.oracle - b.best_single
    # per-query gain of a perfect router over always calling the best single actor: its mean is the headroom
    gain = np.max(test, axis=1).astype(np.float64) - test[:, b.best_single_actor].astype(np.float64)
    est = bootstrap_ci(gain, 1000, seed=ctx.seed)  # cheap at any size: one vector of test queries
    lo, hi = est.lo, est.hi
    ci = unavailable(ctx.n_test) if ctx.few_queries else f"[{lo:+.4f}, {hi:+.4f}]"
    blocks: list[Block] = [
        Table(["bound", "mean score on test"], [
            ["oracle (best actor per query)", f"{b.oracle:.4f}"],
            [f"best single actor on train: `{best}`", f"{b.best_single:.4f}"],
            ["uniform random actor", f"{b.random:.4f}"],
        ], terms=[None, "mu_o"], id=TABLE_ID),
        Paragraph(f"Routing can gain at most {headroom:+.4f} (95% CI {ci}) over always calling "
                  f"`{best}`; a router below {b.random:.4f} is worse than chance. (The {b.n_queries} evaluated test "
                  "queries, the same as the leaderboard's.)"),
    ]
    data = {"oracle": b.oracle, "random": b.random, "best_single": b.best_single,
            "best_single_actor": best, "headroom": headroom, "headroom_ci": [lo, hi], "headroom_points": 100 * headroom,
            "headroom_points_ci": [100 * lo, 100 * hi], "n_test_queries": b.n_queries}
    if headroom <= 1e-12:
        text = (f"Routing cannot beat always calling `{best}` here: on every evaluated test query no actor scores "
                f"above it (oracle {b.oracle:.3f} = best single actor).")
    else:  # below MIN_QUERIES test queries the sentence quotes no interval (there is none)
        interval = "" if ctx.few_queries else f" (95% CI [{100 * lo:.1f}, {100 * hi:.1f}])"
        text = (f"A perfect router would score {b.oracle:.3f} against {b.best_single:.3f} for always calling `{best}`: "
                f"at most {100 * headroom:.1f} points{interval} for routing to win on this table.")
    finding = Finding(text, TABLE_ID, {"oracle": b.oracle, "best_single": b.best_single, "best_single_actor": best,
                                       "headroom_points": 100 * headroom},
                      None if ctx.few_queries else (100 * lo, 100 * hi))
    return Section("Bounds: oracle, random, best single actor", blocks, data,
                   terms=["oracle", "best single actor", "random", "mu_o", "95% CI"], name="bounds", findings=[finding])
