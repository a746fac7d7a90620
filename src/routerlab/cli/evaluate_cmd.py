"""``routerlab evaluate``, ``routerlab scaling`` and ``routerlab groups``: the full-observability protocols."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from routerlab.cli import app
from routerlab.cli._io import open_table, print_json
from routerlab.errors import UsageError


def _ints(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{what} must be comma-separated integers, got {text!r}") from None


def _floats(text: str, what: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{what} must be comma-separated numbers, got {text!r}") from None


@app.command("evaluate")
def evaluate_cmd(
    table_dir: Annotated[Path | None, typer.Argument(help="A table directory (default: the demo).")] = None,
    routers: Annotated[str, typer.Option("--routers", help="Comma-separated router specs, e.g. oracle,knn:k=10.")] = (
        "oracle,random,best-single,knn"
    ),
    encoder: Annotated[str, typer.Option(help="Query encoder: tfidf, minilm or precomputed:path=FILE.")] = "tfidf",
    split: Annotated[str, typer.Option(help="given, random[:F] or ood:DS1,DS2.")] = "given",
    seed: Annotated[int, typer.Option(help="Seed for splits, routers and the bootstrap.")] = 0,
    n_boot: Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples per interval.")] = 1000,
    sweep: Annotated[str | None, typer.Option(help="Also sweep lambda in score - lambda * (cost|latency).")] = None,
    compare_to: Annotated[str, typer.Option("--compare-to", help="Paired bootstrap of every router vs this.")] = (
        "best-single"
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write JSON, per-query choices, plots.")] = None,
) -> None:
    """Train routers on the train split and evaluate them on the test split, every metric with a 95% CI."""
    from routerlab.protocols.full import evaluate
    from routerlab.reports.evaluation import leaderboard_text, write_evaluation
    from routerlab.routers.base import split_router_list

    table = open_table(table_dir)
    result = evaluate(table, split_router_list(routers), split=split, encoder=encoder, seed=seed, n_boot=n_boot,
                      sweep=sweep, compare_to=compare_to)
    if output is not None:
        write_evaluation(result, output)
    if as_json:
        print_json(result.to_dict())
    else:
        typer.echo(leaderboard_text(result))
        if output is not None:
            typer.echo(f"wrote {output}")


@app.command("scaling")
def scaling_cmd(
    table_dir: Annotated[Path | None, typer.Argument(help="A table directory (default: the demo).")] = None,
    m: Annotated[str, typer.Option("--m", help="Pool sizes, comma-separated.")] = "2,3,5",
    p: Annotated[str, typer.Option("--p", help="Oracle probabilities p of r_o(p).")] = "0,0.25,0.5,0.75,1",
    samples: Annotated[int, typer.Option(help="Random actor subsets per pool size.")] = 100,
    split: Annotated[str, typer.Option(help="given, random[:F] or ood:DS1,DS2.")] = "given",
    seed: Annotated[int, typer.Option()] = 0,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write scaling.json and scaling.png.")] = None,
) -> None:
    """Model-level scaling curve: mu_o of r_o(p) and the best single actor against pool size (SPEC 4)."""
    from routerlab.data.splits import make_split
    from routerlab.protocols.scaling import plot_scaling, scaling_curve
    from routerlab.reports.evaluation import write_json

    table = open_table(table_dir)
    curve = scaling_curve(table, make_split(table, split, seed), _ints(m, "--m"), _floats(p, "--p"), samples, seed)
    from routerlab import __version__

    record = {"routerlab_version": __version__, "data": {"name": table.name, "content_hash": table.content_hash},
              **curve.to_dict()}
    if output is not None:
        output.mkdir(parents=True, exist_ok=True)
        write_json(output / "scaling.json", record)
        plot_scaling(curve, str(output / "scaling.png"), f"Scaling curve: {table.name}")
    if as_json:
        print_json(record)
        return
    typer.echo("m    " + "  ".join(f"p={x:<5g}" for x in curve.p) + "  best-single")
    for i, mm in enumerate(curve.m):
        cells = "  ".join(f"{curve.oracle_p[x]['mean'][i]:.4f} " for x in curve.p)
        typer.echo(f"{mm:<4d} {cells}  {curve.best_single['mean'][i]:.4f}")


@app.command("groups")
def groups_cmd(
    table_dir: Annotated[Path | None, typer.Argument(help="A table directory (default: the demo).")] = None,
    m: Annotated[str, typer.Option("--m", help="Group sizes, comma-separated.")] = "3,5",
    routers: Annotated[str, typer.Option("--routers", help="Routers to evaluate on each group.")] = (
        "oracle,random,best-single,knn"
    ),
    draws: Annotated[int, typer.Option(help="Random draws per group; the best train oracle is kept.")] = 1000,
    encoder: Annotated[str, typer.Option()] = "tfidf",
    split: Annotated[str, typer.Option()] = "given",
    seed: Annotated[int, typer.Option()] = 0,
    n_boot: Annotated[int, typer.Option("--n-boot")] = 1000,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    output: Annotated[Path | None, typer.Option("-o", "--output")] = None,
) -> None:
    """Candidate groups (all-strong, all-weak, strong-to-weak; SPEC 4), every router evaluated on each."""
    from routerlab.protocols.groups_eval import evaluate_groups
    from routerlab.reports.evaluation import groups_text, write_json
    from routerlab.routers.base import split_router_list

    table = open_table(table_dir)
    record = evaluate_groups(table, _ints(m, "--m"), split_router_list(routers), draws=draws, encoder=encoder,
                             split=split, seed=seed, n_boot=n_boot)
    if output is not None:
        output.mkdir(parents=True, exist_ok=True)
        write_json(output / "groups.json", record)
    if as_json:
        print_json(record)
    else:
        typer.echo(groups_text(record))
