"""The word level (SPEC 3; hse paper sec. 5.1, appendix 11): WordNet synonyms for a few content words, and
function-word edits, never inside a protected span.

A variant makes k edits, k drawn uniformly from 1..k_max with k_max = 1 below 4 editable content words, 2 below
8, else 3 (so at least half of a query's content words survive once it has 6 or more). An edit is one of:

* **synonym**: a content word (letters only, at least 3, not in :data:`STOP_WORDS`, lower case or capitalised at the
  start of a sentence and not possibly a name there: John, Paris) is replaced by another lemma of its most frequent
  WordNet sense, re-inflected to the original's form (plural, -s, -ed, -ing, -er, -est; :mod:`routerlab.perturb.
  wordnet` skips a synonym whose form is not certain), when the substitute passes every filter, checked in the
  order of :data:`DROP_REASONS` and counted under the first it fails: ``cue`` (the word names the task's frame,
  :data:`CUE_WORDS`, or is a label before a colon: ``Answer:``), ``payload`` (the word is in a bare comma list:
  a CommonGen concept list), ``pos`` (the substitute is of another part of speech than the word's in its sentence,
  tagged by :mod:`routerlab.perturb.postag`, or the tagger cannot tell), ``form`` (two possible bases, a form
  that cannot be re-made, or a noun substitute in -s: works, means), ``sense`` (the word's first sense is tagged
  fewer than :data:`MIN_SENSE_COUNT` times or holds less than :data:`MIN_SENSE_SHARE` of its tags in WordNet's
  concordance, or the synset is not the
  substitute's own most frequent sense: element -> factor), ``shape`` (capitals, digits, symbols, lone letters,
  abbreviations: diameter -> diam) and ``register`` (multiword or hyphenated, tagged fewer than
  :data:`MIN_SUBSTITUTE_COUNT` times in this sense, or usage-labelled: solar day, hebdomad, begetter). A capitalised
  first letter is kept.
* **function**: contractions both ways (:data:`CONTRACTIONS`; ``X is``/``X are``/``I am`` contract only before
  another word, not at a clause end), ``please`` put before or taken from a sentence that starts with an
  imperative verb (:data:`IMPERATIVES`), ``the`` dropped before a plural noun (not after ``of``, ``all``,
  ``both``, ``half``), and ``each`` <-> ``every`` (not before ``other`` or ``of``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from routerlab.perturb.base import Perturber, register_level
from routerlab.perturb.character import unprotected_ranges
from routerlab.perturb.postag import NUMBER, tag_words
from routerlab.perturb.wordnet import WordNet, load


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


NUMBER_WORDS: frozenset[str] = _word_set("""
zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen
eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million billion trillion
first second third fourth fifth sixth seventh eighth ninth tenth half twice thrice once dozen double triple
""")
"""Number words: never replaced (they carry the answer like digits do); a word after one is a noun or adjective."""

TECHNICAL_TERMS: frozenset[str] = _word_set("""
array arrays boolean dict dictionary dictionaries float function functions integer integers key keys list lists
map number numbers return returns set sets string strings tuple tuples value values
""")
"""Words with a technical meaning in code and mathematics that a WordNet synonym would change (string -> twine,
function -> map, set -> put): never replaced."""

FUNCTION_WORDS: frozenset[str] = _word_set("""
a about above after again against all also am an and any are aren't as at be because been before being below
between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each every
few for from further had hadn't has hasn't have haven't having he he's her here here's hers herself him himself
his how how's i i'm if in into is isn't it it's its itself let's me more most must mustn't my myself no nor not
of off on once one only or other ought our ours ourselves out over own same shall she she's should shouldn't so
some such than that that's the their theirs them themselves then there there's these they they're this those
through to too under until up upon very was wasn't we we're were weren't what what's when where where's which
while who who's whom whose why will with won't would wouldn't you you're your yours yourself yourselves
please yes via per within without inside outside among across along around behind beyond toward towards onto
throughout since though although unless whether however thus therefore also just even still yet
following
""")
"""Articles, pronouns, auxiliaries, prepositions, conjunctions, wh-words and their contractions, ``please`` and
``following`` (multiple-choice frames): what the syntax rules treat as grammar rather than content."""

STOP_WORDS: frozenset[str] = FUNCTION_WORDS | NUMBER_WORDS | TECHNICAL_TERMS
"""Words never replaced by a synonym, and left out of the bag of content words the tests compare (an explicit
list: articles, pronouns, auxiliaries, prepositions, conjunctions, wh-words and their contractions, ``following``
(multiple-choice frames), the :data:`NUMBER_WORDS` and the :data:`TECHNICAL_TERMS`)."""

CONTRACTIONS: tuple[tuple[str, str], ...] = (
    ("what is", "what's"), ("that is", "that's"), ("it is", "it's"), ("there is", "there's"),
    ("who is", "who's"), ("where is", "where's"), ("how is", "how's"), ("i am", "I'm"), ("you are", "you're"),
    ("we are", "we're"), ("they are", "they're"), ("let us", "let's"),
    ("do not", "don't"), ("does not", "doesn't"), ("did not", "didn't"), ("is not", "isn't"),
    ("are not", "aren't"), ("was not", "wasn't"), ("were not", "weren't"), ("cannot", "can't"),
    ("will not", "won't"), ("would not", "wouldn't"), ("should not", "shouldn't"), ("could not", "couldn't"),
    ("have not", "haven't"), ("has not", "hasn't"),
)
"""Full form and contraction, replaced both ways (the first eleven contract only before another word)."""
_CONTRACT_BEFORE_WORD = 12

IMPERATIVES: frozenset[str] = _word_set("""
answer calculate choose classify complete compute convert create define describe determine estimate evaluate
explain find generate give identify implement list name predict read return select show simplify solve state
summarize tell translate write
""")
"""Verbs that start an instruction; ``please`` is put before (or taken from) a sentence starting with one."""

DETERMINERS = _word_set("the a an this that these those my your his her its our their each every some any no another")
CUE_WORDS: frozenset[str] = _word_set("""
answer answers question questions option options choice choices solution solutions passage context hint hints
example examples input inputs output outputs premise hypothesis statement statements task instruction instructions
scenario scenarios sentence sentences concept concepts query response
""")
"""Words that name the parts of the task's frame (``Answer:``, "the following options", "the passage"): never
replaced, whatever WordNet offers (answer -> reply, question -> inquiry)."""
MIN_SENSE_COUNT = 3
"""The original's first sense must be tagged at least this often in WordNet's concordance (a word never tagged,
factorize, has no reading to keep)."""
MIN_SENSE_SHARE = 0.5
"""... and hold at least this share of the word's tags in its part of speech (find: 159 of 545, too ambiguous)."""
MIN_SUBSTITUTE_COUNT = 2
"""A substitute must be tagged at least this often in this very sense (hebdomad, begetter, solar day: 0)."""
DROP_REASONS: tuple[str, ...] = ("cue", "payload", "pos", "form", "sense", "shape", "register")
"""Why a synonym candidate is left out, in the order checked (module docstring)."""
_LABEL_AFTER = re.compile(r"[ \t]*:")
_NO_ARTICLE_DROP_AFTER = frozenset(("of", "all", "both", "half"))
WORD_PATTERN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
_SYNONYM_SHAPE = re.compile(r"[a-z]+(?:[ -][a-z]+){0,2}")
_SENTENCE_START = re.compile(r"(?:^|[.?!:\n])[\s\"'(]*$")


