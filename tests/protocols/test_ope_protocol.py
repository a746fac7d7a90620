"""The registered ``ope`` protocol: the numbers of ``off_policy_evaluate`` and of ``routerlab ope``, its records
(one per router x metric x estimator, the truth, the weight diagnostics), a log simulated from ``logging`` when no
log file is named (seeded: the log ``routerlab log --part test`` writes), and its settings' checks, with the same
message from Python, a TOML table and the command line."""

from __future__ import annotations

import json
import math
import tomllib
import warnings
from pathlib import Path
from typing import Any

import pytest

from routerlab.cli import main
from routerlab.data.logs import read_logs, write_logs
from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.protocols.base import get_protocol, run_protocol
from routerlab.protocols.ope import OffPolicyWarning, OPESettings, off_policy_evaluate
from routerlab.protocols.policies import simulate_logs

ENC = "tfidf:dim=32"
SMALL = {"encoder": ENC, "n_boot": 60}
ROUTERS = ["best-single", "knn:k=5"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A saved demo table and an eps-greedy log of its test split, written as 'routerlab log' writes it."""
    root = tmp_path_factory.mktemp("ope-protocol")
    table = demo(400, seed=5)
    table.save(root / "table")
    log, _ = write_logs(simulate_logs(table, "eps-greedy:best-single:0.3", part="test", seed=2, encoder=ENC),
                        root / "eps.csv")
    return {"table": table, "dir": root / "table", "log": log}


def quiet_run(*args: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OffPolicyWarning)
        return run_protocol(*args, **kwargs)


def test_run_gives_off_policy_evaluate_s_and_the_command_s_numbers(files: dict[str, Any],
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    table: RoutingTable = files["table"]
    result = quiet_run("ope", table, {"logs": str(files["log"]), "interval": "normal", **SMALL}, 4, ROUTERS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OffPolicyWarning)
        direct = off_policy_evaluate(table, read_logs(files["log"], table), ROUTERS, encoder=ENC, n_boot=60,
                                     seed=4, interval_method="normal")
    assert result.protocol == "ope" and result.n_test == direct.n_logged > 0
    assert result.n_train == direct.training["n_train"]
    for mine, theirs in zip(result.native.results, direct.results, strict=True):
        assert mine.estimates == theirs.estimates and mine.truth == theirs.truth
        assert mine.diagnostics == theirs.diagnostics
    assert main(["ope", str(files["dir"]), str(files["log"]), "--routers", ",".join(ROUTERS), "--seed", "4",
                 "--interval", "normal", "--encoder", ENC, "--n-boot", "60", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["protocol"] == "ope" and record["settings"] == result.settings.to_dict()
    assert record["records"] == [r.to_dict() for r in result.records]
    assert record["results"][0]["estimates"] == json.loads(json.dumps(direct.to_dict()))["results"][0]["estimates"]


def test_records_are_router_x_metric_x_estimator_then_truth_and_weights(files: dict[str, Any]) -> None:
    result = quiet_run("ope", files["table"], {"logs": [str(files["log"])], **SMALL}, 0, ROUTERS)
    res = result.native
    assert res.metrics == ["mu_o", "acc_at_1_l", "dcg", "l_dcg", "mean_cost", "mean_latency"]
    for r in res.results:
        for est in ("ips", "snips", "dr"):
            for metric in res.metrics:
                (rec,) = result.select(r.spec, metric, f"estimator={est}")
                v, lo, hi = r.estimates[est][metric]
                assert rec.value == v
                assert (rec.ci_low, rec.ci_high) == ((None, None) if math.isnan(lo) else (lo, hi))
        assert r.truth is not None and set(r.truth) == set(res.metrics)
        for metric, value in r.truth.items():  # the truth is the whole logged set's own number: no interval
            (rec,) = result.select(r.spec, metric, "")
            assert (rec.value, rec.ci_low, rec.ci_high) == (value, None, None)
        d = r.diagnostics
        assert [result.value(r.spec, k) for k in ("ess", "n_agree", "max_weight", "min_propensity")] == [
            d.ess, d.n_agree, d.max_weight, d.min_propensity]
    n_metrics = len(res.metrics)
    assert len(result.records) == len(ROUTERS) * (3 * n_metrics + n_metrics + 4)
    assert {r.slice for r in result.records} == {"", "estimator=ips", "estimator=snips", "estimator=dr"}
    # the eps-greedy log's smallest propensity is 0.3 / 8: best-single agrees with most of it
    assert result.value("best-single", "min_propensity") == pytest.approx(0.3 / 8)
    assert result.value("best-single", "n_agree") > result.value("knn:k=5", "n_agree") / 2


def test_without_logs_the_test_part_s_log_is_simulated_from_logging_by_seed(files: dict[str, Any]) -> None:
    """No log file: the protocol draws the test part's log with ``logging`` and the run's seed, which is the log
    simulate_logs (and 'routerlab log --part test --seed S') gives, so the numbers are those of that log; the same
    seed gives the same numbers, another seed another log."""
    table: RoutingTable = files["table"]
    settings = {"logging": "softmax:best-single:0.5", **SMALL}
    a = quiet_run("ope", table, settings, 7, ["knn:k=5"])
    b = quiet_run("ope", table, settings, 7, ["knn:k=5"])
    c = quiet_run("ope", table, settings, 8, ["knn:k=5"])
    assert a.records == b.records and a.records != c.records
    assert a.native.logs["policy"] == "softmax:best-single:0.5"
    assert a.native.logs["content_hash"] == b.native.logs["content_hash"] != c.native.logs["content_hash"]
    logs = simulate_logs(table, "softmax:best-single:0.5", part="test", seed=7, encoder=ENC)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OffPolicyWarning)
        direct = off_policy_evaluate(table, logs, ["knn:k=5"], encoder=ENC, n_boot=60, seed=7)
    assert a.native.results[0].estimates == direct.results[0].estimates
    assert a.native.n_logged == int((table.queries.split == "test").sum())
    assert a.native.training == {"feedback": "full", "n_train": int((table.queries.split == "train").sum()),
                                 "left_out_logged_queries": 0}
    # the default: a uniform log
    u = quiet_run("ope", table, SMALL, 7, ["knn:k=5"])
    assert u.native.logs["policy"] == "uniform" and u.settings.logging == "uniform"


@pytest.mark.parametrize("values,message", [
    ({"interval": "bca"}, "interval: must be one of bootstrap, normal, got 'bca'"),
    ({"reward_model": "forest"}, "reward_model: must be one of mean, ridge, got 'forest'"),
    ({"estimators": "ips,ipw"}, "estimators: unknown estimator 'ipw'; estimators are ips, snips, dr"),
    ({"estimators": ["dr", "dr"]}, "estimators: lists 'dr' twice"),
    ({"logs": "/nonexistent/l.csv"}, "logs: /nonexistent/l.csv: no such log file"),
    ({"train_logs": ["/nonexistent/t.csv"]}, "train_logs: /nonexistent/t.csv: no such log file"),
    ({"logging": "greedy"}, "logging: unknown logging policy 'greedy'"),
    ({"split": "all"}, "split: 'all' leaves no test part to simulate a log of"),
    ({"split": "sideways"}, "split: unknown split 'sideways'"),
    ({"n_boot": 10}, "n_boot: must be an integer in [40, "),
    ({"estimator": "dr"}, "estimator: not a setting of protocol ope; did you mean 'estimators'?"),
])
def test_a_bad_setting_is_one_line_from_python_toml_and_the_command_line(values: dict[str, Any], message: str
                                                                        ) -> None:
    key = next(iter(values))
    value = values[key]
    toml_value = json.dumps(value)  # a JSON string or array of strings is also TOML
    from_toml = tomllib.loads(f"{key} = {toml_value}")
    for source in (values, from_toml):
        with pytest.raises(UsageError) as err:
            OPESettings.from_mapping(source)
        assert str(err.value).startswith(message), str(err.value)
    with pytest.raises(UsageError) as err:
        run_protocol("ope", demo(60), values, 0, ["knn"])
    assert str(err.value).startswith(message)
    if key in OPESettings.names():
        option = {"logs": "LOGS"}.get(key, "--" + key.replace("_", "-"))
        with pytest.raises(UsageError) as err:
            OPESettings.from_cli(**values)
        assert str(err.value).startswith(message.replace(f"{key}:", f"{option}:", 1)), str(err.value)


def test_logging_with_log_files_is_refused_and_a_bound_is_left_out_or_refused(files: dict[str, Any]) -> None:
    with pytest.raises(UsageError, match=r"^logging: draws a simulated log, and log files are named"):
        OPESettings(logs=(str(files["log"]),), logging="softmax:knn:0.5")
    with pytest.raises(UsageError, match="'oracle' is a bound"):
        run_protocol("ope", files["table"], SMALL, 0, ["oracle"])
    # beside other routers (as an experiment runs them), a bound is left out and listed
    result = quiet_run("ope", files["table"], SMALL, 0, ["oracle", "best-single"])
    assert set(result.skipped) == {"oracle"} and "cannot be evaluated off-policy" in result.skipped["oracle"]
    assert {r.router for r in result.records} == {"best-single"}
    with pytest.raises(UsageError, match="needs at least one router"):
        run_protocol("ope", files["table"], SMALL, 0, [])


def test_described_settings_name_the_command_s_options() -> None:
    rows = {d["name"]: d for d in get_protocol("ope").describe()["settings"]}
    assert list(rows) == ["logs", "logging", "estimators", "interval", "train_logs", "reward_model", "encoder",
                          "split", "n_boot"]
    assert rows["logs"]["option"] == "LOGS" and rows["train_logs"]["option"] == "--train-logs"
    assert rows["estimators"]["default"] == ["ips", "snips", "dr"] and rows["logging"]["default"] == "uniform"
    assert all(d["help"] for d in rows.values())


def test_the_command_s_help_reads_the_settings() -> None:
    import typer

    from routerlab.cli import _register_commands, app

    _register_commands()
    command = typer.main.get_command(app).commands["ope"]  # type: ignore[attr-defined]
    helps = {p.name: p.help for p in command.params}
    assert helps["estimators"] == "Estimators: ips, snips, dr (default: ips,snips,dr)."
    assert helps["logging"].startswith("Without logs: the logging policy") and "(default: uniform)" in helps["logging"]
    assert helps["n_boot"].startswith(OPESettings.help("n_boot")[:1].upper() + OPESettings.help("n_boot")[1:])


def test_a_log_read_from_a_path_object_or_text_is_the_same(files: dict[str, Any], tmp_path: Path) -> None:
    s1 = OPESettings(logs=str(files["log"]))
    s2 = OPESettings.from_mapping({"logs": [str(files["log"])]})
    assert s1 == s2 and s1.logs == (str(files["log"]),)
