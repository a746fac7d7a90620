"""``routerlab agentic``: its text and JSON on an episode table, ``-o``, and one error line (exit 2) for every bad
option or input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routerlab.cli import main
from routerlab.datasets import demo
from tests.protocols.test_agentic import hand_table, routed_table


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("agentic")
    routed_table(60, informative=0.7).save(root / "episodes")
    routed_table(60, actors=("A", "B"), seed=3, informative=0.5).save(root / "single")
    hand_table({"agent": {"max_steps": 3}}).save(root / "hand")
    demo(60, seed=1).save(root / "demo")
    routed_table(40, actors=("A", "C")).save(root / "other")
    return {p.name: p for p in root.iterdir()}


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("routerlab: warning:")]
    assert len(lines) == 1 and lines[0].startswith("routerlab: error: ") and "Traceback" not in err, err
    return lines[0].removeprefix("routerlab: error: ")


def test_text_on_the_hand_table(tables: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agentic", str(tables["hand"]), "--routers", "oracle,best-single", "--n-boot", "40",
                 "--step-bins", "1,2,3"]) == 0
    out = capsys.readouterr().out
    assert "routers on 8 episodes" in out
    lines = out.splitlines()
    steps = next(line for line in lines if line.startswith("A ") and "2.5 [n/a]" in line)
    assert steps.split()[:3] == ["A", "4", "2.5"]
    assert any(line.split()[:3] == ["A", "4", "0.750"] and line.rstrip().endswith("50.0%") for line in lines)
    assert any(line.startswith("A ") and "1.000 [n/a]" in line and "2.200 [n/a]" in line for line in lines)
    assert "reached the limit (3 model calls)" in out


def test_json_and_output_with_a_single_turn_table(tables: dict[str, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ag"
    assert main(["agentic", str(tables["episodes"]), "--single-turn", str(tables["single"]), "--routers",
                 "oracle,random,best-single,knn,linear,naive-bayes", "--n-boot", "40", "--json", "-o",
                 str(out)]) == 0
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    assert record["protocol"] == "agentic" and record["settings"]["single_turn"] == str(tables["single"])
    assert record["compression"]["single_turn"]["setting"] == "single-turn"
    assert {r["slice"] for r in record["records"]} >= {"", "actor=A", "setting=agentic", "setting=single-turn"}
    assert json.loads((out / "agentic.json").read_text()) == record
    assert f"wrote {out / 'agentic.json'}" in captured.err


@pytest.mark.parametrize(("args", "message"), [
    (["--collapse", "0.2"], "--collapse: must be a finite number in (0.5, 1], got 0.2"),
    (["--step-bins", "3,1"], "--step-bins: must be increasing lower edges, e.g. 1,2,3,5,9,17; got 3,1"),
    (["--step-limit", "0"], "--step-limit: must be an integer in [1, 1,000,000], got 0"),
    (["--n-boot", "5"], "--n-boot: must be an integer in [40, 1,000,000], got 5"),
    (["--split", "random:2"], "--split: bad split 'random:2': the test fraction must be in (0, 1)"),
    (["--single-turn", "/no/such/table"], "--single-turn: /no/such/table: does not exist"),
    (["--routers", "nope"], None),
])
def test_bad_options_are_one_line(tables: dict[str, Path], args: list[str], message: str | None,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agentic", str(tables["episodes"]), *args]) == 2
    got = _one_error(capsys)
    if message is not None:
        assert got == message
    else:
        assert "nope" in got


def test_bad_inputs_are_one_line(tables: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agentic", str(tables["demo"])]) == 2
    assert "holds no episodes" in _one_error(capsys)
    assert main(["agentic", str(tmp_path / "missing")]) == 2
    assert _one_error(capsys) == f"{tmp_path / 'missing'}: no such table directory"
    assert main(["agentic", str(tables["episodes"]), "--single-turn", str(tables["other"]), "--routers",
                 "oracle", "--n-boot", "40"]) == 2
    assert _one_error(capsys).startswith(f"single-turn table {tables['other']}: lacks the actor(s) B of the episode")
    assert main(["agentic"]) == 2
    capsys.readouterr()