@dataclass(frozen=True)
class WordEdit:
    """One edit of a word variant: ``text[start:end]`` (== ``old``) becomes ``new``. ``kind`` is ``synonym``
    (then ``pos`` and ``base``, the original's WordNet lemma, are set) or ``function``."""

    start: int
    end: int
    old: str
    new: str
    kind: str
    pos: str | None = None
    base: str | None = None


def content_words(text: str) -> list[str]:
    """The lower-cased words of ``text`` outside protected spans that are not stop words (punctuation dropped):
    the bag the word and syntax levels are checked against."""
    out: list[str] = []
    for s, e in unprotected_ranges(text):
        out.extend(w for w in (m.group().lower() for m in WORD_PATTERN.finditer(text[s:e])) if w not in STOP_WORDS)
    return out


def _match_case(original: str, new: str) -> str:
    return new[:1].upper() + new[1:] if original[:1].isupper() else new


def _at_sentence_start(text: str, start: int) -> bool:
    return _SENTENCE_START.search(text[max(0, start - 40):start]) is not None


def _sense_ok(counts: Sequence[int]) -> bool:
    """The word's first sense is its reading: tagged at least :data:`MIN_SENSE_COUNT` times and at least
    :data:`MIN_SENSE_SHARE` of the word's tags in that part of speech."""
    return bool(counts) and counts[0] >= MIN_SENSE_COUNT and counts[0] >= MIN_SENSE_SHARE * sum(counts)


