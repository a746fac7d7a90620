"""``routerlab society`` and the audit's diversity section."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from routerlab import society
from routerlab.cli import main
from routerlab.data.table import RoutingTable


@pytest.fixture
def table_dir(tiny_table: RoutingTable, tmp_path: Path) -> Path:
    return tiny_table.save(tmp_path / "tiny")


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:  # type: ignore[type-arg]
    assert main(["society", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_has_the_promised_fields(table_dir: Path, tiny_table: RoutingTable,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, str(table_dir))
    for key in ("hse", "hse_normalized", "n_actors", "metric", "linkage"):
        assert key in out
    assert out["hse"] == pytest.approx(society.hse(tiny_table))
    assert out["n_actors"] == 5 and out["metric"] == "cosine" and out["linkage"] == "single"
    assert "coreset" not in out


def test_json_coreset_and_specialists(table_dir: Path, tiny_table: RoutingTable,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, str(table_dir), "--coreset", "3", "--metric", "correlation", "--linkage", "average",
                   "--by", "dataset", "--by", "topic")
    cs = out["coreset"]
    ref = society.coreset(tiny_table, 3, "correlation", "average")
    assert cs["order"] == ref.selected_names and len(cs["order"]) == 3
    assert [p["size"] for p in cs["curve"]] == list(range(1, 6))
    assert {"size", "hse", "hse_normalized"} <= set(cs["curve"][0])
    assert cs["size_90"] == ref.size_90 and cs["size_95"] == ref.size_95
    specs = {s["by"]: s for s in out["specialists"]}
    assert specs["dataset"]["hse"] == pytest.approx(math.log2(3) * 1.5)  # correlation -1/2: d = 1.5
    assert out["specialists_union"]["n_experts"] == 5


def test_alpha_and_plots(table_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, str(table_dir), "--coreset", "2", "--alpha", "0.3", "-o", str(tmp_path / "plots"))
    assert out["coreset"]["alpha"] == 0.3
    assert "objective" in out["coreset"]["curve"][1]
    names = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert names == ["society.json", "society_curve.png", "society_dendrogram.png"]
    assert json.loads((tmp_path / "plots" / "society.json").read_text())["coreset"]["alpha"] == 0.3
    for p in (tmp_path / "plots").glob("*.png"):
        assert p.read_bytes()[:4] == b"\x89PNG"


def test_text_output(table_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["society", str(table_dir), "--coreset", "2", "--by", "dataset"]) == 0
    text = capsys.readouterr().out
    assert "normalised" in text and "coreset of 2" in text and "specialists by dataset" in text


@pytest.mark.parametrize(("args", "message"), [
    (["--metric", "jaccard"], "--metric: must be one of correlation, cosine, euclidean, manhattan"),
    (["--linkage", "ward"], "--linkage: must be one of average, complete, single"),
    (["--coreset", "9"], "--coreset: must be in 1..5"),
    (["--alpha", "0.5"], "--alpha: applies only with a coreset"),
    (["--by", "nope"], "no query column"),
    (["--split", "dev"], "no query has split 'dev'"),
])
def test_user_errors_exit_2(table_dir: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                            message: str) -> None:
    assert main(["society", str(table_dir), *args]) == 2
    assert message in capsys.readouterr().err


def test_audit_section(tiny_table: RoutingTable, tmp_path: Path) -> None:
    from routerlab.reports.audit import run_audit

    record = run_audit(tiny_table, tmp_path / "audit", only=["diversity"])
    sec = record["sections"]["diversity"]
    train = tiny_table.score[tiny_table.queries.split == "train"].T
    assert sec["hse"] == pytest.approx(society.hse(train))
    assert sec["coreset"]["k"] == sec["coreset"]["size_90"]
    assert sec["specialists_by_dataset"]["n_experts"] == 3
    assert sorted(sec["figures"]) == ["diversity_curve.png", "diversity_dendrogram.png"]
    report = (tmp_path / "audit" / "report.md").read_text()
    assert "**Diversity.**" in report and "**Coreset.**" in report and "**Specialists.**" in report
    for f in sec["figures"]:
        assert (tmp_path / "audit" / f).exists()


def test_audit_section_single_actor(tmp_path: Path) -> None:
    from routerlab.reports.audit import run_audit

    t = RoutingTable.from_arrays(np.ones((10, 1)), actors=["only"], split=["train"] * 8 + ["test"] * 2)
    sec = run_audit(t, tmp_path / "a", only=["diversity"])["sections"]["diversity"]
    assert sec["hse"] == 0.0 and sec["figures"] == []
