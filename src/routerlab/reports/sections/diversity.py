"""Audit section: is the pool diverse enough for routing to mean anything, and which actors carry
that diversity (SPEC 2: HSE, greedy max-HSE coreset, specialist-society comparison)."""

from __future__ import annotations

from typing import Any

import numpy as np

from routerlab.data.table import RoutingTable
from routerlab.errors import RouterlabError
from routerlab.metrics.sources import cite
from routerlab.reports.audit import AuditContext, audit_section, display_name, left_out
from routerlab.reports.blocks import Figure, Finding, Paragraph, Section

MAX_GREEDY = 100  # the audit's greedy curve stops here on large pools ...
MAX_GREEDY_HUGE = 30  # ... and here beyond 2,000 actors (each step costs O(N s log s))
MAX_GREEDY_QUICK = 30  # a quick run stops the greedy here
CURVE_ID = "diversity-curve"
DENDROGRAM_ID = "diversity-dendrogram"


def verdict(norm: float) -> str:
    """A plain reading of normalised HSE (rough bands; the paper's real pools sit near 0.2-0.35)."""
    if norm < 0.05:
        return "the actors behave almost identically, so routing between them can gain little"
    if norm < 0.2:
        return "the actors behave much alike, so a router has few distinct behaviours to choose from"
    if norm < 0.5:
        return "the pool has some distinct behaviours for a router to exploit"
    return "the actors behave very differently, so which one answers matters a lot"


def _names(names: list[str], limit: int = 8) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


