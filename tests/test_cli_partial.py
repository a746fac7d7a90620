"""``routerlab evaluate --protocol cold-start|voyager``: output layout, files, and one-line errors (exit 2)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from routerlab.cli import main
from routerlab.datasets import demo


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("cli-partial") / "t"
    demo(n_queries=200, seed=0).save(path)
    return str(path)


FAST = ["--routers", "random,best-single,knn", "--n-boot", "40"]

BAD = [
    (["--protocol", "bandit"], "--protocol must be one of full, cold-start, voyager, got 'bandit'"),
    (["--logging", "uniform"], "--logging: applies to protocol cold-start and ope only, not to full"),
    (["--protocol", "voyager", "--logging", "uniform"],
     "--logging: applies to protocol cold-start and ope only, not to voyager"),
    (["--rounds", "3"], "--rounds: applies to protocol voyager only, not to full"),
    (["--protocol", "cold-start", "--rounds", "3"], "--rounds: applies to protocol voyager only, not to cold-start"),
    (["--protocol", "cold-start", "--order", "shuffle"],
     "--order: applies to protocol voyager only, not to cold-start"),
    (["--protocol", "voyager", "--rounds", "1"], "--rounds: must be an integer >= 2, got 1"),
    (["--protocol", "voyager", "--rounds", "-4"], "--rounds: must be an integer >= 2, got -4"),
    (["--protocol", "voyager", "--order", "sideways"], "--order: must be one of given, shuffle, got 'sideways'"),
    (["--protocol", "voyager", "--sweep", "cost"],
     "--sweep: applies to protocol cold-start and full only, not to voyager"),
    (["--protocol", "cold-start", "--logging", "nope"], "--logging: unknown logging policy 'nope'"),
    (["--protocol", "voyager", "--rounds", "many"], "Invalid value for '--rounds'"),
    (["--protocol", "cold-start", "--logging", "eps-greedy:knn:2"], "--logging: logging policy 'eps-greedy:knn:2'"),
]


@pytest.mark.parametrize("extra,needle", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_misuse_is_one_line_exit_2_before_loading(extra: list[str], needle: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "no-such-table")  # the options are checked before the table is opened
    assert main(["evaluate", missing, *FAST, *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("routerlab: error: ") and needle in err[0], err


def test_too_many_rounds_for_the_table_is_one_line(table_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", table_dir, *FAST, "--protocol", "voyager", "--rounds", "100000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "more rounds than the" in err[0] and "training queries" in err[0]


def test_output_checked_before_work(table_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "f"
    afile.write_text("x")
    assert main(["evaluate", table_dir, *FAST, "--protocol", "voyager", "-o", str(afile)]) == 2
    assert "is an existing file" in capsys.readouterr().err


def test_full_is_unchanged_by_the_new_options(table_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", table_dir, *FAST, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["evaluate", table_dir, *FAST, "--json", "--protocol", "full"]) == 0
    explicit = json.loads(capsys.readouterr().out)
    assert plain["protocol"] == "full" and "rounds" not in plain and "rounds" not in plain["settings"]
    # the protocol layer's records carry the same numbers as the per-router results
    mu = {r["router"]: r["value"] for r in plain["records"] if r["metric"] == "mu_o" and r["slice"] == ""}
    assert mu == {r["spec"]: r["metrics"]["mu_o"] for r in plain["results"]} | {
        "oracle best-of-N": plain["oracle_best_of_n"]["mu_o"]}
    for a, b in zip(plain["results"], explicit["results"], strict=True):
        assert a["metrics"] == b["metrics"] and a["ci"] == b["ci"]


def test_cold_start_json_and_text(table_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", table_dir, *FAST, "--json", "--protocol", "cold-start"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["protocol"] == "cold-start" and d["logging"]["policy"] == "uniform"
    assert [r["spec"] for r in d["results"]] == ["random", "best-single", "knn"]
    assert {"routerlab_version", "data", "split", "seed", "oracle_best_of_n"} <= set(d)
    assert main(["evaluate", table_dir, *FAST, "--protocol", "cold-start", "--logging", "uniform"]) == 0
    out = capsys.readouterr().out
    assert "protocol cold-start: trained on a uniform log of" in out


def test_voyager_json_text_and_files(table_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "voy"
    args = ["evaluate", table_dir, *FAST, "--protocol", "voyager", "--rounds", "3", "--order", "shuffle"]
    assert main([*args, "--json", "-o", str(out_dir)]) == 0
    captured = capsys.readouterr()
    d = json.loads(captured.out)
    assert d["protocol"] == "voyager" and d["voyager"]["n_rounds"] == 3 and d["voyager"]["order"] == "shuffle"
    assert [rd["round"] for rd in d["rounds"]] == [1, 2, 3]
    assert all([r["spec"] for r in rd["results"]] == ["random", "best-single", "knn"] for rd in d["rounds"])
    assert d["results"] == d["rounds"][-1]["results"]
    for name in ("evaluation.json", "choices.parquet", "voyager.png", "voyager_curves.csv", "voyager_curves.json"):
        assert (out_dir / name).is_file() and f"wrote {out_dir / name}" in captured.err
    with (out_dir / "voyager_curves.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 9 and {"round", "router", "acc_at_1", "l_dcg", "collapsed"} <= set(rows[0])
    knn3 = next(r for r in rows if r["router"] == "knn" and r["round"] == "3")
    final = next(r for r in d["results"] if r["spec"] == "knn")
    assert float(knn3["l_dcg"]) == pytest.approx(final["metrics"]["l_dcg"])
    curves = json.loads((out_dir / "voyager_curves.json").read_text())
    assert curves["rounds"] == [1, 2, 3] and len(curves["curves"]["l_dcg"]["knn"]) == 3
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "Voyager L-DCG per round" in text and "r1" in text and "r3" in text
