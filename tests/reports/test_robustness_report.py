"""Robustness files (JSON, plots, Markdown), the terminal table and the audit's robustness section, whose findings
must follow from its numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from routerlab.datasets import demo
from routerlab.protocols.robustness import UNTESTED_NOTE, robustness
from routerlab.reports.audit import run_audit, section_names
from routerlab.reports.files import json_safe
from routerlab.reports.robustness_report import robustness_text, write_robustness
from routerlab.reports.sections import robustness as robustness_section
from tests.protocols.test_robustness import SWAP, KeywordRouter, _outcomes, _tiny

PNG = b"\x89PNG\r\n\x1a\n"


def test_files_with_outcomes(tmp_path: Path) -> None:
    table, variants = _tiny()
    rob = robustness(table, [KeywordRouter(), "best-single"], variants, outcomes=_outcomes(), n_boot=100)
    paths = write_robustness(rob, tmp_path / "out")
    assert [p.name for p in paths] == ["robustness.json", "rho_by_level.png", "accuracy_vs_rho.png", "robustness.md"]
    for p in paths[1:3]:
        assert p.read_bytes()[:8] == PNG and p.stat().st_size > 5000
    text = paths[0].read_text()
    assert "NaN" not in text
    assert json.loads(text) == json.loads(json.dumps(json_safe(rob.to_dict())))
    md = paths[3].read_text()
    # the hand-computed numbers of tests/protocols/test_robustness.py::test_invariance_by_hand
    row = next(line for line in md.splitlines() if line.startswith("| KeywordRouter() |"))
    assert "0.5833 n/a (n=2 < 30)" in row and "| 0.5000 | 0.7500 | character |" in row  # 2 queries: no interval
    assert "changed for 66.7% of 6 variants with outcomes (argmax: 33.3%)" in row
    assert "| word | 3 | 2 | 100.0% n/a (n=2 < 30) | 0.0% | - | - |" in md
    assert "![rho_by_level.png](rho_by_level.png)" in md and "untested" not in md
    term = robustness_text(rob)
    lines = term.splitlines()
    assert lines[1].split()[:3] == ["router", "accuracy", "[95%"]
    assert lines[2].startswith("best-single") and lines[3].startswith("KeywordRouter()")  # most robust first
    assert "uniform random 1/N = 0.3333" in lines[0]
    assert "invariance: optimal actor (set) changed for 66.7%" in term


def test_files_without_outcomes(tmp_path: Path) -> None:
    table, variants = _tiny()
    rob = robustness(table, [KeywordRouter()], variants, n_boot=50)
    paths = write_robustness(rob, tmp_path)
    md = paths[-1].read_text()
    assert UNTESTED_NOTE in md and "untested (no outcomes of the variants)" in md
    assert f"invariance: {UNTESTED_NOTE}" in robustness_text(rob)
    assert json.loads(paths[0].read_text())["invariance_note"] == UNTESTED_NOTE


def test_registered_after_the_other_sections() -> None:
    names = section_names()
    assert names[-1] == "robustness" and names.index("robustness") > names.index("partial")


def _check_findings(sec: dict[str, object]) -> None:
    rows = sec["routers"]
    assert isinstance(rows, dict)
    levels = sec["levels"]
    assert isinstance(levels, list)
    for spec, v in rows.items():
        by = v["rho_by_level"]
        below = [lv for lv in levels if by[lv] < robustness_section.KEEPS]
        assert v["breaks_at"] == (below[0] if below else None)
        assert v["keeps_together"] == (not below)
        assert v["weakest_rho"] == min(by.values())
        line = next(s for s in sec["findings"] if str(s).startswith(f"`{spec}`: rho {v['rho']:.3f}"))  # type: ignore
        assert (f"breaks first at `{below[0]}`" in line) if below else ("holds at every level" in line)
    together = sorted(k for k, v in rows.items() if v["keeps_together"])
    if together:
        assert sec["findings"][0] == ("Keep near-identical questions together at every level (rho >= 0.9): "  # type: ignore
                                      + ", ".join(f"`{k}`" for k in together) + ".")


def test_audit_section_on_the_demo(tmp_path: Path) -> None:
    table = demo(500, seed=3)
    options = {"routers": ["oracle", "random", "best-single", "knn", "linear"], "robustness_levels": [SWAP]}
    record = run_audit(table, tmp_path / "a", only=["robustness"], options=options)
    sec = record["sections"]["robustness"]
    assert sec["measured"] and sec["levels"] == [SWAP] and not sec["capped"]
    assert set(sec["routers"]) == {"best-single", "random", "knn", "linear"}  # oracle is no robustness router
    fixed, rnd = sec["routers"]["best-single"], sec["routers"]["random"]
    assert fixed["rho"] == 1.0 and fixed["keeps_together"] and fixed["between_anchors"] == 1.0
    k = sec["robustness"]["perturbations"]["n_variants_used"]
    se = math.sqrt(0.125 * 0.875 / k)
    assert abs(rnd["rho"] - 0.125) < 4 * se and not rnd["keeps_together"]
    _check_findings(sec)
    assert sec["invariance"] == "untested" and sec["robustness"]["invariance_tested"] is False
    report = (tmp_path / "a" / "report.md").read_text()
    assert "## Routing robustness (meaning-preserving perturbations)" in report
    assert "Invariance check: untested." in report and "routerlab collect --variants" in report
    assert "| best-single | 1.000 [1.000, 1.000] | null (collapsed) | 1.000 | - | - |" in report  # one level
    assert fixed["kappa_rho_flag"] == "collapsed" and abs(rnd["kappa_rho"]) < 4 * se / 0.875
    assert "- **rho**" in report and "- **kappa_rho**" in report  # glossary entries
    for f in sec["figures"]:
        assert (tmp_path / "a" / f).read_bytes()[:8] == PNG


def test_audit_section_caps_and_skips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(robustness_section, "MAX_QUERIES", 40)
    options = {"routers": ["best-single", "random"], "robustness_levels": ["no-such-level", SWAP]}
    record = run_audit(demo(500, seed=3), tmp_path / "a", only=["robustness"], options=options)
    sec = record["sections"]["robustness"]
    assert sec["capped"] and sec["n_test"] == 40 and sec["levels"] == [SWAP]
    assert "no-such-level" in sec["skipped_levels"]
    assert "Level `no-such-level` skipped" in (tmp_path / "a" / "report.md").read_text()
    _check_findings(sec)


def test_audit_section_without_any_level(tmp_path: Path) -> None:
    record = run_audit(demo(300, seed=2), tmp_path / "a", only=["robustness"],
                       options={"robustness_levels": ["no-such-level"]})
    sec = record["sections"]["robustness"]
    assert sec["measured"] is False and list(sec["skipped_levels"]) == ["no-such-level"]
    assert "robustness was not measured" in (tmp_path / "a" / "report.md").read_text()


def test_audit_section_default_levels(tmp_path: Path) -> None:
    """The offline levels that are installed are used; any that is not is reported as skipped."""
    record = run_audit(demo(500, seed=3), tmp_path / "a", only=["robustness"],
                       options={"routers": ["best-single", "random", "knn"]})
    sec = record["sections"]["robustness"]
    assert set(sec["levels"]) | set(sec["skipped_levels"]) == {"character", "word", "syntax"}
    if sec["measured"]:
        _check_findings(sec)


def test_audit_section_on_a_tiny_table(tmp_path: Path) -> None:
    """Routers that cannot train on two queries are skipped and named; the section still runs."""
    import numpy as np

    from routerlab.data.table import RoutingTable

    t = RoutingTable.from_arrays(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]]), actors=["a", "b"],
                                 text=["red apple pie", "green pear tart", "blue plum cake", "dark cherry jam"],
                                 split=["train", "train", "test", "test"])
    record = run_audit(t, tmp_path / "a", only=["robustness"],
                       options={"routers": ["knn", "best-single"], "robustness_levels": [SWAP]})
    sec = record["sections"]["robustness"]
    assert sec["measured"] and "knn" in sec["skipped_routers"] and set(sec["routers"]) == {"best-single", "random"}
    assert sec["routers"]["best-single"]["rho"] == 1.0
    assert "Router `knn` skipped" in (tmp_path / "a" / "report.md").read_text()
