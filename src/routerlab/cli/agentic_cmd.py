"""``routerlab agentic``: RouterWorld-Agentic's analyses on a table of agent episodes (docs/agentic.md, "Analyses").

The options are parsed into :class:`~routerlab.protocols.agentic.AgenticSettings` (every rule checked there) and
the routers checked before any table is read; the registered ``agentic`` protocol does the rest. ``-o DIR`` writes
``agentic.json`` (the ``--json`` record).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from routerlab.cli import app
from routerlab.cli._io import check_output_dir, emit_record, force_option, json_option, refuse_overwrite, seed_option
from routerlab.errors import UsageError

RECORD = "agentic.json"


def _help(name: str) -> str:
    """A setting's meaning and default as its option's help (read when the command is built)."""
    from routerlab.cli._protocol import option_help
    from routerlab.protocols.agentic import AgenticSettings

    return option_help(AgenticSettings, name)


@app.command("agentic")
def agentic_cmd(
    table_dir: Annotated[Path, typer.Argument(help="A table directory whose cells hold agent episodes.")],
    single_turn: Annotated[Path | None, typer.Option(
        "--single-turn", metavar="TABLE", help=_help("single_turn"))] = None,
    routers: Annotated[str | None, typer.Option(
        "--routers", help="Comma-separated router specs (default: oracle, random, best-single, fixed:actor=A for "
                          "each actor A, and the learned routers knn, prknn, linear, naive-bayes, svm, cluster, mlp, "
                          "hybrid).")] = None,
    split: Annotated[str | None, typer.Option(help=_help("split"))] = None,
    encoder: Annotated[str | None, typer.Option(help=_help("encoder"))] = None,
    n_boot: Annotated[int | None, typer.Option("--n-boot", help=_help("n_boot"))] = None,
    compare_to: Annotated[str | None, typer.Option("--compare-to", help=_help("compare_to"))] = None,
    stop_on_inapplicable: Annotated[bool, typer.Option(
        "--stop-on-inapplicable", metavar="",
        help="Stop the run at a router that cannot fit the table (by default it is left out and listed).")] = False,
    collapse: Annotated[float | None, typer.Option(help=_help("collapse"))] = None,
    step_bins: Annotated[str | None, typer.Option("--step-bins", metavar="B1,B2,...", help=_help("step_bins"))] = None,
    step_limit: Annotated[int | None, typer.Option("--step-limit", help=_help("step_limit"))] = None,
    seed: Annotated[int, seed_option()] = 0,
    as_json: Annotated[bool, json_option()] = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help=f"Directory to write {RECORD} to.")] = None,
    force: Annotated[bool, force_option()] = False,
) -> None:
    """RouterWorld-Agentic's analyses on a table of agent episodes: routers on the episodes (episode latency),
    steps per actor, planning steps against episode latency, and the compression of the routers' spread against a
    single-turn table of the same actors, each with a 95% bootstrap interval (RouterWorld, section 5.3 and appendix
    I, with the metrics of SPEC 5)."""
    from routerlab.cli._protocol import run_from_cli, with_protocol
    from routerlab.cli.evaluate_cmd import router_specs
    from routerlab.data.store import load
    from routerlab.protocols.agentic import AgenticAnalysis, AgenticSettings, default_routers, require_episodes
    from routerlab.reports.agentic_report import agentic_text

    settings = AgenticSettings.from_cli(
        single_turn=None if single_turn is None else str(single_turn), split=split, encoder=encoder, n_boot=n_boot,
        compare_to=compare_to, skip_inapplicable=False if stop_on_inapplicable else None, collapse=collapse,
        step_bins=step_bins, step_limit=step_limit)
    specs = router_specs(routers) if routers is not None else None
    if output is not None:
        check_output_dir(output)
        refuse_overwrite(output, force)
    if not table_dir.is_dir():
        raise UsageError(f"{table_dir}: {'is a file, not a' if table_dir.exists() else 'no such'} table directory")
    table = load(table_dir)
    require_episodes(table)
    if specs is None:
        specs = default_routers(table)
    result = run_from_cli("agentic", table, settings, seed, specs)
    analysis: AgenticAnalysis = result.native
    record = with_protocol({**analysis.to_dict(), "skipped": dict(result.skipped)}, result)
    emit_record(record, output, RECORD, as_json, lambda: agentic_text(analysis))
