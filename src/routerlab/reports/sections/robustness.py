"""Audit section: routing robustness (SPEC 3; hse-diversity-and-routing-robustness.txt sec. 5). Offline variants
(character, word, syntax: those available) of the audit's test queries, p = 2 per level, seeded by the audit's
seed; rho of best-single (anchor 1), random (anchor 1/N) and the leaderboard's learned routers (knn, linear, mlp
when run). Every sentence is computed from the numbers.

Choices: at most ``MAX_QUERIES`` (300) test queries, a seeded sample (the audit's seed) so the section stays fast;
a router "keeps near-identical questions together" at a level when its rho there is at least ``KEEPS`` (0.9), and
it "breaks" at the first level, in the order of increasing semantic distance, where rho falls below that. A level
whose perturber is missing (not installed yet, or WordNet absent) is skipped and reported, never fatal; the
option ``robustness_levels`` names other levels (a plugin's, say). The
invariance check needs outcomes of the variants, which an ordinary table does not have: the section says so.
"""

from __future__ import annotations

import math
from typing import Any

from routerlab._words import plural, verb
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.metrics.bootstrap import MIN_QUERIES, unavailable
from routerlab.metrics.catalog import label
from routerlab.perturb.base import OFFLINE_LEVELS, level_class
from routerlab.protocols.base import run_protocol
from routerlab.protocols.full import Evaluation
from routerlab.protocols.robustness import NoVariants, Robustness, RobustnessSettings
from routerlab.reports.audit import AuditContext, audit_section, display_name
from routerlab.reports.blocks import Block, Decisions, Figure, Finding, Paragraph, Section, Table
from routerlab.reports.robustness_plot import plot_accuracy_vs_rho, plot_rho_by_level
from routerlab.reports.sections.leaderboard import has_text, n_boot, routed_decisions, router_specs
from routerlab.routers.base import get_router

MAX_QUERIES = 300
"""Test queries perturbed at most (a seeded sample beyond that)."""
MAX_QUERIES_QUICK = 100
"""... and in a quick run."""
TABLE_ID = "robustness-table"
RHO_ID = "robustness-rho-figure"
ACCURACY_ID = "robustness-accuracy-figure"
KEEPS = 0.9
"""rho at or above this at a level = the router keeps near-identical questions together there."""
P = 2
LEARNED = ("knn", "linear", "mlp")
RHO_PLOT = "robustness_rho_by_level.png"
ACCURACY_PLOT = "robustness_accuracy_vs_rho.png"


def _known_levels(levels: list[str]) -> tuple[list[str], dict[str, str]]:
    """The registered levels of ``levels``, and the others with why (a plugin's level that is not installed)."""
    known: list[str] = []
    skipped: dict[str, str] = {}
    for level in levels:
        try:
            level_class(level)
        except Exception as exc:  # a missing or broken level is reported, never fatal to the audit
            skipped[level] = f"{type(exc).__name__}: {exc}".strip().rstrip(".")
            continue
        known.append(level)
    return known, skipped


def classify(rob: Robustness, keeps: float = KEEPS) -> dict[str, dict[str, Any]]:
    """Per router: rho with CI, rho per level, its weakest level, the first level (run order) where rho < ``keeps``
    (None when none), whether it keeps near-identical questions together at every level, and where its rho sits
    between the anchors, (rho - 1/N) / (1 - 1/N)."""
    out: dict[str, dict[str, Any]] = {}
    u = rob.uniform_rho
    for r in rob.results:
        breaks = next((lv for lv in rob.levels if lv not in rob.meaning_changing
                       and r.rho_by_level.get(lv, math.nan) < keeps), None)
        k = r.kappa
        out[r.spec] = {"rho": r.rho, "rho_ci": list(r.rho_ci), "rho_by_level": dict(r.rho_by_level),
                       "kappa_rho": k.value if k is not None else math.nan,
                       "kappa_rho_ci": list(k.ci) if k is not None else [math.nan, math.nan],
                       "kappa_rho_flag": k.flag() if k is not None else None,
                       "weakest_level": r.weakest_level(), "weakest_cell": r.weakest_cell(),
                       "weakest_phrase": r.weakest_phrase(),
                       "weakest_rho": min((v for lv, v in r.rho_by_level.items()
                                           if not math.isnan(v) and lv not in rob.meaning_changing),
                                          default=math.nan),
                       "breaks_at": breaks, "keeps_together": breaks is None and not math.isnan(r.rho),
                       "between_anchors": (r.rho - u) / (1 - u) if u < 1 else math.nan,
                       "accuracy": r.accuracy}
    return out


