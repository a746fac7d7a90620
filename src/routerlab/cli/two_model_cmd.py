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
from routerlab.cli.evaluate_cmd import router_specs
from routerlab.errors import UsageError
from routerlab.metrics.catalog import label, legend_line

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


def _number(value: Any) -> str:
    v = float("nan") if value is None else float(value)
    return "-" if math.isnan(v) else f"{v:.3f}"


def _queries(n: int | None) -> str:
    return "? queries" if n is None else plural(int(n), "query")


def results_text(result: dict[str, Any], metrics: tuple[str, ...] = SHOWN_METRICS) -> str:
    """One block per metric: rows = routers, columns = datasets, ID avg, OOD avg (values on the 0-1 scale;
    the intervals are in the JSON and in tables.md)."""
    ids, oods = list(result["id_datasets"]), list(result["ood_datasets"])
    columns = [*ids, "ID avg", *oods, *(["OOD avg"] if oods else [])]
    width = max(len(r["router"]) for r in result["results"])
    lines = [f"two-model: small {result['small']}, large {result['large']}; trained on the in-domain split "
             f"({_queries(result['split'].get('n_train'))}); {result['convention']} curves, "
             f"{result['n_boot']} resamples; dropped {_queries(sum(result['dropped'].values()))} lacking a score"]
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
    lines.append("")  # one legend under the metrics' tables: they share their columns
    lines += legend_line([*(label(m) for m in metrics), "ID avg", *(["OOD avg"] if oods else [])])
    return "\n".join(lines + operating_point_lines(result) + early_stopping_lines(result))


def early_stopping_lines(result: dict[str, Any]) -> list[str]:
    """With a development part: one line per router that trained by epochs, the epoch it kept there."""
    from routerlab.reports.evaluation import early_stopping_line

    found = [early_stopping_line(r["router"], r["early_stopping"]) for r in result["results"]
             if r.get("early_stopping")]
    return ["", *found] if found else []


def operating_point_lines(result: dict[str, Any]) -> list[str]:
    """With a development part: per router, the threshold fixed there for the target call rate, the rate it
    realizes on the development queries, and on the in-domain (and out-of-domain) test queries the realized call
    rate and Phi there with its interval; nothing without one."""
    rows = [(r["router"], r["operating_point"]) for r in result["results"] if r.get("operating_point")]
    if not rows:
        return []
    target = rows[0][1]["target_rate"]
    n_dev = rows[0][1]["n_fit"]
    head = ["router", "threshold", "dev rate", "ID rate", "ID Phi [95% CI]"]
    if any("ood" in op["domains"] for _, op in rows):
        head += ["OOD rate", "OOD Phi [95% CI]"]
    body = []
    for spec, op in rows:
        value = op["threshold"]
        cells = [spec, "all" if value is None else f"{value:.4g}", f"{op['dev_call_rate']:.3f}"]
        for dom in ("id", "ood")[: (len(head) - 3) // 2]:
            c = op["domains"][dom]
            lo, hi = c["phi_at_call_rate_ci"]
            ci = "" if lo is None or hi is None or math.isnan(lo) or math.isnan(hi) else f" [{lo:.3f}, {hi:.3f}]"
            cells += [f"{c['call_rate']:.3f}", f"{_number(c['phi_at_call_rate'])}{ci}"]
        body.append(cells)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    lines = ["", f"Call rate {target:g} with its threshold fixed on {int(n_dev)} development "
                 f"quer{'y' if int(n_dev) == 1 else 'ies'} "
                 "(bounds have none): realized rates on the test queries"]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
              for cells in [head, *body]]
    return lines


def _help(name: str) -> str:
    """A setting's meaning as its option's help (the protocol declares it once)."""
    from routerlab.protocols.two_model import TwoModelSettings

    text = TwoModelSettings.help(name)
    return text[:1].upper() + text[1:] + "."


