"""The audit's core sections (table, bounds, diversity, leaderboard, partial, robustness): findings computed from
the run's numbers (change the data and the sentence changes), every quoted number in the section's data, the
per-query decisions consistent with the metrics, quick mode, anchors and glossary links, and the scale guards of a
score-only table (no query text)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.reports import audit
from routerlab.reports.audit import GLOSSARY, AuditContext, audit_split, evaluable_split
from routerlab.reports.blocks import Paragraph, Section, Table
from routerlab.reports.sections import leaderboard as lb
from routerlab.reports.sections import robustness as rb
from routerlab.reports.sections.partial import collapse_findings, describe_actor
from tests.protocols.test_robustness import SWAP

QUICK_ROUTERS = {"quick": True, "routers": ["oracle", "random", "best-single", "knn", "linear"]}


def _context(table: RoutingTable, out: Path, options: dict[str, Any] | None = None, seed: int = 0) -> AuditContext:
    split, excluded = evaluable_split(table, audit_split(table, seed))
    train, test = split.apply(table)
    out.mkdir(parents=True, exist_ok=True)
    return AuditContext(out_dir=out, split=split, seed=seed, train=train, test=test, options=dict(options or {}),
                        excluded_test_queries=excluded)


def _run(name: str, table: RoutingTable, ctx: AuditContext) -> Section:
    reg = {r.name: r for r in audit.sections()}[name]
    return reg.fn(table, ctx)


def _numbers_in(data: Any) -> list[float]:
    """Every number anywhere inside a section's data."""
    if isinstance(data, bool):
        return []
    if isinstance(data, int | float):
        return [float(data)]
    if isinstance(data, dict):
        return [x for v in data.values() for x in _numbers_in(v)]
    if isinstance(data, list | tuple):
        return [x for v in data for x in _numbers_in(v)]
    return []


def _check_findings(sec: Section) -> None:
    """Every finding has a target that exists in the section and quotes numbers the section's data holds."""
    anchors = {sec.name, *(b.id for b in sec.blocks if isinstance(b, Table)), *(f.id for f in sec.figures)}
    numbers = _numbers_in(sec.data)
    assert sec.findings, sec.name
    for f in sec.findings:
        assert f.target in anchors, (f.target, anchors)
        for key, v in f.values.items():
            if isinstance(v, int | float):
                assert any(abs(v - x) <= 1e-9 * max(1.0, abs(v)) for x in numbers), (sec.name, key, v)