def _substitute_reason(syn: str, offset: int, pos: str, lower: str, base: str, wn: WordNet) -> str:
    """Why the lemma ``syn`` of the synset at ``offset`` is no substitute for the word (module docstring), or ""."""
    if not _SYNONYM_SHAPE.fullmatch(syn) or any(len(t) == 1 and t not in "ai" for t in syn.split()):
        return "shape"  # a name, a symbol, a lone letter (vitamin a: a protected span)
    if len(syn) < 3 or lower.startswith(syn) or base.startswith(syn):
        return "shape"  # an abbreviation (diameter -> diam, kilometer -> km)
    entry = wn.entry(syn, pos)
    counts = wn.sense_counts(syn, pos)
    if entry is None or offset not in entry.offsets:
        return "sense"
    here = counts[entry.offsets.index(offset)]
    if here < max(counts):
        return "sense"  # a reader takes the substitute in its own usual sense (element -> factor)
    if " " in syn or "-" in syn or here < MIN_SUBSTITUTE_COUNT:
        return "register"  # multiword or rare (day -> solar day, week -> hebdomad, father -> begetter)
    labelled = wn.usage_labelled(offset, pos)
    if labelled and (0 in labelled or wn.synset_lemmas(offset, pos).index(syn) + 1 in labelled):
        return "register"  # slang, colloquialism, archaism, trade name
    return ""


@lru_cache(maxsize=1 << 16)
def _synonym_options(lower: str, pos: str, wn: WordNet) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """The base of the lower-cased ``lower`` as ``pos`` and every lemma of its first WordNet sense, each as
    (replacement inflected to the word's form, "") or (lemma, the reason it is dropped: :data:`DROP_REASONS`);
    cached, as the same words recur across queries."""
    bases = wn.base_forms(lower, pos)
    if not bases:
        return None, ()
    base = bases[0]
    entry = wn.entry(base, pos)
    assert entry is not None
    offset = entry.offsets[0]
    own = {lower, base.replace("_", " ")}
    lemmas = [lemma for lemma in wn.synset_lemmas(offset, pos) if lemma.lower() not in own]
    if len(bases) != 1:
        return base, tuple((lemma, "form") for lemma in lemmas)  # found: find or found?
    form = wn.form_of(lower, base, pos)
    sense_ok = _sense_ok(wn.sense_counts(base, pos))
    out: list[tuple[str, str]] = []
    made_seen: set[str] = set()
    for lemma in lemmas:
        reason = "form" if form is None else "sense" if not sense_ok else \
            _substitute_reason(lemma, offset, pos, lower, base, wn)
        made = None
        if not reason and pos == "noun" and lemma.endswith("s") and not lemma.endswith(("ss", "us", "is")):
            reason = "form"  # a plural-only noun (plant -> works: "workses", "a works") has no certain number
        if not reason:
            assert form is not None
            made = wn.inflect(lemma, pos, form)
            if made is None or made == lower or made in made_seen:
                reason = "form"
        if made is not None and not reason:
            made_seen.add(made)
            out.append((made, ""))
        else:
            out.append((lemma, reason))
    return base, tuple(out)


_SHORT_OF = {full: short for full, short in CONTRACTIONS}
_FULL_OF = {short.lower(): ("I am" if full == "i am" else full) for full, short in CONTRACTIONS}
_NEEDS_NEXT_WORD = frozenset(full for full, _ in CONTRACTIONS[:_CONTRACT_BEFORE_WORD])
_CONTRACTION_RE = re.compile(
    r"\b(?:" + "|".join(sorted([r"\s+".join(f.split()) for f, _ in CONTRACTIONS]
                               + [re.escape(s) for _, s in CONTRACTIONS], key=len, reverse=True)) + r")\b",
    flags=re.IGNORECASE)
