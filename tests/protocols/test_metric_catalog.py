"""Every number a protocol's result holds under a metric name is in the metric catalog, listed for that protocol:
each protocol runs once on small inputs (the demo, and the robustness and two-model tests' own tables), and the
names its result carries are compared with ``metrics_for(protocol)``. Where a run produces every metric the
catalog promises (the inputs hold latency, cost, outcomes of the variants, a reference router), the two sets are
equal, so a stale catalog entry fails too."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.metrics.catalog import metrics_for
from routerlab.metrics.registry import registered_metrics
from tests.protocols.test_robustness import KeywordRouter, _outcomes, _tiny
from tests.protocols.test_two_model import synthetic

ROUTERS = ["oracle", "random", "best-single", "knn:k=5"]
N_BOOT = 40


def catalogued(protocol: str) -> set[str]:
    return {m.name for m in metrics_for(protocol)}


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return demo(300, seed=2)


def evaluation_names(record: dict[str, Any]) -> set[str]:
    """The metric names of an evaluation record (full, cold-start, a Voyager round, a group's evaluation): each
    router's metrics, its paired comparison, its sweep's AIQ and its top share and collapse flag, and
    Oracle(Best-of-N)'s metrics."""
    names: set[str] = set(record.get("oracle_best_of_n", {}))
    for r in record["results"]:
        names |= set(r["metrics"]) | set(r["ci"])
        names |= {k for k in r.get("paired") or {} if k not in ("versus", "ci")}
        names |= {"aiq"} if r.get("sweep") else set()
        names |= {"top_share", "collapsed_flag"} if r.get("selection") else set()  # router_records' flag records
    return names


def test_full(table: RoutingTable) -> None:
    from routerlab.protocols.full import evaluate

    names = evaluation_names(evaluate(table, ROUTERS, n_boot=N_BOOT, sweep="cost").to_dict())
    # computed only when a reference is given
    assert set(registered_metrics()) - names == {"v_r", "v_r_greedy"}
    names = evaluation_names(evaluate(table, ROUTERS, n_boot=N_BOOT, sweep="cost",
                                      reference=table.actor_names[0]).to_dict())
    # the demo has latency and cost, the run a sweep, a paired comparison and a reference: every metric the
    # catalog promises
    assert names == catalogued("full")
    assert set(registered_metrics()) <= names


def test_cold_start_and_voyager(table: RoutingTable) -> None:
    from routerlab.protocols.partial import cold_start, voyager

    cold = cold_start(table, ROUTERS, n_boot=N_BOOT, sweep="latency").to_dict()
    assert evaluation_names(cold) == catalogued("cold-start")
    vg = voyager(table, ROUTERS, rounds=2, n_boot=N_BOOT).to_dict()
    names = evaluation_names(vg)
    for round_ in vg["rounds"]:
        names |= evaluation_names(round_)
    # with a development part, the checkpoint each round deploys is recorded too
    from routerlab.protocols.base import run_protocol

    names |= {r.metric for r in run_protocol("voyager", table, {"rounds": 2, "n_boot": N_BOOT, "dev": 0.2},
                                             routers=ROUTERS).records}
    assert names == catalogued("voyager") - {"aiq"} and "aiq" in catalogued("cold-start")  # voyager has no sweep


def test_groups(table: RoutingTable) -> None:
    from routerlab.protocols.groups_eval import run_groups

    # with a reference (V_R on every group), every metric the catalog promises
    record = run_groups(table, [3], ROUTERS, draws=5, n_boot=N_BOOT, reference=table.actor_names[0]).to_dict()
    names = {"train_oracle"} & set(record["groups"][0])
    for g in record["groups"]:
        names |= evaluation_names(g["evaluation"])
    assert names == catalogued("groups")


def test_scaling(table: RoutingTable) -> None:
    from routerlab.data.splits import make_split
    from routerlab.protocols.base import run_protocol
    from routerlab.protocols.scaling import scaling_curve

    curve = scaling_curve(table, make_split(table, "given", 0), [2, 3], samples=3).to_dict()
    names = {k for k, v in curve.items() if isinstance(v, dict) and k != "split"}
    # the protocol's records: mu_o of each curve point with its spread over pools
    records = {r.metric for r in run_protocol("scaling", table, {"m": [2, 3], "samples": 3}).records}
    assert names | records == catalogued("scaling") and "mu_o" in records


def test_ope() -> None:
    from routerlab.protocols.ope import OffPolicyWarning, off_policy_evaluate
    from routerlab.protocols.policies import simulate_logs

    t = demo(400, seed=3)
    logs = simulate_logs(t, "uniform", part="test", seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OffPolicyWarning)
        result = off_policy_evaluate(t, logs, ["knn", "linucb"], encoder="tfidf:dim=32", n_boot=N_BOOT).to_dict()
    names: set[str] = set(result["metrics"]) | set(result["unavailable"])
    for r in result["results"]:
        names |= set(r["estimates"]) | {m for by in r["estimates"].values() for m in by}
        names |= {"truth"} if "truth" in r else set()
        names |= set(r["truth"]) if "truth" in r else set()
        names |= {k for k, v in r["diagnostics"].items() if k not in ("n", "warnings") and isinstance(v, int | float)}
    assert names == catalogued("ope")


def test_robustness() -> None:
    from routerlab.protocols.robustness import robustness

    t, variants = _tiny()
    record = robustness(t, [KeywordRouter()], variants, outcomes=_outcomes(), n_boot=N_BOOT).to_dict()
    skip = {"tested", "optimal", "by_level", "note", "n_perturbations", "n_known"}
    names: set[str] = set()
    for r in record["results"]:
        names |= {k for k in ("rho", "accuracy", "perturbed_accuracy", "perturbed_accuracy_orig")
                  if r.get(k) is not None}
        names |= {"kappa_rho"} & set(r)  # null here: the keyword router sends both test queries to one actor
        names |= {k for k in r["invariance"] if k not in skip and not k.endswith("_ci")}
        for block in r["invariance"]["by_level"].values():
            names |= {k for k in block if k not in skip and not k.endswith("_ci")}
    assert names == catalogued("robustness")


def _cell_names(cells: Iterable[dict[str, Any] | None]) -> set[str]:
    return {k for c in cells if c for k in c if k != "n" and not k.endswith("_ci")}


def test_two_model(tmp_path: Path) -> None:
    from routerlab.protocols.two_model import run_two_model
    from tests.protocols.test_two_model import _write_signals

    record = run_two_model(synthetic(), "S", "L", ["best-single", "knn:k=5"], ood_datasets=["c"], split="given",
                           n_boot=N_BOOT, compare_to="best-single").to_dict()
    names: set[str] = set()
    for r in record["results"]:
        names |= _cell_names([*r["datasets"].values(), r["id_mean"], r["ood_mean"]])
        if r.get("versus"):
            v = r["versus"]
            names |= _cell_names([*v["datasets"].values(), v["id_mean"], v["ood_mean"]])
    # with a development part, the operating point fixed on it for a call rate
    from routerlab.protocols.base import run_protocol

    names |= {r.metric for r in run_protocol(
        "two-model", synthetic(), {"small": "S", "large": "L", "ood_datasets": ["c"], "split": "given", "dev": 0.25,
                                   "call_rate": 0.3, "n_boot": N_BOOT}, routers=["best-single", "knn:k=5"]).records}
    # a hidden-state probe's layer weights (layer importance), from a precomputed .npz of signals
    npz = str(_write_signals(tmp_path / "signals.npz", synthetic()))
    names |= {r.metric for r in run_protocol(
        "two-model", synthetic(), {"small": "S", "large": "L", "ood_datasets": ["c"], "split": "given",
                                   "n_boot": N_BOOT, "features": npz}, routers=["probe-mean:epochs=2"]).records}
    assert names == catalogued("two-model")


def test_society(table: RoutingTable) -> None:
    from routerlab.protocols.base import run_protocol

    result = run_protocol("society", table, {"coreset": 3, "alpha": 0.5})
    record = result.native.to_dict()
    names = {k for k in ("hse", "hse_normalized", "max_hse", "d_max") if k in record}
    core = record["coreset"]
    names |= {k for k in ("size_90", "size_95", "full_hse", "full_hse_normalized") if k in core}
    names |= {k for point in core["curve"] for k in point if k != "size"}
    names |= {r.metric for r in result.records}
    assert names == catalogued("society")


def test_power(table: RoutingTable) -> None:
    from routerlab.protocols.base import run_protocol

    result = run_protocol("power", table, {"delta": 0.05, "n_boot": N_BOOT}, routers=["knn", "best-single"])
    (comparison,) = result.native.to_dict()["comparisons"]
    # every number of a comparison but its description (who, the sizes asked for, why a size is missing)
    settings_and_labels = {"router", "versus", "n_test", "ci", "delta", "alpha", "power", "reason"}
    names = set(comparison) - settings_and_labels
    assert names == catalogued("power") == {r.metric for r in result.records}
