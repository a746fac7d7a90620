"""Issue 21, "results over too few queries": a table with 3 test queries. Every command warns once (one stderr line
naming the 3 queries and the minimum of 30) and reports its intervals and p-values as unavailable, never computed
from 3 queries; the audit writes no finding that rests on such an interval and says in one sentence what it left
out. (Numbers for tables of normal size are pinned by each command's own tests.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab.cli import main
from routerlab.data.demo import demo
from routerlab.metrics.bootstrap import MIN_QUERIES

WARNING = ("routerlab: warning: only 3 evaluated test queries, fewer than the 30 a 95% interval needs: intervals and "
           "p-values are reported as unavailable (docs/metrics.md, 'Too few queries')")
NA = "n/a (n=3 < 30)"


pytestmark = pytest.mark.usefixtures("quiet_progress")


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's first 300 training queries and 3 test queries."""
    table = demo(1000, seed=0)
    split = np.asarray(table.queries.split)
    rows = np.concatenate([np.flatnonzero(split == "train")[:300], np.flatnonzero(split == "test")[:3]])
    path = tmp_path_factory.mktemp("few") / "t3"
    table.select_queries(rows).save(path)
    return path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    assert main(argv) == 0
    out, err = capsys.readouterr()
    return out, err


def warned_once(err: str, line: str = WARNING) -> bool:
    return err.splitlines().count(line) == 1 and sum("fewer than the 30" in x for x in err.splitlines()) == 1


def test_the_minimum_is_thirty() -> None:
    assert MIN_QUERIES == 30


@pytest.mark.parametrize("protocol", ["full", "cold-start", "voyager"])
def test_evaluate(table_dir: Path, protocol: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["evaluate", str(table_dir), "--routers", "oracle,random,best-single,knn", "--protocol", protocol]
    out, err = run(base, capsys)
    assert warned_once(err)
    assert NA in out and "[0.000, 0.000]" not in out and "[nan" not in out
    # the paired lines: no p = 1.000 (the legend's "e_p = entropy ..." is no p-value)
    assert re.search(r"\bp = ", out) is None and "interval and p n/a (n=3 < 30)" in out
    out, err = run([*base, "--json"], capsys)
    assert warned_once(err)
    record = json.loads(out)
    for r in record["results"]:
        assert all(ci == [None, None] for ci in r["ci"].values()), r["spec"]
        if r.get("paired"):
            assert r["paired"]["ci"] == [None, None] and r["paired"]["p_value"] is None
            assert r["paired"]["mu_o_difference"] is not None  # the value stays
    assert record["records"] and all(x["ci_low"] is None and x["ci_high"] is None for x in record["records"])


def test_robustness(table_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["robustness", str(table_dir), "--routers", "random,best-single,knn", "--levels", "character,word",
            "--variants", "2"]
    out, err = run(base, capsys)
    assert warned_once(err)
    assert f"{NA}" in out and "[0." not in out.split("\n", 1)[1] and "[-]" not in out
    out, _ = run([*base, "--json"], capsys)
    for r in json.loads(out)["results"]:
        assert r["rho_ci"] == [None, None] and r["accuracy_ci"] == [None, None]


def test_two_model(table_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every in-domain dataset's test part holds about 12 queries and the out-of-domain one 50: one warning names
    the small datasets; their cells and the ID average have no interval, the out-of-domain one keeps its own."""
    base = ["two-model", str(table_dir), "--small", "tiny-2b", "--large", "frontier-235b", "--routers",
            "oracle,best-single,knn", "--ood", "law", "--json"]
    out, err = run(base, capsys)
    lines = [x for x in err.splitlines() if "fewer than the 30" in x]
    assert len(lines) == 1 and "evaluated queries in datasets" in lines[0]
    record = json.loads(out)
    for r in record["results"]:
        for name, cell in r["datasets"].items():
            if name == "law":
                assert cell["n"] >= MIN_QUERIES and cell["lpm_ci"][0] is not None
            else:
                assert cell["n"] < MIN_QUERIES and cell["lpm_ci"] == [None, None] and cell["auroc_ci"] == [None, None]
        assert r["id_mean"]["lpm_ci"] == [None, None] and r["ood_mean"]["lpm_ci"][0] is not None


def test_groups(table_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, err = run(["groups", str(table_dir), "--m", "3", "--draws", "20", "--routers", "best-single,knn",
                    "--json"], capsys)
    assert warned_once(err)
    record = json.loads(out)
    for g in record["groups"]:
        for r in g["evaluation"]["results"]:
            assert all(ci == [None, None] for ci in r["ci"].values())
            if r.get("paired"):
                assert r["paired"]["p_value"] is None
    assert all(x["ci_low"] is None for x in record["records"])


def test_ope(table_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = tmp_path / "logs.csv"
    run(["log", str(table_dir), "--part", "test", "-o", str(logs)], capsys)
    out, err = run(["ope", str(table_dir), str(logs), "--routers", "best-single,knn"], capsys)
    assert warned_once(err, WARNING.replace("evaluated test queries", "logged queries"))
    assert f"intervals: {NA}" in out and "[0, 0]" not in out and "[-, -]" not in out
    out, _ = run(["ope", str(table_dir), str(logs), "--routers", "best-single,knn", "--json"], capsys)
    record = json.loads(out)
    for r in record["results"]:
        for est in r["estimates"].values():
            for cell in est.values():
                assert cell["ci"] == [None, None]


def test_run_stores_null_intervals(table_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exp = tmp_path / "tiny.toml"
    exp.write_text(f'name = "tiny"\nrouters = ["best-single", "knn"]\nseeds = [0]\nprotocols = ["full"]\n'
                   f'[settings]\nn_boot = 100\n[[tables]]\nname = "t3"\npath = "{table_dir}"\n')
    store = tmp_path / "store"
    out, err = run(["run", str(exp), "--store", str(store), "--backend", "serial"], capsys)
    assert warned_once(err, WARNING.replace("test queries", "test queries in table 't3'"))
    out, _ = run(["results", "query", "SELECT count(*) AS n, count(ci_low) AS with_ci FROM results", "--store",
                  str(store), "--json"], capsys)
    (row,) = json.loads(out)
    assert row["n"] > 0 and row["with_ci"] == 0


def _findings(record: dict[str, Any]) -> list[str]:
    return [f["text"] for f in record["findings"]]


def test_audit(table_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = tmp_path / "logs.csv"
    run(["log", str(table_dir), "--part", "test", "-o", str(logs)], capsys)
    out_dir = tmp_path / "a"
    out, err = run(["audit", str(table_dir), "--quick", "--no-cache", "-o", str(out_dir), "--logs", str(logs)],
                   capsys)
    assert err.splitlines().count(WARNING) == 1
    record = json.loads((out_dir / "results.json").read_text())
    texts = _findings(record)
    assert texts and not any("nan" in t or "95% CI" in t or "interval" in t for t in texts), texts
    assert all(f["interval"] is None for f in record["findings"])
    skipped = record["skipped_findings"]
    whats = " ".join(s["what"] for s in skipped)
    assert "beats always calling the best single actor" in whats and "off-policy intervals" in whats
    assert all("only 3" in s["why"] for s in skipped)
    sentence = next(x for x in out.splitlines() if x.startswith("Not stated as findings: "))
    assert sentence.count(". ") == 0 and sentence.endswith(".")  # one sentence
    report = (out_dir / "report.md").read_text()
    assert sentence in report.split("\n## ")[1]  # under the findings
    assert NA in report and "[nan" not in report
