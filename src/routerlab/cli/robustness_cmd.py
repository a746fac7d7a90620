"""``routerlab robustness``: routing robustness rho of each router under meaning-preserving perturbations (SPEC 3).

Routers train on the train split; the test split's queries are perturbed (or their variants read from
``--variants-file``) and every router routes originals and variants. With ``--outcomes`` (a table of the variants'
outcomes, e.g. from ``routerlab collect --variants``) the invariance assumption is tested per level. The command
parses its options into :class:`~routerlab.protocols.robustness.RobustnessSettings` (every rule checked there,
before any data is read), runs the registered ``robustness`` protocol and prints its result.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from routerlab.cli import app
from routerlab.cli._io import (
    call_cache_kept,
    check_output_dir,
    force_option,
    json_option,
    on_interrupt,
    open_table,
    print_json,
    refuse_overwrite,
    seed_option,
)
from routerlab.cli.evaluate_cmd import TABLE_HELP, router_specs
from routerlab.errors import UsageError

if TYPE_CHECKING:
    from routerlab.perturb.base import PerturbationSet
    from routerlab.protocols.base import Result


def _help(name: str, more: str = "") -> str:
    """A setting's meaning and default as its option's help (the protocol declares both once)."""
    from routerlab.cli._protocol import option_help
    from routerlab.protocols.robustness import RobustnessSettings

    return option_help(RobustnessSettings, name, more)


@app.command("robustness")
@on_interrupt(lambda a: None if a["backend"] is None else
              call_cache_kept(a["cache_dir"], "LLM replies", "no result written"))
def robustness_cmd(
    table_dir: Annotated[Path | None, typer.Argument(help=TABLE_HELP)] = None,
    routers: Annotated[str, typer.Option("--routers", help="Comma-separated router specs, e.g. knn:k=10,mlp.")] = (
        "random,best-single,knn"
    ),
    levels: Annotated[str | None, typer.Option("--levels", help=_help("levels"))] = None,
    variants: Annotated[int | None, typer.Option("--variants", help=_help("variants"))] = None,
    variants_file: Annotated[Path | None, typer.Option("--variants-file", help=_help("variants_file"))] = None,
    outcomes: Annotated[Path | None, typer.Option("--outcomes", help=_help("outcomes"))] = None,
    reviewed: Annotated[Path | None, typer.Option("--reviewed", metavar="FILE.csv", help=_help("reviewed"))] = None,
    backend: Annotated[str | None, typer.Option("--backend", help=_help("backend"))] = None,
    ask: Annotated[int | None, typer.Option("--ask", help=_help("ask"))] = None,
    max_queries: Annotated[int | None, typer.Option("--max-queries", help=_help("max_queries"))] = None,
    skip_unavailable_levels: Annotated[bool | None, typer.Option(
        "--skip-unavailable-levels", metavar="", help=_help("skip_unavailable_levels"))] = None,
    similarity: Annotated[str | None, typer.Option("--similarity", help=_help("similarity"))] = None,
    encoder: Annotated[str | None, typer.Option(help=_help("encoder"))] = None,
    split: Annotated[str | None, typer.Option(help=_help("split"))] = None,
    seed: Annotated[int, seed_option("Seed of the split, the variants, the routers and the bootstrap.")] = 0,
    n_boot: Annotated[int | None, typer.Option("--n-boot", help=_help("n_boot"))] = None,
    cache_dir: Annotated[Path | None, typer.Option("--cache-dir", help=_help("cache_dir"))] = None,
    as_json: Annotated[bool, json_option()] = False,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Directory for the JSON record, its tables and the variants used (variants.jsonl)."
    )] = None,
    force: Annotated[bool, force_option()] = False,
) -> None:
    """Routing robustness (SPEC 3): the share of a query's perturbed variants routed to the actor its original
    went to, per router, level and actor, with 95% CIs; with --outcomes, whether the best actor stays the same."""
    from routerlab.protocols.base import SettingError, option_name, run_protocol
    from routerlab.protocols.robustness import RobustnessSettings, check_backend_for

    settings = RobustnessSettings.from_cli(
        levels=levels, variants=variants, variants_file=None if variants_file is None else str(variants_file),
        outcomes=None if outcomes is None else str(outcomes), backend=backend, ask=ask,
        reviewed=None if reviewed is None else str(reviewed),
        cache_dir=None if cache_dir is None else str(cache_dir), max_queries=max_queries,
        skip_unavailable_levels=skip_unavailable_levels, similarity=similarity, encoder=encoder, split=split,
        n_boot=n_boot)
    specs = router_specs(routers)
    infos = RobustnessSettings.settings_info()
    try:
        check_backend_for(specs, settings)
        if output is not None:
            check_output_dir(output)
            refuse_overwrite(output, force)
        table = open_table(table_dir)
        result = run_protocol("robustness", table, settings, seed, specs)
    except SettingError as exc:  # a setting that the routers or the data rule out, under its option
        raise UsageError(f"{option_name(exc.key, infos.get(exc.key))}: {exc.reason}") from None
    emit_robustness(result.native, result.artifacts["variants"], output, as_json, result)


def emit_robustness(result: Any, pset: PerturbationSet, output: Path | None, as_json: bool,
                    run: Result | None = None) -> None:
    """Print the result (text or JSON: with the protocol ``run``, plus its ``protocol``, ``settings`` and
    ``records``) and, with ``-o``, write its files plus ``variants.jsonl`` (the variants used, so
    ``--variants-file`` repeats the run exactly); then the levels left out."""
    from routerlab.perturb.files import write_variants
    from routerlab.reports.files import say_written

    written: list[Path] = []
    if output is not None:
        from routerlab.reports.robustness_report import write_robustness

        output.mkdir(parents=True, exist_ok=True)
        written = [Path(p) if Path(p).exists() else output / p for p in write_robustness(result, output)]
        written.append(write_variants(output / "variants.jsonl", pset.variants,
                                      meaning_changing=getattr(result, "meaning_changing", ())))
    if as_json:
        layer = run.to_dict() if run is not None else {}
        print_json({**result.to_dict(), **{k: layer[k] for k in ("protocol", "settings", "records") if k in layer}})
    else:
        from routerlab.reports.robustness_report import robustness_text

        typer.echo(robustness_text(result))
        left_out = {**pset.not_generated, **(run.artifacts.get("skipped_levels", {}) if run is not None else {})}
        for level, reason in left_out.items():  # SPEC 3: say what was not measured, never fake it
            typer.echo(f"level {level}: {reason}")
    say_written(written, to_stderr=as_json)