@audit_section("diversity", order=20, depends=("quick",))
def diversity_section(table: RoutingTable, ctx: AuditContext) -> Section:
    from routerlab.protocols.base import run_protocol
    from routerlab.protocols.society import SocietyReport, SocietySettings
    from routerlab.reports.society_plots import plot_coreset_curve, plot_dendrogram

    title = "Diversity of the pool (HSE)"
    metric = str(ctx.options.get("society_metric", "cosine"))
    linkage = str(ctx.options.get("society_linkage", "single"))
    n = ctx.train.n_actors
    cap = MAX_GREEDY_HUGE if n > 2000 else MAX_GREEDY_QUICK if ctx.quick else MAX_GREEDY
    datasets = np.unique(ctx.train.queries.dataset.astype(str))
    datasets = datasets[datasets != ""]
    try:
        # the behaviour vectors: the training side of the audit's split (its spec remade with the audit's seed)
        settings = SocietySettings(metric=metric, linkage=linkage, coreset=2 if n >= 2 else None,
                                   by=("dataset",) if datasets.size > 1 else None, split=ctx.split_spec,
                                   curve_max=cap)
        report: SocietyReport = run_protocol("society", table, settings, seed=ctx.seed).native
    except RouterlabError as exc:
        return Section(title, [Paragraph(f"Diversity cannot be measured on the training queries: {exc}")],
                       {"error": str(exc)}, name="diversity")
    div, notes = report.diversity, report.notes
    data: dict[str, Any] = div.to_dict(curve=False)
    lines = [
        f"**Diversity.** Normalised HSE is {div.hse_normalized:.3f} (HSE {div.hse:.3f} of at most "
        f"{div.max_hse:.3f} for {n} actors; {metric} distance, {linkage} linkage, on {div.n_items} "
        f"training queries): {verdict(div.hse_normalized)}."
    ]
    if ctx.quick:
        lines.append(f"(A quick run: the greedy coreset stops at {MAX_GREEDY_QUICK} actors and the random "
                     "baseline has 10 draws per size.)")
    findings = [Finding(f"This pool's diversity (normalised HSE) is {div.hse_normalized:.2f} on a 0-1 scale: "
                        f"{verdict(div.hse_normalized)}.", DENDROGRAM_ID if n >= 2 else "diversity",
                        {"hse_normalized": div.hse_normalized, "n_actors": n})]
    figures: list[Figure] = []
    cs = report.coreset
    if cs is not None and n >= 2:
        data["coreset"] = cs.to_dict()
        if cs.size_90 is not None:
            core = [div.names[i] for i in cs.order[: cs.size_90]]
            acc = cs.curve[cs.size_90 - 1].oracle_accuracy
            full_acc = report.pool_oracle_accuracy
            assert full_acc is not None  # computed with every coreset
            data["coreset"]["order"] = core
            data["coreset"]["k"] = cs.size_90
            if acc is not None and acc < full_acc - 0.02:
                meaning = (f"but together they reach an oracle accuracy of only {acc:.3f} against {full_acc:.3f} "
                           "for the whole pool, so the most diverse actors are not the strongest ones (the "
                           "joint criterion, `routerlab society --coreset K --alpha A`, trades the two)")
            else:
                meaning = (f"and keep the pool's oracle accuracy ({acc:.3f} against {full_acc:.3f}), so the "
                           "other actors add little that is new")
            if div.hse > 0:
                lines.append(
                    f"**Coreset.** {cs.size_90} of {n} actors ({_names(core)}) already carry 90% of the pool's "
                    f"diversity (95% with {cs.size_95}), {meaning}."
                )
                findings.append(Finding(
                    f"{cs.size_90} of {n} {'actors' if n > 1 else 'actor'} carry 90% of this pool's diversity "
                    f"({_names(core, 4)}); the other {n - cs.size_90} add little diversity.", CURVE_ID,
                    {"size_90": cs.size_90, "n_actors": n}))
            else:  # 90% of no diversity is no finding
                why = "the pool has no diversity (HSE 0): there is none to take a share of"
                lines.append(f"**Coreset.** Not computed as a share: {why}.")
                data["skipped_findings"] = [left_out("how many actors carry 90% of the pool's diversity", why)]
        else:
            lines.append(f"**Coreset.** The greedy stopped at {cap} actors before reaching 90% of "
                         "the pool's HSE: the diversity is spread over many actors.")
            findings.append(Finding(f"The diversity is spread over many actors: the {cap} most diverse of {n} (where "
                                    "the greedy stops on this pool) carry less than 90% of the pool's.", CURVE_ID,
                                    {"greedy_cap": cap, "n_actors": n}))
            data["coreset"]["greedy_cap"] = cap
        above = [p.size for p in cs.curve if p.hse > div.hse * (1 + 1e-9) + 1e-12]
        why = (f"a duplicated or near-duplicate actor lowers HSE ({cite('2')}), so leaving such actors out can "
               "raise it")
        if above:
            lines.append(f"**Above the whole pool.** The greedy subset of {above[0]} actors has more HSE than all "
                         f"{n} together: {why}.")
        else:
            lines.append(f"(A greedy subset can score above the whole pool, since {why}; not the case here.)")
        rnd = report.random_baseline(10 if ctx.quick else 30, ctx.seed)
        name = display_name(table)
        figures.append(Figure(plot_coreset_curve(cs, ctx.out_dir / "diversity_curve.png", rnd,
                                                 title=f"Diminishing returns of diversity: {name}").name,
                              "HSE of the greedy max-HSE subsets by size, against random subsets", CURVE_ID))
        figures.append(Figure(plot_dendrogram(div, ctx.out_dir / "diversity_dendrogram.png",
                                              title=f"{name}: {n} actors, HSE {div.hse:.3f} (normalised "
                                                    f"{div.hse_normalized:.3f})").name,
                              "How the actors cluster by behaviour (dendrogram) and H(h), whose area is the HSE",
                              DENDROGRAM_ID))
    if report.specialists:
        sp = report.specialists[0]
        data["specialists_by_dataset"] = {"n_experts": sp["n_experts"], "hse": sp["hse"],
                                          "hse_normalized": sp["hse_normalized"]}
        lines.append(
            f"**Specialists.** One perfect specialist per dataset ({sp['n_experts']} experts) would give HSE "
            f"{sp['hse']:.3f} (normalised {sp['hse_normalized']:.3f}); the real pool's {div.hse:.3f} is "
            f"{div.hse / sp['hse']:.0%} of that, a measure of how far its actors are from being "
            "complementary specialists." if sp["hse"] > 0 else
            "**Specialists.** The datasets give no distinct specialists to compare with."
        )
    if n < 2:
        lines.append("With fewer than two actors there is nothing to route between.")
    for note in notes:
        lines.append(f"Note: {note}.")
    terms = ["hse", "hse_normalized", *(["coreset"] if n >= 2 else []),
             *(["specialists"] if "specialists_by_dataset" in data else [])]
    data["quick"] = ctx.quick
    return Section(title, [Paragraph(line) for line in lines], data, figures, terms, name="diversity",
                   findings=findings)
