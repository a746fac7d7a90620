"""``routerlab grade``: answers a user already has, graded by each row's grader and written with their grades;
the output imports with ``routerlab import long``; every bad row is one line naming the file, line and field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from routerlab.cli import main
from routerlab.data.store import load
from routerlab.llm.graders import Grade, Grader, Item, parse_grader_choice, register_grader
from routerlab.llm.graders import base as graders_base

ROWS: list[dict[str, Any]] = [
    {"query_id": "q1", "actor": "a", "question": "Which is a fruit?", "answer": "B. apple", "reference": "B",
     "choices": ["stone", "apple", "chair"], "dataset": "food"},
    {"query_id": "q1", "actor": "b", "question": "Which is a fruit?", "answer": "The answer is (C)",
     "reference": "B", "choices": ["stone", "apple", "chair"], "dataset": "food"},
    # LLMRouter's own words: a NaturalQA row graded by F1, an ARC row with labels and the option's text as gold
    {"query_id": "q2", "actor": "a", "question": "who sings i've got to be me", "answer": "Sammy Davis",
     "reference": "Sammy Davis, Jr", "metric": "f1_score", "dataset": "natural_qa"},
    {"query_id": "q2", "actor": "b", "question": "who sings i've got to be me", "answer": "Frank Sinatra",
     "reference": "Sammy Davis, Jr", "metric": "f1_score", "dataset": "natural_qa"},
    {"query_id": 3, "actor": "a", "question": "Capital of France?", "answer": "Paris.", "reference": "Paris"},
    {"query_id": 3, "actor": "b", "question": "Capital of France?", "answer": "", "reference": "Paris"},
    {"query_id": "q4", "actor": "a", "question": "Pick", "answer": "A", "reference": "2", "metric": "em_mc",
     "choices": json.dumps({"text": ["x", "y"], "label": ["1", "2"]})},
]


def write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.fixture()
def answers(tmp_path: Path) -> Path:
    return write(tmp_path / "answers.jsonl", ROWS)


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_grade_writes_rows_with_grades_and_a_summary(answers: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "graded.jsonl"
    assert main(["grade", str(answers), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"graded 7 answers of {answers}" in text and f"wrote {out}" in text
    assert "mc          3 answers  mean score 0.333" in text  # q1/a right; q1/b and q4/a wrong
    assert "f1          2 answers  mean score 0.400" in text  # 0.8 and 0
    assert "short       2 answers  mean score 0.500" in text
    rows = read(out)
    assert [{k: r[k] for k in ROWS[i]} for i, r in enumerate(rows)] == ROWS  # every input field kept as it was
    assert [(r["score"], r["grader"], r["extracted"]) for r in rows] == [
        (1.0, "mc", "B"), (0.0, "mc", "C"), (0.8, "f1", "Sammy Davis"), (0.0, "f1", "Frank Sinatra"),
        (1.0, "short", "Paris."), (0.0, "short", ""), (0.0, "mc", "A")]
    assert rows[2]["detail"] == "f1 0.800"
    # refused when there, replaced with --force; --json gives the summary as one object
    assert main(["grade", str(answers), "-o", str(out)]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err
    assert main(["grade", str(answers), "-o", str(out), "--force", "--json", "--grader", "short"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["rows"] == 7 and set(record["graders"]) == {"short"}
    assert record["graders"]["short"]["n"] == 7 and record["grader_choice"] == {"default": "short", "by_dataset": {}}
    assert [r["grader"] for r in read(out)] == ["short"] * 7


def test_grader_per_dataset(answers: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "g.jsonl"
    assert main(["grade", str(answers), "-o", str(out), "--grader", "natural_qa=short,food=f1"]) == 0
    rows = read(out)
    assert [r["grader"] for r in rows] == ["f1", "f1", "short", "short", "short", "short", "mc"]
    assert rows[2]["score"] == 0.0  # exact match now: "Sammy Davis" is not "Sammy Davis, Jr"


def test_output_imports_with_import_long(answers: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "graded.jsonl"
    assert main(["grade", str(answers), "-o", str(out)]) == 0
    assert main(["import", "long", str(out), "-o", str(tmp_path / "t"), "-O", "rename=question=text"]) == 0
    table = load(tmp_path / "t")
    assert table.actor_names == ["a", "b"] and table.queries.ids.tolist() == ["q1", "q2", "3", "q4"]
    assert table.queries.text.tolist()[:2] == ["Which is a fruit?", "who sings i've got to be me"]
    assert table.queries.dataset.tolist()[:2] == ["food", "natural_qa"]
    expected = np.array([[1.0, 0.0], [0.8, 0.0], [1.0, 0.0], [0.0, np.nan]])
    assert np.allclose(table.score, expected, equal_nan=True)  # q4 has no answer of actor b


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        ({"actor": "a", "question": "q", "answer": "x", "reference": "y"}, "query_id", "missing"),
        ({"query_id": "z", "question": "q", "answer": "x", "reference": "y"}, "actor", "missing"),
        ({"query_id": "z", "actor": "a", "answer": "x", "reference": "y"}, "question", "missing"),
        ({"query_id": "z", "actor": "a", "question": " ", "answer": "x", "reference": "y"}, "question", "empty"),
        ({"query_id": "z", "actor": "a", "question": "q", "reference": "y"}, "answer", "missing"),
        ({"query_id": "z", "actor": "a", "question": "q", "answer": ["x"], "reference": "y"}, "answer",
         "expected a text"),
        ({"query_id": "z", "actor": "a", "question": "q", "answer": "x"}, "reference", "missing"),
        ({"query_id": "z", "actor": "a", "question": "q", "answer": "x", "reference": ""}, "reference", "empty"),
        ({"query_id": True, "actor": "a", "question": "q", "answer": "x", "reference": "y"}, "query_id",
         "expected a text"),
        ({"query_id": "z", "actor": "a", "question": "q", "answer": "x", "reference": "y", "metric": 3}, "metric",
         "expected a text"),
        ({"query_id": "z", "actor": "a", "question": "q", "answer": "x", "reference": "y", "dataset": ["d"]},
         "dataset", "expected a text"),
        ({"query_id": "z", "actor": "a", "question": "q", "answer": "x", "reference": "C", "choices": ["u", "v"]},
         "reference", "neither an option letter"),
        ({"query_id": "z", "actor": "a", "question": "q", "answer": "x", "reference": "A", "choices": "u, v"},
         "choices", "not JSON"),
        ({"query_id": "z", "actor": "a", "question": "q", "answer": "x", "reference": "A", "metric": "em_mc"},
         "choices", "graded by mc but has no options"),
        ({"query_id": "q1", "actor": "a", "question": "q", "answer": "x", "reference": "y"}, "query_id",
         "given twice (first on line 1)"),
    ],
)
def test_a_bad_row_is_one_line_naming_file_row_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          row: dict[str, Any], field: str, message: str) -> None:
    f = write(tmp_path / "bad.jsonl", [ROWS[0], row])
    out = tmp_path / "g.jsonl"
    assert main(["grade", str(f), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("routerlab: error:"), err
    assert f"{f}, row 2, field '{field}'" in err and message in err, err
    assert not out.exists()


def test_bad_files_and_options(answers: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        (["grade", str(tmp_path / "none.jsonl"), "-o", str(tmp_path / "g.jsonl")], "no such file"),
        (["grade", str(write(tmp_path / "empty.jsonl", [""])), "-o", str(tmp_path / "g.jsonl")], "holds no answer"),
        (["grade", str(write(tmp_path / "broken.jsonl", ['{"query_id": 1,'])), "-o", str(tmp_path / "g.jsonl")],
         "invalid JSON"),
        (["grade", str(answers), "-o", str(tmp_path / "g.jsonl"), "--grader", "nosuch"], "unknown grader 'nosuch'"),
        (["grade", str(answers), "-o", str(tmp_path / "g.jsonl"), "--grader", "food=nosuch"],
         "unknown grader 'nosuch'"),
        (["grade", str(answers), "-o", str(answers), "--force"], "is the answers file itself"),
        (["grade", str(answers), "-o", str(tmp_path)], "already exists"),
        (["grade", str(answers), "-o", str(tmp_path / "g.csv")], "the graded rows are JSON lines; give a .jsonl file"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, (argv, err)
    assert not (tmp_path / "g.jsonl").exists()


def test_an_mbpp_reference_list_is_kept_as_llmrouter_writes_it(tmp_path: Path) -> None:
    from routerlab.llm.answers import read_answers
    from routerlab.llm.graders import GraderChoice

    # MBPP's tests in `choices` are not options: with metric code_eval they are never read as such
    row = {"query_id": "m", "actor": "a", "question": "Write f.", "answer": "x", "metric": "code_eval",
           "reference": ["assert f(1) == 2", "assert f(2) == 3"], "choices": ["assert f(1) == 2"]}
    (r,) = read_answers(write(tmp_path / "m.jsonl", [row]), GraderChoice(default="short"))
    assert r.item.reference == "['assert f(1) == 2', 'assert f(2) == 3']" and r.item.choices is None


class _Judge(Grader):
    """A stand-in for a grader that takes an argument (a judge's backend spec, commas and all)."""

    takes_arg: ClassVar[bool] = True
    binary: ClassVar[bool] = True
    made: ClassVar[list[str]] = []

    def __init__(self, arg: str | None = None, *, cache_dir: Path | None = None) -> None:
        super().__init__(arg, cache_dir=cache_dir)
        self.made.append(self.name)

    def grade(self, item: Item) -> Grade:
        return Grade(1.0 if item.answer.strip() else 0.0, self.name, item.answer.strip(), "non-empty")


@pytest.fixture()
def fake_judge() -> Iterator[type[_Judge]]:
    register_grader("test-judge")(_Judge)
    _Judge.made.clear()
    yield _Judge
    graders_base._REGISTRY.remove("test-judge")


def test_a_judge_spec_with_commas_is_one_grader(answers: Path, tmp_path: Path, fake_judge: type[_Judge],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    spec = "test-judge:openai:m@https://h/v1,key_env=K,input_price=1"
    # a spec runs to the end of its --grader value: other pairs come before it, or in another --grader
    choice = parse_grader_choice([f"food=f1,natural_qa={spec}"])
    assert choice.by_dataset == {"natural_qa": spec, "food": "f1"} and choice.default is None
    assert parse_grader_choice([f"natural_qa={spec}", "food=f1"]) == choice
    out = tmp_path / "g.jsonl"
    assert main(["grade", str(answers), "-o", str(out), "--grader", f"natural_qa={spec}", "--grader", "food=f1"]) == 0
    rows = read(out)
    assert [r["grader"] for r in rows] == ["f1", "f1", spec, spec, "short", "short", "mc"]
    assert fake_judge.made == [spec]  # one instance per grader name
    assert main(["grade", str(answers), "-o", str(out), "--force", "--grader", spec]) == 0
    assert {r["grader"] for r in read(out)} == {spec}
    assert f"{spec}       7 answers  mean score 0.857" in capsys.readouterr().out  # one empty answer
