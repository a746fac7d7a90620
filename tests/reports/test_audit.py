"""The audit report: one evaluated test set for every section, the leak check of that split, atomic
publication, the glossary and the short summary."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab.cli import main
from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.metrics.sources import OWN_RULE, PAPERS
from routerlab.reports import audit
from routerlab.reports.audit import GLOSSARY, AuditContext, Section, run_audit

CHEAP = {"routers": ["oracle", "random", "best-single", "knn:k=5"]}


@pytest.fixture(scope="module")
def small_demo() -> RoutingTable:
    return demo(300, seed=2)


@pytest.fixture
def interrupting_section(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A registered section that writes a figure into the audit's directory, then is interrupted."""

    def boom(table: RoutingTable, ctx: AuditContext) -> Section:
        (ctx.out_dir / "half.png").write_bytes(b"\x89PNG half")
        raise KeyboardInterrupt

    audit.sections()  # import the real sections first
    monkeypatch.setitem(audit._SECTIONS, "boom", audit._Registered("boom", 15, boom))
    yield


def _leftovers(parent: Path, name: str) -> list[str]:
    return [p.name for p in parent.iterdir() if p.name.startswith(f".{name}.")]


def test_interrupted_audit_leaves_no_new_directory(small_demo: RoutingTable, tmp_path: Path,
                                                   interrupting_section: None) -> None:
    target = tmp_path / "report"
    with pytest.raises(KeyboardInterrupt):
        run_audit(small_demo, target, only=["table", "bounds", "boom"])
    assert not target.exists()
    assert _leftovers(tmp_path, "report") == []


