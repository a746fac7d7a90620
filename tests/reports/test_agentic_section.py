"""The audit's agentic section: present on a table of episodes (the ``agentic`` protocol's result, rendered), skipped
with its reason on a table of single completions."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from routerlab.datasets import demo
from routerlab.protocols.base import run_protocol
from routerlab.reports.audit import run_audit, section_names
from tests.protocols.test_agentic import routed_table

ROUTERS = {"routers": ["oracle", "best-single", "knn", "linear"], "quick": True}


def test_registered_before_robustness() -> None:
    names = section_names()
    assert "agentic" in names and names.index("leaderboard") < names.index("agentic") < names.index("robustness")


def test_present_on_episodes(tmp_path: Path) -> None:
    table = routed_table(80, informative=0.7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        record = run_audit(table, tmp_path / "a", only=["agentic"], options=ROUTERS)
        # the same protocol on the audit's split (the table's own), seed and resamples
        direct = run_protocol("agentic", table, {"n_boot": 200, "skip_inapplicable": True}, 0, ROUTERS["routers"])
    sec = record["sections"]["agentic"]
    assert sec["measured"] is True and sec["episodes"] == 160
    assert sec["steps"] == [s.to_dict() for s in direct.native.steps]
    assert sec["planning"] == [p.to_dict() for p in direct.native.planning]
    assert sec["compression"]["agentic"]["variance_points2"] == direct.native.compression.to_dict()["agentic"][
        "variance_points2"]
    report = (tmp_path / "a" / "report.md").read_text()
    assert "## Agentic episodes: routers, steps and planning" in report
    assert "| actor | episodes | Spearman rho [95% CI] |" in report
    assert any(f["section"] == "agentic" and "each extra model call adds" in f["text"] for f in record["findings"])
    assert "decisions/agentic-agentic.parquet" in record["files"]


def test_skipped_without_episodes(tmp_path: Path) -> None:
    record = run_audit(demo(200, seed=2), tmp_path / "a", only=["agentic"], options={"quick": True})
    sec = record["sections"]["agentic"]
    assert sec["measured"] is False and "holds no agent episodes" in sec["reason"]
    assert "Skipped: the table holds no agent episodes" in (tmp_path / "a" / "report.md").read_text()


@pytest.mark.parametrize("quick", [True, False])
def test_default_routers(quick: bool) -> None:
    from routerlab.reports.audit import AuditContext
    from routerlab.reports.sections.agentic import agentic_routers

    table = routed_table(10)
    ctx = AuditContext(Path("."), None, 0, table, table, {"quick": quick})  # type: ignore[arg-type]
    specs = agentic_routers(table, ctx)
    assert specs[:5] == ["oracle", "random", "best-single", "fixed:actor=A", "fixed:actor=B"]
    assert ("mlp" in specs) is not quick and "knn" in specs
