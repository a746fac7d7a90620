"""collect with graders: every task of LLMRouter's query files gets its grader (none skipped), is asked with
that grader's prompt and graded by it; a fake backend answers from a script, so the grades can be checked."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.llm.base import GREEDY, Backend, BackendSpec, ChoiceScores, Completion, Decoding, Message
from routerlab.llm.collect import collect, prompt_messages
from routerlab.llm.graders import _prompts, get_grader
from routerlab.llm.questions import Question, load_questions

pytestmark = pytest.mark.shared_data

TASKS = {"agentverse-logicgrid": "mc", "agentverse-mgsm": "math", "arc_challenge": "mc", "commongen": "coverage",
         "commonsense_qa": "mc", "gpqa": "mc", "gsm8k": "number", "human_eval": "code", "math": "math",
         "mbpp": "code", "mmlu": "mc", "natural_qa": "f1", "openbook_qa": "mc", "trivia_qa": "f1"}

MIN_JUMPS = '''```python
def min_Jumps(a, b, d):
    a, b = min(a, b), max(a, b)
    if d >= b:
        return (d + b - 1) / b
    if d == 0:
        return 0
    if d == a:
        return 1
    return 2
```'''
HAS_CLOSE = '''```python
from typing import List


def has_close_elements(numbers: List[float], threshold: float) -> bool:
    return any(abs(x - y) < threshold for i, x in enumerate(numbers) for j, y in enumerate(numbers) if i != j)
```'''


class ReplyBackend(Backend):
    """Generates the scripted reply of each prompt (by its full text); no option-letter logits."""

    options: ClassVar[Mapping[str, Any]] = {}
    supports_choice_scores = False

    def __init__(self, script: Mapping[str, str]) -> None:
        super().__init__(BackendSpec("reply", "fake", {}))
        self.script = dict(script)
        self.asked: list[str] = []

    def complete(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Completion:
        prompt = messages[-1].content
        self.asked.append(prompt)
        return Completion(self.script.get(prompt, "no idea"), 10, 5, 0.5, 0.1, 0.02)

    def choice_scores(self, messages: Sequence[Message], letters: Sequence[str]) -> ChoiceScores:
        raise AssertionError("no logits here")


def one_per_task(real_table: Callable[[str], RoutingTable]) -> list[Question]:
    """One question of each task (MBPP task 617 and HumanEval/0, whose solutions are scripted above)."""
    qs = load_questions(real_table("llmrouter"))
    picked: dict[str, Question] = {}
    for q in qs:
        wanted = {"mbpp": "617", "human_eval": "HumanEval/0"}.get(q.dataset)
        if q.dataset not in picked and (wanted is None or q.task_id == wanted):
            picked[q.dataset] = q
    return [picked[d] for d in sorted(picked)]


def right_reply(q: Question) -> str:
    """A reply its grader should score 1 (from the raw reference as LLMRouter wrote it)."""
    from routerlab.llm.grading import last_boxed

    if q.grader == "mc":
        return f"The answer is ({q.gold})."
    if q.grader == "number":
        return "Step by step ... The answer is " + q.reference.rsplit("####", 1)[1].strip()
    if q.grader == "math":
        boxed = last_boxed(q.reference)
        return f"So the answer is \\boxed{{{boxed if boxed is not None else q.reference.strip()}}}."
    if q.grader == "coverage":
        return "A scene with " + " and ".join(w.strip() for w in q.reference.split(",")) + "."
    if q.grader == "code":
        return MIN_JUMPS if q.dataset == "mbpp" else HAS_CLOSE
    return q.reference


def test_every_llmrouter_task_has_a_grader_and_none_is_skipped(real_table: Callable[[str], RoutingTable]) -> None:
    qs = load_questions(real_table("llmrouter"))
    assert len(qs) == qs.n_available == 6108 and dict(qs.skipped) == {}
    by_task = {(q.dataset, q.grader) for q in qs}
    assert by_task == set(TASKS.items())
    mbpp = next(q for q in qs if q.dataset == "mbpp")
    assert mbpp.choices is None and mbpp.kind == "generated"  # its `choices` column holds tests, not options
    assert _prompts.mbpp_tests(mbpp.reference) is not None  # the raw reference: the list of asserts
    gsm = next(q for q in qs if q.dataset == "gsm8k")
    assert "####" in gsm.reference and gsm.metric == "GSM8K"
    assert next(q for q in qs if q.dataset == "human_eval").task_id.startswith("HumanEval/")
    kinds = {k: sum(q.kind == k for q in qs) for k in ("mc", "generated")}
    assert kinds == {"mc": 2742, "generated": 3366}
    assert {q.grader for q in load_questions(real_table("llmrouter"), graders="f1")} == {"f1"}
    per_task = load_questions(real_table("llmrouter"), graders=["gsm8k=math,mbpp=short"])
    assert {(q.dataset, q.grader) for q in per_task if q.dataset in ("gsm8k", "mbpp", "math")} == \
        {("gsm8k", "math"), ("mbpp", "short"), ("math", "math")}


def test_collect_grades_every_task_with_its_grader(real_table: Callable[[str], RoutingTable]) -> None:
    qs = one_per_task(real_table)
    assert [q.dataset for q in qs] == sorted(TASKS) and [q.grader for q in qs] == [TASKS[d] for d in sorted(TASKS)]
    graders = {name: get_grader(name) for name in set(TASKS.values())}
    prompts = [prompt_messages(q, graders[q.grader])[0].content for q in qs]
    for g in graders.values():
        g.close()
    # the prompt is the grader's: the fixed texts of _prompts for the new kinds, today's for mc and f1
    for q, p in zip(qs, prompts, strict=True):
        ask = {"number": _prompts.ask_number, "math": _prompts.ask_math, "code": _prompts.ask_code,
               "coverage": _prompts.ask_coverage}.get(q.grader)
        if ask is not None:
            assert p == ask(q.item())
        elif q.grader == "f1":
            assert p == f"{q.text.rstrip()}\n\nAnswer with the final answer only."
        else:
            assert p.endswith("\n\nAnswer with the letter of the correct option.")
    right = ReplyBackend({p: right_reply(q) for q, p in zip(qs, prompts, strict=True)})
    wrong = ReplyBackend({})
    table = collect(qs, [("right", right), ("wrong", wrong)], mode="auto", progress=False)
    assert sorted(right.asked) == sorted(prompts)
    x = table.queries.extra
    assert x["grader.right"].tolist() == [q.grader for q in qs] == x["grader.wrong"].tolist()
    details = dict(zip([q.dataset for q in qs], x["detail.right"].tolist(), strict=True))
    assert table.score[:, 0].tolist() == [1.0] * len(qs), details
    assert table.score[:, 1].tolist() == [0.0] * len(qs)
    assert all(d for d in x["detail.wrong"].tolist() if d)  # the reasons are kept
    graded = table.meta["collect"]["graders"]
    assert {g: v["questions"] for g, v in graded.items()} == \
        {g: 2 * sum(t == g for t in TASKS.values()) for g in set(TASKS.values())}
    assert all(v["seconds"] >= 0 for v in graded.values())
    assert x["metric"].tolist()[0] == "em_mc" and "617" in x["task_id"].tolist()
    assert table.queries.visible >= {"choices", "kind"} and "grader.right" in table.queries.hidden
    assert not np.isnan(table.score).any()


def test_unknown_graders_fail_before_any_model_loads(real_table: Callable[[str], RoutingTable]) -> None:
    qs = one_per_task(real_table)[:2]
    bad = [Question(q.id, q.text, q.dataset, q.split, q.choices, q.gold, q.kind, grader="nosuch") for q in qs]

    class Exploding(ReplyBackend):
        def complete(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Completion:
            raise AssertionError("asked before the graders were checked")

    with pytest.raises(UsageError, match="unknown grader 'nosuch'"):
        collect(bad, [("x", Exploding({}))], progress=False)


def test_jsonl_questions_name_their_grader(tmp_path: Path) -> None:
    import json

    f = tmp_path / "q.jsonl"
    rows = [{"id": "g", "question": "2+3?", "answer": "Work... #### 5", "metric": "GSM8K"},
            {"id": "c", "question": "List words", "answer": "dog, cat", "grader": "coverage"},
            {"id": "s", "question": "Capital?", "answer": "Paris"}]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [q.grader for q in load_questions(f)] == ["number", "coverage", "short"]
    assert [q.grader for q in load_questions(f, graders="f1")] == ["f1", "f1", "f1"]  # the user's choice wins
    assert [q.grader for q in load_questions(f, graders="q=math")] == ["math", "math", "math"]


def test_a_collected_table_is_graded_again_and_serves_as_judge_labels(
        real_table: Callable[[str], RoutingTable], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from routerlab.cli import main
    from routerlab.llm.judge_check import read_labels

    qs = one_per_task(real_table)
    graders = {name: get_grader(name) for name in set(TASKS.values())}
    script = {prompt_messages(q, graders[q.grader])[0].content: right_reply(q) for q in qs}
    for g in graders.values():
        g.close()
    table = collect(qs, [("right", ReplyBackend(script)), ("wrong", ReplyBackend({}))], progress=False)
    table.save(tmp_path / "t")
    assert main(["grade", str(tmp_path / "t"), "-o", str(tmp_path / "g.jsonl")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "g.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * len(qs)  # every answer was generated (the fake backend gives no logits)
    col = {a: j for j, a in enumerate(table.actor_names)}
    row_of = {qid: i for i, qid in enumerate(table.queries.ids.tolist())}
    for r in rows:  # the same graders on the same answers give the same scores (the table stores float32)
        assert r["score"] == pytest.approx(float(table.score[row_of[r["query_id"]], col[r["actor"]]]), abs=1e-6)
        assert r["grader"] == TASKS[r["dataset"]]
    labels = read_labels(tmp_path / "t", "score")
    assert len(labels.items) == 2 * len(qs) and sorted(labels.labels) == [0.0] * len(qs) + [1.0] * len(qs)
    mc = next(it for it in labels.items if it.dataset == "arc_challenge")
    gold = next(q for q in qs if q.dataset == "arc_challenge")
    assert (mc.choices, mc.reference) == (gold.choices, gold.gold)
    from routerlab.llm.graders.judge import judge_prompt

    shown = judge_prompt(mc, "qa", by_letters=False)  # a judge sees the options lettered, as the actor did
    assert f"\nA. {gold.choices[0]}" in shown and f"{gold.gold}. {gold.choices[ord(gold.gold) - 65]}" in shown
    capsys.readouterr()
    # a table's labels are its scores by default; graders other than judges compare the same way
    assert main(["judge-check", str(tmp_path / "t"), "--judges", "coverage", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rows"] == 2 * len(qs) and report["reference"] == "score"
    assert report["labels_hash"] == table.content_hash and report["judge_specs"] == ["coverage"]
