"""A paper's numbers next to routerlab's: each ``[[paper]]`` entry of an experiment file
(:class:`~routerlab.experiments.schema.PaperNumber`) looked up in the results store among the experiment's own cells
(its first seed), with its 95% interval and whether the two agree. ``routerlab run`` prints the table at the end;
``routerlab results paper FILE`` prints it again from the store; docs/replications.md is made of such tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from routerlab.errors import UsageError
from routerlab.experiments.schema import Experiment, PaperNumber


@dataclass(frozen=True)
class PaperRow:
    """One entry with routerlab's number (None when the store holds no such record: the cell was not run,
    was skipped, or has no such metric or slice)."""

    entry: PaperNumber
    value: float | None
    ci_low: float | None
    ci_high: float | None

    @property
    def agrees(self) -> bool | None:
        return self.entry.agrees(self.value, self.ci_low, self.ci_high)

    def to_dict(self) -> dict[str, Any]:
        e = self.entry
        return {"claim": e.claim, "paper": e.value, "table": e.table, "protocol": e.protocol, "router": e.router,
                "metric": e.metric, "slice": e.slice, "routerlab": self.value, "ci_low": self.ci_low,
                "ci_high": self.ci_high, "tolerance": e.tolerance, "agrees": self.agrees, "note": e.note}


def compare(exp: Experiment, store_dir: Path, hashes: dict[str, str]) -> list[PaperRow]:
    """Every ``[[paper]]`` entry of ``exp`` with routerlab's number from the store in ``store_dir`` (``hashes``:
    each table's content hash, which the cells' ids hold)."""
    from routerlab._version import __version__
    from routerlab.experiments.runner import expand
    from routerlab.experiments.store import query
    from routerlab.protocols.base import get_protocol

    if not exp.papers:
        return []
    cells = expand(exp, hashes, __version__)
    seed = exp.seeds[0]
    wanted: list[list[str]] = []
    for e in exp.papers:
        routed = get_protocol(e.protocol).uses_routers
        wanted.append([c.cell_id for c in cells if c.table == e.table and c.protocol.name == e.protocol
                       and c.protocol.options == e.options and c.router == (e.router if routed else "")
                       and c.seed == seed])
    ids = sorted({i for w in wanted for i in w})
    found: dict[tuple[str, str, str, str], list[tuple[Any, ...]]] = {}
    if ids:  # one read of the store for every entry
        _, hits = query(store_dir, "SELECT cell_id, metric, slice, router, value, ci_low, ci_high FROM results "
                                   "WHERE list_contains(?, cell_id) ORDER BY router", [ids])
        for cid, metric, slice_, router, *numbers in hits:
            found.setdefault((cid, metric, slice_, router), []).append(tuple(numbers))
            if router:  # an entry without a router matches any actor-set label
                found.setdefault((cid, metric, slice_, ""), []).append(tuple(numbers))
    rows = []
    for e, cell_ids in zip(exp.papers, wanted, strict=True):
        matches = [n for cid in cell_ids for n in found.get((cid, e.metric, e.slice, e.router), [])]
        if len(matches) > 1:
            raise UsageError(f"[[paper]] {e.claim!r}: several records of {e.metric!r} (slice {e.slice!r}) in "
                             f"protocol {e.protocol!r}; give router = ... to pick one")
        rows.append(PaperRow(e, *(_finite(v) for v in matches[0])) if matches else PaperRow(e, None, None, None))
    return rows


def _finite(v: Any) -> float | None:
    return None if v is None or not math.isfinite(float(v)) else float(v)


def _number(v: float | None) -> str:
    if v is None:
        return "-"
    if float(v).is_integer() and abs(v) >= 1:
        return f"{int(v)}"
    return f"{v:.3f}"


def paper_markdown(rows: list[PaperRow]) -> str:
    """The side-by-side table (markdown): claim, the paper's number, routerlab's with its 95% interval,
    whether they agree, and the note; then how many agree."""
    lines = ["| claim | paper | routerlab (95% CI) | agrees | note |", "|---|---|---|---|---|"]
    for row in rows:
        ours = _number(row.value)
        if row.value is not None and row.ci_low is not None and row.ci_high is not None:
            ours += f" [{_number(row.ci_low)}, {_number(row.ci_high)}]"
        elif row.value is None:
            ours = "not in the store"
        verdict = {True: "yes", False: "no", None: "-"}[row.agrees]
        if row.agrees is not None and row.entry.tolerance:
            verdict += f" (tolerance {row.entry.tolerance:g})"
        lines.append(f"| {row.entry.claim} | {_number(row.entry.value)} | {ours} | {verdict} | {row.entry.note} |")
    judged = [r.agrees for r in rows if r.agrees is not None]
    lines.append("")
    lines.append(f"{sum(judged)} of {len(judged)} compared numbers agree"
                 + (f"; {len(rows) - len(judged)} not in the store" if len(judged) < len(rows) else "") + ".")
    return "\n".join(lines)