def _kappa_text(v: dict[str, Any]) -> str:
    """kappa_rho with its interval; ``null (collapsed)`` where rho_chance = 1; ``-`` where undefined."""
    if v["kappa_rho_flag"]:
        return "null (collapsed)"
    value, (lo, hi) = v["kappa_rho"], v["kappa_rho_ci"]
    if math.isnan(value):
        return "-"
    return f"{value:.3f}" + ("" if math.isnan(lo) else f" [{lo:.3f}, {hi:.3f}]")


def findings(rob: Robustness, rows: dict[str, dict[str, Any]], keeps: float = KEEPS) -> list[str]:
    """Sentences computed from ``rows`` (never fixed claims)."""
    u = rob.uniform_rho
    out = []
    few = rob.n_test < MIN_QUERIES
    together = sorted(k for k, v in rows.items() if v["keeps_together"])
    broken = sorted(k for k, v in rows.items() if not v["keeps_together"])
    if together:
        out.append(f"Keep near-identical questions together at every level (rho >= {keeps}): "
                   f"{', '.join(f'`{k}`' for k in together)}.")
    if broken:
        out.append(f"Break (rho < {keeps} at some level): {', '.join(f'`{k}`' for k in broken)}.")
    for spec, v in rows.items():
        where = (f"breaks first at `{v['breaks_at']}` (rho {v['rho_by_level'][v['breaks_at']]:.3f})"
                 if v["breaks_at"] else f"holds at every level (rho >= {keeps})")
        ci = unavailable(rob.n_test) if few else f"[{v['rho_ci'][0]:.3f}, {v['rho_ci'][1]:.3f}]"
        out.append(f"`{spec}`: rho {v['rho']:.3f} {ci}, "
                   f"{100 * v['between_anchors']:.0f}% of the way from uniform random ({u:.3f}) to a fixed router "
                   f"(1); " + (f"{v['weakest_phrase']}; " if v["weakest_phrase"] else "") + f"{where}.")
    return out


def _applicable(specs: list[str], ctx: AuditContext) -> tuple[list[str], dict[str, str]]:
    """The routers of ``specs`` that can be trained on the audit's training split, and why the others cannot."""
    kept, skipped = [], {}
    for spec in specs:
        try:
            get_router(spec, seed=ctx.seed).check_applicable(ctx.train)
        except UsageError as exc:
            skipped[spec] = str(exc).rstrip(".")
            continue
        kept.append(spec)
    return kept, skipped


def _cap(ctx: AuditContext) -> int:
    return MAX_QUERIES_QUICK if ctx.quick else MAX_QUERIES


def combined_findings(rob: Robustness, rows: dict[str, dict[str, Any]], full: Evaluation | None
                      ) -> tuple[list[Finding], dict[str, Any]]:
    """The issue's "knn gains 6 points over the best single model but sends 31% of reworded queries to another
    model": per learned router, its paired gain over best-single from the leaderboard's full-observability run
    (when that ran in this audit) and the share of variants it routes elsewhere than their query, 1 - rho, with
    the level where that share is highest. The fixed and random anchors are left out."""
    paired = {r.spec: r.paired for r in full.results} if full is not None else {}
    out: list[Finding] = []
    data: dict[str, Any] = {}
    for spec, v in rows.items():
        if spec in ("best-single", "random") or math.isnan(v["rho"]):
            continue
        moved = 100 * (1 - v["rho"])
        mlo, mhi = 100 * (1 - v["rho_ci"][1]), 100 * (1 - v["rho_ci"][0])
        level = v["weakest_level"]
        worst = 100 * (1 - v["weakest_rho"]) if level else math.nan
        at = f", {worst:.0f}% at the `{level}` level" if level and len(v["rho_by_level"]) > 1 else ""
        few = rob.n_test < MIN_QUERIES  # no interval to quote (and none to rest on)
        ci = "" if few else f" (95% CI [{mlo:.0f}, {mhi:.0f}])"
        tail = f"sends {moved:.0f}% of reworded queries{ci} to another actor than the original query{at}"
        values: dict[str, float | int | str] = {"router": spec, "moved_percent": moved}
        if level:
            values.update(weakest_level=level, weakest_moved_percent=worst)
        p = paired.get(spec)
        interval: tuple[float, float] | None = None if few else (mlo, mhi)
        if p is not None and p.get("versus") == "best-single" and not math.isnan(p["ci"][0]):
            gain, glo, ghi = 100 * p["mu_o_difference"], 100 * p["ci"][0], 100 * p["ci"][1]
            values.update(gain_points=gain)
            interval = (glo, ghi)
            if glo > 0:
                head = (f"`{spec}` gains {gain:.1f} points over the best single actor (95% CI [{glo:+.1f}, "
                        f"{ghi:+.1f}]) but")
            else:
                head = (f"`{spec}` does not clearly beat the best single actor ({gain:+.1f} points, 95% CI "
                        f"[{glo:+.1f}, {ghi:+.1f}]) and")
            text = f"{head} {tail}."
        else:
            text = f"`{spec}` {tail}."
        out.append(Finding(text, TABLE_ID, values, interval))
        data[spec] = {**values, "interval": list(interval) if interval is not None else [math.nan, math.nan]}
    return out, data


