"""The grader registry, the per-question choice of a grader and the text graders (mc, short, f1)."""

from __future__ import annotations

import pytest

from routerlab.errors import UsageError
from routerlab.llm.graders import (
    Grade,
    GraderChoice,
    Item,
    get_grader,
    grader_names,
    parse_grader_choice,
)
from routerlab.llm.graders.text import token_f1


def test_builtin_text_graders_are_registered() -> None:
    assert {"mc", "short", "f1"} <= set(grader_names())


def test_unknown_grader_and_bad_arguments_are_one_line_errors() -> None:
    with pytest.raises(UsageError, match=r"unknown grader 'nope'; known graders: .*f1"):
        get_grader("nope")
    with pytest.raises(UsageError, match="grader 'mc' takes no argument"):
        get_grader("mc:x")
    with pytest.raises(UsageError, match="write a grader name"):
        get_grader(":x")


def test_grade_score_must_lie_in_the_unit_interval() -> None:
    with pytest.raises(ValueError, match=r"lies in \[0, 1\]"):
        Grade(1.5, "x")
    with pytest.raises(ValueError):
        Grade(float("nan"), "x")


def test_choice_order_dataset_then_default_then_metric_then_options() -> None:
    choice = GraderChoice(default=None, by_dataset={"gsm8k": "short"})
    assert choice.name_for("gsm8k", "GSM8K") == "short"
    assert choice.name_for("math", "MATH") == "math"
    assert choice.name_for("mbpp", "code_eval") == "code"
    assert choice.name_for("natural_qa", "f1_score") == "f1"
    assert choice.name_for("commongen", "commongen_coverage") == "coverage"
    assert choice.name_for("arc", "em_mc", has_choices=True) == "mc"
    assert choice.name_for("mine", "", has_choices=True) == "mc"
    assert choice.name_for("mine", "") == "short"
    assert GraderChoice(default="f1").name_for("math", "MATH") == "f1"


def test_parse_grader_choice_pairs_defaults_and_errors() -> None:
    assert parse_grader_choice(None) == GraderChoice()
    assert parse_grader_choice("f1") == GraderChoice("f1", {})
    assert parse_grader_choice(["natural_qa=f1,trivia_qa=short", "x=mc"]).by_dataset == {
        "natural_qa": "f1", "trivia_qa": "short", "x": "mc"}
    with pytest.raises(UsageError, match="unknown grader 'bogus'"):
        parse_grader_choice("math=bogus")
    with pytest.raises(UsageError, match="dataset 'a' is given two graders"):
        parse_grader_choice("a=f1,a=short")
    with pytest.raises(UsageError, match="two graders for every question"):
        parse_grader_choice(["f1", "short"])
    for half in ("=math", "mbpp=", " = "):
        with pytest.raises(UsageError, match="write DATASET=NAME, both named"):
            parse_grader_choice(half)
    with pytest.raises(UsageError, match="an empty grader name"):
        parse_grader_choice("a=f1,,b=mc")


def test_mc_grader_reads_the_letter_and_takes_a_text_reference() -> None:
    mc = get_grader("mc")
    choices = ("bus depot", "train station", "beach")
    assert mc.grade(Item("q", "The answer is (B).", "B", choices)).score == 1.0
    assert mc.grade(Item("q", "train station", "B", choices)).extracted == "B"
    assert mc.grade(Item("q", "C", "beach", choices)).score == 1.0
    none = mc.grade(Item("q", "I do not know", "B", choices))
    assert (none.score, none.detail) == (0.0, "no option letter found")
    assert "A. bus depot\nB. train station\nC. beach" in mc.prompt(Item("Where?", "", "B", choices))


def test_short_exact_match_and_f1_by_hand() -> None:
    # natural_qa's reference 'Sammy Davis, Jr' against a partial answer: 2 of 3 words -> p = 1, r = 2/3, f1 = 0.8
    assert token_f1("Sammy Davis", "Sammy Davis, Jr") == pytest.approx(0.8)
    assert token_f1("the", "a") == 0.0
    short = get_grader("short").grade(Item("q", "Sammy Davis", "Sammy Davis, Jr"))
    assert (short.score, short.detail) == (0.0, "f1 0.800")
    f1 = get_grader("f1").grade(Item("q", "The answer is: Sammy Davis\nbecause ...", "Sammy Davis, Jr"))
    assert (f1.score, f1.extracted) == (pytest.approx(0.8), "Sammy Davis")
    assert get_grader("short").grade(Item("q", "Answer: $20,000.", "20000")).score == 1.0


def test_a_judge_spec_runs_to_the_end_of_its_grader_value() -> None:
    choice = parse_grader_choice("gsm8k=number,natural_qa=judge:local:m,template=math,threads=1")
    assert choice.by_dataset == {"gsm8k": "number", "natural_qa": "judge:local:m,template=math,threads=1"}
    both = parse_grader_choice(["judge:openai:m@http://h/v1,key_env=K,template=code", "math=math"])
    assert (both.default, both.by_dataset) == ("judge:openai:m@http://h/v1,key_env=K,template=code", {"math": "math"})
