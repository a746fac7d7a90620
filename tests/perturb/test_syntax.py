"""The syntax level (SPEC 3): each rule on hand-made sentences, the bag of content words and protected spans kept,
and the share of real queries that get p variants."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from routerlab.perturb import keeps_protected, perturb
from routerlab.perturb.base import level_rng
from routerlab.perturb.spans import structural_spans
from routerlab.perturb.syntax import (
    SyntaxLevel,
    clause_to_end,
    clause_to_front,
    content_bag,
    coordination_swap,
    instruction_to_question,
    pp_to_end,
    pp_to_front,
    question_to_instruction,
    rule_outputs,
    sentence_pieces,
    sentences,
    subject_question_to_instruction,
    syntax_candidates,
)
from tests.perturb import real_queries, require_wordnet


@pytest.fixture(autouse=True, scope="module")
def _wordnet() -> None:
    require_wordnet()  # rule 7 asks WordNet whether a word is a noun


def test_clause_to_end() -> None:
    assert clause_to_end("If the train leaves at 3 pm, when does it arrive?") == \
        "When does it arrive if the train leaves at 3 pm?"
    assert clause_to_end("When water boils, what happens to the bubbles?") == \
        "What happens to the bubbles when water boils?"
    assert clause_to_end("If x > 2, x is large.") is None  # the main clause starts with a protected span
    assert clause_to_end("What is the capital of France?") is None


def test_clause_to_front() -> None:
    assert clause_to_front("How many girls are in the school if 40% of the pupils are boys?") == \
        "If 40% of the pupils are boys, how many girls are in the school?"
    assert clause_to_front("Tell me if it rains.") is None  # too short a main part, and an embedded question
    assert clause_to_front("Can you find out if the shop is open today?") is None  # "out if": embedded
    assert clause_to_front("The plant grows faster when it gets more light, and it flowers.") is None  # a comma


def test_question_to_instruction() -> None:
    assert question_to_instruction("What is the capital of France?") == [
        "Tell me what the capital of France is.", "Determine the capital of France."]
    assert question_to_instruction("Who was the first president of the United States?") == [
        "Tell me who the first president of the United States was."]
    assert question_to_instruction("Where is the tower located?") == []  # "located": not a whole noun phrase
    assert question_to_instruction("Why is the sky blue?") == []


def test_subject_question_to_instruction() -> None:
    assert subject_question_to_instruction("Who wrote Hamlet?") == "Tell me who wrote Hamlet."
    assert subject_question_to_instruction("Which activity wastes a natural resource?") == \
        "Tell me which activity wastes a natural resource."
    assert subject_question_to_instruction("Which planet has the most moons?") == \
        "Tell me which planet has the most moons."
    assert subject_question_to_instruction("Which way round does it go?") is None  # "round" is no verb
    assert subject_question_to_instruction("Who did you see?") is None  # an auxiliary: maybe an object question
    assert subject_question_to_instruction("Which of the following is true?") is None


def test_instruction_to_question() -> None:
    assert instruction_to_question("Find the roots of x^2 - 4 = 0.") == "What are the roots of x^2 - 4 = 0?"
    assert instruction_to_question("Calculate the sum of all even numbers below 100.") == \
        "What is the sum of all even numbers below 100?"
    assert instruction_to_question("Find a number.") is None


def test_prepositional_phrase_moves() -> None:
    assert pp_to_front("Write a function to count the number of unique lists within a list.") == \
        "Within a list, write a function to count the number of unique lists."
    assert pp_to_front("When does it arrive if the train leaves at noon?") is None  # inside a subordinate clause
    assert pp_to_front("On Wednesday they delivered more than they delivered on Tuesday.") is None  # one fronted
    assert pp_to_end("In 1990, who won the world cup?") == "Who won the world cup in 1990?"
    assert pp_to_end("In a very long and winding sentence of many words, who won?") is None


def test_coordination_swap() -> None:
    assert coordination_swap("Name the cats and dogs of the village.") == ["Name the dogs and cats of the village."]
    assert coordination_swap("Buy the apples and the pears at the market.") == [
        "Buy the pears and the apples at the market."]  # two noun phrases with their own determiners
    assert coordination_swap("Write code to sort and reverse the list.") == []  # actions in sequence
    assert coordination_swap("Buy the apples and pears, respectively.") == []
    assert coordination_swap("Buy the apples, pears and plums.") == []  # part of a longer list


def test_coordination_swap_only_for_simple_noun_phrases() -> None:
    """Issue 22: "come 8 to a box and cost $2.00" became "come 8 to a cost and box $2.00"."""
    assert coordination_swap("Pencils come 8 to a box and cost $2.00 per box.") == []  # B takes an object: a verb
    assert coordination_swap("Cook the rice and serve.") == []  # serve is mostly a verb in WordNet
    assert coordination_swap("The baker feeds the cats and dogs every morning.") == []  # B before a determiner
    assert coordination_swap("Who played taylor on the beautiful and bold") == []  # adjectives (a title)
    assert coordination_swap("Magma blows out of a volcano and cools quickly.") == []
    assert coordination_swap("Compute the ratio of boys and girls in the class.") == []  # the order matters
    assert coordination_swap("Take the pen and papers home.") == []  # one singular, one plural
    assert coordination_swap("Store the salt and sand in the shed.") == ["Store the sand and salt in the shed."]


def test_no_phrase_moves_across_a_label_a_cue_or_a_line_break() -> None:
    """Issue 22: PP-fronting moved a phrase in front of "A." or "Scenario 1 |"; question moves took the question
    past the options."""
    mc = ("Which statement is true in the north? A) Days are shorter in the winter. B) Nights are longer in the "
          "winter.")
    outs = rule_outputs(mc)
    assert "Which statement is true in the north? A) In the winter, Days are shorter. B) Nights are longer in the " \
           "winter." in outs
    for out in outs:  # every label still starts its option, in order, and the question stays first
        assert out.startswith("Which statement") or out.startswith("In the north, which statement")
        assert [out[s:e] for s, e in structural_spans(out)] == ["A)", "B)"]
        assert out.index("A)") < out.index("Days") < out.index("B)") < out.index("Nights")
    scen = ("For which scenario is the main character wrong? Scenario 1 | I dug a hole to make a cellar in my "
            "backyard. Scenario 2 | I went to a game.")
    for out in rule_outputs(scen):
        assert out.index("Scenario 1 |") < out.index("I dug") and out.startswith("For which scenario")
    lines = "Find the area of the square.\nIts side is 3 cm in the drawing."
    assert all(out.count("\n") == 1 and out.index("\n") == out.find("\n") for out in rule_outputs(lines))
    assert "What is the area of the square?\nIts side is 3 cm in the drawing." in rule_outputs(lines)


def test_sentence_pieces() -> None:
    text = "Question: Is it in the box? A. yes B. no\nAnswer:"
    assert [text[s:e] for s, e in sentence_pieces(text)] == ["Is it in the box?", "yes", "no"]


def test_question_first_and_last() -> None:
    text = "As the population grows, demand increases. Which activity wastes a natural resource?"
    assert "Which activity wastes a natural resource? As the population grows, demand increases." in \
        rule_outputs(text)
    back = "Which activity wastes water? Farms use a lot of it."
    assert "Farms use a lot of it. Which activity wastes water?" in rule_outputs(back)


def test_sentences() -> None:
    text = "Dr. Smith paid 3.5 dollars. Was it enough? Yes."
    assert [text[s:e] for s, e in sentences(text)] == ["Dr. Smith paid 3.5 dollars.", "Was it enough?", "Yes."]


def test_candidates_keep_the_bag_and_the_protected_spans() -> None:
    texts = ["If f(x) = 3x + 2 and x = 4, what is the value of `f(4)`?",
             "Find the sum of the apples and pears in the basket. The farmer has 12 apples.",
             "In 2020, which country hosted the games?",
             "What is the capital of France?"]
    for text in texts:
        cands = syntax_candidates(text, 5, np.random.default_rng(0))
        assert cands, text
        for c in cands:
            assert content_bag(c) == content_bag(text) and keeps_protected(text, c) and c != text


def test_question_moves_need_a_text_without_labels_or_cues() -> None:
    outs = rule_outputs("Which animal lives in the ocean? A. shark B. whale")
    assert outs == ["Tell me which animal lives in the ocean. A. shark B. whale"]  # no "question last" past A.
    assert "Which activity wastes water? Farms use a lot." in rule_outputs("Farms use a lot. Which activity wastes "
                                                                          "water?")


def test_no_rule_no_candidate() -> None:
    assert SyntaxLevel().candidates(["hello world", "x = 3"], 3, [np.random.default_rng(0)] * 2) == [[], []]


def test_seeded_order() -> None:
    text = "If it rains, what is the forecast for the picnic and the parade?"
    a = syntax_candidates(text, 3, np.random.default_rng(1))
    assert a == syntax_candidates(text, 3, np.random.default_rng(1))
    assert sorted(a) == sorted(syntax_candidates(text, 3, np.random.default_rng(2)))


def test_real_queries(shared_data: Path) -> None:
    """Over LLMRouter's 706 test queries every candidate keeps the bag of content words and the protected spans.
    Many queries are bare questions, word lists or code that no rule reorders: measured, 21.0% (148 of 706) get
    p = 3 variants and 43.1% (304) at least one (p = 3, seed 0; before the coordination swap was held to noun
    phrases and rules to the text between labels, cues and line breaks: 25.1%, 177, and 45.9%, 324)."""
    ids, texts = real_queries(shared_data)
    assert len(texts) >= 300
    cands = SyntaxLevel().candidates(texts, 3, [level_rng(0, q, "syntax") for q in ids])
    for text, cand in zip(texts, cands, strict=True):
        for c in cand:
            assert content_bag(c) == content_bag(text), (text, c)
            assert keeps_protected(text, c), (text, c)
    ps = perturb(ids, texts, ["syntax"], 3, seed=0, similarity="tfidf")  # no similarity filter at this level
    counts = Counter(v.query_id for v in ps.variants)
    assert sum(n == 3 for n in counts.values()) / len(ids) >= 0.2
    assert len(counts) / len(ids) >= 0.4
