"""examples/replicate/routerworld.toml (RouterWorld Table 3 and Figure 5): its [[paper]] entries name metrics,
routers, tables and protocols the file has, and its quick variant runs on the demo and stores Table 3's columns,
the collapse flags, the Route-To-X rows and Voyager's per-round records with the deployed checkpoints."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from routerlab.experiments.schema import load_experiment, parse_experiment
from routerlab.experiments.store import query
from routerlab.metrics.catalog import metric_info
from tests import run_main

FILE = Path(__file__).resolve().parents[2] / "examples" / "replicate" / "routerworld.toml"
TABLE3 = ("acc_at_1", "acc_at_1_l", "dcg", "l_dcg")


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return tomllib.loads(FILE.read_text(encoding="utf-8"))


def test_paper_entries_name_what_the_file_runs(doc: dict[str, Any]) -> None:
    tables = {t["name"] for t in doc["tables"]}
    protocols = {p if isinstance(p, str) else p["name"] for p in doc["protocols"]}
    entries = doc["paper"]
    assert len(entries) >= 20
    for e in entries:
        assert e["table"] in tables and e["protocol"] in protocols, e["claim"]
        assert e["router"] in doc["routers"], e["claim"]
        assert e["protocol"] in metric_info(e["metric"]).protocols, e["claim"]
        assert 0.0 <= e["value"] <= 1.0 and e["note"].strip(), e["claim"]
    assert {e["metric"] for e in entries} >= {*TABLE3, "collapsed_flag"}
    assert {e["protocol"] for e in entries} == {"full", "cold-start", "voyager"}


def test_the_full_file_parses_with_the_local_table_pointed_elsewhere(doc: dict[str, Any]) -> None:
    full = {k: v for k, v in doc.items() if k not in ("quick", "paper")}
    exp = parse_experiment(full, FILE, tables={"local": "demo"})
    assert [t.name for t in exp.tables] == ["demo", "local"]
    assert {f"fixed:actor={a}" for a in ("tiny-2b", "frontier-235b", "smol", "qwen")} <= set(exp.routers)
    voyager = next(p for p in exp.protocols if p.name == "voyager")
    assert voyager.options["dev"] > 0  # Figure 5: checkpoints selected on a development part


def test_quick_runs_from_the_command_line_and_stores_table_3_and_the_voyager_rounds(
        doc: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``routerlab run FILE --quick`` on a clean checkout: the demo only (the collected table is skipped), every
    Table 3 column and collapse flag of every router, the per-round Voyager records, and the paper table."""
    exp = load_experiment(FILE, quick=True)
    assert [t.name for t in exp.tables] == ["demo"]  # the quick variant never needs the collected table
    store = tmp_path / "store"
    code, out, err = run_main(["run", str(FILE), "--quick", "--store", str(store), "--backend", "serial"], capsys)
    assert code == 0, err
    assert "the paper's numbers next to routerlab's (routerworld)" in out and "peak memory" in out
    _, rows = query(store, "SELECT protocol, router, metric, slice, value FROM results")
    got = {(p, r, m, s): v for p, r, m, s, v in rows}
    for protocol in ("full", "cold-start"):
        for router in doc["quick"]["routers"]:
            for metric in (*TABLE3, "top_share", "collapsed_flag"):
                assert (protocol, router, metric, "") in got, (protocol, router, metric)
        # Route-To-X: a fixed actor is collapsed by construction; the oracle spreads over the actors
        assert got[(protocol, "largest", "collapsed_flag", "")] == 1.0
        assert got[(protocol, "fixed:actor=general-7b", "top_share", "")] == 1.0
        assert got[(protocol, "oracle", "collapsed_flag", "")] == 0.0
    # the oracle does not read the log: partial observability leaves it unchanged
    assert got[("cold-start", "oracle", "l_dcg", "")] == got[("full", "oracle", "l_dcg", "")]
    rounds = doc["quick"]["protocols"]["voyager"]["rounds"]
    for t in range(1, rounds + 1):
        assert ("voyager", "knn", "l_dcg", f"round={t}") in got
        assert 1 <= got[("voyager", "knn", "checkpoint_round", f"round={t}")] <= t
    code, out, _ = run_main(["results", "paper", str(FILE), "--store", str(store), "--quick", "--json"], capsys)
    assert code == 0
    paper = json.loads(out)
    assert len(paper) == len(exp.papers) and sum(r["routerlab"] is not None for r in paper) >= 20
