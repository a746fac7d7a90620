"""``--dev F`` on ``routerlab evaluate --protocol voyager`` and ``routerlab two-model`` (issue 23): bad values are one
line and exit 2; a good one puts the development facts, the checkpoints (Voyager) and the operating point
(two-model) in the JSON; an experiment file reaches the setting as ``dev = F``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routerlab.cli import main
from routerlab.datasets import demo
from routerlab.experiments.runner import run_experiment
from routerlab.experiments.schema import load_experiment
from routerlab.experiments.store import query
from tests.protocols.test_two_model import synthetic


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERLAB_PROGRESS", "0")


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("cli-dev") / "demo"
    demo(n_queries=200, seed=0).save(path)
    return str(path)


@pytest.fixture(scope="module")
def pair_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("cli-dev") / "pair"
    synthetic().save(path)
    return str(path)


VOYAGER = ["--protocol", "voyager", "--rounds", "2", "--routers", "best-single,knn", "--n-boot", "40"]
TWO = ["--small", "S", "--large", "L", "--routers", "oracle,best-single,knn:k=5", "--ood", "c", "--split", "given",
       "--boot", "40"]
BAD_DEV = [("x", "--dev: must be a number, got a string ('x')"),
           ("0", "--dev: the dev fraction must be in (0, 1), got 0.0"),
           ("1", "--dev: the dev fraction must be in (0, 1), got 1.0"),
           ("-1", "--dev: the dev fraction must be in (0, 1), got -1.0"),
           ("nan", "--dev: the dev fraction must be in (0, 1), got nan")]


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("routerlab: error: "), err
    return err[0]


@pytest.mark.parametrize("value,needle", BAD_DEV, ids=[v for v, _ in BAD_DEV])
def test_bad_dev_is_one_line_exit_2_before_loading(value: str, needle: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "no-such-table")  # checked before the table is opened
    assert main(["evaluate", missing, *VOYAGER, "--dev", value]) == 2
    assert needle in _one_line(capsys)
    assert main(["two-model", missing, *TWO, "--dev", value]) == 2
    assert needle in _one_line(capsys)


def test_other_misuse_is_one_line(demo_dir: str, pair_dir: str, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "no-such-table")
    assert main(["evaluate", missing, "--routers", "knn", "--protocol", "cold-start", "--dev", "0.2"]) == 2
    assert "--dev: applies to protocol" in _one_line(capsys)
    assert main(["two-model", missing, *TWO, "--call-rate", "0.3"]) == 2
    assert "--call-rate: needs dev" in _one_line(capsys)
    assert main(["two-model", missing, *TWO, "--dev", "0.2", "--call-rate", "1.5"]) == 2
    assert "--call-rate: must be a number in [0, 1], got 1.5" in _one_line(capsys)
    # too small a fraction for the table: one line, after loading
    assert main(["evaluate", demo_dir, *VOYAGER, "--dev", "0.001"]) == 2
    assert "leaves no development queries" in _one_line(capsys)
    assert main(["two-model", pair_dir, *TWO, "--dev", "0.001"]) == 2
    assert "leaves no development queries" in _one_line(capsys)


def test_voyager_dev_json_and_text(demo_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", demo_dir, *VOYAGER, "--dev", "0.25", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["settings"]["dev"] == 0.25 and d["split"]["dev_fraction"] == 0.25 and d["split"]["n_dev"] > 0
    assert d["voyager"]["dev"]["n_dev"] == d["split"]["n_dev"]
    for rd in d["rounds"]:
        for r in rd["results"]:
            assert 1 <= r["checkpoint"]["round"] <= rd["round"]
            assert len(r["checkpoint"]["dev_mu_o_by_round"]) == rd["round"]
    slices = {(r["router"], r["slice"]) for r in d["records"] if r["metric"] == "checkpoint_round"}
    assert slices == {(s, w) for s in ("best-single", "knn") for w in ("round=1", "round=2", "")}
    assert main(["evaluate", demo_dir, *VOYAGER, "--dev", "0.25"]) == 0
    assert "Checkpoint deployed per round" in capsys.readouterr().out


def test_two_model_dev_json_and_text(pair_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["two-model", pair_dir, *TWO, "--dev", "0.25", "--call-rate", "0.4", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["settings"]["dev"] == 0.25 and d["settings"]["call_rate"] == 0.4 and d["split"]["n_dev"] > 0
    op = next(r for r in d["results"] if r["router"] == "knn:k=5")["operating_point"]
    assert op["target_rate"] == 0.4 and op["n_fit"] == d["split"]["n_dev"]
    assert {"threshold", "tie_share", "dev_call_rate", "domains", "datasets"} <= set(op)
    assert 0.0 <= op["domains"]["id"]["call_rate"] <= 1.0
    metrics = {r["metric"] for r in d["records"] if r["router"] == "knn:k=5"}
    assert {"call_rate", "phi_at_call_rate"} <= metrics
    assert main(["two-model", pair_dir, *TWO, "--dev", "0.25"]) == 0
    out = capsys.readouterr().out
    assert "Call rate 0.3 with its threshold fixed on" in out and "ID rate" in out


def test_experiment_file_reaches_dev(tmp_path: Path) -> None:
    path = tmp_path / "v.toml"
    path.write_text("""name = "v"
routers = ["best-single", "knn"]
seeds = [3]
protocols = [{ name = "voyager", rounds = 2 }]
[settings]
n_boot = 40
[[tables]]
path = "demo"
n_queries = 200
dev = 0.2
""", encoding="utf-8")
    store = tmp_path / "store"
    run_experiment(load_experiment(path), store)
    settings = query(store, "SELECT DISTINCT settings FROM cells")[1]
    assert [json.loads(s[0])["dev"] for s in settings] == [0.2]
    rows = query(store, "SELECT DISTINCT metric FROM results WHERE protocol = 'voyager'")[1]
    assert {"checkpoint_round", "dev_mu_o"} <= {r[0] for r in rows}
