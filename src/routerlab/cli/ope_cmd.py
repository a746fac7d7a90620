"""``routerlab ope``: off-policy evaluation of routers from logs (IPS, SNIPS, DR; docs/off-policy.md).

Every option is checked before any data is loaded or any router trained: numbers by their typer ranges, the
estimator list, the interval kind and the router specs (a bound that reads test outcomes is refused here).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from routerlab.cli import app
from routerlab.cli._io import check_output_dir, emit_record, json_option, open_table, seed_option
from routerlab.cli.evaluate_cmd import ENCODER_HELP, MAX_BOOT, MIN_BOOT, NBOOT_HELP, router_specs
from routerlab.errors import UsageError
from routerlab.metrics.catalog import label

if TYPE_CHECKING:
    from routerlab.protocols.ope import OPEResult


@app.command("ope")
def ope_cmd(
    table_dir: Annotated[Path, typer.Argument(
        help="The table: its actors, its train split (what routers learn from) and, where it holds the logged "
             "queries' full outcomes, the truth. Left out (the first argument is a log file): the embedded demo.",
        metavar="[TABLE]")],
    logs: Annotated[list[Path] | None, typer.Argument(
        help="Log files (.csv, .jsonl, .parquet, one row per logged query with its propensity; see "
             "'routerlab log').", metavar="LOGS...")] = None,
    routers: Annotated[str, typer.Option("--routers", help="Comma-separated router specs, e.g. knn,best-single.")] = (
        "best-single,knn"
    ),
    estimators: Annotated[str, typer.Option(help="Comma-separated estimators: ips, snips, dr.")] = "ips,snips,dr",
    interval: Annotated[str, typer.Option(
        help="95% interval: bootstrap (percentile, over logged queries) or normal (each estimator's own).")] = (
        "bootstrap"
    ),
    train_logs: Annotated[list[Path] | None, typer.Option(
        "--train-logs", help="Train on these logs (logged feedback) instead of the table's train split; "
                             "repeat for several files.")] = None,
    reward_model: Annotated[str, typer.Option(
        "--reward-model", help="DR's reward model: ridge (cross-fitted, on query features) or mean "
                               "(cross-fitted per-actor mean).")] = "ridge",
    encoder: Annotated[str, typer.Option(help=ENCODER_HELP)] = "tfidf",
    split: Annotated[str, typer.Option(
        help="Which queries of TABLE train the routers: given (its 'train' rows), all, random[:F] (seeded, the "
             "train part) or ood:DS1,DS2 (the other datasets). Logged queries never train.")] = "given",
    seed: Annotated[int, seed_option("Seed for the split, routers, reward-model folds and the bootstrap.")] = 0,
    n_boot: Annotated[int, typer.Option("--n-boot", min=MIN_BOOT, max=MAX_BOOT, help=NBOOT_HELP)] = 1000,
    as_json: Annotated[bool, json_option()] = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Directory to write ope.json to.")] = None,
) -> None:
    """Estimate routers' mu_o, cost, latency (and SPEC 5 metrics from simulated logs) from logs alone."""
    from routerlab.cli.log_cmd import LOG_SUFFIXES
    from routerlab.data.logs import read_logs
    from routerlab.data.store import load
    from routerlab.protocols.ope import INTERVALS, REWARD_MODELS, off_policy_evaluate, parse_estimators, refuse_bounds

    # like every command, the table may be left out for the demo: then the first argument is already a log file
    first_is_log = table_dir.suffix.lower() in LOG_SUFFIXES and not table_dir.is_dir()
    logs = [table_dir, *(logs or [])] if first_is_log else list(logs or [])
    if not logs:
        raise UsageError("name the log files after the table: routerlab ope TABLE LOGS... (see 'routerlab log')")
    ests = parse_estimators(estimators, "--estimators")
    if interval not in INTERVALS:
        raise UsageError(f"--interval must be one of {', '.join(INTERVALS)}, got {interval!r}")
    if reward_model not in REWARD_MODELS:
        raise UsageError(f"--reward-model must be one of {', '.join(REWARD_MODELS)}, got {reward_model!r}")
    specs = router_specs(routers)
    refuse_bounds(specs)
    for path in [*logs, *(train_logs or [])]:
        if not path.is_file():
            raise UsageError(f"{path}: no such log file")
    if output is not None:
        check_output_dir(output)
    table = open_table(None) if first_is_log else load(table_dir)
    logged = read_logs(logs, table)
    trained_on = read_logs(train_logs, table) if train_logs else None
    result = off_policy_evaluate(table, logged, specs, estimators=ests, split=split, encoder=encoder, seed=seed,
                                 n_boot=n_boot, interval_method=interval, train_logs=trained_on,
                                 reward_model=reward_model)
    emit_record(result.to_dict(), output, "ope.json", as_json, lambda: ope_text(result))


def _num(v: float) -> str:
    """Four significant digits (costs are small, latencies large); '-' for an undefined value."""
    return f"{v:.4g}" if math.isfinite(v) else "-"


def ope_text(result: OPEResult) -> str:
    """One block per router: a row per metric, a column per estimator (value [lo, hi]) and the truth when known,
    with the effective sample size; then what could not be estimated and why."""
    lines = [f"{result.provenance.data['name']}: {result.n_logged} logged queries "
             f"(policy {result.logs.get('policy') or 'unknown'}, smallest propensity "
             f"{_num(result.logs['min_propensity'])}); training: {result.training['feedback']} feedback, "
             f"{result.training['n_train']} queries; intervals: 95% {result.interval['method']}"]
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
                cells.append(f"{_num(v)} [{_num(lo)}, {_num(hi)}]")
            if r.truth is not None:
                cells.append(_num(r.truth[metric]) if metric in r.truth else "-")
            rows.append(cells)
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines.extend("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    if result.unavailable:
        lines.append("")
        by_reason: dict[str, list[str]] = {}
        for metric, why in result.unavailable.items():
            by_reason.setdefault(why, []).append(metric)
        lines.extend(f"not estimable: {', '.join(ms)}: {why}" for why, ms in by_reason.items())
    if result.truth_note:
        lines.append(f"truth: {result.truth_note}")
    return "\n".join(lines)
