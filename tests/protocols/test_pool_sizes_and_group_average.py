"""The RouterEval replication's pieces of the scaling and groups protocols: pool sizes ``all`` and ``A..all``
resolved against the table when the run starts, the average over the three candidate groups as records, and V_R on
every group (a ``reference``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.protocols.base import SettingError, run_protocol
from routerlab.protocols.groups import GroupsSettings
from routerlab.protocols.scaling import ScalingSettings, check_pool_size_spec, resolve_pool_sizes


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return demo(300, seed=3)


# -- the m setting -------------------------------------------------------------------------------------------
def test_pool_size_forms_read_the_same_from_text_and_from_a_file() -> None:
    assert check_pool_size_spec("2..4,all") == (2, 3, 4, "all")
    assert check_pool_size_spec([3, "1..ALL"]) == (3, "1..all")
    assert check_pool_size_spec(5) == (5,)
    assert check_pool_size_spec("3|all, 10 | ALL") == ("3|all", "10|all")
    assert ScalingSettings.from_cli(m="2..all").m == ScalingSettings.from_mapping({"m": ["2..all"]}).m == ("2..all",)
    assert GroupsSettings.from_cli(m="3,5,all") == GroupsSettings.from_mapping({"m": [3, 5, "all"]})
    # plain integers keep their type and their JSON: the settings of an existing run read as before
    assert ScalingSettings.from_mapping({"m": [2, 3]}).to_dict()["m"] == [2, 3]
    assert ScalingSettings().m == (2, 3, 5) and GroupsSettings().m == (3, 5)


@pytest.mark.parametrize(("value", "reason"), [
    ("2,0", "item 2: must be an integer >= 1, got 0"),  # today's messages for plain integers
    ("2,2", "lists 2 twice"),
    ("", "needs at least one value"),
    ("2,x", "item 2: must be an integer, 'all', 'N|all' or a range like '2..all', got a string ('x')"),
    ("0|all", "item 1: must be an integer >= 1, got 0"),
    ("5..3", "item 1: the range '5..3' is empty (it ends below its start)"),
    ("0..all", "item 1: must be an integer >= 1, got 0"),
    ("a..all", "item 1: a range is A..B or A..all with integers A, B >= 1, got 'a..all'"),
    ("3,2..4", "lists 3 twice"),
])
def test_bad_pool_sizes_are_one_line_naming_the_item(value: str, reason: str) -> None:
    with pytest.raises(UsageError) as cli:
        ScalingSettings.from_cli(m=value)
    assert str(cli.value) == f"--m: {reason}"
    with pytest.raises(UsageError) as toml:
        GroupsSettings.from_mapping({"m": value})
    assert str(toml.value) == f"m: {reason}"
    with pytest.raises(UsageError, match=r"^m: item 1: must be an integer, got a number \(2.0\): write 2$"):
        ScalingSettings.from_mapping({"m": [2.0]})


def test_resolving_against_the_pool() -> None:
    assert resolve_pool_sizes(("1..all",), 4) == ([1, 2, 3, 4], [])
    assert resolve_pool_sizes((3, "all"), 3) == ([3], [])  # the same size twice: once, at its first place
    assert resolve_pool_sizes((5, 2, "all"), 10) == ([5, 2, 10], [])  # explicit order kept (seeded draws follow it)
    sizes, notes = resolve_pool_sizes((2, "12..all"), 10)
    assert sizes == [2] and notes == ["m = 12..all: no pool size on the table's 10 actors, left out"]
    with pytest.raises(SettingError, match=r"^m: no pool size left on the table's 10 actors \(12\.\.all\)$"):
        resolve_pool_sizes(("12..all",), 10)
    # N|all: N on a pool of at least N actors, the whole pool (said in a note) on a smaller one
    assert resolve_pool_sizes(("3|all", "10|all"), 10) == ([3, 10], [])
    assert resolve_pool_sizes(("3|all", "5|all", "10|all"), 4) == ([3, 4], [
        "m = 5|all: the table's 4 actors are fewer than 5, so 4 (all of them)",
        "m = 10|all: the table's 4 actors are fewer than 10, so 4 (all of them)"])


# -- scaling -------------------------------------------------------------------------------------------------
def test_scaling_up_to_all_is_the_explicit_curve(table: RoutingTable) -> None:
    n = table.n_actors
    explicit = run_protocol("scaling", table, {"m": list(range(2, n + 1)), "samples": 7}, seed=4)
    symbolic = run_protocol("scaling", table, {"m": "2..all", "samples": 7}, seed=4)
    assert symbolic.native.to_dict() == explicit.native.to_dict()
    assert symbolic.records == explicit.records
    assert symbolic.settings.to_dict()["m"] == ["2..all"]  # the run records what was asked, the curve what it drew
    # 'all' on a pool: the whole pool, whose r_o(1) is the test oracle of every actor
    whole = run_protocol("scaling", table, {"m": "all", "samples": 3}, seed=4).native
    assert whole.m == [n] and whole.oracle_p[1.0]["std"] == [0.0]
    # an explicit size above the pool keeps today's error; a range starting above it is left out with a note
    with pytest.raises(SettingError, match=rf"^m: pool size 9 is larger than the table's {n} actors$"):
        run_protocol("scaling", table, {"m": [2, 9, "all"], "samples": 3})
    res = run_protocol("scaling", table, {"m": [2, "9..all"], "samples": 3})
    assert res.native.m == [2] and res.notes == [f"m = 9..all: no pool size on the table's {n} actors, left out"]


# -- groups --------------------------------------------------------------------------------------------------
def _graded_pool() -> RoutingTable:
    """10 actors with train means 0.95 (not eligible), 0.85, ..., 0.15, 0.05 (not eligible): 8 eligible."""
    rng = np.random.default_rng(0)
    means = [0.95, 0.85, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.15, 0.05]
    score = (rng.random((600, 10)) < np.array(means)).astype(np.float32)
    split = ["train"] * 400 + ["test"] * 200
    return RoutingTable.from_arrays(score, actors=[f"a{j}" for j in range(10)], split=split,
                                    text=[f"question {i} about topic {i % 7}" for i in range(600)])


def test_groups_all_is_the_whole_eligible_pool_for_every_kind() -> None:
    t = _graded_pool()
    res = run_protocol("groups", t, {"m": ["all"], "draws": 5, "n_boot": 40}, routers=["oracle"])
    groups = res.native.groups
    eligible = {f"a{j}" for j in range(1, 9)}  # a0 (0.95) and a9 (0.05) are outside [0.1, 0.9]
    assert [g.m for g, _ in groups] == [8, 8, 8]
    assert all(set(g.actors) == eligible for g, _ in groups)
    with pytest.raises(SettingError, match=r"^m: pool size 11 is larger than the table's 10 actors$"):
        run_protocol("groups", t, {"m": [11]}, routers=["oracle"])
    capped = run_protocol("groups", t, {"m": ["3|all", "10|all"], "draws": 5, "n_boot": 40}, routers=["oracle"])
    assert [g.m for g, _ in capped.native.groups] == [3, 8] * 3
    assert capped.notes[0] == ("m = 10|all: the table's 8 eligible actors (train performance in [0.1, 0.9]) are "
                               "fewer than 10, so 8 (all of them)")
    res = run_protocol("groups", t, {"m": [2, "9..all"], "draws": 5, "n_boot": 40}, routers=["oracle"])
    assert {g.m for g, _ in res.native.groups} == {2}
    assert res.notes[0] == ("m = 9..all: no pool size on the table's 8 eligible actors (train performance in "
                            "[0.1, 0.9]), left out")


def test_the_average_over_the_three_groups(table: RoutingTable) -> None:
    routers = ["oracle", "random", "best-single", "knn"]
    res = run_protocol("groups", table, {"m": [2, 3], "draws": 10, "n_boot": 100}, seed=1, routers=routers)
    kinds = ("all-strong", "all-weak", "strong-to-weak")
    for m in (2, 3):
        for router in routers:
            for metric in ("mu_o", "v_b", "e_p"):
                per = [res.select(router, metric, f"m={m},group={k}")[0] for k in kinds]
                avg = res.select(router, metric, f"m={m},group=average")
                assert len(avg) == 1
                assert avg[0].value == pytest.approx(sum(r.value for r in per) / 3)
                if per[0].ci_low is None:
                    assert avg[0].ci_low is None
                else:
                    assert avg[0].ci_low == pytest.approx(sum(r.ci_low for r in per) / 3)  # type: ignore[misc]
                    assert avg[0].ci_high == pytest.approx(sum(r.ci_high for r in per) / 3)  # type: ignore[misc]
        oracles = [g.train_oracle for g, _ in res.native.groups if g.m == m]
        assert res.value("group", "train_oracle", f"m={m},group=average") == pytest.approx(np.mean(oracles))
    # per-group records are those of before: the average is added, nothing else changes
    assert {r.slice for r in res.records} == {f"m={m},group={k}" for m in (2, 3) for k in (*kinds, "average")}


def test_v_r_on_every_group(table: RoutingTable) -> None:
    res = run_protocol("groups", table, {"m": [3], "draws": 10, "n_boot": 100, "reference": "0.637"}, seed=1,
                       routers=["oracle", "knn"])
    for rec in res.select("oracle", "mu_o") + res.select("knn", "mu_o"):
        v_r = res.select(rec.router, "v_r", rec.slice)[0]
        assert v_r.value == pytest.approx(rec.value / 0.637)
        assert v_r.ci_low == pytest.approx(rec.ci_low / 0.637)  # type: ignore[operator]
    none = run_protocol("groups", table, {"m": [3], "draws": 10, "n_boot": 100}, seed=1, routers=["oracle"])
    assert not none.select(metric="v_r")
    # an actor of the table outside a group: its mean on that group's evaluated test queries, a fixed number
    from routerlab.protocols.groups_eval import group_reference

    score = table.score.copy()
    test = table.select_queries(np.flatnonzero(table.queries.split == "test"))
    s = test.score.copy()
    s[:10, 1] = np.nan  # actor 1 unobserved on 10 test queries: a group holding it evaluates the other rows
    test = RoutingTable(queries=test.queries, actors=test.actors, score=s, name=test.name)
    outside = test.actor_names[0]
    perf = group_reference(outside, test, test.actor_names[1:3])
    assert perf == pytest.approx(float(test.score[10:, 0].astype(np.float64).mean()))
    assert group_reference(outside, test, test.actor_names[0:2]) == outside  # held: the full protocol's rule
    assert group_reference("0.637", test, test.actor_names[1:3]) == "0.637"
    del score
    with pytest.raises(UsageError, match="neither an actor of this table nor a number"):
        group_reference("gpt-4", test, test.actor_names[1:3])


def test_the_scaling_figure_can_draw_a_reference_line(table: RoutingTable, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``scaling --reference PERF`` is presentation: the line of the figure, recorded as the curve's reference; every
    number of the curve is the one without it."""
    import json

    from routerlab.cli import main

    table_dir = str(table.save(tmp_path / "t"))
    base = ["scaling", table_dir, "--m", "2,3", "--samples", "5", "--json"]
    assert main(base) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main([*base, "--reference", "0.637", "-o", str(tmp_path / "fig")]) == 0
    with_line = json.loads(capsys.readouterr().out)
    assert plain["reference"] is None and with_line["reference"] == 0.637
    assert {k: v for k, v in with_line.items() if k != "reference"} == {k: v for k, v in plain.items()
                                                                         if k != "reference"}
    assert (tmp_path / "fig" / "scaling.png").stat().st_size > 0
    assert main([*base, "--reference", "inf"]) == 2
    assert capsys.readouterr().err.strip() == "routerlab: error: --reference: must be a finite number, got inf"
