"""``routerlab audit``: the main job — one report on a routing table (the demo when none is given):
report.html to read and forward, report.md with the same content, results.json with every number and
Parquet files of every per-query decision; sections whose inputs did not change come from the cache."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from routerlab.cli import app
from routerlab.cli._io import (
    check_output_dir,
    force_option,
    json_option,
    open_table,
    print_json,
    refuse_overwrite,
    seed_option,
)

if TYPE_CHECKING:
    from routerlab.data.table import RoutingTable


def _section_names() -> list[str]:
    from routerlab.reports.audit import section_names

    return section_names()


@app.command("audit")
def audit_cmd(
    table_dir: Annotated[Path | None, typer.Argument(help="A table directory (default: the demo).")] = None,
    output: Annotated[Path, typer.Option(
        "-o", "--output", help="Directory for report.html, report.md, results.json, figures and decisions/.")] = Path(
        "routerlab-audit"
    ),
    seed: Annotated[int, seed_option("Seed for random splits and draws.")] = 0,
    only: Annotated[str | None, typer.Option(
        help=f"Comma-separated sections to run, of: {', '.join(_section_names())}.")] = None,
    logs: Annotated[Path | None, typer.Option(
        "--logs", help="A logs file (see 'routerlab log') for the off-policy estimates.")] = None,
    small: Annotated[str | None, typer.Option(
        "--small", help="With --large: the small model of a two-model pair (an actor name).")] = None,
    large: Annotated[str | None, typer.Option(
        "--large", help="With --small: the large model a query is escalated to (an actor name).")] = None,
    quick: Annotated[bool, typer.Option(
        "--quick", metavar="", help="A first look: fewer routers, resamples and variants (under a minute on the "
        "demo).")] = False,
    no_cache: Annotated[bool, typer.Option(
        "--no-cache", metavar="", help="Recompute every section; neither read nor write the audit cache.")] = False,
    cache_dir: Annotated[Path | None, typer.Option(
        "--cache-dir", help="The audit cache (default: $ROUTERLAB_CACHE_DIR/audit or ~/.cache/routerlab/audit).",
    )] = None,
    as_json: Annotated[bool, json_option("Print the audit record (results.json) as JSON.")] = False,
    force: Annotated[bool, force_option()] = False,
) -> None:
    """Audit a routing table: findings first, then data quality, bounds and every capability's section."""
    from routerlab.errors import UsageError
    from routerlab.reports.audit import audit_summary, in_audit_order, run_audit
    from routerlab.reports.audit_cache import default_audit_cache_dir

    names = [s.strip() for s in (only or "").split(",") if s.strip()]
    unknown = [s for s in names if s not in _section_names()]
    if unknown:
        raise UsageError(f"unknown audit section {unknown[0]!r}; known: {', '.join(_section_names())}")
    if only is not None and not names:
        raise UsageError(f"--only needs at least one section, of: {', '.join(_section_names())}")
    check_pair(small, large)
    if logs is not None and not logs.is_file():
        raise UsageError(f"--logs {logs}: " + ("is a directory, not a logs file" if logs.is_dir()
                                               else "no such logs file"))
    if no_cache and cache_dir is not None:
        raise UsageError("--no-cache and --cache-dir contradict each other: give one")
    if cache_dir is not None:
        check_output_dir(cache_dir, option="--cache-dir")
    check_output_dir(output)
    refuse_overwrite(output, force)
    table = open_table(table_dir)
    options: dict[str, Any] = {"quick": quick} if quick else {}
    if small is not None and large is not None:
        check_actors(table, {"--small": small, "--large": large})
        options.update(small=small, large=large)
    if logs is not None:
        from routerlab.data.logs import read_logs

        read_logs(logs, table)  # a malformed file or an unknown actor: one line naming it, before any section runs
        options["logs"] = str(logs)
    cache = None if no_cache else (cache_dir if cache_dir is not None else default_audit_cache_dir())
    table = in_audit_order(table, seed)  # the table as the audit stores it; the original is freed here
    record = run_audit(table, output, seed=seed, only=names or None, options=options, cache_dir=cache)
    if as_json:
        print_json(record)
        typer.echo(f"wrote {output}/: {', '.join(record['files'])}", err=True)
    else:
        typer.echo("\n".join(audit_summary(record, output)))


def check_pair(small: str | None, large: str | None) -> None:
    """``--small`` and ``--large`` come together and name two different actors (a UsageError otherwise)."""
    from routerlab.errors import UsageError

    if (small is None) != (large is None):
        given, missing = ("--small", "--large") if small is not None else ("--large", "--small")
        raise UsageError(f"{given} needs {missing}: the two-model section compares a small and a large model")
    if small is not None and small == large:
        raise UsageError(f"--small and --large are both {small!r}; name two different actors")


def check_actors(table: RoutingTable, given: dict[str, str]) -> None:
    """Every named actor is one of the table's (a UsageError listing them otherwise)."""
    from routerlab.errors import UsageError

    known = [str(a) for a in table.actor_names]
    for option, name in given.items():
        if name not in known:
            shown = ", ".join(known[:20]) + (f", ... ({len(known)} in all)" if len(known) > 20 else "")
            raise UsageError(f"{option} {name!r} is not an actor of table {table.name!r}; its actors: {shown}")
