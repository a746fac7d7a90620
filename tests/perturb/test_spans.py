"""Protected spans (SPEC 3; issue 22): each rule on small hand-made cases, the order check, the rules' stability
under typos, the LLM filter, and the measured share of variants that alter what a question is (at most 1%) on the
hand-written held-out set of tests/data and on the shared tables' code and multiple-choice questions."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from routerlab.perturb import keeps_protected, perturb
from routerlab.perturb._code import find_code, line_kind
from routerlab.perturb.base import OFFLINE_LEVELS, PerturbationSet, level_class
from routerlab.perturb.spans import protected_parts, segments, structural_spans
from tests.perturb import require_wordnet
from tests.perturb.test_llm_levels import Scripted

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True, scope="module")
def _wordnet() -> None:
    require_wordnet()


def parts(text: str, kind: str | None = None) -> list[tuple[str, str]]:
    """(kind, string) of every protected span of ``text`` (of one kind when given)."""
    return [(sp.kind, text[sp.start:sp.end]) for sp in protected_parts(text) if kind in (None, sp.kind)]


def strings(text: str, kind: str) -> list[str]:
    return [s for _, s in parts(text, kind)]


def bench() -> ModuleType:
    """benchmarks/bench_protected_spans.py, whose checker is independent of the spans module."""
    path = ROOT / "benchmarks" / "bench_protected_spans.py"
    spec = importlib.util.spec_from_file_location("bench_protected_spans", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    module.perturb = _tfidf_unless_filtered  # type: ignore[attr-defined]  # its measure() calls perturb by name
    return module


def _tfidf_unless_filtered(ids: Sequence[str], texts: Sequence[str], levels: Sequence[str], p: int,
                           **kwargs: Any) -> PerturbationSet:
    """``perturb`` as the benchmark calls it, scoring with tf-idf the levels without a similarity filter (character,
    syntax): there the cosine is only recorded, so the variants are the ones MiniLM would give, and MiniLM over
    every variant of the long code questions was most of these tests' minutes. The word level, whose filter
    drops candidates by MiniLM's cosine, keeps the default encoder."""
    if not any(level_class(level).similarity_filter for level in levels):
        kwargs.setdefault("similarity", "tfidf")
    return perturb(ids, texts, levels, p, **kwargs)


# ------------------------------------------------------------------------------------------------------- code
def test_python_lines_by_the_parser() -> None:
    assert line_kind("return total") == "py"
    assert line_kind("return the sum of the list") is None  # prose: Python's parser refuses it
    assert line_kind("def mystery(n):") == "py-open"
    assert line_kind("if n <= 1:") == "py-open" and line_kind("if the list is empty:") is None
    assert line_kind("except ValueError:") == "py-open" and line_kind("try:") == "py-open"
    assert line_kind("scores = [88, 92, 79]") == "py"
    assert line_kind("Answer: B") is None  # an annotated name without a value is a cue, not code
    assert line_kind("assert merge_dicts({'a': 1},") == "assert"  # its brackets close on the next line
    assert line_kind("Hello world") is None and line_kind("(Ignore the electrons.)") is None


def test_a_python_block_its_docstring_and_doctests() -> None:
    text = ('Complete the function.\n\ndef below_zero(operations: list) -> bool:\n    """ Detect if the balance of '
            'operations falls below zero.\n    >>> below_zero([1, -2])\n    True\n    """\n')
    assert strings(text, "code") == ["def below_zero(operations: list) -> bool:", '"""', '"""']
    assert strings(text, "doctest") == [">>> below_zero([1, -2])", "True"]
    # the docstring's prose stays editable; the parameter is protected where the prose names it
    assert strings(text, "identifier") == ["operations"]
    assert ("cue", "Complete the function.") not in parts(text)


