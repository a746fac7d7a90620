"""Grading an actor's answer against the gold answer: 1.0 when right, 0.0 when wrong (pure functions).

Multiple choice (options lettered A, B, C, ... up to J):

- From option-letter logits: the letter with the highest logit (the first one on a tie). One forward pass,
  no generated text, so there is nothing to parse.
- From generated text (:func:`extract_letter`), the first rule that finds a letter among the question's
  letters wins:

  1. an explicit statement, the first in the text: ``answer is (C)``, ``answer: C``, ``Answer - C``,
     ``correct option is C``, ``choice C``, ``\\boxed{C}`` (the words in any case, the letter upper case and
     not followed by another letter, optional parentheses, ``**`` bold marks or a colon between);
  2. a reply that opens with the letter (after white space, ``(`` and ``**``) followed by ``.``, ``)``,
     ``:``, ``,``, ``-``, ``*``, a line end or the end of the text: ``C``, ``C.``, ``(C)``, ``**C**``, ``C:``
     (not "A dog ...");
  3. the first letter standing alone as a label: ``(C)`` anywhere, or a capital letter with no letter
     before it and followed by ``.``, ``)``, ``:`` or ``,`` or by the end of the text (so the article in
     "A cat" is not read as option A, but "D.C." would be read as D);
  4. a reply that is exactly one option's text (after :func:`normalize_text`): that option's letter.

  No rule matching means no answer, graded wrong (never a guess).

Short answers (:func:`grade_short`): the candidate answer is the content of the last ``\\boxed{...}``, else
what follows the first ``answer is`` / ``answer:`` up to the end of its line, else the whole reply's first
non-empty line. When the gold answer is a number, the candidate is compared numerically (relative tolerance
1e-6; thousands separators, ``$``, ``%`` and a trailing ``.`` ignored; ``3/4`` read as 0.75); a candidate
that is not a number falls back to the last number in the whole reply. Otherwise both sides are compared
after :func:`normalize_text` (lower case, punctuation and the articles a/an/the removed, white space
collapsed).
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Sequence

LETTERS = "ABCDEFGHIJ"
"""Option letters, in order: at most ten options (MMLU-Pro has up to ten)."""

_EXPLICIT = re.compile(
    r"(?i:answer\s*(?:is|would\s+be|:|-|=)|correct\s+(?:answer|option|choice)\s*(?:is|:|-)?|"
    r"\b(?:option|choice)\b)"
    r"[\s:*]*(?i:option\s+|choice\s+)?[\s*]*\(?\*{0,2}([A-J])(?![A-Za-z])"
)
_BOXED_LETTER = re.compile(r"\\boxed\{\s*\(?([A-J])\)?\s*\}")
_OPENING = re.compile(r"^[\s*]*\(?([A-J])(?:[.):,\-*]|\s*$|\s*\n)")
_PAREN = re.compile(r"\(([A-J])\)")
_LABEL = re.compile(r"(?<![A-Za-z])([A-J])(?=[.):,]|\s*$)")
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
_NUMBER = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?%?|-?\$?\.\d+%?")
_ANSWER_LINE = re.compile(r"answer\s*(?:is\s*:?|:)\s*(.+)", re.IGNORECASE)


def letters_for(n_choices: int) -> str:
    """The option letters of a question with ``n_choices`` options (2..10)."""
    if not 1 <= n_choices <= len(LETTERS):
        raise ValueError(f"a multiple-choice question has 1 to {len(LETTERS)} options, got {n_choices}")
    return LETTERS[:n_choices]


def letter_from_logits(letters: Sequence[str], logits: Sequence[float]) -> str:
    """The option letter with the highest logit (the first on a tie; NaN never wins)."""
    if len(letters) != len(logits) or not letters:
        raise ValueError(f"{len(letters)} letters but {len(logits)} logits")
    best, best_value = 0, -math.inf
    for i, v in enumerate(logits):
        if not math.isnan(v) and v > best_value:
            best, best_value = i, float(v)
    return str(letters[best])


def _allowed(match: re.Match[str] | None, letters: str) -> str | None:
    if match is None:
        return None
    letter = match.group(1).upper()
    return letter if letter in letters else None


def extract_letter(text: str, letters: str, options: Sequence[str] | None = None) -> str | None:
    """The option letter a generated reply chooses, by the rules in the module docstring; None if none."""
    for pattern in (_EXPLICIT, _BOXED_LETTER):
        for m in pattern.finditer(text):
            found = _allowed(m, letters)
            if found is not None:
                return found
    found = _allowed(_OPENING.match(text), letters)
    if found is not None:
        return found
    for pattern in (_PAREN, _LABEL):
        for m in pattern.finditer(text):
            found = _allowed(m, letters)
            if found is not None:
                return found
    if options:
        reply = normalize_text(text)
        hits = [letters[i] for i, o in enumerate(options[: len(letters)]) if reply and normalize_text(o) == reply]
        if len(hits) == 1:
            return hits[0]
    return None


def grade_choice(predicted: str | None, gold: str) -> float:
    """1.0 when the predicted option letter is the gold letter, else 0.0 (None = no answer = wrong)."""
    return 1.0 if predicted is not None and predicted.upper() == gold.strip().upper() else 0.0


def normalize_text(text: str) -> str:
    """Lower case, punctuation and the articles a/an/the removed, white space collapsed."""
    out = text.lower().translate(_PUNCT)
    out = _ARTICLES.sub(" ", out)
    return " ".join(out.split())


def parse_number(text: str) -> float | None:
    """A number written as text (``1,000``, ``$20``, ``-3.5``, ``50%``, ``3/4``, ``20.``), or None."""
    s = text.strip().replace(",", "").replace("$", "").rstrip(".").strip()
    if s.endswith("%"):
        s = s[:-1].strip()
    if not s:
        return None
    if s.count("/") == 1:
        num, den = (parse_number(p) for p in s.split("/"))
        if num is None or den is None or den == 0:
            return None
        return num / den
    try:
        value = float(s)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (nested braces balanced), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i = start + len("\\boxed{")
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j].strip()
    return None


def short_answer(text: str) -> str:
    """The candidate answer in a generated reply: last ``\\boxed{}``, else after ``answer is``/``answer:``
    on its line, else the first non-empty line."""
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    m = _ANSWER_LINE.search(text)
    if m:
        return m.group(1).strip().splitlines()[0].strip() if m.group(1).strip() else ""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def numbers_equal(a: float, b: float) -> bool:
    """Equal within a relative tolerance of 1e-6 (absolute 1e-9 near zero)."""
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def grade_short(reply: str, gold: str) -> tuple[float, str]:
    """(score, the candidate answer read from the reply): numeric or normalised exact match (module docstring)."""
    candidate = short_answer(reply)
    gold_number = parse_number(gold)
    if gold_number is not None:
        value = parse_number(candidate)
        if value is None:
            numbers = _NUMBER.findall(reply)
            value = parse_number(numbers[-1]) if numbers else None
            if value is not None:
                candidate = numbers[-1]
        return (1.0 if value is not None and numbers_equal(value, gold_number) else 0.0), candidate
    norm = normalize_text(candidate)
    return (1.0 if norm and norm == normalize_text(gold) else 0.0), candidate
