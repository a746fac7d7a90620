"""The protocol layer (protocols/base.py): declared settings checked once whatever their source, one result shape,
the registry and its plugins."""

from __future__ import annotations

import importlib.metadata
import json
import math
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab.cli import main
from routerlab.data.provenance import Provenance
from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.experiments.schema import load_experiment
from routerlab.protocols.base import (
    PROTOCOLS,
    Interval,
    MetricRecord,
    Protocol,
    ProtocolSettings,
    Result,
    RunContext,
    get_protocol,
    protocol_names,
    run_protocol,
    setting,
)
from routerlab.protocols.full import evaluate
from routerlab.protocols.partial import VoyagerSettings, voyager


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return demo(n_queries=300, seed=0)


# -- settings: one check, one message body, three sources ------------------------------------------------------
BAD_ROUNDS = "must be an integer >= 2, got 1"


def test_a_bad_setting_says_the_same_from_python_toml_and_the_command_line(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]
                                                                            ) -> None:
    with pytest.raises(UsageError, match=f"^rounds: {BAD_ROUNDS}$"):
        VoyagerSettings(rounds=1)
    with pytest.raises(UsageError, match=f"^rounds: {BAD_ROUNDS}$"):
        run_protocol("voyager", demo(60), {"rounds": 1}, routers=["knn"])
    with pytest.raises(UsageError, match=f"^--rounds: {BAD_ROUNDS}$"):
        VoyagerSettings.from_cli(rounds=1)
    exp = tmp_path / "exp.toml"
    exp.write_text('name = "x"\nrouters = ["knn"]\nseeds = [0]\nprotocols = [{ name = "voyager", rounds = 1 }]\n'
                   '[[tables]]\npath = "demo"\n')
    with pytest.raises(UsageError, match=f"^{exp}: protocols\\[1\\].rounds: {BAD_ROUNDS}$"):
        load_experiment(exp)
    assert main(["evaluate", "--protocol", "voyager", "--rounds", "1"]) == 2
    assert capsys.readouterr().err.strip() == f"routerlab: error: --rounds: {BAD_ROUNDS}"


@pytest.mark.parametrize("values,message", [
    ({"rounds": 2.0}, "rounds: must be an integer, got a number (2.0): write 2"),
    ({"rounds": True}, "rounds: must be an integer, got a boolean (true)"),
    ({"rounds": "many"}, "rounds: must be an integer, got a string ('many')"),
    ({"order": "sideways"}, "order: must be one of given, shuffle, got 'sideways'"),
    ({"n_boot": 10}, "n_boot: must be an integer in [40, 1,000,000], got 10"),
    ({"split": "random:1.5"}, "split: bad split 'random:1.5': the test fraction must be in (0, 1)"),
    ({"split": "half"}, "split: unknown split 'half'; use given, random[:F] or ood:DS1,DS2"),
    ({"encoder": "nope"}, "encoder: unknown encoder 'nope'"),
    ({"skip_inapplicable": "yes"}, "skip_inapplicable: must be true or false, got a string ('yes')"),
    ({"roundz": 3}, "roundz: not a setting of protocol voyager; did you mean 'rounds'?"),
    ({"logging": "uniform"}, "logging: applies to protocol cold-start and ope only, not to voyager"),
])
def test_each_rule_is_one_readable_line(values: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError) as err:
        VoyagerSettings.from_mapping(values)
    assert str(err.value).startswith(message), str(err.value)


def test_lists_take_arrays_or_comma_text_and_refuse_nan_and_repeats() -> None:
    @dataclass(frozen=True)
    class Grid(ProtocolSettings):
        m: tuple[int, ...] = setting((2, 3), "pool sizes", Interval(int, 1, None))
        p: tuple[float, ...] = setting((0.5,), "probabilities", Interval(float, 0, 1))

    assert Grid.from_mapping({"m": "2, 5"}).m == (2, 5) == Grid.from_mapping({"m": [2, 5]}).m
    assert Grid.from_mapping({"m": 4}).m == (4,)
    assert Grid().to_dict() == {"m": [2, 3], "p": [0.5]} and Grid(m=(4,)).changed() == {"m": [4]}
    for bad, says in [({"p": "nan"}, "p: item 1: must be a finite number in [0, 1], got nan"),
                      ({"m": [2, 2]}, "m: lists 2 twice"), ({"m": ""}, "m: needs at least one value"),
                      ({"m": [0]}, "m: item 1: must be an integer >= 1, got 0")]:
        with pytest.raises(UsageError) as err:
            Grid.from_mapping(bad)
        assert str(err.value) == says


def test_describe_gives_every_setting_with_option_default_rule_and_meaning() -> None:
    rows = {d["name"]: d for d in VoyagerSettings.describe()}
    assert rows["rounds"] == {"name": "rounds", "option": "--rounds", "type": "int", "default": 5,
                              "rule": "an integer >= 2", "help": rows["rounds"]["help"]}
    assert rows["n_boot"]["option"] == "--n-boot" and rows["rounds"]["help"]