def _decisions(rob: Robustness, test: RoutingTable) -> list[Decisions]:
    """Every measured router's choice on the original (unperturbed) sampled test queries, with its score."""
    ids = [str(q) for q in rob.test_ids.tolist()]
    pos = {str(q): i for i, q in enumerate(test.queries.ids.tolist())}
    if any(q not in pos for q in ids) or any(len(r.choice) != len(ids) for r in rob.results):
        return []
    return [routed_decisions("robustness-originals", rob.test_ids, rob.actor_names, rob.results, test)]


@audit_section("robustness", order=40, depends=("quick", "routers", "encoder", "robustness_levels"))
def robustness_section(table: RoutingTable, ctx: AuditContext) -> Section:
    title = "Routing robustness (meaning-preserving perturbations)"
    terms = ["rho", "kappa_rho", "perturbation level", "invariance check", "95% CI"]
    if not has_text(table):
        why = "the table has no query text to perturb"
        return Section(title, [Paragraph(f"Robustness skipped: {why}.")],
                       {"measured": False, "reason": why, "headline": f"robustness skipped: {why}"}, [], [],
                       name="robustness")
    levels, skipped_levels = _known_levels(list(ctx.options.get("robustness_levels", OFFLINE_LEVELS)))
    capped = ctx.split.test.size > _cap(ctx)
    specs = router_specs(ctx)
    chosen, skipped_routers = _applicable(["best-single", "random", *[r for r in LEARNED if r in specs]], ctx)
    def no_levels(skipped: dict[str, str]) -> Section:
        text = "No offline perturbation level is available, so robustness was not measured. " + " ".join(
            f"Level `{k}` skipped: {v}." for k, v in skipped.items())
        return Section(title, [Paragraph(text)], {"measured": False, "skipped_levels": skipped}, [], terms,
                       name="robustness")

    if not levels:
        return no_levels(skipped_levels)
    try:
        # the audit's evaluable test queries (a seeded sample of at most _cap), p = P per level that can be made
        settings = RobustnessSettings(levels=tuple(levels), variants=P, max_queries=_cap(ctx),
                                      skip_unavailable_levels=True, split=ctx.split_spec, n_boot=n_boot(ctx),
                                      encoder=str(ctx.options.get("encoder", "tfidf")))
        result = run_protocol("robustness", table, settings, ctx.seed, chosen, ctx.run_context)
    except NoVariants as exc:
        return no_levels({**skipped_levels, **exc.skipped})
    except UsageError as exc:  # e.g. no router applicable to a tiny table: reported, never fatal to the audit
        skipped_text = " ".join(f"Level `{k}` skipped: {v}." for k, v in skipped_levels.items())
        skipped_text += "".join(f" Router `{k}` skipped: {v}." for k, v in skipped_routers.items())
        text = f"Robustness was not measured: {exc}. {skipped_text}".strip()
        return Section(title, [Paragraph(text)], {"measured": False, "skipped_levels": skipped_levels,
                                                  "skipped_routers": skipped_routers, "reason": str(exc)}, [], terms,
                       name="robustness")
    rob: Robustness = result.native
    skipped_levels.update(result.artifacts["skipped_levels"])
    skipped_text = " ".join(f"Level `{k}` skipped: {v}." for k, v in skipped_levels.items())
    skipped_text += "".join(f" Router `{k}` skipped: {v}." for k, v in skipped_routers.items())
    rows = classify(rob)
    sentences = findings(rob, rows)
    invariance = ("Invariance check: untested. rho assumes every variant keeps its query's optimal actor; this "
                  "table has no outcomes of the variants, so that assumption is not checked here. To test it, "
                  "write the variants (`routerlab perturb`), run the table's actors on them (`routerlab collect "
                  "--variants FILE`) and pass the result to `routerlab robustness --outcomes`.")
    sample = (f"a seeded sample of {_cap(ctx)} of the {ctx.split.test.size} evaluated test queries"
              if capped else f"all {rob.n_test} evaluated test queries")
    intro = (f"Up to {P} variants per query at each offline level ({', '.join(rob.levels)}; seed {ctx.seed}) of "
             f"{sample}, {rob.perturbations.get('n_variants_used', 0)} variants in all, routed by routers trained "
             f"on the {result.n_train} training queries. rho is 1 for a fixed router and {rob.uniform_rho:.3f} "
             f"(1/N) in expectation for a uniform random one."
             + (f" A quick run: at most {MAX_QUERIES_QUICK} queries and {n_boot(ctx)} bootstrap resamples."
                if ctx.quick else ""))
    rho = label("rho")
    head = ["router", f"{rho} [95% CI]", f"{label('kappa_rho')} [95% CI]", *[f"{rho} {lv}" for lv in rob.levels],
            "weakest level", "breaks at"]
    body = [[k, f"{v['rho']:.3f} " + (unavailable(rob.n_test) if rob.n_test < MIN_QUERIES
                                      else f"[{v['rho_ci'][0]:.3f}, {v['rho_ci'][1]:.3f}]"), _kappa_text(v),
             *[f"{v['rho_by_level'][lv]:.3f}" for lv in rob.levels], v["weakest_cell"],
             v["breaks_at"] or "-"] for k, v in rows.items()]
    col_terms: list[str | None] = [None, "rho", "kappa_rho", *["rho" for _ in rob.levels], "perturbation level",
                                   "perturbation level"]
    paragraphs: list[Block] = [Paragraph(intro), Table(head, body, terms=col_terms, sortable=True, id=TABLE_ID),
                               Paragraph(" ".join(sentences)), Paragraph(invariance)]
    if skipped_text:
        paragraphs.append(Paragraph(skipped_text))
    name = display_name(table)
    plot_rho_by_level(rob, ctx.out_dir / RHO_PLOT, f"Routing robustness per level: {name}")
    plot_accuracy_vs_rho(rob, ctx.out_dir / ACCURACY_PLOT, f"Accuracy against rho: {name}")
    together = [k for k, v in rows.items() if v["keeps_together"]]
    headline = (f"robustness: {len(together)} of {plural(len(rows), 'router')} {verb(len(together), 'keeps', 'keep')} "
                "near-identical questions together "
                f"(rho >= {KEEPS} at every level); invariance untested")
    full = ctx.shared.get("full_evaluation")  # the leaderboard's run in this audit, for the gain half
    found, combined = combined_findings(rob, rows, full if isinstance(full, Evaluation) else None)
    if not found:
        found = [Finding(f"{len(together)} of {plural(len(rows), 'router')} {verb(len(together), 'keeps', 'keep')} "
                         "near-identical questions together (rho >= "
                         f"{KEEPS} at every level).", TABLE_ID, {"n_keep": len(together), "n_routers": len(rows)})]
    data = {"measured": True, "levels": list(rob.levels), "skipped_levels": skipped_levels,
            "skipped_routers": skipped_routers, "p": P, "quick": ctx.quick,
            "n_test": rob.n_test, "capped": capped, "threshold": KEEPS, "uniform_rho": rob.uniform_rho,
            "routers": rows, "findings": sentences, "combined": combined, "invariance": "untested",
            "headline": headline, "robustness": rob.to_dict()}
    figures = [Figure(RHO_PLOT, "rho per perturbation level, each router with its 95% interval", RHO_ID),
               Figure(ACCURACY_PLOT, "Accuracy on the original queries against rho", ACCURACY_ID)]
    return Section(title, paragraphs, data, figures, terms, name="robustness", findings=found,
                   decisions=_decisions(rob, ctx.test))
