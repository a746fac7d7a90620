"""The character level (SPEC 3): typos within a small edit distance, never in a protected span, seeded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from routerlab.perturb import keeps_protected, perturb
from routerlab.perturb.base import level_rng
from routerlab.perturb.character import (
    KEYBOARD_NEIGHBOURS,
    CharacterLevel,
    edit_word,
    editable_words,
    n_edits,
    typo_variant,
)
from routerlab.perturb.spans import protected_strings
from tests.perturb import levenshtein, real_queries

FOX = "The quick brown fox jumps over the lazy dog"


def test_keyboard_neighbours_are_the_qwerty_ones() -> None:
    assert KEYBOARD_NEIGHBOURS["a"] == "qswz"
    assert KEYBOARD_NEIGHBOURS["g"] == "bfhtvy"
    assert KEYBOARD_NEIGHBOURS["p"] == "lo"
    assert KEYBOARD_NEIGHBOURS["m"] == "jkn"
    assert all(ch in KEYBOARD_NEIGHBOURS[n] for ch, near in KEYBOARD_NEIGHBOURS.items() for n in near)  # symmetric


def test_edits_scale_with_the_number_of_words() -> None:
    assert [n_edits(n) for n in (1, 9, 10, 19, 20, 500)] == [1, 1, 2, 2, 3, 3]


def test_editable_words_skip_protected_spans_and_short_words() -> None:
    text = "Is H2O at 100 C a gas? Use `boil(x)` to see."
    assert [text[s:e] for s, e in editable_words(text)] == ["gas", "Use", "see"]


@pytest.mark.parametrize("word", ["keyboard", "Paris", "add", "committee"])
def test_each_typo_is_one_small_edit_and_keeps_the_first_letter(word: str) -> None:
    rng = np.random.default_rng(7)
    kinds = set()
    for _ in range(300):
        new, kind = edit_word(word, rng)
        kinds.add(kind)
        assert new != word
        assert levenshtein(word, new, 2) == (2 if kind == "swap" else 1)
        if kind == "case":
            assert new == word[0].swapcase() + word[1:]
        else:
            assert new[0] == word[0]
    # "add" has no two different adjacent letters after the first, so no swap
    assert kinds == {"drop", "insert", "keyboard", "case"} | ({"swap"} if word != "add" else set())


def test_fox_sentence_gives_p_distinct_close_variants() -> None:
    ps = perturb(["fox"], [FOX], ["character"], 5, seed=3)
    texts = [v.text for v in ps.variants]
    assert len(texts) == 5 and len(set(texts)) == 5 and FOX not in texts
    for t in texts:  # 9 editable words: one typo each
        assert 1 <= levenshtein(FOX, t, 3) <= 2


def test_same_seed_same_variants_other_seed_others() -> None:
    a = perturb(["q"], [FOX], ["character"], 4, seed=11)
    b = perturb(["q"], [FOX], ["character"], 4, seed=11)
    c = perturb(["q"], [FOX], ["character"], 4, seed=12)
    assert a.variants == b.variants
    assert [v.text for v in a.variants] != [v.text for v in c.variants]


def test_protected_spans_survive_every_candidate() -> None:
    text = ("Compute the integral $\\int_0^1 x^2 dx$ and evaluate f(3) = 2x+1 with `numpy.sum(values)`; "
            "the answer, option (B), should exceed 0.33 according to https://example.org/calculus")
    rng = np.random.default_rng(0)
    words = editable_words(text)
    for _ in range(200):
        variant = typo_variant(text, words, rng)
        assert keeps_protected(text, variant)
        assert 1 <= levenshtein(text, variant, 2 * n_edits(len(words)) + 1) <= 2 * n_edits(len(words))
    # LaTeX, f(3), =, 2x+1, code, (B), 0.33, the word after a number (its unit: "according"), URL
    assert sum(protected_strings(text).values()) == 9


def test_nothing_editable_gives_no_candidate() -> None:
    assert CharacterLevel().candidates(["x = 3", "2 + 2"], 3, [np.random.default_rng(0)] * 2) == [[], []]


def test_real_queries(shared_data: Path) -> None:
    """Over LLMRouter's 706 test queries: every raw candidate keeps its protected spans and is within 2 edits per
    typo; every query with an editable word gets p = 3 variants (measured: 656 of 656). The 50 commongen queries
    have none: a concept list is the task itself, protected whole (before concept lists were protected: 706 of
    706)."""
    ids, texts = real_queries(shared_data)
    assert len(texts) >= 300
    rngs = [level_rng(0, q, "character") for q in ids]
    cands = CharacterLevel().candidates(texts, 3, rngs)
    for text, cand in zip(texts, cands, strict=True):
        k = n_edits(len(editable_words(text)))
        for c in cand:
            assert keeps_protected(text, c), (text, c)
            assert 1 <= levenshtein(text, c, 2 * k) <= 2 * k, (text, c)
    ps = perturb(ids, texts, ["character"], 3, seed=0, similarity="tfidf")  # no similarity filter here
    editable = [q for q, t in zip(ids, texts, strict=True) if editable_words(t)]
    assert [q for q in ids if q not in editable] == [q for q in ids if q.startswith("commongen-")]
    full = sum(len([v for v in ps.variants if v.query_id == q]) == 3 for q in editable) / len(editable)
    assert full >= 0.99
    assert ps.stats["character"]["rejected"] == 0