def test_docstring_example_lines_and_strings_that_are_code() -> None:
    text = 'def digits(n):\n    """Return the product.\n    For example:\n    digits(235) == 15\n    """\n'
    assert strings(text, "doctest") == ["digits(235) == 15"]
    literal = 'NOTE = """\nAdd more test cases.\n"""\n'  # a string inside an expression is code, not a docstring
    assert strings(literal, "code") == ['NOTE = """', "Add more test cases.", '"""']


def test_javascript_block_by_its_braces() -> None:
    text = ("What will this log?\nfunction greet(name) {\n  const message = 'Hi ' + name;\n  return message;\n}\n"
            "console.log(greet('Ada'));\nExplain why greet needs a name.")
    assert strings(text, "code") == ["function greet(name) {", "const message = 'Hi ' + name;", "return message;",
                                     "}", "console.log(greet('Ada'));"]
    assert strings(text, "identifier") == ["greet", "name"]  # in the prose
    destructured = "const { name, age: years, ...rest } = user;\nWhich keys does rest hold, and what is years?"
    assert {"name", "years", "rest"} <= find_code(destructured).identifiers


def test_sql_statement_with_its_clause_lines() -> None:
    text = ("Which rows does this return for the staff table?\nSELECT department, COUNT(*) AS headcount\nFROM staff\n"
            "GROUP BY department;\nOn the other hand, what about joins?")
    assert strings(text, "code") == ["SELECT department, COUNT(*) AS headcount", "FROM staff",
                                     "GROUP BY department;"]
    assert "staff" in strings(text, "identifier")
    # lower-case SQL counts only when the statement ends with ';' (else it may be prose)
    assert find_code("select the best answer from the list below").spans == ()
    assert [k for _, _, k in find_code("select c.name\nfrom customers c;").spans] == ["code", "code"]
    cte = "WITH recent AS (\n  SELECT * FROM orders\n)\nSELECT id FROM recent;"  # a statement opening a bracket
    assert strings(cte, "code") == ["WITH recent AS (", "SELECT * FROM orders", ")", "SELECT id FROM recent;"]
    inline = "Compare SELECT city FROM customers and SELECT DISTINCT city FROM customers in terms of speed."
    assert strings(inline, "payload") == ["SELECT city FROM customers", "SELECT DISTINCT city FROM customers"]


def test_asserts_at_line_start_after_a_colon_and_over_two_lines() -> None:
    text = ("Write a function to add.\nYour code should pass these tests:\nassert add(1, 2) == 3\n"
            "assert add({'a': 1},\n           {'b': 2}) == 3\nOr inline. Test: assert add(0, 0) == 0")
    assert strings(text, "assert") == ["assert add(1, 2) == 3", "assert add({'a': 1},", "{'b': 2}) == 3",
                                       "assert add(0, 0) == 0"]
    assert strings(text, "cue")[0] == "Your code should pass these tests:"
    assert find_code(text).identifiers == frozenset({"add"})


def test_identifiers_in_prose_either_first_letter_case_but_not_builtins_or_a() -> None:
    text = "The List is sorted by sort_items.\nfrom typing import List\ndef sort_items(a, values):\n    return a\n"
    found = find_code(text).identifiers
    assert {"List", "sort_items", "values"} <= found and "a" not in found
    prose = "Explain the list and the values.\n" + text
    assert strings(prose, "identifier")[:3] == ["list", "values", "List"]  # "list": a typo may flip its capital
    assert "set" not in find_code("assert set(f(1)) == set()").identifiers  # builtins are not the code's own
    # a contraction the word level makes ("it is" -> "it's") must not turn into the one-letter name s
    assert strings("def f(s):\n    return s\nSay what it's for.", "identifier") == []


def test_fenced_block_and_its_identifiers() -> None:
    text = "Why does the bucket grow?\n```python\ndef add(item, bucket=[]):\n    return bucket\n```\nFix bucket."
    assert [k for k, _ in parts(text)] == ["identifier", "code", "identifier"]


