"""``routerlab log``: draw logged feedback from a full table with a logging policy and write it as a log file.

Every option, and the output path, is checked before any data is loaded (one line, exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from routerlab._words import noun
from routerlab.cli import app
from routerlab.cli._io import (
    check_file_parent,
    force_option,
    json_option,
    open_table,
    print_json,
    refuse_overwrite,
    seed_option,
)
from routerlab.errors import UsageError

LOG_SUFFIXES = (".csv", ".jsonl", ".parquet")
POLICY_HELP = ("Logging policy: uniform, eps-greedy:ROUTER:EPS, softmax:ROUTER:T or router:ROUTER "
               "(ROUTER: any router spec, e.g. eps-greedy:knn:k=10:0.1).")


def check_log_path(path: Path, *, option: str = "-o") -> None:
    """A log file path: a .csv, .jsonl or .parquet name, not a directory, in a place that can be written (the
    nearest existing parent a writable directory). One UsageError naming the path."""
    from routerlab.data.longformat import actors_path_for

    if path.is_dir():
        raise UsageError(f"{option} {path}: is a directory; give a log file path such as {path / 'logs.csv'}")
    if path.suffix.lower() not in LOG_SUFFIXES:
        raise UsageError(f"{option} {path}: a log file name ends in {', '.join(LOG_SUFFIXES)} (it picks the format)")
    if actors_path_for(path).is_dir():
        raise UsageError(f"{option} {path}: its actors side-file {actors_path_for(path)} is a directory")
    check_file_parent(path, option=option)


@app.command("log")
def log_cmd(
    output: Annotated[Path, typer.Option(
        "-o", "--output", help="Log file to write: .csv, .jsonl or .parquet (plus <stem>.actors.<ext>).")],
    table_dir: Annotated[Path | None, typer.Argument(
        help="A table directory (default: the embedded demo benchmark).")] = None,
    policy: Annotated[str, typer.Option("--policy", help=POLICY_HELP)] = "uniform",
    part: Annotated[str, typer.Option("--part", help="Which queries to log: train, test or all.")] = "train",
    split: Annotated[str, typer.Option(help="Train/test split: given, random[:F] (seeded) or ood:DS1,DS2.")] = "given",
    encoder: Annotated[str, typer.Option(
        help="Query encoder of the policy's router: tfidf, minilm or precomputed:path=FILE.")] = "tfidf",
    seed: Annotated[int, seed_option("Seed for the split, the policy's router and the logging draws.")] = 0,
    as_json: Annotated[bool, json_option("Print the log's summary as one JSON object.")] = False,
    force: Annotated[bool, force_option("Overwrite the log file (and its actors side-file) if it exists.")] = False,
) -> None:
    """Simulate a deployment: a logging policy picks one actor per query, only its outcome is kept (SPEC 1)."""
    from routerlab.data.logs import write_logs
    from routerlab.data.provenance import Provenance
    from routerlab.data.splits import check_split_spec, make_split
    from routerlab.protocols.policies import PARTS, parse_policy, simulate_logs
    from routerlab.reports.files import say_written

    try:  # the option named, as every command's split and policy errors do
        pol = parse_policy(policy)
    except UsageError as exc:
        raise UsageError(f"--policy: {exc}") from None
    if part not in PARTS:
        raise UsageError(f"--part must be one of {', '.join(PARTS)}, got {part!r}")
    try:
        check_split_spec(split)
    except UsageError as exc:
        raise UsageError(f"--split: {exc}") from None
    check_log_path(output)
    from routerlab.data.longformat import actors_path_for

    for path in (output, actors_path_for(output)):
        refuse_overwrite(path, force)
    table = open_table(table_dir)
    logs = simulate_logs(table, pol, part=part, split=split, seed=seed, encoder=encoder)
    written = list(write_logs(logs, output))
    summary = logs.describe()
    record = {
        **Provenance.of(table, make_split(table, split, seed), seed=seed,
                        encoder=encoder if pol.router is not None else None).to_dict(),
        "part": part, "logging": pol.describe(), **summary, "files": [str(p) for p in written],
    }
    if as_json:
        print_json(record)
    else:
        typer.echo(f"logged {summary['n_logged']} {part} {noun(summary['n_logged'], 'query')} of {table.name} "
                   f"with {pol.spec} "
                   f"(seed {seed}); min propensity {summary['min_propensity']:.4g}")
        width = max(len(a) for a in summary["shares"])
        for actor, share in summary["shares"].items():
            typer.echo(f"  {actor:<{width}}  {share:6.1%}")
        if summary["rewards"]:
            typer.echo(f"reward columns: {', '.join(summary['rewards'])} (from the full table)")
    say_written(written, to_stderr=as_json)
