"""``routerlab log``: writes a log that read_logs and ``routerlab import long`` read back; bad options exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from routerlab.cli import main
from routerlab.data.logs import read_logs
from routerlab.data.store import load
from routerlab.datasets import demo

N = 240


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tables") / "demo"
    demo(N, seed=4).save(path)
    return path


@pytest.mark.parametrize("ext", ["csv", "jsonl", "parquet"])
def test_log_round_trip_and_import(table_dir: Path, tmp_path: Path, ext: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / f"logs.{ext}"
    assert main(["log", str(table_dir), "--policy", "eps-greedy:knn:k=5:0.2", "--seed", "3", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    table = load(table_dir)
    n_train = int((table.queries.split == "train").sum())
    assert f"logged {n_train} train queries" in text and "min propensity 0.025" in text
    assert f"wrote {out}\n" in text and f"wrote {tmp_path / f'logs.actors.{ext}'}" in text
    logs = read_logs(out, table=table)
    assert logs.n == n_train and logs.table.actor_names == table.actor_names
    assert set(np.unique(logs.propensity).round(6)) <= {0.025, round(0.8 + 0.025, 6)}
    rows = np.flatnonzero(table.queries.split == "train")
    np.testing.assert_array_equal(logs.table.score[np.arange(n_train), logs.actor], table.score[rows, logs.actor])
    assert sorted(logs.rewards) == ["acc_at_1_l", "dcg", "l_dcg"]
    # the same seed writes the same log
    again = tmp_path / f"again.{ext}"
    assert main(["log", str(table_dir), "--policy", "eps-greedy:knn:k=5:0.2", "--seed", "3", "-o", str(again)]) == 0
    np.testing.assert_array_equal(read_logs(again, table=table).actor, logs.actor)
    # a log file is a long file: it imports as a table
    capsys.readouterr()
    assert main(["import", "long", str(out), str(tmp_path / f"logs.actors.{ext}"), "-o", str(tmp_path / "t")]) == 0
    imported = load(tmp_path / "t")
    assert imported.actor_names == table.actor_names and imported.n_queries == n_train
    np.testing.assert_array_equal(imported.score, logs.table.score)


def test_log_json_and_parts(table_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "all.jsonl"
    assert main(["log", str(table_dir), "--part", "all", "--json", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    assert record["n_logged"] == N and record["part"] == "all" and record["logging"] == {"policy": "uniform",
                                                                                         "spec": "uniform"}
    assert record["min_propensity"] == pytest.approx(1 / 8) and abs(sum(record["shares"].values()) - 1) < 1e-9
    assert record["data"]["n_queries"] == N and record["seed"] == 0
    assert f"wrote {out}" in captured.err
    assert main(["log", str(table_dir), "--part", "test", "--policy", "router:oracle", "--json",
                 "-o", str(tmp_path / "t.csv")]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["n_logged"] == int((load(table_dir).queries.split == "test").sum())
    assert record["min_propensity"] == 1.0 and record["logging"]["router"] == "oracle"


def test_demo_when_no_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "d.parquet"
    assert main(["log", "-o", str(out)]) == 0
    assert "of demo(seed=0)" in capsys.readouterr().out
    assert read_logs(out).n == int((demo().queries.split == "train").sum())


@pytest.mark.parametrize("args,needle", [
    (["--seed", "-1"], "--seed"),
    (["--part", "val"], "--part must be one of train, test, all, got 'val'"),
    (["--policy", "greedy"], "unknown logging policy 'greedy'"),
    (["--policy", "eps-greedy:knn:1.5"], "EPS 1.5 is out of range"),
    (["--policy", "softmax:knn:0"], "T 0 is out of range"),
    (["--policy", "router:nope"], "unknown router 'nope'"),
    (["--split", "halves"], "unknown split 'halves'"),
])
def test_bad_options_are_one_line(table_dir: Path, tmp_path: Path, args: list[str], needle: str,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "l.csv"
    assert main(["log", str(table_dir), *args, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def test_bad_output_paths_before_loading(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing_table = str(tmp_path / "no-such-table")  # never opened: -o is refused first
    (tmp_path / "file.csv").write_text("x")
    (tmp_path / "adir.csv").mkdir()
    cases = [
        (tmp_path, "is a directory"),
        (tmp_path / "adir.csv", "is a directory"),
        (tmp_path / "logs.txt", "a log file name ends in .csv, .jsonl, .parquet"),
        (tmp_path / "file.csv" / "l.csv", "which is a file"),
    ]
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        cases.append((locked / "l.csv", "cannot write there"))
    for path, needle in cases:
        assert main(["log", missing_table, "-o", str(path)]) == 2
        err = capsys.readouterr().err
        assert needle in err and str(path) in err and len(err.strip().splitlines()) == 1
    assert main(["log", str(tmp_path / "t")]) == 2
    assert "Missing option '-o'" in capsys.readouterr().err
