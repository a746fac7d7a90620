"""Markdown renderer of the report's document model (:mod:`routerlab.reports.blocks`), for report.md.

Every section is its heading, a blank line, its blocks separated by blank lines, then its figures; the
HTML renderer (:mod:`routerlab.reports.html`) walks the same blocks.
"""

from __future__ import annotations

from collections.abc import Iterable

from routerlab.reports.blocks import (
    Block,
    Definitions,
    Figure,
    Findings,
    Paragraph,
    Preformatted,
    Section,
    Table,
    figure_id,
    section_id,
)


def render_markdown(sections: Iterable[Section]) -> str:
    """The sections as one Markdown document, each separated from the next by a blank line. A finding's
    link points at the heading of the section holding its target (Markdown has no anchors of its own for
    tables and figures; the heading's slug is what GitHub and most viewers generate)."""
    parts = list(sections)
    headings = _headings(parts)
    return "\n".join(section_markdown(s, headings) for s in parts)


def _headings(sections: list[Section]) -> dict[str, str]:
    """Anchor (the HTML page's own: section, table and figure ids) -> title of the section that holds it."""
    out: dict[str, str] = {}
    for sec in sections:
        ids = [section_id(sec)]
        for b in [*sec.blocks, *sec.figures]:
            if isinstance(b, Table) and b.id:
                ids.append(b.id)
            if isinstance(b, Figure):
                ids.append(figure_id(b))
        for i in ids:
            out.setdefault(i, sec.title)
    return out


def heading_slug(title: str) -> str:
    """The anchor most Markdown viewers give a heading: lower case, punctuation dropped, spaces as hyphens."""
    kept = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def section_markdown(section: Section, headings: dict[str, str] | None = None) -> str:
    """One section: ``#``-heading of its level, its blocks, then its figures, each a paragraph."""
    body = "\n\n".join(block_markdown(b, headings) for b in section.blocks).strip()
    parts = [f"{'#' * section.level} {section.title}\n\n{body}\n", *(block_markdown(f) + "\n" for f in section.figures)]
    return "\n".join(parts)


def block_markdown(block: Block, headings: dict[str, str] | None = None) -> str:
    """One block as Markdown, without surrounding blank lines; ``headings`` (anchor -> section title) turns a
    finding's target into a link to that section's heading."""
    if isinstance(block, Paragraph):
        return block.text
    if isinstance(block, Table):
        lines = [_row(block.header), "|" + "---|" * len(block.header), *(_row(r) for r in block.rows)]
        return "\n".join(lines)
    if isinstance(block, Preformatted):
        return f"```\n{block.text}\n```"
    if isinstance(block, Figure):
        return f"![{block.caption or block.path}]({block.path})"
    if isinstance(block, Definitions):
        return "\n".join(f"- **{d.term}**" + (f" ({d.note})" if d.note else "") + f": {d.text}" for d in block.items)
    if isinstance(block, Findings):
        return "\n".join(f"- {f.text}" + _see(f.target, headings or {}) for f in block.items)
    raise TypeError(f"not a report block: {type(block).__name__}")


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _see(target: str, headings: dict[str, str]) -> str:
    """`` (see [Section title](#slug))`` for a finding whose target is known, else nothing."""
    title = headings.get(target)
    return f" (see [{title}](#{heading_slug(title)}))" if title else ""
