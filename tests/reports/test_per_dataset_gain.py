"""The audit leaderboard's gain over best-per-dataset: every router's paired difference from the best training actor
of each query's dataset, with its paired bootstrap interval (none below MIN_QUERIES), the same whether
best-per-dataset is one of the run's routers or run alone, and its numbers in the section's data."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.metrics.bootstrap import MIN_QUERIES, paired_bootstrap
from routerlab.reports.audit import GLOSSARY
from routerlab.reports.blocks import Table
from routerlab.reports.sections import leaderboard as lb
from tests.reports.test_audit_sections import _check_findings, _context, _run


def _per_dataset_table(sec: object) -> Table:
    (table,) = [b for b in sec.blocks if isinstance(b, Table) and b.id == lb.PER_DATASET_ID]  # type: ignore
    return table


def test_gain_over_best_per_dataset_is_the_paired_difference(tmp_path: Path) -> None:
    table = demo(400, seed=2)
    ctx = _context(table, tmp_path / "alone", {"quick": True, "routers": ["oracle", "best-single", "knn"]})
    sec = _run("leaderboard", table, ctx)
    ev = ctx.shared["full_evaluation"]
    data = sec.data["gain_over_best_per_dataset"]
    n = data["n_test"]
    assert n == ctx.test.n_queries >= MIN_QUERIES and set(data["routers"]) == {"oracle", "best-single", "knn"}
    # best-per-dataset fitted here by hand on the audit's training split: its per-query scores on the test split
    train = ctx.train
    ds = train.queries.dataset.astype(str)
    best = {d: int(np.argmax(np.nanmean(np.asarray(train.score[ds == d], dtype=float), axis=0))) for d in set(ds)}
    pick = np.array([best[str(d)] for d in ctx.test.queries.dataset.astype(str)])
    base = np.asarray(ctx.test.score[np.arange(n), pick], dtype=float)
    assert data["mu_o"] == pytest.approx(base.mean())
    for r in ev.results:
        got = data["routers"][r.spec]
        cmp = paired_bootstrap(r.query_scores(ctx.test.score), base, n_boot=lb.n_boot(ctx), seed=ctx.seed)
        assert got["gain_points"] == pytest.approx(100 * cmp.diff)
        assert got["gain_points_ci"] == pytest.approx([100 * cmp.lo, 100 * cmp.hi])
        assert got["p_value"] == pytest.approx(cmp.p_value)
    assert data["routers"]["oracle"]["gain_points_ci"][0] > 0  # the oracle clearly beats it
    shown = _per_dataset_table(sec)
    assert shown.terms is not None and all(t is None or t in GLOSSARY for t in shown.terms)
    assert shown.rows[0][0] == "oracle"  # best gain first
    knn = next(row for row in shown.rows if row[0] == "knn")
    g = data["routers"]["knn"]
    assert knn[2] == f"{g['gain_points']:+.1f}" and knn[3] == "[{:+.1f}, {:+.1f}]".format(*g["gain_points_ci"])
    _check_findings(sec)
    (finding,) = [f for f in sec.findings if f.target == lb.PER_DATASET_ID]
    top = max((r for r in ev.results if r.router not in lb.BOUNDS), key=lambda r: r.metrics["mu_o"])
    assert finding.values["router"] == top.spec and "best-per-dataset" in finding.text
    assert f"{data['routers'][top.spec]['gain_points']:+.1f} points" in finding.text

    # with best-per-dataset among the run's routers: the same numbers, its own row not compared with itself
    ctx2 = _context(table, tmp_path / "in-run", {"quick": True,
                                                 "routers": ["oracle", "best-single", "knn", "best-per-dataset"]})
    data2 = _run("leaderboard", table, ctx2).data["gain_over_best_per_dataset"]
    assert set(data2["routers"]) == {"oracle", "best-single", "knn"}
    for spec in data["routers"]:
        assert data2["routers"][spec]["gain_points"] == pytest.approx(data["routers"][spec]["gain_points"])


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_no_interval_below_min_queries(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 40
    score = rng.integers(0, 2, size=(n, 3)).astype(float)
    table = RoutingTable.from_arrays(score, actors=["a", "b", "c"], text=[f"question {i} about thing {i % 5}"
                                                                          for i in range(n)],
                                     dataset=["x", "y"] * (n // 2), split=["train"] * 30 + ["test"] * 10)
    ctx = _context(table, tmp_path, {"quick": True, "routers": ["best-single", "knn:k=3"]})
    sec = _run("leaderboard", table, ctx)
    data = sec.data["gain_over_best_per_dataset"]
    assert data["n_test"] < MIN_QUERIES
    for g in data["routers"].values():
        assert all(math.isnan(x) for x in g["gain_points_ci"]) and math.isnan(g["p_value"])
    rows = _per_dataset_table(sec).rows
    assert all(row[3] == f"n/a (n={data['n_test']} < {MIN_QUERIES})" and row[4] == "" for row in rows)
    assert not [f for f in sec.findings if f.target == lb.PER_DATASET_ID]  # no verdict without an interval