def test_a_typo_cannot_make_prose_into_code() -> None:
    """A rule must answer the same on a text and on its typo'd variants (else the variant is rejected)."""
    assert line_kind("let $a_n = 4n + 1.$ Find") is None  # "Let ..." with its first letter lowered
    assert line_kind("let total = 0;") == "js"
    assert strings("A STAT x-ray.", "payload") == strings("A sTAT x-ray.", "payload") == []
    assert strings("the GMOs", "payload") == strings("the GMsO", "payload") == []


# ------------------------------------------------------------------------------------------------------- labels
@pytest.mark.parametrize(("text", "labels"), [
    ("Pick one.\nA. red\nB. blue", ["A.", "B."]),
    ("Pick one.\n(A) red\n(B) blue", ["(A)", "(B)"]),
    ("Pick one.\nA) red\nB) blue", ["A)", "B)"]),
    ("Pick one.\n[A] red\n[B] blue", ["[A]", "[B]"]),
    ("Pick one.\na) red\nb) blue", ["a)", "b)"]),
    ("Pick one.\n1. red\n2. blue", ["1.", "2."]),
    ("Pick one: (A) red (B) blue (C) green", ["(A)", "(B)", "(C)"]),
    ("Which is a mammal? A. shark B. whale", ["A.", "B."]),
    ("Who is wrong? Scenario 1 | I lied. Scenario 2 | I paid.", ["Scenario 1 |", "Scenario 2 |"]),
    ("Statement 1| Groups are sets. Statement 2 | Rings are groups.", ["Statement 1|", "Statement 2 |"]),
    ("Which are prime? I. two II. nine III. eleven", ["I.", "II.", "III."]),
    ("Which hold?\n(i) x > 0\n(ii) y < 0", ["(i)", "(ii)"]),
    ("The trophy did not fit.\nOption 1: trophy\nOption 2: suitcase", ["Option 1:", "Option 2:"]),
])
def test_label_styles(text: str, labels: list[str]) -> None:
    assert strings(text, "label") == labels


def test_roman_numerals_in_options_are_tokens() -> None:
    assert strings("A. I only\nB. I and III\nC. II and III", "token") == ["III", "II", "III"]  # "I" is a pronoun


def test_a_stray_letter_or_number_is_no_label() -> None:
    assert strings("Vitamin A. It helps the eyes.", "label") == []  # no B: not a sequence
    assert strings("See page 1. Then page 2. Done.", "label") == []  # numbers inside a line are not options


def test_label_order_is_part_of_the_question() -> None:
    text = "Pick one.\nA. red\nB. blue\nAnswer:"
    assert keeps_protected(text, "Pick one.\nA. red\nB. blue\nAnswer:")
    assert not keeps_protected(text, "Pick one.\nB. blue\nA. red\nAnswer:")  # same strings, other order
    assert not keeps_protected(text, "Pick one.\nA. red\nB. blue\nReply:")


# ------------------------------------------------------------------------------------------------------- cues
def test_field_cues() -> None:
    text = "Question: Where do sloths live?\nAnswer Choices:\n(A) trees\n(B) caves\nClue(s): slow. Answer:"
    assert strings(text, "cue") == ["Question:", "Answer Choices:", "Clue(s):", "Answer:"]
    assert strings("Q: What is 2 + 2?\nA:", "cue") == ["Q:", "A:"]
    assert strings("Which gas? (A) air (B) water Answer:", "cue") == ["Answer:"]  # it ends the line
    assert strings("He said: go home", "cue") == ["He said:"]  # three words or fewer at a line start
    assert strings("Then my brother said: go home", "cue") == []  # a colon inside a sentence is no cue


def test_frame_sentences() -> None:
    text = 'Who went?\nA) Ian\nB) Bob\nPrint only a single choice from "A" or "B" without explanation. Answer:'
    assert strings(text, "cue") == ['Print only a single choice from "A" or "B" without explanation.', "Answer:"]
    assert strings("After careful thought, put your final answer in \\boxed{...}.", "cue") == [
        "After careful thought, put your final answer in \\boxed{...}."]
    # one quoted letter is a quotation, not an answer format
    assert strings("What did the 'J' stand for in 'JR Ewing'?", "cue") == []
    # a line ending in ':' is a frame sentence only before tests, doctests or options, and only when short: here
    # only its last word is a cue
    assert strings("Rewrite this callback using promises:\nfoo(x);", "cue") == ["promises:"]


