"""``routerlab society``: how diverse is the pool, and which few actors carry that diversity (SPEC 2).

The command parses its options into :class:`~routerlab.protocols.society.SocietySettings`, runs the registered
``society`` protocol and prints (or writes, with its figures) what the run found."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from routerlab._words import plural
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
from routerlab.cli._protocol import option_help, run_from_cli, with_protocol

if TYPE_CHECKING:
    from routerlab.protocols.society import SocietyReport

BASELINE_DRAWS = 30  # random subsets per size in the curve figure's baseline


def _title(table: Any) -> str:
    from routerlab.data.table import RoutingTable
    from routerlab.reports.audit import display_name

    return display_name(table) if isinstance(table, RoutingTable) else str(getattr(table, "name", "society"))


def write_society(record: dict[str, Any], report: SocietyReport, out_dir: Path, seed: int, name: str) -> None:
    """Publish society.json (the record, with ``figures`` and ``files``) and the two plots into ``out_dir``,
    atomically: an interrupted run leaves ``out_dir`` as it was."""
    from routerlab._atomic import atomic_directory
    from routerlab.progress import task
    from routerlab.reports.files import write_json
    from routerlab.reports.society_plots import plot_coreset_curve, plot_dendrogram

    div = report.diversity
    cs = report.figure_curve()
    with atomic_directory(out_dir) as tmp:
        figures = [plot_dendrogram(div, tmp / "society_dendrogram.png", title=f"{name}: {div.n_actors} actors, "
                                   f"HSE {div.hse:.3f} (normalised {div.hse_normalized:.3f})").name]
        if cs is not None:
            with task(f"society: random-subset baseline ({BASELINE_DRAWS} draws per size)"):
                rnd = report.random_baseline(BASELINE_DRAWS, seed)
            figures.append(plot_coreset_curve(cs, tmp / "society_curve.png", rnd,
                                              title=f"Diminishing returns of diversity: {name}").name)
        record["figures"] = [str(out_dir / f) for f in figures]
        record["files"] = [str(out_dir / f) for f in ("society.json", *figures)]
        write_json(tmp / "society.json", record)


def _actors(size: int | None) -> str:
    """A coreset size: ``4 actors``, ``1 actor``, or ``none`` when the greedy stopped before the share."""
    return "none" if size is None else plural(size, "actor")


def society_text(record: dict[str, Any]) -> str:
    """What ``routerlab society`` prints: the pool's HSE, the coreset, the specialist societies and the notes."""
    lines = [f"{plural(record['n_actors'], 'actor')}, {plural(record['n_items'], 'item')} ({record['metric']} "
             f"distance, "
             f"{record['linkage']} linkage)",
             f"HSE {record['hse']:.4f} of at most {record['max_hse']:.4f}: normalised {record['hse_normalized']:.4f}"]
    if "coreset" in record:
        c = record["coreset"]
        lines.append(f"coreset of {c['k']}: {', '.join(c['order'])}")
        lines.append(f"90% of the HSE with {_actors(c['size_90'])}, 95% with {c['size_95']}")
    for s in record.get("specialists", []):
        lines.append(f"specialists by {s['by']}: {plural(s['n_experts'], 'expert')}, HSE {s['hse']:.4f} "
                     f"(normalised {s['hse_normalized']:.4f})")
    if "specialists_union" in record:
        u = record["specialists_union"]
        lines.append(f"union of the specialists: {plural(u['n_experts'], 'expert')}, HSE {u['hse']:.4f}")
    lines += [f"note: {note}" for note in record.get("notes", [])]
    from routerlab.metrics.catalog import legend_line

    lines += legend_line(["HSE"])
    return "\n".join(lines)


def _s(name: str) -> str:
    """A setting's option help, read from the society protocol's settings when the command is built."""
    from routerlab.protocols.society import SocietySettings

    return option_help(SocietySettings, name)



@app.command("society")
def society_cmd(
    table_dir: Annotated[Path | None, typer.Argument(help="A table directory (default: the demo).")] = None,
    metric: Annotated[str | None, typer.Option(help=_s("metric"))] = None,
    linkage: Annotated[str | None, typer.Option(help=_s("linkage"))] = None,
    coreset: Annotated[int | None, typer.Option("--coreset", help=_s("coreset"))] = None,
    alpha: Annotated[float | None, typer.Option(help=_s("alpha"))] = None,
    by: Annotated[list[str] | None, typer.Option(
        "--by", help="Also the specialist society of this item partition (dataset or a query column); "
                     "repeat (or comma-separate) for several, whose union is reported too.")] = None,
    split: Annotated[str | None, typer.Option(help=_s("split"))] = None,
    nan: Annotated[str | None, typer.Option(help=_s("nan"))] = None,
    curve_max: Annotated[int | None, typer.Option("--curve-max", help=_s("curve_max"))] = None,
    as_json: Annotated[bool, json_option()] = False,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Directory for society.json and the PNG plots.")] = None,
    seed: Annotated[int, seed_option("Seed of the random-subset baseline in the plot.")] = 0,
    force: Annotated[bool, force_option()] = False,
) -> None:
    """Society diversity (HSE; SPEC 2): is the pool diverse enough for routing to mean anything?"""
    from routerlab.protocols.society import SocietySettings

    by_cols = [c for item in (by or []) for c in item.split(",") if c]
    settings = SocietySettings.from_cli(metric=metric, linkage=linkage, coreset=coreset, alpha=alpha,
                                        by=by_cols or None, split=split, nan=nan, curve_max=curve_max)
    if output is not None:
        check_output_dir(output)
        refuse_overwrite(output, force)
    from routerlab.reports.files import say_written

    table = open_table(table_dir)
    result = run_from_cli("society", table, settings, seed)
    report: SocietyReport = result.native
    record = with_protocol(report.to_dict(), result)
    if output is not None:
        write_society(record, report, output, seed, _title(table))
    if as_json:
        print_json(record)
        say_written([Path(f) for f in record.get("files", [])], to_stderr=True)
        return
    typer.echo(society_text(record))
    say_written([Path(f) for f in record.get("files", [])])
