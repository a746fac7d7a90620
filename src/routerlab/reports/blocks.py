"""The report's document model: a :class:`Section` is a title and a list of blocks, so a section says
*what* it shows (sentences, a table, a figure) and a renderer (:mod:`routerlab.reports.render`) decides
how it looks: Markdown today, HTML later, from the same blocks.

Text inside blocks may carry the two inline marks the report uses, ```code``` and ``**bold**``; a
renderer translates them for its format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Paragraph:
    """One or more sentences of running text."""

    text: str


@dataclass(frozen=True)
class Table:
    """A table: a header row and rows of cell texts, each row as long as the header."""

    header: list[str]
    rows: list[list[str]]

    def __post_init__(self) -> None:
        bad = [r for r in self.rows if len(r) != len(self.header)]
        if bad:
            raise ValueError(f"table rows must have {len(self.header)} cells, got {[len(r) for r in bad]}")


@dataclass(frozen=True)
class Preformatted:
    """Text shown exactly as given, in a fixed-width font (the table summary)."""

    text: str


@dataclass(frozen=True)
class Figure:
    """An image file beside the report; ``caption`` defaults to the file name."""

    path: str
    caption: str = ""


@dataclass(frozen=True)
class Definition:
    """One glossary entry: ``term`` (with an optional ``note`` such as where it appears) and what it means."""

    term: str
    text: str
    note: str = ""


@dataclass(frozen=True)
class Definitions:
    """A glossary: terms and their meanings, in order."""

    items: list[Definition]


Block = Paragraph | Table | Preformatted | Figure | Definitions


@dataclass
class Section:
    """One part of the report: ``blocks`` for people, ``data`` for machines (audit.json), ``figures``
    (files written beside the report, shown after the blocks) and the glossary ``terms`` its blocks use.
    ``level`` is the heading level: 1 for the report's title, 2 for its sections."""

    title: str
    blocks: list[Block] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)
    level: int = 2