_NEXT_IS_WORD = re.compile(r"\s+[^\s.,;:?!)\]]")
_PLEASE_RE = re.compile(r"\b([Pp]lease)\s+([a-z]+)\b")
_THE_RE = re.compile(r"\b(the)\s+([a-z]+)\b", flags=re.IGNORECASE)
_EACH_RE = re.compile(r"\b(each|every)\s+(?!other\b|of\b)(?=[a-z])", flags=re.IGNORECASE)


def _function_edits(text: str, start: int, piece: str, wn: WordNet) -> list[list[WordEdit]]:
    """Every function-word edit possible in the unprotected ``piece`` found at ``start`` of ``text``."""
    found: list[list[WordEdit]] = []

    def add(s: int, e: int, new: str) -> None:
        old = text[s:e]
        found.append([WordEdit(s, e, old, _match_case(old, new), "function")])

    for m in _CONTRACTION_RE.finditer(piece):
        key = " ".join(m.group().lower().split())
        if key in _SHORT_OF:
            if key in _NEEDS_NEXT_WORD and not _NEXT_IS_WORD.match(piece, m.end()):
                continue
            add(start + m.start(), start + m.end(), _SHORT_OF[key])
        else:
            add(start + m.start(), start + m.end(), _FULL_OF[key])
    for m in _PLEASE_RE.finditer(piece):
        if m.group(2) in IMPERATIVES:
            add(start + m.start(), start + m.end(), m.group(2))
    for m in WORD_PATTERN.finditer(piece):
        word = m.group()
        s = start + m.start()
        if word[:1].isupper() and word.lower() in IMPERATIVES and _at_sentence_start(text, s):
            prev = text[max(0, s - 7):s].lower().rstrip()
            if not prev.endswith("please"):
                add(s, start + m.end(), "Please " + word.lower())
    for m in _THE_RE.finditer(piece):
        noun = m.group(2)
        if not (noun.islower() and noun.endswith("s")) or noun in STOP_WORDS:
            continue
        before = WORD_PATTERN.findall(text[max(0, start + m.start() - 30):start + m.start()])
        if before and before[-1].lower() in _NO_ARTICLE_DROP_AFTER:
            continue
        bases = wn.base_forms(noun, "noun")
        if len(bases) == 1 and bases[0] != noun:
            add(start + m.start(), start + m.end(), noun)
    for m in _EACH_RE.finditer(piece):
        swap = "every" if m.group(1).lower() == "each" else "each"
        add(start + m.start(1), start + m.end(1), swap)
    return found


def _is_cue(text: str, end: int, lower: str) -> bool:
    """A word of the task's frame (:data:`CUE_WORDS`) or a label: followed by a colon (``Answer:``, ``Concepts:``)."""
    return lower in CUE_WORDS or _LABEL_AFTER.match(text, end) is not None


