"""``routerlab ope``: off-policy evaluation of routers from logs (IPS, SNIPS, DR; docs/off-policy.md).

The command parses its options into :class:`~routerlab.protocols.ope.OPESettings` (every rule checked there, before
any data is loaded or any router trained; a bound that reads test outcomes is refused here too), runs the
registered ``ope`` protocol and prints its result. Without log files it simulates a log of the test part with
``--logging``, as ``routerlab log --part test`` would write it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from routerlab._words import noun, plural
from routerlab.cli import app
from routerlab.cli._io import (
    check_output_dir,
    emit_record,
    force_option,
    json_option,
    open_table,
    refuse_overwrite,
    seed_option,
)
from routerlab.cli.evaluate_cmd import router_specs
from routerlab.metrics.catalog import label, legend_line

if TYPE_CHECKING:
    from routerlab.protocols.ope import OPEResult


def _help(name: str, more: str = "") -> str:
    """A setting's meaning and default as its option's help (the protocol declares both once)."""
    from routerlab.cli._protocol import option_help
    from routerlab.protocols.ope import OPESettings

    return option_help(OPESettings, name, more)


@app.command("ope")
def ope_cmd(
    table_dir: Annotated[Path | None, typer.Argument(
        help="The table: its actors, its train split (what routers learn from) and, where it holds the logged "
             "queries' full outcomes, the truth. Left out (the first argument is a log file): the embedded demo.",
        metavar="TABLE")] = None,
    logs: Annotated[list[Path] | None, typer.Argument(
        help="Log files (.csv, .jsonl, .parquet, one row per logged query with its propensity; see "
             "'routerlab log'). None: a log of the test part is simulated with --logging.",
        metavar="LOGS")] = None,
    routers: Annotated[str, typer.Option("--routers", help="Comma-separated router specs, e.g. knn,best-single.")] = (
        "best-single,knn"
    ),
    logging: Annotated[str | None, typer.Option(help=_help("logging"))] = None,
    estimators: Annotated[str | None, typer.Option(help=_help("estimators"))] = None,
    interval: Annotated[str | None, typer.Option(help=_help("interval"))] = None,
    train_logs: Annotated[list[Path] | None, typer.Option(
        "--train-logs", help=_help("train_logs", "; repeat for several files"))] = None,
    reward_model: Annotated[str | None, typer.Option("--reward-model", help=_help("reward_model"))] = None,
    encoder: Annotated[str | None, typer.Option(help=_help("encoder"))] = None,
    split: Annotated[str | None, typer.Option(help=_help("split"))] = None,
    seed: Annotated[int, seed_option("Seed for the split, routers, reward-model folds and the bootstrap.")] = 0,
    n_boot: Annotated[int | None, typer.Option("--n-boot", help=_help("n_boot"))] = None,
    as_json: Annotated[bool, json_option()] = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Directory to write ope.json to.")] = None,
    force: Annotated[bool, force_option()] = False,
) -> None:
    """Estimate routers' mu_o, cost, latency (and, from simulated logs, Acc@1-L, DCG and L-DCG: SPEC 5) from logs
    alone."""
    from routerlab.cli.log_cmd import LOG_SUFFIXES
    from routerlab.protocols.base import run_protocol
    from routerlab.protocols.ope import OPESettings, refuse_bounds

    # like every command, the table may be left out for the demo: then the first argument is already a log file
    first_is_log = (table_dir is not None and table_dir.suffix.lower() in LOG_SUFFIXES
                    and not table_dir.is_dir())
    paths = [*([table_dir] if first_is_log and table_dir is not None else []), *(logs or [])]
    settings = OPESettings.from_cli(
        logs=[str(p) for p in paths] or None, logging=logging, estimators=estimators, interval=interval,
        train_logs=[str(p) for p in train_logs] if train_logs else None, reward_model=reward_model,
        encoder=encoder, split=split, n_boot=n_boot)
    specs = router_specs(routers)
    refuse_bounds(specs)
    if output is not None:
        check_output_dir(output)
        refuse_overwrite(output, force)
    table = open_table(None if first_is_log else table_dir)
    result = run_protocol("ope", table, settings, seed, specs)
    native: OPEResult = result.native
    layer = result.to_dict()
    record: dict[str, Any] = {**native.to_dict(), **{k: layer[k] for k in ("protocol", "settings", "records")}}
    emit_record(record, output, "ope.json", as_json, lambda: ope_text(native))


def _num(v: float) -> str:
    """Four significant digits (costs are small, latencies large); '-' for an undefined value."""
    return f"{v:.4g}" if math.isfinite(v) else "-"


def ope_text(result: OPEResult) -> str:
    """One block per router: a row per metric, a column per estimator (value [lo, hi]) and the truth when known,
    with the effective sample size; then what could not be estimated and why. Below MIN_QUERIES logged queries the
    header says the intervals are unavailable and the cells hold the values alone."""
    from routerlab.metrics.bootstrap import MIN_QUERIES, unavailable

    enough = result.n_logged >= MIN_QUERIES
    lines = [f"{result.provenance.data['name']}: {result.n_logged} logged {noun(result.n_logged, 'query')} "
             f"(policy {result.logs.get('policy') or 'unknown'}, smallest propensity "
             f"{_num(result.logs['min_propensity'])}); training: {result.training['feedback']} feedback, "
             f"{plural(result.training['n_train'], 'query')}; intervals: "
             + (f"95% {result.interval['method']}" if enough else unavailable(result.n_logged))]
    served = result.logs.get("served")
    if served:  # a request log of routerlab serve, joined with its feedback file
        from routerlab.data.served import ServedCounts

        lines.append(f"request log: {ServedCounts(**served).describe()}")
    for r in result.results:
        d = r.diagnostics
        lines.append("")
        lines.append(f"{r.spec}  ({r.policy}; agrees with the log on {d.n_agree} of {d.n}; ESS {d.ess:.1f}, "
                     f"max weight {_num(d.max_weight)})")
        header = ["metric", *(label(e) for e in result.estimators), *(["truth"] if r.truth is not None else [])]
        rows = [header]
        for metric in result.metrics:
            cells = [metric]
            for est in result.estimators:
                v, lo, hi = r.estimates[est][metric]
                cells.append(f"{_num(v)} [{_num(lo)}, {_num(hi)}]" if enough else _num(v))
            if r.truth is not None:
                cells.append(_num(r.truth[metric]) if metric in r.truth else "-")
            rows.append(cells)
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines.extend("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    if result.results:  # one legend under the routers' tables: they share their columns and rows
        lines.append("")
        lines += legend_line([*(label(e) for e in result.estimators), *result.metrics, "ESS"])
    if result.unavailable:
        lines.append("")
        by_reason: dict[str, list[str]] = {}
        for metric, why in result.unavailable.items():
            by_reason.setdefault(why, []).append(metric)
        lines.extend(f"not estimable: {', '.join(ms)}: {why}" for why, ms in by_reason.items())
    if result.truth_note:
        lines.append(f"truth: {result.truth_note}")
    return "\n".join(lines)
