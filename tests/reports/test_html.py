"""report.html from hand-built sections: escaping, inline marks, anchors, glossary links, embedded images,
sortable markup and no reference to any other host."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from routerlab import __version__
from routerlab.errors import DataError
from routerlab.reports.blocks import (
    Definition,
    Definitions,
    Figure,
    Finding,
    Findings,
    Paragraph,
    Preformatted,
    Section,
    Table,
)
from routerlab.reports.html import inline, is_numeric_cell, render_html, slug

# a 1x1 PNG and a tiny SVG, written beside the report like the audit's plots
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0g"
                       "AAAABJRU5ErkJggg==")
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect width="4" height="4"/></svg>'


def _sections() -> list[Section]:
    head = Section("routerlab audit: t <demo>", [
        Paragraph("Table hash `abc<1>`, **synthetic** & small."),
        Findings([Finding("4 of 10 models carry 90% [85%, 95%] of the diversity", target="diversity-curve",
                          values={"k": 4}, interval=(0.85, 0.95)),
                  Finding("knn gains **6 points**", target="leaderboard-table"),
                  Finding("a finding whose target is nowhere", target="no-such-anchor")]),
    ], level=1)
    board = Section("Leaderboard", [
        Paragraph("Routers <script>alert(1)</script> see [the bounds](#bounds) and [nowhere](#missing)."),
        Table(["router", "mu_o [95% CI]", "Δ", "share"],
              [["`knn`", "0.8785 [0.8512, 0.9010]", "+0.0699", "31%"],
               ["mlp", "0.9012 [0.8800, 0.9200]", "-0.0100", "-"],
               ["random", "0.6000 [0.5700, 0.6300]", "\u22120.2000", "4%"]],
              terms=["router", "mu_o", None, "not-in-glossary"], sortable=True, id="leaderboard-table"),
        Preformatted("rows  3\n<b>actors</b> 2"),
    ], name="leaderboard", figures=[Figure("curve.png", "Diversity curve", id="diversity-curve")])
    bounds = Section("Bounds", [Table(["bound", "mean"], [["oracle", "0.9"]])], name="bounds",
                     figures=[Figure("plots/shape.svg")])
    glossary = Section("What the numbers mean", [Definitions([
        Definition("mu_o", "mean score, in [0, 1] (SPEC 4).", key="mu_o"),
        Definition("95% CI", "bootstrap interval (SPEC 7).", "`ci` in audit.json"),
    ])])
    return [head, board, bounds, glossary]


@pytest.fixture
def base(tmp_path: Path) -> Path:
    (tmp_path / "curve.png").write_bytes(PNG)
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "shape.svg").write_bytes(SVG)
    return tmp_path


@pytest.fixture
def page(base: Path) -> str:
    return render_html(_sections(), base_dir=base, title="Report <t>")


def test_text_is_escaped(page: str) -> None:
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<title>Report &lt;t&gt;</title>" in page
    assert "routerlab audit: t &lt;demo&gt;</h1>" in page
    assert "<pre>rows  3\n&lt;b&gt;actors&lt;/b&gt; 2</pre>" in page
    assert "**synthetic** &amp; small" not in page and "<strong>synthetic</strong> &amp; small" in page


def test_inline_marks() -> None:
    assert str(inline("a `x<y` b")) == "a <code>x&lt;y</code> b"
    assert str(inline("**bold `c`**")) == "<strong>bold <code>c</code></strong>"
    assert str(inline("`**not bold**`")) == "<code>**not bold**</code>"
    assert str(inline("see [the table](#t-1)")) == 'see <a href="#t-1">the table</a>'
    # a link to an anchor the page lacks stays text; a link elsewhere is never made
    assert str(inline("see [the table](#t-1)", anchors={"other"})) == "see the table"
    assert str(inline("[site](https://example.org)")) == "[site](https://example.org)"
    assert str(inline("a < b & c")) == "a &lt; b &amp; c"


def test_anchors_for_sections_tables_and_figures(page: str) -> None:
    assert '<section id="leaderboard">' in page and '<section id="bounds">' in page
    assert '<section id="what-the-numbers-mean">' in page  # no name: a slug of its title
    assert '<table id="leaderboard-table" class="sortable">' in page
    assert '<figure id="diversity-curve">' in page
    assert '<figure id="fig-shape">' in page  # no id: fig- and the file's stem
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    # the table of contents lists every level-2 section, in order
    toc = re.search(r'<nav class="toc".*?</nav>', page, re.S)
    assert toc is not None
    assert re.findall(r'href="#([^"]+)"', toc.group(0)) == ["leaderboard", "bounds", "what-the-numbers-mean"]
    assert page.count("<h2>") == 3 and page.count("<h1 ") == 1
    assert 'href="#bounds">the bounds</a>' in page and "[nowhere](#missing)" not in page


def test_findings_link_to_their_targets(page: str) -> None:
    findings = re.search(r'<ol class="findings">(.*?)</ol>', page, re.S)
    assert findings is not None
    items = re.findall(r"<li>(.*?)</li>", findings.group(1), re.S)
    assert len(items) == 3
    assert "90% [85%, 95%] of the diversity" in items[0] and 'href="#diversity-curve"' in items[0]
    assert "<strong>6 points</strong>" in items[1] and 'href="#leaderboard-table"' in items[1]
    assert "href" not in items[2]  # a target the page lacks gets no dead link


def test_glossary_ids_and_header_links(page: str) -> None:
    assert '<dt id="term-mu_o">mu_o</dt>' in page
    assert '<dt id="term-95-ci">95% CI <span class="note"><code>ci</code> in audit.json</span></dt>' in page
    header = re.search(r"<thead>(.*?)</thead>", page, re.S)
    assert header is not None
    links = re.findall(r'<a class="term" href="#(term-[^"]+)"( title="[^"]*")?>', header.group(1))
    # only keys the glossary defines become links (router and not-in-glossary have no entry here)
    assert [href for href, _ in links] == ["term-mu_o"]
    assert 'title="mean score, in [0, 1] (SPEC 4)."' in header.group(1)
    for href in re.findall(r'href="#([^"]+)"', page):
        assert f'id="{href}"' in page, f"dead link #{href}"


def test_images_are_embedded(page: str, base: Path) -> None:
    srcs = re.findall(r'<img src="([^"]+)" alt="([^"]*)">', page)
    assert [alt for _, alt in srcs] == ["Diversity curve", "plots/shape.svg"]
    (png, _), (svg, _) = srcs
    assert png.startswith("data:image/png;base64,")
    assert base64.b64decode(png.split(",", 1)[1]) == (base / "curve.png").read_bytes()
    assert svg.startswith("data:image/svg+xml;base64,")
    assert base64.b64decode(svg.split(",", 1)[1]) == SVG


def test_no_reference_to_another_host(page: str) -> None:
    assert not re.search(r"https?://", page)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert all(src.startswith("data:") for src in re.findall(r'\bsrc="([^"]*)"', page))
    assert all(h.startswith("#") for h in re.findall(r'\bhref="([^"]*)"', page))
    assert "default-src 'none'" in page  # the page's own policy forbids every other request
    assert f"routerlab {__version__}" in page.split("<footer>", 1)[1]
    assert "@media print" in page


def test_sortable_markup(page: str) -> None:
    table = re.search(r'<table id="leaderboard-table" class="sortable">.*?</table>', page, re.S)
    assert table is not None
    heads = re.findall(r"<th( [^>]*)>(.*?)</th>", table.group(0), re.S)
    assert len(heads) == 4
    assert all('aria-sort="none"' in attrs for attrs, _ in heads)
    assert all('<button type="button" class="sort"' in inner for _, inner in heads)
    # numeric columns (a leading number; '-' is a placeholder) are marked and right-aligned
    assert ['class="num"' in attrs for attrs, _ in heads] == [False, True, True, True]
    assert "<script>" in page and "aria-sort" in page.split("<script>", 1)[1]
    bounds = re.search(r"<table>.*?</table>", page, re.S)  # not sortable: no buttons, no aria-sort
    assert bounds is not None and "button" not in bounds.group(0) and "aria-sort" not in bounds.group(0)


def test_numeric_cells() -> None:
    for cell in ("0.8785 [0.8512, 0.9010]", "+0.0699", "31%", "\u22120.2", "1,234", ".5", "1e-3", "4.82e-06"):
        assert is_numeric_cell(cell), cell
    for cell in ("knn", "-", "n/a", "", "yes, no"):
        assert not is_numeric_cell(cell), cell
    assert slug("95% CI") == "95-ci" and slug("Δ (shift)") == "shift" and slug("***") == "x"


def test_missing_image_is_an_error_naming_it(base: Path) -> None:
    (base / "curve.png").unlink()
    with pytest.raises(DataError, match=r"curve\.png.*missing"):
        render_html(_sections(), base_dir=base, title="t")
    with pytest.raises(DataError, match=r"notes\.txt.*cannot embed"):
        render_html([Section("S", figures=[Figure("notes.txt")])], base_dir=base, title="t")


def test_same_blocks_as_markdown(page: str) -> None:
    """Every block kind the Markdown renderer knows has an HTML form (a new kind fails both)."""
    with pytest.raises(TypeError, match="not a report block"):
        render_html([Section("S", [object()])], base_dir=Path("."), title="t")  # type: ignore[list-item]


def test_html_says_what_markdown_says(page: str) -> None:
    """Both renderings carry the same words: every paragraph, cell, term, finding and caption of the
    blocks appears in the page's text (marks resolved, tags dropped)."""
    import html as htmllib

    text = htmllib.unescape(re.sub(r"<[^>]+>", "", page))

    def plain(s: str) -> str:
        return re.sub(r"\[([^\]]+)\]\(#[^)]+\)", r"\1", s).replace("`", "").replace("**", "")

    words: list[str] = []
    for s in _sections():
        words.append(s.title)
        for b in [*s.blocks, *s.figures]:
            if isinstance(b, Paragraph | Preformatted):
                words.append(b.text)
            elif isinstance(b, Table):
                words += [*b.header, *(c for r in b.rows for c in r)]
            elif isinstance(b, Figure):
                words.append(b.caption or b.path)
            elif isinstance(b, Definitions):
                words += [w for d in b.items for w in (d.term, d.text, d.note) if w]
            elif isinstance(b, Findings):
                words += [f.text for f in b.items]
    missing = [w for w in words if plain(w) not in text]
    assert not missing, missing
