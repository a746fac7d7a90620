"""The ``society``, ``scaling`` and ``groups`` protocols: ``run_protocol`` gives the numbers the commands print,
the settings' checks read the same from Python, a TOML-style mapping and the command line, and every record
carries its slice."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab.cli import main
from routerlab.data.splits import given_split
from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.protocols.base import SettingError, get_protocol, protocol_names, run_protocol
from routerlab.protocols.groups import GroupsSettings
from routerlab.protocols.scaling import ScalingSettings, scaling_curve
from routerlab.protocols.society import SocietySettings

PROTOCOL_KEYS = ("protocol", "settings", "records")
TIMING = ("fit_seconds", "score_seconds")


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return demo(300, seed=3)


@pytest.fixture(scope="module")
def table_dir(table: RoutingTable, tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(table.save(tmp_path_factory.mktemp("proto") / "t"))


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main([*args, "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def cli_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(list(args)) == 2
    return capsys.readouterr().err.strip().removeprefix("routerlab: error: ")


def untimed(x: Any) -> Any:
    """A JSON record without the seconds each router took (they differ between two runs)."""
    if isinstance(x, dict):
        return {k: untimed(v) for k, v in x.items() if k not in TIMING}
    if isinstance(x, list):
        return [untimed(v) for v in x]
    return x


def test_the_three_are_registered_and_say_whether_they_take_routers() -> None:
    assert {"society", "scaling", "groups"} <= set(protocol_names())
    assert not get_protocol("society").uses_routers and not get_protocol("scaling").uses_routers
    assert get_protocol("groups").uses_routers
    names = {d["name"] for d in get_protocol("society").describe()["settings"]}
    assert names == {"metric", "linkage", "coreset", "alpha", "by", "split", "nan", "curve_max"}
    with pytest.raises(UsageError, match="protocol groups needs at least one router"):
        run_protocol("groups", demo(60, seed=0), {"m": [2]})


# -- society ---------------------------------------------------------------------------------------------------
def orthogonal() -> RoutingTable:
    """Three actors, each right on its own two queries only: every cosine distance is 1 (= d_max), so
    HSE = log2(3) exactly, normalised 1; the greedy pair has HSE 1 (one bit over [0, 1))."""
    score = np.repeat(np.eye(3, dtype=np.float32), 2, axis=0)  # query 2j, 2j+1 -> actor j
    return RoutingTable.from_arrays(score, actors=["a", "b", "c"], dataset=list("xxyyzz"), split=["train"] * 6)


def test_society_records_on_a_hand_computed_pool() -> None:
    res = run_protocol("society", orthogonal(), {"coreset": 2, "by": ["dataset"]})
    assert res.value("pool", "hse") == pytest.approx(math.log2(3))
    assert res.value("pool", "hse_normalized") == pytest.approx(1.0)
    assert res.value("pool", "max_hse") == pytest.approx(math.log2(3))
    assert res.value("pool", "n_actors") == 3 and res.value("pool", "n_items") == 6
    assert res.value("pool", "oracle_accuracy") == 1.0  # someone answers every query
    # 90% of log2(3) = 1.43 is more than the pair's 1 bit: all three are needed
    assert res.value("coreset", "size_90") == 3 and res.value("coreset", "size_95") == 3
    assert res.value("coreset", "hse", "size=1") == 0.0
    assert res.value("coreset", "hse", "size=2") == pytest.approx(1.0)
    assert res.value("coreset", "oracle_accuracy", "size=2") == pytest.approx(4 / 6)
    assert not res.select(metric="objective")  # alpha = 1: no joint objective
    # one perfect specialist per dataset is the same pool again
    assert res.value("specialists", "hse", "by=dataset") == pytest.approx(math.log2(3))
    assert res.value("specialists", "n_actors", "by=dataset") == 3
    assert all(r.ci_low is None and r.ci_high is None for r in res.records)
    assert {r.slice for r in res.records} == {"", "size=1", "size=2", "size=3", "by=dataset"}


def test_society_run_prints_what_the_command_prints(table: RoutingTable, table_dir: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    args = {"coreset": 3, "alpha": 0.5, "by": ["dataset", "tier"], "metric": "correlation", "linkage": "average"}
    res = run_protocol("society", table, args, seed=0)
    out = cli_json(capsys, "society", table_dir, "--coreset", "3", "--alpha", "0.5", "--by", "dataset",
                   "--by", "tier", "--metric", "correlation", "--linkage", "average")
    assert {k: v for k, v in out.items() if k not in PROTOCOL_KEYS} == json.loads(json.dumps(res.native.to_dict()))
    assert out["protocol"] == "society" and out["settings"] == res.settings.to_dict()
    assert out["records"] == [r.to_dict() for r in res.records]
    # the records hold the printed numbers, each under its slice
    assert res.value("pool", "hse") == out["hse"]
    assert res.value("coreset", "size_90") == out["coreset"]["size_90"]
    point = out["coreset"]["curve"][2]
    assert res.value("coreset", "objective", "size=3") == point["objective"]
    assert res.value("specialists", "hse", "by=tier") == out["specialists"][1]["hse"]
    assert res.value("specialists", "n_actors", "by=dataset+tier") == out["specialists_union"]["n_experts"]
    # the text output prints the same numbers
    assert main(["society", table_dir, "--coreset", "3", "--alpha", "0.5", "--by", "dataset,tier", "--metric",
                 "correlation", "--linkage", "average"]) == 0
    text = capsys.readouterr().out
    assert f"HSE {out['hse']:.4f} of at most {out['max_hse']:.4f}" in text
    assert f"coreset of 3: {', '.join(out['coreset']['order'])}" in text


def test_society_figure_curves_come_from_the_run() -> None:
    from routerlab.society.coresets import greedy_coreset, random_subsets_curve

    t = demo(200, seed=1)
    report = run_protocol("society", t, {"curve_max": 5}).native
    assert report.coreset is None
    div = report.diversity
    curve = report.figure_curve()
    ref = greedy_coreset(div.distances, 2, div.linkage, names=div.names, full_hse=div.hse, stop_fraction=None,
                         max_size=5)
    assert curve is not None and curve.order == ref.order and len(curve.curve) == 5
    assert report.figure_curve() is curve  # computed once
    rnd = report.random_baseline(7, seed=4)
    exp = random_subsets_curve(div.distances, range(1, 6), div.linkage, n_draws=7, seed=4)
    assert rnd is not None and np.array_equal(rnd.mean, exp.mean) and np.array_equal(rnd.low, exp.low)


def test_society_settings_errors_read_the_same_from_every_source(table_dir: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    toml = "exp.toml: protocols[0]."
    cases = [({"alpha": 0.5}, ["--alpha", "0.5"], "alpha", "applies only with a coreset (a coreset size K)"),
             ({"coreset": 3, "alpha": 2}, ["--coreset", "3", "--alpha", "2"], "alpha",
              "must be a finite number in [0, 1], got 2"),
             ({"metric": "jaccard"}, ["--metric", "jaccard"], "metric",
              "must be one of correlation, cosine, euclidean, manhattan, got 'jaccard'"),
             ({"nan": "keep"}, ["--nan", "keep"], "nan", "must be one of drop, raise, zero, got 'keep'"),
             ({"coreset": 0}, ["--coreset", "0"], "coreset", "must be an integer >= 1, got 0"),
             ({"by": ["dataset", "dataset"]}, ["--by", "dataset", "--by", "dataset"], "by", "lists 'dataset' twice")]
    for values, argv, key, reason in cases:
        with pytest.raises(SettingError) as py:
            SocietySettings(**values)
        assert (py.value.key, py.value.reason) == (key, reason)
        with pytest.raises(UsageError) as from_toml:
            SocietySettings.from_mapping(values, where=lambda k: toml + k)
        assert str(from_toml.value) == f"{toml}{key}: {reason}"
        assert cli_error(capsys, "society", table_dir, *argv) == f"--{key}: {reason}"
    # a coreset larger than the pool is known once the table is: the same reason from Python and the CLI
    with pytest.raises(SettingError, match=r"^coreset: must be in 1..8 \(the pool's actors\), got 9$"):
        run_protocol("society", demo(60, seed=0), {"coreset": 9})
    assert cli_error(capsys, "society", table_dir, "--coreset", "9") == \
        "--coreset: must be in 1..8 (the pool's actors), got 9"


# -- scaling ---------------------------------------------------------------------------------------------------
def test_scaling_run_is_the_curve_the_command_prints(table: RoutingTable, table_dir: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    res = run_protocol("scaling", table, {"m": [2, 3], "samples": 20, "p": [0, 0.5, 1]}, seed=1)
    curve = scaling_curve(table, given_split(table), [2, 3], [0.0, 0.5, 1.0], 20, 1)
    assert res.native.to_dict() == curve.to_dict()
    out = cli_json(capsys, "scaling", table_dir, "--m", "2,3", "--samples", "20", "--p", "0,0.5,1", "--seed", "1")
    assert out["oracle_p"] == json.loads(json.dumps(curve.to_dict()["oracle_p"]))
    assert out["settings"] == {"m": [2, 3], "p": [0.0, 0.5, 1.0], "samples": 20, "split": "given"}
    # mean over pools as the value, the spread over pools under its own names, never as a confidence interval
    assert res.value("oracle-p", "mu_o", "m=3,p=0.5") == curve.oracle_p[0.5]["mean"][1]
    assert res.value("oracle-p", "mu_o_q05", "m=2,p=1") == curve.oracle_p[1.0]["q05"][0]
    assert res.value("oracle-p", "mu_o_std", "m=2,p=0") == curve.oracle_p[0.0]["std"][0]
    assert res.value("best-single", "mu_o_q95", "m=3") == curve.best_single["q95"][1]
    assert all(r.ci_low is None for r in res.records)
    assert len(res.records) == 2 * (3 + 1) * 4  # m x (p's + best-single) x (mean, std, q05, q95)
    assert main(["scaling", table_dir, "--m", "2,3", "--samples", "20", "--p", "0,0.5,1", "--seed", "1"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[2].split()[-1] == f"{curve.best_single['mean'][1]:.4f}"


def test_scaling_settings_errors_read_the_same_from_every_source(table_dir: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert ScalingSettings.from_cli(m="2,3", p="0,1") == ScalingSettings.from_mapping({"m": [2, 3], "p": [0, 1.0]})
    cases = [({"m": [2, 0]}, ["--m", "2,0"], "m", "item 2: must be an integer >= 1, got 0"),
             ({"p": [0.5, 1.5]}, ["--p", "0.5,1.5"], "p", "item 2: must be a finite number in [0, 1], got 1.5"),
             ({"samples": 0}, ["--samples", "0"], "samples",
              f"must be {ScalingSettings.settings_info()['samples'].rule.describe()}, got 0"),
             ({"split": "halves"}, ["--split", "halves"], "split",
              "unknown split 'halves'; use given, random[:F] or ood:DS1,DS2")]
    for values, argv, key, reason in cases:
        with pytest.raises(UsageError) as from_toml:
            ScalingSettings.from_mapping(values)
        assert str(from_toml.value) == f"{key}: {reason}"
        assert cli_error(capsys, "scaling", table_dir, *argv) == f"--{key}: {reason}"
    with pytest.raises(SettingError, match=r"^m: pool size 9 is larger than the table's 8 actors$"):
        run_protocol("scaling", demo(60, seed=0), {"m": [2, 9]})
    assert cli_error(capsys, "scaling", table_dir, "--m", "2,9") == "--m: pool size 9 is larger than the table's " \
                                                                     "8 actors"


# -- groups ----------------------------------------------------------------------------------------------------
def test_groups_run_gives_the_command_numbers_with_slices(table: RoutingTable, table_dir: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from routerlab.protocols.groups_eval import evaluate_groups

    routers = ["oracle", "best-single", "knn"]
    res = run_protocol("groups", table, {"m": [3], "draws": 20, "n_boot": 100}, seed=2, routers=routers)
    old = evaluate_groups(table, [3], routers, draws=20, seed=2, n_boot=100)
    assert untimed(res.native.to_dict()) == untimed(old)
    out = cli_json(capsys, "groups", table_dir, "--m", "3", "--draws", "20", "--n-boot", "100", "--seed", "2",
                   "--routers", ",".join(routers))
    assert untimed({k: v for k, v in out.items() if k not in PROTOCOL_KEYS}) == untimed(json.loads(json.dumps(old)))
    assert out["records"] == [r.to_dict() for r in res.records]
    for g in old["groups"]:
        where = f"m=3,group={g['kind']}"
        assert res.value("group", "train_oracle", where) == g["train_oracle"]
        for r in g["evaluation"]["results"]:
            rec = res.select(r["spec"], "mu_o", where)[0]
            assert (rec.value, [rec.ci_low, rec.ci_high]) == (r["metrics"]["mu_o"], r["ci"]["mu_o"])
        knn = next(r for r in g["evaluation"]["results"] if r["spec"] == "knn")
        assert res.value("knn", "mu_o_difference", where) == knn["paired"]["mu_o_difference"]
    assert {r.slice for r in res.records} == {"m=3,group=all-strong", "m=3,group=all-weak",
                                              "m=3,group=strong-to-weak", "m=3,group=average"}


def test_groups_settings_errors_read_the_same_from_every_source(table_dir: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    fast = ["--routers", "random,best-single", "--n-boot", "40"]
    rules = GroupsSettings.settings_info()
    cases = [({"draws": 0}, ["--draws", "0"], "draws", f"must be {rules['draws'].rule.describe()}, got 0"),
             ({"n_boot": 3}, ["--n-boot", "3"], "n-boot", f"must be {rules['n_boot'].rule.describe()}, got 3"),
             ({"m": []}, ["--m", ""], "m", "needs at least one value")]
    for values, argv, option, reason in cases:
        with pytest.raises(UsageError) as from_toml:
            GroupsSettings.from_mapping(values)
        assert str(from_toml.value) == f"{option.replace('-', '_')}: {reason}"
        assert cli_error(capsys, "groups", table_dir, *fast, *argv) == f"--{option}: {reason}"
    t = demo(60, seed=0)
    with pytest.raises(SettingError, match=r"^compare_to: 'knn' is not a router of this run"):
        run_protocol("groups", t, {"m": [2], "compare_to": "knn"}, routers=["random"])
    with pytest.raises(SettingError, match=r"^m: pool size 9 is larger than the table's 8 actors$"):
        run_protocol("groups", t, {"m": [9]}, routers=["random"])


def test_groups_on_the_audit_split_share_the_audit_features(tmp_path: Path) -> None:
    """The audit's split keeps only the test queries every actor answered; the groups run on it (features
    encoded once in the run context, cut to those queries) gives what evaluating on that split directly gives."""
    from routerlab.protocols.full import evaluate, featurize
    from routerlab.protocols.groups_eval import groups_result
    from routerlab.reports import audit

    t = demo(300, seed=4)
    score = t.score.copy()
    test_rows = np.flatnonzero(t.queries.split == "test")
    score[test_rows[::3], 0] = np.nan  # actor 0 unobserved on a third of the test queries
    t = RoutingTable(queries=t.queries, actors=t.actors, score=score, name=t.name)
    split, excluded = audit.evaluable_split(t, audit.audit_split(t, 0))
    assert excluded > 0
    train, test = split.apply(t)
    ctx = audit.AuditContext(tmp_path, split, 0, train, test)
    settings = GroupsSettings(m=(2,), draws=10, split=ctx.split_spec, n_boot=40, skip_inapplicable=True)
    res = groups_result(t, settings, 0, ["best-single", "knn"], ctx.run_context, split=ctx.split)
    assert len(ctx.run_context.features) == 1  # encoded once, for the spec's whole split
    feats = featurize(train, test, "tfidf")
    for g, ev in res.native.groups:
        direct = evaluate(t.select_actors(g.actors), ["best-single", "knn"], split=split, features=feats, seed=0,
                          n_boot=40, skip_inapplicable=True)
        assert ev.test_ids.tolist() == direct.test_ids.tolist() == test.queries.ids.tolist()
        for a, b in zip(ev.results, direct.results, strict=True):
            assert (a.metrics, a.ci) == (b.metrics, b.ci) and np.array_equal(a.choice, b.choice)


def test_society_split_takes_a_label_a_spec_s_training_side_or_all(table: RoutingTable, table_dir: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """An experiment hands every protocol its table's split spec: for the society that is the spec's training
    side, so 'given' is the 'train' rows and 'random:F' the seeded random split's training rows."""
    from routerlab import society
    from routerlab.data.splits import random_split

    label = run_protocol("society", table, {"split": "train"})
    given = run_protocol("society", table, {"split": "given"})
    assert given.value("pool", "hse") == label.value("pool", "hse")
    assert given.value("pool", "n_items") == int((table.queries.split == "train").sum())
    rnd = run_protocol("society", table, {"split": "random:0.25", "by": ["dataset"]}, seed=3)
    train = table.select_queries(random_split(table, 0.25, 3).train)
    assert rnd.value("pool", "hse") == society.hse(train, split=None)
    assert rnd.value("pool", "n_items") == train.n_queries
    spec = society.table_specialists(train, "dataset", split=None)
    assert rnd.value("specialists", "hse", "by=dataset") == society.diversity(spec).hse
    assert rnd.provenance.split["kind"] == "random" and label.provenance.split == "train"
    every = run_protocol("society", table, {"split": "all"})
    assert every.value("pool", "n_items") == table.n_queries
    reason = "bad split 'random:2': the test fraction must be in (0, 1)"
    with pytest.raises(SettingError) as bad:
        SocietySettings(split="random:2")
    assert bad.value.reason == reason
    assert cli_error(capsys, "society", table_dir, "--split", "random:2") == f"--split: {reason}"


def test_audit_diversity_on_a_random_split_measures_its_training_rows(tmp_path: Path) -> None:
    from routerlab import society
    from routerlab.reports.audit import audit_split, run_audit

    t = demo(200, seed=2)
    bare = RoutingTable.from_arrays(t.score, actors=t.actor_names, text=t.queries.text.tolist(),
                                    dataset=t.queries.dataset.tolist(), name="no-split")
    sec = run_audit(bare, tmp_path / "a", only=["diversity"], seed=5)["sections"]["diversity"]
    train = bare.select_queries(audit_split(bare, 5).train)
    assert audit_split(bare, 5).kind == "random"
    assert sec["hse"] == society.hse(train, split=None) and sec["n_items"] == train.n_queries
    spec = society.table_specialists(train, "dataset", split=None)
    assert sec["specialists_by_dataset"]["hse"] == society.diversity(spec).hse
