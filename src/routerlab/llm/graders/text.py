"""Graders that match text: ``mc`` (an option letter), ``short`` (exact match) and ``f1`` (token F1).

- ``mc``: the letter a reply chooses (:func:`routerlab.llm.grading.extract_letter`: an explicit statement, an
  opening letter, a letter standing alone, or exactly one option's text) against the gold letter; the reference
  may also be an option's exact text. ``collect`` reads option-letter logits instead where it can; this grader
  is for generated replies.
- ``short``: the candidate answer (the last ``\\boxed{}``, else after ``answer is``/``answer:``, else the first
  non-empty line) matched exactly after normalisation, or numerically when the reference is a number
  (:func:`routerlab.llm.grading.grade_short`); the detail gives the token F1 too.
- ``f1``: the token F1 of the candidate against the reference, both normalised (lower case, punctuation and
  the articles a/an/the removed), the SQuAD convention that LLMRouter's ``f1_score`` follows. A graded score.
"""

from __future__ import annotations

from collections import Counter

from routerlab.llm.graders import _prompts
from routerlab.llm.graders.base import Grade, Grader, Item, register_grader
from routerlab.llm.grading import LETTERS, extract_letter, grade_short, normalize_text, short_answer
from routerlab.llm.questions import not_an_option, option_letter


def token_f1(candidate: str, reference: str) -> float:
    """SQuAD token F1 of two texts after :func:`normalize_text` (0 when either side has no token)."""
    c, r = normalize_text(candidate).split(), normalize_text(reference).split()
    common = sum((Counter(c) & Counter(r)).values())
    if not c or not r or common == 0:
        return 0.0
    precision, recall = common / len(c), common / len(r)
    return 2 * precision * recall / (precision + recall)


@register_grader("mc")
class ChoiceGrader(Grader):
    """The option letter a generated reply chooses, against the gold letter (module docstring)."""

    def instruction(self, item: Item) -> str:
        return _prompts.MC

    def prompt(self, item: Item) -> str:
        if not item.choices:
            return super().prompt(item)
        lines = [f"{letter}. {text}" for letter, text in zip(LETTERS, item.choices, strict=False)]
        return f"{item.question.rstrip()}\n\n" + "\n".join(lines) + f"\n\n{self.instruction(item)}"

    def grade(self, item: Item) -> Grade:
        if not item.choices:
            return Grade(0.0, self.name, "", "no options to choose from")
        gold = option_letter(item.reference, item.choices, None)
        if gold is None:
            return Grade(0.0, self.name, "", not_an_option(f"reference {item.reference.strip()!r}", item.choices,
                                                           None))
        letter = extract_letter(item.answer, LETTERS[: len(item.choices)], item.choices)
        if letter is None:
            return Grade(0.0, self.name, "", "no option letter found")
        return Grade(1.0 if letter == gold else 0.0, self.name, letter)


@register_grader("short")
class ShortAnswerGrader(Grader):
    """Exact match of the short answer read from a reply (numeric when the reference is a number)."""

    def grade(self, item: Item) -> Grade:
        score, candidate = grade_short(item.answer, item.reference.strip())
        return Grade(score, self.name, candidate, f"f1 {token_f1(candidate, item.reference):.3f}")


@register_grader("f1")
class TokenF1Grader(Grader):
    """Token F1 of the short answer read from a reply against the reference (a graded score)."""

    binary = False

    def grade(self, item: Item) -> Grade:
        candidate = short_answer(item.answer)
        f1 = token_f1(candidate, item.reference)
        return Grade(f1, self.name, candidate, f"f1 {f1:.3f}")
