"""The ``power`` protocol: both routers fitted and scored by the full protocol's machinery (the observed difference
and its interval are evaluate's paired comparison, to the last digit), the sizes from metrics/power.py, one
record per comparison and metric, the same setting errors from Python, a TOML-style mapping and the CLI, and
the comparison modes (two routers; every router against ``versus``, as an experiment file runs it)."""

from __future__ import annotations

import numpy as np
import pytest

from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.metrics.power import paired_power, sample_size
from routerlab.protocols.base import protocol_names, run_protocol
from routerlab.protocols.full import evaluate
from routerlab.protocols.power import RECORDED, PowerSettings, PowerStudy, comparison_pairs
from tests.protocols.test_objects import MeanRouter

N_BOOT = 200


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return demo(800, seed=3)


def test_registered() -> None:
    assert "power" in protocol_names()


def test_the_difference_is_evaluates_paired_comparison(table: RoutingTable) -> None:
    result = run_protocol("power", table, {"delta": 0.03, "n_boot": N_BOOT, "split": "random:0.3"}, seed=2,
                          routers=["knn", "best-single"])
    ev = evaluate(table, ["knn", "best-single"], split="random:0.3", seed=2, n_boot=N_BOOT, compare_to="best-single")
    knn = next(r for r in ev.results if r.spec == "knn")
    assert knn.paired is not None
    study: PowerStudy = result.native
    (c,) = study.comparisons
    a = c.analysis
    assert (c.router, c.versus) == ("knn", "best-single")
    assert a.mean_difference == knn.paired["mu_o_difference"] and list(a.ci) == knn.paired["ci"]
    assert c.mu_o == pytest.approx(knn.metrics["mu_o"])
    assert result.n_test == a.n == ev.split["n_test"] - ev.excluded_test_queries
    # the sizes are metrics/power.py's on the routers' per-query scores as deployed
    scores = _test_scores(table, 2)
    fitted = {r.spec: r.query_scores(scores) for r in study.results}
    again = paired_power(fitted["knn"], fitted["best-single"], 0.03, n_boot=N_BOOT, seed=2)
    assert again == a and a.n_needed == sample_size(a.sd, 0.03) and a.reason is None
    # each router's mu_o with its interval, as evaluate reports it; then one record per metric, under router A
    mu_o = [(r.router, r.value, r.ci_low, r.ci_high) for r in result.select(metric="mu_o")]
    assert mu_o == [(r.spec, r.metrics["mu_o"], *r.ci["mu_o"]) for r in ev.results]
    assert [(r.router, r.metric) for r in result.records[2:]] == [("knn", m) for m in RECORDED]
    assert {r.slice for r in result.records} == {""}
    assert result.value("knn", "n_needed") == a.n_needed
    diff = result.select("knn", "mu_o_difference")[0]
    assert (diff.value, diff.ci_low, diff.ci_high) == (a.mean_difference, a.ci[0], a.ci[1])
    assert result.select("knn", "sd_difference")[0].ci_low is None
    assert result.to_dict()["settings"]["delta"] == 0.03


def _test_scores(table: RoutingTable, seed: int) -> np.ndarray:
    from routerlab.data.splits import make_split
    from routerlab.protocols.full import complete_rows

    _, test = make_split(table, "random:0.3", seed).apply(table)
    return np.asarray(test.score[complete_rows(test)])


def test_versus_compares_every_router_with_one(table: RoutingTable) -> None:
    settings = {"delta": 0.05, "n_boot": N_BOOT}
    pair = run_protocol("power", table, settings, routers=["knn", "best-single"])
    many = run_protocol("power", table, {**settings, "versus": "best-single"},
                        routers=["oracle", "knn", "best-single"])
    assert [(c.router, c.versus) for c in many.native.comparisons] == [("oracle", "best-single"),
                                                                       ("knn", "best-single")]
    assert many.native.comparisons[1].analysis == pair.native.comparisons[0].analysis and not many.skipped
    # versus has its mu_o only (an experiment's cell for it stores that)
    assert {r.metric for r in many.records if r.router == "best-single"} == {"mu_o"}
    assert {r.router for r in many.records if r.metric == "n_needed"} == {"oracle", "knn"}
    # versus need not be among the routers (an experiment reruns only the cells it lacks)
    alone = run_protocol("power", table, {**settings, "versus": "best-single"}, routers=["knn"])
    assert alone.native.comparisons[0].analysis == pair.native.comparisons[0].analysis


