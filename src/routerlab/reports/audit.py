"""``routerlab audit``: one report on a routing table, built from sections.

A section is a function ``(table, ctx) -> Section`` registered with :func:`audit_section`; every
module in :mod:`routerlab.reports.sections` is imported on first use, so a new capability adds its
section by adding one module there. The audit writes ``report.md`` and ``audit.json`` (atomically)
plus any figures the sections make, and records table hash, split, seed and version (SPEC 7).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from routerlab import __version__
from routerlab.data.splits import Split, given_split, random_split
from routerlab.data.table import RoutingTable
from routerlab.errors import RouterlabError
from routerlab.reports.files import write_json, write_text


@dataclass
class Section:
    """One part of the report: Markdown for people, ``data`` for machines, figure file names."""

    title: str
    markdown: str
    data: dict[str, Any] = field(default_factory=dict)
    figures: list[str] = field(default_factory=list)


@dataclass
class AuditContext:
    """What every section shares: where to write, the train/test split and the seed."""

    out_dir: Path
    split: Split
    seed: int
    train: RoutingTable
    test: RoutingTable
    options: dict[str, Any] = field(default_factory=dict)


SectionFn = Callable[[RoutingTable, AuditContext], Section]


@dataclass(frozen=True)
class _Registered:
    name: str
    order: int
    fn: SectionFn


_SECTIONS: dict[str, _Registered] = {}


def audit_section(name: str, order: int) -> Callable[[SectionFn], SectionFn]:
    """Register a report section; sections appear in ascending ``order``."""

    def register(fn: SectionFn) -> SectionFn:
        _SECTIONS[name] = _Registered(name, order, fn)
        return fn

    return register


def sections() -> list[_Registered]:
    from routerlab.reports import sections as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"{pkg.__name__}.{mod.name}")
    return sorted(_SECTIONS.values(), key=lambda s: (s.order, s.name))


def audit_split(table: RoutingTable, seed: int) -> Split:
    """The table's own train/test split when it has one, else a seeded 80/20 split by query."""
    try:
        return given_split(table)
    except RouterlabError:
        return random_split(table, 0.2, seed)


def run_audit(
    table: RoutingTable, out_dir: str | Path, *, seed: int = 0, only: list[str] | None = None,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run every registered section (or those named in ``only``) and write the report to ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    split = audit_split(table, seed)
    train, test = split.apply(table)
    ctx = AuditContext(out, split, seed, train, test, dict(options or {}))
    record: dict[str, Any] = {
        "routerlab_version": __version__,
        "table": {"name": table.name, "content_hash": table.content_hash,
                  "n_queries": table.n_queries, "n_actors": table.n_actors},
        "split": split.describe(),
        "seed": seed,
        "sections": {},
    }
    parts = [f"# routerlab audit: {table.name}\n",
             f"Table hash `{table.content_hash[:16]}`, split {split.kind} "
             f"({split.train.size} train / {split.test.size} test queries), seed {seed}, "
             f"routerlab {__version__}.\n"]
    registered = sections()
    if only:
        unknown = set(only) - {s.name for s in registered}
        if unknown:
            raise RouterlabError(f"unknown audit sections {sorted(unknown)}; known: "
                                 f"{', '.join(s.name for s in registered)}")
        registered = [s for s in registered if s.name in only]
    bar = tqdm(registered, desc="audit", unit="section", disable=None, leave=False)
    for reg in bar:
        bar.set_postfix_str(reg.name)
        sec = reg.fn(table, ctx)
        record["sections"][reg.name] = {"title": sec.title, **sec.data, "figures": sec.figures}
        parts.append(f"## {sec.title}\n\n{sec.markdown.strip()}\n")
        parts.extend(f"![{f}]({f})\n" for f in sec.figures)
    write_text(out / "report.md", "\n".join(parts))
    write_json(out / "audit.json", record)
    return record
