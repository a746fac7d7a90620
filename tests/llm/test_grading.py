"""Grading by hand: option letters from logits and from generated text, short answers by normalised match."""

from __future__ import annotations

import math

import pytest

from routerlab.llm.grading import (
    extract_letter,
    grade_choice,
    grade_short,
    last_boxed,
    letter_from_logits,
    letters_for,
    normalize_text,
    parse_number,
    short_answer,
)


def test_letters_for() -> None:
    assert letters_for(4) == "ABCD"
    assert letters_for(10) == "ABCDEFGHIJ"
    with pytest.raises(ValueError):
        letters_for(11)
    with pytest.raises(ValueError):
        letters_for(0)


def test_letter_from_logits() -> None:
    assert letter_from_logits("ABCD", [0.1, 2.0, -1.0, 1.9]) == "B"
    assert letter_from_logits("ABC", [1.0, 1.0, 0.5]) == "A"  # a tie goes to the first
    assert letter_from_logits("ABC", [math.nan, -5.0, -6.0]) == "B"  # NaN never wins
    assert letter_from_logits(("A", "B"), [-3.0, -2.5]) == "B"
    with pytest.raises(ValueError):
        letter_from_logits("AB", [1.0])


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        # rule 1: explicit statements, the first one wins
        ("The answer is (C).", "C"),
        ("the answer is C because it is warm", "C"),
        ("Answer: B", "B"),
        ("Answer: **D**", "D"),
        ("Answer - A", "A"),
        ("So the correct option is D.", "D"),
        ("I pick option B", "B"),
        ("choice C", "C"),
        ("\\boxed{B}", "B"),
        ("A cat sat. The correct option is D", "D"),
        ("The answer is (B). Some say the answer is (C).", "B"),
        # rule 2: a reply opening with the letter
        ("C", "C"),
        ("C.", "C"),
        ("(C)", "C"),
        ("  **C**", "C"),
        ("B, because of gravity", "B"),
        ("D)", "D"),
        ("A\nbecause", "A"),
        # rule 3: a standalone label anywhere
        ("I think (B) is right", "B"),
        ("Hmm, maybe A.", "A"),
        ("It must be D: the others fail", "D"),
        # no answer
        ("A dog is an animal", None),  # the article, not option A
        ("The answer is a tricky one", None),  # a lower-case word, not a letter
        ("Answer: Bears", None),
        ("", None),
        ("I don't know", None),
        ("E.", None),  # not one of the four letters
        ("the choice is b", None),  # letters are upper case
    ],
)
def test_extract_letter(reply: str, expected: str | None) -> None:
    assert extract_letter(reply, "ABCD") == expected


def test_extract_letter_only_the_questions_letters() -> None:
    assert extract_letter("The answer is (F).", "ABCDEFGHIJ") == "F"
    assert extract_letter("The answer is (F). Or (B)", "ABCD") == "B"  # F is not an option here
    assert extract_letter("J", "ABCDEFGHIJ") == "J"
    assert extract_letter("D.C. is the capital", "ABCD") == "D"  # documented false friend


def test_extract_letter_by_option_text() -> None:
    options = ["sand count", "cacti", "dryness", "wet sky falling"]
    assert extract_letter("Cacti.", "ABCD", options) == "B"
    assert extract_letter("  the dryness ", "ABCD", options) == "C"  # articles and case ignored
    assert extract_letter("dry", "ABCD", options) is None  # not an option's whole text
    assert extract_letter("cacti", "ABCD", ["cacti", "Cacti!", "x", "y"]) is None  # two options match


def test_grade_choice() -> None:
    assert grade_choice("C", "C") == 1.0
    assert grade_choice("c", " C ") == 1.0
    assert grade_choice("B", "C") == 0.0
    assert grade_choice(None, "C") == 0.0


def test_normalize_text() -> None:
    assert normalize_text("The  Eiffel Tower!") == "eiffel tower"
    assert normalize_text("An apple, a pear.") == "apple pear"
    assert normalize_text("Sammy Davis, Jr") == "sammy davis jr"
    assert normalize_text("  ") == ""


@pytest.mark.parametrize(
    ("text", "value"),
    [("42", 42.0), ("1,000", 1000.0), ("$20", 20.0), ("-3.5", -3.5), ("50%", 50.0), ("3/4", 0.75), ("20.", 20.0),
     (" 7 ", 7.0), ("abc", None), ("", None), ("1/0", None), ("inf", None), ("nan", None), ("x/2", None)],
)
def test_parse_number(text: str, value: float | None) -> None:
    assert parse_number(text) == value


def test_last_boxed_and_short_answer() -> None:
    assert last_boxed("so \\boxed{1} then \\boxed{\\frac{1}{2}} done") == "\\frac{1}{2}"
    assert last_boxed("no box") is None
    assert last_boxed("\\boxed{unclosed") is None
    assert short_answer("Work...\nThe answer is 42.\nThanks") == "42."
    assert short_answer("\n\n Paris \nis the capital") == "Paris"
    assert short_answer("x = \\boxed{y=-2x+1}") == "y=-2x+1"
    assert short_answer("") == ""


@pytest.mark.parametrize(
    ("reply", "gold", "score"),
    [
        ("The answer is 20", "20", 1.0),
        ("\\boxed{1,000}", "1000", 1.0),
        ("She pays $30,000 in total.", "30000", 1.0),  # candidate not a number: the last number in the reply
        ("20.0", "20", 1.0),
        ("answer: 3/4", "0.75", 1.0),
        ("The answer is 21", "20", 0.0),
        ("First 20, then 25", "20", 0.0),  # the last number counts
        ("I don't know", "5", 0.0),
        ("Bayreuth", "bayreuth", 1.0),
        ("The Bayreuth.", "Bayreuth", 1.0),
        ("Answer: Sammy Davis Jr.", "Sammy Davis, Jr", 1.0),
        ("Munich", "bayreuth", 0.0),
        ("Bayreuth, Germany", "bayreuth", 0.0),  # exact match after normalising, not containment
        ("", "paris", 0.0),
        ("\\boxed{y=-2x+1}", "y=-2x+1", 1.0),
    ],
)
def test_grade_short(reply: str, gold: str, score: float) -> None:
    assert grade_short(reply, gold)[0] == score


def test_grade_short_returns_the_candidate() -> None:
    assert grade_short("Total: $30,000 in all", "30000") == (1.0, "$30,000")
    assert grade_short("The answer is Paris\nmore", "Paris") == (1.0, "Paris")
