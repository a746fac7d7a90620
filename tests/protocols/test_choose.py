"""``choose`` (issue 23): the rule of each constraint, the prediction interval's formula, hand-checked choices on
tiny tables, each constraint end to end on the demo and on a real table, the JSON keys, the decision card, and bad
options as one line."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab.cli import main
from routerlab.data.splits import make_split
from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.metrics.bootstrap import FewQueriesWarning
from routerlab.protocols.base import run_protocol
from routerlab.protocols.choose import (
    ChooseSettings,
    ChooseWarning,
    call_rate_sd,
    prediction_interval,
    queries_for_rate,
    select,
)

PAIR = {"small": "tiny-2b", "large": "frontier-235b"}


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERLAB_PROGRESS", "0")


# ------------------------------------------------------------------------------------------------ formulas
def test_prediction_interval_formula_by_hand() -> None:
    # t(0.975, 99 df) = 1.98422; half = 1.98422 * 0.5 * sqrt(1/100 + 1/100) = 0.140306
    lo, hi = prediction_interval(0.5, 0.5, 100, 100)
    assert hi - 0.5 == pytest.approx(0.140306, abs=2e-6) and 0.5 - lo == pytest.approx(0.140306, abs=2e-6)
    # more test queries narrow it, never below the development part's own noise
    _, hi2 = prediction_interval(0.5, 0.5, 100, 10**9)
    assert hi2 - 0.5 == pytest.approx(1.98422 * 0.5 / 10, abs=1e-5)


def test_call_rate_noise_by_hand() -> None:
    assert call_rate_sd(0.3, 600, 600) == pytest.approx(math.sqrt(0.21 * 2 / 600))  # 0.026458
    assert call_rate_sd(0.3, 600, 600) == pytest.approx(0.026458, abs=1e-6)
    # n >= 2 * 1.959964^2 * 0.21 / 0.03^2 = 1792.7
    assert queries_for_rate(0.3) == 1793
    assert queries_for_rate(0.5, 0.05) == math.ceil(2 * 1.959964**2 * 0.25 / 0.0025)


def test_select_rules_by_hand() -> None:
    q = np.array([0.5, 0.7, 0.9])
    cost = np.array([1.0, 2.0, 3.0])
    bound = np.array([0.4, 0.65, 0.85])
    assert select("call_rate", 0.3, q, bound, None)[0] == 2
    assert select("max_cost", 2.5, q, bound, cost)[0] == 1  # the best quality within the budget
    assert select("max_cost", 2.0, q, bound, cost)[0] == 1  # a budget met exactly is met
    assert select("max_cost", 0.5, q, bound, cost)[0] == -1  # nothing within it
    assert select("min_quality", 0.6, q, bound, cost)[0] == 1  # the cheapest whose lower bound reaches 0.6
    assert select("min_quality", 0.86, q, bound, cost)[0] == -1
    # equal quality within the budget: the cheaper
    assert select("max_latency", 10.0, np.array([0.8, 0.8]), bound[:2], np.array([2.0, 1.0]))[0] == 1
    # rows are resamples: one choice per row
    rows = select("max_cost", 2.5, np.stack([q, q[::-1]]), bound, np.stack([cost, cost]))
    assert rows.tolist() == [1, 0]


# ------------------------------------------------------------------------------------------ tiny tables
def _two_actor_table(n: int = 400, seed: int = 0) -> RoutingTable:
    """A cheap actor right half the time and an expensive one right 90% of the time, with per-query cost."""
    rng = np.random.default_rng(seed)
    score = np.column_stack([rng.random(n) < 0.5, rng.random(n) < 0.9]).astype(np.float64)
    cost = np.column_stack([np.full(n, 1e-4), np.full(n, 1e-3)])
    text = [f"question {i} about {'cats' if i % 2 else 'dogs'}" for i in range(n)]
    return RoutingTable.from_arrays(score, actors=["cheap", "dear"], text=text, dataset=["d"] * n,
                                    split=["train"] * n, cost_usd=cost, name="two")


def _dev_test(table: RoutingTable, seed: int, dev: float = 0.25) -> tuple[RoutingTable, RoutingTable]:
    sp = make_split(table, "random:0.2", seed, dev=dev)
    return sp.apply_dev(table), sp.apply(table)[1]


@pytest.mark.filterwarnings("ignore::routerlab.protocols.choose.ChooseWarning")
def test_call_rate_with_one_score_value_is_the_tie_coin_by_hand() -> None:
    """best-single gives every query the same s(q): the threshold sits on it and the coin sends the target share,
    so the development quality is rate * mean(large) + (1 - rate) * mean(small), exactly."""
    table = _two_actor_table()
    r = run_protocol("choose", table, {"call_rate": 0.3, "small": "cheap", "large": "dear"}, seed=3,
                     routers=["best-single"]).native
    dev, test = _dev_test(table, 3)
    want = 0.3 * dev.score[:, 1].mean() + 0.7 * dev.score[:, 0].mean()
    assert r.choice["router"] == "best-single"
    assert r.choice["operating_point"]["tie_share"] == pytest.approx(0.3)
    assert r.predicted["quality_dev"] == pytest.approx(want)
    assert r.predicted["call_rate_dev"] == pytest.approx(0.3)
    # the test queries: the coin, thrown per query, sends about 0.3 of them
    assert abs(r.realized["call_rate"] - 0.3) < 0.1 and r.n_test == test.n_queries
    assert r.realized["call_rate_gap"] == pytest.approx(r.realized["call_rate"] - 0.3)
    # the interval is the formula around the corrected prediction (one candidate: no selection, no optimism)
    assert r.predicted["quality_optimism"] == pytest.approx(0.0, abs=1e-12)
    lo, hi = prediction_interval(want, r.predicted["quality_sd"], r.n_dev, r.n_test)
    assert r.predicted["quality_ci"] == pytest.approx([lo, hi])
    # sd with the coin's variance: var of the expected values + mean coin variance 0.21 (L - S)^2
    v = 0.3 * dev.score[:, 1] + 0.7 * dev.score[:, 0]
    coin = 0.21 * (dev.score[:, 1] - dev.score[:, 0]) ** 2
    assert r.predicted["quality_sd"] == pytest.approx(math.sqrt(v.var(ddof=1) + coin.mean()))


def test_cost_budget_picks_the_lambda_by_hand() -> None:
    """best-single scores the dear actor higher; a budget below its cost needs a lambda large enough to route every
    query to the cheap one, and the smallest such lambda of the grid is chosen; a budget above it takes lambda 0."""
    table = _two_actor_table()
    dev, _ = _dev_test(table, 1)
    tight = run_protocol("choose", table, {"max_cost": 5e-4}, seed=1, routers=["best-single"]).native
    assert tight.predicted["cost_dev"] == pytest.approx(1e-4)
    assert tight.predicted["quality_dev"] == pytest.approx(dev.score[:, 0].mean())
    loose = run_protocol("choose", table, {"max_cost": 2e-3}, seed=1, routers=["best-single"]).native
    assert loose.choice["operating_point"] == {"lambda": 0.0, "by": "cost"}
    assert loose.predicted["quality_dev"] == pytest.approx(dev.score[:, 1].mean())
    # the train means: 0.9 - lambda * 1 < 0.5 - lambda * 0.1 once lambda > 0.4 / 0.9 (penalties divided by 1e-3)
    from routerlab.protocols.choose import LAMBDAS

    assert tight.choice["operating_point"]["lambda"] == pytest.approx(float(LAMBDAS[LAMBDAS > 0.4444][0]), rel=0.5)
    nothing = run_protocol("choose", table, {"max_cost": 5e-5}, seed=1, routers=["best-single"]).native
    assert nothing.choice is None and nothing.closest["dev"]["cost"] == pytest.approx(1e-4)
    # min quality: the cheap actor cannot reach 0.8; the dear one can, and it is the only way
    floor = run_protocol("choose", table, {"min_quality": 0.8}, seed=1, routers=["best-single"]).native
    assert floor.predicted["cost_dev"] == pytest.approx(1e-3)


@pytest.mark.filterwarnings("ignore::routerlab.protocols.choose.ChooseWarning")
def test_few_queries_give_no_interval() -> None:
    table = _two_actor_table(n=100)
    with pytest.warns(FewQueriesWarning):
        r = run_protocol("choose", table, {"call_rate": 0.5, "small": "cheap", "large": "dear"}, seed=0,
                         routers=["best-single"]).native
    assert r.n_dev < 30 and r.predicted["quality_ci"] is None and r.inside is None


# ------------------------------------------------------------------------------------------ the demo, end to end
@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("choose") / "demo"
    demo(1200, seed=0).save(path)
    return path


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any] | None, str]:
    code = main([*argv, "--json"])
    out = capsys.readouterr()
    return code, json.loads(out.out) if out.out.strip() else None, out.err


@pytest.mark.parametrize("constraint", [["--call-rate", "0.3", "--small", "tiny-2b", "--large", "frontier-235b"],
                                        ["--max-cost", "0.002"], ["--max-latency", "3"], ["--min-quality", "0.75"]])
def test_each_constraint_on_the_demo(demo_dir: Path, constraint: list[str], capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    code, rec, err = _json(["choose", str(demo_dir), "--routers", "knn,linear,best-single", *constraint, "--seed",
                            "2"], capsys)
    assert code == 0, err
    assert rec is not None
    for key in ("choice", "predicted", "realized", "inside", "runner_up", "constraint", "split", "data", "seed",
                "protocol", "settings", "records"):
        assert key in rec, key
    assert rec["protocol"] == "choose" and rec["seed"] == 2
    assert set(rec["choice"]) == {"router", "operating_point"}
    assert rec["split"]["dev_fraction"] == 0.25 and rec["split"]["n_dev"] > 0 and rec["split"]["dev_seed"] == 2
    pred, real = rec["predicted"], rec["realized"]
    assert len(pred["quality_ci"]) == 2 and pred["quality_ci"][0] < pred["quality"] < pred["quality_ci"][1]
    assert rec["inside"] == (pred["quality_ci"][0] <= real["quality"] <= pred["quality_ci"][1])
    kind = rec["constraint"]["kind"]
    if kind == "call_rate":
        assert set(rec["choice"]["operating_point"]) == {"threshold", "tie_share", "pace_band"}
        assert "call_rate" in pred and "call_rate" in real and "call_rate_noise" in rec
    else:
        assert set(rec["choice"]["operating_point"]) == {"lambda", "by"}
        assert "cost" in pred and "cost" in real and "latency" in real
    if kind == "max_cost":
        assert pred["cost_dev"] <= 0.002
    if kind == "max_latency":
        assert pred["latency_dev"] <= 3.0
    if kind == "min_quality":
        chosen = next(r for r in rec["routers"] if r["router"] == rec["choice"]["router"])
        assert chosen["dev"]["quality_lower_bound"] >= 0.75
    # the runner-up is another router's best point
    assert rec["runner_up"]["router"] != rec["choice"]["router"]
    slices = {(r["router"], r["metric"], r["slice"]) for r in rec["records"]}
    assert (rec["choice"]["router"], "mu_o", "part=predicted") in slices


def test_text_and_decision_card(demo_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "decision"
    argv = ["choose", str(demo_dir), "--routers", "knn,best-single,oracle", "--call-rate", "0.3", "--small",
            "tiny-2b", "--large", "frontier-235b", "-o", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "choice: " in text and "predicted" in text and "realized on test" in text
    assert "left out: oracle" in text  # a bound is not a candidate
    card = (out / "decision.md").read_text()
    rec = json.loads((out / "results.json").read_text())
    for part in ("**Constraint:** call rate 0.3 to frontier-235b", f"**Choice:** `{rec['choice']['router']}`",
                 "**Why it won on dev:**", "## Prediction and what happened", "95% prediction interval",
                 "## Runner-up", f"`{rec['runner_up']['router']}`", "## Run record", "sqrt(p(1-p)"):
        assert part in card, part
    assert f"{rec['realized']['quality']:.3f}" in card and f"{rec['predicted']['quality']:.3f}" in card
    assert main(argv) == 2  # an existing card is kept without --force
    assert "pass --force" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0


def test_nothing_feasible_is_one_line_and_json_with_choice_null(demo_dir: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, rec, err = _json(["choose", str(demo_dir), "--routers", "knn", "--min-quality", "0.999"], capsys)
    assert code == 2 and rec is not None and rec["choice"] is None and rec["closest"]["router"] == "knn"
    lines = [x for x in err.splitlines() if x.startswith("routerlab: error: ")]
    assert len(lines) == 1 and "nothing meets --min-quality 0.999" in lines[0] and "closest" in lines[0]
    assert main(["choose", str(demo_dir), "--routers", "knn", "--max-cost", "1e-9"]) == 2
    err = capsys.readouterr().err
    assert "nothing meets --max-cost 1e-09" in err and "cheapest option" in err


def test_small_sizes_warn_about_the_call_rate(demo_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["choose", str(demo_dir), "--routers", "best-single", "--call-rate", "0.3", "--small", "tiny-2b",
            "--large", "frontier-235b"]
    assert main([*argv, "--pace-band", "none"]) == 0  # a bare threshold
    err = capsys.readouterr().err
    assert "routerlab: warning: with 240 development and 239 test queries" in err and "needs about 1793" in err
    assert main([*argv, "--json"]) == 0  # paced (the default): held within 0.02 + 1/(2 x 239), no warning
    captured = capsys.readouterr()
    assert "warning" not in captured.err
    rec = json.loads(captured.out)
    assert abs(rec["realized"]["call_rate_gap"]) <= 0.02 + 0.5 / 239 + 1e-12
    assert rec["call_rate_noise"]["paced_bound"] == pytest.approx(0.02 + 0.5 / 239)
    assert 0.0 <= rec["realized"]["call_rate_unpaced"] <= 1.0
    assert main([*argv, "--pace-band", "0.05"]) == 0
    assert "warning: the rate controller holds the test call rate within +-0.05" in capsys.readouterr().err
    assert main(["choose", str(demo_dir), "--routers", "best-single", "--max-cost", "1", "--pace-band", "0.1"]) == 2
    assert "--pace-band: paces a call-rate threshold; it does not apply to max_cost" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    ([], "choose needs one constraint"),
    (["--call-rate", "0.3", "--max-cost", "1"], "--max-cost: cannot be combined with call_rate (--call-rate)"),
    (["--call-rate", "nan", "--small", "tiny-2b", "--large", "frontier-235b"], "--call-rate: must be a finite number"),
    (["--call-rate", "inf"], "--call-rate: must be a finite number in (0, 1)"),
    (["--call-rate", "1"], "--call-rate: must be a finite number in (0, 1), got 1"),
    (["--max-cost", "-1"], "--max-cost: must be a finite number > 0"),
    (["--max-latency", "0"], "--max-latency: must be a finite number > 0"),
    (["--min-quality", "1.5"], "--min-quality: must be a finite number in [0, 1]"),
    (["--max-cost", "1", "--small", "tiny-2b", "--large", "frontier-235b"], "--small: names the call-rate pair"),
    (["--call-rate", "0.3", "--small", "tiny-2b"], "--large: must be given with small"),
    (["--call-rate", "0.3", "--small", "nope", "--large", "frontier-235b"], "unknown small actor 'nope'"),
    (["--call-rate", "0.3", "--small", "tiny-2b", "--large", "tiny-2b"], "both 'tiny-2b'"),
    (["--max-cost", "1", "--routers", "no-such-router"], "no-such-router"),
    (["--max-cost", "1", "--dev", "0"], "--dev: the dev fraction must be in (0, 1)"),
    (["--max-cost", "1", "--dev", "nan"], "--dev:"),
    (["--max-cost", "1", "--split", "random:2"], "--split: bad split"),
    (["--call-rate", "0.3"], "designates no pair"),
])
def test_bad_options_are_one_line(demo_dir: Path, argv: list[str], message: str,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    routers = [] if "--routers" in argv else ["--routers", "best-single"]
    assert main(["choose", str(demo_dir), *routers, *argv]) == 2
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("routerlab: error: ")]
    assert len(lines) == 1 and message in lines[0], err
    assert "Traceback" not in err


def test_a_table_without_cost_or_latency_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = _two_actor_table()
    bare = RoutingTable.from_arrays(t.score, actors=["cheap", "dear"], text=list(t.queries.text),
                                    dataset=["d"] * t.n_queries, name="bare")
    bare.save(tmp_path / "bare")
    for option, word in (("--max-cost", "cost"), ("--max-latency", "latency")):
        assert main(["choose", str(tmp_path / "bare"), "--routers", "best-single", option, "1"]) == 2
        err = capsys.readouterr().err
        assert f"needs the table's per-query {word}" in err and err.count("\n") == 1
    assert main(["choose", str(tmp_path / "bare"), "--routers", "best-single", "--min-quality", "0.5"]) == 2
    assert "neither per-query cost nor latency" in capsys.readouterr().err


def test_settings_from_python_files_and_cli_say_the_same() -> None:
    with pytest.raises(UsageError, match=r"^call_rate: must be a finite number in \(0, 1\), got 2$"):
        ChooseSettings.from_mapping({"call_rate": 2})
    with pytest.raises(UsageError, match=r"^--call-rate: must be a finite number in \(0, 1\), got 2$"):
        ChooseSettings.from_cli(call_rate=2.0)
    with pytest.raises(UsageError, match=r"^exp.toml: max_cost: cannot be combined"):
        ChooseSettings.from_mapping({"call_rate": 0.3, "max_cost": 1.0}, where=lambda k: f"exp.toml: {k}")
    s = ChooseSettings.from_mapping({"call_rate": 0.3})
    assert s.kind == "call_rate" and s.target == 0.3 and s.dev == 0.25 and s.split == "random:0.2"


def test_protocol_records_and_reproducibility() -> None:
    table = demo(600, seed=1)
    a = run_protocol("choose", table, {"max_cost": 0.002}, seed=4, routers=["knn", "best-single"])
    b = run_protocol("choose", table, {"max_cost": 0.002}, seed=4, routers=["knn", "best-single"])
    assert a.native.to_dict() == b.native.to_dict()
    assert {r.slice for r in a.records} == {"part=dev", "part=test", "part=predicted"}
    assert {r.metric for r in a.records} == {"mu_o", "mean_cost", "mean_latency"}
    chosen = a.native.choice["router"]
    pred = a.select(chosen, "mu_o", "part=predicted")[0]
    assert pred.ci_low is not None and pred.ci_low < pred.value < pred.ci_high  # type: ignore[operator]


# ------------------------------------------------------------------------------------------------ real tables
def test_routerbench_call_rate_and_budget(real_table: Callable[[str], RoutingTable]) -> None:
    table = real_table("routerbench")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ChooseWarning)
        r = run_protocol("choose", table, {"call_rate": 0.3, "small": "mistralai/mistral-7b-chat",
                                           "large": "gpt-4-1106-preview"}, seed=0,
                         routers=["best-single", "knn"]).native
    assert r.choice is not None and r.n_dev > 400 and r.n_test > 500
    # the realized call rate stays within a few of its perfect-threshold sds of the target
    assert abs(r.realized["call_rate_gap"]) < 4 * r.call_rate_noise["sd"]
    # the large model's cost is paid on the escalated queries: cost rises with the call rate
    assert r.predicted["cost"] > 0
    b = run_protocol("choose", table, {"max_cost": 0.001}, seed=0, routers=["best-single", "knn"]).native
    assert b.choice is not None and b.predicted["cost_dev"] <= 0.001
    assert b.predicted["quality_ci"][0] < b.realized["quality"] + 0.1
