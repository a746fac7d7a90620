"""``routerlab evaluate`` (full, cold-start and Voyager protocols), ``routerlab scaling`` and ``routerlab groups``.

Every option is checked before any data is loaded or any router trained: numbers by their typer ranges
(one usage line, exit 2), lists and router names by the helpers below.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from routerlab.cli import app
from routerlab.cli._io import check_output_dir, emit_record, json_option, open_table, print_json, seed_option
from routerlab.errors import UsageError

if TYPE_CHECKING:
    from routerlab.protocols.full import Evaluation

# The fewest resamples for a 95% percentile interval whose 2.5% and 97.5% tails each hold at least one
# resample (alpha / 2 * n_boot >= 1); fewer would make the interval bounds a single arbitrary resample.
MIN_BOOT = 40
MAX_BOOT = 1_000_000
MAX_DRAWS = 1_000_000
MAX_SAMPLES = 100_000

TABLE_HELP = "A table directory (default: the embedded demo benchmark)."
SPLIT_HELP = "Train/test split: given, random[:F] (seeded) or ood:DS1,DS2."
ENCODER_HELP = "Query encoder: tfidf, minilm or precomputed:path=FILE."
NBOOT_HELP = f"Bootstrap resamples per 95% interval ({MIN_BOOT}..{MAX_BOOT:,})."


def positive_ints(text: str, what: str) -> list[int]:
    """``2,3,5`` -> [2, 3, 5]: a non-empty list of integers >= 1."""
    parts = [x.strip() for x in text.split(",") if x.strip()]
    if not parts:
        raise UsageError(f"{what} needs at least one integer >= 1, got {text!r}")
    try:
        values = [int(x) for x in parts]
    except ValueError:
        raise UsageError(f"{what} must be comma-separated integers >= 1, got {text!r}") from None
    bad = [v for v in values if v < 1]
    if bad:
        raise UsageError(f"{what} must be integers >= 1, got {', '.join(map(str, bad))}")
    return values


def probabilities(text: str, what: str) -> list[float]:
    """``0,0.5,1`` -> [0.0, 0.5, 1.0]: a non-empty list of finite numbers in [0, 1]."""
    parts = [x.strip() for x in text.split(",") if x.strip()]
    if not parts:
        raise UsageError(f"{what} needs at least one probability in [0, 1], got {text!r}")
    try:
        values = [float(x) for x in parts]
    except ValueError:
        raise UsageError(f"{what} must be comma-separated numbers in [0, 1], got {text!r}") from None
    bad = [x for x, v in zip(parts, values, strict=True) if not (math.isfinite(v) and 0.0 <= v <= 1.0)]
    if bad:
        raise UsageError(f"{what} must be numbers in [0, 1], got {', '.join(bad)}")
    return values


def check_pool_sizes(m_values: list[int], n_actors: int, what: str = "--m") -> None:
    """Pool sizes cannot exceed the table's actors (checked once the table is loaded)."""
    bad = [m for m in m_values if m > n_actors]
    if bad:
        raise UsageError(f"{what} {', '.join(map(str, bad))} larger than the table's {n_actors} actors")


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


