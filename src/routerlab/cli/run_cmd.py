"""``routerlab run EXPERIMENT.toml``: run an experiment file's cells into the DuckDB results store, reusing
the cells the store already holds (see :mod:`routerlab.experiments`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from routerlab.cli import app
from routerlab.cli._io import json_option, print_json
from routerlab.errors import UsageError
from routerlab.experiments.store import DEFAULT_STORE


def _check_backend(backend: str, workers: int | None, scheduler: str | None) -> None:
    """The executor options, checked before the experiment file is read or any cluster started."""
    from routerlab.execute import BACKENDS, check_scheduler_address

    if backend not in BACKENDS:
        raise UsageError(f"--backend: unknown executor {backend!r}; choose one of {', '.join(BACKENDS)}")
    if scheduler is not None:
        if backend != "dask":
            raise UsageError(f"--scheduler: only the dask backend connects to a scheduler, not {backend!r}")
        check_scheduler_address(scheduler)
    if workers is not None and backend == "serial" and workers != 1:
        raise UsageError(f"--workers {workers}: the serial backend runs one task at a time; use --backend local")


def _check_metric(metric: str) -> None:
    """``--metric`` names a metric of the catalog (any protocol's), checked before anything runs."""
    from routerlab.metrics.catalog import metric_info

    try:
        metric_info(metric)
    except UsageError as exc:
        raise UsageError(f"--metric: {exc}") from None


def _table_overrides(items: list[str]) -> dict[str, str]:
    """``--table NAME=PATH`` options as {name: path}; a malformed or repeated one is an error."""
    out: dict[str, str] = {}
    for item in items:
        name, eq, path = item.partition("=")
        if not eq or not name.strip() or not path.strip():
            raise UsageError(f"--table {item!r}: write NAME=PATH, e.g. --table demo=tables/llmrouter")
        if name.strip() in out:
            raise UsageError(f"--table {name.strip()}: given twice")
        out[name.strip()] = path.strip()
    return out


def _memory(mib: float | None) -> str:
    return "" if mib is None else f", peak memory {mib:,.0f} MiB"


@app.command("run")
def run_cmd(
    experiment: Annotated[Path, typer.Argument(help="The experiment file (TOML; see the README's "
                                                    "'Experiments as files').")],
    store: Annotated[Path, typer.Option("--store", help="Results store directory (created when missing).")] = (
        DEFAULT_STORE),
    backend: Annotated[str, typer.Option(help="Where cells run: serial (this process), local (worker "
                                              "processes) or dask (a Dask cluster).")] = "local",
    workers: Annotated[int | None, typer.Option(min=1, max=4096, help="Worker processes for local, or for "
                                                "dask's one-machine cluster (default: one per CPU).")] = None,
    scheduler: Annotated[str | None, typer.Option(help="dask: the scheduler tcp://HOST:PORT of a running "
                                                  "cluster (default: start one on 127.0.0.1).")] = None,
    metric: Annotated[str | None, typer.Option("--metric", help="The metric of the leaderboard printed at the end "
                                                                "(default mu_o).")] = None,
    table: Annotated[list[str] | None, typer.Option(
        "--table", help="NAME=PATH: run the experiment on another table in place of its table NAME (a table "
                        "directory, or demo); repeat for several.")] = None,
    quick: Annotated[bool, typer.Option("--quick", metavar="", help="Apply the file's [quick] section: fewer seeds, "
                                                                     "routers and queries (a replication's small "
                                                                     "version).")] = False,
    as_json: Annotated[bool, json_option("Print the run summary and leaderboard as JSON.")] = False,
) -> None:
    """Run every table x protocol x router x seed x settings cell of EXPERIMENT into the results store; a rerun
    reuses the cells already there. A file with [[paper]] entries ends with the paper's numbers next to
    routerlab's (also: routerlab results paper EXPERIMENT)."""
    from routerlab.cli.results_cmd import board_text
    from routerlab.execute import make_executor
    from routerlab.experiments.papers import compare, paper_markdown
    from routerlab.experiments.runner import run_experiment
    from routerlab.experiments.schema import load_experiment
    from routerlab.experiments.store import check_store_dir, leaderboard

    _check_backend(backend, workers, scheduler)
    asked = metric is not None  # a metric the user named must be in the run; the default may be absent
    metric = metric or "mu_o"
    _check_metric(metric)
    check_store_dir(store)
    exp = load_experiment(experiment, tables=_table_overrides(table or []), quick=quick)
    for note in exp.notes:
        typer.echo(f"{exp.name}: note: {note}", err=True)

    def say_reused(reused: int, total: int) -> None:
        typer.echo(f"{exp.name}: {reused} of {total} cells reused", err=as_json)

    summary = run_experiment(exp, store, on_reuse=say_reused,
                             executor=lambda: make_executor(backend, workers=workers, scheduler=scheduler))
    board = leaderboard(store, metric, cell_ids=summary.cell_ids, missing_ok=not asked)
    no_board = "" if board else (f"no leaderboard: this run has no {metric} records on the whole test set (its "
                                 "protocols report other metrics; --metric picks one, 'routerlab results query' "
                                 "shows them all)")
    papers = compare(exp, store, summary.hashes) if exp.papers else []
    if as_json:
        print_json({**summary.to_dict(), "metric": metric, "leaderboard": [r.to_dict() for r in board],
                    **({"leaderboard_note": no_board} if no_board else {}),
                    **({"paper": [r.to_dict() for r in papers]} if exp.papers else {})})
        return
    typer.echo(board_text(board, metric) if board else no_board)
    if papers:
        typer.echo(f"\nthe paper's numbers next to routerlab's ({exp.name}):\n{paper_markdown(papers)}")
    skipped = f", {summary.cells_skipped} skipped (see the cells table)" if summary.cells_skipped else ""
    if summary.cells_run == 0:
        typer.echo(f"nothing to run: {summary.cells_reused} of {summary.cells_total} cells reused from {summary.store} "
                   f"(run {summary.run_id})")
        return
    typer.echo(f"ran {summary.cells_run} cells in {summary.tasks} tasks on {summary.backend} "
               f"({summary.workers} worker{'s' if summary.workers != 1 else ''}) in {summary.seconds:.1f} s"
               f"{_memory(summary.peak_rss_mb)}{skipped}; "
               f"{summary.rows_written} rows -> {summary.store} (run {summary.run_id})")
