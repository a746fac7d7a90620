"""HTML renderer of the report's document model (:mod:`routerlab.reports.blocks`), for report.html.

It walks the same blocks as the Markdown renderer (:mod:`routerlab.reports.render`), so report.md and
report.html never drift, and fills a Jinja2 template (autoescaped) into ONE self-contained file: inline
CSS, every figure embedded as a ``data:`` URI, a few lines of inline script for sortable tables and no
reference to any other host, so it reads offline, prints, and can be forwarded as one attachment.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup, escape

from routerlab._version import __version__
from routerlab.errors import DataError
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
    slug,
)

TEMPLATE = "report.html.j2"

IMAGE_TYPES = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
               ".gif": "image/gif", ".webp": "image/webp"}
"""The figure files a report may embed, by suffix, with the media type of their ``data:`` URI."""

# `code`, then **bold**, then [label](#anchor): the report's inline marks (blocks.py); a link that is not
# to an anchor in the report stays literal text, so no mark can ever make the page reach another host.
_MARKS = re.compile(r"`(?P<code>[^`]+)`|\*\*(?P<bold>.+?)\*\*|\[(?P<label>[^\]]+)\]\(#(?P<anchor>[\w.:-]+)\)")
_PLACEHOLDERS = {"", "-", "\u2013", "\u2014", "n/a", "na", "nan", "none", "?"}
_LEADING_NUMBER = re.compile(r"^\s*[+\-\u2212]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][+\-]?\d+)?")


def is_numeric_cell(text: str) -> bool:
    """True when a cell starts with a number (``0.8785 [0.8512, 0.9010]``, ``+0.0699``, ``31%``): a column
    of such cells (and placeholders such as ``-``) is right-aligned, and the page's script sorts it by them."""
    return _LEADING_NUMBER.match(text) is not None


def inline(text: str, anchors: set[str] | None = None) -> Markup:
    """``text`` as HTML-safe markup: ```code``` -> ``<code>``, ``**bold**`` -> ``<strong>``,
    ``[label](#anchor)`` -> a link (kept as text when ``anchors`` is given and lacks it); the rest escaped."""
    out: list[str] = []
    pos = 0
    for m in _MARKS.finditer(text):
        out.append(str(escape(text[pos:m.start()])))
        if m.group("code") is not None:
            out.append(f"<code>{escape(m.group('code'))}</code>")
        elif m.group("bold") is not None:
            out.append(f"<strong>{inline(m.group('bold'), anchors)}</strong>")
        elif anchors is None or m.group("anchor") in anchors:
            out.append(f'<a href="#{escape(m.group("anchor"))}">{inline(m.group("label"), anchors)}</a>')
        else:
            out.append(str(inline(m.group("label"), anchors)))
        pos = m.end()
    out.append(str(escape(text[pos:])))
    return Markup("".join(out))


def embed_image(path: str, base_dir: Path) -> str:
    """The figure file ``path`` (relative to ``base_dir``) as a ``data:`` URI; a missing or unknown file
    is a :class:`DataError` naming it."""
    file = base_dir / path
    kind = IMAGE_TYPES.get(file.suffix.lower())
    if kind is None:
        raise DataError(f"cannot embed a '{file.suffix}' image in report.html (known: "
                        f"{', '.join(sorted(IMAGE_TYPES))})", file=file)
    try:
        data = file.read_bytes()
    except OSError as e:
        raise DataError(f"report figure is missing or unreadable ({e.strerror or e})", file=file) from None
    return f"data:{kind};base64,{base64.b64encode(data).decode('ascii')}"


@dataclass
class _Ids:
    """The anchors already given out: a repeated one gets ``-2``, ``-3``... so every id stays unique."""

    used: set[str] = field(default_factory=set)

    def take(self, wanted: str) -> str:
        got, n = wanted, 1
        while got in self.used:
            n += 1
            got = f"{wanted}-{n}"
        self.used.add(got)
        return got


