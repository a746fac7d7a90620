"""``routerlab choose``: the router and operating point to deploy under one constraint, chosen on a development
part, with a 95% prediction interval and what the test queries then gave (docs/choose.md).

Every option is checked before the table is loaded (one line, exit 2): exactly one constraint, its number in range,
the pair only with a call rate, the routers by name. A table that lacks the cost or latency a constraint reads is
one line too. Nothing feasible on the development queries is one line naming the closest option, exit 2 (with
``--json`` the record, ``choice`` null, is printed first).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from routerlab.cli import app
from routerlab.cli._io import (
    check_output_dir,
    force_option,
    json_option,
    open_table,
    print_json,
    refuse_overwrite,
    seed_option,
)
from routerlab.cli._protocol import option_help, run_from_cli, with_protocol
from routerlab.errors import UsageError


def _h(name: str) -> str:
    """A setting's option help, read from the choose protocol's settings when the command is built."""
    from routerlab.protocols.choose import ChooseSettings

    return option_help(ChooseSettings, name)


def _num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}f}"


def _ci(ci: Any, digits: int = 3) -> str:
    return "n/a (too few queries)" if ci is None else f"[{_num(ci[0], digits)}, {_num(ci[1], digits)}]"


UNITS = {"quality": ("mu_o", 3, ""), "call_rate": ("call rate", 3, ""), "cost": ("mean cost", 6, " USD"),
         "latency": ("mean latency", 3, " s")}


def constraint_words(c: dict[str, Any]) -> str:
    """The constraint in words: ``call rate 0.3 to frontier-235b (small tiny-2b)``."""
    if c["kind"] == "call_rate":
        return f"call rate {c['target']:g} to {c['large']} (small {c['small']})"
    if c["kind"] == "max_cost":
        return f"mean cost at most {c['target']:g} USD per query"
    if c["kind"] == "max_latency":
        return f"mean latency at most {c['target']:g} s per query"
    return f"mu_o at least {c['target']:g} (95% lower bound on dev), the cheapest by {c['by']}"


def _measures(record: dict[str, Any]) -> list[str]:
    """The measures reported, the constrained one right after quality."""
    kind = record["constraint"]["kind"]
    first = {"call_rate": "call_rate", "max_cost": "cost", "max_latency": "latency"}.get(kind)
    keys = [m for m in ("quality", "call_rate", "cost", "latency") if m in (record["predicted"] or {})]
    return sorted(keys, key=lambda m: (m != "quality", m != first))


def choose_text(record: dict[str, Any]) -> str:
    """What ``routerlab choose`` prints: the constraint, each router's best point on dev, the choice, the prediction
    and what the test queries gave."""
    from routerlab.protocols.choose import describe_point

    c = record["constraint"]
    lines = [f"choose: {constraint_words(c)}; routers fitted on {record['n_train']} training queries, chosen on "
             f"{record['n_dev']} development queries, applied to {record['n_test']} test queries"]
    width = max([len(r["router"]) for r in record["routers"]] + [6])
    shown = [m for m in ("quality", "call_rate", "cost", "latency")
             if any(m in (r.get("dev") or {}) for r in record["routers"])]
    lines.append("")
    lines.append(f"{'router':<{width}}  " + "  ".join(f"{UNITS[m][0]:>12}" for m in shown) + "  operating point (dev)")
    for r in record["routers"]:
        if not r.get("feasible"):
            lines.append(f"{r['router']:<{width}}  " + "  ".join(f"{'-':>12}" for _ in shown) + "  none feasible")
            continue
        cells = [_num(r["dev"].get(m), UNITS[m][1]) for m in shown]
        lines.append(f"{r['router']:<{width}}  " + "  ".join(f"{x:>12}" for x in cells) + "  "
                     + describe_point(r["operating_point"]))
    choice = record["choice"]
    lines.append("")
    lines.append(f"choice: {choice['router']} at {describe_point(choice['operating_point'])}")
    up = record.get("runner_up")
    if up is not None:
        lines.append(f"runner-up: {up['router']} at {describe_point(up['operating_point'])} (dev mu_o "
                     f"{_num(up['dev']['quality'])})")
    pred, real = record["predicted"], record["realized"]
    for m in _measures(record):
        name, digits, unit = UNITS[m]
        opt = pred.get(f"{m}_optimism", 0.0)
        lines.append(f"{name}: predicted {_num(pred[m], digits)}{unit} {_ci(pred.get(f'{m}_ci'), digits)} (dev "
                     f"{_num(pred[f'{m}_dev'], digits)}, selection optimism {opt:+.{digits}f}); realized on test "
                     f"{_num(real.get(m), digits)}{unit}")
    inside = record["inside"]
    lines.append("the realized mu_o is " + ("inside" if inside else "outside" if inside is not None else
                                             "not compared with") + " the 95% prediction interval")
    noise = record.get("call_rate_noise")
    if noise is not None:
        gap = real["call_rate_gap"]
        if noise.get("paced_bound") is not None:
            lines.append(f"call rate: realized gap {gap:+.3f} from the target, paced (held within "
                         f"+-{noise['paced_bound']:.3f}); the bare threshold would have sent "
                         f"{real['call_rate_unpaced']:.3f} (a fixed threshold's gap has sd {noise['sd']:.3f} here)")
        else:
            lines.append(f"call rate: realized gap {gap:+.3f} from the target; even a perfect threshold's gap has sd "
                         f"{noise['sd']:.3f} here (+-{noise['half_width_95']:.3f} at 95%; +-{noise['tolerance']} "
                         f"needs about {noise['queries_needed_each']} development and test queries each)")
    listed = {r["router"] for r in record["routers"]}
    lines += [f"left out: {k} ({v})" for k, v in record.get("skipped", {}).items() if k not in listed]
    lines += [f"note: {n}" for n in record.get("notes", [])]
    return "\n".join(lines)


def decision_card(record: dict[str, Any]) -> str:
    """``decision.md``: the constraint, the choice and why it won on dev, prediction against realized, the
    runner-up, and the run record, for a person to read."""
    from routerlab.protocols.choose import describe_point

    c, choice, pred, real = record["constraint"], record["choice"], record["predicted"], record["realized"]
    split = record.get("split", {})
    data = record.get("data", {})
    lines = ["# Decision card", "",
             f"**Constraint:** {constraint_words(c)} ({c['option']} {c['target']:g}).", "",
             f"**Choice:** `{choice['router']}` at {describe_point(choice['operating_point'])}.", ""]
    why = {"call_rate": "it has the highest mean score (mu_o) on the development queries among the routers, each "
                        "at the threshold that sends the target share of them to the large model",
           "max_cost": "it has the highest mu_o on the development queries among the (router, lambda) whose "
                       "development mean cost is within the budget",
           "max_latency": "it has the highest mu_o on the development queries among the (router, lambda) whose "
                          "development mean latency is within the target",
           "min_quality": f"it is the cheapest (by {c.get('by')}) (router, lambda) whose one-sided 95% lower bound of "
                          "development mu_o reaches the target"}[c["kind"]]
    lines += [f"**Why it won on dev:** {why}.", "",
              "| router | " + " | ".join(UNITS[m][0] + " (dev)" for m in _measures(record)) + " | operating point |",
              "|---|" + "---|" * (len(_measures(record)) + 1)]
    for r in record["routers"]:
        if r.get("feasible"):
            lines.append(f"| {r['router']} | " + " | ".join(_num(r["dev"].get(m), UNITS[m][1])
                                                          for m in _measures(record))
                         + f" | {describe_point(r['operating_point'])} |")
        else:
            lines.append(f"| {r['router']} | " + " | ".join("-" for _ in _measures(record)) + " | none feasible |")
    lines += ["", "## Prediction and what happened", "",
              f"Predicted on the {record['n_test']} test queries before they were seen, with a 95% prediction "
              f"interval that counts the noise of the {record['n_dev']} development queries and of the test "
              "queries, less the bootstrap estimate of the bias of picking the best on the development queries "
              "(docs/choose.md).", "",
              "| measure | predicted | 95% prediction interval | realized on test |", "|---|---|---|---|"]
    for m in _measures(record):
        name, digits, unit = UNITS[m]
        lines.append(f"| {name}{unit} | {_num(pred[m], digits)} | {_ci(pred.get(f'{m}_ci'), digits)} | "
                     f"{_num(real.get(m), digits)} |")
    inside = record["inside"]
    where = "inside" if inside else "outside" if inside is not None else "not compared with"
    lines += ["", f"The realized mu_o is **{where}** the interval."]
    noise = record.get("call_rate_noise")
    if noise is not None:
        lines += ["", f"The realized call rate is {real['call_rate_gap']:+.3f} from the target. A fixed threshold's "
                      f"gap has standard deviation sqrt(p(1-p)(1/n_dev + 1/n_test)) = {noise['sd']:.3f} here, "
                      f"however good the router; staying within +-{noise['tolerance']} at 95% needs about "
                      f"{noise['queries_needed_each']} development and test queries each."]
        band = (record["choice"]["operating_point"] or {}).get("pace_band")
        if band is not None:
            lines[-1] += (f" The threshold ran with a rate controller (band +-{band:g} + 1/(2t) over the queries as "
                          f"they arrived, test in a seeded order), which holds the gap within that band; the bare "
                          f"threshold would have sent {real['call_rate_unpaced']:.3f} of the test queries.")
    up = record.get("runner_up")
    lines += ["", "## Runner-up", ""]
    if up is None:
        lines.append("No other router had a feasible operating point.")
    else:
        lines.append(f"`{up['router']}` at {describe_point(up['operating_point'])}: dev mu_o "
                     f"{_num(up['dev']['quality'])} (the choice: {_num(pred['quality_dev'])}); on test it gave "
                     f"mu_o {_num(up['test']['quality'])}.")
    lines += ["", "## Run record", "",
              f"- data: {data.get('name', '?')} (hash {str(data.get('content_hash', '?'))[:12]})",
              f"- split: {split.get('kind')} (seed {split.get('seed')}), {split.get('n_train')} train, "
              f"{split.get('n_dev')} development (fraction {split.get('dev_fraction')}, seed {split.get('dev_seed')}),"
              f" {split.get('n_test')} test",
              f"- encoder: {record.get('encoder')}; seed {record.get('seed')}; routerlab "
              f"{record.get('routerlab_version')}"]
    lines += [f"- note: {n}" for n in record.get("notes", [])]
    return "\n".join(lines) + "\n"


@app.command("choose")
def choose_cmd(
    table_dir: Annotated[Path | None, typer.Argument(help="A table directory (default: the embedded demo).")] = None,
    routers: Annotated[str, typer.Option(
        "--routers", help="Comma-separated router specs, the candidates, e.g. knn,linear,best-single.")] = (
        "best-single,knn,linear"),
    call_rate: Annotated[float | None, typer.Option("--call-rate", help=_h("call_rate"))] = None,
    small: Annotated[str | None, typer.Option("--small", help=_h("small"))] = None,
    large: Annotated[str | None, typer.Option("--large", help=_h("large"))] = None,
    max_cost: Annotated[float | None, typer.Option("--max-cost", help=_h("max_cost"))] = None,
    max_latency: Annotated[float | None, typer.Option("--max-latency", help=_h("max_latency"))] = None,
    min_quality: Annotated[float | None, typer.Option("--min-quality", help=_h("min_quality"))] = None,
    split: Annotated[str | None, typer.Option(help=_h("split"))] = None,
    dev: Annotated[float | None, typer.Option("--dev", help=_h("dev"))] = None,
    pace_band: Annotated[str | None, typer.Option("--pace-band", metavar="BAND", help=_h("pace_band"))] = None,
    encoder: Annotated[str | None, typer.Option(help=_h("encoder"))] = None,
    seed: Annotated[int, seed_option()] = 0,
    as_json: Annotated[bool, json_option()] = False,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Directory for decision.md (the decision card) and results.json.")] = None,
    force: Annotated[bool, force_option()] = False,
) -> None:
    """Choose the router and operating point that best meet one constraint (a call rate to the large model, a cost
    budget, a latency target or a quality floor) on a development part, predict its test value with a 95%
    prediction interval, then apply it to the test queries and report what happened."""
    from routerlab.cli.evaluate_cmd import router_specs
    from routerlab.protocols.choose import ChooseSettings, infeasible_line
    from routerlab.reports.files import say_written, write_json

    settings = ChooseSettings.from_cli(call_rate=call_rate, small=small, large=large, max_cost=max_cost,
                                       max_latency=max_latency, min_quality=min_quality, split=split, dev=dev,
                                       pace_band=pace_band,
                                       encoder=encoder)
    specs = router_specs(routers)
    if output is not None:
        check_output_dir(output)
        refuse_overwrite(output, force)
    result = run_from_cli("choose", open_table(table_dir), settings, seed, specs)
    record = with_protocol(result.native.to_dict(), result)
    if record["choice"] is None:
        if as_json:
            print_json(record)
        raise UsageError(infeasible_line(result.native))
    written: list[Path] = []
    if output is not None:
        from routerlab._atomic import atomic_directory

        with atomic_directory(output) as tmp:
            write_json(tmp / "results.json", record)
            (tmp / "decision.md").write_text(decision_card(record), encoding="utf-8")
        written += [output / "decision.md", output / "results.json"]
    if as_json:
        print_json(record)
    else:
        typer.echo(choose_text(record))
    say_written(written, to_stderr=as_json)
