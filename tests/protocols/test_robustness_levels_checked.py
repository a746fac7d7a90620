"""Variants-file levels and the "weakest level" (issue 21): a level no perturber defines ("banana") is an error
naming the file, row and field and listing the levels; and no level is named the weakest when none is weaker
(every level's rho equal, rho 1 for a fixed router) or when levels tie for the lowest."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from routerlab.cli import main
from routerlab.datasets import demo
from routerlab.errors import DataError
from routerlab.perturb.base import LEVELS
from routerlab.perturb.files import read_variants
from routerlab.protocols.base import run_protocol
from routerlab.protocols.robustness import RobustnessResult
from routerlab.reports.robustness_report import robustness_text
from routerlab.reports.sections.robustness import classify, findings

PAPER = ", ".join(LEVELS)


def lines(path: Path, *records: dict[str, object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_an_unknown_level_names_file_row_field_and_the_levels(tmp_path: Path) -> None:
    path = lines(tmp_path / "v.jsonl", {"query_id": "q1", "level": "word", "text": "a b"},
                 {"query_id": "q1", "level": "banana", "text": "c d"})
    with pytest.raises(DataError, match=rf"v\.jsonl, row 2, field 'level': unknown level 'banana'; the levels are "
                                        rf"{PAPER}") as info:
        read_variants(path)
    assert (info.value.file, info.value.row, info.value.field) == (str(path), 2, "level")
    with pytest.raises(DataError, match="row 2, field 'level': unknown level 'banana'"):
        read_variants(path, levels=["word"])  # a bad line is bad whichever levels are kept
    mapping = tmp_path / "v.json"
    mapping.write_text(json.dumps({"q1": {"word": ["a b", "b a"], "Syntax": ["x"]}}), encoding="utf-8")
    with pytest.raises(DataError, match=r"v\.json, row 3, field 'level': unknown level 'Syntax'"):
        read_variants(mapping)


def test_the_commands_refuse_it_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = demo(120, seed=1)
    table.save(tmp_path / "t")
    qid = str(table.queries.ids[0])
    path = lines(tmp_path / "v.jsonl", {"query_id": qid, "level": "banana", "text": "a b c"})
    quiz = lines(tmp_path / "quiz.jsonl", {"id": qid, "question": "Which?", "choices": ["x", "y"], "answer": "A"})
    for argv in (["robustness", str(tmp_path / "t"), "--routers", "best-single", "--variants-file", str(path)],
                 ["collect", str(quiz), "--actors", "a=openai:m@http://127.0.0.1:9/v1", "-o",
                  str(tmp_path / "c"), "--variants", str(path)]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        # the paper's levels first; levels other tests registered may follow
        assert "\n" not in err and (f"{path}, row 1, field 'level': unknown level 'banana'; the levels are "
                                    f"{PAPER}") in err, err


@pytest.fixture(scope="module")
def run_two_levels() -> object:
    table = demo(240, seed=3)
    return run_protocol("robustness", table, {"levels": "character,syntax", "variants": 2, "encoder": "tfidf:dim=32",
                                              "n_boot": 40}, 2, ["best-single", "knn:k=5"]).native


def test_a_fixed_router_has_no_weakest_level(run_two_levels: object) -> None:
    fixed = next(r for r in run_two_levels.results if r.spec == "best-single")  # type: ignore[attr-defined]
    assert fixed.rho_by_level == {"character": 1.0, "syntax": 1.0}
    assert fixed.weakest_level() is None and fixed.weakest_cell() == "none"
    assert fixed.weakest_phrase() == "no level is weaker (1.000 at every level)"
    text = robustness_text(run_two_levels)  # type: ignore[arg-type]
    row = next(x for x in text.splitlines() if x.startswith("best-single"))
    assert row.split()[-1] == "none" and "character" not in row.split()[-1]
    rows = classify(run_two_levels)  # type: ignore[arg-type]
    sentence = next(s for s in findings(run_two_levels, rows) if s.startswith("`best-single`"))  # type: ignore
    assert "no level is weaker (1.000 at every level)" in sentence and "lowest at" not in sentence
    assert rows["best-single"]["weakest_level"] is None and rows["best-single"]["weakest_rho"] == 1.0


def test_ties_and_a_single_weakest_level(run_two_levels: object) -> None:
    base: RobustnessResult = run_two_levels.results[0]  # type: ignore[attr-defined]

    def with_levels(**rho: float) -> RobustnessResult:
        return dataclasses.replace(base, rho_by_level=dict(rho))

    one = with_levels(character=0.5, word=0.75, syntax=0.9)
    assert (one.weakest_level(), one.weakest_cell(), one.weakest_phrase()) == (
        "character", "character", "lowest at `character` (0.500)")
    tie = with_levels(character=0.75, word=0.75, syntax=0.9)
    assert (tie.weakest_level(), tie.weakest_cell(), tie.weakest_phrase()) == (
        None, "character = word", "lowest at `character` and `word` (0.750 each)")
    equal = with_levels(character=0.8, word=0.8)
    assert (equal.weakest_level(), equal.weakest_cell(), equal.weakest_phrase()) == (
        None, "none", "no level is weaker (0.800 at every level)")
    single = with_levels(character=0.6)
    assert (single.weakest_level(), single.weakest_cell(), single.weakest_phrase()) == (None, "-", None)
    nan = with_levels(character=float("nan"), word=0.7, syntax=0.9)
    assert nan.weakest_level() == "word" and nan.lowest_levels() == ["word"]


def test_a_level_of_ones_own_is_read_when_its_rows_declare_it(tmp_path: Path) -> None:
    path = lines(tmp_path / "v.jsonl", {"query_id": "q1", "level": "word", "text": "a b"},
                 {"query_id": "q1", "level": "my-typos", "text": "c d", "meaning_changing": False},
                 {"query_id": "q2", "level": "my-typos", "text": "e f", "meaning_changing": False})
    ps = read_variants(path)
    assert ps.levels == ("word", "my-typos") and ps.stats["my-typos"] == {"queries": 2, "variants": 2}
    undeclared = lines(tmp_path / "u.jsonl", {"query_id": "q1", "level": "my-typos", "text": "c d"})
    with pytest.raises(DataError, match=r"unknown level 'my-typos'.*mark its rows"):
        read_variants(undeclared)
