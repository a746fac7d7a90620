"""``routerlab evaluate`` (full, cold-start and Voyager protocols), ``routerlab scaling`` and ``routerlab groups``.

Every option is checked before any data is loaded or any router trained: numbers by their typer ranges
(one usage line, exit 2), lists and router names by the helpers below; ``scaling`` and ``groups`` parse their
options into their registered protocol's settings, which check them.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from routerlab.cli import app
from routerlab.cli._io import (
    check_output_dir,
    emit_record,
    force_option,
    json_option,
    open_table,
    print_json,
    refuse_overwrite,
    seed_option,
)
from routerlab.cli._protocol import option_help, run_from_cli, with_protocol
from routerlab.errors import UsageError

if TYPE_CHECKING:
    from routerlab.protocols.full import Evaluation

TABLE_HELP = "A table directory (default: the embedded demo benchmark)."
SPLIT_HELP = "Train/test split: given, random[:F] (seeded) or ood:DS1,DS2."
ENCODER_HELP = "Query encoder: tfidf, minilm or precomputed:path=FILE."


def _nboot_help() -> str:
    """``--n-boot``'s help, with the bounds the protocol layer declares (read when the command is built, so that
    registering the commands imports no protocol)."""
    from routerlab.protocols.base import MAX_BOOT, MIN_BOOT

    return f"Bootstrap resamples per 95% interval ({MIN_BOOT}..{MAX_BOOT:,})."


def _by_help() -> str:
    """``--by``'s help, the full protocol's setting's meaning (read when the command is built)."""
    from routerlab.protocols.full import FullSettings

    return option_help(FullSettings, "by")


def _full(name: str) -> str:
    from routerlab.protocols.full import FullSettings

    return option_help(FullSettings, name)


def _scaling(name: str) -> str:
    from routerlab.protocols.scaling import ScalingSettings

    return option_help(ScalingSettings, name)


def _groups(name: str) -> str:
    from routerlab.protocols.groups import GroupsSettings

    return option_help(GroupsSettings, name)


def router_specs(text: str) -> list[str]:
    """The ``--routers`` list, each router instantiated once so that an unknown name or a bad option is an
    error before any data is loaded."""
    from routerlab.routers.base import get_router, split_router_list

    specs = split_router_list(text)
    if not specs:
        raise UsageError("--routers needs at least one router, e.g. --routers oracle,knn,best-single")
    for spec in specs:
        get_router(spec)
    return specs


EVALUATION_PROTOCOLS = ("full", "cold-start", "voyager")
"""The protocols ``routerlab evaluate --protocol`` runs (the others have their own commands)."""