# -- the result shape --------------------------------------------------------------------------------------------
def test_full_records_are_evaluate_s_numbers(table: RoutingTable) -> None:
    specs = ["oracle", "best-single", "knn"]
    result = run_protocol("full", table, {"n_boot": 100}, seed=3, routers=specs)
    ev = evaluate(table, specs, seed=3, n_boot=100)
    for r in ev.results:
        for metric, value in r.metrics.items():
            (rec,) = result.select(r.spec, metric, "")
            lo, hi = r.ci[metric]
            assert rec.value == value
            assert (rec.ci_low, rec.ci_high) == ((None, None) if math.isnan(lo) else (lo, hi))
    paired = result.select("knn", "mu_o_difference")
    assert paired and paired[0].value == pytest.approx(ev.results[2].paired["mu_o_difference"])  # type: ignore[index]
    assert result.value("oracle best-of-N", "mu_o") == pytest.approx(ev.oracle_best_of_n["mu_o"])
    assert result.n_test == ev.split["n_test"] and result.provenance.seed == 3
    d = result.to_dict()
    assert d["protocol"] == "full" and d["settings"]["n_boot"] == 100 and d["data"]["content_hash"]
    json.dumps(d)  # JSON-ready: no NaN, no numpy scalars


def test_voyager_records_every_round_as_a_slice(table: RoutingTable) -> None:
    result = run_protocol("voyager", table, {"rounds": 3, "n_boot": 40}, seed=0, routers=["best-single", "knn"])
    ev = voyager(table, ["best-single", "knn"], rounds=3, n_boot=40, seed=0)
    slices = {r.slice for r in result.records}
    assert slices == {"", "round=1", "round=2", "round=3"}
    for rnd in ev.extra["rounds"]:
        for r in rnd["results"]:
            assert result.value(r["spec"], "mu_o", f"round={rnd['round']}") == pytest.approx(r["metrics"]["mu_o"])
    assert result.value("knn", "mu_o") == result.value("knn", "mu_o", "round=3")


def test_a_run_context_encodes_the_table_once_for_every_protocol(table: RoutingTable,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import routerlab.protocols.full as full

    calls = []
    real = full.featurize
    monkeypatch.setattr(full, "featurize", lambda *a, **k: calls.append(1) or real(*a, **k))
    ctx = RunContext()
    a = run_protocol("full", table, {"n_boot": 40}, 0, ["knn"], ctx)
    b = run_protocol("cold-start", table, {"n_boot": 40}, 0, ["knn"], ctx)
    assert len(calls) == 1 and a.value("knn", "mu_o") is not None and b.value("knn", "mu_o") is not None


def test_metric_records_write_non_finite_numbers_as_none() -> None:
    rec = MetricRecord.of("knn", "mu_o", np.float32(0.5), (float("nan"), np.inf), "m=3")
    assert rec == MetricRecord("knn", "mu_o", 0.5, None, None, "m=3")


def test_a_protocol_that_takes_routers_refuses_none(table: RoutingTable) -> None:
    with pytest.raises(UsageError, match="protocol full needs at least one router"):
        run_protocol("full", table, {}, 0, [])
    with pytest.raises(UsageError, match="unknown protocol 'fulll'; known protocols: "):
        get_protocol("fulll")
    with pytest.raises(UsageError, match=r"must be an integer in \[0, 4294967295\], got -1"):
        run_protocol("full", table, {}, -1, ["knn"])


# -- the registry ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FirstActorSettings(ProtocolSettings):
    actor: int = setting(0, "which actor to always call (its column)", Interval(int, 0, None))


class FirstActor(Protocol):
    """A plugin's protocol: always call one actor, over the whole table."""

    summary = "always call one actor"
    Settings = FirstActorSettings
    uses_routers = False

    def run(self, table: RoutingTable, settings: Any, seed: int = 0, routers: Any = (),
            context: RunContext | None = None) -> Result:
        value = float(np.nanmean(table.score[:, settings.actor]))
        return Result(self.name, Provenance.of(table, "all", seed=seed), settings,
                      [MetricRecord.of(table.actor_names[settings.actor], "mu_o", value)])


def test_a_plugin_protocol_joins_through_its_entry_point(monkeypatch: pytest.MonkeyPatch, table: RoutingTable,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    PROTOCOLS.load()
    monkeypatch.setattr(PROTOCOLS, "_entries", dict(PROTOCOLS._entries))
    monkeypatch.setattr(PROTOCOLS, "_origins", dict(PROTOCOLS._origins))
    monkeypatch.setattr(PROTOCOLS, "_loaded", False)
    ep = EntryPoint("first-actor", f"{__name__}:FirstActor", "routerlab.protocols")
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda **kw: [ep] if kw.get("group") == "routerlab.protocols" else [])
    assert "first-actor" in protocol_names()
    result = run_protocol("first-actor", table, {"actor": 2})
    assert result.records[0].value == pytest.approx(float(np.nanmean(table.score[:, 2])))
    with pytest.raises(UsageError, match=r"^actor: must be an integer >= 0, got -1$"):
        run_protocol("first-actor", table, {"actor": -1})
    assert main(["protocols", "--json"]) == 0
    listed = {d["name"]: d for d in json.loads(capsys.readouterr().out)}
    assert listed["first-actor"]["settings"][0]["name"] == "actor" and not listed["first-actor"]["uses_routers"]


def test_protocols_json_lists_each_protocol_with_its_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["protocols", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert isinstance(listed, list) and all("name" in d and "settings" in d for d in listed)
    names = [d["name"] for d in listed]
    assert {"full", "cold-start", "voyager"} <= set(names) and names == sorted(names)
    voy = next(d for d in listed if d["name"] == "voyager")
    assert {s["name"] for s in voy["settings"]} >= {"rounds", "order", "split", "encoder", "n_boot"}
    assert main(["protocols"]) == 0
    assert "rounds" in capsys.readouterr().out
