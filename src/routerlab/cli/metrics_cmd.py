"""``routerlab metrics``: every metric of the catalog (:mod:`routerlab.metrics.catalog`) with its label, unit,
direction, the paper section that defines it and the protocols that produce it."""

from __future__ import annotations

from typing import Annotated

import typer

from routerlab.cli import app
from routerlab.cli._io import json_option, print_json
from routerlab.metrics.catalog import PROTOCOLS, all_metrics, all_terms, metrics_for
from routerlab.metrics.sources import cite, references


@app.command("metrics")
def metrics_cmd(
    protocol: Annotated[str | None, typer.Option(
        "--protocol", help=f"Only the metrics this protocol produces: {', '.join(PROTOCOLS)}.")] = None,
    terms: Annotated[bool, typer.Option(
        "--terms", metavar="", help="Also list the report's glossary terms that are not metrics (protocols, bounds, "
                        "flags).")] = False,
    as_json: Annotated[bool, json_option(
        "Print a JSON list of objects, each with name, label, unit, direction, spec, source, protocols and meaning "
        "(with --terms, an object with 'metrics' and 'terms').")] = False,
    verbose: Annotated[bool, typer.Option(
        "--meaning", metavar="", help="Print each metric's meaning under it.")] = False,
) -> None:
    """List the metrics every result may hold: name (as results and the store hold it), label, unit, whether higher
    or lower is better, the paper and section that define it and the protocols that produce it."""
    metrics = metrics_for(protocol) if protocol is not None else all_metrics()
    if as_json:
        listed = [m.to_dict() for m in metrics]
        print_json({"metrics": listed, "terms": [t.to_dict() for t in all_terms()]} if terms else listed)
        return
    head = ["name", "label", "unit", "better", "source", "protocols"]
    rows = [[m.name, m.label, m.unit, m.direction if m.direction != "none" else "-", cite(m.spec),
             ", ".join(m.protocols) or "-"] for m in metrics]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    typer.echo(line(head))
    for m, row in zip(metrics, rows, strict=True):
        typer.echo(line(row))
        if verbose:
            typer.echo(f"    {m.meaning}")
    if terms:
        typer.echo("")
        typer.echo("terms (not numbers of their own):")
        width = max(len(t.key) for t in all_terms())
        for t in all_terms():
            typer.echo(f"{t.key:{width}s}  {t.meaning}")
    typer.echo("")
    typer.echo(f"papers: {references()}")
