"""The audit's partial-observability section: full vs cold-start leaderboard, shifts, collapse, findings computed
from the numbers (never a fixed claim)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.reports.audit import run_audit, section_names
from routerlab.reports.sections.partial import counts, verdict

ROUTERS = {"routers": ["oracle", "random", "best-single", "smallest", "knn", "linear", "cluster"]}


def _section(table: RoutingTable, tmp_path: Path) -> tuple[dict[str, Any], str]:
    record = run_audit(table, tmp_path / "a", only=["partial"], options=ROUTERS)
    return record["sections"]["partial"], (tmp_path / "a" / "report.md").read_text()


def test_registered_and_in_the_default_audit() -> None:
    names = section_names()
    assert "partial" in names and names.index("partial") > names.index("leaderboard")


def test_section_on_the_demo(tmp_path: Path) -> None:
    sec, report = _section(demo(500, seed=3), tmp_path)
    assert sec["metrics"] == ["acc_at_1", "acc_at_1_l", "dcg", "l_dcg"] and sec["efficiency_metric"] == "l_dcg"
    rows = sec["routers"]
    assert set(rows) == set(ROUTERS["routers"])
    for row in rows.values():
        for k in sec["metrics"]:
            assert row["shift"][k] == pytest.approx(row["cold_start"][k] - row["full"][k])
    # the bounds read test outcomes: nothing moves; smallest learns nothing from outcomes: its choices stay
    assert all(v == 0 for v in rows["oracle"]["shift"].values()) and rows["oracle"]["bound"]
    assert not rows["smallest"]["changed"] and rows["smallest"]["collapsed_full"]
    # the first finding quotes counts recomputed here from the rows
    changed = [k for k, v in rows.items() if not v["bound"] and v["changed"]]
    up = sum(rows[k]["shift"]["acc_at_1"] > 1e-12 for k in changed)
    down = sum(rows[k]["shift"]["l_dcg"] < -1e-12 for k in changed)
    first = sec["findings"][0]
    assert f"Acc@1 rose for {up} of the {len(changed)} routers whose choices changed" in first
    assert f"L-DCG fell for {down} of them" in first
    assert "`smallest`" in first  # listed as unchanged, not counted
    assert "## Partial observability: full vs cold-start" in report
    assert "| router | Acc@1 full → cold |" in report
    assert "cold-start" in report.split("## What the numbers mean")[1]  # glossary entry
    assert sec["logging"]["policy"] == "uniform" and sec["full"]["results"] and "protocol" in sec["cold_start"]


def test_section_without_latency(tmp_path: Path) -> None:
    t = demo(400, seed=4)
    no_lat = RoutingTable.from_arrays(t.score, actors=t.actor_names, text=t.queries.text, split=t.queries.split)
    sec, _ = _section(no_lat, tmp_path)
    assert sec["metrics"] == ["mu_o", "acc_at_1"] and sec["efficiency_metric"] == "mu_o"
    assert "without latency the L-DCG side cannot be checked" in sec["findings"][0]


def _cmp(shifts: dict[str, tuple[float, float]]) -> dict[str, Any]:
    rows = {k: {"shift": {"acc_at_1": a, "l_dcg": b}, "bound": False, "changed": True, "collapsed_full": False,
                "collapsed_cold_start": False} for k, (a, b) in shifts.items()}
    return {"efficiency_metric": "l_dcg", "routers": rows}


@pytest.mark.parametrize("shifts,expected", [
    ({"a": (0.2, -0.1), "b": (0.1, -0.2), "c": (-0.1, 0.1)}, "the risk-aversion RouterWorld (section 5.2) reports"),
    ({"a": (-0.2, 0.1), "b": (-0.1, 0.2), "c": (0.1, 0.1)}, "the opposite of the risk-aversion"),
    ({"a": (-0.2, -0.1), "b": (-0.1, -0.2), "c": (0.1, 0.1)}, "Acc@1 fell and L-DCG fell"),
    ({"a": (0.2, 0.1), "b": (-0.1, -0.2)}, "Acc@1 moved both ways and L-DCG moved both ways"),
])
def test_verdict_follows_the_numbers(shifts: dict[str, tuple[float, float]], expected: str) -> None:
    assert expected in verdict(counts(_cmp(shifts)))
