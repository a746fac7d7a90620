"""``routerlab power``: how many test queries a comparison of two routers needs (docs/power.md).

The options are parsed into :class:`~routerlab.protocols.power.PowerSettings` (every rule checked there) and the
routers checked, before the table is loaded or any router trained; the registered ``power`` protocol fits both
routers and does the rest. Nothing is written: ``--json`` prints the record.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from routerlab.cli import app
from routerlab.cli._io import json_option, open_table, print_json, seed_option
from routerlab.errors import UsageError

if TYPE_CHECKING:
    from routerlab.protocols.power import PowerComparison, PowerStudy


def _help(name: str) -> str:
    """A setting's meaning and default as its option's help (the protocol declares both once; read when the
    command is built, so listing the commands imports no protocol). ``--delta`` has no default to show."""
    from routerlab.cli._protocol import option_help
    from routerlab.protocols.power import PowerSettings

    if name == "delta":
        text = PowerSettings.help(name)
        return f"{text[:1].upper()}{text[1:]}."
    return option_help(PowerSettings, name)


@app.command("power")
def power_cmd(
    table_dir: Annotated[Path | None, typer.Argument(
        help="A table directory (default: the embedded demo benchmark).")] = None,
    routers: Annotated[str | None, typer.Option(
        "--routers", help="The two routers compared, A,B (the difference is A - B), e.g. knn,best-single; with "
                          "--versus, every router listed is compared with that one.")] = None,
    delta: Annotated[float | None, typer.Option(help=_help("delta"))] = None,
    alpha: Annotated[float | None, typer.Option(help=_help("alpha"))] = None,
    power: Annotated[float | None, typer.Option(help=_help("power"))] = None,
    versus: Annotated[str | None, typer.Option(help=_help("versus"))] = None,
    split: Annotated[str | None, typer.Option(help=_help("split"))] = None,
    encoder: Annotated[str | None, typer.Option(help=_help("encoder"))] = None,
    n_boot: Annotated[int | None, typer.Option("--n-boot", help=_help("n_boot"))] = None,
    seed: Annotated[int, seed_option()] = 0,
    as_json: Annotated[bool, json_option()] = False,
) -> None:
    """How many test queries a paired comparison of two routers needs to detect a difference --delta in mu_o.

    Both routers are fitted on the train split and scored on the test split as evaluate does; from their paired
    per-query differences come the observed difference with its 95% interval, the sd of the differences, the test
    queries a two-sided paired test at level --alpha needs to detect --delta with probability --power, and the
    power the current test split has, for --delta and for the observed difference (SPEC 7)."""
    from routerlab.cli._protocol import run_from_cli, with_protocol
    from routerlab.cli.evaluate_cmd import router_specs
    from routerlab.protocols.power import DELTA_MISSING, PowerSettings, comparison_pairs

    settings = PowerSettings.from_cli(delta=delta, alpha=alpha, power=power, versus=versus, split=split,
                                      encoder=encoder, n_boot=n_boot)
    if settings.delta is None:
        raise UsageError(f"--delta: {DELTA_MISSING}")
    if routers is None:
        raise UsageError("--routers: name the two routers to compare, e.g. --routers knn,best-single")
    specs = router_specs(routers)
    if settings.versus is not None:
        router_specs(settings.versus)  # an unknown name or a bad option is an error before any data is read
    comparison_pairs(specs, settings.versus)
    result = run_from_cli("power", open_table(table_dir), settings, seed, specs)
    study: PowerStudy = result.native
    if as_json:
        print_json(with_protocol(study.to_dict(), result))
    else:
        typer.echo(power_text(study, settings.delta, settings.alpha, settings.power))


def _needed(n: int | None) -> str:
    """The test queries needed; at the floor, why it is not lower."""
    from routerlab.metrics.bootstrap import MIN_QUERIES

    if n is None:
        return "more than can be counted"
    floor = " (the fewest routerlab computes an interval from)" if n == MIN_QUERIES else ""
    return f"{n:,} test queries{floor}"


def _number(x: float | None, digits: int = 4, sign: bool = False) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def comparison_text(c: PowerComparison, delta: float, alpha: float, power: float) -> list[str]:
    """The lines of one comparison: each router's mu_o, the observed difference and its interval, the sd, and the
    queries needed and the power now, for ``delta`` and for the observed difference (or why they are missing)."""
    from routerlab.metrics.bootstrap import unavailable

    a = c.analysis
    ci = (f"[{_number(a.ci[0], sign=True)}, {_number(a.ci[1], sign=True)}]"
          if all(math.isfinite(x) for x in a.ci) else unavailable(a.n))
    lines = [f"{c.router} - {c.versus} on {a.n:,} evaluated test queries",
             f"  mu_o                     {c.router} {_number(c.mu_o)}, {c.versus} {_number(c.mu_o_versus)}",
             f"  observed difference      {_number(a.mean_difference, sign=True)}, 95% paired interval {ci}",
             f"  sd of the differences    {_number(a.sd)}"]
    test = f"{power:.0%} power, two-sided paired test at alpha {alpha:g}"
    if a.n_needed is None and a.power_at_n is None:
        lines.append(f"  {a.reason}")
        return lines
    lines.append(f"  to detect {delta:g} at {test}: {_needed(a.n_needed)}; with {a.n:,} now, "
                 f"power {_number(a.power_at_n, 2)}")
    if a.n_needed_observed is not None:
        lines.append(f"  to detect the observed {_number(abs(a.mean_difference))}: "
                     f"{_needed(a.n_needed_observed)}; with {a.n:,} now, power {_number(a.power_observed, 2)}")
    elif a.reason:
        lines.append(f"  {a.reason}")
    return lines


def power_text(study: PowerStudy, delta: float, alpha: float, power: float) -> str:
    """The command's text: the run in one line, then each comparison's lines."""
    split = study.provenance.split if isinstance(study.provenance.split, dict) else {}
    excluded = (f", {study.excluded_test_queries:,} test queries left out as incomplete"
                if study.excluded_test_queries else "")
    lines = [f"power: split {split.get('kind', 'given')}, {split.get('n_train', 0):,} training queries, seed "
             f"{study.provenance.seed}{excluded}"]
    for c in study.comparisons:
        lines += comparison_text(c, delta, alpha, power)
    for note in study.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)
