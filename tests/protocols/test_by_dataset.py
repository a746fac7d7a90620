"""``evaluate --by dataset`` (issue 23, 3): every router scored again on each dataset's evaluated test queries.

Pinned by hand on a two-dataset table of uneven sizes with one partially observed test query; on real tables the
counts add up to the evaluated test queries and the count-weighted mean of each dataset's mu_o is the overall mu_o;
through the CLI (JSON, console table, one-line errors) and an experiment file."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab.cli import main
from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.metrics.bootstrap import MIN_QUERIES
from routerlab.protocols.base import run_protocol
from routerlab.protocols.full import Evaluation, RouterResult, evaluate

N_BOOT = 60

# actors a, b. Train (4 queries): a scores 0.75 on average, b 0.5, so best-single is a.
# Test: dataset x has 4 queries (the last with an unobserved cell for b, so left out), dataset y has 5.
TRAIN = [[1.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]
TEST_X = [[0.5, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, np.nan]]
TEST_Y = [[0.0, 1.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.25], [0.0, 0.0]]


def hand_table() -> RoutingTable:
    rows = TRAIN + TEST_X + TEST_Y
    n_train = len(TRAIN)
    return RoutingTable.from_arrays(
        np.array(rows, dtype=np.float32), actors=["a", "b"],
        text=[f"query {i} about {'law' if i % 2 else 'math'}" for i in range(len(rows))],
        dataset=["x", "y", "x", "y"] + ["x"] * len(TEST_X) + ["y"] * len(TEST_Y),
        split=["train"] * n_train + ["test"] * (len(rows) - n_train), name="hand")


def _result(ev: Evaluation, spec: str) -> RouterResult:
    return next(r for r in ev.results if r.spec == spec)


def _check_identity(ev: Evaluation) -> None:
    """The counts add up to the evaluated test queries; the count-weighted mean of mu_o is the overall mu_o."""
    n = int(ev.split["n_test"])
    assert ev.extra["breakdown"]["n_evaluated"] == n
    assert sum(d["n"] for d in ev.extra["breakdown"]["datasets"].values()) == n
    excluded = sum(d["excluded"] for d in ev.extra["breakdown"]["datasets"].values())
    assert excluded == ev.excluded_test_queries == ev.extra["breakdown"]["excluded_test_queries"]
    for r in ev.results:
        assert r.by_dataset is not None
        assert sum(d["n"] for d in r.by_dataset.values()) == n
        assert set(r.by_dataset) == {k for k, d in ev.extra["breakdown"]["datasets"].items() if d["n"]}
        weighted = sum(d["n"] * d["metrics"]["mu_o"] for d in r.by_dataset.values()) / n
        assert abs(weighted - r.metrics["mu_o"]) < 1e-12, r.spec
        for d in r.by_dataset.values():
            assert set(d["metrics"]) == set(r.metrics)  # the same metric names as the overall result
            for name, (lo, hi) in d["ci"].items():
                if d["n"] < MIN_QUERIES:
                    assert math.isnan(lo) and math.isnan(hi)
                elif not math.isnan(lo):
                    assert lo - 1e-12 <= d["metrics"][name] <= hi + 1e-12


@pytest.mark.filterwarnings("ignore::routerlab.metrics.bootstrap.FewQueriesWarning")  # 8 test queries in all
def test_hand_computed_counts_and_means() -> None:
    ev = evaluate(hand_table(), ["best-single", "oracle"], by="dataset", n_boot=N_BOOT)
    # the x query with an unobserved cell is left out of every metric, and of x's count
    assert ev.excluded_test_queries == 1 and ev.split["n_test"] == 8
    assert ev.extra["breakdown"]["datasets"] == {"x": {"n": 3, "excluded": 1}, "y": {"n": 5, "excluded": 0}}
    single, oracle = _result(ev, "best-single"), _result(ev, "oracle")
    assert single.by_dataset is not None and oracle.by_dataset is not None
    assert {k: d["n"] for k, d in single.by_dataset.items()} == {"x": 3, "y": 5}
    # best-single always calls a: x (0.5 + 0 + 1) / 3, y (0 + 0 + 1 + 1 + 0) / 5, overall 3.5 / 8
    assert single.by_dataset["x"]["metrics"]["mu_o"] == pytest.approx(1.5 / 3, abs=1e-12)
    assert single.by_dataset["y"]["metrics"]["mu_o"] == pytest.approx(2 / 5, abs=1e-12)
    assert single.metrics["mu_o"] == pytest.approx(3.5 / 8, abs=1e-12)
    # the oracle takes each query's best actor: x (0.5 + 1 + 1) / 3, y (1 + 1 + 1 + 1 + 0) / 5
    assert oracle.by_dataset["x"]["metrics"]["mu_o"] == pytest.approx(2.5 / 3, abs=1e-12)
    assert oracle.by_dataset["y"]["metrics"]["mu_o"] == pytest.approx(4 / 5, abs=1e-12)
    # v_b against the best single actor a, on the dataset's queries
    assert oracle.by_dataset["y"]["metrics"]["v_b"] == pytest.approx((4 / 5) / (2 / 5), abs=1e-12)
    _check_identity(ev)
    # below MIN_QUERIES a dataset's intervals are unavailable (NaN in Python, null in JSON) and a note says so
    assert all(math.isnan(v) for d in single.by_dataset.values() for ci in d["ci"].values() for v in ci)
    assert any("fewer than 30 evaluated test queries (x, y)" in n for n in ev.extra["notes"])


@pytest.mark.filterwarnings("ignore::routerlab.metrics.bootstrap.FewQueriesWarning")
def test_answerable_only_counts_its_cut_apart() -> None:
    """With --answerable-only the unanswerable test queries (y's last: no actor scores >= 0.5) are counted per
    dataset apart from those with an unobserved cell, and the identity holds on the queries evaluated."""
    ev = evaluate(hand_table(), ["best-single", "oracle"], by="dataset", n_boot=N_BOOT, answerable_only=True)
    assert ev.extra["breakdown"]["datasets"] == {"x": {"n": 3, "excluded": 1, "unanswerable": 0},
                                                 "y": {"n": 4, "excluded": 0, "unanswerable": 1}}
    assert ev.extra["breakdown"]["n_evaluated"] == 7 == ev.extra["answerable_only"]["answerable"]
    single = _result(ev, "best-single")
    assert single.by_dataset is not None and single.by_dataset["y"]["metrics"]["mu_o"] == pytest.approx(2 / 4)
    weighted = sum(d["n"] * d["metrics"]["mu_o"] for d in single.by_dataset.values()) / 7
    assert abs(weighted - single.metrics["mu_o"]) < 1e-12


def test_without_by_nothing_changes() -> None:
    """The default adds no key, and the overall numbers are the same with and without the breakdown."""
    table = demo(300, seed=2)
    routers = ["oracle", "random", "best-single", "knn:k=5"]
    plain = evaluate(table, routers, n_boot=N_BOOT)
    broken = evaluate(table, routers, n_boot=N_BOOT, by="dataset")
    assert "breakdown" not in plain.extra and all(r.by_dataset is None for r in plain.results)
    assert "by_dataset" not in plain.to_dict()["results"][0]
    for a, b in zip(plain.results, broken.results, strict=True):
        assert a.metrics == b.metrics
        assert repr(a.ci) == repr(b.ci)  # NaN (an interval left out) prints the same
    _check_identity(broken)
    # random explores: its per-dataset values are expectations under its distribution, and still add up
    assert _result(broken, "random").policy == "distribution"


def test_protocol_records_and_settings() -> None:
    table = demo(300, seed=2)
    result = run_protocol("full", table, {"by": "dataset", "n_boot": N_BOOT}, 0, ["best-single", "knn:k=5"])
    ev: Evaluation = result.native
    knn = _result(ev, "knn:k=5")
    assert knn.by_dataset is not None
    for name, d in knn.by_dataset.items():
        assert result.value("knn:k=5", "mu_o", f"dataset={name}") == pytest.approx(d["metrics"]["mu_o"])
    slices = {r.slice for r in result.records}
    assert slices == {""} | {f"dataset={k}" for k in knn.by_dataset}
    assert result.settings.to_dict()["by"] == "dataset"
    cold = run_protocol("cold-start", table, {"by": "dataset", "n_boot": N_BOOT}, 0, ["best-single", "knn:k=5"])
    _check_identity(cold.native)
    assert any(r.slice.startswith("dataset=") for r in cold.records)
    with pytest.raises(UsageError, match=r"^by: must be one of dataset, none, got 'task'$"):
        run_protocol("full", table, {"by": "task"}, 0, ["oracle"])
    with pytest.raises(UsageError, match=r"applies to protocol .*full.* only, not to voyager"):
        run_protocol("voyager", table, {"by": "dataset"}, 0, ["oracle"])


def test_no_dataset_column_is_an_error_and_one_dataset_a_note() -> None:
    t = demo(200, seed=3)
    bare = RoutingTable.from_arrays(t.score, actors=t.actor_names, text=t.queries.text, split=t.queries.split)
    with pytest.raises(UsageError, match="no test query has a dataset label"):
        evaluate(bare, ["oracle"], by="dataset", n_boot=N_BOOT)
    one = RoutingTable.from_arrays(t.score, actors=t.actor_names, text=t.queries.text, split=t.queries.split,
                                   dataset=["only"] * t.n_queries)
    ev = evaluate(one, ["oracle", "best-single"], by="dataset", n_boot=N_BOOT)
    assert any("holds one dataset (only)" in n for n in ev.extra["notes"])
    for r in ev.results:
        assert r.by_dataset is not None and r.by_dataset["only"]["metrics"] == r.metrics
    with pytest.raises(UsageError, match="by must be one of none, dataset"):
        evaluate(t, ["oracle"], by="datasets")


@pytest.mark.parametrize("name", ["routerbench", "llmrouter"])
def test_real_tables_add_up(real_table: Callable[[str], RoutingTable], name: str) -> None:
    ev = evaluate(real_table(name), ["oracle", "random", "best-single", "knn"], by="dataset", n_boot=200)
    _check_identity(ev)
    datasets = ev.extra["breakdown"]["datasets"]
    assert len(datasets) > 1
    if name == "routerbench":  # partially observed: 8 arc test queries have an empty quality cell
        assert ev.excluded_test_queries == 8
        assert sum(d["excluded"] for d in datasets.values()) == 8
        assert sum(d["n"] + d["excluded"] for d in datasets.values()) == 445 + 128 + 380
    knn = _result(ev, "knn")
    assert knn.by_dataset is not None
    big = [k for k, d in knn.by_dataset.items() if d["n"] >= MIN_QUERIES]
    assert big, "no dataset large enough for an interval"
    for k in big:  # every dataset with enough queries has a real interval around its value
        lo, hi = knn.by_dataset[k]["ci"]["mu_o"]
        assert lo <= knn.by_dataset[k]["metrics"]["mu_o"] <= hi and hi - lo > 0


def _cli_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(argv) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_cli_json_text_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERLAB_PROGRESS", "0")
    demo(1000, seed=1).save(tmp_path / "t")
    args = ["evaluate", str(tmp_path / "t"), "--routers", "oracle,best-single,knn:k=10", "--n-boot", "100"]
    out = _cli_json([*args, "--by", "dataset", "--json", "-o", str(tmp_path / "out")], capsys)
    n = out["split"]["n_test"]
    assert out["settings"]["by"] == "dataset"
    assert sum(d["n"] for d in out["breakdown"]["datasets"].values()) == out["breakdown"]["n_evaluated"] == n
    for r in out["results"]:
        bd = r["by_dataset"]
        assert sum(d["n"] for d in bd.values()) == n
        assert abs(sum(d["n"] * d["metrics"]["mu_o"] for d in bd.values()) / n - r["metrics"]["mu_o"]) < 1e-12
        for d in bd.values():  # JSON null, not NaN, where a dataset is too small for an interval
            assert all((lo is None) == (d["n"] < MIN_QUERIES) for lo, _ in d["ci"].values())
    slices = {rec["slice"] for rec in out["records"]}
    assert {f"dataset={k}" for k in out["breakdown"]["datasets"]} <= slices
    assert (tmp_path / "out" / "by_dataset.png").stat().st_size > 1000
    written = json.loads((tmp_path / "out" / "evaluation.json").read_text())
    assert written["results"][0]["by_dataset"] == out["results"][0]["by_dataset"]

    # the console: the leaderboard's numbers unchanged, then the per-dataset table with its legend
    assert main(args) == 0
    plain = capsys.readouterr().out
    assert main([*args, "--by", "dataset"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(plain.rstrip("\n"))
    extra = text[len(plain.rstrip("\n")):]
    assert f"by dataset: {n} evaluated test queries in 6 datasets; the counts n add up to the {n}" in extra
    assert "dataset" in extra and "mu_o [95% CI]" in extra and "\nlegend  mu_o = mean score" in extra
    knn_law = out["results"][[r["spec"] for r in out["results"]].index("knn:k=10")]["by_dataset"]["law"]
    assert f"{knn_law['metrics']['mu_o']:.4f}" in extra

    # one line, exit 2
    assert main([*args, "--by", "task"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["routerlab: error: --by: must be one of dataset, none, got 'task'"]
    assert main([*args, "--by", "dataset", "--protocol", "voyager"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--by: applies to protocol" in err[0] and "not to voyager" in err[0]


def test_experiment_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import duckdb

    monkeypatch.setenv("ROUTERLAB_PROGRESS", "0")
    exp = tmp_path / "exp.toml"
    exp.write_text('name = "bydataset"\nrouters = ["oracle", "best-single"]\nseeds = [0]\n'
                   'protocols = [{ name = "full", by = "dataset" }, "cold-start"]\n'
                   '[settings]\nn_boot = 60\n'
                   '[[tables]]\nname = "demo"\npath = "demo"\nn_queries = 400\nsplit = "random"\n'
                   'test_fraction = 0.25\n')
    assert main(["run", str(exp), "--backend", "serial", "--store", str(tmp_path / "store")]) == 0
    capsys.readouterr()
    con = duckdb.connect(str(tmp_path / "store" / "results.duckdb"), read_only=True)
    rows = con.execute("SELECT protocol, slice, value FROM results WHERE metric = 'mu_o' AND router = 'oracle' "
                       "ORDER BY protocol, slice").fetchall()
    con.close()
    full = {s: v for p, s, v in rows if p == "full"}
    assert {p for p, s, _ in rows if s} == {"full"}  # the breakdown only where the file asked for it
    assert len(full) == 7 and "dataset=law" in full
    assert full[""] <= 1.0
