"""Audit section: what the table holds and whether its data can be trusted (duplicates, and leaks
between the train and test queries of the split the audit actually evaluates)."""

from __future__ import annotations

from routerlab.data.quality import quality_report
from routerlab.data.table import RoutingTable
from routerlab.reports.audit import AuditContext, audit_section
from routerlab.reports.blocks import Block, Paragraph, Preformatted, Section
from routerlab.reports.text import info_text


@audit_section("table", order=0)
def table_section(table: RoutingTable, ctx: AuditContext) -> Section:
    info = table.describe()
    q = quality_report(table, split=ctx.split)
    info["quality"] = q
    info["train_test_overlap"] = q["train_test_overlap"]  # the leak line counts the audited split's leaks
    checked = (f"the audit's {ctx.split.kind} split: {ctx.split.train.size} train against {ctx.split.test.size} "
               "evaluated test queries")
    if q["train_test_overlap"]:
        notes = [f"**Leak:** {q['train_test_overlap']} of the {ctx.split.test.size} evaluated test queries have "
                 f"the same text as a training query (checked on {checked}); learned routers' scores on them "
                 "are optimistic."]
    else:
        notes = [f"No leak: no evaluated test query has the same text as a training query (checked on "
                 f"{checked})."]
    if q["queries_with_no_observed_score"]:
        notes.append(f"{q['queries_with_no_observed_score']} queries have no observed score at all.")
    by = ", ".join(f"{k or '(none)'} {v}" for k, v in q["train_test_overlap_by_dataset"].items())
    leak_line = (f"leaks        {q['train_test_overlap']} evaluated test queries share their text with a training "
                 f"query of the audit's {ctx.split.kind} split" + (f" ({by})" if by else ""))
    text = "\n".join(leak_line if line.startswith("leaks ") else line for line in info_text(info).splitlines())
    blocks: list[Block] = [Preformatted(text), *(Paragraph(n) for n in notes)]
    return Section("The table", blocks, info, terms=["duplicates", "leaks"])