def test_identical_routers_say_so(table: RoutingTable) -> None:
    # the training-mean router always picks the best single actor: identical choices, sd 0
    result = run_protocol("power", table, {"delta": 0.02, "n_boot": N_BOOT}, routers=[MeanRouter(), "best-single"])
    a = result.native.comparisons[0].analysis
    assert a.sd == 0.0 and a.n_needed is None and a.reason is not None and "score the same" in a.reason
    assert result.value("MeanRouter(noise=0.0)", "n_needed") is None
    assert result.value("MeanRouter(noise=0.0)", "sd_difference") == 0.0


@pytest.mark.parametrize(("routers", "versus", "message"), [
    (["knn"], None, "power compares exactly two routers A,B (e.g. knn,best-single), got 1: knn"),
    (["knn", "oracle", "random"], None, "got 3: knn, oracle, random; to compare several with one, set versus"),
    (["knn", "knn"], None, "power compares two different routers; 'knn' is named twice"),
    (["knn", "knn"], "oracle", "'knn' is named twice"),
    (["oracle"], "oracle", "power needs a router to compare with versus 'oracle'"),
])
def test_which_routers(routers: list[str], versus: str | None, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        comparison_pairs(routers, versus)
    with pytest.raises(UsageError, match="power"):
        run_protocol("power", demo(100), {"delta": 0.1, "versus": versus}, routers=routers)


def test_delta_is_required_at_run() -> None:
    with pytest.raises(UsageError, match=r"^delta: must be given: the difference in mu_o to detect, e\.g\. 0\.02$"):
        run_protocol("power", demo(100), {}, routers=["knn", "best-single"])


@pytest.mark.parametrize(("key", "value", "reason"), [
    ("delta", float("nan"), "must be a finite number in (0, 1], got nan"),
    ("delta", float("inf"), "must be a finite number in (0, 1], got inf"),
    ("delta", 0, "must be a finite number in (0, 1], got 0"),
    ("delta", -0.1, "must be a finite number in (0, 1], got -0.1"),
    ("delta", 1.5, "must be a finite number in (0, 1], got 1.5"),
    ("alpha", 0, "must be a finite number in (0, 1), got 0"),
    ("alpha", 1, "must be a finite number in (0, 1), got 1"),
    ("power", 1.0, "must be a finite number in (0, 1), got 1"),
    ("power", 0.01, "must be above alpha (0.05): a two-sided test at level alpha has at least that power at any "
                    "size, got 0.01"),
    ("n_boot", 10, "must be an integer in [40, 1,000,000], got 10"),
])
def test_settings_give_one_message_from_every_source(key: str, value: float, reason: str) -> None:
    with pytest.raises(UsageError) as python:
        PowerSettings.from_mapping({key: value})
    with pytest.raises(UsageError) as toml:
        PowerSettings.from_mapping({key: value}, where=lambda k: f"exp.toml: protocols[1].{k}")
    with pytest.raises(UsageError) as cli:
        PowerSettings.from_cli(**{key: value})
    option = "--" + key.replace("_", "-")
    assert (str(python.value), str(toml.value), str(cli.value)) == (
        f"{key}: {reason}", f"exp.toml: protocols[1].{key}: {reason}", f"{option}: {reason}")


def test_settings_defaults_and_none() -> None:
    s = PowerSettings.from_mapping({"delta": 0.02, "versus": "none"})
    assert (s.delta, s.alpha, s.power, s.versus, s.split, s.encoder, s.n_boot) == (
        0.02, 0.05, 0.8, None, "given", "tfidf", 1000)
    assert PowerSettings().delta is None  # required at run, not at construction (defaults are built elsewhere)
