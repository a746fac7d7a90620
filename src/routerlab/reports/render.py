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
)


def render_markdown(sections: Iterable[Section]) -> str:
    """The sections as one Markdown document, each separated from the next by a blank line."""
    return "\n".join(section_markdown(s) for s in sections)


def section_markdown(section: Section) -> str:
    """One section: ``#``-heading of its level, its blocks, then its figures, each a paragraph."""
    body = "\n\n".join(block_markdown(b) for b in section.blocks).strip()
    parts = [f"{'#' * section.level} {section.title}\n\n{body}\n", *(block_markdown(f) + "\n" for f in section.figures)]
    return "\n".join(parts)


def block_markdown(block: Block) -> str:
    """One block as Markdown, without surrounding blank lines."""
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
        return "\n".join(f"- {f.text}" + (f" ([{f.target}](#{f.target}))" if f.target else "") for f in block.items)
    raise TypeError(f"not a report block: {type(block).__name__}")


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"
