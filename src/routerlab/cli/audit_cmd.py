"""``routerlab audit``: the main job — one report on a routing table (the demo when none is given)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from routerlab.cli import app
from routerlab.cli._io import check_output_dir, json_option, open_table, print_json, seed_option


@app.command("audit")
def audit_cmd(
    table_dir: Annotated[Path | None, typer.Argument(help="A table directory (default: the demo).")] = None,
    output: Annotated[Path, typer.Option("-o", "--output", help="Directory for report.md, audit.json, plots.")] = Path(
        "routerlab-audit"
    ),
    seed: Annotated[int, seed_option("Seed for random splits and draws.")] = 0,
    only: Annotated[str | None, typer.Option(help="Comma-separated section names to run.")] = None,
    as_json: Annotated[bool, json_option("Print the audit record as JSON.")] = False,
) -> None:
    """Audit a routing table: data quality, bounds, and every capability's section."""
    from routerlab.reports.audit import run_audit

    check_output_dir(output)
    table = open_table(table_dir)
    record = run_audit(table, output, seed=seed, only=[s for s in (only or "").split(",") if s] or None)
    if as_json:
        print_json(record)
    else:
        typer.echo((output / "report.md").read_text())
        typer.echo(f"wrote {output / 'report.md'} and {output / 'audit.json'}")
