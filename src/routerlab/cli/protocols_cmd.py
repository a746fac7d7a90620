"""``routerlab protocols``: every registered protocol with its settings, their defaults and their meaning."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from routerlab.cli import app
from routerlab.cli._io import print_json


@app.command("protocols")
def protocols_cmd(
    as_json: Annotated[bool, typer.Option(
        "--json", metavar="", help="Print one JSON list: each protocol an object with its name, summary, the "
                                   "paper sections it implements (source) and its settings.")] = False,
) -> None:
    """List the protocols (built-in and plugins) with their settings: the same names in experiment files
    (underscores) and on the command line (dashes)."""
    from routerlab.metrics.sources import cite_sections
    from routerlab.protocols.base import PROTOCOLS

    described = [cls().describe() for _, cls in PROTOCOLS.items()]
    for d in described:  # the paper and section a user can read, beside the specification's section numbers
        d["source"] = cite_sections(str(d.get("spec") or ""))
    if as_json:
        print_json(described)
        return
    for i, d in enumerate(described):
        if i:
            typer.echo("")
        routers = "" if d["uses_routers"] else " (no routers: evaluates actor sets)"
        source = f"  [{d['source']}]" if d["source"] else ""
        typer.echo(f"{d['name']}  {d['summary']}{routers}{source}")
        width = max((len(s["name"]) for s in d["settings"]), default=0)
        for s in d["settings"]:
            rule = f"; {s['rule']}" if s["rule"] else ""
            typer.echo(f"  {s['name']:{width}s}  = {_show(s['default'])}  ({s['type']}{rule}) {s['help']}")


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return repr(value) if isinstance(value, str) else str(value)
