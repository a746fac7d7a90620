"""``routerlab import -o`` refuses to overwrite, observed shares are printed truthfully, and the
documented ``import routerlab; routerlab.datasets.demo()`` works."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from routerlab.cli import main
from routerlab.data.store import MANIFEST
from routerlab.data.table import RoutingTable
from routerlab.reports.text import info_text, observed_share

CSV = "query_id,actor,score\nq1,a,1\nq1,b,0\nq2,a,0\n"


def _csv(tmp_path: Path, text: str = CSV) -> str:
    path = tmp_path / "x.csv"
    path.write_text(text)
    return str(path)


def test_import_refuses_an_existing_table_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, out = _csv(tmp_path), tmp_path / "t"
    assert main(["import", "long", src, "-o", str(out)]) == 0
    before = json.loads((out / MANIFEST).read_text())["content_hash"]
    capsys.readouterr()
    _csv(tmp_path, CSV + "q2,b,1\n")
    assert main(["import", "long", src, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(out) in err and "already holds a routerlab table" in err
    assert "--force" in err
    assert json.loads((out / MANIFEST).read_text())["content_hash"] == before  # untouched
    assert main(["import", "long", src, "-o", str(out), "--force"]) == 0
    assert json.loads((out / MANIFEST).read_text())["content_hash"] != before
    assert "100% observed" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t", "x.csv"]  # no temp or old copy left


def test_import_refuses_a_file_or_a_non_empty_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _csv(tmp_path)
    afile = tmp_path / "out.txt"
    afile.write_text("mine")
    assert main(["import", "long", src, "-o", str(afile)]) == 2
    assert "out.txt: exists and is not a directory" in capsys.readouterr().err
    assert afile.read_text() == "mine"
    assert main(["import", "long", src, "-o", str(afile / "sub")]) == 2  # under a file: one line, no traceback
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "which is a file" in err
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.md").write_text("mine")
    for extra in ([], ["--force"]):
        assert main(["import", "long", src, "-o", str(other), *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "other" in err and "not empty" in err
        assert [p.name for p in other.iterdir()] == ["notes.md"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["import", "long", src, "-o", str(empty)]) == 0  # an empty directory is fine
    assert (empty / MANIFEST).exists()


def test_observed_share_never_rounds_to_all_or_nothing() -> None:
    assert observed_share(120308, 120320, "score cells") == "99.99% of score cells observed (12 unobserved)"
    assert observed_share(10**9 - 1, 10**9) == "99.9999999% observed (1 unobserved)"
    assert observed_share(1, 10**9).startswith("0.0000001% observed")
    assert observed_share(5, 5) == "100% observed"
    assert observed_share(0, 5) == "0% observed (all 5 unobserved)"
    assert observed_share(3, 4) == "75.0% observed (1 unobserved)"


def test_import_and_info_print_unobserved_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    score = np.ones((2000, 6), dtype=np.float32)
    score[:12, 0] = np.nan  # 12 of 12,000 unobserved: 99.9% would be true, 100.0% would not
    rows = ["query_id,actor,score"] + [
        f"q{i},a{j},{'' if np.isnan(score[i, j]) else 1}" for i in range(2000) for j in range(6)]
    src = _csv(tmp_path, "\n".join(rows) + "\n")
    assert main(["import", "long", src, "-o", str(tmp_path / "t")]) == 0
    out = capsys.readouterr().out
    assert "99.9% observed (12 unobserved)" in out and "100.0%" not in out
    assert main(["info", str(tmp_path / "t")]) == 0
    out = capsys.readouterr().out
    assert "99.9% of score cells observed (12 unobserved)" in out
    assert main(["info", str(tmp_path / "t"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unobserved_cells"] == 12


def test_info_text_without_exact_count() -> None:
    t = RoutingTable.from_arrays(np.array([[1.0, np.nan]] + [[1.0, 1.0]] * 9999), actors=["a", "b"])
    info = t.describe()
    assert "99.995% of score cells observed (1 unobserved)" in info_text(info)


def test_documented_api_after_plain_import() -> None:
    code = ("import sys, routerlab; t = routerlab.datasets.demo(200); assert t.n_queries == 200; "
            "print('torch' in sys.modules, 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
    code = "import sys, routerlab; print('routerlab.datasets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"  # loaded lazily, on first use


def test_info_says_leaks_unchecked_without_train_labels() -> None:
    t = RoutingTable.from_arrays(np.eye(2), actors=["a", "b"], text=["x", "x"])
    assert "leaks        not checked: no 'train' split labels" in info_text(t.describe())
    labelled = RoutingTable.from_arrays(np.eye(2), actors=["a", "b"], text=["x", "x"], split=["train", "test"])
    assert "leaks        1 held-out query also occurs in train" in info_text(labelled.describe())


VIS_CSV = ("query_id,actor,score,text,task,gold\n"
           "q1,a,1,two plus two,math,4\nq1,b,0,,math,4\nq2,a,0,reverse a list,code,x[::-1]\nq2,b,1,,code,\n")


def test_import_visible_declares_columns_and_info_lists_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, out = _csv(tmp_path, VIS_CSV), tmp_path / "t"
    assert main(["import", "long", src, "-o", str(out), "--visible", "task", "-O", "hidden=gold"]) == 0
    capsys.readouterr()
    assert json.loads((out / MANIFEST).read_text())["visible_columns"] == ["task"]
    assert main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "visible      task  (query columns routers may read beside id, text, dataset and split)" in text
    assert "hidden       gold  (kept for reports; never reach a router)" in text
    assert main(["info", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["query_columns"] == {"visible": ["task"], "hidden": ["gold"]}
    # repeated and comma-separated: both declared
    assert main(["import", "long", src, "-o", str(tmp_path / "u"), "--visible", "task", "--visible", "gold"]) == 0
    assert json.loads((tmp_path / "u" / MANIFEST).read_text())["visible_columns"] == ["gold", "task"]
    assert main(["import", "long", src, "-o", str(tmp_path / "v")]) == 0  # unnamed columns are not kept
    capsys.readouterr()
    assert main(["info", str(tmp_path / "v"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["query_columns"] == {"visible": [], "hidden": []}


@pytest.mark.parametrize(("args", "message"), [
    (["--visible", "nope"], "no input file has the column 'nope'"),
    (["--visible", "task,text"], "'text' is a long-format column"),
    (["--visible", "gold", "-O", "hidden=gold"], "column 'gold' is named both visible and hidden"),
])
def test_import_visible_refuses_an_unknown_column(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  args: list[str], message: str) -> None:
    src, out = _csv(tmp_path, VIS_CSV), tmp_path / "t"
    assert main(["import", "long", src, "-o", str(out), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
    assert not out.exists()


def test_import_visible_on_another_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "rb.csv"  # RouterBench's wide layout
    src.write_text(",sample_id,prompt,eval_name,m1,m2,oracle_model_to_route_to\n"
                   "0,s0,['x'],e,1.0,0.0,m1\n1,s1,['y'],e,0.0,1.0,m2\n", encoding="utf-8")
    assert main(["import", "routerbench", str(src), "-o", str(tmp_path / "a")]) == 0
    assert json.loads((tmp_path / "a" / MANIFEST).read_text())["visible_columns"] == ["sample_id"]
    assert main(["import", "routerbench", str(src), "-o", str(tmp_path / "b"), "--visible",
                 "oracle_model_to_route_to"]) == 0
    assert json.loads((tmp_path / "b" / MANIFEST).read_text())["visible_columns"] == [
        "oracle_model_to_route_to", "sample_id"]
    capsys.readouterr()
    assert main(["import", "routerbench", str(src), "-o", str(tmp_path / "c"), "--visible", "oracle"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("routerlab: error: no query column 'oracle'; the table's query metadata columns are "
                       "oracle_model_to_route_to, sample_id (id, text, dataset and split are always visible)")
    assert not (tmp_path / "c").exists()
