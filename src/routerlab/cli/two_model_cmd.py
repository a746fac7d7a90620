"""``routerlab two-model``: routers between a small and a large model, trained in-domain, evaluated on each
in-domain and out-of-domain dataset (SPEC 6; the routerxbench Tables 1-2 layout; docs/two-model.md).

Every option is checked before the table is loaded or any router trained (one line, exit 2); the actors and
dataset names are checked against the table before any encoding or training.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from routerlab.cli import app
from routerlab.cli._io import check_output_dir, json_option, open_table, print_json, seed_option
from routerlab.cli.evaluate_cmd import ENCODER_HELP, MAX_BOOT, MIN_BOOT, router_specs
from routerlab.errors import UsageError
from routerlab.metrics.catalog import label

SHOWN_METRICS = ("auroc", "lpm", "hcr")


def dataset_list(text: str | None, option: str) -> list[str]:
    """``D1,D2`` -> ["D1", "D2"] (names may hold spaces; each stripped); None stays None upstream. An empty
    name or a repeated one is a UsageError."""
    if text is None:
        return []
    names = [x.strip() for x in text.split(",")]
    if not names or any(not x for x in names):
        raise UsageError(f"{option} needs comma-separated dataset names, got {text!r}")
    repeated = [x for x in names if names.count(x) > 1]
    if repeated:
        raise UsageError(f"{option} names dataset {repeated[0]!r} twice")
    return names


def band(text: str, option: str) -> tuple[float, float]:
    """``LO,HI`` -> (lo, hi): two finite numbers in [0, 1], lo <= hi."""
    from routerlab.protocols.two_model import check_band

    parts = [x.strip() for x in text.split(",")]
    if len(parts) != 2:
        raise UsageError(f"{option} needs two numbers LO,HI in [0, 1], got {text!r}")
    try:
        values = (float(parts[0]), float(parts[1]))
    except ValueError:
        raise UsageError(f"{option} needs two numbers LO,HI in [0, 1], got {text!r}") from None
    return check_band(values, option)


def _number(value: Any) -> str:
    v = float("nan") if value is None else float(value)
    return "-" if math.isnan(v) else f"{v:.3f}"


def results_text(result: dict[str, Any], metrics: tuple[str, ...] = SHOWN_METRICS) -> str:
    """One block per metric: rows = routers, columns = datasets, ID avg, OOD avg (values on the 0-1 scale;
    the intervals are in the JSON and in tables.md)."""
    ids, oods = list(result["id_datasets"]), list(result["ood_datasets"])
    columns = [*ids, "ID avg", *oods, *(["OOD avg"] if oods else [])]
    width = max(len(r["router"]) for r in result["results"])
    lines = [f"two-model: small {result['small']}, large {result['large']}; trained on the in-domain split "
             f"({result['split'].get('n_train', '?')} queries); {result['convention']} curves, "
             f"{result['n_boot']} resamples; dropped {sum(result['dropped'].values())} queries lacking a score"]
    for metric in metrics:
        widths = [max(len(c), 6) for c in columns]
        lines.append("")
        lines.append(f"{label(metric):<{width}}  " + "  ".join(f"{c:>{w}}" for c, w in zip(columns, widths,
                                                                                             strict=True)))
        for r in result["results"]:
            cells = []
            for c in columns:
                source = r["id_mean"] if c == "ID avg" else r["ood_mean"] if c == "OOD avg" else r["datasets"][c]
                cells.append(_number(source[metric]))
            lines.append(f"{r['router']:<{width}}  " + "  ".join(f"{v:>{w}}" for v, w in zip(cells, widths,
                                                                                            strict=True)))
    return "\n".join(lines)


@app.command("two-model")
def two_model_cmd(
    table_dir: Annotated[Path, typer.Argument(help="A table directory with both models' scores.")],
    small: Annotated[str, typer.Option("--small", help="The small model: the actor that answers by default.")],
    large: Annotated[str, typer.Option("--large", help="The large model: the actor a query is escalated to.")],
    routers: Annotated[str, typer.Option(
        "--routers", help="Comma-separated router specs, e.g. oracle,best-single,knn,probe-dirichlet.")],
    features: Annotated[Path | None, typer.Option(
        "--features", help="The small model's signals: a routerlab extract directory or an .npz of arrays "
                           "(ids + hidden / option_logits / self_ask / samples), joined by query id.")] = None,
    id_datasets: Annotated[str | None, typer.Option(
        "--id", help="In-domain datasets, comma-separated (default: every dataset not named by --ood).")] = None,
    ood_datasets: Annotated[str | None, typer.Option(
        "--ood", help="Out-of-domain datasets, comma-separated: evaluated whole, never trained on.")] = None,
    split: Annotated[str, typer.Option(
        help="Split of the in-domain queries: random[:F] (seeded, stratified by dataset) or given.")] = "random:0.2",
    seed: Annotated[int, seed_option()] = 0,
    encoder: Annotated[str, typer.Option(help=ENCODER_HELP)] = "tfidf",
    boot: Annotated[int, typer.Option(
        "--boot", min=MIN_BOOT, max=MAX_BOOT, help=f"Bootstrap resamples per 95% interval ({MIN_BOOT}.."
                                                   f"{MAX_BOOT:,}).")] = 1000,
    convention: Annotated[str, typer.Option(
        help="Curve convention: routerlab (exact tie expectation) or routerxbench (its released code).")
    ] = "routerlab",
    lpm_band: Annotated[str, typer.Option("--lpm-band", help="LPM call-rate band LO,HI.")] = "0.25,0.30",
    rp_band: Annotated[str, typer.Option(
        "--rp-band", help="HCR relative-performance band R1,R2 (tau_i = Perf_S + R_i (Perf_L - Perf_S)).")
    ] = "0.85,0.95",
    compare_to: Annotated[str | None, typer.Option(
        "--compare-to", help="A router of --routers: every other router's result gets its paired differences from "
                             "it (each metric's difference with a 95% interval from the same resamples).")] = None,
    as_json: Annotated[bool, json_option()] = False,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Directory for results.json, results.csv, tables.md and one call-rate plot per "
                               "dataset.")] = None,
) -> None:
    """Two-model routing (SPEC 6): train routers on the in-domain split, then AUROC, LPM, MPM, HCR, AUC and
    APGR with 95% intervals on each in-domain and out-of-domain dataset, and their ID and OOD averages."""
    from routerlab.features.registry import get_encoder
    from routerlab.protocols.two_model import check_convention, run_two_model
    from routerlab.reports.files import say_written, write_json

    specs = router_specs(routers)
    if compare_to is not None and compare_to not in specs:
        raise UsageError(f"--compare-to {compare_to!r} is not one of --routers ({', '.join(specs)})")
    get_encoder(encoder)  # an unknown encoder or option: one line now, not after the table is read
    check_convention(convention)
    bands = band(lpm_band, "--lpm-band"), band(rp_band, "--rp-band")
    ids = dataset_list(id_datasets, "--id") if id_datasets is not None else None
    oods = dataset_list(ood_datasets, "--ood")
    both = [d for d in ids or [] if d in oods]
    if both:
        raise UsageError(f"dataset {both[0]!r} is named by both --id and --ood")
    if small == large:
        raise UsageError(f"--small and --large are both {small!r}; name two different actors")
    if features is not None and not (features.is_dir() or features.is_file()):
        raise UsageError(f"--features {features}: no such directory or file")
    if output is not None:
        check_output_dir(output)
    table = open_table(table_dir)
    result = run_two_model(table, small, large, specs, signals=features, id_datasets=ids, ood_datasets=oods,
                           split=split, seed=seed, encoder=encoder, n_boot=boot, convention=convention,
                           lpm_band=bands[0], rp_band=bands[1], compare_to=compare_to)
    record = result.to_dict()
    written: list[Path] = []
    if output is not None:
        from routerlab.reports.two_model_report import write_two_model_report

        output.mkdir(parents=True, exist_ok=True)
        write_json(output / "results.json", record)
        written += [output / "results.json", *write_two_model_report(record, output)]
    if as_json:
        print_json(record)
    else:
        typer.echo(results_text(record))
    say_written(written, to_stderr=as_json)
