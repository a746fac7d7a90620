"""Audit section: what the table holds and whether its data can be trusted (duplicates, and leaks
between the train and test queries of the split the audit actually evaluates)."""

from __future__ import annotations

from typing import Any

from routerlab._words import plural, verb
from routerlab.data.quality import quality_report
from routerlab.data.table import RoutingTable
from routerlab.reports.audit import AuditContext, audit_section
from routerlab.reports.blocks import Block, Finding, Paragraph, Preformatted, Section
from routerlab.reports.text import info_text

MAX_ACTOR_LINES = 30
"""Beyond this many actors the summary lists the best and the worst by mean score, not all of them."""


def _actor_lines(lines: list[str], info: dict[str, Any]) -> list[str]:
    """The summary's lines with the per-actor list cut to the best and worst actors on a large pool."""
    n = len(info["mean_score"])
    if n <= MAX_ACTOR_LINES:
        return lines
    head = lines[: len(lines) - n]
    ranked = sorted(info["mean_score"].items(), key=lambda kv: -(kv[1] if kv[1] is not None else -1.0))
    show = [*ranked[:20], *ranked[-5:]]

    def fmt(a: str, v: float | None) -> str:
        return f"  {a:40s} {'-' if v is None else f'{v:.3f}'}"

    return [*head[:-1], f"actors       mean score (observed cells): the 20 best and the 5 worst of {n}",
            *(fmt(a, v) for a, v in show[:20]), f"  ... {n - 25} more", *(fmt(a, v) for a, v in show[20:])]


@audit_section("table", order=0, depends=())
def table_section(table: RoutingTable, ctx: AuditContext) -> Section:
    info = table.describe()
    q = quality_report(table, split=ctx.split)
    info["quality"] = q
    info["train_test_overlap"] = q["train_test_overlap"]  # the leak line counts the audited split's leaks
    n_test = ctx.split.test.size
    checked = (f"the audit's {ctx.split.kind} split: {ctx.split.train.size} train against {n_test} "
               "evaluated test queries")
    no_text = q["empty_texts"] == table.n_queries
    findings: list[Finding] = []
    if no_text:
        notes = ["Leaks and duplicates cannot be checked: the table has no query text."]
        findings.append(Finding("Leaks and duplicates were not checked: the table has no query text.", "table",
                                {"leaks": 0, "duplicates": 0}))
    elif q["train_test_overlap"]:
        leaks = q["train_test_overlap"]
        notes = [f"**Leak:** {leaks} of the {n_test} evaluated test queries have the same text as a training "
                 f"query (checked on {checked}); learned routers' scores on them are optimistic."]
        findings.append(Finding(
            f"{leaks} of the {n_test} evaluated test queries ({leaks / n_test:.1%}) repeat a training query's text "
            "word for word, so learned routers' scores on them are optimistic.", "table",
            {"leaks": leaks, "n_test": n_test}))
    else:
        notes = [f"No leak: no evaluated test query has the same text as a training query (checked on "
                 f"{checked})."]
        findings.append(Finding(f"No leak: none of the {n_test} evaluated test queries repeats a training "
                                "query's text.", "table", {"leaks": 0, "n_test": n_test}))
    dup = int(q["duplicate_texts"])
    if dup and not no_text:
        differ = int(q["repeated_texts_with_different_scores"])
        findings.append(Finding(
            f"{plural(dup, 'query')} {verb(dup, 'repeats', 'repeat')} an earlier query's text"
            + (f"; {differ} of the repeated texts carry different scores, a sign of noisy labels." if differ
               else ", with the same scores."), "table",
            {"duplicates": dup, "repeated_texts_with_different_scores": differ}))
    if q["queries_with_no_observed_score"]:
        none = int(q["queries_with_no_observed_score"])
        notes.append(f"{plural(none, 'query')} {verb(none, 'has', 'have')} no observed score at all.")
    by = ", ".join(f"{k or '(none)'} {v}" for k, v in q["train_test_overlap_by_dataset"].items())
    leak_line = (f"leaks        {q['train_test_overlap']} evaluated test queries share their text with a training "
                 f"query of the audit's {ctx.split.kind} split" + (f" ({by})" if by else ""))
    lines = [leak_line if line.startswith("leaks ") else line for line in info_text(info).splitlines()]
    blocks: list[Block] = [Preformatted("\n".join(_actor_lines(lines, info))), *(Paragraph(n) for n in notes)]
    info["leaks_checked"] = not no_text
    info["n_test"] = n_test
    return Section("The table", blocks, info, terms=["duplicates", "leaks"], name="table", findings=findings)
