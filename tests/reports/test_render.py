"""The report's document model rendered to Markdown: exact text for hand-built sections."""

from __future__ import annotations

import pytest

from routerlab.reports.blocks import Definition, Definitions, Figure, Paragraph, Preformatted, Section, Table
from routerlab.reports.render import render_markdown


def test_sections_render_to_exact_markdown() -> None:
    head = Section("routerlab audit: t", [Paragraph("Table hash `abc`."), Paragraph("Second **paragraph**.")],
                   level=1)
    body = Section("Bounds", [
        Preformatted("rows   3\nactors 2"),
        Table(["bound", "mean score on test"], [["oracle", "0.9000"], ["random `r`", "0.5000"]]),
        Paragraph("Routing can gain at most +0.1000.  "),  # trailing blank space of the body is dropped
    ], data={"oracle": 0.9}, figures=[Figure("a.png"), Figure("b.png", caption="curve")])
    glossary = Section("What the numbers mean", [Definitions([Definition("mu_o", "mean score."),
                                                              Definition("V_B", "ratio.", "`v_b` in audit.json")])])
    assert render_markdown([head, body, glossary]) == (
        "# routerlab audit: t\n\nTable hash `abc`.\n\nSecond **paragraph**.\n"
        "\n"
        "## Bounds\n\n```\nrows   3\nactors 2\n```\n\n"
        "| bound | mean score on test |\n|---|---|\n| oracle | 0.9000 |\n| random `r` | 0.5000 |\n\n"
        "Routing can gain at most +0.1000.\n"
        "\n![a.png](a.png)\n"
        "\n![curve](b.png)\n"
        "\n"
        "## What the numbers mean\n\n- **mu_o**: mean score.\n- **V_B** (`v_b` in audit.json): ratio.\n"
    )


def test_table_rows_must_match_the_header() -> None:
    with pytest.raises(ValueError, match="2 cells"):
        Table(["a", "b"], [["1"]])


def test_a_finding_links_to_the_heading_of_the_section_that_holds_its_target() -> None:
    from routerlab.reports.blocks import Finding, Findings
    from routerlab.reports.render import heading_slug

    parts = [
        Section("Findings", [Findings([Finding("A gains 6 points.", target="lb-table"),
                                       Finding("Curve flattens.", target="fig-scaling-curve"),
                                       Finding("Unknown target.", target="nowhere")])], name="findings"),
        Section("Leaderboard (full observability)", [Table(["router"], [["knn"]], id="lb-table")], name="leaderboard"),
        Section("Scaling: curve", [], figures=[Figure("scaling_curve.png")], name="scaling"),
    ]
    md = render_markdown(parts)
    assert "- A gains 6 points. (see [Leaderboard (full observability)](#leaderboard-full-observability))" in md
    assert "- Curve flattens. (see [Scaling: curve](#scaling-curve))" in md
    assert "- Unknown target.\n" in md
    assert heading_slug("Bounds: oracle, random, best single actor") == "bounds-oracle-random-best-single-actor"
