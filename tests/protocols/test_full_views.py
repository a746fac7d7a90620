"""The full protocol's answerable-only view (SPEC 5) and V_R (SPEC 4): hand-computed values on a small table, the
settings' checks from Python, an experiment file and the command line, the metric with an actor as reference, the
results store, and ``routerlab evaluate --answerable-only --reference``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from routerlab.cli import main
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.metrics.registry import evaluate_choices
from routerlab.protocols.base import run_protocol
from routerlab.protocols.full import FullSettings, evaluate, resolve_reference
from tests.routers.test_baselines import _parts, blank, small

SPECS = ["fixed:actor=a", "fixed:actor=b", "best-per-dataset"]


def _mu(ev: object, metric: str = "mu_o") -> dict[str, float]:
    return {r.spec: r.metrics[metric] for r in ev.results}  # type: ignore[attr-defined]


def _evaluate(**options: object) -> object:
    train, test = _parts()
    return evaluate(small(), SPECS, n_boot=40, features=(blank(train), blank(test)), compare_to=None,
                    **options)  # type: ignore[arg-type]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_answerable_only_hand_computed() -> None:
    """Evaluated test rows (the row with an unobserved cell is left out first): x [1,0,1] [0,1,0]; y [1,0,0]
    [0,0,1]; z [0,1,1] [0,0,0]. The last has no correct actor: the answerable view scores the other five."""
    full = _evaluate()
    assert _mu(full) == {"fixed:actor=a": 2 / 6, "fixed:actor=b": 2 / 6, "best-per-dataset": 3 / 6}
    assert "answerable_only" not in full.extra  # type: ignore[attr-defined]
    ans = _evaluate(answerable_only=True)
    assert _mu(ans) == {"fixed:actor=a": 2 / 5, "fixed:actor=b": 2 / 5, "best-per-dataset": 3 / 5}
    assert ans.extra["answerable_only"] == {"threshold": 0.5, "answerable": 5, "unanswerable": 1}  # type: ignore
    assert ans.excluded_test_queries == 1 and ans.split["n_test"] == 5  # type: ignore[attr-defined]
    assert len(ans.test_ids) == 5 and "q10" not in set(ans.test_ids.tolist())  # type: ignore[attr-defined]
    # best-single is c (train means a 0.5, b 0.4, c 0.6): V_B over the same five queries, c scores 3/5
    assert _mu(ans, "v_b")["best-per-dataset"] == pytest.approx(1.0)
    assert ans.oracle_best_of_n["mu_o"] == 1.0  # type: ignore[attr-defined]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_v_r_with_an_actor_or_a_number_as_reference() -> None:
    ev = _evaluate(reference="a")  # a scores 2/6 on the evaluated queries
    assert ev.extra["reference"] == {"actor": "a", "perf": 2 / 6}  # type: ignore[attr-defined]
    v_r = _mu(ev, "v_r")
    assert v_r["fixed:actor=a"] == 1.0 and v_r["best-per-dataset"] == pytest.approx(1.5)
    assert v_r["fixed:actor=b"] == pytest.approx(1.0)
    ev = _evaluate(reference="a", answerable_only=True)  # on the answerable five: a 2/5, best-per-dataset 3/5
    assert ev.extra["reference"]["perf"] == pytest.approx(2 / 5)  # type: ignore[attr-defined]
    assert _mu(ev, "v_r")["best-per-dataset"] == pytest.approx(1.5)
    ev = _evaluate(reference="0.8")
    assert ev.extra["reference"] == {"value": 0.8, "perf": 0.8}  # type: ignore[attr-defined]
    assert _mu(ev, "v_r")["best-per-dataset"] == pytest.approx(0.5 / 0.8)
    assert "v_r" not in _mu(_evaluate(), "mu_o") and "v_r" not in _evaluate().results[0].metrics  # type: ignore


def test_v_r_with_an_actor_resamples_the_reference_with_the_router() -> None:
    """With ``reference_actor`` V_R is a ratio of means over the same resamples, the number V_B gives when that
    actor is the best single one; with a number it is mu_o / the number."""
    rng = np.random.default_rng(0)
    score = rng.integers(0, 2, size=(80, 4)).astype(float)
    choice = rng.integers(0, 4, size=80)
    as_actor = evaluate_choices(score, choice, reference_actor=2, n_boot=200, seed=1)
    as_best = evaluate_choices(score, choice, best_single=2, n_boot=200, seed=1)
    assert tuple(as_actor["v_r"]) == pytest.approx(tuple(as_best["v_b"]))
    mu = float(score[np.arange(80), choice].mean())
    assert as_actor["v_r"][0] == pytest.approx(mu / score[:, 2].mean())
    const = evaluate_choices(score, choice, reference=0.5, n_boot=200, seed=1)
    assert const["v_r"][0] == pytest.approx(mu / 0.5)
    kept = evaluate_choices(score, choice, reference_actor=2, answerable_only=True, n_boot=200, seed=1)
    rows = score.max(axis=1) >= 0.5
    assert kept["v_r"][0] == pytest.approx(score[rows][np.arange(rows.sum()), choice[rows]].mean()
                                           / score[rows, 2].mean())
    with pytest.raises(ValueError, match="not both"):
        evaluate_choices(score, choice, reference=0.5, reference_actor=2)


def test_resolve_reference() -> None:
    assert resolve_reference("b", ["a", "b"]) == (1, None)
    assert resolve_reference("0.86", ["a", "b"]) == (None, 0.86)
    assert resolve_reference("2", ["1", "2"]) == (1, None)  # an actor's exact name wins over the number
    with pytest.raises(UsageError, match=r"reference 'gpt4' is neither an actor of this table nor a number; did "
                                         r"you mean 'gpt-4'\? its actors: gpt-4, b"):
        resolve_reference("gpt4", ["gpt-4", "b"])
    for bad in ("nan", "inf", "0"):
        with pytest.raises(UsageError, match="finite, non-zero number"):
            resolve_reference(bad, ["a"])


@pytest.mark.parametrize("value,body", [
    ("nan", "must be an actor's name or a finite, non-zero number, got 'nan'"),
    ("-inf", "must be an actor's name or a finite, non-zero number, got '-inf'"),
    ("0", "must be an actor's name or a finite, non-zero number, got '0'"),
    ("", "must not be empty"),
    ("  ", "must not be empty"),
])
def test_reference_setting_is_checked_the_same_everywhere(value: str, body: str) -> None:
    with pytest.raises(UsageError, match=f"^reference: {body}"):
        FullSettings.from_mapping({"reference": value})
    with pytest.raises(UsageError, match=f"^--reference: {body}"):
        FullSettings.from_cli(reference=value)


def test_answerable_only_setting() -> None:
    assert FullSettings().answerable_only is False and FullSettings().reference is None
    assert FullSettings.from_mapping({"answerable_only": True}).answerable_only is True
    with pytest.raises(UsageError, match=r"^answerable_only: must be true or false, got an integer"):
        FullSettings.from_mapping({"answerable_only": 1})
    with pytest.raises(UsageError, match="applies to protocol full only, not to voyager"):
        run_protocol("voyager", demo(200), {"answerable_only": True}, 0, ["knn"])


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_protocol_records_v_r_and_the_view() -> None:
    train, test = _parts()
    from routerlab.protocols.base import RunContext

    ctx = RunContext()
    ctx.features[("given", "tfidf", 0)] = (blank(train), blank(test))
    result = run_protocol("full", small(), {"answerable_only": True, "reference": "a", "compare_to": "none"}, 0,
                          SPECS, ctx)
    v_r = {r.router: r.value for r in result.records if r.metric == "v_r"}
    assert v_r["best-per-dataset"] == pytest.approx(1.5) and v_r["fixed:actor=a"] == 1.0
    assert result.native.split["n_test"] == 5 and result.settings.to_dict()["reference"] == "a"


def test_nothing_answerable_is_one_error() -> None:
    from routerlab.data.table import RoutingTable

    t = RoutingTable.from_arrays(np.zeros((4, 2)), actors=["a", "b"], split=["train", "train", "test", "test"])
    train, test = t.select_split("train"), t.select_split("test")
    with pytest.raises(UsageError, match=r"answerable-only: no evaluated test query has an actor scoring >= 0\.5"):
        evaluate(t, ["best-single"], features=(blank(train), blank(test)), answerable_only=True)


# ------------------------------------------------------------------------------------------------ the command
def _error(capsys: pytest.CaptureFixture[str], code: int, needle: str) -> None:
    assert code == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if ln.startswith("routerlab: error:")]
    assert len(err) == 1 and needle in err[0], err


@pytest.mark.parametrize("args,needle", [
    (["--reference", "nan"], "--reference: must be an actor's name or a finite, non-zero number, got 'nan'"),
    (["--reference", ""], "--reference: must not be empty"),
    (["--reference", "large120b"], "reference 'large120b' is neither an actor of this table nor a number; did you "
                                   "mean 'large-120b'?"),
    (["--answerable-only", "--protocol", "voyager"], "--answerable-only: applies to protocol full only"),
    (["--reference", "0.9", "--protocol", "cold-start"], "--reference: applies to protocol full and groups only"),
    (["--routers", "fixed"], "router 'fixed' needs the actor it always picks: write fixed:actor=NAME"),
    (["--routers", "fixed:actor=gpt-4"], "router 'fixed': actor 'gpt-4' is not an actor of this table; its actors: "
                                         "tiny-2b, coder-7b"),
])
def test_cli_errors_are_one_line(args: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    _error(capsys, main(["evaluate", "--n-boot", "40", *args]), needle)


def test_cli_answerable_only_and_reference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = demo(400, seed=1)
    table.save(tmp_path / "t")
    routers = "best-single,fixed:actor=large-120b,best-per-dataset"
    base = ["evaluate", str(tmp_path / "t"), "--routers", routers, "--n-boot", "40"]
    assert main([*base, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main([*base, "--json", "--answerable-only", "--reference", "large-120b"]) == 0
    record = json.loads(capsys.readouterr().out)
    ans = record["answerable_only"]
    n_eval = plain["split"]["n_test"]
    assert ans["answerable"] + ans["unanswerable"] == n_eval and ans["unanswerable"] > 0
    assert record["split"]["n_test"] == ans["answerable"]
    assert record["settings"]["answerable_only"] is True and record["settings"]["reference"] == "large-120b"
    by = {r["spec"]: r for r in record["results"]}
    assert by["fixed:actor=large-120b"]["metrics"]["v_r"] == 1.0
    # mu_o on the answerable queries = the sum of scores over all evaluated queries / the answerable count
    # (the left-out queries score 0 for every router)
    old = {r["spec"]: r["metrics"]["mu_o"] for r in plain["results"]}
    for spec, r in by.items():
        assert r["metrics"]["mu_o"] == pytest.approx(old[spec] * n_eval / ans["answerable"]), spec
        assert r["metrics"]["v_r"] == pytest.approx(r["metrics"]["mu_o"] / record["reference"]["perf"])
    assert any(rec["metric"] == "v_r" for rec in record["records"])
    assert main([*base, "--answerable-only", "--reference", "0.75"]) == 0
    out = capsys.readouterr().out
    assert f"answerable only: {ans['unanswerable']} test queries without a correct actor (score >= 0.5) left out" in out
    assert "V_R reference: 0.75" in out and "v_r" in out.splitlines()[1]


def test_v_r_reaches_the_results_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exp = tmp_path / "exp.toml"
    exp.write_text('name = "vr"\nrouters = ["best-single", "fixed:actor=large-120b"]\nseeds = [0]\n'
                   'protocols = [{ name = "full", reference = "large-120b", answerable_only = true }]\n'
                   '[settings]\nn_boot = 40\n[[tables]]\npath = "demo"\nn_queries = 300\nsplit = "random"\n',
                   encoding="utf-8")
    store = tmp_path / "store"
    assert main(["run", str(exp), "--store", str(store), "--backend", "serial"]) == 0
    capsys.readouterr()
    sql = "SELECT router, value FROM results WHERE metric = 'v_r' ORDER BY router"
    assert main(["results", "query", sql, "--store", str(store), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    rows = rows["rows"] if isinstance(rows, dict) else rows
    values = {(r["router"] if isinstance(r, dict) else r[0]): (r["value"] if isinstance(r, dict) else r[1])
              for r in rows}
    assert values["fixed:actor=large-120b"] == 1.0 and math.isfinite(values["best-single"])