def _anchors(sections: Sequence[Section]) -> tuple[set[str], dict[str, str]]:
    """Every anchor the page will have (sections, tables, figures, glossary terms) and each glossary key's
    definition text, so links are made only to anchors that exist and term links can carry a tooltip."""
    anchors: set[str] = set()
    terms: dict[str, str] = {}
    for s in sections:
        anchors.add(section_id(s))
        for b in [*s.blocks, *s.figures]:
            if isinstance(b, Table) and b.id:
                anchors.add(b.id)
            elif isinstance(b, Figure):
                anchors.add(figure_id(b))
            elif isinstance(b, Definitions):
                for d in b.items:
                    key = d.key or slug(d.term)
                    anchors.add("term-" + key)
                    terms.setdefault(key, d.text)
    return anchors, terms


class _Builder:
    """Turns blocks into the template's view: plain dicts of strings (escaped by the template) and
    :func:`inline` markup."""

    def __init__(self, sections: Sequence[Section], base_dir: Path) -> None:
        self.base_dir = base_dir
        self.anchors, self.terms = _anchors(sections)
        self.ids = _Ids()

    def section(self, s: Section) -> dict[str, Any]:
        return {"id": self.ids.take(section_id(s)), "title": s.title, "level": s.level,
                "blocks": [self.block(b) for b in [*s.blocks, *s.figures]]}

    def block(self, b: Block) -> dict[str, Any]:
        if isinstance(b, Paragraph):
            return {"kind": "paragraph", "html": inline(b.text, self.anchors)}
        if isinstance(b, Preformatted):
            return {"kind": "pre", "text": b.text}
        if isinstance(b, Table):
            return self.table(b)
        if isinstance(b, Figure):
            return {"kind": "figure", "id": self.ids.take(figure_id(b)), "caption": b.caption or b.path,
                    "src": embed_image(b.path, self.base_dir)}
        if isinstance(b, Definitions):
            return {"kind": "definitions", "entries": [
                {"id": self.ids.take("term-" + (d.key or slug(d.term))), "term": inline(d.term),
                 "note": inline(d.note), "html": inline(d.text, self.anchors)} for d in b.items]}
        if isinstance(b, Findings):
            return {"kind": "findings", "entries": [
                {"html": inline(f.text, self.anchors), "target": f.target if f.target in self.anchors else ""}
                for f in b.items]}
        raise TypeError(f"not a report block: {type(b).__name__}")

    def table(self, t: Table) -> dict[str, Any]:
        terms = t.terms or [None] * len(t.header)
        header: list[dict[str, Any]] = [
            {"html": inline(h), "term": key if key and "term-" + key in self.anchors else "",
             "title": self.terms.get(key, "") if key else ""} for h, key in zip(t.header, terms, strict=True)]
        numeric = [any(is_numeric_cell(r[i]) for r in t.rows)
                   and all(is_numeric_cell(r[i]) or r[i].strip().lower() in _PLACEHOLDERS for r in t.rows)
                   for i in range(len(t.header))]
        rows = [[{"html": inline(c, self.anchors), "num": num} for c, num in zip(r, numeric, strict=True)]
                for r in t.rows]
        for h, num in zip(header, numeric, strict=True):
            h["num"] = num
        return {"kind": "table", "id": self.ids.take(t.id) if t.id else "", "sortable": t.sortable,
                "header": header, "rows": rows}


def render_html(sections: Sequence[Section], *, base_dir: Path, title: str) -> str:
    """The sections as one self-contained HTML page titled ``title``; figure paths are relative to
    ``base_dir`` (the report's directory) and embedded, so the page needs no file beside it."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("routerlab.reports", "templates"), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    build = _Builder(sections, Path(base_dir))
    views = [build.section(s) for s in sections]
    head = [v for v in views if v["level"] == 1]
    body = [v for v in views if v["level"] != 1]
    return env.get_template(TEMPLATE).render(title=title, head=head, sections=body, version=__version__)