def test_interrupted_audit_leaves_an_existing_directory_untouched(small_demo: RoutingTable, tmp_path: Path,
                                                                  interrupting_section: None) -> None:
    target = tmp_path / "report"
    target.mkdir()
    (target / "report.md").write_text("the previous report")
    (target / "notes.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    with pytest.raises(KeyboardInterrupt):
        run_audit(small_demo, target, only=["bounds", "boom"])
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert _leftovers(tmp_path, "report") == []


def test_audit_publishes_into_an_existing_directory(small_demo: RoutingTable, tmp_path: Path) -> None:
    target = tmp_path / "report"
    target.mkdir()
    (target / "report.md").write_text("the previous report")
    (target / "notes.txt").write_text("mine")
    record = run_audit(small_demo, target, only=["bounds"])
    assert (target / "notes.txt").read_text() == "mine"  # a user's file is never deleted
    assert "## Bounds" in (target / "report.md").read_text()
    assert record["files"][:3] == ["report.html", "report.md", "results.json"]
    published = {f.split("/")[0] for f in record["files"]}
    assert sorted(p.name for p in target.iterdir()) == sorted({*published, "notes.txt"})
    assert _leftovers(tmp_path, "report") == []


def test_interrupted_society_plot_leaves_no_output(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from routerlab.cli.society_cmd import write_society
    from routerlab.protocols.base import run_protocol
    from routerlab.reports import society_plots

    def interrupted(*args: object, **kwargs: object) -> Path:
        raise KeyboardInterrupt

    monkeypatch.setattr(society_plots, "plot_coreset_curve", interrupted)
    report = run_protocol("society", demo(200, seed=1)).native
    with pytest.raises(KeyboardInterrupt):
        write_society(report.to_dict(), report, tmp_path / "soc", 0, "demo")
    assert not (tmp_path / "soc").exists() and _leftovers(tmp_path, "soc") == []


def test_society_output_writes_its_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    demo(200, seed=1).save(tmp_path / "t")
    assert main(["society", str(tmp_path / "t"), "--coreset", "3", "-o", str(tmp_path / "soc")]) == 0
    out = capsys.readouterr().out
    record = json.loads((tmp_path / "soc" / "society.json").read_text())
    assert f"HSE {record['hse']:.4f}" in out  # the JSON holds the numbers the command printed
    assert record["coreset"]["order"] and sorted(Path(f).name for f in record["files"]) == [
        "society.json", "society_curve.png", "society_dendrogram.png"]
    for f in record["files"]:
        assert f"wrote {f}" in out


def test_report_glossary_title_and_heatmap_order(tmp_path: Path, small_demo: RoutingTable,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from routerlab.reports import evaluation

    rows: dict[str, list[str]] = {}
    save = evaluation.save_figure

    def spy(fig: Any, path: Path, dpi: int = 120) -> None:
        ax = fig.axes[0]
        ticks = sorted(zip(ax.get_yticks(), (t.get_text() for t in ax.get_yticklabels()), strict=True),
                       reverse=not ax.yaxis_inverted())
        rows[path.name] = [label for _, label in ticks]  # top of the figure first
        save(fig, path, dpi)

    monkeypatch.setattr(evaluation, "save_figure", spy)
    record = run_audit(small_demo, tmp_path / "a", only=["bounds", "leaderboard"], options=CHEAP)
    report = (tmp_path / "a" / "report.md").read_text()
    assert report.startswith(f"# routerlab audit: {small_demo.name} (synthetic demo benchmark)\n")
    glossary = report.split("## What the numbers mean")[1]
    for key in ("mu_o", "v_b", "e_p", "acc_at_1_l", "dcg", "l_dcg", "mean_cost", "mean_latency", "collapsed",
                "full observability", "oracle best-of-N"):
        assert f"**{GLOSSARY[key][0]}**" in glossary, key
    assert "USD per query" in glossary and "seconds per query" in glossary
    # the paired comparison's entry is the mu_o_difference metric's, named as results.json holds it
    assert "**paired difference** (`mu_o_difference` in results.json)" in glossary
    # headings from the catalog
    assert "| router | mu_o [95% CI] | mu_o (greedy) | V_B | E_p (bits) | Acc@1 |" in report
    assert "**HSE**" not in glossary  # only the terms the report shows
    lb = record["sections"]["leaderboard"]
    board = report.split("| router | mu_o [95% CI]")[1].split("\n\n")[0]  # the leaderboard table alone
    table_order = [line.split(" | ")[0].lstrip("| ") for line in board.splitlines()
                   if line.startswith("| ") and " [" in line and not line.startswith("| router")]
    assert table_order == [r["spec"] for r in sorted(lb["results"], key=lambda r: -r["metrics"]["mu_o"])]
    assert table_order[0] == "oracle"
    assert rows["selection.png"] == table_order  # heatmap rows top-down in leaderboard order
    assert rows["leaderboard.png"] == table_order


def test_real_table_title_is_not_marked_synthetic(tmp_path: Path) -> None:
    t = RoutingTable.from_arrays(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]]), actors=["a", "b"],
                                 split=["train", "train", "test", "test"])
    run_audit(t, tmp_path / "a", only=["bounds"])
    assert "synthetic" not in (tmp_path / "a" / "report.md").read_text()