# ------------------------------------------------------------------------------------------------------- payloads
def test_payloads() -> None:
    assert strings("Make a sentence with: coin, trick, direct, compete, pit", "payload") == [
        "coin, trick, direct, compete, pit"]
    assert strings("Tom has apples, pears and figs.", "payload") == []  # three items: a sentence, not a list
    assert strings('Which band sang "Yellow Submarine" in 1969?', "payload") == ['"Yellow Submarine"']
    assert strings("Dennis's menudo and the students' books", "payload") == []  # apostrophes are no quotes
    assert strings("A car travels 60 miles in 1.5 hours at $140 per month.", "payload") == [
        "miles", "hours", "per month"]
    assert strings("Apples come 8 to a box.", "payload") == []  # a 2-letter word with a vowel: no unit
    assert strings("What does d.get('c', 0) return and what is os.path?", "payload") == ["d.get('c', 0)",
                                                                                       "os.path"]
    assert strings("Clue(s) about the person(s).", "payload") == []  # a plural mark is no call


def test_segments_give_the_text_back_and_structural_spans_are_the_ordered_kinds() -> None:
    text = "Question: What is 2 + 2?\nA. four\nB. five\nAnswer:"
    assert "".join(piece for piece, _ in segments(text)) == text
    assert [text[s:e] for s, e in structural_spans(text)] == ["Question:", "A.", "B.", "Answer:"]


# ------------------------------------------------------------------------------------------------------- levels
HELD_OUT = ("protected_spans_heldout.jsonl", "protected_spans_blind.jsonl")


def test_every_offline_level_leaves_the_held_out_questions_intact() -> None:
    """Every raw candidate of every offline level keeps the protected spans of the 96 held-out questions: the rules
    give the same answer on the typo'd, reworded and reordered texts, so nothing is rejected."""
    items = [json.loads(line) for name in HELD_OUT
             for line in (ROOT / "tests" / "data" / name).read_text(encoding="utf-8").splitlines()]
    texts = [it["text"] for it in items]
    for level in OFFLINE_LEVELS:
        cands = level_class(level)().candidates(texts, 3, [np.random.default_rng(i) for i in range(len(texts))])
        for text, cand in zip(texts, cands, strict=True):
            for c in cand:
                assert keeps_protected(text, c), (level, text, c)


@pytest.mark.parametrize(("name", "n", "word", "syntax"), [("protected_spans_heldout.jsonl", 66, 44, 20),
                                                         ("protected_spans_blind.jsonl", 30, 12, 8)])
def test_held_out_share_altered_is_at_most_one_percent(name: str, n: int, word: int, syntax: int) -> None:
    """The measured share of variants that alter a line of code, a doctest, an assert, a defined identifier, an
    option label or an answer cue, by the benchmark's independent checker (seeds 0-4, p = 3): on the 66 held-out
    questions 0 of 990 character, 0 of 884 word and 0 of 195 syntax variants (before these rules: 53.2%, 47.9% and 0%
    of 990, 963 and 120); on the 30 written after the rules, 0 of 450, 334 and 55 (their first, blind run: 2.0% of the
    character variants, from roman-numeral labels, a SQL statement ending in "(" and a destructured JavaScript name,
    since made rules). At most 1% is the goal; the levels must also still make variants of most questions. (With
    the word level's sense, part-of-speech, register and similarity filters, seeds 0-2, MiniLM: word variants for
    48 of the 66 and 14 of the 30 questions, against 60 and 25 before those filters.)"""
    b = bench()
    results = b.measure(b.heldout(ROOT / "tests" / "data" / name), OFFLINE_LEVELS, range(3), 3)
    for level, r in results.items():
        assert r["variants"] > 0
        assert r["altered"]["any"] <= 0.01 * r["variants"], (level, r["examples"])
    assert results["character"]["with_variant"] == n and results["word"]["with_variant"] >= word
    assert results["syntax"]["with_variant"] >= syntax


