"""``routerlab synth``: the HSE paper's synthetic specialist societies (SA, RD, RD+SA) as a routing table over a
table's queries, so routers run on them (the HSE paper, section 6 and appendix 10.3; docs/synth.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from routerlab._words import plural
from routerlab.cli import app
from routerlab.cli._io import force_option, json_option


def synth_summary(record: dict[str, Any]) -> str:
    """The one line ``routerlab synth`` prints: what was written, its size, its map and its HSE."""
    return (f"wrote {record['output']}: {record['society']} society of {plural(record['n_actors'], 'actor')} x "
            f"{plural(record['n_queries'], 'query', 'queries')} (map {record['map']['name']}, by "
            f"{record['map']['by']}), HSE {record['hse']:.4f} (normalised {record['hse_normalized']:.4f}) on "
            f"{record['hse_rows']}")


@app.command("synth")
def synth_cmd(
    table_dir: Annotated[Path, typer.Argument(help="A routerlab table directory whose queries the society covers.")],
    society: Annotated[str, typer.Option("--society", help="sa (one agent per subject-area cluster), rd (one per "
                                         "reasoning-depth tier) or rd+sa (both).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Directory to write the synthetic table to.")],
    map_spec: Annotated[str | None, typer.Option(
        "--map", metavar="NAME|FILE.toml",
        help="Which cluster and tier each dataset or category is in: a built-in map (mmlu-pro, mmlu-pro-src, "
             "llmrouter, routerbench, demo) or a TOML file (docs/synth.md). Default: the built-in map of the "
             "table's format, or one that assigns every dataset.")] = None,
    force: Annotated[bool, force_option("Replace a table already in the output directory.")] = False,
    as_json: Annotated[bool, json_option()] = False,
) -> None:
    """Build the HSE paper's synthetic specialist society (SA, RD or RD+SA) as a routing table over TABLE's queries:
    each agent scores 1 on every query of its cluster or tier and 0 elsewhere."""
    from routerlab.cli._io import print_json
    from routerlab.cli.data_cmds import _check_output
    from routerlab.data.store import load
    from routerlab.errors import UsageError
    from routerlab.society import SOCIETIES, default_society_map, diversity, load_society_map, synth_table
    from routerlab.society.synthetic import society_rows

    if society not in SOCIETIES:
        raise UsageError(f"--society: must be one of {', '.join(SOCIETIES)}, got {society!r}")
    society_map = load_society_map(map_spec) if map_spec is not None else None
    _check_output(output, force)
    if output.resolve() == table_dir.resolve():
        raise UsageError(f"-o {output} is the input table; write the synthetic table elsewhere")
    table = load(table_dir)
    if society_map is None:
        society_map = default_society_map(table)
    synth = synth_table(table, society, society_map)
    synth.save(output)
    split, rows = society_rows(synth)
    div = diversity(synth, split=split)
    record = {"output": str(output), "name": synth.name, "society": society, "n_actors": synth.n_actors,
              "n_queries": synth.n_queries, "actors": synth.actor_names, "map": society_map.to_dict(),
              "hse": div.hse, "hse_normalized": div.hse_normalized, "hse_rows": rows,
              "content_hash": synth.content_hash, "synth": synth.meta["synth"]}
    if as_json:
        print_json(record)
    else:
        typer.echo(synth_summary(record))
