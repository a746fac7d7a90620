"""Questions from a JSON-lines file, from a saved table's metadata and from the real shared tables; sampling."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from routerlab.data.table import Actors, Queries, RoutingTable
from routerlab.errors import DataError, UsageError
from routerlab.llm.questions import load_questions, parse_options, stratified_order


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_jsonl_questions(tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "quiz.jsonl", [
        {"id": "a", "question": "2+2?", "choices": ["3", "4"], "answer": "B"},
        {"id": 7, "question": "Colour of the sky?", "choices": ["red", "blue", "green"], "answer": "blue",
         "dataset": "sky", "split": "test"},
        {"question": "Capital of France?", "answer": "Paris"},
        "",
        {"id": "n", "question": "6*7?", "answer": 42},
        {"id": "arc", "question": "Pick", "choices": {"text": ["x", "y"], "label": ["1", "2"]}, "answer": "2"},
        {"id": "low", "question": "Pick", "choices": ["x", "y"], "answer": "a"},
    ])
    qs = load_questions(f)
    assert [q.id for q in qs] == ["a", "7", "line3", "n", "arc", "low"]
    a, sky, paris, n, arc, low = qs
    assert (a.kind, a.gold, a.choices, a.letters, a.dataset, a.split) == ("mc", "B", ("3", "4"), "AB", "quiz", "")
    assert (sky.gold, sky.dataset, sky.split) == ("B", "sky", "test")  # the option's text -> its letter
    assert (paris.kind, paris.gold, paris.choices, paris.letters) == ("generated", "Paris", None, "")
    assert [q.grader for q in qs] == ["mc", "mc", "short", "short", "mc", "mc"]
    assert (arc.reference, arc.item("B").reference, paris.item("Paris!").reference) == ("2", "B", "Paris")
    assert n.gold == "42"
    assert arc.gold == "B"  # the source's label 2 -> B
    assert low.gold == "A"
    assert qs.n_available == 6 and dict(qs.skipped) == {} and qs.source == str(f)


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"id": "a", "choices": ["x"], "answer": "A"}, "question"),
        ({"id": "a", "question": "  ", "answer": "A"}, "question"),
        ({"id": "a", "question": "q?"}, "answer"),
        ({"id": "a", "question": "q?", "answer": ""}, "answer"),
        ({"id": "a", "question": "q?", "choices": ["x", "y"], "answer": "C"}, "answer"),
        ({"id": "a", "question": "q?", "choices": ["x", "y"], "answer": "z"}, "answer"),
        ({"id": "a", "question": "q?", "choices": "x, y", "answer": "A"}, "choices"),
        ({"id": "a", "question": "q?", "choices": [["x"], "y"], "answer": "A"}, "choices"),
        ({"id": "a", "question": "q?", "choices": [str(i) for i in range(11)], "answer": "A"}, "choices"),
        ({"id": "a", "question": "q?", "choices": {"text": ["x", "y"], "label": ["1"]}, "answer": "1"}, "choices"),
        ({"id": True, "question": "q?", "answer": "A"}, "id"),
        ({"id": "a", "question": "q?", "answer": "A", "dataset": 3}, "dataset"),
        ({"id": "a", "question": "q?", "answer": "A", "metric": 3}, "metric"),
        ({"id": "a", "question": "q?", "answer": "A", "grader": "essay"}, "grader"),
        ({"id": "a", "question": "q?", "answer": "A", "grader": "f1:x"}, "grader"),
        ({"id": "a", "question": "q?", "answer": "A", "grader": ["f1"]}, "grader"),
    ],
)
def test_jsonl_errors_name_line_and_field(tmp_path: Path, row: dict[str, object], field: str) -> None:
    f = write_jsonl(tmp_path / "bad.jsonl", [{"id": "ok", "question": "fine?", "answer": "yes"}, row])
    with pytest.raises(DataError) as err:
        load_questions(f)
    assert err.value.row == 2 and err.value.field == field and err.value.file == str(f)


def test_jsonl_repeated_id_and_bad_sources(tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "rep.jsonl", [{"id": "x", "question": "q", "answer": "a"},
                                              {"id": "x", "question": "r", "answer": "b"}])
    with pytest.raises(DataError, match=r"repeats \(first on line 1"):
        load_questions(f)
    with pytest.raises(DataError, match=r"invalid JSON"):
        load_questions(write_jsonl(tmp_path / "broken.jsonl", ['{"id": 1,']))
    with pytest.raises(DataError, match="holds no question"):
        load_questions(write_jsonl(tmp_path / "empty.jsonl", [""]))
    with pytest.raises(DataError, match="no such file"):
        load_questions(tmp_path / "missing.jsonl")
    (tmp_path / "q.csv").write_text("x\n")
    with pytest.raises(DataError, match=r"table directory or a \.jsonl file"):
        load_questions(tmp_path / "q.csv")
    with pytest.raises(UsageError, match="at least 1"):
        load_questions(f, limit=0)
    with pytest.raises(UsageError, match="kinds"):
        load_questions(f, kinds=["essay"])


def _table(extra: dict[str, list[object]], datasets: list[str] | None = None) -> RoutingTable:
    n = len(next(iter(extra.values())))
    return RoutingTable(
        queries=Queries.create([f"q{i}" for i in range(n)], text=[f"question {i}" for i in range(n)],
                               dataset=datasets or ["d"] * n, split=["test"] * n, extra=extra),
        actors=Actors.create(["m"]), score=np.zeros((n, 1), dtype=np.float32), name="tiny")


def test_questions_from_a_saved_table(tmp_path: Path) -> None:
    """MMLU-Pro-style metadata (answer + options JSON) and LLMRouter-style (ground_truth, choices, metric)."""
    table = _table({
        "answer": ["C", "", "", "", "", "", "", "", "", "B"],
        "options": [json.dumps(["w", "x", "y", "z"]), "", "", "", "", "", "", "", "", json.dumps(["only"])],
        "ground_truth": ["", "D", "Solution...\n#### 1,250", "so \\boxed{\\frac{1}{2}}.", "Ben Gibbard", "B", "def f",
                         "", "words", ""],
        "metric": ["", "em_mc", "GSM8K", "MATH", "f1_score", "em_mc", "code_eval", "", "commongen_coverage", ""],
        "choices": ["", json.dumps({"text": ["p", "q", "r", "s"], "labels": ["A", "B", "C", "D"]}), "", "", "", "",
                    "", "", "", ""],
    })
    table.save(tmp_path / "t")
    qs = load_questions(tmp_path / "t")
    by_id = {q.id: q for q in qs}
    assert sorted(by_id) == ["q0", "q1", "q2", "q3", "q4", "q6", "q8"]  # code and coverage questions too now
    assert (by_id["q0"].kind, by_id["q0"].gold, by_id["q0"].choices) == ("mc", "C", ("w", "x", "y", "z"))
    assert (by_id["q1"].kind, by_id["q1"].gold, by_id["q1"].letters) == ("mc", "D", "ABCD")
    # a grader reads the reference as the source wrote it
    assert (by_id["q2"].kind, by_id["q2"].gold, by_id["q2"].grader) == ("generated", "Solution...\n#### 1,250",
                                                                       "number")
    assert (by_id["q3"].reference, by_id["q3"].grader) == ("so \\boxed{\\frac{1}{2}}.", "math")
    assert (by_id["q4"].kind, by_id["q4"].gold, by_id["q4"].split, by_id["q4"].grader) == \
        ("generated", "Ben Gibbard", "test", "f1")
    assert [(by_id[i].grader, by_id[i].metric) for i in ("q0", "q1", "q6", "q8")] == \
        [("mc", ""), ("mc", "em_mc"), ("code", "code_eval"), ("coverage", "commongen_coverage")]
    assert dict(qs.skipped) == {
        "gold is not one of the options' letters or labels": 1,  # q9: B with one option
        "multiple choice without options": 1,  # q5
        "no gold answer": 1,  # q7
    }
    only_mc = load_questions(table, kinds=["mc"])
    assert [q.id for q in only_mc] == ["q0", "q1"] and only_mc.skipped["kind not in mc"] == 5
    assert len(load_questions(table, kinds=["short"])) == 5  # the older name of generated
    # the user's choice comes first; mc cannot grade a question without options
    forced = load_questions(table, graders="mc")
    assert [q.id for q in forced] == ["q0", "q1"] and forced.skipped["grader mc on a question without options"] == 5
    per_dataset = load_questions(table, graders=["d=short"])
    assert {q.grader for q in per_dataset} == {"short"}
    with pytest.raises(UsageError, match="unknown grader 'essay'"):
        load_questions(table, graders="essay")


def test_a_table_without_gold_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="has no gold answers"):
        load_questions(_table({"src": ["x", "y"]}))


def test_parse_options() -> None:
    assert parse_options("") is None and parse_options(None) is None and parse_options("[]") is None
    assert parse_options('["a", "b"]') == (("a", "b"), None)
    assert parse_options({"text": ["a", "b"], "labels": ["A", "B"]}) == (("a", "b"), ("A", "B"))
    assert parse_options([1, 2.5]) == (("1", "2.5"), None)
    for bad in ("{not json", '{"label": ["A"]}', '"text"', [True], {"text": ["a"], "label": ["A", "A"]}):
        with pytest.raises(ValueError):
            parse_options(bad)


def test_stratified_order_is_nested_seeded_and_proportional() -> None:
    datasets = ["a"] * 60 + ["b"] * 30 + ["c"] * 10
    order = stratified_order(datasets, seed=3)
    assert sorted(order.tolist()) == list(range(100))
    assert np.array_equal(order, stratified_order(datasets, seed=3))
    assert not np.array_equal(order, stratified_order(datasets, seed=4))
    for k in (1, 7, 10, 33, 50, 99):
        counts = Counter(datasets[i] for i in order[:k])
        for d, share in (("a", 0.6), ("b", 0.3), ("c", 0.1)):
            assert abs(counts[d] - k * share) <= 1, (k, d, counts)


def test_limit_takes_a_nested_stratified_sample(tmp_path: Path) -> None:
    rows = [{"id": f"{d}{i}", "question": f"{d} {i}?", "answer": "x", "dataset": d}
            for d, n in (("big", 40), ("small", 10)) for i in range(n)]
    f = write_jsonl(tmp_path / "q.jsonl", rows)
    five, ten = load_questions(f, limit=5, seed=1), load_questions(f, limit=10, seed=1)
    assert len(five) == 5 and five.counts() == {"big": 4, "small": 1} and five.n_available == 50
    assert {q.id for q in five} <= {q.id for q in ten} and ten.counts() == {"big": 8, "small": 2}
    assert [q.id for q in load_questions(f, limit=5, seed=1)] == [q.id for q in five]
    assert [q.id for q in load_questions(f, limit=5, seed=2)] != [q.id for q in five]
    positions = [int(q.id[3:]) if q.id.startswith("big") else 100 + int(q.id[5:]) for q in ten]
    assert positions == sorted(positions)  # source order kept
    assert len(load_questions(f, limit=500)) == 50


@pytest.mark.shared_data
def test_real_tables_give_questions(real_table: Callable[[str], RoutingTable]) -> None:
    mmlu = load_questions(real_table("mmlu-pro"), limit=300, seed=0)
    assert len(mmlu) == 300 and mmlu.n_available == 12032 and dict(mmlu.skipped) == {}
    assert all(q.kind == "mc" and q.gold in q.letters and 3 <= len(q.choices or ()) <= 10 for q in mmlu)
    llmrouter = load_questions(real_table("llmrouter"))
    kinds = Counter((q.dataset, q.kind) for q in llmrouter)
    assert kinds[("arc_challenge", "mc")] == 498 and kinds[("openbook_qa", "mc")] == 496
    assert kinds[("gsm8k", "generated")] == 550 and kinds[("mbpp", "generated")] == 548
    assert len(llmrouter) == 6108 and dict(llmrouter.skipped) == {}  # every question has a grader
    gsm = next(q for q in llmrouter if q.dataset == "gsm8k")
    assert gsm.grader == "number" and gsm.reference.rsplit("####", 1)[1].strip().replace(",", "").isdigit()
