"""The CLI end to end: audit on the demo, info, import errors as one line with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from routerlab import RoutingTable
from routerlab.cli import main
from routerlab.datasets import demo


def test_audit_on_the_demo_writes_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--quick", "-o", str(tmp_path / "a")]) == 0
    from routerlab.reports.audit import section_names

    record = json.loads((tmp_path / "a" / "results.json").read_text())
    assert record["data"]["content_hash"] == demo().content_hash
    assert record["split"]["kind"] == "given"
    b = record["sections"]["bounds"]
    assert b["oracle"] > b["best_single"] > b["random"]
    report = (tmp_path / "a" / "report.md").read_text()
    assert "## Bounds" in report and "frontier-235b" in report
    assert list(record["sections"]) == section_names()
    assert {"table", "bounds", "diversity", "leaderboard", "partial", "two-model", "robustness"} <= set(section_names())
    # the report leads with its findings, each also in results.json; report.html is the same report
    assert report.split("\n## ")[1].startswith("Findings\n") and record["findings"]
    assert all(f["text"] in report and f["section"] in record["sections"] for f in record["findings"])
    html = (tmp_path / "a" / "report.html").read_text()
    assert html.count("<h2") >= len(record["sections"]) + 1 and "http://" not in html.split("</head>")[1]
    assert any(f.startswith("decisions/") for f in record["files"])
    lb = record["sections"]["leaderboard"]
    mu = {r["spec"]: r["metrics"]["mu_o"] for r in lb["results"]}
    assert mu["oracle"] == pytest.approx(b["oracle"]) and max(mu.values()) == mu["oracle"]
    # on the demo a router that reads the query beats always calling the best single actor
    assert max(v for k, v in mu.items() if k != "oracle") > mu["best-single"]
    for fig in record["sections"]["leaderboard"]["figures"] + record["sections"]["diversity"]["figures"]:
        assert (tmp_path / "a" / fig).stat().st_size > 1000


@pytest.mark.parametrize("args,needle", [
    (["--small", "frontier-235b"], "--small needs --large"),
    (["--large", "frontier-235b"], "--large needs --small"),
    (["--small", "frontier-235b", "--large", "frontier-235b"], "--small and --large are both 'frontier-235b'"),
    (["--small", "nosuch", "--large", "frontier-235b"], "--small 'nosuch' is not an actor of table"),
    (["--logs", "/no/such/logs.csv"], "--logs /no/such/logs.csv: no such logs file"),
    (["--logs", "/"], "--logs /: is a directory, not a logs file"),
    (["--no-cache", "--cache-dir", "/tmp"], "--no-cache and --cache-dir contradict each other"),
    (["--only", ","], "--only needs at least one section"),
    (["-o", "/proc/version"], "-o /proc/version: is an existing file, not a directory"),
])
def test_audit_bad_options_are_one_line_exit_2(args: list[str], needle: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["audit", *args] if "-o" in args else ["audit", *args, "-o", str(tmp_path / "a")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "a").exists()


def test_audit_logs_file_is_read_before_any_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "logs.csv"
    bad.write_text("query_id,actor,score\nq1,a,1\n")
    assert main(["audit", "--logs", str(bad), "-o", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "propensity" in err and len(err.strip().splitlines()) == 1


def test_audit_passes_its_options_to_the_sections(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from routerlab.reports import audit
    from routerlab.reports.blocks import Section

    seen: list[dict[str, object]] = []

    def spy(table: RoutingTable, ctx: audit.AuditContext) -> Section:
        seen.append({k: ctx.options.get(k) for k in audit.OPTION_KEYS} | {"quick_property": ctx.quick})
        return Section("Spy")

    audit.sections()
    monkeypatch.setitem(audit._SECTIONS._entries, "spy", audit._Registered("spy", 999, spy))
    demo(300, seed=1).save(tmp_path / "t")
    logs = tmp_path / "logs.csv"
    assert main(["log", str(tmp_path / "t"), "--part", "test", "-o", str(logs)]) == 0
    base = ["audit", str(tmp_path / "t"), "--only", "spy", "--no-cache"]
    assert main([*base, "-o", str(tmp_path / "a")]) == 0
    assert main([*base, "--quick", "--small", "tiny-2b", "--large", "frontier-235b", "--logs", str(logs),
                 "-o", str(tmp_path / "b")]) == 0
    assert seen[0] == {k: None for k in audit.OPTION_KEYS} | {"quick_property": False}
    assert seen[1] == {**seen[0], "quick": True, "small": "tiny-2b", "large": "frontier-235b", "logs": str(logs),
                       "quick_property": True}
    out = capsys.readouterr().out
    assert f"wrote {tmp_path / 'b' / 'report.html'} (the report" in out


def test_info_json_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    demo(300, seed=1).save(tmp_path / "t")
    assert main(["info", str(tmp_path / "t"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["n_queries"] == 300 and info["n_actors"] == 8
    assert info["has_latency"] and info["has_cost"] and info["has_tokens"]
    assert sum(info["splits"].values()) == 300
    assert info["duplicate_texts"] == 0 and info["train_test_overlap"] == 0
    assert main(["info", str(tmp_path / "t")]) == 0
    assert "300 queries x 8 actors" in capsys.readouterr().out


def test_info_reports_leaks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = RoutingTable.from_arrays(np.eye(3), actors=["a", "b", "c"], text=["same", "same", "other"],
                                 split=["train", "test", "test"])
    t.save(tmp_path / "t")
    main(["info", str(tmp_path / "t"), "--json"])
    info = json.loads(capsys.readouterr().out)
    assert info["duplicate_texts"] == 1 and info["train_test_overlap"] == 1


@pytest.mark.parametrize(
    "args,needle",
    [
        (["info", "/no/such/dir"], "/no/such/dir: no such table directory"),
        (["import", "no-such-format", "x", "-o", "out"], "unknown format 'no-such-format'"),
    ],
)
def test_user_errors_are_one_line_exit_2(args: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_import_missing_file_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "long", str(tmp_path / "missing.csv"), "-o", str(tmp_path / "o")]) == 2
    assert "missing.csv: no such file or directory" in capsys.readouterr().err


def test_not_a_table_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(tmp_path)]) == 2
    assert "not a routerlab table directory" in capsys.readouterr().err


def test_console_script_has_no_traceback(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "routerlab", "info", str(tmp_path / "nope")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("routerlab: error:") and "Traceback" not in proc.stderr


def test_import_long_with_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = "prompt_id,model_id,label\n1,m1,1\n1,m2,0\n2,m1,0\n2,m2,1\n2,m2,1\n"
    (tmp_path / "embedllm.csv").write_text(rows)
    args = ["import", "long", str(tmp_path / "embedllm.csv"), "-o", str(tmp_path / "t"),
            "-O", "rename=prompt_id=query_id,model_id=actor,label=score"]
    assert main(args) == 2  # the repeated (2, m2) cell is an error by default, naming the row
    err = capsys.readouterr().err
    assert "embedllm.csv" in err and "row 6" in err
    assert main([*args, "-O", "on_duplicate=last"]) == 0
    assert capsys.readouterr().out.startswith("wrote ")
    assert main(["info", str(tmp_path / "t"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["n_queries"] == 2 and info["actors"] == ["m1", "m2"]


def test_import_unknown_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.csv").write_text("query_id,actor,score\nq,a,1\n")
    assert main(["import", "long", str(tmp_path / "x.csv"), "-o", str(tmp_path / "t"), "-O", "bogus=1"]) == 2
    assert "has no option bogus" in capsys.readouterr().err


def test_import_bad_option_type_and_empty_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.csv").write_text("query_id,actor,score\n")
    out = str(tmp_path / "t")
    assert main(["import", "long", str(tmp_path / "x.csv"), "-o", out, "-O", "batch_rows=abc"]) == 2
    assert "option batch_rows='abc' should be int" in capsys.readouterr().err
    assert main(["import", "long", str(tmp_path / "x.csv"), "-o", out]) == 2
    assert "x.csv: holds no queries" in capsys.readouterr().err
