"""Every number the audit's report shows is in results.json (issue 13): an audit of a small demo with every
section switched on (logs for the off-policy section, a pair for the two-model section), then each number of
report.md is looked up among results.json's numbers at the precision the report shows it (or as a percentage /
points, i.e. times 100). A number made up in a sentence, or computed for the text but not stored, fails."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from routerlab.data.demo import demo
from routerlab.data.logs import write_logs
from routerlab.protocols.policies import simulate_logs
from routerlab.reports.audit import run_audit

CITATION = re.compile(r"\b(?:sections?|appendix|equation)\s+[\d.]+(?:(?:,\s*|\s+and\s+)[\d.]+)*")
NUMBER = re.compile(r"(?<![\w.])[-+]?(\d+(?:,\d{3})*(?:\.\d+)?(?:e[-+]?\d+)?)")


def _numbers(obj: Any, out: list[float]) -> list[float]:
    """Every number in a JSON value, those written inside its strings included."""
    if isinstance(obj, bool):
        return out
    if isinstance(obj, int | float):
        out.append(float(obj))
    elif isinstance(obj, dict):
        for v in obj.values():
            _numbers(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _numbers(v, out)
    elif isinstance(obj, str):
        out += [float(t.replace(",", "")) for t in NUMBER.findall(obj)]
    return out


def _renderings(values: list[float]) -> set[str]:
    """How the report may print each value: fixed 0-6 decimals, 3 significant digits, scientific, each also
    times 100 (percent, points)."""
    shown = set()
    for v in values:
        for x in (abs(v), abs(v) * 100):
            shown.update(f"{x:.{p}f}" for p in range(7))
            shown.update({f"{x:.3g}", f"{x:g}", f"{x:.2e}"})
    return shown


def unknown_numbers(report_md: str, record: dict[str, Any]) -> dict[str, str]:
    """Numbers of ``report_md`` (outside code marks, image and anchor links) that results.json does not hold,
    each with its context."""
    values = _numbers(record, [])
    shown = _renderings(values)
    text = re.sub(r"`[^`]*`", "", report_md)  # actor and router names such as coder-7b
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)|\(#[^)]*\)", "", text)
    text = CITATION.sub("", text)  # "RouterEval, sections 3, 4.2 and 5.1": where a definition comes from
    missing = {}
    for m in NUMBER.finditer(text):
        token = m.group(1).replace(",", "")
        if token not in shown and float(token) not in values:
            missing[token] = text[max(0, m.start() - 60): m.end() + 20].replace("\n", " ")
    return missing


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Path:
    table = demo(600, seed=3)
    root = tmp_path_factory.mktemp("numbers")
    logs = root / "test.csv"
    write_logs(simulate_logs(table, "eps-greedy:best-single:0.5", part="test", seed=0), logs)
    out = root / "audit"
    run_audit(table, out, seed=0, options={"quick": True, "logs": str(logs), "small": "tiny-2b",
                                            "large": "frontier-235b"})
    return out


def test_every_number_of_the_report_is_in_results_json(audited: Path) -> None:
    record = json.loads((audited / "results.json").read_text())
    assert {"offpolicy", "two-model", "scaling", "leaderboard"} <= set(record["sections"])
    missing = unknown_numbers((audited / "report.md").read_text(), record)
    assert not missing, "\n".join(f"{k}: ...{v}..." for k, v in missing.items())


def test_the_check_catches_a_number_results_json_lacks(audited: Path) -> None:
    record = json.loads((audited / "results.json").read_text())
    md = (audited / "report.md").read_text().replace("## Bounds", "Routing wins 4242.77 points.\n\n## Bounds", 1)
    assert "4242.77" in unknown_numbers(md, record)
