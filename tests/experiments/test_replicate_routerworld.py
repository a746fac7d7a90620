"""examples/replicate/routerworld.toml (RouterWorld Table 3 and Figure 5): its [[paper]] entries name metrics,
routers, tables and protocols the file has, and its quick variant runs on the demo and stores Table 3's columns,
the collapse flags, the Route-To-X rows and Voyager's per-round records with the deployed checkpoints."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from routerlab.experiments.runner import run_experiment
from routerlab.experiments.schema import parse_experiment
from routerlab.experiments.store import query
from routerlab.metrics.catalog import metric_info

FILE = Path(__file__).resolve().parents[2] / "examples" / "replicate" / "routerworld.toml"
TABLE3 = ("acc_at_1", "acc_at_1_l", "dcg", "l_dcg")


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return tomllib.loads(FILE.read_text(encoding="utf-8"))


def _quick(doc: dict[str, Any]) -> dict[str, Any]:
    """The file as its [quick] section makes it (seeds, routers, settings and protocol options replaced or merged,
    skipped tables dropped, every table capped at n_queries), without the sections the base schema lacks."""
    q = doc["quick"]
    out = {k: v for k, v in doc.items() if k not in ("quick", "paper")}
    out["seeds"], out["routers"] = q["seeds"], q["routers"]
    out["settings"] = {**doc["settings"], **q.get("settings", {})}
    out["tables"] = [{**t, "n_queries": q["n_queries"]} for t in doc["tables"] if t["name"] not in q["skip_tables"]]
    merged = []
    for p in doc["protocols"]:
        p = {"name": p} if isinstance(p, str) else dict(p)
        merged.append({**p, **q.get("protocols", {}).get(p["name"], {})})
    out["protocols"] = merged
    return out


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


def test_quick_variant_stores_table_3_and_the_voyager_rounds(doc: dict[str, Any], tmp_path: Path) -> None:
    exp = parse_experiment(_quick(doc), FILE)
    assert [t.name for t in exp.tables] == ["demo"]  # the quick variant never needs the collected table
    store = tmp_path / "store"
    summary = run_experiment(exp, store)
    assert summary.cells_run == summary.cells_total > 0
    _, rows = query(store, "SELECT protocol, router, metric, slice, value FROM results")
    got = {(p, r, m, s): v for p, r, m, s, v in rows}
    for protocol in ("full", "cold-start"):
        for router in doc["quick"]["routers"]:
            for metric in (*TABLE3, "top_share", "collapsed_flag"):
                assert (protocol, router, metric, "") in got, (protocol, router, metric)
        # Route-To-X: a fixed actor is collapsed by construction, and equals the same actor as 'largest' would be
        assert got[(protocol, "largest", "collapsed_flag", "")] == 1.0
        assert got[(protocol, "fixed:actor=general-7b", "top_share", "")] == 1.0
        assert got[(protocol, "oracle", "collapsed_flag", "")] == 0.0
    # the oracle does not read the log: partial observability leaves it unchanged
    assert got[("cold-start", "oracle", "l_dcg", "")] == got[("full", "oracle", "l_dcg", "")]
    rounds = doc["quick"]["protocols"]["voyager"]["rounds"]
    for t in range(1, rounds + 1):
        assert ("voyager", "knn", "l_dcg", f"round={t}") in got
        assert 1 <= got[("voyager", "knn", "checkpoint_round", f"round={t}")] <= t
