"""The offline WordNet 3.0 reader (SPEC 3, word level): the wndb format, synonyms, morphy, re-inflection."""

from __future__ import annotations

from pathlib import Path

import pytest

from routerlab.errors import UsageError
from routerlab.perturb import wordnet
from routerlab.perturb.wordnet import WordNet
from tests.perturb import require_wordnet

LICENCE = "  1 This software and database is being provided to you, the LICENSEE, by  \n" \
          "  2 Princeton University under the following license.  \n"


@pytest.fixture(scope="module")
def wn() -> WordNet:
    return wordnet.load(require_wordnet())


def _tiny_wordnet(root: Path) -> Path:
    """A hand-made WordNet in wndb format: a licence header, byte offsets, a hex word count (0a = 10 lemmas), an
    adjective marker and an exception list."""
    noun_lines = ["00000000 03 n 02 cat 0 true_cat 0 000 | feline", "x 01 n 0a " + " ".join(
        f"w{i} 0" for i in range(10)) + " 000 | ten words"]
    data = LICENCE
    offsets = []
    for line in noun_lines:
        offsets.append(len(data.encode()))
        body = line.split(" ", 1)[1]
        data += f"{len(data.encode()):08d} {body}  \n"
    (root / "data.noun").write_text(data, encoding="utf-8")
    (root / "index.noun").write_text(
        LICENCE + f"cat n 2 1 @ 2 1 {offsets[0]:08d} {offsets[1]:08d}  \n"
                  f"w3 n 1 0 1 0 {offsets[1]:08d}  \n", encoding="utf-8")
    adj = LICENCE
    adj_offset = len(adj.encode())
    adj += f"{adj_offset:08d} 00 s 02 handy 0 ready_to_hand(p) 0 000 | easy to reach  \n"
    (root / "data.adj").write_text(adj, encoding="utf-8")
    (root / "index.adj").write_text(LICENCE + f"handy a 1 0 1 0 {adj_offset:08d}  \n", encoding="utf-8")
    for pos in ("verb", "adv"):
        (root / f"data.{pos}").write_text(LICENCE, encoding="utf-8")
        (root / f"index.{pos}").write_text(LICENCE, encoding="utf-8")
    (root / "noun.exc").write_text("kine cat\n", encoding="utf-8")
    return root


def test_reads_the_wndb_format_by_byte_offset(tmp_path: Path) -> None:
    tiny = WordNet(_tiny_wordnet(tmp_path))
    entry = tiny.entry("cat", "noun")
    assert entry is not None and entry.tagsense_cnt == 1 and len(entry.offsets) == 2
    assert tiny.synset_lemmas(entry.offsets[1], "noun") == tuple(f"w{i}" for i in range(10))  # w_cnt 0a is hex
    assert tiny.synonyms("cat", "noun", senses=1) == ["true cat"]
    assert tiny.synonyms("cats", "noun", senses=2) == ["true cat"] + [f"w{i}" for i in range(10)]
    assert tiny.synonyms("handy", "adj") == ["ready to hand"]  # the (p) marker is dropped
    assert tiny.base_forms("kine", "noun") == ["cat"]
    assert tiny.irregular_forms("cat", "noun") == ["kine"]
    assert tiny.entry("licence", "noun") is None


def test_missing_wordnet_is_a_usage_error_naming_the_directory(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERLAB_WORDNET", str(tmp_path / "nowhere"))
    assert wordnet.wordnet_dir() == tmp_path / "nowhere"
    with pytest.raises(UsageError, match="WordNet 3.0 not found at .*nowhere: install Debian's wordnet-base "
                                         r"\(apt-get install wordnet-base\) or set ROUTERLAB_WORDNET"):
        wordnet.load()


def test_env_var_selects_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERLAB_WORDNET", str(_tiny_wordnet(tmp_path)))
    assert wordnet.synonyms("cat", "noun", senses=1) == ["true cat"]
    assert wordnet.load() is wordnet.load()  # loaded once per process and directory


def test_synonyms_most_frequent_sense_first(wn: WordNet) -> None:
    # data.noun 02084071: "dog domestic_dog Canis_familiaris"; data.verb's first sense of jump: jump leap bound spring
    assert wn.synonyms("dog", "noun", senses=1) == ["domestic dog", "Canis familiaris"]
    assert wn.synonyms("jumps", "verb", senses=1) == ["leap", "bound", "spring"]
    assert "dog" not in wn.synonyms("dog", "noun", senses=7)
    assert wn.synonyms("qwertyuiop", "noun") == []


def test_base_forms_exceptions_then_rules(wn: WordNet) -> None:
    assert wn.base_forms("went", "verb") == ["go"]
    assert wn.base_forms("geese", "noun") == ["goose"]
    assert wn.base_forms("churches", "noun") == ["church"]
    assert wn.base_forms("happier", "adj") == ["happy"]
    assert wn.base_forms("running", "verb") == ["run"]
    assert wn.base_forms("jumped", "verb") == ["jump"]
    assert wn.base_forms("found", "verb") == ["found", "find"]  # the lemma itself first, then the exception
    with pytest.raises(UsageError, match="unknown part of speech"):
        wn.base_forms("dog", "pronoun")


@pytest.mark.parametrize(("base", "pos", "form", "expected"), [
    ("stop", "verb", "ed", "stopped"),       # doubling listed in verb.exc
    ("visit", "verb", "ed", "visited"),
    ("make", "verb", "ing", "making"),
    ("die", "verb", "ing", "dying"),
    ("see", "verb", "ing", "seeing"),
    ("carry", "verb", "s", "carries"),
    ("go", "verb", "ed", None),              # went or gone: not certain
    ("give up", "verb", "ing", "giving up"),
    ("large", "adj", "est", "largest"),
    ("happy", "adj", "er", "happier"),
    ("good", "adj", "er", "better"),
    ("beautiful", "adj", "er", None),        # more beautiful, not beautifuler
    ("church", "noun", "plural", "churches"),
    ("city", "noun", "plural", "cities"),
    ("goose", "noun", "plural", "geese"),
    ("potato", "noun", "plural", "potatoes"),
    ("photo", "noun", "plural", None),       # photos, not photoes: -o is not certain
    ("unit of measurement", "noun", "plural", "units of measurement"),
    ("domestic dog", "noun", "plural", "domestic dogs"),
    ("dog", "noun", "base", "dog"),
])
def test_inflect(wn: WordNet, base: str, pos: str, form: str, expected: str | None) -> None:
    assert wn.inflect(base, pos, form) == expected


def test_may_be_a_name(wn: WordNet) -> None:
    assert wn.may_be_a_name("John") and wn.may_be_a_name("paris")
    assert not wn.may_be_a_name("tadpoles") and not wn.may_be_a_name("write")


def test_form_of_round_trips(wn: WordNet) -> None:
    assert wn.form_of("jumped", "jump", "verb") == "ed"
    assert wn.form_of("jumping", "jump", "verb") == "ing"
    assert wn.form_of("jumps", "jump", "verb") == "s"
    assert wn.form_of("dogs", "dog", "noun") == "plural"
    assert wn.form_of("bigger", "big", "adj") == "er"
    assert wn.form_of("went", "go", "verb") is None
    with pytest.raises(UsageError, match="has no form"):
        wn.inflect("dog", "noun", "ing")