@app.command("evaluate")
def evaluate_cmd(
    table_dir: Annotated[Path | None, typer.Argument(help=TABLE_HELP)] = None,
    routers: Annotated[str, typer.Option("--routers", help="Comma-separated router specs, e.g. oracle,knn:k=10.")] = (
        "oracle,random,best-single,knn"
    ),
    encoder: Annotated[str, typer.Option(help=ENCODER_HELP)] = "tfidf",
    split: Annotated[str, typer.Option(help=SPLIT_HELP)] = "given",
    seed: Annotated[int, seed_option()] = 0,
    n_boot: Annotated[int, typer.Option("--n-boot", help=_nboot_help())] = 1000,
    sweep: Annotated[str | None, typer.Option(
        help="Also sweep lambda in score - lambda * penalty: cost or latency.")] = None,
    compare_to: Annotated[str, typer.Option(
        "--compare-to", help="Paired bootstrap of every router against this router of the run; 'auto' = "
                             "best-single when it is in the run, 'none' = off.")] = "auto",
    protocol: Annotated[str, typer.Option(
        help="full (every training outcome seen), cold-start (one logged outcome per training query) or "
             "voyager (rounds of routing the next chunk, seeing only the chosen outcome).")] = "full",
    logging: Annotated[str | None, typer.Option(
        help="cold-start: the logging policy that draws the training log: uniform (default), "
             "eps-greedy:ROUTER:EPS, softmax:ROUTER:T or router:ROUTER.")] = None,
    rounds: Annotated[int | None, typer.Option(
        help="voyager: number of rounds T = chunks of the training split (>= 2; default 5).")] = None,
    order: Annotated[str | None, typer.Option(
        help="voyager: chunk the training split in its given order or a seeded shuffle (default given).")] = None,
    by: Annotated[str | None, typer.Option("--by", help=_by_help())] = None,
    dev: Annotated[str | None, typer.Option(
        "--dev", metavar="F",
        help="hold out a seeded fraction F in (0, 1) of the training side (stratified by dataset) as a development "
             "part: full: mlp, barp and the probes stop training on it (the epoch kept is shown); voyager: each "
             "round deploys the checkpoint with the highest mu_o on it (docs/early-stopping.md, "
             "docs/partial-observability.md).")] = None,
    answerable_only: Annotated[bool, typer.Option(
        "--answerable-only", metavar="", help=_full("answerable_only"))] = False,
    reference: Annotated[str | None, typer.Option(metavar="ACTOR|PERF", help=_full("reference"))] = None,
    as_json: Annotated[bool, json_option()] = False,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Directory for the JSON record, per-query choices and plots.")] = None,
    force: Annotated[bool, force_option()] = False,
) -> None:
    """Train routers on the train split and evaluate them on the test split, every metric with a 95% CI.

    --protocol cold-start trains on one logged outcome per training query; voyager runs T rounds in which each
    router routes the next chunk of the training split and learns only the outcomes it chose (SPEC 5)."""
    from routerlab.protocols.base import get_protocol
    from routerlab.protocols.full import resolve_compare_to
    from routerlab.reports.evaluation import by_dataset_text, leaderboard_text, write_evaluation
    from routerlab.reports.files import say_written

    if protocol not in EVALUATION_PROTOCOLS:
        raise UsageError(f"--protocol must be one of {', '.join(EVALUATION_PROTOCOLS)}, got {protocol!r} (every "
                         "protocol: routerlab protocols)")
    proto = get_protocol(protocol)
    # one check of every setting, the same as from an experiment file or Python; an option of another
    # protocol is an error naming it, not silently ignored
    settings = proto.Settings.from_cli(split=split, encoder=encoder, n_boot=n_boot, sweep=sweep,
                                       compare_to=compare_to, logging=logging, rounds=rounds, order=order,
                                       by=by, dev=dev, answerable_only=answerable_only or None,
                                       reference=reference)
    specs = router_specs(routers)
    resolve_compare_to(compare_to, specs, option="--compare-to")
    if output is not None:
        check_output_dir(output)
        refuse_overwrite(output, force)
    # the table goes straight into the protocol, which lets it go once it is split (this command keeps no
    # reference): at RouterEval scale the routers then train beside the split's parts, not the whole table too
    result = proto.run(open_table(table_dir), settings, seed, specs)
    ev = result.native
    written = write_evaluation(ev, output) if output is not None else []
    if output is not None and protocol == "voyager":
        from routerlab.reports.voyager_plot import plot_voyager, write_curves

        written += write_curves(ev, output)
        plot_voyager(ev, output / "voyager.png")
        written.append("voyager.png")
    if as_json:
        print_json({**ev.to_dict(), "protocol": protocol, "settings": settings.to_dict(),
                    "records": [r.to_dict() for r in result.records]})
    else:
        typer.echo(leaderboard_text(ev))
        if protocol != "full":
            typer.echo(_protocol_text(ev))
        if by_dataset_text(ev):
            typer.echo(by_dataset_text(ev))
    say_written([output / f for f in written] if output is not None else [], to_stderr=as_json)


def _protocol_text(ev: Evaluation) -> str:
    """The lines a partial-observability run adds under the leaderboard: what was logged, and Voyager's rounds."""
    kind = ev.extra.get("protocol")
    if kind == "cold-start":
        lg = ev.extra["logging"]
        correct = f", {lg['correct_share']:.1%} of them correct" if "correct_share" in lg else ""
        return (f"protocol cold-start: trained on a {lg.get('spec', lg['policy'])} log of {lg['n_logged']} training "
                f"queries, one outcome each ({lg['n_observed']} known{correct})")
    if kind == "voyager":
        from routerlab.reports.voyager_plot import rounds_text

        vg = ev.extra["voyager"]
        return (f"protocol voyager: {vg['n_rounds']} rounds over chunks of {', '.join(map(str, vg['chunk_sizes']))} "
                f"training queries ({vg['order']} order), chunk 1 logged uniformly\n" + rounds_text(ev))
    return ""