def _payload_lines(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each line (or its part after a label's colon) that is a bare list: at least 3
    comma-separated items of 1-3 words, nothing else (a CommonGen concept list: the task itself)."""
    out: list[tuple[int, int]] = []
    pos = 0
    for line in text.split("\n"):
        start = pos
        pos += len(line) + 1
        body = line
        label = re.match(r"\s*[A-Za-z][A-Za-z ]{0,30}:", line)
        if label:
            start += label.end()
            body = line[label.end():]
        items = [i.strip() for i in re.split(r",|\band\b|\bor\b", body.strip().rstrip("."))]
        items = [i for i in items if i]
        if len(items) >= 3 and body.count(",") >= 2 and all(len(i.split()) <= 3 for i in items) \
                and not re.search(r"[?!;:]", body):
            out.append((start, start + len(body)))
    return out


def edit_options(text: str, wn: WordNet | None = None, drops: Counter[str] | None = None) -> list[list[WordEdit]]:
    """Every edit the word level can make in ``text``, grouped by place: a list per content word (its synonym
    replacements) and one per function-word edit. ``drops``, when given, counts the synonym candidates left out,
    by reason (:data:`DROP_REASONS`), and the kept ones under ``kept``."""
    net = wn if wn is not None else load()
    options: list[list[WordEdit]] = []
    spans: list[tuple[int, int, str] | None] = []
    tokens: list[str | None] = []
    pos_end = 0
    for start, end in unprotected_ranges(text):
        if start > pos_end or (start > 0 and not spans):  # a protected span before this piece
            gap = text[pos_end:start].rstrip()
            spans.append(None)
            tokens.append(NUMBER if gap[-1:].isdigit() else None)
        piece = text[start:end]
        options.extend(_function_edits(text, start, piece, net))
        for m in WORD_PATTERN.finditer(piece):
            spans.append((start + m.start(), start + m.end(), m.group()))
            tokens.append(m.group().lower())
        pos_end = end
    starts = [item is not None and _at_sentence_start(text, item[0]) for item in spans]
    tags = tag_words(tokens, starts, net)
    payload = _payload_lines(text)
    for i, item in enumerate(spans):
        tag = tags[i]
        if item is None or tag is None or not tag.possible:
            continue
        s, e, word = item
        lower = word.lower()
        if lower in STOP_WORDS or len(word) < 3 or not word.isalpha():
            continue
        if not (word.islower() or (word[0].isupper() and word[1:].islower() and starts[i]
                                   and not net.may_be_a_name(lower))):
            continue
        found = {pos: _synonym_options(lower, pos, net) for pos in tag.possible}
        whole = "cue" if _is_cue(text, e, lower) else "payload" if any(a <= s < b for a, b in payload) else ""
        edits: list[WordEdit] = []
        for pos, (base, cands) in found.items():
            for new, reason in cands:
                why = whole or ("pos" if pos != tag.tag else reason)
                if why:
                    if drops is not None:
                        drops[why] += 1
                    continue
                assert base is not None
                edits.append(WordEdit(s, e, word, _match_case(word, new), "synonym", pos, base))
        if drops is not None:
            drops["kept"] += len(edits)
        if edits:
            options.append(edits)
    return options


def apply_edits(text: str, edits: Sequence[WordEdit]) -> str:
    """``text`` with non-overlapping ``edits`` applied."""
    out = text
    for edit in sorted(edits, key=lambda ed: ed.start, reverse=True):
        out = out[:edit.start] + edit.new + out[edit.end:]
    return out


def max_edits(n_content: int) -> int:
    """k_max: 1 below 4 editable content words, 2 below 8, else 3 (module docstring)."""
    return 1 if n_content < 4 else 2 if n_content < 8 else 3


def draw_variant(text: str, options: Sequence[Sequence[WordEdit]],
                 rng: np.random.Generator) -> tuple[str, list[WordEdit]]:
    """One variant of ``text`` from its ``options``: k places (non-overlapping) in random order, a random
    replacement at each; returns the text and the edits made."""
    if not options:
        return text, []
    n_content = sum(1 for group in options if group[0].kind == "synonym")
    k = int(rng.integers(1, max_edits(n_content) + 1))
    chosen: list[WordEdit] = []
    for idx in rng.permutation(len(options)):
        group = options[int(idx)]
        edit = group[int(rng.integers(len(group)))]
        if any(edit.start < c.end and c.start < edit.end for c in chosen):
            continue
        chosen.append(edit)
        if len(chosen) == k:
            break
    return apply_edits(text, chosen), chosen


@register_level("word")
class WordLevel(Perturber):
    """WordNet synonyms and function-word edits (module docstring); needs WordNet 3.0 (wordnet-base)."""

    summary = "WordNet synonyms (re-inflected) and function-word edits, 1-3 per variant"
    offline = True
    similarity_filter = True
    tries_per_variant = 3

    def __init__(self, backend: Any = None, **options: Any) -> None:
        super().__init__(backend=backend, **options)
        self.wordnet = load()

    def candidates(self, texts: Sequence[str], p: int, rngs: Sequence[np.random.Generator]) -> list[list[str]]:
        out: list[list[str]] = []
        drops: Counter[str] = Counter()
        for text, rng in zip(texts, rngs, strict=True):
            options = edit_options(text, self.wordnet, drops)
            out.append([draw_variant(text, options, rng)[0] for _ in range(self.tries_per_variant * p)]
                       if options else [])
        self.counts["substitutes"] += sum(drops.values())
        self.counts["substitutes_kept"] += drops["kept"]
        for reason in DROP_REASONS:
            self.counts[f"substitutes_dropped_{reason}"] += drops[reason]
        return out

    def settings(self) -> dict[str, Any]:
        return {"wordnet": str(self.wordnet.root), "max_edits": 3, "min_sense_count": MIN_SENSE_COUNT,
                "min_sense_share": MIN_SENSE_SHARE, "min_substitute_count": MIN_SUBSTITUTE_COUNT}
