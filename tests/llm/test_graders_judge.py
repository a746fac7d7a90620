"""judge:SPEC with a fake judge backend: the spec and its options, the template chosen per item, the prompts, strict
verdict parsing, verdicts by letter logits and by generation, the call cache (raw verdicts stored, a rerun calls
nothing), batching, lazy loading and closing."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from routerlab.errors import UsageError
from routerlab.llm import base as llm_base
from routerlab.llm.base import (
    GREEDY,
    Backend,
    BackendSpec,
    ChoiceScores,
    Completion,
    Decoding,
    Message,
    register_backend,
)
from routerlab.llm.graders import Grade, Item, _prompts, get_grader
from routerlab.llm.graders.judge import (
    JudgeGrader,
    judge_prompt,
    parse_binary,
    parse_pair,
    parse_rating,
    split_judge_spec,
    template_for,
    verdict_of,
)

_BLOCKS = re.compile(r"\n\n(?:Reference answer|Reference solution|Tests or reference solution):\n(.*?)\n\n"
                     r"(?:Answer to grade|Solution to grade|Program to grade|Answer to rate|Answer A):\n(.*?)\n\n",
                     re.DOTALL)


class FakeJudge(Backend):
    """A judge that says yes when the graded answer contains the reference (case aside), or always with
    ``flavour=yes``: by logits (A/B, or A for a pair) or by a generated reply (``Verdict: yes``, ``Rating:
    [[8]]``); ``replies`` overrides a generated reply by the graded answer's text. Records every batch it is
    sent and every instance built."""

    options: ClassVar[Mapping[str, Any]] = {"flavour": "plain"}
    supports_choice_scores = True
    built: ClassVar[list[FakeJudge]] = []
    replies: ClassVar[dict[str, str]] = {}

    def __init__(self, spec: BackendSpec, *, cache_dir: Path | None = None) -> None:
        super().__init__(spec, cache_dir=cache_dir)
        self.batches: list[tuple[str, int]] = []
        self.closed = False
        self.model_id = f"{spec.kind}:{spec.model}:{spec.option('flavour', 'plain')}"  # the cache tells them apart
        FakeJudge.built.append(self)

    def _says_yes(self, messages: Sequence[Message]) -> tuple[bool, str]:
        m = _BLOCKS.search(messages[-1].content)
        if self.spec.option("flavour") == "yes":  # a judge that says yes to everything
            return True, "" if m is None else m.group(2).strip()
        if m is None:
            return False, ""
        ref, ans = m.group(1).strip(), m.group(2).strip()
        return ref.lower() in ans.lower(), ans

    def complete(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Completion:
        return self.complete_batch([messages], decoding)[0]

    def complete_batch(self, batch: Sequence[Sequence[Message]], decoding: Decoding = GREEDY) -> list[Completion]:
        self.batches.append(("complete", len(batch)))
        out = []
        for m in batch:
            yes, ans = self._says_yes(m)
            if ans in self.replies:
                text = self.replies[ans]
            elif "[[6]]" in m[-1].content:  # the open template asks for a rating
                text = f"Fine. Rating: [[{8 if yes else 2}]]"
            else:
                text = f"Verdict: {'yes' if yes else 'no'}"
            out.append(Completion(text, 10, 3, 0.1, 0.01, 0.01))
        return out

    def choice_scores(self, messages: Sequence[Message], letters: Sequence[str]) -> ChoiceScores:
        return self.choice_scores_batch([messages], letters)[0]

    def choice_scores_batch(self, batch: Sequence[Sequence[Message]], letters: Sequence[str]) -> list[ChoiceScores]:
        self.batches.append(("scores", len(batch)))
        out = []
        for m in batch:
            yes, _ = self._says_yes(m)
            yes_letter, no_letter = ("B", "A") if "\nA. No.\n" in m[-1].content else ("A", "B")  # swapped options
            pick = yes_letter if yes else no_letter
            if self.spec.option("flavour") == "letter-a":  # a judge that answers A whatever it reads
                pick = "A"
            out.append(ChoiceScores(tuple(letters), tuple(2.0 if x == pick else 0.0 for x in letters), 0.1, 10))
        return out

    def close(self) -> None:
        self.closed = True


class FakeJudgeNoLogits(FakeJudge):
    supports_choice_scores = False

    def choice_scores_batch(self, batch: Sequence[Sequence[Message]], letters: Sequence[str]) -> list[ChoiceScores]:
        raise AssertionError("a judge must not ask a backend without logits for them")


@pytest.fixture()
def fake_judge() -> Iterator[str]:
    """Registers the fake judge backends as kinds ``fakejudge`` and ``fakejudge-text``."""
    FakeJudge.built.clear()
    FakeJudge.replies = {}
    register_backend("fakejudge")(FakeJudge)
    register_backend("fakejudge-text")(FakeJudgeNoLogits)
    yield "fakejudge"
    llm_base._REGISTRY.remove("fakejudge")
    llm_base._REGISTRY.remove("fakejudge-text")


QA = Item(question="What is the capital of France?", answer="It is Paris.", reference="Paris")
QA_WRONG = Item(question="What is the capital of France?", answer="Lyon", reference="Paris")
MC = Item(question="Which is a fruit?", answer="B", reference="B", choices=("stone", "apple", "chair"),
          metric="em_mc")


# --------------------------------------------------------------------------------------------- spec and template
def test_spec_options_are_taken_out_before_the_backend_sees_them(fake_judge: str) -> None:
    spec, opts = split_judge_spec("fakejudge:m1,template=open,flavour=dry,verdict=generate,max_tokens=64")
    assert spec == BackendSpec("fakejudge", "m1", {"flavour": "dry"})
    assert opts == {"template": "open", "verdict": "generate", "max_tokens": 64, "swap": False}
    assert split_judge_spec("fakejudge:m1")[1] == {"template": "auto", "verdict": "auto", "max_tokens": 128,
                                                   "swap": False}
    assert split_judge_spec("fakejudge:m1,swap=TRUE")[1]["swap"] is True
    assert split_judge_spec("fakejudge:m1;template=math;flavour=dry") == (
        BackendSpec("fakejudge", "m1", {"flavour": "dry"}),
        {"template": "math", "verdict": "auto", "max_tokens": 128, "swap": False})


@pytest.mark.parametrize(("arg", "message"), [
    ("fakejudge:m,template=essay", "template must be one of auto, qa, math, code, open, pair, got 'essay'"),
    ("fakejudge:m,verdict=vibes", "verdict must be one of auto, logits, generate, got 'vibes'"),
    ("fakejudge:m,max_tokens=0", "max_tokens must be an integer in 1..32768, got '0'"),
    ("fakejudge:m,swap=yes", "swap must be true or false, got 'yes'"),
    ("fakejudge:m,template=qa,template=math", "option 'template' given twice"),
    ("fakejudge:m,colour=red", "unknown option 'colour' for kind fakejudge; known: flavour, input_price, "
                               "output_price, params_b (judge options: template, verdict, max_tokens, swap)"),
    ("fakejudge-text:m,verdict=logits", "verdict=logits needs a backend that gives option-letter logits"),
    ("nosuchkind:m", "unknown backend kind 'nosuchkind'"),
])
def test_bad_specs_are_one_line(fake_judge: str, arg: str, message: str) -> None:
    with pytest.raises(UsageError) as err:
        get_grader(f"judge:{arg}")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_judge_needs_a_spec_and_loads_nothing_until_used(fake_judge: str) -> None:
    with pytest.raises(UsageError, match="needs an argument"):
        get_grader("judge")
    grader = get_grader("judge:fakejudge:m")
    assert isinstance(grader, JudgeGrader) and grader.name == "judge:fakejudge:m"
    grader.call_for(QA)
    assert FakeJudge.built == []  # building prompts loads no model
    grader.grade(QA)
    grader.grade(QA_WRONG)
    assert len(FakeJudge.built) == 1  # loaded once
    grader.close()
    assert FakeJudge.built[0].closed


@pytest.mark.parametrize(("item", "template"), [
    (Item("q", "a", "r", metric="em_mc"), "qa"),
    (Item("q", "a", "r", metric="f1_score"), "qa"),
    (Item("q", "a", "r", metric="GSM8K"), "math"),
    (Item("q", "a", "r", metric="MATH"), "math"),
    (Item("q", "a", "r", metric="code_eval"), "code"),
    (Item("q", "a", "r", metric="commongen_coverage"), "open"),
    (Item("q", "a", "r", dataset="agentverse-mgsm"), "math"),
    (Item("q", "a", "r", dataset="mbpp"), "code"),
    (Item("q", "a", "r", dataset="Magpie-Pro"), "open"),
    (Item("q", "a", "r", dataset="trivia_qa"), "qa"),
    (Item("q", "a", "r", metric="math", extra={"answer_b": "b"}), "pair"),
    (Item("q", "a", "r"), "qa"),
])
def test_template_from_metric_then_dataset(item: Item, template: str) -> None:
    assert template_for(item) == template
    assert template_for(item, "open") == "open"  # a forced template wins


# ------------------------------------------------------------------------------------------------------ prompts
def test_qa_prompt_by_letters_and_by_generation() -> None:
    assert judge_prompt(MC, "qa", by_letters=True) == (
        "Decide whether an answer to a question is correct by comparing it with the reference answer.\n\n"
        "Question:\nWhich is a fruit?\n\nA. stone\nB. apple\nC. chair\n\n"
        "Reference answer:\nB. apple\n\n"
        "Answer to grade:\nB\n\n"
        "Rules: Only the final answer counts: ignore its formatting, its wording and any reasoning before it. Take "
        "the reference as correct without checking it. An answer that gives several different final answers, or "
        "none, is incorrect.\n\n"
        "Is the answer to grade correct?\nA. Yes, its final answer agrees with the reference.\nB. No.\n\n"
        "Answer with the letter A or B.")
    text = judge_prompt(QA, "qa", by_letters=False)
    assert text.endswith("Is the answer to grade correct? Reply with one line: Verdict: yes, or Verdict: no.")


def test_each_template_shows_its_parts() -> None:
    item = Item("Add 1 and 1.", "The sum is 2", "#### 2", extra={"answer_b": "It is 3"})
    math_ = judge_prompt(item, "math", by_letters=True)
    assert "Problem:\nAdd 1 and 1." in math_ and "Reference solution:\n#### 2" in math_
    assert "Solution to grade:\nThe sum is 2" in math_ and "1/2, 0.5 and \\frac{1}{2} are equal" in math_
    code = judge_prompt(item, "code", by_letters=False)
    assert "Program to grade:" in code and code.endswith("Does the program solve the task? Reply with one line: "
                                                         "Verdict: yes, or Verdict: no.")
    open_ = judge_prompt(item, "open", by_letters=True)  # a rating is always generated
    assert "scale from 0 to 10" in open_ and open_.endswith("Rating: [[6]]")
    pair = judge_prompt(item, "pair", by_letters=True)
    assert "Answer A:\nThe sum is 2\n\nAnswer B:\nIt is 3" in pair
    assert pair.endswith("C. They are equally good.\n\nAnswer with the letter A, B or C.")
    no_ref = judge_prompt(Item("Write a haiku.", "Leaves fall", ""), "open", by_letters=False)
    assert "Reference answer: none given." in no_ref


def test_how_collect_asks_a_question_a_judge_grades(fake_judge: str) -> None:
    judge = get_grader("judge:fakejudge:m")
    gsm = Item("Tom has 3 apples and eats 1. How many are left?", "", "#### 2", metric="gsm8k")
    assert judge.prompt(gsm) == _prompts.ask_number(gsm)
    math_ = Item("Solve x + 1 = 2.", "", "\\boxed{1}", metric="math")
    assert judge.prompt(math_) == _prompts.ask_math(math_)
    code = Item("Write a function add(a, b).", "", "['assert add(1, 2) == 3']", metric="code_eval")
    assert judge.prompt(code) == _prompts.ask_code(code)
    assert judge.prompt(MC) == "Which is a fruit?\n\nA. stone\nB. apple\nC. chair\n\nAnswer with the letter of " \
                               "the correct option."
    assert judge.prompt(Item("Write a haiku.", "", "", dataset="alpaca")) == "Write a haiku."


# ------------------------------------------------------------------------------------------------ verdict parsing
@pytest.mark.parametrize(("reply", "verdict"), [
    ("Verdict: yes", True), ("verdict: **No**", False), ("The answer matches.\nVerdict: Yes.", True),
    ("Verdict: no\nOn reflection, Verdict: yes", True), ("[[no]]", False), ("yes", True), ("  No. ", False),
    ("I think yes because Paris", None), ("Verdict: maybe", None), ("", None), ("The answer is yes-ish", None),
    ("A", None),
])
def test_binary_verdicts_are_parsed_strictly(reply: str, verdict: bool | None) -> None:
    assert parse_binary(reply) is verdict


@pytest.mark.parametrize(("reply", "rating"), [
    ("Good answer. Rating: [[7]]", 7.0), ("[[3]] at first, then [[8.5]]", 8.5), ("Rating: 8/10", 8.0),
    ("[[0]]", 0.0), ("[[10]]", 10.0), ("[[11]]", None), ("7", None), ("I rate it seven", None),
])
def test_ratings_are_parsed_strictly(reply: str, rating: float | None) -> None:
    assert parse_rating(reply) == rating


@pytest.mark.parametrize(("reply", "letter"), [
    ("[[A]]", "A"), ("Verdict: [[B]]", "B"), ("verdict: c", "C"), ("Answer A is better", None), ("[[D]]", None),
])
def test_pair_verdicts_are_parsed_strictly(reply: str, letter: str | None) -> None:
    assert parse_pair(reply) == letter


# ------------------------------------------------------------------------------------------------------ grading
def test_binary_verdicts_by_logits(fake_judge: str, tmp_path: Path) -> None:
    judge = get_grader("judge:fakejudge:m", cache_dir=tmp_path)
    right, wrong, mc = judge.grade_many([QA, QA_WRONG, MC])
    assert right == Grade(1.0, "judge:fakejudge:m", "yes", "verdict yes by logits (p_yes=0.88)")
    assert (wrong.score, wrong.extracted) == (0.0, "no") and wrong.detail.startswith("verdict no by logits")
    assert mc.score == 0.0  # the fake sees "B" does not contain "B. apple": the reference is shown as text
    assert [verdict_of(g) for g in (right, wrong)] == [1.0, 0.0]
    assert FakeJudge.built[0].batches == [("scores", 3)]  # one batched call


def test_generated_verdicts_and_no_verdict(fake_judge: str, tmp_path: Path) -> None:
    FakeJudge.replies = {"Lyon": "Lyon is a city in France, so it could be right."}
    judge = get_grader("judge:fakejudge:m,verdict=generate", cache_dir=tmp_path)
    right, unparsed = judge.grade_many([QA, QA_WRONG])
    assert (right.score, right.extracted, right.detail) == (1.0, "yes", "verdict yes")
    assert unparsed.score == 0.0 and unparsed.extracted == ""
    assert unparsed.detail == "no verdict: 'Lyon is a city in France, so it could be right.'"
    assert verdict_of(unparsed) is None  # counted apart, not a 0
    assert FakeJudge.built[0].batches == [("complete", 2)]


def test_a_backend_without_logits_generates(fake_judge: str, tmp_path: Path) -> None:
    judge = get_grader("judge:fakejudge-text:m", cache_dir=tmp_path)
    assert [g.detail for g in judge.grade_many([QA, QA_WRONG])] == ["verdict yes", "verdict no"]


def test_open_ratings_and_pairs(fake_judge: str, tmp_path: Path) -> None:
    judge = get_grader("judge:fakejudge:m", cache_dir=tmp_path)
    good = Item("Describe Paris.", "Paris is the capital of France.", "capital of France", dataset="alpaca")
    bad = Item("Describe Paris.", "A dog.", "capital of France", dataset="alpaca")
    pair = Item("Describe Paris.", "The capital of France.", "capital of France",
                extra={"answer_b": "A dog."})
    lonely = Item("Describe Paris.", "x", "y", metric="math")
    grades = judge.grade_many([good, bad, pair, lonely])
    assert [(g.score, g.extracted, g.detail) for g in grades[:2]] == [(0.8, "8", "rating 8/10"),
                                                                      (0.2, "2", "rating 2/10")]
    assert (grades[2].score, grades[2].extracted) == (1.0, "A")
    assert grades[3].score == 0.0  # math template: "x" does not contain "y"
    forced = get_grader("judge:fakejudge:m,template=pair", cache_dir=tmp_path).grade(lonely)
    assert verdict_of(forced) is None and "extra['answer_b']" in forced.detail
    # one batch of letter scores for the binary verdicts, one for the pair's A/B/C, one generation for ratings
    assert sorted(FakeJudge.built[0].batches) == [("complete", 2), ("scores", 1), ("scores", 1)]


def test_every_call_is_cached_with_its_raw_verdict(fake_judge: str, tmp_path: Path) -> None:
    FakeJudge.replies = {"Lyon": "Hmm. Verdict: no"}
    items = [QA, QA_WRONG]
    first = get_grader("judge:fakejudge:m,verdict=generate", cache_dir=tmp_path).grade_many(items)
    records = [json.loads(p.read_text())["record"] for p in sorted((tmp_path / "calls").rglob("*.json"))]
    assert sorted(r["text"] for r in records) == ["Hmm. Verdict: no", "Verdict: yes"]
    again = get_grader("judge:fakejudge:m,verdict=generate", cache_dir=tmp_path)
    assert again.grade_many(items) == first
    assert FakeJudge.built[-1].batches == []  # the rerun called nothing
    # logits are cached too, under their own key
    get_grader("judge:fakejudge:m", cache_dir=tmp_path).grade_many(items)
    get_grader("judge:fakejudge:m", cache_dir=tmp_path).grade_many(items)
    assert FakeJudge.built[-2].batches == [("scores", 2)] and FakeJudge.built[-1].batches == []


def test_swap_asks_both_orders_and_cancels_a_letter_preference(fake_judge: str, tmp_path: Path) -> None:
    swapped = judge_prompt(QA, "qa", by_letters=True, swapped=True)
    assert swapped.endswith("Is the answer to grade correct?\nA. No.\nB. Yes, its final answer agrees with the "
                            "reference.\n\nAnswer with the letter A or B.")
    assert swapped.rsplit("\n\n", 2)[0] == judge_prompt(QA, "qa", by_letters=True).rsplit("\n\n", 2)[0]
    judge = get_grader("judge:fakejudge:m,swap=true", cache_dir=tmp_path)
    right, wrong = judge.grade_many([QA, QA_WRONG])
    assert (right.score, right.detail) == (1.0, "verdict yes by logits, both orders (p_yes=0.88)")
    assert (wrong.score, wrong.detail) == (0.0, "verdict no by logits, both orders (p_yes=0.12)")
    assert FakeJudge.built[-1].batches == [("scores", 2), ("scores", 2)]
    # a judge that says A to everything: yes in one order, no in the other
    biased = get_grader("judge:fakejudge:m,flavour=letter-a", cache_dir=tmp_path)
    assert [g.score for g in biased.grade_many([QA, QA_WRONG])] == [1.0, 1.0]
    fair = get_grader("judge:fakejudge:m,flavour=letter-a,swap=true", cache_dir=tmp_path)
    assert [g.detail for g in fair.grade_many([QA, QA_WRONG])] == ["verdict no by logits, both orders (p_yes=0.50)"] * 2
    # a generated verdict or a rating is asked once
    get_grader("judge:fakejudge:m,swap=true,verdict=generate", cache_dir=tmp_path).grade(QA)
    assert FakeJudge.built[-1].batches == [("complete", 1)]


def test_swap_asks_a_pair_both_ways_round(fake_judge: str, tmp_path: Path) -> None:
    pair = Item("Describe Paris.", "The capital of France.", "capital of France", extra={"answer_b": "A dog."})
    judge = get_grader("judge:fakejudge:m,swap=true", cache_dir=tmp_path)
    call = judge.call_for(pair)
    assert call.swapped is not None and "Answer A:\nA dog.\n\nAnswer B:\nThe capital of France." in \
        call.swapped[0].content
    # softmax of (2, 0, 0): 0.787 for the pick, 0.107 each other; A is right in both orders (B when swapped)
    grade = judge.grade(pair)
    assert (grade.score, grade.extracted) == (1.0, "A")
    assert grade.detail == "verdict A by logits, both orders (p_A=0.79, p_B=0.11, p_tie=0.11)"
    # a judge that says A whatever it reads: A in one order is B in the other, a tie
    biased = get_grader("judge:fakejudge:m,flavour=letter-a,swap=true", cache_dir=tmp_path).grade(pair)
    assert (biased.score, biased.extracted) == (0.5, "C")
    assert get_grader("judge:fakejudge:m,flavour=letter-a", cache_dir=tmp_path).grade(pair).extracted == "A"
    # generated verdicts: agreeing orders keep the verdict; disagreeing ones are a tie; none is no verdict
    text = get_grader("judge:fakejudge-text:m,swap=true", cache_dir=tmp_path)
    FakeJudge.replies = {"The capital of France.": "Verdict: [[A]]", "A dog.": "Verdict: [[B]]"}
    agreed = text.grade(pair)
    assert (agreed.extracted, agreed.detail) == ("A", "verdict A, both orders agree")
    FakeJudge.replies = {"The capital of France.": "Verdict: [[A]]", "A dog.": "Verdict: [[A]]"}
    split = get_grader("judge:fakejudge-text:m2,swap=true", cache_dir=tmp_path).grade(pair)
    assert (split.score, split.detail) == (0.5, "verdict C, the orders disagree (A, then B)")
    FakeJudge.replies = {"The capital of France.": "Verdict: [[A]]", "A dog.": "no idea"}
    none = get_grader("judge:fakejudge-text:m3,swap=true", cache_dir=tmp_path).grade(pair)
    assert verdict_of(none) is None