@app.command("evaluate")
def evaluate_cmd(
    table_dir: Annotated[Path | None, typer.Argument(help=TABLE_HELP)] = None,
    routers: Annotated[str, typer.Option("--routers", help="Comma-separated router specs, e.g. oracle,knn:k=10.")] = (
        "oracle,random,best-single,knn"
    ),
    encoder: Annotated[str, typer.Option(help=ENCODER_HELP)] = "tfidf",
    split: Annotated[str, typer.Option(help=SPLIT_HELP)] = "given",
    seed: Annotated[int, seed_option()] = 0,
    n_boot: Annotated[int, typer.Option("--n-boot", min=MIN_BOOT, max=MAX_BOOT, help=NBOOT_HELP)] = 1000,
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
    as_json: Annotated[bool, json_option()] = False,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Directory for the JSON record, per-query choices and plots.")] = None,
) -> None:
    """Train routers on the train split and evaluate them on the test split, every metric with a 95% CI.

    --protocol cold-start trains on one logged outcome per training query; voyager runs T rounds in which each
    router routes the next chunk of the training split and learns only the outcomes it chose (SPEC 5)."""
    from routerlab.protocols.full import evaluate, resolve_compare_to
    from routerlab.reports.evaluation import leaderboard_text, write_evaluation
    from routerlab.reports.files import say_written

    specs = router_specs(routers)
    reference = resolve_compare_to(compare_to, specs, option="--compare-to")
    if sweep is not None and sweep not in {"cost", "latency"}:
        raise UsageError(f"--sweep must be cost or latency, got {sweep!r}")
    _check_protocol_options(protocol, logging, rounds, order, sweep)
    if output is not None:
        check_output_dir(output)
    # the table goes straight into the protocol, which lets it go once it is split (this command keeps no
    # reference): at RouterEval scale the routers then train beside the split's parts, not the whole table too
    if protocol == "full":
        result = evaluate(open_table(table_dir), specs, split=split, encoder=encoder, seed=seed, n_boot=n_boot,
                          sweep=sweep, compare_to=reference)
    elif protocol == "cold-start":
        from routerlab.protocols.partial import cold_start

        result = cold_start(open_table(table_dir), specs, logging=logging or "uniform", split=split,
                            encoder=encoder, seed=seed, n_boot=n_boot, sweep=sweep, compare_to=reference)
    else:
        from routerlab.protocols.partial import voyager

        result = voyager(open_table(table_dir), specs, rounds=5 if rounds is None else rounds,
                         order=order or "given", split=split, encoder=encoder, seed=seed, n_boot=n_boot,
                         compare_to=reference)
    written = write_evaluation(result, output) if output is not None else []
    if output is not None and protocol == "voyager":
        from routerlab.reports.voyager_plot import plot_voyager, write_curves

        written += write_curves(result, output)
        plot_voyager(result, output / "voyager.png")
        written.append("voyager.png")
    if as_json:
        print_json(result.to_dict())
    else:
        typer.echo(leaderboard_text(result))
        if protocol != "full":
            typer.echo(_protocol_text(result))
    say_written([output / f for f in written] if output is not None else [], to_stderr=as_json)


