"""The character level (SPEC 3; hse paper sec. 5.1, appendix 11): typos a person makes, never inside a
protected span.

A variant edits ``min(3, 1 + n // 10)`` words, where n counts the editable words (runs of 3 or more letters
outside protected spans): 1 edit below 10 such words, 2 below 20, 3 from 20 on. Each edit goes to a different
word, chosen at random, and is one of (uniformly among those possible for the word):

* **swap** two adjacent letters that differ;
* **drop** a letter;
* **insert** a letter, a QWERTY neighbour of the letter before it (a finger slipping), in that letter's case;
* **keyboard**: replace a letter by one of its QWERTY neighbours, keeping its case;
* **case**: flip the case of the word's first letter.

Apart from the case flip, no edit touches a word's first letter: the words stay recognisable, as in real typing
errors, which rarely hit the first letter. Each edit changes its word and costs 1 (a swap 2) in Levenshtein
distance, so a variant with e edits is at distance 1 to 2e from the original.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from routerlab.perturb.base import Perturber, register_level
from routerlab.perturb.spans import protected_spans

EDIT_KINDS: tuple[str, ...] = ("swap", "drop", "insert", "keyboard", "case")
_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_ROW_SHIFT = (0.0, 0.25, 0.75)
_LETTERS = re.compile(r"[A-Za-z]{3,}")


def _keyboard_neighbours() -> dict[str, str]:
    """Each letter's QWERTY neighbours: same row one key away, adjacent row less than one key away."""
    place = {ch: (r, c + _ROW_SHIFT[r]) for r, row in enumerate(_ROWS) for c, ch in enumerate(row)}
    out: dict[str, str] = {}
    for ch, (r, x) in place.items():
        near = [o for o, (r2, x2) in place.items() if o != ch and (
            (r2 == r and abs(x2 - x) == 1.0) or (abs(r2 - r) == 1 and abs(x2 - x) < 1.0))]
        out[ch] = "".join(sorted(near))
    return out


KEYBOARD_NEIGHBOURS: dict[str, str] = _keyboard_neighbours()


def n_edits(n_words: int) -> int:
    """Edits per variant for ``n_words`` editable words: ``min(3, 1 + n_words // 10)`` (module docstring)."""
    return min(3, 1 + n_words // 10)


def _neighbour(ch: str, rng: np.random.Generator) -> str:
    near = KEYBOARD_NEIGHBOURS[ch.lower()]
    out = near[int(rng.integers(len(near)))]
    return out.upper() if ch.isupper() else out


def edit_word(word: str, rng: np.random.Generator) -> tuple[str, str]:
    """One typo in ``word`` (3+ letters): returns the edited word and the kind of edit."""
    swaps = [i for i in range(1, len(word) - 1) if word[i] != word[i + 1]]
    kinds = [k for k in EDIT_KINDS if k != "swap" or swaps]
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == "swap":
        i = swaps[int(rng.integers(len(swaps)))]
        return word[:i] + word[i + 1] + word[i] + word[i + 2:], kind
    if kind == "drop":
        i = int(rng.integers(1, len(word)))
        return word[:i] + word[i + 1:], kind
    if kind == "insert":
        i = int(rng.integers(1, len(word) + 1))
        return word[:i] + _neighbour(word[i - 1], rng) + word[i:], kind
    if kind == "keyboard":
        i = int(rng.integers(1, len(word)))
        return word[:i] + _neighbour(word[i], rng) + word[i + 1:], kind
    return word[0].swapcase() + word[1:], kind


def unprotected_ranges(text: str) -> list[tuple[int, int]]:
    """(start, end) of the stretches of ``text`` between its protected spans (overlapping spans, e.g. a token
    that holds a LaTeX block, are merged first), in order."""
    out: list[tuple[int, int]] = []
    pos = 0
    for s, e in sorted(protected_spans(text)):
        if s > pos:
            out.append((pos, s))
        pos = max(pos, e)
    if pos < len(text):
        out.append((pos, len(text)))
    return out


def editable_words(text: str) -> list[tuple[int, int]]:
    """(start, end) of every run of 3 or more letters outside the protected spans of ``text``."""
    return [(s + m.start(), s + m.end()) for s, e in unprotected_ranges(text)
            for m in _LETTERS.finditer(text[s:e])]


def typo_variant(text: str, words: Sequence[tuple[int, int]], rng: np.random.Generator) -> str:
    """One variant: ``n_edits(len(words))`` typos in as many different words of ``words``."""
    if not words:
        return text
    k = n_edits(len(words))
    chosen = sorted(int(i) for i in rng.choice(len(words), size=k, replace=False))
    out = text
    for i in reversed(chosen):
        s, e = words[i]
        new, _ = edit_word(text[s:e], rng)
        out = out[:s] + new + out[e:]
    return out


@register_level("character")
class CharacterLevel(Perturber):
    """Typos: swaps, drops, insertions, keyboard neighbours, case flips (module docstring)."""

    summary = "typos (swap, drop, insert, keyboard neighbour, case) in 1-3 words outside protected spans"
    offline = True
    tries_per_variant = 3

    def candidates(self, texts: Sequence[str], p: int, rngs: Sequence[np.random.Generator]) -> list[list[str]]:
        out: list[list[str]] = []
        for text, rng in zip(texts, rngs, strict=True):
            words = editable_words(text)
            out.append([typo_variant(text, words, rng) for _ in range(self.tries_per_variant * p)] if words else [])
        return out

    def settings(self) -> dict[str, Any]:
        return {"max_edits": 3, "kinds": list(EDIT_KINDS)}
