"""``routerlab results query "SQL"`` and ``routerlab results show``: read the DuckDB results store that
``routerlab run`` writes (read-only; see :mod:`routerlab.experiments.store`)."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from routerlab.cli import app
from routerlab.cli._io import json_option, print_json
from routerlab.experiments.store import DEFAULT_STORE
from routerlab.metrics.catalog import all_metrics, legend_line, metrics_for

if TYPE_CHECKING:
    from routerlab.experiments.store import BoardRow

STORE_HELP = "The results store directory (holding results.duckdb)."
METRIC_HELP = ("The metric to rank by, best first by its direction (lowest first for "
               + ", ".join(m.name for m in all_metrics() if m.direction == "lower" and not m.name.endswith("_greedy"))
               + "). Evaluation metrics: "
               + ", ".join(m.name for m in metrics_for("full") if not m.name.endswith("_greedy"))
               + " (each choice metric also as <metric>_greedy, an exploring router's argmax value); "
               "'routerlab metrics' lists every protocol's.")

results_app = typer.Typer(
    name="results", help="Query the results store that 'routerlab run' writes (DuckDB, read-only).",
    no_args_is_help=True, add_completion=False, context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(results_app, name="results")


def _cell(value: Any) -> str:
    """How a query's value prints in a text table: numbers to 4 significant digits, NULL as '-'."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    return str(value)


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain text table: a header, a rule, one line per row; numeric columns right-aligned."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [bool(rows) and all((isinstance(r[i], int | float) and not isinstance(r[i], bool)) or r[i] is None
                                  for r in rows) for i in range(len(columns))]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)]
        return "  ".join(parts).rstrip()

    out = [line(list(columns)), "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in cells)
    return "\n".join(out)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


def _settings_text(settings: str) -> str:
    """``{"encoder":"tfidf","n_boot":200}`` -> ``encoder=tfidf n_boot=200``."""
    try:
        obj = json.loads(settings)
    except (TypeError, ValueError):
        return str(settings)
    if not isinstance(obj, dict):
        return str(settings)
    return " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in obj.items())


def _table_labels(rows: Sequence[BoardRow]) -> dict[tuple[str, str, str], str]:
    """A table's name, with its content hash when the store holds more than one version under that name and
    its split when it was run under more than one."""
    hashes: dict[str, set[str]] = {}
    splits: dict[str, set[str]] = {}
    for r in rows:
        hashes.setdefault(r.table_name, set()).add(r.data_hash)
        splits.setdefault(r.table_name, set()).add(r.split)
    labels = {}
    for r in rows:
        label = r.table_name
        if len(hashes[r.table_name]) > 1:
            label += f"@{r.data_hash[:8]}"
        if len(splits[r.table_name]) > 1:
            label += f" ({r.split})"
        labels[(r.table_name, r.data_hash, r.split)] = label
    return labels


def board_text(rows: Sequence[BoardRow], metric: str) -> str:
    """The leaderboard as text: per table x protocol (x settings when they vary), routers by mean ``metric``
    over seeds, with the seeds' range and the mean of their 95% interval bounds."""
    if not rows:
        return f"no results for metric {metric}"
    labels = _table_labels(rows)
    groups = {(r.table_name, r.data_hash, r.split, r.protocol) for r in rows}
    vary = len({(r.table_name, r.data_hash, r.split, r.protocol, r.settings) for r in rows}) > len(groups)
    columns = ["table", "protocol", *(["settings"] if vary else []), "router", "seeds", f"{metric} mean",
               "seed range", "mean 95% CI"]
    body = []
    for r in rows:
        rng = "-" if r.seed_min is None or r.seed_max is None else f"{r.seed_min:.4g} .. {r.seed_max:.4g}"
        ci = "-" if r.ci_low is None or r.ci_high is None else f"[{r.ci_low:.4g}, {r.ci_high:.4g}]"
        body.append([labels[(r.table_name, r.data_hash, r.split)], r.protocol,
                     *([_settings_text(r.settings)] if vary else []), r.router, r.seeds, r.mean, rng, ci])
    return "\n".join([format_table(columns, body), *legend_line([(f"{metric} mean", metric)])])


@results_app.command("query")
def query_cmd(
    sql: Annotated[str, typer.Argument(help="One SQL statement over the tables results, cells and runs.")],
    store: Annotated[Path, typer.Option("--store", help=STORE_HELP)] = DEFAULT_STORE,
    as_json: Annotated[bool, json_option("Print the rows as a JSON array of objects.")] = False,
) -> None:
    """Run SQL over the results store (read-only): e.g. "SELECT router, avg(value) FROM results WHERE
    metric = 'mu_o' GROUP BY router"."""
    from routerlab.experiments.store import query

    columns, rows = query(store, sql)
    if as_json:
        print_json([{c: _jsonable(v) for c, v in zip(columns, row, strict=True)} for row in rows])
        return
    if not columns:
        typer.echo("(no rows)")
        return
    typer.echo(format_table(columns, rows))
    typer.echo(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")


@results_app.command("show")
def show_cmd(
    store: Annotated[Path, typer.Option("--store", help=STORE_HELP)] = DEFAULT_STORE,
    metric: Annotated[str, typer.Option("--metric", help=METRIC_HELP)] = "mu_o",
    as_json: Annotated[bool, json_option("Print the leaderboard as a JSON array.")] = False,
) -> None:
    """Leaderboard across every run in the store: router x table x protocol, the mean over seeds with the
    seeds' range and mean 95% interval."""
    from routerlab.experiments.store import leaderboard

    rows = leaderboard(store, metric)
    if as_json:
        print_json([r.to_dict() for r in rows])
    else:
        typer.echo(board_text(rows, metric))


@results_app.command("paper")
def paper_cmd(
    experiment: Annotated[Path, typer.Argument(help="The experiment file whose [[paper]] entries to compare.")],
    store: Annotated[Path, typer.Option("--store", help=STORE_HELP)] = DEFAULT_STORE,
    table: Annotated[list[str] | None, typer.Option(
        "--table", help="NAME=PATH: the table the run used in place of the file's table NAME (as given to "
                        "routerlab run).")] = None,
    quick: Annotated[bool, typer.Option("--quick", metavar="", help="Compare the run made with --quick.")] = False,
    as_json: Annotated[bool, json_option("Print the rows as a JSON array.")] = False,
) -> None:
    """The paper's numbers ([[paper]] entries of EXPERIMENT) next to routerlab's from the store, with 95%
    intervals and whether they agree, as a markdown table."""
    from routerlab.cli.run_cmd import _table_overrides
    from routerlab.errors import UsageError
    from routerlab.experiments.papers import compare, paper_markdown
    from routerlab.experiments.runner import load_tables
    from routerlab.experiments.schema import load_experiment
    from routerlab.experiments.store import open_read_only

    exp = load_experiment(experiment, tables=_table_overrides(table or []), quick=quick)
    if not exp.papers:
        raise UsageError(f"{experiment}: has no [[paper]] entries to compare")
    open_read_only(store).close()  # no store: one line before any table loads
    hashes = {name: t.content_hash for name, t in load_tables(exp).items()}
    rows = compare(exp, store, hashes)
    if as_json:
        print_json([r.to_dict() for r in rows])
    else:
        typer.echo(paper_markdown(rows))
