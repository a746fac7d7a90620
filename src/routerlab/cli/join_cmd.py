"""``routerlab join``: tables' actors side by side on the same questions, matched by query id (SPEC 1, 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from routerlab._words import plural
from routerlab.cli import app
from routerlab.cli._io import json_option


def join_summary(record: dict[str, Any]) -> str:
    """The terminal's lines: kept count, then per table its matched and dropped ids, then the pair if any."""
    j = record["join"]
    lines = [f"wrote {record['output']}: {plural(j['n_queries'], 'query')} kept ({j['how']} join on query id) x "
             f"{plural(record['n_actors'], 'actor')}, hash {record['content_hash'][:12]}"]
    for i, s in enumerate(j["sources"], 1):
        lines.append(f"  table {i} {s['name']}: {s['matched']} of {plural(s['n_queries'], 'query')} kept, "
                     f"{s['dropped']} "
                     f"dropped; actors {', '.join(s['actors'])}")
    if record.get("two_model"):
        p = record["two_model"]
        lines.append(f"two-model pair: small {p['small']}, large {p['large']}")
    return "\n".join(lines)


@app.command("join")
def join_cmd(
    tables: Annotated[list[Path], typer.Argument(help="Table directories; rows follow the first one's order.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Directory to write the joined table to.")],
    small: Annotated[str | None, typer.Option("--small", help="Designate this actor the small model of a "
                                              "two-model pair (with --large).")] = None,
    large: Annotated[str | None, typer.Option("--large", help="Designate this actor the large model (with "
                                              "--small).")] = None,
    how: Annotated[str, typer.Option("--how", help="inner: the query ids in every table; left: every id of "
                                     "the first table (missing cells unobserved).")] = "inner",
    name: Annotated[str | None, typer.Option(help="Name recorded in the table.")] = None,
    force: Annotated[
        bool, typer.Option("--force", metavar="", help="Replace a table already in the output directory.")
    ] = False,
    as_json: Annotated[bool, json_option()] = False,
) -> None:
    """Put the actors of several tables side by side on the same questions, matched by query id (never by
    position); a query id whose text differs between tables, or an actor in two tables, is an error."""
    from routerlab.cli._io import print_json
    from routerlab.cli.data_cmds import _check_output
    from routerlab.data.join import join
    from routerlab.data.store import load
    from routerlab.errors import UsageError

    _check_output(output, force)
    if (small is None) != (large is None):
        raise UsageError("--small and --large designate a pair: give both or neither")
    if how not in ("inner", "left"):
        raise UsageError(f"--how must be 'inner' or 'left', got {how!r}")
    target = output.resolve()
    for path in tables:
        if path.resolve() == target:
            raise UsageError(f"-o {output} is one of the input tables; write the joined table elsewhere")
    joined = join([load(p) for p in tables], name=name or None, how=how, small=small, large=large)
    joined.save(output)
    record = {"output": str(output), "name": joined.name, "n_queries": joined.n_queries,
              "n_actors": joined.n_actors, "actors": joined.actor_names, "content_hash": joined.content_hash,
              "join": joined.meta["join"], "two_model": joined.meta.get("two_model")}
    if as_json:
        print_json(record)
    else:
        typer.echo(join_summary(record))
