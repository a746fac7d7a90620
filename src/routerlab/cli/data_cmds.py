"""``routerlab import`` and ``routerlab info``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from routerlab._words import plural
from routerlab.cli import app
from routerlab.cli._io import open_table, print_json


@app.command("import")
def import_cmd(
    format: Annotated[str, typer.Argument(help="Upstream format; see 'routerlab formats'.")],
    paths: Annotated[list[Path], typer.Argument(help="Upstream files or folders, read as they are.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Directory to write the table to.")],
    trust_pickle: Annotated[
        bool, typer.Option("--trust-pickle", metavar="", help="Allow reading pickle files (unpickling runs code).")
    ] = False,
    name: Annotated[str | None, typer.Option(help="Name recorded in the table.")] = None,
    force: Annotated[
        bool, typer.Option("--force", metavar="", help="Replace a table already in the output directory.")
    ] = False,
    option: Annotated[
        list[str] | None,
        typer.Option("--option", "-O", help="Importer option KEY=VALUE, repeatable (e.g. on_duplicate=mean, "
                     "rename=prompt_id=query_id,model_id=actor,label=score, actors=FILE; steps: queries=FILE)."),
    ] = None,
    visible: Annotated[
        list[str] | None,
        typer.Option("--visible", metavar="COL,...", help="Query metadata columns routers may read, comma-separated "
                     "and repeatable, beside those the importer declares (a task or cluster label a deployed router "
                     "would know); every other column stays hidden from routers. For 'long' files these are also "
                     "the per-query columns kept (-O hidden=COL,... keeps more, hidden). An unknown column is an "
                     "error."),
    ] = None,
) -> None:
    """Read upstream routing data into a routerlab table directory.

    A router sees a query's id, text, dataset, split and the columns declared visible, nothing else; 'routerlab
    info' lists which columns are visible and which hidden."""
    from routerlab._spec import coerce
    from routerlab.data.importers import read
    from routerlab.errors import UsageError

    _check_output(output, force)
    options: dict[str, object] = {}
    for item in option or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"bad --option {item!r}; write KEY=VALUE")
        options[key.strip()] = value if key.strip() in {"rename", "actors", "queries", "name", "visible", "hidden"} \
            else coerce(value)
    declared = [c.strip() for v in [*([str(options["visible"])] if "visible" in options else []), *(visible or [])]
                for c in v.split(",") if c.strip()]
    if declared:
        options["visible"] = ",".join(dict.fromkeys(declared))
    if trust_pickle:
        options["trust_pickle"] = True
    table = read(format, *paths, **options)
    if table.n_queries == 0 or table.n_actors == 0:
        from routerlab.errors import DataError

        raise DataError(f"holds no {'queries' if table.n_queries == 0 else 'actors'}; nothing to import",
                        file=paths[0])
    if name:
        from dataclasses import replace

        table = replace(table, name=name)
    table.save(output)
    import numpy as np

    from routerlab.reports.text import observed_share

    observed = int(np.count_nonzero(~np.isnan(table.score)))
    ep = table.episodes
    episodes = "" if ep is None else f", {plural(ep.n_cells, 'episode')} of {plural(len(ep), 'step')}"
    typer.echo(
        f"wrote {output}: {plural(table.n_queries, 'query')} x {plural(table.n_actors, 'actor')}, "
        f"{observed_share(observed, table.score.size)}{episodes}, hash {table.content_hash[:12]}"
    )


def _check_output(output: Path, force: bool) -> None:
    """Refuse, before any reading, an output that is a file or a non-empty directory (a table only with --force).

    With ``--force`` an existing table is replaced atomically by the save; a directory holding other
    files is never overwritten (the save refuses it too).
    """
    from routerlab.cli._io import check_output_dir, refuse_overwrite
    from routerlab.data.store import MANIFEST
    from routerlab.errors import DataError

    if output.exists() and not output.is_dir():
        raise DataError("exists and is not a directory; choose a new directory for the table", file=output)
    check_output_dir(output)  # a path under a file, a place that cannot be written: as every -o
    if not output.exists():
        return
    if (output / MANIFEST).exists():
        refuse_overwrite(output, force, what="already holds a routerlab table")  # every command's rule
        return
    if any(output.iterdir()):
        raise DataError("exists and is not empty (not a routerlab table); choose a new or empty directory",
                        file=output)


@app.command("formats")
def formats_cmd() -> None:
    """List the upstream formats 'routerlab import' reads."""
    from routerlab.data.importers import importers

    for info in importers().values():
        typer.echo(f"{info.name:14s} {info.summary}")


@app.command("info")
def info_cmd(
    table_dir: Annotated[Path | None, typer.Argument(help="A table directory (default: the demo).")] = None,
    as_json: Annotated[bool, typer.Option("--json", metavar="", help="Print one JSON object.")] = False,
) -> None:
    """Describe a table: sizes, datasets, splits, coverage, duplicates and train/test leaks."""
    import numpy as np

    from routerlab.data.quality import quality_report

    table = open_table(table_dir)
    info = table.describe()
    info["unobserved_cells"] = int(np.count_nonzero(np.isnan(table.score)))
    info["quality"] = quality_report(table)
    if as_json:
        print_json(info)
        return
    from routerlab.reports.text import info_text

    typer.echo(info_text(info))