def _default(name: str) -> Any:
    """A setting's default as its option takes it (the protocol declares it once; a band as LO,HI text)."""
    from routerlab.protocols.two_model import TwoModelSettings

    default = next(s["default"] for s in TwoModelSettings.describe() if s["name"] == name)
    return ",".join(f"{v:.2f}" for v in default) if isinstance(default, list) else default


@app.command("two-model")
def two_model_cmd(
    table_dir: Annotated[Path, typer.Argument(help="A table directory with both models' scores.")],
    routers: Annotated[str, typer.Option(
        "--routers", help="Comma-separated router specs, e.g. oracle,best-single,knn,probe-dirichlet.")],
    small: Annotated[str | None, typer.Option("--small", help=_help("small"))] = None,
    large: Annotated[str | None, typer.Option("--large", help=_help("large"))] = None,
    features: Annotated[Path | None, typer.Option("--features", help=_help("features"))] = None,
    id_datasets: Annotated[str | None, typer.Option("--id", help=_help("id_datasets"))] = None,
    ood_datasets: Annotated[str | None, typer.Option("--ood", help=_help("ood_datasets"))] = None,
    split: Annotated[str, typer.Option(help=_help("split"))] = _default("split"),
    seed: Annotated[int, seed_option()] = 0,
    encoder: Annotated[str, typer.Option(help=_help("encoder"))] = _default("encoder"),
    boot: Annotated[int, typer.Option("--boot", help=_help("n_boot"))] = _default("n_boot"),
    convention: Annotated[str, typer.Option(help=_help("convention"))] = _default("convention"),
    lpm_band: Annotated[str, typer.Option("--lpm-band", help=_help("lpm_band"))] = _default("lpm_band"),
    rp_band: Annotated[str, typer.Option("--rp-band", help=_help("rp_band"))] = _default("rp_band"),
    compare_to: Annotated[str | None, typer.Option("--compare-to", help=_help("compare_to"))] = None,
    dev: Annotated[str | None, typer.Option("--dev", metavar="F", help=_help("dev"))] = None,
    call_rate: Annotated[str | None, typer.Option("--call-rate", metavar="X", help=_help("call_rate"))] = None,
    train_sizes: Annotated[str | None, typer.Option("--train-sizes", metavar="F1,F2",
                                                    help=_help("train_sizes"))] = None,
    as_json: Annotated[bool, json_option()] = False,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Directory for results.json, results.csv, tables.md and one call-rate plot per "
                               "dataset.")] = None,
    force: Annotated[bool, force_option()] = False,
) -> None:
    """Two-model routing (SPEC 6): train routers on the in-domain split, then AUROC, LPM, MPM, HCR, AUC and
    APGR with 95% intervals on each in-domain and out-of-domain dataset, and their ID and OOD averages."""
    from routerlab.protocols.base import get_protocol
    from routerlab.protocols.two_model import TwoModelSettings
    from routerlab.reports.files import say_written, write_json

    specs = router_specs(routers)
    if compare_to is not None and compare_to not in specs:
        raise UsageError(f"--compare-to {compare_to!r} is not one of --routers ({', '.join(specs)})")
    settings = TwoModelSettings.from_cli(
        small=small, large=large, features=None if features is None else str(features),
        id_datasets=dataset_list(id_datasets, "--id") if id_datasets is not None else None,
        ood_datasets=dataset_list(ood_datasets, "--ood") if ood_datasets is not None else None, split=split,
        encoder=encoder, n_boot=boot, convention=convention, lpm_band=lpm_band, rp_band=rp_band,
        compare_to=compare_to, dev=dev, call_rate=call_rate, train_sizes=train_sizes)
    if output is not None:
        check_output_dir(output)
        refuse_overwrite(output, force)
    table = open_table(table_dir)
    result = get_protocol("two-model").run(table, settings, seed, specs)
    record = {**result.native.to_dict(), **{k: v for k, v in result.to_dict().items()
                                            if k in ("protocol", "settings", "records")}}
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
