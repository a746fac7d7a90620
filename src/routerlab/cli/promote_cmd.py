"""``routerlab promote``: the off-policy promotion gate (docs/promote.md).

Every option is checked before any data is loaded or any router trained (one line, exit 2); then both routers
train on the table's training side, route the logged queries, and :func:`routerlab.protocols.promote.gate`
estimates V(candidate) - V(current) on the same logged rows with a paired two-sided 95% interval and decides.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

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
from routerlab.errors import UsageError

if TYPE_CHECKING:
    from routerlab.protocols.promote import PromotionResult

ESTIMATOR_HELP = ("Estimator of each router's value on the logged rows: dr (doubly robust, the default), ips or "
                  "snips.")
INTERVAL_HELP = ("Two-sided 95% interval of the difference: normal (the per-row differences' standard error; "
                 "default, calibrated) or bootstrap (paired percentile bootstrap over the logged rows; less "
                 "conservative at the boundary, see docs/promote.md).")
MARGIN_HELP = ("Promote only when the interval's lower bound exceeds this difference of mean scores "
               "(0.01 = one point); in [0, 1).")


def _router(spec: str, option: str) -> str:
    """A router spec checked (built once) before any data is loaded; a bound is refused."""
    from routerlab.protocols.ope import refuse_bounds
    from routerlab.routers.base import get_router

    spec = spec.strip()
    if not spec:
        raise UsageError(f"{option} needs a router spec, e.g. {option} knn:k=10")
    try:
        get_router(spec)
    except UsageError as exc:
        raise UsageError(f"{option}: {exc}") from None
    try:
        refuse_bounds([spec])
    except UsageError as exc:
        raise UsageError(f"{option}: {exc}") from None
    return spec


def _log_paths(paths: list[Path]) -> list[Path]:
    from routerlab.cli.log_cmd import LOG_SUFFIXES

    for path in paths:
        if path.is_dir():
            raise UsageError(f"--log {path}: is a directory, not a log file")
        if not path.is_file():
            raise UsageError(f"--log {path}: no such log file")
        if path.suffix.lower() not in LOG_SUFFIXES:
            raise UsageError(f"--log {path}: a log file name ends in {', '.join(LOG_SUFFIXES)}")
    return paths


@app.command("promote")
def promote_cmd(
    log: Annotated[list[Path], typer.Option(
        "--log", metavar="LOG",
        help="Logged traffic with a score on every row and its propensities ('routerlab log' output, or a served "
             "log scored with its feedback); repeat for several files.")],
    current: Annotated[str, typer.Option(
        "--current", metavar="ROUTER", help="The router deployed now (a router spec).")],
    candidate: Annotated[str, typer.Option(
        "--candidate", metavar="ROUTER", help="The router that would replace it (a router spec).")],
    table_dir: Annotated[Path | None, typer.Option(
        "--table", help="The table whose training side both routers learn from (logged queries left out); "
                        "default: the embedded demo.")] = None,
    estimator: Annotated[str, typer.Option(help=ESTIMATOR_HELP)] = "dr",
    margin: Annotated[float, typer.Option(help=MARGIN_HELP)] = 0.0,
    interval: Annotated[str, typer.Option(help=INTERVAL_HELP)] = "normal",
    n_boot: Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples (with --interval bootstrap), "
                                                         "40..1,000,000.")] = 1000,
    reward_model: Annotated[str, typer.Option(
        "--reward-model", help="DR's reward model: ridge (cross-fitted, on query features) or mean "
                               "(cross-fitted per-actor mean).")] = "ridge",
    encoder: Annotated[str, typer.Option(help="Query encoder: tfidf, minilm or precomputed:path=FILE.")] = "tfidf",
    split: Annotated[str, typer.Option(help="Which queries of the table train the routers: given, all, random[:F] "
                                            "or ood:DS1,DS2; logged queries never train.")] = "given",
    seed: Annotated[int, seed_option("Seed for the split, the routers, the reward model's folds and the "
                                     "bootstrap.")] = 0,
    as_json: Annotated[bool, json_option()] = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Directory to write promote.json to.")] = None,
    force: Annotated[bool, force_option()] = False,
) -> None:
    """Decide from the current deployment's log whether a candidate router should replace the current one.

    The candidate's value minus the current router's, estimated on the same logged rows with a paired 95%
    interval; the gate promotes only when its lower bound exceeds the margin."""
    from routerlab.protocols.base import MAX_BOOT, MIN_BOOT, check_encoder
    from routerlab.protocols.ope import _check_training_split
    from routerlab.protocols.promote import check_gate_options, promotion_gate, read_gate_log

    check_gate_options(estimator=estimator, interval=interval, reward_model=reward_model, margin=margin,
                       prefix="--")
    if not MIN_BOOT <= n_boot <= MAX_BOOT:
        raise UsageError(f"--n-boot must be an integer in {MIN_BOOT}..{MAX_BOOT:,}, got {n_boot}")
    for option, check, value in (("--encoder", check_encoder, encoder), ("--split", _check_training_split, split)):
        try:
            check(value)
        except UsageError as exc:
            raise UsageError(f"{option}: {exc}") from None
    cur, cand = _router(current, "--current"), _router(candidate, "--candidate")
    paths = _log_paths(list(log))
    if output is not None:
        check_output_dir(output)
        refuse_overwrite(output, force)
    table = open_table(table_dir)
    logs = read_gate_log(paths, table)
    result = promotion_gate(table, logs, cur, cand, estimator=estimator, margin=margin, interval=interval,
                            n_boot=n_boot, seed=seed, encoder=encoder, split=split, reward_model=reward_model,
                            log_paths=[str(p) for p in paths])
    record: dict[str, Any] = {"command": "promote", **result.to_dict()}
    emit_record(record, output, "promote.json", as_json, lambda: promote_text(result))


def _num(v: float | None, sign: bool = False) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    return f"{v:+.4f}" if sign else f"{v:.4f}"


def promote_text(result: PromotionResult) -> str:
    """The decision first, then the numbers it rests on, the support and the warnings."""
    from routerlab.metrics.bootstrap import MIN_QUERIES

    o, e, s = result.outcome, result.outcome.estimate, result.outcome.support
    cur, cand = result.current["router"], result.candidate["router"]
    lines = [f"{o.decision}: {cand} (candidate) vs {cur} (current)",
             f"  {s.n} logged rows of {result.provenance.data['name']}; estimator {o.estimator}, margin {o.margin:g}"]
    if s.n < MIN_QUERIES:
        lines.append(f"  cannot decide: below {MIN_QUERIES} logged rows there is no interval")
    else:
        lines += [f"  V(current)    {_num(e.current)}", f"  V(candidate)  {_num(e.candidate)}",
                  f"  difference    {_num(e.value, True)}  95% CI [{_num(e.lo, True)}, {_num(e.hi, True)}] "
                  f"({o.interval}, two-sided; promote iff the lower bound > the margin)"]
    lines.append(f"  support: ESS candidate {s.ess_candidate:.1f}, current {s.ess_current:.1f}; the routers "
                 f"disagree on {s.n_disagree} rows, {s.n_disagree_logged_candidate} logged with the candidate's "
                 f"actor, {s.n_disagree_logged_current} with the current's")
    if result.truth is not None:
        lines.append("  truth (the table holds the logged queries): difference "
                     f"{_num(result.truth['difference'], True)}")
    lines.append(f"  reason: {o.reason}")
    lines += [f"  warning: {w}" for w in result.warnings if w != o.reason]
    return "\n".join(lines)