def test_cli_prints_a_summary_not_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    demo(300, seed=2).save(tmp_path / "t")
    assert main(["audit", str(tmp_path / "t"), "--only", "table,bounds", "-o", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "## " not in out and len(out.splitlines()) <= 8
    assert "oracle " in out and "leaks: 0" in out
    assert out.splitlines()[-1].startswith(f"wrote {tmp_path / 'a' / 'report.html'} (the report")
    assert main(["audit", str(tmp_path / "t"), "--only", "bounds", "--json", "-o", str(tmp_path / "b")]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["files"][:3] == ["report.html", "report.md", "results.json"]
    assert f"wrote {tmp_path / 'b'}" in captured.err


def test_only_lists_and_checks_section_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    for name in audit.section_names():
        assert name in help_text
    assert main(["audit", "--only", "bounds,nope"]) == 2
    assert "unknown audit section 'nope'" in capsys.readouterr().err


def test_one_evaluated_test_set_on_routerbench(real_table: Callable[[str], RoutingTable], tmp_path: Path) -> None:
    table = real_table("routerbench")
    record = run_audit(table, tmp_path / "a", only=["bounds", "leaderboard"],
                       options={"routers": ["oracle", "random", "best-single"]})
    bounds, lb = record["sections"]["bounds"], record["sections"]["leaderboard"]
    oracle = next(r for r in lb["results"] if r["spec"] == "oracle")
    assert bounds["oracle"] == pytest.approx(oracle["metrics"]["mu_o"], rel=1e-6)  # float32 sums
    assert bounds["n_test_queries"] == lb["split"]["n_test"] == record["split"]["n_test"] == 945
    # the leaderboard runs the full protocol on the audit's split spec: it leaves out the same 8 queries itself
    assert record["split"]["excluded_test_queries"] == 8 == lb["excluded_test_queries"]
    header = (tmp_path / "a" / "report.md").read_text().split("## ")[0]
    assert "the same 945 test queries" in header and "8 more test queries are left out" in header


def test_leak_check_uses_the_audited_split(real_table: Callable[[str], RoutingTable], tmp_path: Path) -> None:
    table = real_table("mmlu-pro")  # no split labels: the audit makes its own random split
    record = run_audit(table, tmp_path / "a", only=["table"])
    assert record["split"]["kind"] == "random"
    q = record["sections"]["table"]["quality"]
    assert q["train_test_overlap"] > 0
    report = (tmp_path / "a" / "report.md").read_text()
    assert f"**Leak:** {q['train_test_overlap']} of the {record['split']['n_test']} evaluated test queries" in report
    assert "checked on the audit's random split" in report
    assert f"leaks        {q['train_test_overlap']} evaluated test queries share their text" in report
    assert "not checked" not in report


@pytest.mark.parametrize("as_json", [False, True])
def test_every_output_option_says_what_it_wrote(tmp_path: Path, as_json: bool,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    demo(300, seed=4).save(tmp_path / "t")
    flag = ["--json"] if as_json else []
    runs = {
        "evaluate": (["--routers", "oracle,best-single", "--n-boot", "50"],
                     ["evaluation.json", "choices.parquet", "leaderboard.png", "selection.png"]),
        "scaling": (["--m", "2", "--samples", "3"], ["scaling.json", "scaling.png"]),
        "groups": (["--m", "2", "--draws", "5", "--routers", "oracle", "--n-boot", "50"], ["groups.json"]),
        "society": ([], ["society.json", "society_dendrogram.png", "society_curve.png"]),
    }
    for cmd, (args, files) in runs.items():
        out_dir = tmp_path / cmd
        assert main([cmd, str(tmp_path / "t"), *args, *flag, "-o", str(out_dir)]) == 0, cmd
        out, err = capsys.readouterr()
        said, quiet = (err, out) if as_json else (out, err)
        for f in files:
            assert f"wrote {out_dir / f}" in said, (cmd, f)
            assert (out_dir / f).stat().st_size > 0
        assert "wrote" not in quiet
        if as_json:
            json.loads(out)


@pytest.fixture
def finding_sections(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sections with findings and per-query decisions: one names its target, one leaves it to the section."""
    from routerlab.reports.blocks import Decisions, Finding, Paragraph, Table

    def first(table: RoutingTable, ctx: AuditContext) -> Section:
        ids = [str(q) for q in ctx.test.queries.ids[:3]]
        # r2 samples its distribution when deployed: its rows hold its argmax, its expected scores beside them
        dec = Decisions("full", ids, list(table.actor_names), {"r1": np.array([0, -1, 2]), "r2": np.array([1, 1, 1])},
                        {"r1": np.array([1.0, np.nan, 0.5])}, {"r2": "distribution"},
                        {"r2": np.array([0.25, 0.5, 0.75])})
        return Section("First", [Table(["a"], [["1"]], id="first-table")], {"n": 3},
                       findings=[Finding("3 things happened (95% CI [1, 5])", "first-table", {"n": 3}, (1.0, 5.0))],
                       decisions=[dec])

    def second(table: RoutingTable, ctx: AuditContext) -> Section:
        return Section("Second", [Paragraph("text")], findings=[Finding("a second finding", values={"share": 0.25})])

    audit.sections()
    monkeypatch.setitem(audit._SECTIONS._entries, "first", audit._Registered("first", 901, first))
    monkeypatch.setitem(audit._SECTIONS._entries, "second", audit._Registered("second", 902, second))


def test_findings_lead_the_report_and_decisions_are_parquet(small_demo: RoutingTable, tmp_path: Path,
                                                            finding_sections: None) -> None:
    import pyarrow.parquet as pq

    record = run_audit(small_demo, tmp_path / "a", only=["first", "second"])
    report = (tmp_path / "a" / "report.md").read_text()
    headings = [line for line in report.splitlines() if line.startswith("#")]
    assert headings[1:] == ["## Findings", "## First", "## Second"]
    # Markdown links go to the heading of the section holding the target (viewers make no table anchors)
    assert "- 3 things happened (95% CI [1, 5]) (see [First](#first))" in report
    assert "- a second finding (see [Second](#second))" in report  # no target: the section itself
    assert record["findings"] == [
        {"text": "3 things happened (95% CI [1, 5])", "section": "first", "target": "first-table", "values": {"n": 3},
         "interval": [1.0, 5.0]},
        {"text": "a second finding", "section": "second", "target": "second", "values": {"share": 0.25},
         "interval": None}]
    assert "decisions/first-full.parquet" in record["files"]
    rows = pq.read_table(tmp_path / "a" / "decisions" / "first-full.parquet").to_pylist()
    ids = [str(q) for q in small_demo.select_queries(audit.evaluable_split(
        small_demo, audit.audit_split(small_demo, 0))[0].test).queries.ids[:3]]
    names = small_demo.actor_names
    argmax, dist = {"policy": "argmax"}, {"policy": "distribution"}
    assert rows == [
        {"protocol": "full", "router": "r1", "query_id": ids[0], "actor": names[0], "score": 1.0, **argmax,
         "deployed_score": 1.0},
        {"protocol": "full", "router": "r1", "query_id": ids[1], "actor": None, "score": None, **argmax,
         "deployed_score": None},
        {"protocol": "full", "router": "r1", "query_id": ids[2], "actor": names[2], "score": 0.5, **argmax,
         "deployed_score": 0.5},
        *({"protocol": "full", "router": "r2", "query_id": q, "actor": names[1], "score": None, **dist,
           "deployed_score": d} for q, d in zip(ids, (0.25, 0.5, 0.75), strict=True))]
    html = (tmp_path / "a" / "report.html").read_text()
    order = [html.index(f'<section id="{name}"') for name in ("findings", "first", "second")]
    assert order == sorted(order) and html.index("3 things happened") < order[1] and 'href="#first-table"' in html


def test_a_report_without_findings_says_so(small_demo: RoutingTable, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    def quiet(table: RoutingTable, ctx: AuditContext) -> Section:
        return Section("Quiet", [])

    audit.sections()
    monkeypatch.setitem(audit._SECTIONS._entries, "quiet", audit._Registered("quiet", 903, quiet))
    record = run_audit(small_demo, tmp_path / "a", only=["quiet"])
    assert record["findings"] == [] and "## Findings\n\nNo section reported a finding" in (
        tmp_path / "a" / "report.md").read_text()
    assert record["sections"]["quiet"]["title"] == "Quiet" and record["timings"]["quiet"]["from_cache"] is False


def test_every_glossary_entry_names_its_source() -> None:
    audit.sections()  # sections add their own terms (off-policy ones cite docs/off-policy.md)
    papers = (*PAPERS, OWN_RULE)  # the paper and section, or routerlab's own rule, never the specification
    for key, (label, meaning) in GLOSSARY.items():
        assert label and (any(p in meaning for p in papers) or "docs/" in meaning), key
        assert "SPEC " not in meaning, key
    section = audit.glossary_section(["mu_o", "v_b"])
    defs = section.blocks[0].items  # type: ignore[union-attr]
    assert [d.key for d in defs] == ["mu_o", "v_b"] and defs[1].note == "`v_b` in results.json"
