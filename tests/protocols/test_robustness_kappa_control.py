"""kappa_rho and the control level in the robustness protocol (SPEC 3): kappa by hand on a keyword router, its
bootstrap interval recomputed resample by resample (rho and rho_chance both), the collapsed router (null, flagged),
the demo's anchors (uniform random near 0, every value in [-1, 1]); the control level left out of every summary over
levels, and the falsifier on a synthetic table whose optimal actors change under control."""

from __future__ import annotations

import json
import math

import numpy as np
import numpy.typing as npt
import pytest

from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.features.base import Features
from routerlab.metrics.bootstrap import percentile_interval, resample_indices
from routerlab.metrics.robustness import kappa_rho
from routerlab.perturb.base import PerturbationSet, Variant, perturb
from routerlab.protocols.robustness import robustness, robustness_records
from routerlab.reports.files import json_safe
from routerlab.reports.robustness_report import robustness_markdown, robustness_text
from routerlab.routers.base import Router


class Keyword(Router):
    """'beta' -> actor 1, 'gamma' -> actor 2, else actor 0."""

    name = "keyword-kappa-test"

    def _fit(self, train: RoutingTable, features: Features) -> None:
        pass

    def _scores(self, features: Features) -> npt.ArrayLike:
        texts = [str(t) for t in features.queries.text.tolist()]
        pick = np.array([1 if "beta" in t else 2 if "gamma" in t else 0 for t in texts])
        return np.asarray(np.eye(len(self.actor_names))[pick], dtype=np.float64)


TEST_SCORES = [[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 1, 0]]  # optimal sets {A}, {A}, {B}, {B}


def table() -> RoutingTable:
    score = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], *TEST_SCORES]
    return RoutingTable.from_arrays(
        np.array(score, dtype=np.float32), actors=["A", "B", "C"],
        query_ids=["t0", "t1", "t2", "t3", "q0", "q1", "q2", "q3"],
        text=["red", "green", "blue", "plum", "alpha one", "alpha two", "beta three", "beta four"],
        split=["train"] * 4 + ["test"] * 4)


def variants(control: dict[str, str] | None = None) -> PerturbationSet:
    """character: q0 kept (A), q1 moved (B), q2 kept (B), q3 moved (C): rho 1/2 on p = (1/2, 1/2, 0), kappa 0.
    control (all kept unless given): rho 1 at that level, left out of the whole."""
    texts = {("q0", "character"): "alpha uno", ("q1", "character"): "beta two", ("q2", "character"): "beta tres",
             ("q3", "character"): "gamma four"}
    ctl = control or {"q0": "alpha uno!", "q1": "alpha dos", "q2": "beta 3", "q3": "beta cuatro"}
    texts.update({(q, "control"): t for q, t in ctl.items()})
    return PerturbationSet(tuple(Variant(q, lv, 0, t) for (q, lv), t in texts.items()), ("character", "control"),
                           1, seed=0)


def test_kappa_by_hand_and_control_left_out_of_the_whole() -> None:
    rob = robustness(table(), [Keyword()], variants(), n_boot=200)
    r = rob.results[0]
    assert rob.meaning_changing == ["control"] and r.changing_levels == ("control",)
    assert r.choice.tolist() == [0, 0, 1, 1]
    assert r.rho_by_level == pytest.approx({"character": 0.5, "control": 1.0})
    assert r.rho == pytest.approx(0.5)  # the control level's 1.0 is not in the whole (it would make it 0.75)
    # the paper's perturbed accuracy (original's outcome): character A 1, B 0, B 1, C 0; control all kept -> 1;
    # the whole leaves control out, as rho does
    assert r.perturbed_accuracy_orig_by_level == pytest.approx({"character": 0.5, "control": 1.0})
    assert r.perturbed_accuracy_orig == pytest.approx(0.5)
    assert r.rho_by_actor == pytest.approx({"A": 0.5, "B": 0.5, "C": 0.0})
    assert r.weakest_level() is None  # one meaning-preserving level: none is weaker (control is no candidate)
    k = r.kappa
    assert k is not None and k.rho_chance == pytest.approx(0.5)
    assert k.value == pytest.approx(0.0) and k.by_level == pytest.approx({"character": 0.0, "control": 1.0})
    # per actor: rho^(A) = 1/2 with chance p_A = 1/2 -> 0; C was never chosen -> null
    assert k.by_actor["A"] == pytest.approx(0.0) and k.by_actor["B"] == pytest.approx(0.0)
    assert math.isnan(k.by_actor["C"]) and k.collapsed == ()
    d = json.loads(json.dumps(json_safe(rob.to_dict()), allow_nan=False))
    res = d["results"][0]
    assert res["kappa_rho"] == pytest.approx(0.0) and res["kappa_rho_flag"] is None
    assert res["rho_chance"] == pytest.approx(0.5) and res["kappa_rho_by_actor"]["C"] is None
    assert d["meaning_changing_levels"] == ["control"] and "falsifier" not in d  # no outcomes: untested
    assert any("untested" in n for n in d["notes"])
    records = {(x.metric, x.slice): x for x in robustness_records(rob)}
    assert records[("kappa_rho", "")].value == pytest.approx(0.0)
    assert records[("kappa_rho", "level=control")].value == pytest.approx(1.0)
    assert {("kappa_rho", "actor=A"), ("kappa_rho", "actor=B")} <= set(records)
    assert ("kappa_rho", "actor=C") not in records  # as rho: no record for an actor the router never chose


