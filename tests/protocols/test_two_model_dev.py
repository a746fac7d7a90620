"""Two-model routing with a development part (issue 23): each router's threshold for a target call rate is fixed on
its s(q) over the development queries and applied unchanged to the test queries; the realized rate is reported
next to the target. The curve metrics (a ranking's description) do not change."""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pytest

from routerlab import RoutingTable
from routerlab.errors import UsageError
from routerlab.metrics.operating_points import escalate, threshold_for_rate
from routerlab.protocols.base import run_protocol
from routerlab.protocols.two_model import TwoModelSettings, run_two_model
from routerlab.reports.files import dumps
from tests.protocols.test_two_model import synthetic

ROUTERS = ["oracle", "best-single", "knn:k=5", "random"]


def test_dev_fixes_the_threshold_and_the_test_rate_follows() -> None:
    table = synthetic()
    with_dev = run_two_model(table, "S", "L", ROUTERS, ood_datasets=["c"], split="given", n_boot=60, seed=1,
                             dev=0.25, call_rate=0.4)
    d = json.loads(dumps(with_dev.to_dict()))
    assert d["split"]["dev_fraction"] == 0.25 and d["split"]["dev_seed"] == 1
    n_dev = d["split"]["n_dev"]
    # the development part is a quarter of each in-domain dataset's training queries, none of them evaluated
    pair = table.select_actors(["S", "L"])
    keep = ~np.isnan(pair.score).any(axis=1)
    train_ab = keep & (pair.queries.split == "train") & np.isin(pair.queries.dataset, ["a", "b"])
    assert n_dev == sum(round(0.25 * int((train_ab & (pair.queries.dataset == x)).sum())) for x in ("a", "b"))
    assert d["split"]["n_train"] == int(train_ab.sum()) - n_dev
    knn = next(r for r in d["results"] if r["router"] == "knn:k=5")
    op = knn["operating_point"]
    assert op["target_rate"] == 0.4 and op["n_fit"] == n_dev
    assert abs(op["dev_call_rate"] - 0.4) <= 1.5 / n_dev + 0.1  # exact up to the coin at a tied block
    # the decision applied to test is the dev threshold on the router's test s(q), recomputed here
    per = with_dev.per_query
    assert per is not None
    s = per.scores["knn:k=5"]
    ood = np.asarray(per.datasets) == "c"
    sent_value = s < (op["threshold"] if op["threshold"] is not None else np.inf)
    tied = s == op["threshold"]
    realized_ood = op["domains"]["ood"]["call_rate"]
    assert int(sent_value[ood].sum()) <= round(realized_ood * ood.sum()) <= int((sent_value | tied)[ood].sum())
    cell = op["domains"]["id"]
    lo, hi = cell["phi_at_call_rate_ci"]
    assert lo <= cell["phi_at_call_rate"] <= hi
    assert cell["n"] == int((~ood).sum())
    # a bound has no operating point; the curve metrics are those of the run without a development part, apart
    # from the training queries it gave up
    assert "operating_point" not in next(r for r in d["results"] if r["router"] == "oracle")
    assert set(op["datasets"]) == {"a", "b", "c"}


def test_without_dev_nothing_changes() -> None:
    table = synthetic()
    plain = run_two_model(table, "S", "L", ROUTERS, ood_datasets=["c"], split="given", n_boot=60, seed=1)
    via = run_protocol("two-model", table, {"small": "S", "large": "L", "ood_datasets": ["c"], "split": "given",
                                            "n_boot": 60}, seed=1, routers=ROUTERS)
    a, b = plain.to_dict(), via.native.to_dict()
    for rec in (a, b):
        for r in rec["results"]:
            r.pop("fit_seconds")
            assert "operating_point" not in r
        rec.pop("created", None)
    assert json.loads(dumps(a["results"])) == json.loads(dumps(b["results"]))
    assert not [r for r in via.records if r.metric in ("call_rate", "phi_at_call_rate")]


