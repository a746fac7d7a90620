"""The audit's leaderboard breaks mu_o down by dataset (issue 23, 3): a router x dataset heatmap when the test split
holds several datasets, none when it holds one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.reports.audit import run_audit

CHEAP = {"routers": ["oracle", "random", "best-single", "knn:k=5"]}


def test_heatmap_with_several_datasets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from routerlab.reports import evaluation

    grids: dict[str, Any] = {}
    save = evaluation.save_figure

    def spy(fig: Any, path: Path, dpi: int = 120) -> None:
        ax = fig.axes[0]
        if ax.images:
            grids[path.name] = (ax.images[0].get_array(), [t.get_text() for t in ax.get_yticklabels()])
        save(fig, path, dpi)

    monkeypatch.setattr(evaluation, "save_figure", spy)
    table = demo(600, seed=2)
    record = run_audit(table, tmp_path / "a", only=["leaderboard"], options=CHEAP)
    lb = record["sections"]["leaderboard"]
    assert "by_dataset.png" in lb["figures"] and (tmp_path / "a" / "by_dataset.png").stat().st_size > 1000
    bd = lb["breakdown"]
    assert sum(d["n"] for d in bd["datasets"].values()) == bd["n_evaluated"] == lb["split"]["n_test"]
    # the heatmap's cells are the routers' per-dataset mu_o, rows in leaderboard order
    grid, rows = grids["by_dataset.png"]
    order = [r["spec"] for r in sorted(lb["results"], key=lambda r: -r["metrics"]["mu_o"])]
    assert rows == order
    names = sorted(bd["datasets"])
    for i, spec in enumerate(order):
        res = next(r for r in lb["results"] if r["spec"] == spec)
        assert [float(grid[i, j]) for j in range(len(names))] == pytest.approx(
            [res["by_dataset"][k]["metrics"]["mu_o"] for k in names])
    report = (tmp_path / "a" / "report.md").read_text()
    assert "mu_o of every router on each dataset's test queries" in report
    assert f"breaks mu_o down by the {len(names)} datasets of the test split" in report


def test_no_heatmap_with_one_dataset(tmp_path: Path) -> None:
    t = demo(300, seed=2)
    one = RoutingTable.from_arrays(t.score, actors=t.actor_names, text=t.queries.text, split=t.queries.split,
                                   dataset=["only"] * t.n_queries, name="one")
    record = run_audit(one, tmp_path / "a", only=["leaderboard"], options=CHEAP)
    lb = record["sections"]["leaderboard"]
    assert "by_dataset.png" not in lb["figures"] and "breakdown" not in lb