def test_interval_recomputes_rho_and_the_chance_per_resample(monkeypatch: pytest.MonkeyPatch) -> None:
    """The protocol's kappa_rho interval is the percentile interval of kappa_rho recomputed on each bootstrap
    resample of the test queries (rho and rho_chance both), the resamples every other statistic uses; a resample
    whose originals all went to one actor has no kappa and is left out. (4 test queries, fewer than an interval
    needs: the minimum is lifted here to pin the arithmetic by hand; tests/test_cli_few_queries.py pins the gate.)"""
    monkeypatch.setattr("routerlab.metrics.bootstrap.MIN_QUERIES", 1)
    rob = robustness(table(), [Keyword()], variants(), n_boot=300, seed=4)
    r = rob.results[0]
    assert r.kappa is not None
    choice, pert = r.choice, r.perturbed_choice
    char = pert[:, [i for i, lv in enumerate(rob.column_levels) if lv == "character"]]
    reps = [kappa_rho(choice[idx], char[idx], 3) for chunk in resample_indices(4, 300, 4) for idx in chunk]
    assert any(math.isnan(x) for x in reps)  # some resamples draw one actor only
    lo, hi = percentile_interval(reps)
    assert r.kappa.ci == pytest.approx((lo, hi))
    assert r.kappa.by_level_ci["character"] == pytest.approx((lo, hi))
    assert lo < 0 < hi


def test_collapsed_router_is_null_and_flagged() -> None:
    t = table()
    rob = robustness(t, ["best-single"], variants(), n_boot=50)
    r = rob.results[0]
    assert r.rho == 1.0 and r.kappa is not None and math.isnan(r.kappa.value)
    d = json_safe(r.to_dict())
    assert d["kappa_rho"] is None and d["kappa_rho_ci"] == [None, None] and d["kappa_rho_flag"] == "collapsed"
    assert d["kappa_rho_by_level_flag"] == {"character": "collapsed", "control": "collapsed"}
    assert d["rho_chance"] == 1.0
    records = [x for x in robustness_records(rob) if x.metric == "kappa_rho"]
    assert records and all(x.value is None for x in records)
    assert "null (collapsed)" in robustness_text(rob)


def test_demo_random_near_zero_and_values_in_range() -> None:
    t = demo(600, seed=5)
    test = t.select_split("test")
    pset = perturb(test.queries.ids.tolist(), test.queries.text.tolist(), ["character"], 3, seed=0)
    rob = robustness(t, ["random", "best-single", "knn", "linear"], pset, n_boot=200)
    by = {r.spec: r for r in rob.results}
    rnd = by["random"].kappa
    assert rnd is not None
    n_var = int((by["random"].perturbed_choice >= 0).sum())
    m = len(rob.actor_names)
    sd = math.sqrt((1 / m) * (1 - 1 / m) / n_var) / (1 - 1 / m)
    assert abs(rnd.value) < 4 * sd and rnd.ci[0] <= 0 <= rnd.ci[1]
    assert by["best-single"].kappa is not None and by["best-single"].kappa.flag() == "collapsed"
    for spec in ("random", "knn", "linear"):
        k = by[spec].kappa
        assert k is not None and not math.isnan(k.value), spec
        assert -1 <= k.value <= 1 and all(-1 <= v <= 1 for v in k.by_level.values()), spec
        assert all(-1 <= v <= 1 for v in k.by_actor.values() if not math.isnan(v)), spec
    assert by["knn"].kappa.value > 0.5  # type: ignore[union-attr]  # knn keeps most variants together


# ------------------------------------------------------------------------------------------ the falsifier
def outcomes(changed: dict[str, list[str]]) -> RoutingTable:
    """Outcomes of every variant: the original's scores, except the variant keys in ``changed[level]``, whose
    optimal set moves to {C}."""
    rows, ids = [], []
    for lv in ("character", "control"):
        for i in range(4):
            key = f"q{i}#{lv}#0"
            rows.append([0, 0, 1] if f"q{i}" in changed.get(lv, []) else TEST_SCORES[i])
            ids.append(key)
    return RoutingTable.from_arrays(np.array(rows, dtype=np.float32), actors=["A", "B", "C"], query_ids=ids)