def test_records_carry_the_realized_rate() -> None:
    result = run_protocol("two-model", synthetic(), {"small": "S", "large": "L", "ood_datasets": ["c"],
                                                     "split": "given", "n_boot": 50, "dev": 0.3}, seed=0,
                          routers=["best-single", "knn:k=5"])
    op = result.native.result("knn:k=5").operating_point
    assert op is not None and op["target_rate"] == 0.3  # the default target
    got = {(r.slice, r.metric): r for r in result.select(router="knn:k=5")}
    for where, cell in (("domain=id", op["domains"]["id"]), ("domain=ood", op["domains"]["ood"]),
                        ("dataset=c", op["datasets"]["c"])):
        assert got[(where, "call_rate")].value == cell["call_rate"]
        assert got[(where, "phi_at_call_rate")].value == pytest.approx(cell["phi_at_call_rate"])
        assert got[(where, "phi_at_call_rate")].ci_low is not None
    assert result.to_dict()["settings"]["dev"] == 0.3


def test_settings_are_checked() -> None:
    for values, needle in (({"dev": 0}, "dev: the dev fraction must be in (0, 1)"),
                           ({"dev": 1.0}, "dev: the dev fraction must be in (0, 1)"),
                           ({"dev": float("nan")}, "dev: the dev fraction must be in (0, 1)"),
                           ({"dev": "x"}, "dev: must be a number"),
                           ({"dev": 0.2, "call_rate": 1.5}, "call_rate: must be a number in [0, 1]"),
                           ({"call_rate": 0.3}, "call_rate: needs dev")):
        with pytest.raises(UsageError) as err:
            TwoModelSettings.from_mapping(values)
        assert str(err.value).startswith(needle), str(err.value)
    with pytest.raises(UsageError, match="leaves no development queries"):
        run_two_model(synthetic(), "S", "L", ["best-single"], split="given", n_boot=40, dev=1e-4)


SMALL, LARGE = "mistralai/mistral-7b-chat", "gpt-4-1106-preview"


def test_real_routerbench_pair_realizes_the_target(real_table: Callable[[str], RoutingTable]) -> None:
    """RouterBench (zero-shot): Mistral-7B as the small model, GPT-4 as the large one, every dataset in-domain, a
    20% development part; the threshold fixed there for a 30% call rate realizes about 30% on the test queries."""
    table = real_table("routerbench")
    result = run_protocol("two-model", table, {"small": SMALL, "large": LARGE, "n_boot": 100, "dev": 0.2,
                                               "call_rate": 0.3}, seed=0, routers=["knn:k=10", "best-single"])
    d = json.loads(dumps({**result.native.to_dict(), "records": [r.to_dict() for r in result.records]}))
    op = next(r for r in d["results"] if r["router"] == "knn:k=10")["operating_point"]
    assert op["threshold"] is not None and op["target_rate"] == 0.3 and op["n_fit"] == d["split"]["n_dev"]
    n_test = op["domains"]["id"]["n"]
    assert n_test > 500
    realized = op["domains"]["id"]["call_rate"]
    # the dev and test queries are independent draws: the realized rate sits within sampling noise of the target
    noise = 3 * np.sqrt(0.3 * 0.7 * (1 / n_test + 1 / op["n_fit"]))
    assert abs(realized - 0.3) <= noise, (realized, noise)
    assert abs(op["dev_call_rate"] - 0.3) < 0.01
    # the threshold, applied by hand to the router's test s(q), gives the reported decision's rate up to the coin
    s = result.native.per_query.scores["knn:k=10"]
    thr = threshold_for_rate(np.sort(s), 0.3)  # (on test: not what is reported; only the shape is compared)
    assert escalate(s, thr).mean() == pytest.approx(0.3, abs=0.01)
    below = float((s < op["threshold"]).mean())
    assert below <= realized <= float((s <= op["threshold"]).mean())
    phi = op["domains"]["id"]["phi_at_call_rate"]
    perf = op["domains"]["id"]
    assert perf["perf_small"] <= phi + 0.05 and phi <= perf["perf_large"] + 0.05
    recs = [r for r in d["records"] if r["router"] == "knn:k=10" and r["slice"] == "domain=id"]
    assert {r["metric"] for r in recs} >= {"call_rate", "phi_at_call_rate", "auroc"}
