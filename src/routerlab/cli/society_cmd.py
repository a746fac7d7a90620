"""``routerlab society``: how diverse is the pool, and which few actors carry that diversity (SPEC 2)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated, Any

import typer

from routerlab.cli import app
from routerlab.cli._io import check_output_dir, json_option, open_table, print_json, seed_option
from routerlab.progress import task

CURVE_MAX = 100  # the greedy curve runs to every actor, or to this many on larger pools


def society_report(
    table: Any, *, metric: str = "cosine", linkage: str = "single", coreset_k: int | None = None,
    alpha: float = 1.0, by: list[str] | None = None, split: str | None = "train", nan: str = "drop",
    out_dir: Path | None = None, seed: int = 0,
) -> dict[str, Any]:
    """Everything ``routerlab society`` reports, as one JSON-ready dict (figures written to ``out_dir``)."""
    from routerlab import society
    from routerlab.errors import UsageError
    from routerlab.society.coresets import greedy_coreset
    from routerlab.society.entropy import check_linkage, prepare

    society.d_max(metric, 1)  # validates the metric before any work
    check_linkage(linkage)
    if nan not in ("drop", "zero", "raise"):
        raise UsageError(f"unknown NaN rule {nan!r}; use drop, zero or raise")
    with warnings.catch_warnings(record=True) as caught, task(f"society: {metric} distances between the actors"):
        warnings.simplefilter("always")
        soc, dist, dropped = prepare(table, metric, split=split, nan=nan)  # type: ignore[arg-type]
    notes = [str(w.message) for w in caught]
    div = society.diversity_from_distances(dist, linkage, names=soc.names, n_dropped_items=dropped, notes=notes)
    from routerlab.data.provenance import Provenance

    record: dict[str, Any] = {**Provenance.of(table, split or "all", seed=seed).to_dict(), **div.to_dict()}
    cs = None
    if coreset_k is not None:
        if not 1 <= coreset_k <= div.n_actors:
            raise UsageError(f"--coreset must be in 1..{div.n_actors}, got {coreset_k}")
        cs = greedy_coreset(dist, coreset_k, linkage, alpha=alpha, behaviour=soc.matrix, names=soc.names,
                            full_hse=div.hse, stop_fraction=None,
                            max_size=max(coreset_k, min(div.n_actors, CURVE_MAX)))
        record["coreset"] = cs.to_dict()
    elif alpha != 1.0:
        raise UsageError("--alpha only applies with --coreset K")
    specs = []
    for col in by or []:
        spec = society.table_specialists(table, col, split)
        sdiv = society.diversity(spec, metric, linkage)
        specs.append(spec)
        record.setdefault("specialists", []).append(
            {"by": col, "n_experts": sdiv.n_actors, "experts": sdiv.names, "hse": sdiv.hse,
             "hse_normalized": sdiv.hse_normalized, "notes": spec.notes})
    if len(specs) > 1:
        udiv = society.diversity(society.union_society(*specs), metric, linkage)
        record["specialists_union"] = {"by": list(by or []), "n_experts": udiv.n_actors, "hse": udiv.hse,
                                       "hse_normalized": udiv.hse_normalized}
    if out_dir is not None:
        write_society(record, div, cs, dist, out_dir, seed, linkage, _title(table))
    return record


def _title(table: Any) -> str:
    from routerlab.data.table import RoutingTable
    from routerlab.reports.audit import display_name

    return display_name(table) if isinstance(table, RoutingTable) else str(getattr(table, "name", "society"))


def write_society(record: dict[str, Any], div: Any, cs: Any, dist: Any, out_dir: Path, seed: int, linkage: str,
                  name: str) -> None:
    """Publish society.json (the record, with ``figures`` and ``files``) and the two plots into ``out_dir``,
    atomically: an interrupted run leaves ``out_dir`` as it was."""
    from routerlab._atomic import atomic_directory
    from routerlab.reports.files import write_json
    from routerlab.reports.society_plots import plot_coreset_curve, plot_dendrogram
    from routerlab.society.coresets import greedy_coreset, random_subsets_curve

    if cs is None and div.n_actors >= 2:
        cs = greedy_coreset(dist, min(div.n_actors, 2), linkage, names=div.names, full_hse=div.hse,
                            stop_fraction=None, max_size=min(div.n_actors, CURVE_MAX))
    with atomic_directory(out_dir) as tmp:
        figures = [plot_dendrogram(div, tmp / "society_dendrogram.png", title=f"{name}: {div.n_actors} actors, "
                                   f"HSE {div.hse:.3f} (normalised {div.hse_normalized:.3f})").name]
        if cs is not None:
            with task("society: random-subset baseline (30 draws per size)"):
                rnd = random_subsets_curve(dist, range(1, len(cs.curve) + 1), linkage, n_draws=30, seed=seed)
            figures.append(plot_coreset_curve(cs, tmp / "society_curve.png", rnd,
                                              title=f"Diminishing returns of diversity: {name}").name)
        record["figures"] = [str(out_dir / f) for f in figures]
        record["files"] = [str(out_dir / f) for f in ("society.json", *figures)]
        write_json(tmp / "society.json", record)


@app.command("society")
def society_cmd(
    table_dir: Annotated[Path | None, typer.Argument(help="A table directory (default: the demo).")] = None,
    metric: Annotated[str, typer.Option(help="cosine, correlation, euclidean or manhattan.")] = "cosine",
    linkage: Annotated[str, typer.Option(help="single, complete or average.")] = "single",
    coreset: Annotated[int | None, typer.Option(
        "--coreset", min=1, help="Greedy max-HSE coreset of K actors, with the curve and the 90/95% sizes.")] = None,
    alpha: Annotated[float, typer.Option(
        help="Joint criterion: alpha * normHSE + (1 - alpha) * oracle accuracy (with --coreset), in [0, 1].")] = 1.0,
    by: Annotated[list[str] | None, typer.Option(
        "--by", help="Also the specialist society of this item partition (dataset or a query column); "
                     "repeat for several, whose union is reported too.")] = None,
    split: Annotated[str, typer.Option(help="Queries whose scores are the behaviour vectors; 'all' for "
                                            "every query.")] = "train",
    nan: Annotated[str, typer.Option(help="Unobserved cells: drop (the item), zero, or raise.")] = "drop",
    as_json: Annotated[bool, json_option()] = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Directory for the PNG plots.")] = None,
    seed: Annotated[int, seed_option("Seed of the random-subset baseline in the plot.")] = 0,
) -> None:
    """Society diversity (HSE, SPEC 2): is the pool diverse enough for routing to mean anything?"""
    if not 0.0 <= alpha <= 1.0:  # NaN fails too
        from routerlab.errors import UsageError

        raise UsageError(f"--alpha must be a number in [0, 1], got {alpha}")
    if output is not None:
        check_output_dir(output)
    from routerlab.reports.files import say_written

    table = open_table(table_dir)
    by_cols = [c for item in (by or []) for c in item.split(",") if c]
    record = society_report(table, metric=metric, linkage=linkage, coreset_k=coreset, alpha=alpha,
                            by=by_cols, split=None if split == "all" else split, nan=nan, out_dir=output,
                            seed=seed)
    if as_json:
        print_json(record)
        say_written([Path(f) for f in record.get("files", [])], to_stderr=True)
        return
    typer.echo(f"{record['n_actors']} actors, {record['n_items']} items ({record['metric']} distance, "
               f"{record['linkage']} linkage)")
    typer.echo(f"HSE {record['hse']:.4f} of at most {record['max_hse']:.4f}: normalised "
               f"{record['hse_normalized']:.4f}")
    if "coreset" in record:
        c = record["coreset"]
        typer.echo(f"coreset of {c['k']}: {', '.join(c['order'])}")
        typer.echo(f"90% of the HSE with {c['size_90']} actors, 95% with {c['size_95']}")
    for s in record.get("specialists", []):
        typer.echo(f"specialists by {s['by']}: {s['n_experts']} experts, HSE {s['hse']:.4f} "
                   f"(normalised {s['hse_normalized']:.4f})")
    if "specialists_union" in record:
        u = record["specialists_union"]
        typer.echo(f"union of the specialists: {u['n_experts']} experts, HSE {u['hse']:.4f}")
    for note in record.get("notes", []):
        typer.echo(f"note: {note}")
    say_written([Path(f) for f in record.get("files", [])])
