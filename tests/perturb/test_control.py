"""The control level (SPEC 3, the invariance check's falsifier): meaning-changing edits by rule (a number, a
negation, a sister-term entity), one per variant, seeded; opt-in; protected spans other than the changed number
kept; marked meaning-changing in variants files; on real queries every variant differs from its query by one edit."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from routerlab.errors import DataError
from routerlab.perturb import LEVELS, parse_levels, perturb
from routerlab.perturb.base import level_class, level_names, level_rng
from routerlab.perturb.control import (
    ControlLevel,
    SisterTerms,
    changed_number,
    changes_meaning,
    entity_edits,
    is_quantity,
    negation_edits,
    number_edits,
    question_span,
)
from routerlab.perturb.files import read_variants, write_variants
from routerlab.perturb.spans import protected_strings
from tests.perturb import real_queries, require_wordnet


def applied(text: str, edits: list) -> list[str]:  # type: ignore[type-arg]
    return [e.apply(text) for e in edits]


def test_opt_in_and_meaning_changing() -> None:
    assert "control" in level_names() and "control" not in LEVELS and "control" not in parse_levels("all")
    assert parse_levels("character,control") == ["character", "control"]
    assert level_class("control").meaning_preserving is False and level_class("word").meaning_preserving
    assert changes_meaning("control") and not changes_meaning("character")
    assert changes_meaning("mine", {"mine": {"meaning_changing": True}}) and not changes_meaning("mine")


def test_quantities() -> None:
    for token in ("8", "$2.00", "1,500", "25%", "12kg", "0.5", "1990"):
        assert is_quantity(token), token
    for token in ("1st", "3rd", "007", "x2", "3x+2", "f(3)", "2/3"):
        assert not is_quantity(token), token


def test_number_edits_skip_code_lists_and_formulae() -> None:
    text = ("Boxes come 8 to a box and cost $2.00 each.\n1. Buy with `x = 5` and $y = 3$.\n"
            "assert add(1, 2, 3) == 6\n>>> add(4, 5)\n9\n    total = 4\n\nHow many for 10 dollars?")
    # (a doctest's expected output runs to the next blank line, so the question comes after one)
    found = [text[s:e] for s, e, _ in number_edits(text)]
    assert found == ["8", "$2.00", "10"]


def test_changed_number_keeps_its_form() -> None:
    rng = np.random.default_rng(0)
    for token in ("8", "$2.00", "1,500", "25%", "0"):
        m = re.match(r"^(?P<pre>[$]?)(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<dec>\.\d+)?(?P<post>%)?$", token)
        assert m is not None
        for _ in range(20):
            new = changed_number(m, rng)
            assert new != token and is_quantity(new), (token, new)
            assert new.startswith(m.group("pre")) and new.endswith(m.group("dec") or m.group("post") or "")
            assert int(re.sub(r"\D", "", new.split(".")[0])) >= 0
            assert abs(int(new.strip("$%").split(".")[0].replace(",", "")) -
                       int(m.group("int").replace(",", ""))) <= 9
            assert ("," in new) == ("," in token) or int(new.replace(",", "").strip("$%")) < 1000


@pytest.mark.parametrize(("text", "expected"), [
    ("Which is a nonrenewable resource?", {"Which isn't a nonrenewable resource?"}),
    ("A model is built. Which is not accurate concerning the model?",
     {"A model is built. Which is accurate concerning the model?"}),
    ("Where does someone obtain a frying pan?", {"Where doesn't someone obtain a frying pan?"}),
    ("Which animals might seek food?", {"Which animals might not seek food?"}),
    ("Which can't fly?", {"Which can fly?"}),
    ("Which method is most likely to work?", {"Which method isn't most likely to work?",
                                              "Which method is least likely to work?"}),
    ("Elements have what properties in common?", set()),  # 'have' is the main verb here
    ("Atoms have combined into what?", {"Atoms haven't combined into what?"}),
])
def test_negations(text: str, expected: set[str]) -> None:
    assert set(applied(text, negation_edits(text))) == expected


def test_negation_edits_only_the_question() -> None:
    text = "The sun is a star. It is hot. Which planet is closest?"
    assert question_span(text) == (text.index("Which"), len(text))
    assert set(applied(text, negation_edits(text))) == {"The sun is a star. It is hot. Which planet isn't closest?"}


def test_entity_swaps_sister_terms() -> None:
    require_wordnet()
    sisters = SisterTerms()
    assert "Germany" in sisters.sisters("France")
    out = applied("What is the capital of France?", entity_edits("What is the capital of France?", sisters))
    assert "What is the capital of Germany?" in out
    # plural kept plural; a capitalised title word inside a sentence is not a name: left alone
    plural = applied("Why do planets orbit?", entity_edits("Why do planets orbit?", sisters))
    assert "Why do stars orbit?" in plural
    assert all(v.split()[2].endswith("s") for v in plural if v.split()[2] != "planets")
    title = "Which group of the Periodic Table holds metals?"
    assert all("Periodic Table" in v for v in applied(title, entity_edits(title, sisters)))
    # generic nouns and function words are never swapped
    generic = "Which of the following is true?"
    assert entity_edits(generic, sisters) == []


def test_one_edit_per_variant_seeded_and_protected_spans_kept() -> None:
    texts = ["Boxes come 8 to a box and cost $2.00 each. Which box is the cheapest?",
             "Which of these is a mammal?\nA. cat\nB. trout\nC. hawk"]
    ids = ["a", "b"]
    one = perturb(ids, texts, ["control"], 4, seed=3)
    two = perturb(ids, texts, ["control"], 4, seed=3)
    assert one.variants == two.variants and len(one.variants) > 4
    assert perturb(ids, texts, ["control"], 4, seed=4).variants != one.variants
    for v in one.variants:
        orig = texts[ids.index(v.query_id)]
        assert v.text != orig
        kept = {k: c for k, c in protected_strings(orig).items() if not is_quantity(k)}
        assert {k: c for k, c in protected_strings(v.text).items() if not is_quantity(k)} == kept
    assert one.settings["control"]["meaning_changing"] is True


def test_keep_rejects_a_changed_option_label_but_not_a_changed_number() -> None:
    level = ControlLevel()
    orig = "Pick 3 apples.\nA) red\nB) green"
    kept, rejected = level.keep(orig, ["Pick 5 apples.\nA) red\nB) green", "Pick 3 apples.\nC) red\nB) green",
                                       orig, "Pick 5 apples.\nA) red\nB) green"], 5)
    assert kept == ["Pick 5 apples.\nA) red\nB) green"] and rejected == 1


def test_without_wordnet_numbers_and_negations_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERLAB_WORDNET", str(tmp_path))
    level = ControlLevel()
    assert level.sisters is None
    settings = level.settings()
    assert settings["kinds"] == ["number", "negate"] and settings["entity"].startswith("not made: WordNet")
    ps = perturb(["q"], ["Which of 3 cats is the fastest?"], ["control"], 2, seed=0)
    assert all("cats" in v.text for v in ps.variants) and len(ps.variants) == 2


def test_variants_file_marks_and_reads_meaning_changing(tmp_path: Path) -> None:
    ps = perturb(["q0", "q1"], ["Which is 5 times 3?", "Is a whale a fish?"], ["character", "control"], 1, seed=0)
    path = write_variants(tmp_path / "v.jsonl", ps.variants)
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert {r["level"] for r in rows} == {"character", "control"}
    assert all(r.get("meaning_changing") is (True if r["level"] == "control" else None) for r in rows)
    back = read_variants(path)
    assert back.settings["control"]["meaning_changing"] is True and "meaning_changing" not in back.settings["character"]
    # a level of the user's own, named meaning-changing when written, keeps its mark through the file
    mine = [type(v)(v.query_id, "mine", v.variant, v.text) for v in ps.variants if v.level == "character"]
    path2 = write_variants(tmp_path / "m.jsonl", mine, meaning_changing=["mine"])
    assert changes_meaning("mine", read_variants(path2).settings)
    # marks must agree within a level, and be booleans
    lines = path.read_text().splitlines()
    bad = [json.loads(x) for x in lines]
    bad.append({"query_id": "q9", "level": "control", "variant": 0, "text": "Is a shark a fish?"})
    (tmp_path / "bad.jsonl").write_text("\n".join(json.dumps(b) for b in bad))
    with pytest.raises(DataError, match="mark every variant of a level alike"):
        read_variants(tmp_path / "bad.jsonl")
    (tmp_path / "bad2.jsonl").write_text(json.dumps({"query_id": "q", "level": "x", "text": "t",
                                                     "meaning_changing": "yes"}))
    with pytest.raises(DataError, match="meaning_changing must be true or false"):
        read_variants(tmp_path / "bad2.jsonl")


def test_real_queries(shared_data: Path) -> None:
    """Over LLMRouter's 706 test queries: every kept variant differs from its query in one place (one edit), keeps
    every protected span but plain quantities, and most queries get a variant (measured: see the assertion)."""
    require_wordnet()
    ids, texts = real_queries(shared_data)
    level = ControlLevel()
    # the control level keeps candidates whatever their similarity: tf-idf scores them here (MiniLM, the
    # default, would cost this test most of its time without changing what it checks)
    ps = perturb(ids, texts, ["control"], 2, seed=0, similarity="tfidf")
    got = {v.query_id for v in ps.variants}
    # measured: 568 of 706 queries get a variant (619 before issue 22's wider protected spans: commongen's concept
    # lists and more units are now protected); none of HumanEval's 50 (a code-completion prompt is all code)
    assert len(got) / len(ids) >= 0.78, len(got) / len(ids)
    assert not any(q.startswith("human_eval") for q in got)
    by_id = dict(zip(ids, texts, strict=True))
    for v in ps.variants:
        orig = by_id[v.query_id].strip()
        i = 0
        while i < min(len(orig), len(v.text)) and orig[i] == v.text[i]:
            i += 1
        j = 0
        while j < min(len(orig), len(v.text)) - i and orig[-1 - j] == v.text[-1 - j]:
            j += 1
        changed = orig[i:len(orig) - j]
        assert len(changed.split()) <= 3, (orig[:80], v.text[:80])  # one word, number or "is not"
    assert ps.stats["control"]["rejected"] == 0
    assert level.settings()["kinds"] == ["number", "negate", "entity"]
    # the three kinds all occur
    sample = [(v, by_id[v.query_id]) for v in ps.variants]
    assert any(any(ch.isdigit() for ch in v.text) and v.text != o and
               re.sub(r"\d", "", v.text) == re.sub(r"\d", "", o) for v, o in sample)
    assert any("n't" in v.text and "n't" not in o for v, o in sample)
    _ = level_rng(0, ids[0], "control")
