"""Audit section: RouterWorld-Agentic's analyses (RouterWorld section 5.3, appendix I), shown when the table holds
agent episodes, skipped with its reason otherwise.

It runs the registered protocol ``agentic`` (:mod:`routerlab.protocols.agentic`, what ``routerlab agentic`` runs)
on the audit's split, encoder and seed, sharing the audit's encoded features, and only renders its result: the
routers on the episodes (episode latency), steps per actor, planning steps against episode latency, success by
planning steps and the routers' spread on the episodes. The audit has no single-turn table, so the compression
shows the agentic side; ``routerlab agentic --single-turn TABLE`` adds the comparison. Routers: the audit's
``--routers`` when given, else the protocol's default set (the quick set under ``--quick``); 1,000 bootstrap
resamples (200 with ``--quick``)."""

from __future__ import annotations

import math
from typing import Any

from routerlab.data.table import RoutingTable
from routerlab.metrics.bootstrap import MIN_QUERIES
from routerlab.protocols.agentic import POOLED, AgenticAnalysis, default_routers
from routerlab.protocols.base import run_protocol
from routerlab.reports.agentic_report import (
    bucket_rows,
    compression_rows,
    outcome_rows,
    planning_rows,
    spread_lines,
    steps_rows,
)
from routerlab.reports.audit import AuditContext, audit_section, left_out
from routerlab.reports.blocks import Block, Finding, Paragraph, Section, Table
from routerlab.reports.evaluation import leaderboard_table
from routerlab.reports.sections.leaderboard import decisions, n_boot

NAME = "agentic"
TITLE = "Agentic episodes: routers, steps and planning"
QUICK_LEARNED = ("knn", "linear")
STEPS_ID, PLANNING_ID, ROUTERS_ID, COMPRESSION_ID = ("agentic-steps", "agentic-planning", "agentic-routers",
                                                     "agentic-compression")


def _skipped(reason: str) -> Section:
    return Section(TITLE, [Paragraph(f"Skipped: {reason}.")], {"measured": False, "reason": reason}, name=NAME)


def agentic_routers(table: RoutingTable, ctx: AuditContext) -> list[str]:
    """The audit's ``routers`` option when given, else the protocol's default set (under ``--quick`` the bounds,
    best-single, each fixed actor, knn and linear)."""
    if "routers" in ctx.options:
        return [str(r) for r in ctx.options["routers"]]
    if ctx.quick:
        return ["oracle", "random", "best-single", *(f"fixed:actor={a}" for a in table.actor_names), *QUICK_LEARNED]
    return default_routers(table)


def _findings(a: AgenticAnalysis) -> tuple[list[Finding], list[dict[str, str]]]:
    """The steps and the planning slope of the actors, as sentences quoting their intervals."""
    found: list[Finding] = []
    skipped: list[dict[str, str]] = []
    actors = [s for s in a.steps if s.actor != POOLED]
    if actors:
        parts = [f"`{s.actor}` {s.median['model'].value:g} (mean {s.mean['model'].value:.2f})" for s in actors]
        found.append(Finding("Median model calls (planning steps) per episode: " + ", ".join(parts) + ".",
                             STEPS_ID, {f"model_steps_median:{s.actor}": s.median["model"].value for s in actors}))
    for p in a.planning:
        if p.actor == POOLED or p.reason:
            continue
        if p.episodes < MIN_QUERIES or not math.isfinite(p.slope_s.lo):
            skipped.append(left_out(f"the seconds one model call adds for `{p.actor}`",
                                    f"its interval would rest on {p.episodes} episodes, fewer than {MIN_QUERIES}"))
            continue
        found.append(Finding(
            f"On `{p.actor}`'s episodes each extra model call adds {p.slope_s.value:.2f} s of episode latency "
            f"(95% CI [{p.slope_s.lo:.2f}, {p.slope_s.hi:.2f}]); Spearman's rho between model calls and latency "
            f"{p.spearman.value:.2f} [{p.spearman.lo:.2f}, {p.spearman.hi:.2f}].", PLANNING_ID,
            {"actor": p.actor, "seconds_per_step": p.slope_s.value, "planning_spearman": p.spearman.value},
            (p.slope_s.lo, p.slope_s.hi)))
    return found, skipped


@audit_section(NAME, order=36, depends=("quick", "routers", "encoder"))
def agentic_section(table: RoutingTable, ctx: AuditContext) -> Section:
    if table.episodes is None:
        return _skipped("the table holds no agent episodes (one completion per cell); a table from routerlab "
                        "collect --agent or routerlab import steps has them")
    settings: dict[str, Any] = {"split": ctx.split_spec, "encoder": str(ctx.options.get("encoder", "tfidf")),
                                "n_boot": n_boot(ctx), "skip_inapplicable": True}
    result = run_protocol("agentic", table, settings, ctx.seed, agentic_routers(table, ctx), ctx.run_context)
    a: AgenticAnalysis = result.native
    c = a.compression
    blocks: list[Block] = [
        Paragraph(f"{a.episodes} episodes. Routers choose one actor per task from its text; Acc@1-L, DCG and L-DCG "
                  "rank the actors by episode latency (model time plus tool and environment time). Step counts "
                  "describe every episode of the table; planning steps are an episode's model calls."),
        leaderboard_table(a.evaluation, ROUTERS_ID),
        Table(*steps_rows(a), id=STEPS_ID),
        Table(*outcome_rows(a)),
        Table(*planning_rows(a), id=PLANNING_ID),
        Table(*bucket_rows(a)),
        Paragraph(f"Performance compression: the variance of each metric across the non-collapsed learned routers "
                  f"(collapsed: one actor takes >= {c.collapse:.0%} of the test queries), in percentage points "
                  "squared; routerlab agentic --single-turn TABLE compares it with a single-turn table of the same "
                  "actors."),
        Table(*compression_rows(a), id=COMPRESSION_ID),
        Paragraph(". ".join(line.strip() for line in spread_lines(c.agentic)) + "."),
    ]
    if a.notes:
        blocks.append(Paragraph("Notes: " + "; ".join(a.notes) + "."))
    found, skipped = _findings(a)
    pooled = next((s for s in a.steps if s.actor == POOLED), a.steps[0] if a.steps else None)
    headline = f"agentic: {a.episodes} episodes" + (
        f", median {pooled.median['model'].value:g} model calls per episode" if pooled is not None else "")
    data = {"measured": True, "headline": headline, "skipped_findings": skipped, "skipped_routers":
            dict(result.skipped), **a.to_dict(),
            "records": [r.to_dict() for r in result.records]}
    return Section(TITLE, blocks, data, [], ["mu_o", "acc_at_1_l", "l_dcg", "95% CI"], name=NAME, findings=found,
                   decisions=[decisions(NAME, a.evaluation, ctx.test)])
