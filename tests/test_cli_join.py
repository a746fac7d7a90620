"""``routerlab join``: kept/dropped counts printed, the pair designated, -o checked like ``import``, and every bad
value one error line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from routerlab import RoutingTable, load
from routerlab.cli import main
from routerlab.data.join import two_model_pair
from routerlab.data.store import MANIFEST


@pytest.fixture
def two_tables(tmp_path: Path) -> tuple[str, str]:
    """A 'collected' small model on q0..q4 and a 'large' one on q4, q2, q0, q7 (other order, one id extra)."""
    small = RoutingTable.from_arrays([[1], [0], [1], [0], [1]], actors=["qwen-1.5b"],
                                     query_ids=[f"q{i}" for i in range(5)], text=["a", "b", "c", "d", "e"],
                                     name="collected")
    large = RoutingTable.from_arrays([[0], [1], [1], [0]], actors=["gemini"], query_ids=["q4", "q2", "q0", "q7"],
                                     text=["e", "c", "a", "z"], name="shared")
    small.save(tmp_path / "small")
    large.save(tmp_path / "large")
    return str(tmp_path / "small"), str(tmp_path / "large")


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("routerlab: error: ") and "Traceback" not in err, err
    return err


def test_join_writes_the_table_and_prints_kept_and_dropped(two_tables: tuple[str, str], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pair"
    assert main(["join", *two_tables, "-o", str(out), "--small", "qwen-1.5b", "--large", "gemini"]) == 0
    text = capsys.readouterr().out
    assert "3 queries kept (inner join on query id) x 2 actors" in text
    assert "table 1 collected: 3 of 5 queries kept, 2 dropped" in text
    assert "table 2 shared: 3 of 4 queries kept, 1 dropped" in text
    assert "two-model pair: small qwen-1.5b, large gemini" in text
    t = load(out)
    assert t.queries.ids.tolist() == ["q0", "q2", "q4"]
    np.testing.assert_array_equal(t.score, [[1, 1], [1, 1], [1, 0]])  # aligned by id, not by position
    assert two_model_pair(t) == ("qwen-1.5b", "gemini")


def test_join_json_record(two_tables: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["join", *two_tables, "-o", str(tmp_path / "j"), "--how", "left", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["join"]["n_queries"] == 5 and rec["two_model"] is None
    assert [s["dropped"] for s in rec["join"]["sources"]] == [0, 1]
    assert rec["content_hash"] == load(tmp_path / "j").content_hash


def test_output_is_checked_like_import(two_tables: tuple[str, str], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "j"
    assert main(["join", *two_tables, "-o", str(out)]) == 0
    before = json.loads((out / MANIFEST).read_text())["content_hash"]
    capsys.readouterr()
    assert main(["join", *two_tables, "-o", str(out), "--small", "qwen-1.5b", "--large", "gemini"]) == 2
    assert "already holds a routerlab table; pass --force" in _one_error(capsys)
    assert json.loads((out / MANIFEST).read_text())["content_hash"] == before
    assert main(["join", *two_tables, "-o", str(out), "--force", "--small", "qwen-1.5b", "--large", "gemini"]) == 0
    assert two_model_pair(load(out)) == ("qwen-1.5b", "gemini")
    assert main(["join", two_tables[0], two_tables[1], "-o", two_tables[0], "--force"]) == 2
    assert "is one of the input tables" in _one_error(capsys)
    (tmp_path / "file").write_text("x")
    assert main(["join", *two_tables, "-o", str(tmp_path / "file")]) == 2
    assert "exists and is not a directory" in _one_error(capsys)


@pytest.mark.parametrize(("extra", "message"), [
    (["--small", "qwen-1.5b"], "give both or neither"),
    (["--large", "gemini"], "give both or neither"),
    (["--small", "qwen-1.5b", "--large", "gpt"], "'gpt' is not an actor"),
    (["--small", "gemini", "--large", "gemini"], "must differ"),
    (["--how", "outer"], "--how must be 'inner' or 'left'"),
    (["--how", ""], "--how must be 'inner' or 'left'"),
])
def test_bad_values_are_one_line(two_tables: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 extra: list[str], message: str) -> None:
    assert main(["join", *two_tables, "-o", str(tmp_path / "j"), *extra]) == 2
    assert message in _one_error(capsys)
    assert not (tmp_path / "j").exists()


def test_bad_tables_are_one_line(two_tables: tuple[str, str], tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["join", two_tables[0], str(tmp_path / "missing"), "-o", str(tmp_path / "j")]) == 2
    _one_error(capsys)
    assert main(["join", two_tables[0], two_tables[0], "-o", str(tmp_path / "j")]) == 2
    assert "actor 'qwen-1.5b' is in table 1" in _one_error(capsys)
    clash = RoutingTable.from_arrays([[1]], actors=["other"], query_ids=["q1"], text=["not b"])
    clash.save(tmp_path / "clash")
    assert main(["join", two_tables[0], str(tmp_path / "clash"), "-o", str(tmp_path / "j")]) == 2
    assert "query id 'q1' has different text" in _one_error(capsys)
    assert not (tmp_path / "j").exists()
