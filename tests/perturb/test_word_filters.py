"""The word level's filters (SPEC 3, issue 22): WordNet sense frequency, part of speech in context, register, task
cues and payloads; the similarity every variant carries and the threshold the word level keeps variants above."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from routerlab.errors import DataError, UsageError
from routerlab.perturb import perturb, read_variants, write_variants
from routerlab.perturb.base import Variant
from routerlab.perturb.postag import NUMBER, tag_words
from routerlab.perturb.similarity import THRESHOLDS, Similarity
from routerlab.perturb.spans import protected_strings
from routerlab.perturb.word import DROP_REASONS, WordLevel, _substitute_reason, _synonym_options, edit_options
from routerlab.perturb.wordnet import WordNet, load
from tests.perturb import real_queries, require_wordnet


@pytest.fixture(scope="module")
def wn() -> WordNet:
    return load(require_wordnet())


def _offered(text: str, wn: WordNet) -> dict[str, list[str]]:
    return {g[0].old: [e.new for e in g] for g in edit_options(text, wn) if g[0].kind == "synonym"}


def _drops(text: str, wn: WordNet) -> Counter[str]:
    drops: Counter[str] = Counter()
    edit_options(text, wn, drops)
    return drops


def test_sense_counts_and_usage_labels(wn: WordNet) -> None:
    # cntlist.rev: week%1:28:00:: 1 103, week%1:28:01:: 2 3, week%1:28:02:: 3 1; hebdomad is never tagged
    assert wn.sense_counts("week", "noun") == (103, 3, 1)
    assert wn.sense_counts("hebdomad", "noun") == (0,)
    assert wn.sense_counts("weeks", "noun") == ()  # an inflected form is no lemma
    # data.adj 00004817 "potted": ;u 07075172 n 0000 (colloquialism, the whole synset)
    assert wn.usage_labelled(4817, "adj") == frozenset({0})
    assert wn.usage_labelled(wn.entry("dog", "noun").offsets[0], "noun") == frozenset()  # type: ignore[union-attr]


def test_a_wordnet_without_counts_says_so(tmp_path: Path, wn: WordNet) -> None:
    for name in ("index.noun", "data.noun", "index.verb", "data.verb", "index.adj", "data.adj", "index.adv",
                 "data.adv"):
        (tmp_path / name).symlink_to(wn.root / name)
    bare = WordNet(tmp_path)
    assert bare.synonyms("dog", "noun", senses=1)  # everything else still reads
    with pytest.raises(UsageError, match=r"has no cntlist\.rev \(the sense frequencies"):
        bare.sense_counts("dog", "noun")


@pytest.mark.parametrize(("text", "word", "pos", "bad", "reason"), [
    # the wrong-sense and wrong-register substitutes: never offered, and why each substitute fails
    ("Each element of the group is small.", "element", "noun", "factor", "sense"),  # factor's first sense differs
    ("The term is defined in the text.", "defined", "verb", "delimit", "register"),  # tagged once in this sense
    ("We met on a rainy day in the park.", "day", "noun", "solar day", "register"),  # multiword, never tagged
    ("My father works in the city.", "father", "noun", "begetter", "register"),  # never tagged
    ("She visits them once a week.", "week", "noun", "hebdomad", "register"),  # never tagged
    ("Find the total of the bill.", "total", "noun", "totality", "sense"),
])
def test_the_known_bad_substitutes_are_never_offered(wn: WordNet, text: str, word: str, pos: str, bad: str,
                                                     reason: str) -> None:
    offered = " ".join(_offered(text, wn).get(word, []))
    assert bad not in offered and bad[:5] not in offered  # neither the lemma nor an inflected form
    base = wn.base_forms(word, pos)[0]
    entry = wn.entry(base, pos)
    assert entry is not None
    assert _substitute_reason(bad, entry.offsets[0], pos, word, base, wn) == reason


def test_ambiguous_words_are_left_alone(wn: WordNet) -> None:
    # define: first sense 20 of 44 tags; day: 169 of 349; find: 159 of 545 (find -> happen, chance, bump)
    for word, pos in (("define", "verb"), ("day", "noun"), ("find", "verb")):
        _, cands = _synonym_options(word, pos, wn)
        assert cands and all(reason == "sense" for _, reason in cands), (word, cands)
    # week: 103 of 107 tags, a clear reading; a good substitute stays (jump -> leap: leap's own first sense)
    _, cands = _synonym_options("jumps", "verb", wn)
    assert ("leaps", "") in cands


def test_answer_cues_and_frame_words_are_never_replaced(wn: WordNet) -> None:
    text = "Question: Which gas do plants absorb?\nAnswer:"
    assert "Answer" not in _offered(text, wn) and "Question" not in _offered(text, wn)
    # the word level's own cue filter, or the protected spans before it (which now cover "Answer:" as a cue)
    assert _drops(text, wn)["cue"] > 0 or "Answer:" in protected_strings(text)
    assert "answer" not in _offered("Please answer the following question carefully.", wn)
    assert "Sentence" not in _offered("Sentence: The cat sat.", wn)  # any label before a colon


def test_concept_lists_are_payload(wn: WordNet) -> None:
    concepts = "coin, trick, direct, compete, pit, meal, carry, cowboy, station, throw"
    assert _offered(concepts, wn) == {}
    assert _drops(concepts, wn)["payload"] > 0 or concepts in protected_strings(concepts)  # or a protected span
    assert _offered("Concepts: dog, frisbee, catch, throw", wn) == {}
    # a sentence with commas is no list
    assert _offered("Calculate the total amount, then buy the cheapest item, and report it.", wn)


def test_code_words_keep_their_form(wn: WordNet) -> None:
    # import -> importation and factorize -> factorise: the concordance never tags them in that sense
    assert _offered("Write a function to factorize a number.", wn).get("factorize") is None
    assert "importation" not in _offered("The import of goods rose.", wn).get("import", [])


@pytest.mark.parametrize(("sentence", "word", "tag"), [
    ("he will answer the call", "answer", "verb"),
    ("the answer is here", "answer", "noun"),
    ("write a letter", "write", "verb"),
    ("a quick brown fox", "quick", "adj"),
    ("a quick brown fox", "fox", "noun"),
    ("she was running fast", "running", "verb"),
    ("three crossword puzzles", "puzzles", None),  # noun or verb after a noun: undecided
    ("they left quickly", "quickly", "adv"),
    ("by using the tool", "using", "verb"),
])
def test_tagger(wn: WordNet, sentence: str, word: str, tag: str | None) -> None:
    words: list[str | None] = list(sentence.split())
    tags = tag_words(words, [i == 0 for i in range(len(words))], wn)
    found = tags[words.index(word)]
    assert found is not None and found.tag == tag, found


def test_tagger_reads_numbers_and_breaks(wn: WordNet) -> None:
    tags = tag_words([NUMBER, "times", None, "jumps"], [False] * 4, wn)
    assert tags[0] is not None and tags[0].tag == "num"
    assert tags[1] is not None and tags[1].tag == "noun"  # after a number: a noun, not the verb "to time"
    assert tags[2] is None


def test_pos_filter_drops_the_other_parts_of_speech(wn: WordNet) -> None:
    drops = _drops("He will answer the call tomorrow.", wn)
    assert drops["pos"] > 0  # call: the verb senses after "the" are dropped


def test_word_level_counts_every_reason(shared_data: Path, wn: WordNet) -> None:
    _, texts = real_queries(shared_data)
    level = WordLevel()
    level.candidates(texts[:200], 3, [np.random.default_rng(i) for i in range(200)])
    counts = level.counts
    assert counts["substitutes"] == counts["substitutes_kept"] + sum(
        counts[f"substitutes_dropped_{r}"] for r in DROP_REASONS)
    for reason in ("pos", "sense", "register", "form"):
        assert counts[f"substitutes_dropped_{reason}"] > 0, reason
    assert 0 < counts["substitutes_kept"] < counts["substitutes"] / 2


# ------------------------------------------------------------------------------------------------ similarity


def test_similarity_tfidf_by_hand() -> None:
    sim = Similarity("tfidf", ["the cat sat on the mat", "a dog ran in the park", "stocks fell sharply today"])
    # by hand: the cosine is on the sparse tf-idf rows (no SVD), so the identical text scores exactly 1
    assert sim.name == "tfidf" and sim.threshold == THRESHOLDS["tfidf"]
    cos = sim.cosines(["the cat sat on the mat"] * 3,
                      ["the cat sat on the mat", "The cat sat on the mat!", "stocks fell sharply today"])
    assert cos[0] == pytest.approx(1.0) and cos[1] == pytest.approx(1.0)  # tf-idf lower-cases, drops punctuation
    assert cos[2] < 0.5
    with pytest.raises(UsageError, match="threshold must be a cosine"):
        Similarity("tfidf", ["a b"], threshold=2.0)
    with pytest.raises(UsageError, match="needs texts to fit on"):
        Similarity("tfidf", [])


def test_every_variant_carries_its_similarity_and_the_word_level_its_threshold(wn: WordNet) -> None:
    texts = ["The quick brown fox jumps over the lazy dog near the river bank.",
             "Calculate the total amount she had paid for the streaming service by the end of the year.",
             "What is the capital city of France?"]
    ids = ["a", "b", "c"]
    ps = perturb(ids, texts, ["character", "word"], 3, seed=1, similarity="tfidf")
    assert ps.variants and all(v.similarity is not None and -1 <= v.similarity <= 1 and v.encoder == "tfidf"
                               for v in ps.variants)
    assert ps.settings["word"]["min_similarity"] == THRESHOLDS["tfidf"]
    assert ps.settings["character"]["min_similarity"] is None  # recorded, not filtered
    assert all(v.similarity is not None and v.similarity >= THRESHOLDS["tfidf"] for v in ps.variants
               if v.level == "word")
    # a bar no variant reaches drops every word candidate, and says how many
    strict = perturb(ids, texts, ["word"], 3, seed=1, similarity=Similarity("tfidf", texts, threshold=1.0))
    exact = [v for v in strict.variants if v.similarity is not None and v.similarity < 1.0]
    assert not exact and strict.stats["word"]["below_similarity"] > 0
    loose = perturb(ids, texts, ["word"], 3, seed=1, similarity=Similarity("tfidf", texts, threshold=-1.0))
    assert loose.stats["word"]["below_similarity"] == 0
    assert len(loose.variants) >= len(ps.for_queries(ids).variants) - sum(v.level != "word" for v in ps.variants)


def test_variants_files_keep_the_similarity(tmp_path: Path) -> None:
    path = tmp_path / "v.jsonl"
    write_variants(path, [Variant("q1", "word", 0, "a text", 0.9312, "minilm"), Variant("q1", "word", 1, "b")])
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert rows[0] == {"query_id": "q1", "level": "word", "variant": 0, "text": "a text", "similarity": 0.9312,
                       "encoder": "minilm"}
    assert "similarity" not in rows[1]
    back = read_variants(path)
    assert back.variants[0].similarity == 0.9312 and back.variants[0].encoder == "minilm"
    path.write_text('{"query_id": "q", "level": "word", "text": "t", "similarity": 1.5}\n')
    with pytest.raises(DataError, match=r"v\.jsonl, row 1, field 'similarity': similarity must be a cosine"):
        read_variants(path)