def test_falsifier_on_a_synthetic_table_where_control_changes_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("routerlab.metrics.bootstrap.MIN_QUERIES", 1)  # a 4-query table: its intervals pinned by hand
    out = outcomes({"character": ["q1"], "control": ["q0", "q1", "q2"]})
    rob = robustness(table(), [Keyword(), "random"], variants(), outcomes=out, n_boot=400)
    inv = rob.results[0].invariance
    # the whole leaves control out: character only, 1 of 4 changed
    assert inv["n_known"] == 4 and inv["changed_share"] == pytest.approx(0.25)
    assert inv["by_level"]["control"]["changed_share"] == pytest.approx(0.75)
    assert rob.results[0].perturbed_accuracy == pytest.approx(
        rob.results[0].perturbed_accuracy_by_level["character"])  # type: ignore[index]
    f = rob.falsifier
    assert f is not None and set(f) == {"control"}
    c = f["control"]
    assert c["changed_share"] == pytest.approx(0.75) and c["n_known"] == 4
    v = c["versus"]["character"]
    assert v["changed_share"] == pytest.approx(0.25) and v["difference"] == pytest.approx(0.5)
    assert c["exceeds_every_level"] is True
    lo, hi = v["difference_ci"]
    assert lo <= 0.5 <= hi
    # 4 queries: the intervals are wide and overlap; the sentence says both things
    assert c["intervals_separate"] is False
    assert c["sentence"].startswith("Falsifier (level control, meaning-changing edits): the optimal actor set "
                                    "changed for 75.0% [")
    assert "more often than at every meaning-preserving level (the highest: character 25.0% [" in c["sentence"]
    assert "the 95% intervals do not separate: control's overlaps character's, and the paired difference's " \
           "interval reaches 0 for character." in c["sentence"]
    assert c["sentence"] in robustness_text(rob) and "difference [95% CI]" in robustness_markdown(rob)
    # the falsifier does not depend on the router: the same for both, and equal to each router's by-level block
    assert rob.results[1].invariance["by_level"]["control"]["changed_share"] == pytest.approx(0.75)
    d = json.loads(json.dumps(json_safe(rob.to_dict()), allow_nan=False))
    assert d["falsifier"]["control"]["versus"]["character"]["n_known"] == 4


def test_falsifier_says_when_control_does_not_change_more() -> None:
    out = outcomes({"character": ["q1", "q2"], "control": ["q0"]})
    rob = robustness(table(), [Keyword()], variants(), outcomes=out, n_boot=100)
    c = rob.falsifier["control"]  # type: ignore[index]
    assert c["changed_share"] == pytest.approx(0.25) and c["exceeds_every_level"] is False
    assert "NOT more often than at every meaning-preserving level (character at least as often" in c["sentence"]


def test_falsifier_separates_on_a_larger_synthetic_table() -> None:
    """60 queries: control changes the optimal set of every variant, character of none: the intervals separate
    and every paired difference lies above 0."""
    n = 60
    score = np.zeros((4 + n, 2), dtype=np.float32)
    score[:4] = [[1, 0], [0, 1], [1, 0], [0, 1]]
    score[4:, 0] = 1
    ids = [f"t{i}" for i in range(4)] + [f"q{i}" for i in range(n)]
    t = RoutingTable.from_arrays(score, actors=["A", "B"], query_ids=ids, text=[f"text {i}" for i in range(4 + n)],
                                 split=["train"] * 4 + ["test"] * n)
    vs = PerturbationSet(tuple(Variant(f"q{i}", lv, 0, f"text {i} {lv}") for i in range(n)
                               for lv in ("character", "control")), ("character", "control"), 1)
    rows = [[1, 0] if lv == "character" else [0, 1] for i in range(n) for lv in ("character", "control")]
    out = RoutingTable.from_arrays(np.array(rows, dtype=np.float32), actors=["A", "B"],
                                   query_ids=[f"q{i}#{lv}#0" for i in range(n) for lv in ("character", "control")])
    rob = robustness(t, ["best-single"], vs, outcomes=out, n_boot=200)
    c = rob.falsifier["control"]  # type: ignore[index]
    assert c["changed_share"] == 1.0 and c["versus"]["character"]["changed_share"] == 0.0
    assert c["exceeds_every_level"] and c["intervals_separate"] and c["differences_above_zero"]
    assert c["sentence"].endswith("the 95% intervals separate: control's lies above every level's, and every "
                                  "paired difference's lies above 0.")
