"""``routerlab audit``: the main job — one report on a routing table (the demo when none is given)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from routerlab.cli import app
from routerlab.cli._io import check_output_dir, json_option, open_table, print_json, seed_option


def _section_names() -> list[str]:
    from routerlab.reports.audit import section_names

    return section_names()


@app.command("audit")
def audit_cmd(
    table_dir: Annotated[Path | None, typer.Argument(help="A table directory (default: the demo).")] = None,
    output: Annotated[Path, typer.Option("-o", "--output", help="Directory for report.md, audit.json, plots.")] = Path(
        "routerlab-audit"
    ),
    seed: Annotated[int, seed_option("Seed for random splits and draws.")] = 0,
    only: Annotated[str | None, typer.Option(
        help=f"Comma-separated sections to run, of: {', '.join(_section_names())}.")] = None,
    as_json: Annotated[bool, json_option("Print the audit record as JSON.")] = False,
) -> None:
    """Audit a routing table: data quality, bounds, and every capability's section."""
    from routerlab.errors import UsageError
    from routerlab.reports.audit import audit_summary, run_audit

    names = [s.strip() for s in (only or "").split(",") if s.strip()]
    unknown = [s for s in names if s not in _section_names()]
    if unknown:
        raise UsageError(f"unknown audit section {unknown[0]!r}; known: {', '.join(_section_names())}")
    check_output_dir(output)
    table = open_table(table_dir)
    record = run_audit(table, output, seed=seed, only=names or None)
    if as_json:
        print_json(record)
        typer.echo(f"wrote {output}/: {', '.join(record['files'])}", err=True)
    else:
        typer.echo("\n".join(audit_summary(record, output)))
