"""``routerlab routers``: every registered router with its one-line summary and options."""

from __future__ import annotations

from typing import Annotated

import typer

from routerlab.cli import app
from routerlab.cli._io import print_json


@app.command("routers")
def routers_cmd(
    as_json: Annotated[bool, typer.Option(
        "--json", metavar="", help="Print one JSON object: name -> summary, options and their ranges.")] = False,
) -> None:
    """List the routers (built-in and plugins), with their options; use them as name:key=value."""
    from routerlab.routers import routers

    known = routers()
    if as_json:
        print_json({
            name: {"summary": cls.summary, "options": dict(cls.defaults),
                   "ranges": {k: rule.describe() for k, rule in cls.constraints.items()},
                   "uses_test_labels": cls.uses_test_labels, "logged_recipe": cls.logged_recipe}
            for name, cls in known.items()
        })
        return
    width = max((len(n) for n in known), default=0)
    for name, cls in known.items():
        opts = ", ".join(f"{k}={_show(v)}" for k, v in cls.defaults.items())
        line = f"{name:{width}s}  {cls.summary}"
        if opts:
            line += f"  [{opts}]"
        typer.echo(line)


def _show(value: object) -> str:
    if isinstance(value, tuple | list):
        return "/".join(str(v) for v in value) or "0"
    return str(value)