def _check_protocol_options(protocol: str, logging: str | None, rounds: int | None, order: str | None,
                            sweep: str | None) -> None:
    """Each protocol's own options, checked before any data is loaded: an option of another protocol is an
    error, not silently ignored."""
    from routerlab.protocols.partial import ORDERS, PROTOCOLS

    if protocol not in PROTOCOLS:
        raise UsageError(f"--protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    if logging is not None and protocol != "cold-start":
        raise UsageError(f"--logging applies to --protocol cold-start only (got --protocol {protocol})")
    if (rounds is not None or order is not None) and protocol != "voyager":
        which = "--rounds" if rounds is not None else "--order"
        raise UsageError(f"{which} applies to --protocol voyager only (got --protocol {protocol})")
    if sweep is not None and protocol == "voyager":
        raise UsageError("--sweep is not available with --protocol voyager; sweep the full or cold-start protocol")
    if rounds is not None and rounds < 2:
        raise UsageError(f"--rounds must be at least 2 (chunk 1 logged uniformly, then routed chunks), got {rounds}")
    if order is not None and order not in ORDERS:
        raise UsageError(f"--order must be one of {', '.join(ORDERS)}, got {order!r}")
    if logging is not None:
        from routerlab.protocols.policies import parse_policy

        try:
            parse_policy(logging)
        except UsageError as exc:
            raise UsageError(f"--logging: {exc}") from None


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
    m: Annotated[str, typer.Option("--m", help="Pool sizes, comma-separated integers >= 1.")] = "2,3,5",
    p: Annotated[str, typer.Option(
        "--p", help="Oracle probabilities p of r_o(p), comma-separated, each in [0, 1].")] = "0,0.25,0.5,0.75,1",
    samples: Annotated[int, typer.Option(
        min=1, max=MAX_SAMPLES, help="Random actor subsets per pool size.")] = 100,
    split: Annotated[str, typer.Option(help=SPLIT_HELP)] = "given",
    seed: Annotated[int, seed_option("Seed for the split and the actor subsets.")] = 0,
    as_json: Annotated[bool, json_option()] = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write scaling.json and scaling.png.")] = None,
) -> None:
    """Model-level scaling curve: mu_o of r_o(p) and the best single actor against pool size (SPEC 4)."""
    from routerlab.data.provenance import Provenance
    from routerlab.data.splits import make_split
    from routerlab.protocols.scaling import scaling_curve
    from routerlab.reports.evaluation import write_json
    from routerlab.reports.files import say_written
    from routerlab.reports.scaling_plot import plot_scaling

    m_values, p_values = positive_ints(m, "--m"), probabilities(p, "--p")
    if output is not None:
        check_output_dir(output)
    table = open_table(table_dir)
    check_pool_sizes(m_values, table.n_actors)
    sp = make_split(table, split, seed)
    curve = scaling_curve(table, sp, m_values, p_values, samples, seed)
    record = {**Provenance.of(table, sp, seed=seed, routers=["oracle-p", "best-single"]).to_dict(), **curve.to_dict()}
    if output is not None:
        output.mkdir(parents=True, exist_ok=True)
        write_json(output / "scaling.json", record)
        plot_scaling(curve, output / "scaling.png", f"Scaling curve: {table.name}")
    written = [output / "scaling.json", output / "scaling.png"] if output is not None else []
    if as_json:
        print_json(record)
        say_written(written, to_stderr=True)
        return
    typer.echo("m    " + "  ".join(f"p={x:<5g}" for x in curve.p) + "  best-single")
    for i, mm in enumerate(curve.m):
        cells = "  ".join(f"{curve.oracle_p[x]['mean'][i]:.4f} " for x in curve.p)
        typer.echo(f"{mm:<4d} {cells}  {curve.best_single['mean'][i]:.4f}")
    say_written(written)


@app.command("groups")
def groups_cmd(
    table_dir: Annotated[Path | None, typer.Argument(help=TABLE_HELP)] = None,
    m: Annotated[str, typer.Option("--m", help="Group sizes, comma-separated integers >= 1.")] = "3,5",
    routers: Annotated[str, typer.Option("--routers", help="Comma-separated router specs evaluated on each group.")] = (
        "oracle,random,best-single,knn"
    ),
    draws: Annotated[int, typer.Option(
        min=1, max=MAX_DRAWS, help="Random draws per group; the one with the best train oracle is kept.")] = 1000,
    encoder: Annotated[str, typer.Option(help=ENCODER_HELP)] = "tfidf",
    split: Annotated[str, typer.Option(help=SPLIT_HELP)] = "given",
    seed: Annotated[int, seed_option()] = 0,
    n_boot: Annotated[int, typer.Option("--n-boot", min=MIN_BOOT, max=MAX_BOOT, help=NBOOT_HELP)] = 1000,
    as_json: Annotated[bool, json_option()] = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Directory to write groups.json to.")] = None,
) -> None:
    """Candidate groups (all-strong, all-weak, strong-to-weak; SPEC 4), every router evaluated on each."""
    from routerlab.protocols.groups_eval import evaluate_groups
    from routerlab.reports.evaluation import groups_text

    m_values, specs = positive_ints(m, "--m"), router_specs(routers)
    if output is not None:
        check_output_dir(output)
    table = open_table(table_dir)
    check_pool_sizes(m_values, table.n_actors)
    record = evaluate_groups(table, m_values, specs, draws=draws, encoder=encoder, split=split, seed=seed,
                             n_boot=n_boot)
    emit_record(record, output, "groups.json", as_json, lambda: groups_text(record))