@app.command("scaling")
def scaling_cmd(
    table_dir: Annotated[Path | None, typer.Argument(help=TABLE_HELP)] = None,
    m: Annotated[str | None, typer.Option("--m", help=_scaling("m"))] = None,
    p: Annotated[str | None, typer.Option("--p", help=_scaling("p"))] = None,
    samples: Annotated[int | None, typer.Option(help=_scaling("samples"))] = None,
    split: Annotated[str | None, typer.Option(help=_scaling("split"))] = None,
    seed: Annotated[int, seed_option("Seed for the split and the actor subsets.")] = 0,
    reference: Annotated[float | None, typer.Option(
        "--reference", metavar="PERF", help="Draw Perf(reference), e.g. a paper's GPT-4 score, as a line in "
        "scaling.png (and record it as the curve's reference); the curve itself is unchanged.")] = None,
    as_json: Annotated[bool, json_option()] = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write scaling.json and scaling.png.")] = None,
    force: Annotated[bool, force_option()] = False,
) -> None:
    """Model-level scaling curve: mu_o of r_o(p) and the best single actor against pool size (SPEC 4)."""
    from routerlab.protocols.scaling import ScalingCurve, ScalingSettings
    from routerlab.reports.evaluation import write_json
    from routerlab.reports.files import say_written
    from routerlab.reports.scaling_plot import plot_scaling

    settings = ScalingSettings.from_cli(m=m, p=p, samples=samples, split=split)
    if reference is not None and not math.isfinite(reference):
        raise UsageError(f"--reference: must be a finite number, got {reference}")
    if output is not None:
        check_output_dir(output)
        refuse_overwrite(output, force)
    table = open_table(table_dir)
    result = run_from_cli("scaling", table, settings, seed)
    curve: ScalingCurve = result.native
    if reference is not None:  # presentation only: the line of the figure, never a number of the curve
        curve = dataclasses.replace(curve, reference=reference)
    record = with_protocol({**result.provenance.to_dict(), **curve.to_dict()}, result)
    if output is not None:
        output.mkdir(parents=True, exist_ok=True)
        write_json(output / "scaling.json", record)
        plot_scaling(curve, output / "scaling.png", f"Scaling curve: {table.name}")
    written = [output / "scaling.json", output / "scaling.png"] if output is not None else []
    if as_json:
        print_json(record)
        say_written(written, to_stderr=True)
        return
    from routerlab.metrics.catalog import legend_line

    typer.echo("m    " + "  ".join(f"p={x:<5g}" for x in curve.p) + "  best-single")
    for i, mm in enumerate(curve.m):
        cells = "  ".join(f"{curve.oracle_p[x]['mean'][i]:.4f} " for x in curve.p)
        typer.echo(f"{mm:<4d} {cells}  {curve.best_single['mean'][i]:.4f}")
    for line in legend_line([("m", "pool size m"), ("p=P", "oracle-p"), ("best-single", "best_single")],
                            "each a mean over the random pools"):
        typer.echo(line)
    say_written(written)


@app.command("groups")
def groups_cmd(
    table_dir: Annotated[Path | None, typer.Argument(help=TABLE_HELP)] = None,
    m: Annotated[str | None, typer.Option("--m", help=_groups("m"))] = None,
    routers: Annotated[str, typer.Option("--routers", help="Comma-separated router specs evaluated on each group.")] = (
        "oracle,random,best-single,knn"
    ),
    draws: Annotated[int | None, typer.Option(help=_groups("draws"))] = None,
    encoder: Annotated[str | None, typer.Option(help=_groups("encoder"))] = None,
    split: Annotated[str | None, typer.Option(help=_groups("split"))] = None,
    seed: Annotated[int, seed_option()] = 0,
    n_boot: Annotated[int | None, typer.Option("--n-boot", help=_groups("n_boot"))] = None,
    compare_to: Annotated[str | None, typer.Option(
        "--compare-to", help=_groups("compare_to"))] = None,
    skip_inapplicable: Annotated[bool, typer.Option(
        "--skip-inapplicable", metavar="", help=_groups("skip_inapplicable"))] = False,
    reference: Annotated[str | None, typer.Option("--reference", help=_groups("reference"))] = None,
    as_json: Annotated[bool, json_option()] = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Directory to write groups.json to.")] = None,
    force: Annotated[bool, force_option()] = False,
) -> None:
    """Candidate groups (all-strong, all-weak, strong-to-weak; SPEC 4), every router evaluated on each."""
    from routerlab.protocols.groups import GroupsSettings
    from routerlab.protocols.groups_eval import GroupEvaluations
    from routerlab.reports.evaluation import groups_text

    specs = router_specs(routers)
    settings = GroupsSettings.from_cli(m=m, draws=draws, encoder=encoder, split=split, n_boot=n_boot,
                                       compare_to=compare_to, skip_inapplicable=skip_inapplicable or None,
                                       reference=reference)
    if output is not None:
        check_output_dir(output)
        refuse_overwrite(output, force)
    table = open_table(table_dir)
    result = run_from_cli("groups", table, settings, seed, specs)
    native: GroupEvaluations = result.native
    record = with_protocol(native.to_dict(), result)
    emit_record(record, output, "groups.json", as_json, lambda: groups_text(record))
