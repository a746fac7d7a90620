"""Full-observability evaluation on the demo and on every real table in ../shared/data."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from routerlab import RoutingTable
from routerlab.cli import main
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.protocols.full import evaluate
from routerlab.routers import routers

ZOO = [n for n, c in routers().items()  # prompted and the two-model routers (two actors): own tests
       if n not in {"largest", "fastest", "smallest", "cheapest", "fixed"} and not c.needs_backend
       and not getattr(c, "two_model", False)]


def _check(ev_results: list, oracle_name: str = "oracle") -> dict[str, float]:  # type: ignore[type-arg]
    mu = {r.spec: r.metrics["mu_o"] for r in ev_results}
    for spec, value in mu.items():
        assert value <= mu[oracle_name] + 1e-9, f"{spec} beats the oracle"
    return mu


@pytest.mark.parametrize("name,split", [("llmrouter", "given"), ("routerbench", "given"),
                                        ("routeprofile", "random")])
def test_zoo_on_real_tables(real_table: Callable[[str], RoutingTable], name: str, split: str) -> None:
    table = real_table(name)
    ev = evaluate(table, ZOO, split=split, seed=0, n_boot=200)
    mu = _check(ev.results)
    assert set(mu) == set(ZOO)  # every router ran, none crashed (routerbench has NaN cells)
    if name in {"llmrouter", "routerbench"}:
        lo, _ = next(r.ci["mu_o"] for r in ev.results if r.spec == "knn")
        assert lo > mu["random"], f"knn does not beat random on {name}"
    for r in ev.results:
        assert abs(sum(r.selection.values()) - 1) < 1e-9
    # Oracle(Best-of-N) lies between the best fair router and the oracle
    fair = max(v for k, v in mu.items() if k not in {"oracle", "oracle-p"})
    assert fair - 1e-9 <= ev.oracle_best_of_n["mu_o"] <= mu["oracle"] + 1e-9


def test_real_nan_cells_are_excluded_and_counted(real_table: Callable[[str], RoutingTable]) -> None:
    ev = evaluate(real_table("routerbench"), ["oracle", "knn"], n_boot=50)
    assert ev.excluded_test_queries == 8  # arc test rows with an empty quality cell
    assert ev.split["n_test"] == 445 + 128 + 380 - 8


def test_mmlu_pro_random_split(real_table: Callable[[str], RoutingTable]) -> None:
    ev = evaluate(real_table("mmlu-pro"), ["oracle", "random", "best-single", "linear"], split="random", n_boot=100)
    mu = _check(ev.results)
    assert mu["linear"] > mu["random"] + 0.1
    r = next(r for r in ev.results if r.spec == "random")
    assert r.metrics["e_p"] == pytest.approx(np.log2(10))


def test_same_seed_same_numbers() -> None:
    t = demo(800, seed=2)
    a = evaluate(t, ["knn", "mlp", "random"], seed=3, n_boot=100).to_dict()
    b = evaluate(t, ["knn", "mlp", "random"], seed=3, n_boot=100).to_dict()
    for ra, rb in zip(a["results"], b["results"], strict=True):
        assert ra["metrics"] == rb["metrics"] and ra["ci"] == rb["ci"]


def test_errors() -> None:
    t = demo(300)
    with pytest.raises(UsageError, match="unknown router 'nope'"):
        evaluate(t, ["nope"])
    with pytest.raises(UsageError, match="at least one router"):
        evaluate(t, [])
    with pytest.raises(UsageError, match=r"option k='abc' should be int"):
        evaluate(t, ["knn:k=abc"])
    with pytest.raises(UsageError, match=r"option p=True should be int or float"):
        evaluate(t, ["oracle-p:p=true"])
    no_lat = RoutingTable.from_arrays(t.score, actors=t.actor_names, text=t.queries.text, split=t.queries.split)
    with pytest.raises(UsageError, match="fastest"):
        evaluate(no_lat, ["fastest"])
    ev = evaluate(no_lat, ["fastest", "knn"], skip_inapplicable=True, n_boot=50)
    assert [r.spec for r in ev.results] == ["knn"] and "fastest" in ev.extra["skipped"]


def test_cli_evaluate_json_and_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    demo(600, seed=1).save(tmp_path / "t")
    code = main(["evaluate", str(tmp_path / "t"), "--routers", "oracle,knn:k=10,random,linear",
                 "--json", "--n-boot", "100", "-o", str(tmp_path / "out")])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["split"]["n_train"] + out["split"]["n_test"] == 600
    by = {r["router"]: r for r in out["results"]}
    assert by["knn"]["params"]["k"] == 10
    for r in out["results"]:
        for name, (lo, hi) in r["ci"].items():
            assert lo <= r["metrics"][name] + 1e-9 and r["metrics"][name] <= hi + 1e-9
        assert isinstance(r["collapsed"], bool) and r["selection"]
    assert {"mu_o", "l_dcg", "acc_at_1_l", "dcg", "e_p", "v_b", "mean_cost"} <= set(by["knn"]["metrics"])
    assert out["oracle_best_of_n"]["mu_o"] <= by["oracle"]["metrics"]["mu_o"]
    choices = pq.read_table(tmp_path / "out" / "choices.parquet")
    assert choices.num_rows == out["split"]["n_test"]
    assert {"query_id", "oracle", "knn:k=10"} <= set(choices.column_names)
    assert (tmp_path / "out" / "leaderboard.png").stat().st_size > 1000


def test_cli_scaling_and_groups(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scaling", "--m", "2,4", "--samples", "20", "--json", "-o", str(tmp_path / "s")]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["m"] == [2, 4] and len(rec["oracle_p"]["1.0"]["mean"]) == 2
    assert (tmp_path / "s" / "scaling.png").exists()
    assert main(["groups", "--m", "3", "--routers", "oracle,knn", "--draws", "50", "--n-boot", "50", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert {g["kind"] for g in rec["groups"]} == {"all-strong", "all-weak", "strong-to-weak"}
    for g in rec["groups"]:
        assert len(g["actors"]) == 3


def test_cost_sweep_and_paired_comparison() -> None:
    t = demo(900, seed=4)
    ev = evaluate(t, ["best-single", "linear", "oracle"], sweep="cost", n_boot=200)
    lin = next(r for r in ev.results if r.spec == "linear")
    assert lin.sweep is not None and lin.paired is not None
    cost, mu = np.array(lin.sweep["cost"]), np.array(lin.sweep["mu_o"])
    # lambda = 0 is the plain router; a huge lambda buys the cheapest actor for every query
    assert mu[0] == pytest.approx(lin.metrics["mu_o"])
    assert cost[-1] <= cost.min() + 1e-12 and cost[0] >= cost[-1]
    assert 0.0 < lin.sweep["aiq"] <= mu.max() + 1e-9
    assert lin.paired["versus"] == "best-single"
    assert lin.paired["ci"][0] <= lin.paired["mu_o_difference"] <= lin.paired["ci"][1]
    oracle = next(r for r in ev.results if r.spec == "oracle")
    assert oracle.sweep is None  # a router that reads test outcomes has no utility curve
    assert oracle.paired is not None and oracle.paired["p_value"] < 0.05
    with pytest.raises(UsageError, match="sweep"):
        evaluate(RoutingTable.from_arrays(t.score, actors=t.actor_names, split=t.queries.split, text=t.queries.text),
                 ["linear"], sweep="cost")
