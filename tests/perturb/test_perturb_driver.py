"""The perturb driver and variants files (SPEC 3): distinct seeded variants, per-query streams, LLM levels not
faked without a backend, the grid the robustness metrics read, and clear errors for bad variants files."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routerlab.errors import DataError, UsageError
from routerlab.perturb import (
    Perturber,
    keeps_protected,
    level_names,
    perturb,
    read_variants,
    register_level,
    write_variants,
)
from routerlab.perturb.base import _REGISTRY, NO_BACKEND, Variant
from routerlab.perturb.similarity import Similarity
from tests.perturb import require_wordnet

IDS = ["q1", "q2", "q3"]
TEXTS = ["If the train leaves at 3 pm, what is the arrival time in Paris?",
         "Write a function to count the number of unique lists within a list.",
         "What is the capital of France?"]
SIM = Similarity("tfidf", TEXTS)
"""One similarity scorer shared by the runs a test compares (tf-idf fitted on TEXTS: fast, and the same for all)."""


class _NeedsBackend(Perturber):
    """A test-only level that, like paraphrase and rambling, needs an LLM backend."""

    offline: ClassVar[bool] = False

    def candidates(self, texts: Sequence[str], p: int, rngs: Sequence[np.random.Generator]) -> list[list[str]]:
        raise AssertionError("never called without a backend")


@pytest.fixture(autouse=True, scope="module")
def _wordnet() -> None:
    require_wordnet()


@pytest.fixture
def llm_only_level() -> Iterator[str]:
    """``test-llm-only`` registered for one test, then forgotten (other tests list the registered levels)."""
    level_names()  # load the built-in levels first, so the test level joins a loaded registry
    register_level("test-llm-only")(_NeedsBackend)
    yield "test-llm-only"
    _REGISTRY.remove("test-llm-only")


def test_variants_are_distinct_and_differ_from_the_original() -> None:
    ps = perturb(IDS, TEXTS, ["character", "word", "syntax"], 3, seed=0, similarity=SIM)
    for q, text in zip(IDS, TEXTS, strict=True):
        for level in ("character", "word", "syntax"):
            mine = [v for v in ps.variants if v.query_id == q and v.level == level]
            assert [v.variant for v in mine] == list(range(len(mine)))
            assert len({v.text for v in mine}) == len(mine) and text not in {v.text for v in mine}
    assert ps.stats["character"] == {**ps.stats["character"], "queries": 3, "variants": 9, "short": 0}


def test_same_seed_same_variants() -> None:
    a = perturb(IDS, TEXTS, ["character", "word", "syntax"], 3, seed=4, similarity=SIM)
    b = perturb(IDS, TEXTS, ["character", "word", "syntax"], 3, seed=4, similarity=SIM)
    c = perturb(IDS, TEXTS, ["character", "word", "syntax"], 3, seed=5, similarity=SIM)
    assert a.variants == b.variants
    assert a.variants != c.variants


def test_a_querys_variants_do_not_depend_on_the_batch() -> None:
    """Given one similarity scorer (MiniLM is stateless; tf-idf is fitted once, on the table in the CLI)."""
    whole = perturb(IDS, TEXTS, ["character", "word", "syntax"], 3, seed=9, similarity=SIM)
    alone = perturb(["q2"], [TEXTS[1]], ["character", "word", "syntax"], 3, seed=9, similarity=SIM)
    backwards = perturb(IDS[::-1], TEXTS[::-1], ["character", "word", "syntax"], 3, seed=9, similarity=SIM)
    assert [v for v in whole.variants if v.query_id == "q2"] == list(alone.variants)
    assert sorted(whole.variants, key=lambda v: v.key) == sorted(backwards.variants, key=lambda v: v.key)


def test_llm_level_without_backend_is_not_generated(llm_only_level: str) -> None:
    ps = perturb(IDS, TEXTS, ["character", llm_only_level], 2, seed=0, similarity=SIM)
    assert ps.not_generated == {llm_only_level: NO_BACKEND}
    assert {v.level for v in ps.variants} == {"character"}
    assert ps.generated_levels == ["character"]


def test_grid_layout_marks_missing_variants() -> None:
    ids, texts = ["a", "b"], ["What is the capital of France?", "hello world"]
    ps = perturb(ids, texts, ["character", "syntax"], 3, seed=1, similarity=SIM)
    levels, grid = ps.grid(ids)
    assert levels == ["character"] * 3 + ["syntax"] * 3
    assert grid.shape == (2, 6)
    # "hello world": typos give 3 variants, no syntax rule applies
    assert (grid[1, 3:] == -1).all() and (grid[:, :3] >= 0).all()
    # the capital question: rule 3 gives two instructions, nothing gives a third
    assert (grid[0, 3:5] >= 0).all() and grid[0, 5] == -1
    for i, q in enumerate(ids):
        for col, level in enumerate(levels):
            if grid[i, col] >= 0:
                v = ps.variants[grid[i, col]]
                assert (v.query_id, v.level, v.variant) == (q, level, col % 3)
    assert ps.stats["syntax"]["short"] == 2


def test_bad_p_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="integer >= 1"):
        perturb(IDS, TEXTS, ["character"], 0)


def test_variants_file_round_trip(tmp_path: Path) -> None:
    ps = perturb(IDS, TEXTS, ["character", "syntax"], 2, seed=0, similarity=SIM)
    path = write_variants(tmp_path / "v.jsonl", ps.variants)
    back = read_variants(path)
    assert back.variants == ps.variants and back.p == 2
    only = read_variants(path, levels=["syntax"])
    assert {v.level for v in only.variants} == {"syntax"}


def test_hand_written_file_numbers_variants_in_order(tmp_path: Path) -> None:
    path = tmp_path / "hand.jsonl"
    path.write_text('{"query_id": "q1", "level": "paraphrase", "text": "one"}\n'
                    '{"query_id": "q1", "level": "paraphrase", "text": "two"}\n'
                    '{"query_id": 7, "level": "paraphrase", "text": "three"}\n', encoding="utf-8")
    ps = read_variants(path)
    assert ps.variants == (Variant("q1", "paraphrase", 0, "one"), Variant("q1", "paraphrase", 1, "two"),
                           Variant("7", "paraphrase", 0, "three"))
    assert ps.p == 2


@pytest.mark.parametrize(("lines", "row", "field"), [
    (['{"query_id": "q", "level": "word"}'], 1, "text"),
    (['{"query_id": "q", "level": "word", "text": "a"}', '{"level": "word", "text": "b"}'], 2, "query_id"),
    (['{"query_id": "q", "level": "word", "text": "a", "variant": -1}'], 1, "variant"),
    (['{"query_id": "q", "level": "word", "text": "a", "variant": 0}',
      '{"query_id": "q", "level": "word", "text": "b", "variant": 0}'], 2, "variant"),
    (['{"query_id": "q", "level": "word", "text": "a"}', '{"query_id": "q", "level": "word", "text": "a "}'],
     2, "text"),
    (['{"query_id": "q", "level": "", "text": "a"}'], 1, "level"),
])
def test_bad_variants_file_names_file_row_and_field(tmp_path: Path, lines: list[str], row: int,
                                                    field: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_variants(path)
    assert (err.value.file, err.value.row, err.value.field) == (str(path), row, field)
    assert str(err.value).startswith(f"{path}, row {row}, field {field!r}: ")


def test_invalid_json_line_names_the_row(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps({"query_id": "q", "level": "word", "text": "a"}) + "\n{oops\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"broken\.jsonl, row 2: invalid JSON"):
        read_variants(path)


_TOKENS = ("the", "a", "if", "when", "what", "is", "find", "tell", "in", "at", "and", "or", "cats", "dogs",
           "Which", "Who", "wrote", "I", "do", "not", "don't", "please", "Write", "each", "x", "3", "4.5", ",",
           ".", "?", "In", "If", "$y^2$", "`f(x)`", "\n")


@settings(max_examples=150)
@given(st.one_of(st.lists(st.sampled_from(_TOKENS), max_size=16).map(" ".join),
                 st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)))
def test_any_text_gives_candidates_that_keep_protected_spans(text: str) -> None:
    """No offline level raises on arbitrary text, and every raw candidate keeps the protected spans (the syntax
    level also the bag of content words)."""
    from routerlab.perturb.base import level_class
    from routerlab.perturb.syntax import content_bag

    for level in ("character", "word", "syntax"):
        for cand in level_class(level)().candidates([text], 3, [np.random.default_rng(0)])[0]:
            assert keeps_protected(text, cand)
            if level == "syntax":
                assert content_bag(cand) == content_bag(text)