def test_shared_tables_share_altered_is_at_most_one_percent(shared_data: Path) -> None:
    """The same on the shared tables' code and multiple-choice questions, a slice of them (the first 40 of
    LLMRouter's HumanEval and logic grids, its labelled MMLU questions, 30 RouterBench ARC prompts, one seed: 116
    questions; all 400 of these took 4-15 minutes of CI). Measured on all of them (1,267 questions, seeds 0-4) by
    benchmarks/bench_protected_spans.py: 0.0%; before: 16.0% (character), 12.9% (word)."""
    b = bench()
    sources = b.shared(30, seed=0)
    items = [it for name in ("llmrouter-human_eval", "llmrouter-agentverse-logicgrid", "llmrouter-mmlu-labelled",
                             "routerbench-arc") for it in sources[name][:40]]
    assert len(items) == 116
    results = b.measure(items, OFFLINE_LEVELS, [0], 3)
    for level, r in results.items():
        assert r["altered"]["any"] <= 0.01 * r["variants"], (level, r["examples"])


# ------------------------------------------------------------------------------------------------------- LLM levels
def _one(question: str, replies: Sequence[str]) -> tuple[list[str], dict[str, int]]:
    reply = "\n".join(f"{i}. {r}" for i, r in enumerate(replies, 1))
    ps = perturb(["q"], [question], ["paraphrase"], 5, backend=Scripted({question: reply}),
                 options={"paraphrase": {"ask": len(replies)}})
    return [v.text for v in ps.variants], dict(ps.stats["paraphrase"])


def test_an_llm_rewrite_that_alters_a_protected_span_is_rejected_and_counted() -> None:
    q = "Question: Which gas do green plants absorb from the air? (A) oxygen (B) carbon dioxide Answer:"
    kept, stats = _one(q, [
        "Question: Which gas is taken in from the air by green plants? (A) oxygen (B) carbon dioxide Answer:",
        "Question: Which gas do green plants absorb from the air? (A) oxygen (B) carbon dioxide Reply:",
        "Which gas do green plants absorb from the air? (A) oxygen (B) carbon dioxide Answer:",
        "Question: Which gas do green plants absorb from the air? (B) carbon dioxide (A) oxygen Answer:"])
    assert kept == ["Question: Which gas is taken in from the air by green plants? (A) oxygen (B) carbon dioxide "
                    "Answer:"]
    assert stats["rejected"] == 3  # the cue renamed, the cue dropped, the options reordered
    code = "Write a function to add two numbers. Test: assert add(1, 2) == 3"
    kept, stats = _one(code, ["Write a function to add two given numbers. Test: assert add(1, 2) == 3",
                              "Write a function to add two given numbers. Test: assert plus(1, 2) == 3",
                              "Write a function that adds two numbers. Test: assert add(1, 2) == 3"])
    assert kept == ["Write a function to add two given numbers. Test: assert add(1, 2) == 3"]
    assert stats["rejected"] == 2  # the function under test renamed; its name in the prose ("add") changed


def test_a_contraction_after_a_number_is_not_a_unit() -> None:
    """Hypothesis found "3 is not" -> "3 isn't" refused: the unit rule protected "isn" (three letters after a
    number) in the contraction only. The stem of a contraction or possessive is not a unit; real units stay."""
    from routerlab.perturb.spans import keeps_protected, protected_strings

    assert keeps_protected("3 is not", "3 isn't") and keeps_protected("3 isn't", "3 is not")
    assert dict(protected_strings("3 isn't")) == {"3": 1}
    assert dict(protected_strings("3 apples' cores, 5 km and 10 GeV")) == {"3": 1, "apples": 1, "5": 1, "km": 1,
                                                                          "10": 1, "GeV": 1}
