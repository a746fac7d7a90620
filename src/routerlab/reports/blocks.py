"""The report's document model: a :class:`Section` is a title and a list of blocks, so a section says
*what* it shows (sentences, a table, a figure) and a renderer (:mod:`routerlab.reports.render`) decides
how it looks (Markdown for report.md, HTML for report.html) from the same blocks, so the two never drift.

Text inside blocks may carry the two inline marks the report uses, ```code``` and ``**bold**``; a
renderer translates them for its format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any


@dataclass(frozen=True)
class Paragraph:
    """One or more sentences of running text."""

    text: str


@dataclass(frozen=True)
class Table:
    """A table: a header row and rows of cell texts, each row as long as the header.

    ``terms`` (optional, one per column) names the glossary key a column header links to (``None`` for
    none); ``sortable`` asks the HTML renderer for click-to-sort headers (leaderboards); ``id`` is the
    anchor findings link to (unique in the report; empty = none).
    """

    header: list[str]
    rows: list[list[str]]
    terms: list[str | None] | None = None
    sortable: bool = False
    id: str = ""

    def __post_init__(self) -> None:
        bad = [r for r in self.rows if len(r) != len(self.header)]
        if bad:
            raise ValueError(f"table rows must have {len(self.header)} cells, got {[len(r) for r in bad]}")
        if self.terms is not None and len(self.terms) != len(self.header):
            raise ValueError(f"table terms must have {len(self.header)} entries, got {len(self.terms)}")


@dataclass(frozen=True)
class Preformatted:
    """Text shown exactly as given, in a fixed-width font (the table summary)."""

    text: str


@dataclass(frozen=True)
class Figure:
    """An image file beside the report (path relative to the report's directory); ``caption`` defaults to
    the file name; ``id`` is the anchor findings link to (empty = derived from the file name)."""

    path: str
    caption: str = ""
    id: str = ""


@dataclass(frozen=True)
class Finding:
    """One plain sentence for the report's opening "Findings" list, e.g. "4 of 10 models carry 90% of this
    pool's diversity".

    ``target`` is the anchor of the table or figure that shows it (a :class:`Table` or :class:`Figure` ``id``,
    or a section's ``name``); ``values`` are the numbers the sentence quotes, by name (each also lands in
    results.json, under ``findings``), with ``interval`` the 95% interval of the headline number when it
    has one. The text should quote the interval itself; the renderers show it as written.
    """

    text: str
    target: str = ""
    values: dict[str, float | int | str] = field(default_factory=dict)
    interval: tuple[float, float] | None = None


@dataclass(frozen=True)
class Definition:
    """One glossary entry: ``term`` (with an optional ``note`` such as where it appears) and what it means."""

    term: str
    text: str
    note: str = ""
    key: str = ""  # the glossary key (audit.GLOSSARY): the HTML anchor is term-<key>; table headers link to it


@dataclass(frozen=True)
class Definitions:
    """A glossary: terms and their meanings, in order."""

    items: list[Definition]


@dataclass(frozen=True)
class Findings:
    """The report's opening list of findings (the audit builds it from every section's ``findings``); each
    item links to its ``target``."""

    items: list[Finding]


Block = Paragraph | Table | Preformatted | Figure | Definitions | Findings


@dataclass(frozen=True)
class Decisions:
    """Per-query decisions of one protocol run inside a section, for the report's Parquet files: for each
    router, the index of the actor it chose on each query (``-1`` = abstained / not routed) and, where
    known, the score that choice obtained. ``query_ids`` are the table's ids, in order.

    A router that samples its distribution when deployed (``policies[router] == "distribution"``) has its argmax
    (greedy pick) in ``choices`` and ``scores``, and its per-query score as deployed, the expectation under the
    distribution, in ``deployed``; for any other router the deployed score is the chosen actor's."""

    protocol: str
    query_ids: list[str]
    actor_names: list[str]
    choices: dict[str, Any]  # router label -> (n,) integer array of actor indices
    scores: dict[str, Any] = field(default_factory=dict)  # router label -> (n,) float array (NaN = unknown)
    policies: dict[str, str] = field(default_factory=dict)  # router label -> "argmax" (default) or "distribution"
    deployed: dict[str, Any] = field(default_factory=dict)  # router label -> (n,) expected score (exploring routers)


@dataclass
class Section:
    """One part of the report: ``blocks`` for people, ``data`` for machines (results.json), ``figures``
    (files written beside the report, shown after the blocks), the glossary ``terms`` its blocks use,
    the ``findings`` it contributes to the report's opening list and the per-query ``decisions`` it made.
    ``name`` is its anchor (the registered section name); ``level`` is the heading level: 1 for the
    report's title, 2 for its sections."""

    title: str
    blocks: list[Block] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)
    level: int = 2
    name: str = ""
    findings: list[Finding] = field(default_factory=list)
    decisions: list[Decisions] = field(default_factory=list)


def slug(text: str) -> str:
    """A lowercase anchor from ``text``: letters, digits and single dashes (``"95% CI"`` -> ``"95-ci"``)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def figure_id(figure: Figure) -> str:
    """A figure's anchor: its ``id``, else ``fig-`` and a slug of its file name's stem (both renderers use it)."""
    return figure.id or "fig-" + slug(PurePosixPath(figure.path).stem)


def section_id(section: Section) -> str:
    """A section's anchor: its registered ``name``, else a slug of its title (both renderers use it)."""
    return section.name or slug(section.title)
