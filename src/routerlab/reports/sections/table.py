"""Audit section: what the table holds and whether its data can be trusted (duplicates, leaks)."""

from __future__ import annotations

from routerlab.data.quality import quality_report
from routerlab.data.table import RoutingTable
from routerlab.reports.audit import AuditContext, Section, audit_section
from routerlab.reports.text import info_text


@audit_section("table", order=0)
def table_section(table: RoutingTable, ctx: AuditContext) -> Section:
    info = table.describe()
    info["quality"] = quality_report(table)
    q = info["quality"]
    notes = []
    if q["train_test_overlap"]:
        notes.append(f"**Leak:** {q['train_test_overlap']} held-out queries also occur in train; scores of "
                     "learned routers on them are optimistic.")
    if q["queries_with_no_observed_score"]:
        notes.append(f"{q['queries_with_no_observed_score']} queries have no observed score and are left "
                     "out of every bound.")
    md = "```\n" + info_text(info) + "\n```\n" + "\n".join(notes)
    return Section("The table", md, info)
