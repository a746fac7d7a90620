"""The registered protocol ``two-model``: the same numbers as ``run_two_model``, its records and slices, the
per-query artifact, the settings' checks with one message body from Python, a TOML-style mapping and the CLI,
and the pair a table designates."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab import RoutingTable
from routerlab.cli import main
from routerlab.errors import UsageError
from routerlab.metrics.curves import router_auroc
from routerlab.protocols.base import Result, SettingError, get_protocol, protocol_names, run_protocol
from routerlab.protocols.two_model import BOOT_METRICS, METRICS, TwoModelResult, TwoModelSettings, run_two_model
from routerlab.reports.files import dumps
from tests.protocols.test_two_model import synthetic

ROUTERS = ["oracle", "best-single", "knn:k=5", "random"]
SETTINGS = {"small": "S", "large": "L", "ood_datasets": ["c"], "split": "given", "n_boot": 50}


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERLAB_PROGRESS", "0")


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return synthetic()


@pytest.fixture(scope="module")
def result(table: RoutingTable) -> Result:
    return run_protocol("two-model", table, {**SETTINGS, "compare_to": "best-single"}, seed=1, routers=ROUTERS)


def _strip(d: dict[str, Any]) -> dict[str, Any]:
    return {**d, "results": [{k: v for k, v in r.items() if k != "fit_seconds"} for r in d["results"]]}


def test_registered_and_described() -> None:
    assert "two-model" in protocol_names()
    proto = get_protocol("two-model")
    described = {s["name"]: s for s in proto.describe()["settings"]}
    assert list(described) == ["small", "large", "features", "id_datasets", "ood_datasets", "split", "encoder",
                               "n_boot", "convention", "lpm_band", "rp_band", "compare_to", "dev", "call_rate",
                               "train_sizes"]
    assert described["n_boot"]["option"] == "--boot" and described["n_boot"]["default"] == 1000
    assert described["id_datasets"]["option"] == "--id" and described["id_datasets"]["type"] == "list of str or none"
    assert described["lpm_band"] == {**described["lpm_band"], "type": "pair of float", "default": [0.25, 0.30]}
    assert described["split"]["default"] == "random:0.2" and proto.uses_routers
    json.dumps(proto.describe())  # JSON-ready


def test_same_numbers_as_the_function(table: RoutingTable, result: Result) -> None:
    direct = run_two_model(table, "S", "L", ROUTERS, ood_datasets=["c"], split="given", n_boot=50, seed=1,
                           compare_to="best-single")
    assert isinstance(result.native, TwoModelResult)
    assert _strip(result.native.to_dict()) == _strip(direct.to_dict())
    assert result.protocol == "two-model" and result.settings.to_dict()["ood_datasets"] == ["c"]
    assert result.n_train == int(((table.queries.split == "train") & (table.queries.dataset != "c")).sum()) - 2
    assert result.n_test == sum(d["n"] for d in direct.results[0].datasets.values())
    assert result.notes == ["2 queries dropped: 'S' or 'L' has no score on them"]


def test_records_and_slices(result: Result) -> None:
    native: TwoModelResult = result.native
    slices = ["dataset=a", "dataset=b", "domain=id", "dataset=c", "domain=ood"]
    for r in native.results:
        mine = result.select(router=r.spec)
        assert list(dict.fromkeys(x.slice for x in mine)) == slices  # ID datasets, their mean, OOD, their mean
        for where, cell in [("dataset=a", r.datasets["a"]), ("domain=id", r.id_mean), ("domain=ood", r.ood_mean)]:
            assert cell is not None
            for m in METRICS:
                (rec,) = result.select(r.spec, m, where)
                assert rec.value == pytest.approx(cell[m], nan_ok=True)
                if m in BOOT_METRICS:
                    assert (rec.ci_low, rec.ci_high) == pytest.approx(tuple(cell[f"{m}_ci"]), nan_ok=True)
                else:
                    assert rec.ci_low is None and rec.ci_high is None
        diffs = {x.metric for x in mine if x.metric.endswith("_diff")}
        assert diffs == (set() if r.spec == "best-single" else {f"{m}_diff" for m in BOOT_METRICS})
    assert not result.select(slice="")  # per dataset and per domain only: the run has no pooled number
    # the oracle's AUROC is 1 and the constant best-single's 0.5 on every query set: 0.5 apart in every resample
    (diff,) = result.select("oracle", "auroc_diff", "domain=ood")
    assert (diff.value, diff.ci_low, diff.ci_high) == (0.5, 0.5, 0.5)
    assert result.value("oracle", "auroc", "dataset=c") == 1.0
    json.dumps(result.to_dict(), allow_nan=False)  # strict JSON: NaN written as None


def test_per_query_artifact_gives_the_metrics_and_decisions(table: RoutingTable, result: Result) -> None:
    per = result.artifacts["per_query"]
    native: TwoModelResult = result.native
    assert len(per.ids) == result.n_test == per.small.size and set(per.scores) == set(ROUTERS)
    for spec in ROUTERS:
        for name in ("a", "b", "c"):
            rows = np.asarray(per.datasets) == name
            auroc = router_auroc(per.scores[spec][rows], per.small[rows], per.large[rows])
            assert auroc == pytest.approx(native.result(spec).datasets[name]["auroc"], nan_ok=True)
    choices, got, stats = per.at_call_rate(0.3, n_boot=50, seed=0)
    k = round(0.3 * len(per.ids))
    for spec, choice in choices.items():
        assert choice.sum() == k and np.mean(got[spec]) == pytest.approx(stats[spec]["phi"])
    # the oracle escalates first where the large model is right and the small one wrong
    oracle = choices["oracle"] == 1
    assert ((per.large - per.small)[oracle] >= (per.large - per.small)[~oracle].max()).all()
    assert set(result.artifacts["curves"]) == set(ROUTERS)


CASES = [  # setting, Python value, TOML value, CLI option and text, the message body
    ("lpm_band", (0.3, 0.2), [0.3, 0.2], "--lpm-band", "0.3,0.2", "must have LO <= HI, got 0.3,0.2"),
    ("rp_band", (0.8, 2.0), [0.8, 2], "--rp-band", "0.8,2", "must be two numbers in [0, 1], got 0.8,2"),
    ("convention", "routellm", "routellm", "--convention", "routellm",
     "must be one of routerlab, routerxbench, got 'routellm' (RouteLLM's 11 threshold points have no call-rate "
     "grid for LPM, MPM and HCR)"),
    ("split", "ood:a", "ood:a", "--split", "ood:a",
     "'ood:...' does not apply here: name out-of-domain datasets with ood_datasets (--ood D1,D2); the split "
     "divides the in-domain queries (given, random[:F])"),
    ("n_boot", 10, 10, "--boot", "10", "must be an integer in [40, 1,000,000], got 10"),
    ("features", "/nonexistent/s.npz", "/nonexistent/s.npz", "--features", "/nonexistent/s.npz",
     "no such directory or file: /nonexistent/s.npz"),
]


@pytest.mark.parametrize(("name", "python", "toml", "option", "text", "body"), CASES)
def test_checks_say_the_same_from_every_source(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                               python: Any, toml: Any, option: str, text: str, body: str) -> None:
    with pytest.raises(SettingError) as exc:
        TwoModelSettings(**{name: python})
    assert str(exc.value) == f"{name}: {body}"
    with pytest.raises(UsageError) as exc2:
        TwoModelSettings.from_mapping({name: toml}, where=lambda key: f"exp.toml: protocols[4].{key}")
    assert str(exc2.value) == f"exp.toml: protocols[4].{name}: {body}"
    with pytest.raises(UsageError) as exc3:
        TwoModelSettings.from_cli(**{name: text})
    assert str(exc3.value) == f"{option}: {body}"
    argv = ["two-model", str(tmp_path / "none"), "--small", "S", "--large", "L", "--routers", "knn", option, text]
    assert main(argv) == 2  # refused before the (missing) table is read
    assert capsys.readouterr().err.strip() == f"routerlab: error: {option}: {body}"


@pytest.mark.parametrize(("values", "message"), [
    ({"small": "S"}, "large: must be given with small: the pair is a small and a large actor"),
    ({"large": "L"}, "small: must be given with large: the pair is a small and a large actor"),
    ({"small": "S", "large": "S"}, "large: the small and the large model are both 'S'; name two different actors"),
    ({"id_datasets": ["a"], "ood_datasets": "b,a"}, "ood_datasets: dataset 'a' is named both in-domain and "
                                                    "out-of-domain"),
    ({"ood_datasets": ["c", "c"]}, "ood_datasets: lists 'c' twice"),
    ({"lpm_band": "0.3"}, "lpm_band: needs two numbers LO,HI in [0, 1], got '0.3'"),
    ({"lpm_band": True}, "lpm_band: must be two numbers LO,HI in [0, 1], got True"),
    ({"nboot": 100}, "nboot: not a setting of protocol two-model; did you mean 'n_boot'?"),
])
def test_joint_rules_and_shapes(values: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError) as exc:
        TwoModelSettings.from_mapping(values)
    assert str(exc.value) == message


def test_values_from_every_source_agree() -> None:
    from_text = TwoModelSettings.from_cli(lpm_band="0.3,0.3", ood_datasets="c", n_boot="200", split="given")
    from_toml = TwoModelSettings.from_mapping({"lpm_band": [0.3, 0.3], "ood_datasets": ["c"], "n_boot": 200,
                                               "split": "given"})
    assert from_text == from_toml and from_text.lpm_band == (0.3, 0.3)  # LO = HI: a one-point band
    assert from_text.ood_datasets == ("c",) and from_text.changed() == {
        "ood_datasets": ["c"], "split": "given", "n_boot": 200, "lpm_band": [0.3, 0.3]}
    assert TwoModelSettings().lpm_band == (0.25, 0.30) and TwoModelSettings().small is None


def test_the_pair_a_table_designates(table: RoutingTable, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    designated = dataclasses.replace(table, meta={**table.meta, "two_model": {"small": "S", "large": "L"}})
    settings = {k: v for k, v in SETTINGS.items() if k not in ("small", "large")}
    res = run_protocol("two-model", designated, settings, seed=1, routers=["best-single", "knn:k=5"])
    assert res.settings.to_dict()["small"] == "S" and res.settings.to_dict()["large"] == "L"
    named = run_protocol("two-model", table, SETTINGS, seed=1, routers=["best-single", "knn:k=5"])
    assert _strip(res.native.to_dict())["results"] == _strip(named.native.to_dict())["results"]
    with pytest.raises(UsageError, match=r"^name the small and the large model \(small and large, --small A "
                                         r"--large B\): table 'table' designates no pair"):
        run_protocol("two-model", table, settings, seed=1, routers=["best-single"])
    # the command takes the designated pair too, and prints the same JSON plus protocol, settings and records
    designated.save(tmp_path / "t")
    argv = ["two-model", str(tmp_path / "t"), "--routers", "best-single,knn:k=5", "--ood", "c", "--split", "given",
            "--boot", "50", "--seed", "1", "--json"]
    assert main(argv) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["small"] == "S" and record["protocol"] == "two-model" and record["settings"]["large"] == "L"
    assert _strip(record)["results"] == json.loads(dumps(_strip(named.native.to_dict())["results"]))
    assert len(record["records"]) == len(named.records)