def _two_actor(scores: list[list[float]], text: list[str] | None = None) -> RoutingTable:
    n = len(scores)
    return RoutingTable.from_arrays(np.array(scores), actors=["a", "b"], text=text,
                                    split=["train"] * (n // 2) + ["test"] * (n - n // 2))


def test_registered_with_their_option_keys() -> None:
    deps = {r.name: set(r.depends) for r in audit.sections()}
    assert deps["table"] == deps["bounds"] == set()
    assert deps["diversity"] == {"quick"}
    assert deps["leaderboard"] == deps["partial"] == {"quick", "routers", "encoder"}
    assert deps["robustness"] == {"quick", "routers", "encoder", "robustness_levels"}
    for name in deps:
        assert set(deps[name]) <= set(audit.OPTION_KEYS)


def test_bounds_finding_follows_the_data(tmp_path: Path) -> None:
    # train: a is the best single actor; test: b wins on 2 of 4 queries where a fails -> headroom 0.5
    base = [[1, 0], [1, 0], [1, 1], [1, 0]]
    first = _run("bounds", t1 := _two_actor([*base, [1, 0], [0, 1], [0, 1], [1, 1]]), _context(t1, tmp_path / "1"))
    second = _run("bounds", t2 := _two_actor([*base, [1, 0], [0, 1], [1, 0], [1, 1]]), _context(t2, tmp_path / "2"))
    for sec, points in ((first, 50.0), (second, 25.0)):
        (f,) = sec.findings
        assert f.values["headroom_points"] == pytest.approx(points) == pytest.approx(100 * sec.data["headroom"])
        assert f"at most {points:.1f} points" in f.text and "`a`" in f.text
        # 4 test queries: no interval (issue 21), so the finding quotes none
        assert f.interval is None and "CI" not in f.text and np.isnan(sec.data["headroom_points_ci"]).all()
        assert "95% CI n/a (n=4 < 30)" in sec.blocks[1].text  # type: ignore[union-attr]
        _check_findings(sec)
    # the same tables 8 times over (32 test queries): the interval, and the finding quotes it
    many = _run("bounds", t4 := _two_actor([*base] * 8 + [[1, 0], [0, 1], [0, 1], [1, 1]] * 8),
                _context(t4, tmp_path / "4"))
    (f,) = many.findings
    lo, hi = f.interval or (np.nan, np.nan)
    assert lo <= 50.0 <= hi and [lo, hi] == many.data["headroom_points_ci"] and "95% CI [" in f.text
    table = first.blocks[0]
    assert isinstance(table, Table) and table.id == "bounds-table" and first.name == "bounds"
    same = _run("bounds", t3 := _two_actor(base + [[1, 0]] * 4), _context(t3, tmp_path / "3"))
    assert "cannot beat always calling `a`" in same.findings[0].text


def test_table_finding_names_leaks_only_when_present(tmp_path: Path) -> None:
    clean = ["alpha one", "beta two", "gamma three", "delta four", "eps five", "zeta six"]
    leaky = ["alpha one", "beta two", "gamma three", "alpha one", "eps five", "zeta six"]
    scores = [[1, 0], [0, 1], [1, 1], [1, 0], [0, 1], [1, 0]]
    sec = _run("table", t := _two_actor(scores, clean), _context(t, tmp_path / "c"))
    assert [f.text for f in sec.findings] == ["No leak: none of the 3 evaluated test queries repeats a training "
                                              "query's text."]
    sec = _run("table", t := _two_actor(scores, leaky), _context(t, tmp_path / "l"))
    texts = [f.text for f in sec.findings]
    assert texts[0].startswith("1 of the 3 evaluated test queries (33.3%) repeat a training query's text")
    assert texts[1].startswith("1 query repeats an earlier query's text")  # the twin also counts as a duplicate
    assert not any("No leak" in t for t in texts)
    _check_findings(sec)


def test_diversity_finding_follows_the_pool(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    distinct = (rng.random((200, 6)) < 0.5).astype(float)
    copies = np.repeat(distinct[:, :2], 3, axis=1)  # 3 copies each of 2 actors: 2 carry all the diversity
    found = []
    for name, scores in (("distinct", distinct), ("copies", copies)):
        t = RoutingTable.from_arrays(scores, actors=[f"m{i}" for i in range(6)], split=["train"] * 150 + ["test"] * 50)
        sec = _run("diversity", t, _context(t, tmp_path / name))
        _check_findings(sec)
        k = sec.data["coreset"]["size_90"]
        coreset = next(f for f in sec.findings if f.target == "diversity-curve")
        assert coreset.text.startswith(f"{k} of 6 actors carry 90% of this pool's diversity")
        assert {f.id for f in sec.figures} == {"diversity-curve", "diversity-dendrogram"}
        found.append(k)
    assert found[1] == 2 < found[0]


def test_leaderboard_decisions_findings_and_table(tmp_path: Path) -> None:
    table = demo(300, seed=2)
    ctx = _context(table, tmp_path, QUICK_ROUTERS)
    sec = _run("leaderboard", table, ctx)
    ev = ctx.shared["full_evaluation"]
    (dec,) = sec.decisions
    assert dec.protocol == "full" and dec.query_ids == [str(q) for q in ctx.test.queries.ids.tolist()]
    assert dec.actor_names == table.actor_names and set(dec.choices) == {r.spec for r in ev.results}
    for r in ev.results:
        assert dec.choices[r.spec].shape == (ctx.test.n_queries,)
        np.testing.assert_array_equal(dec.choices[r.spec], r.choice)
        # the scores as deployed average to mu_o; random samples its distribution: its rows hold its argmax
        # pick, whose scores average to its mu_o_greedy, and its expected scores beside them
        deployed = dec.deployed.get(r.spec, dec.scores[r.spec])
        assert float(np.mean(deployed)) == pytest.approx(r.metrics["mu_o"], abs=1e-9)
        assert dec.policies[r.spec] == ("distribution" if r.router == "random" else "argmax")
        if r.router == "random":
            assert float(np.mean(dec.scores[r.spec])) == pytest.approx(r.metrics["mu_o_greedy"], abs=1e-9)
    board = sec.blocks[0]
    assert isinstance(board, Table) and board.sortable and board.id == "leaderboard-table"
    assert board.terms is not None and all(t is None or t in GLOSSARY for t in board.terms)
    # the demo's test split holds six datasets: the router x dataset heatmap of mu_o joins the two figures
    assert {f.id for f in sec.figures} == {"leaderboard-figure", "selection-figure", "by-dataset-figure"}
    _check_findings(sec)
    gain = sec.findings[0]
    best = max((r for r in ev.results if r.router not in {"oracle", "random"}), key=lambda r: r.metrics["mu_o"])
    assert gain.values["router"] == best.spec
    if best.router != "best-single":
        assert gain.values["gain_points"] == pytest.approx(100 * best.paired["mu_o_difference"])
        assert gain.interval == pytest.approx(tuple(100 * x for x in best.paired["ci"]))
    assert "oracle" in sec.findings[1].text and sec.data["quick"] and sec.data["n_boot"] == 200


def test_quick_mode_runs_less(tmp_path: Path) -> None:
    ctx = _context(demo(300, seed=2), tmp_path)
    assert lb.router_specs(ctx) == list(lb.DEFAULT_ROUTERS) and lb.n_boot(ctx) == 1000 and rb._cap(ctx) == 300
    ctx.options["quick"] = True
    assert lb.router_specs(ctx) == list(lb.QUICK_ROUTERS) and lb.n_boot(ctx) == 200 and rb._cap(ctx) == 100
    assert len(lb.QUICK_ROUTERS) < len(lb.DEFAULT_ROUTERS)
    # a large pool keeps linear: its fit is cheap since masked_ridge stopped sorting the mask (it was the best
    # router of the RouterEval-scale quick audit, 0.985 against the best single actor's 0.960)
    pool = RoutingTable.from_arrays(np.eye(4, 1000), actors=[f"m{i}" for i in range(1000)],
                                    split=["train", "train", "test", "test"])
    big = _context(pool, tmp_path / "big", {"quick": True})
    assert lb.router_specs(big) == list(lb.QUICK_ROUTERS)
    ctx.options["routers"] = ["oracle", "knn"]  # the user's routers win over the quick set
    assert lb.router_specs(ctx) == ["oracle", "knn"]
    sec = _run("diversity", ctx_table := demo(300, seed=2), _context(ctx_table, tmp_path / "d", {"quick": True}))
    assert any("A quick run" in b.text for b in sec.blocks if hasattr(b, "text"))


def test_robustness_combines_gain_and_moved_share(tmp_path: Path) -> None:
    table = demo(300, seed=2)
    ctx = _context(table, tmp_path, {**QUICK_ROUTERS, "robustness_levels": [SWAP]})
    _run("leaderboard", table, ctx)
    sec = _run("robustness", table, ctx)
    assert sec.data["measured"] and sec.data["n_test"] <= rb.MAX_QUERIES_QUICK
    _check_findings(sec)
    paired = {r.spec: r.paired for r in ctx.shared["full_evaluation"].results}
    for f in sec.findings:
        spec = str(f.values["router"])
        rho = sec.data["routers"][spec]["rho"]
        assert f.values["moved_percent"] == pytest.approx(100 * (1 - rho))
        assert f"sends {100 * (1 - rho):.0f}% of reworded queries" in f.text
        assert f.values["gain_points"] == pytest.approx(100 * paired[spec]["mu_o_difference"])
    assert {f.values["router"] for f in sec.findings} == {"knn", "linear"}  # the learned routers, not the anchors
    (dec,) = sec.decisions
    assert len(dec.query_ids) == sec.data["n_test"] and set(dec.choices) == set(sec.data["routers"])
    table_block = next(b for b in sec.blocks if isinstance(b, Table))
    assert table_block.id == "robustness-table" and table_block.sortable


def test_partial_collapse_names_the_actor_and_what_the_table_knows(tmp_path: Path) -> None:
    from routerlab.data.table import Actors

    actors = Actors.create(["small", "mid", "big"], params_b=[1.0, 8.0, 70.0])
    t = RoutingTable(queries=_two_actor([[1, 0]] * 4).queries, actors=actors, score=np.ones((4, 3), np.float32))
    assert describe_actor(t, t, "big") == "the largest" and describe_actor(t, t, "mid") == ""
    priced = RoutingTable(queries=t.queries, actors=actors, score=t.score,
                          cost_usd=np.tile(np.array([3.0, 1.0, 2.0], np.float32), (4, 1)))
    assert describe_actor(priced, priced, "mid") == "the cheapest"
    assert describe_actor(priced, priced, "small") == "the most expensive"
    assert describe_actor(priced, priced, "big") == "the largest"
    cold = SimpleNamespace(results=[SimpleNamespace(spec=s, selection={"big": 1.0}) for s in ("knn", "mlp", "mf")])
    c = {"newly_collapsed": ["knn", "mf", "mlp"], "n": 4}
    (f,), data = collapse_findings(t, t, c, cold)  # type: ignore[arg-type]
    assert f.text.startswith("Under partial feedback 3 routers collapse onto the largest actor, `big`")
    assert f.values == {"n_collapsed": 3, "actor": "big"} and data["onto"] == {"big": ["knn", "mlp", "mf"]}
    (none,), _ = collapse_findings(t, t, {"newly_collapsed": [], "n": 4}, cold)  # type: ignore[arg-type]
    assert "none of the 4 routers the log changed collapses" in none.text


def test_partial_section_findings_and_decisions(tmp_path: Path) -> None:
    table = demo(300, seed=2)
    ctx = _context(table, tmp_path, QUICK_ROUTERS)
    sec = _run("partial", table, ctx)
    _check_findings(sec)
    (dec,) = sec.decisions
    cold = sec.data["cold_start"]["results"]
    assert dec.protocol == "cold-start" and set(dec.choices) == {r["spec"] for r in cold}
    for r in cold:
        if r["router"] != "random":
            assert float(np.mean(dec.scores[r["spec"]])) == pytest.approx(r["metrics"]["mu_o"], abs=1e-9)
    assert "A quick run" in sec.blocks[0].text  # type: ignore[union-attr]


def test_score_only_table_is_guarded(tmp_path: Path) -> None:
    """A RouterEval-like table (scores and datasets, no text): the learned routers route by dataset, robustness
    and the leak check say in one sentence why they did not run."""
    rng = np.random.default_rng(1)
    n, m = 400, 30
    ds = rng.integers(0, 4, n)
    skill = rng.normal(0, 1, (m, 4))
    score = (rng.random((n, m)) < 1 / (1 + np.exp(-skill[:, ds].T))).astype(float)
    t = RoutingTable.from_arrays(score, actors=[f"m{i}" for i in range(m)], dataset=[f"d{i}" for i in ds],
                                 split=np.where(np.arange(n) < 300, "train", "test"))
    ctx = _context(t, tmp_path, {"quick": True})
    sec = _run("leaderboard", t, ctx)
    assert sec.data["encoder"] == lb.NO_TEXT_ENCODER
    assert "no query text" in sec.blocks[1].text  # type: ignore[union-attr]
    assert {r.spec for r in ctx.shared["full_evaluation"].results} == set(lb.QUICK_ROUTERS)
    rob = _run("robustness", t, ctx)
    assert not rob.data["measured"] and rob.data["reason"] == "the table has no query text to perturb"
    assert rob.blocks[0].text == "Robustness skipped: the table has no query text to perturb."  # type: ignore
    tab = _run("table", t, ctx)
    assert tab.findings[0].text == "Leaks and duplicates were not checked: the table has no query text."


def test_diversity_says_when_the_greedy_cap_is_reached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from routerlab.reports.sections import diversity

    monkeypatch.setattr(diversity, "MAX_GREEDY", 2)
    distinct = (np.random.default_rng(0).random((200, 6)) < 0.5).astype(float)
    t = RoutingTable.from_arrays(distinct, actors=[f"m{i}" for i in range(6)], split=["train"] * 150 + ["test"] * 50)
    sec = _run("diversity", t, _context(t, tmp_path))
    assert sec.data["coreset"]["size_90"] is None and sec.data["coreset"]["greedy_cap"] == 2
    assert sec.findings[-1].text.startswith("The diversity is spread over many actors: the 2 most diverse of 6")
    _check_findings(sec)


def test_no_diversity_share_of_a_pool_without_diversity(tmp_path: Path) -> None:
    """Issue 21, "a finding never divides by a zero gain": 6 copies of one actor have no diversity (HSE 0), so no
    finding says how many of them carry 90% of it; the section says why in one sentence."""
    one = (np.random.default_rng(0).random((200, 1)) < 0.5).astype(float)
    t = RoutingTable.from_arrays(np.repeat(one, 6, axis=1), actors=[f"m{i}" for i in range(6)],
                                 split=["train"] * 150 + ["test"] * 50)
    sec = _run("diversity", t, _context(t, tmp_path))
    assert sec.data["hse"] == 0.0
    assert not any("90%" in f.text for f in sec.findings)
    (left,) = sec.data["skipped_findings"]
    assert "90% of the pool's diversity" in left["what"] and "HSE 0" in left["why"]
    assert not any("carry 90%" in b.text for b in sec.blocks if isinstance(b, Paragraph))


def test_leaderboard_says_which_routers_a_none_beats_claim_is_about(tmp_path: Path) -> None:
    """Issue 21, item 3 for the other findings: "no router beats best-single" claims it of the routers run, not of
    routers in general."""
    table = demo(300, seed=2)
    sec = _run("leaderboard", table, _context(table, tmp_path, {"quick": True, "routers": ["best-single", "random",
                                                                                          "smallest"]}))
    (gain,) = [f for f in sec.findings if f.target == "leaderboard-table" and "best single actor" in f.text]
    assert gain.text.startswith("No router of the 1 run beats always calling the best single actor")
