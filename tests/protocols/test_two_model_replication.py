"""The RouterXBench replication's analyses in the two-model protocol: the share of queries both models fail, the
Youden-J threshold fixed on the development part (else the training queries) and its routing accuracy on test, the
probes' layer weights, and training-size scaling on nested seeded subsets; each as records with their slices."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from routerlab.data.table import RoutingTable
from routerlab.metrics.curves import small_good_enough
from routerlab.protocols.base import Result, SettingError, run_protocol
from routerlab.protocols.two_model import TwoModelResult, TwoModelSettings, nested_train_subsets
from tests.protocols.test_two_model import _write_signals, synthetic

SETTINGS = {"small": "S", "large": "L", "ood_datasets": ["c"], "split": "given", "n_boot": 60}


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return synthetic()


@pytest.fixture(scope="module")
def result(table: RoutingTable) -> Result:
    return run_protocol("two-model", table, SETTINGS, seed=1, routers=["oracle", "best-single", "knn:k=5"])


def _evaluated(table: RoutingTable, name: str) -> tuple[np.ndarray, np.ndarray]:
    keep = ~np.isnan(table.score[:, [0, 2]]).any(axis=1) & (table.queries.dataset == name)
    if name != "c":
        keep &= table.queries.split == "test"
    return table.score[keep, 2], table.score[keep, 0]


def test_both_fail_per_dataset_and_domain(table: RoutingTable, result: Result) -> None:
    native: TwoModelResult = result.native
    assert native.both_fail is not None
    shares = {}
    for name in "abc":
        small, large = _evaluated(table, name)
        shares[name] = float(((small == 0) & (large == 0)).mean())
        (rec,) = result.select("knn:k=5", "both_fail", f"dataset={name}")
        # a property of the pair on the evaluated queries: every router of the run carries the same share
        assert {r.value for r in result.select(metric="both_fail", slice=f"dataset={name}")} == {rec.value}
        assert rec.value == pytest.approx(shares[name])
        assert rec.ci_low is not None and rec.ci_high is not None and rec.ci_low <= rec.value <= rec.ci_high
    assert result.value("oracle", "both_fail", "domain=id") == pytest.approx((shares["a"] + shares["b"]) / 2)
    assert result.value("oracle", "both_fail", "domain=ood") == pytest.approx(shares["c"])
    assert native.to_dict()["both_fail"]["fail_below"] == 0.5


def test_youden_fixed_on_the_training_queries_without_dev(table: RoutingTable, result: Result) -> None:
    native: TwoModelResult = result.native
    assert native.result("oracle").youden is None  # a bound reads test outcomes: no threshold of its own
    knn = native.result("knn:k=5").youden
    assert knn is not None and knn["fit_on"] == "train"
    assert knn["n_fit"] == int(((table.queries.split == "train") & (table.queries.dataset != "c")).sum()) - 2
    for where in ("dataset=a", "domain=id", "dataset=c", "domain=ood"):
        (acc,) = result.select("knn:k=5", "youden_accuracy", where)
        (j,) = result.select("knn:k=5", "youden_j", where)
        assert 0.0 <= acc.value <= 1.0 and -1.0 <= j.value <= 1.0 and j.ci_low is None
    # the constant best-single cannot separate anything: J 0 on its own training queries, all kept small
    best = native.result("best-single").youden
    assert best is not None and best["j_fit"] == 0.0 and best["sends"] == "none"
    small, large = _evaluated(table, "c")
    needed = ~small_good_enough(small, large)
    assert result.value("best-single", "youden_accuracy", "dataset=c") == pytest.approx(float((~needed).mean()))
    assert result.value("best-single", "youden_j", "dataset=c") == 0.0
    # knn reads fruit against physics words: it routes better than keeping everything small
    assert result.value("knn:k=5", "youden_j", "domain=ood") > 0.3


def test_youden_fixed_on_the_development_part(table: RoutingTable) -> None:
    res = run_protocol("two-model", table, {**SETTINGS, "dev": 0.25}, seed=1, routers=["knn:k=5"])
    youden = res.native.result("knn:k=5").youden
    assert youden["fit_on"] == "dev" and youden["n_fit"] == res.native.result("knn:k=5").operating_point["n_fit"]
    assert youden["j_fit"] > 0.3 and youden["tpr_fit"] - youden["fpr_fit"] == pytest.approx(youden["j_fit"])
    # applied unchanged to the test queries: the recorded accuracy is that of s(q) < threshold there
    per = res.artifacts["per_query"]
    sent = per.scores["knn:k=5"] < (youden["threshold"] if youden["threshold"] is not None else -np.inf)
    rows = np.asarray(per.datasets) == "c"
    needed = ~small_good_enough(per.small[rows], per.large[rows])
    assert res.value("knn:k=5", "youden_accuracy", "dataset=c") == pytest.approx(float((sent[rows] == needed).mean()))


def test_layer_weights_as_records(table: RoutingTable, tmp_path: Path) -> None:
    npz = str(_write_signals(tmp_path / "signals.npz", table))
    res = run_protocol("two-model", table, {**SETTINGS, "features": npz}, seed=1,
                       routers=["probe-dirichlet:lr=0.01,epochs=3", "probe-mean:epochs=2", "knn:k=5"])
    weights = res.native.result("probe-dirichlet:lr=0.01,epochs=3").layer_weights
    assert weights is not None and len(weights) == 3 and weights[0] == 0.0  # layers=blocks skips the embeddings
    assert sum(weights) == pytest.approx(1.0)
    recs = res.select("probe-dirichlet:lr=0.01,epochs=3", "layer_weight")
    assert [r.slice for r in recs] == ["layer=0", "layer=1", "layer=2"]
    assert [r.value for r in recs] == pytest.approx(weights)
    assert [r.value for r in res.select("probe-mean:epochs=2", "layer_weight")] == pytest.approx([0.0, 0.5, 0.5])
    assert not res.select("knn:k=5", "layer_weight") and res.native.result("knn:k=5").layer_weights is None


def test_nested_train_subsets_by_hand() -> None:
    datasets = ["a"] * 10 + ["b"] * 4
    small, half, whole = nested_train_subsets(datasets, [0.1, 0.5, 1.0], seed=3)
    assert small.size == 1 + 1 and half.size == 5 + 2 and whole.tolist() == list(range(14))
    assert set(small) <= set(half) <= set(whole)  # nested
    names = np.asarray(datasets)
    assert (names[half] == "a").sum() == 5 and (names[half] == "b").sum() == 2  # stratified
    again = nested_train_subsets(datasets, [0.1, 0.5, 1.0], seed=3)
    assert all((x == y).all() for x, y in zip(again, [small, half, whole], strict=True))
    assert not all((x == y).all() for x, y in zip(nested_train_subsets(datasets, [0.1, 0.5, 1.0], seed=4),
                                                   [small, half, whole], strict=True))


def test_train_sizes_records(table: RoutingTable, result: Result) -> None:
    res = run_protocol("two-model", table, {**SETTINGS, "train_sizes": [0.25, 1.0]}, seed=1,
                       routers=["oracle", "best-single", "knn:k=5"])
    sizes = res.native.train_sizes
    assert [e["train_size"] for e in sizes] == [0.25, 1.0]
    assert sizes[1]["n_train"] == res.n_train and sizes[0]["n_train"] < res.n_train
    # share 1 is the main run, to the bit; the other share retrains
    for rec in res.select(slice="train_size=1,domain=id"):
        assert rec.value == pytest.approx(res.value(rec.router, rec.metric, "domain=id"), nan_ok=True)
    assert res.value("knn:k=5", "auroc", "train_size=0.25,domain=ood") != res.value("knn:k=5", "auroc", "domain=ood")
    # a bound does not train: the same at every size
    assert res.value("oracle", "lpm", "train_size=0.25,dataset=c") == res.value("oracle", "lpm", "dataset=c")
    slices = {r.slice for r in res.select("knn:k=5", "auroc") if r.slice.startswith("train_size=0.25")}
    assert slices == {"train_size=0.25,dataset=a", "train_size=0.25,dataset=b", "train_size=0.25,domain=id",
                      "train_size=0.25,dataset=c", "train_size=0.25,domain=ood"}
    # the main run's other numbers do not move with train_sizes
    for rec in result.records:
        assert res.value(rec.router, rec.metric, rec.slice) == pytest.approx(rec.value, nan_ok=True)
    json.dumps(res.to_dict(), allow_nan=False)


def test_train_sizes_settings_checks() -> None:
    for value, message in [([0.5, 0.25], "must be in increasing order"), ([0.0, 1.0], r"item 1: must be a finite "
                           r"number in \(0, 1\]"), ([1.5], r"item 1: must be a finite number in \(0, 1\]"),
                           ([0.5, 0.5], "lists 0.5 twice")]:
        with pytest.raises(SettingError, match=message):
            TwoModelSettings(train_sizes=value)
    assert TwoModelSettings(train_sizes="0.1,0.5,1").train_sizes == (0.1, 0.5, 1.0)
    assert TwoModelSettings().train_sizes is None


def test_train_sizes_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests import run_main

    table_dir = tmp_path / "t"
    synthetic().save(table_dir)
    base = ["two-model", str(table_dir), "--small", "S", "--large", "L", "--routers", "best-single,knn:k=5", "--ood",
            "c", "--split", "given", "--boot", "50"]
    code, out, err = run_main([*base, "--train-sizes", "0.5,0.25"], capsys)
    assert code == 2 and err.strip().splitlines() == [
        "routerlab: error: --train-sizes: must be in increasing order (nested subsets grow), got 0.5,0.25"]
    code, out, _ = run_main([*base, "--train-sizes", "0.5,1", "--json"], capsys)
    record = json.loads(out)
    assert code == 0 and [e["train_size"] for e in record["train_sizes"]] == [0.5, 1.0]
    assert record["settings"]["train_sizes"] == [0.5, 1.0]
    assert any(r["slice"] == "train_size=0.5,domain=ood" for r in record["records"])
