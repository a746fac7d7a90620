"""``routerlab ope`` end to end on the demo: JSON in the style of evaluate, the text table, -o, warnings on stderr,
and every bad input as one line with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routerlab.cli import main
from routerlab.data.logs import write_logs
from routerlab.data.longformat import write_long
from routerlab.datasets import demo
from routerlab.protocols.policies import simulate_logs

ENC = ["--encoder", "tfidf:dim=32", "--n-boot", "100"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A saved demo table, a uniform log of its test split, a log of its train split and a propensity-less file."""
    root = tmp_path_factory.mktemp("ope")
    table = demo(500, seed=3)
    table.save(root / "table")
    test_log, _ = write_logs(simulate_logs(table, "uniform", part="test", seed=1), root / "test.csv")
    train_log, _ = write_logs(simulate_logs(table, "uniform", part="train", seed=2), root / "train.jsonl")
    write_long(table.select_queries(table.queries.split == "test"), root / "plain.csv")
    return {"table": root / "table", "logs": test_log, "train": train_log, "plain": root / "plain.csv"}


def test_json_record(files: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "o"
    code = main(["ope", str(files["table"]), str(files["logs"]), "--routers", "best-single,knn", "--json",
                 "-o", str(out), "--seed", "4", *ENC])
    assert code == 0
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    assert list(record)[:3] == ["routerlab_version", "data", "split"]
    assert record["seed"] == 4 and record["routers"] == ["best-single", "knn"]
    assert record["n_logged"] == record["logs"]["n_logged"] > 0
    assert record["metrics"] == ["mu_o", "acc_at_1_l", "dcg", "l_dcg", "mean_cost", "mean_latency"]
    assert record["interval"] == {"method": "bootstrap", "kind": "percentile over logged queries", "level": 0.95,
                                  "n_boot": 100, "seed": 4}
    for res in record["results"]:
        assert set(res["estimates"]) == {"ips", "snips", "dr"}
        cell = res["estimates"]["dr"]["mu_o"]
        assert cell["ci"][0] <= cell["value"] <= cell["ci"][1]
        assert set(res["truth"]) == set(record["metrics"])
        assert res["diagnostics"]["ess"] > 0
    assert json.loads((out / "ope.json").read_text()) == record
    # the protocol layer's keys: the settings as checked and one record per router x metric x estimator + truth
    assert record["protocol"] == "ope" and record["settings"]["n_boot"] == 100
    assert record["settings"]["logs"] == [str(files["logs"])]
    dr = {(r["router"], r["metric"]): r for r in record["records"] if r["slice"] == "estimator=dr"}
    for res in record["results"]:
        cell = res["estimates"]["dr"]["mu_o"]
        assert dr[(res["router"], "mu_o")]["value"] == cell["value"]
        assert [dr[(res["router"], "mu_o")]["ci_low"], dr[(res["router"], "mu_o")]["ci_high"]] == cell["ci"]
    assert f"wrote {out / 'ope.json'}" in captured.err


def test_text_table_and_options(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["ope", str(files["table"]), str(files["logs"]), "--routers", "knn", "--estimators", "ips,dr",
                 "--interval", "normal", "--reward-model", "mean", *ENC])
    assert code == 0
    out = capsys.readouterr().out
    assert "knn  (argmax; agrees with the log on" in out and "ESS" in out
    header = next(line for line in out.splitlines() if line.strip().startswith("metric"))
    assert header.split() == ["metric", "IPS", "DR", "truth"]
    assert "intervals: 95% normal" in out
    assert any(line.strip().startswith("mean_latency") for line in out.splitlines())


def test_training_on_logs_and_warnings_on_stderr(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["ope", str(files["table"]), str(files["logs"]), "--routers", "best-single", "--json",
                 "--train-logs", str(files["train"]), *ENC])
    assert code == 0
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    assert record["training"]["feedback"] == "logged" and record["split"]["kind"] == "logs"
    # training on every query of the table: the logged ones are left out, with a warning on stderr
    code = main(["ope", str(files["table"]), str(files["logs"]), "--routers", "best-single", "--json",
                 "--split", "all", *ENC])
    assert code == 0
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    n_logged = record["n_logged"]
    assert record["training"] == {"feedback": "full", "n_train": 500 - n_logged, "left_out_logged_queries": n_logged}
    assert f"routerlab: warning: {n_logged} logged queries are also in the training split" in captured.err
    assert record["warnings"][0].startswith(f"{n_logged} logged queries are also in the training split")
    # evaluating the training log itself: every training query is logged
    code = main(["ope", str(files["table"]), str(files["train"]), "--routers", "best-single", *ENC])
    assert code == 2
    assert "every one of the" in capsys.readouterr().err


@pytest.mark.parametrize("args,needle", [
    (["--estimators", "ips,ipw"], "unknown estimator 'ipw'"),
    (["--estimators", ""], "--estimators: needs at least one value"),
    (["--estimators", "ips,ips"], "--estimators: lists 'ips' twice"),
    (["--interval", "bca"], "--interval: must be one of bootstrap, normal, got 'bca'"),
    (["--reward-model", "forest"], "--reward-model: must be one of mean, ridge, got 'forest'"),
    (["--split", "sideways"], "--split: unknown split 'sideways'"),
    (["--encoder", "nosuch"], "--encoder: unknown encoder 'nosuch'"),
    (["--logging", "softmax:knn:0.5"], "--logging: draws a simulated log, and log files are named"),
    (["--logging", "softmax:knn:0"], "--logging: logging policy 'softmax:knn:0': T 0 is out of range"),
    (["--routers", "knn,oracle"], "'oracle' is a bound"),
    (["--routers", "nosuch"], "nosuch"),
    (["--n-boot", "5"], "--n-boot"),
    (["--seed", "-1"], "--seed"),
])
def test_bad_options_are_one_line(files: dict[str, Path], capsys: pytest.CaptureFixture[str], args: list[str],
                                  needle: str) -> None:
    assert main(["ope", str(files["table"]), str(files["logs"]), *args]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and err.startswith("routerlab: error:")


def test_bad_files_are_one_line(files: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["ope", str(files["table"]), str(tmp_path / "missing.csv")]) == 2
    err = capsys.readouterr().err
    assert "missing.csv: no such log file" in err and err.count("\n") == 1
    assert main(["ope", str(files["table"]), str(files["plain"]), *ENC]) == 2
    err = capsys.readouterr().err
    assert "propensity" in err and str(files["plain"]) in err and err.count("\n") == 1
    assert main(["ope", str(tmp_path / "nope"), str(files["logs"])]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    (tmp_path / "file").write_text("x")
    assert main(["ope", str(files["table"]), str(files["logs"]), "-o", str(tmp_path / "file")]) == 2
    assert "is an existing file" in capsys.readouterr().err


def test_table_left_out_means_the_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Like every command, ope runs on the embedded demo when TABLE is left out: its first argument is then a log
    (here a log of the demo's test split); with nothing but a table it asks for the logs."""
    log, _ = write_logs(simulate_logs(demo(), "uniform", part="test", seed=5), tmp_path / "demo-test.csv")
    assert main(["ope", str(log), "--routers", "best-single", "--json", *ENC]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["data"]["name"] == "demo(seed=0)" and record["n_logged"] == 601
    assert record["results"][0]["truth"]["mu_o"] > 0


def test_without_logs_a_log_of_the_test_part_is_simulated(files: dict[str, Path], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """No LOGS: the command draws the test part's log with --logging (seeded), exactly the log that
    'routerlab log --part test' writes with the same seed, so the estimates are the same numbers."""
    log = tmp_path / "eps.csv"
    policy = "eps-greedy:best-single:0.2"
    assert main(["log", str(files["table"]), "--part", "test", "--policy", policy, "--seed", "3",
                 "--encoder", "tfidf:dim=32", "-o", str(log)]) == 0
    capsys.readouterr()
    args = ["--routers", "best-single,knn", "--json", "--seed", "3", *ENC]
    assert main(["ope", str(files["table"]), str(log), *args]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert main(["ope", str(files["table"]), "--logging", policy, *args]) == 0
    simulated = json.loads(capsys.readouterr().out)
    assert simulated["settings"]["logs"] is None and simulated["settings"]["logging"] == policy
    assert simulated["logs"]["policy"] == policy and from_file["n_logged"] == simulated["n_logged"] > 0
    for a, b in zip(from_file["results"], simulated["results"], strict=True):
        assert a["estimates"] == b["estimates"] and a["truth"] == b["truth"] and a["diagnostics"] == b["diagnostics"]
    assert from_file["records"] == simulated["records"]
    assert main(["ope", str(files["table"]), "--split", "all", *args]) == 2
    assert "--split: 'all' leaves no test part to simulate a log of" in capsys.readouterr().err
