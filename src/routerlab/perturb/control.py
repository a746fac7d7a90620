"""The control level (SPEC 3; hse-paper-review.json's falsifier): edits that CHANGE what a question asks, so that
rho's invariance check has something to be compared with. Opt-in (``--levels ...,control``; never in ``all``).

rho assumes that a meaning-preserving variant keeps its query's optimal actor. The review's test of that assumption
needs a falsifier: if a level that changes the meaning on purpose changes the optimal actor no more often than the
meaning-preserving levels do, the check cannot tell a changed question from a reworded one. Every variant of this
level makes exactly one edit, drawn (seeded, per query) uniformly among the kinds that apply to the text, then
uniformly among that kind's places:

* **number**: a plain quantity in the prose (``8``, ``$2.00``, ``1,500``, ``25%``, ``12kg``; not inside code, a
  formula or a URL, not on a line that reads as code (an assert, a doctest or its expected output, a call, a
  comparison, an indented line of a code block or docstring, a bracketed literal), not an ordinal, not a list
  marker at the start of a line) gets another value: plus or minus 1
  to 9, the same decimals and thousands separators, never negative.
* **negate**: in the question (the last sentence with a question mark, else the last sentence), the first auxiliary
  verb is negated or un-negated (``is`` <-> ``isn't``, ``does`` <-> ``doesn't``, ``might`` <-> ``might not``,
  ``is not`` -> ``is``; ``has``/``have``/``had`` only before a participle), or a polarity word is flipped
  (:data:`POLARITY`: most <-> least, increase <-> decrease, always <-> never, true <-> false, ...).
* **entity**: a noun of the question is swapped for a sister term in WordNet (another hyponym of its most frequent
  sense's hypernym: France -> Germany, planet -> star, copper -> iron), a single word, re-inflected to the
  original's number; a common noun's substitute must be tagged in WordNet's concordance (no rare words).
  Generic nouns (:data:`GENERIC_NOUNS`: following, kind, way, ...), acronyms, prepositions and other function
  words, words more often tagged as verbs or adjectives, and capitalised words inside a sentence that WordNet does
  not know as a name (a title's words) are never swapped. Needs WordNet 3.0
  (``wordnet-base``); without it the level makes only numbers and negations and says so in its settings.

Protected spans (code, option labels, formulae, URLs) and lines that read as code are never edited, except the one
number a ``number`` edit changes (so a code-completion prompt, all code, gets no variant): :meth:`ControlLevel.keep`
checks every other protected span. The level's class sets ``meaning_preserving`` to False; variants files mark its
rows ``"meaning_changing": true``; the robustness protocol measures rho and the invariance check at this level but
leaves it out of every summary over levels (rho, kappa_rho, rho per actor, the invariance check as a whole) and
compares its changed share with every meaning-preserving level's.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from routerlab.errors import UsageError
from routerlab.perturb.base import Perturber, keep_variants, register_level
from routerlab.perturb.character import unprotected_ranges
from routerlab.perturb.spans import protected_spans, protected_strings

LEVEL = "control"
MEANING_KEY = "meaning_changing"
"""The key that marks a meaning-changing variant in a variants file, and a level's setting saying so."""
EDIT_KINDS: tuple[str, ...] = ("number", "negate", "entity")

_QUANTITY = re.compile(r"^(?P<pre>[$€£]?)(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<dec>\.\d+)?(?P<post>%|[A-Za-z]{1,3})?$")
_ORDINAL = frozenset({"st", "nd", "rd", "th"})
_SENTENCE = re.compile(r"[^.?!\n]+[.?!]*")
_WORD = re.compile(r"[A-Za-z][A-Za-z']*")

NEGATABLE: dict[str, str] = {
    "is": "isn't", "are": "aren't", "was": "wasn't", "were": "weren't", "can": "can't", "could": "couldn't",
    "will": "won't", "would": "wouldn't", "should": "shouldn't", "does": "doesn't", "do": "don't", "did": "didn't",
    "has": "hasn't", "have": "haven't", "had": "hadn't", "must": "mustn't", "may": "may not", "might": "might not",
    "shall": "shall not",
}
"""An auxiliary and its negation; the reverse (``isn't`` -> ``is``, ``cannot`` -> ``can``) un-negates."""
_UNNEGATE: dict[str, str] = {neg: aux for aux, neg in NEGATABLE.items() if " " not in neg}
_UNNEGATE.update({"cannot": "can", "ain't": "is"})
_PERFECT = frozenset({"has", "have", "had"})


def _words(block: str) -> list[str]:
    return block.split()


_CODE_LINE = re.compile(r"^\s*(assert\b|>>>|def\s|return\b|import\b|from\s+\S+\s+import\b)|==|!=|<=|>=|\w\(")
_FUNCTION_WORDS: frozenset[str] = frozenset(_words("""
about above across after against along among around at before behind below beneath beside between beyond but by
despite down during except for from in inside into like near of off on onto out outside over past per since than
through throughout till to toward towards under until up upon via with within without well still back even just
also only very much many few several some any each every all both either neither such what which who whom whose
where when why how this that these those there here then thus
"""))

POLARITY: dict[str, str] = {
    "most": "least", "least": "most", "more": "less", "less": "more", "best": "worst", "worst": "best",
    "largest": "smallest", "smallest": "largest", "larger": "smaller", "smaller": "larger", "biggest": "smallest",
    "highest": "lowest", "lowest": "highest", "higher": "lower", "lower": "higher", "increase": "decrease",
    "decrease": "increase", "increases": "decreases", "decreases": "increases", "increased": "decreased",
    "decreased": "increased", "always": "never", "never": "always", "before": "after", "after": "before",
    "true": "false", "false": "true", "correct": "incorrect", "incorrect": "correct", "above": "below",
    "below": "above", "maximum": "minimum", "minimum": "maximum", "inside": "outside", "outside": "inside",
    "hot": "cold", "cold": "hot", "fast": "slow", "slow": "fast", "faster": "slower", "slower": "faster",
}
"""Words whose opposite turns what a question asks into its contrary."""

GENERIC_NOUNS: frozenset[str] = frozenset(_words("""
following thing things way ways kind kinds type types part parts example examples answer answers question questions
statement statements option options choice choices something someone somebody anything anyone nothing one ones lot
lots number numbers amount amounts person people group groups result results reason reasons fact facts use uses
time times place places case cases form forms order word words sentence sentences text passage passages item items
"""))
"""Nouns too generic to be a question's key entity."""


@dataclass(frozen=True)
class Edit:
    """Replace ``text[start:end]`` by ``new``; ``kind`` is one of :data:`EDIT_KINDS`."""

    start: int
    end: int
    new: str
    kind: str

    def apply(self, text: str) -> str:
        return text[:self.start] + self.new + text[self.end:]


def _quantity(token: str) -> re.Match[str] | None:
    """The parts of a plain quantity token (``$2.00``, ``1,500``, ``25%``, ``12kg``), or None (ordinals, codes)."""
    m = _QUANTITY.match(token)
    if m is None:
        return None
    if (m.group("post") or "").lower() in _ORDINAL:
        return None
    digits = m.group("int").replace(",", "")
    if len(digits) > 1 and digits.startswith("0"):
        return None
    return m


def is_quantity(token: str) -> bool:
    """True for a plain quantity token, the only protected span a ``number`` edit may change."""
    return _quantity(token) is not None


def number_edits(text: str) -> list[tuple[int, int, re.Match[str]]]:
    """(start, end, parts) of every plain quantity a ``number`` edit may change: a protected span that is a whole
    quantity token, not a list marker at the start of a line (``1.`` or ``2)``)."""
    out = []
    for s, e in protected_spans(text):
        m = _quantity(text[s:e])
        if m is None:
            continue
        line_start = text.rfind("\n", 0, s) + 1
        if not text[line_start:s].strip() and text[e:e + 1] in (".", ")"):
            continue  # a numbered list's marker, not a quantity
        if _code_line(text, s):
            continue  # an assert's or a doctest's value is the task's test, not a quantity of the question
        out.append((s, e, m))
    return out


def changed_number(m: re.Match[str], rng: np.random.Generator) -> str:
    """Another value for the quantity ``m``: plus or minus 1..9 (never below 0), same decimals and separators."""
    whole = m.group("int")
    value = int(whole.replace(",", ""))
    delta = int(rng.integers(1, 10))
    new = value - delta if (rng.random() < 0.5 and value - delta >= 0) else value + delta
    digits = f"{new:,}" if "," in whole else str(new)
    return f"{m.group('pre')}{digits}{m.group('dec') or ''}{m.group('post') or ''}"


def question_span(text: str) -> tuple[int, int]:
    """(start, end) of the question of ``text``: its last sentence with a question mark, else its last sentence."""
    sentences = [(m.start(), m.end()) for m in _SENTENCE.finditer(text) if m.group().strip()]
    if not sentences:
        return 0, len(text)
    asks = [s for s in sentences if "?" in text[s[0]:s[1]]]
    start, end = (asks or sentences)[-1]
    return start + len(text[start:end]) - len(text[start:end].lstrip()), end


def _match_case(original: str, new: str) -> str:
    if original.isupper() and len(original) > 1:
        return new.upper()
    return new[:1].upper() + new[1:] if original[:1].isupper() else new


def _free_words(text: str, start: int, end: int) -> list[tuple[int, int, str]]:
    """(start, end, word) of the words of ``text[start:end]`` outside protected spans and off lines that read as
    code."""
    out: list[tuple[int, int, str]] = []
    for s, e in unprotected_ranges(text):
        lo, hi = max(s, start), min(e, end)
        if lo < hi:
            out.extend((lo + m.start(), lo + m.end(), m.group()) for m in _WORD.finditer(text[lo:hi])
                       if not _code_line(text, lo + m.start()))
    return out


def negation_edits(text: str) -> list[Edit]:
    """The negations of the question (module docstring): the first auxiliary negated or un-negated, and every
    polarity word flipped, each one :class:`Edit`."""
    start, end = question_span(text)
    words = _free_words(text, start, end)
    out: list[Edit] = []
    for i, (s, e, w) in enumerate(words):
        low = w.lower()
        following = words[i + 1] if i + 1 < len(words) else None
        if low in _UNNEGATE:
            out.append(Edit(s, e, _match_case(w, _UNNEGATE[low]), "negate"))
            break
        if low in NEGATABLE:
            if following is not None and following[2].lower() == "not" and text[e:following[0]].strip() == "":
                out.append(Edit(s, following[1], w, "negate"))  # "is not" -> "is"
                break
            if low in _PERFECT and not (following is not None and re.search(r"(ed|en|been)$", following[2])):
                continue  # "have" as a main verb ("have what in common"): not an auxiliary
            out.append(Edit(s, e, _match_case(w, NEGATABLE[low]), "negate"))
            break
    out.extend(Edit(s, e, _match_case(w, POLARITY[w.lower()]), "negate") for s, e, w in words
               if w.lower() in POLARITY)
    return out


class SisterTerms:
    """Sister terms of a noun in WordNet 3.0 (other hyponyms of its most frequent sense's hypernyms), read from the
    ``data.noun`` pointers of the directory the word level reads (:func:`routerlab.perturb.wordnet.wordnet_dir`)."""

    def __init__(self, root: Path | None = None) -> None:
        from routerlab.perturb.wordnet import load

        self.wordnet = load(root)
        self._data = (self.wordnet.root / "data.noun").read_bytes()
        self._memo: dict[str, tuple[str, ...]] = {}

    def _pointers(self, offset: int) -> tuple[tuple[str, ...], list[tuple[str, int]]]:
        """(lemmas, [(pointer symbol, target offset)]) of the noun synset at ``offset``; noun targets only."""
        end = self._data.find(b"\n", offset)
        parts = self._data[offset:end if end >= 0 else len(self._data)].decode("utf-8").split(" ")
        count = int(parts[3], 16)
        lemmas = tuple(parts[4:4 + 2 * count:2])
        at = 4 + 2 * count
        n_ptr = int(parts[at])
        ptrs = [(parts[at + 1 + 4 * k], int(parts[at + 2 + 4 * k])) for k in range(n_ptr)
                if parts[at + 3 + 4 * k] == "n"]
        return lemmas, ptrs

    def _common(self, lemma: str) -> bool:
        entry = self.wordnet.entry(lemma, "noun")
        return entry is not None and entry.tagsense_cnt > 0

    def sisters(self, base: str) -> tuple[str, ...]:
        """Single-word sister terms of ``base``'s most frequent noun sense, in WordNet's order: an instance's
        (France) other instances (Germany, Italy), a common noun's other hyponyms tagged in the concordance."""
        key = base.lower()
        if key in self._memo:
            return self._memo[key]
        entry = self.wordnet.entry(key, "noun")
        out: list[str] = []
        if entry is not None and entry.offsets:
            own, ptrs = self._pointers(entry.offsets[0])
            own_lower = {w.lower() for w in own}
            for symbol, hyper in ptrs:
                if symbol not in ("@", "@i"):
                    continue
                down = "~i" if symbol == "@i" else "~"
                for sym, target in self._pointers(hyper)[1]:
                    if sym != down or target == entry.offsets[0]:
                        continue
                    lemma = self._pointers(target)[0][0]
                    word = re.sub(r"\([a-z]+\)$", "", lemma)
                    if not word.isalpha() or word.lower() in own_lower or word in out:
                        continue
                    if symbol == "@" and not self._common(word):
                        continue
                    out.append(word)
        self._memo[key] = tuple(out)
        return self._memo[key]


def _code_line(text: str, start: int) -> bool:
    """True when the line holding ``text[start]`` reads as code: an assert, a doctest or its expected output (the
    line after ``>>>``), a call, a comparison, a line indented by 4 spaces or a tab (a code block, a docstring), a
    literal opening with a bracket."""
    lo = text.rfind("\n", 0, start) + 1
    hi = text.find("\n", start)
    line = text[lo:hi if hi >= 0 else len(text)]
    if _CODE_LINE.search(line) or line.startswith(("    ", "\t")) or line.lstrip().startswith(("[", "(", "{")):
        return True
    before = text[:max(lo - 1, 0)].rstrip("\n").rsplit("\n", 1)[-1]
    return lo > 0 and before.lstrip().startswith(">>>")


def _noun_base(word: str, wn: Any) -> tuple[str, bool] | None:
    """(singular base, plural?) of ``word`` read as a noun, or None when it is not one or is more often tagged as
    a verb, adjective or adverb. A plural that is also a lemma of its own (elements, funds) is read as the plural
    of its singular."""
    bases = wn.base_forms(word, "noun")
    if not bases:
        return None
    base = bases[1] if len(bases) > 1 and bases[0] == word and word.endswith("s") else bases[0]
    mine = wn.entry(base, "noun")
    if mine is None:
        return None
    others = [wn.entry(b, pos) for pos in ("verb", "adj", "adv") for b in wn.base_forms(word, pos)]
    if any(o is not None and o.tagsense_cnt > mine.tagsense_cnt for o in others):
        return None  # more often a verb or an adjective than a noun
    return base, base != word


def entity_edits(text: str, sisters: SisterTerms | None) -> list[Edit]:
    """Swaps of a noun of the question for a sister term (module docstring), every noun and sister one
    :class:`Edit`; none without WordNet. A capitalised word inside a sentence is swapped only when WordNet knows
    it as a name (France), not when it is part of a title (the Periodic Table of the Elements)."""
    if sisters is None:
        return []
    wn = sisters.wordnet
    start, end = question_span(text)
    out: list[Edit] = []
    for s, e, w in _free_words(text, start, end):
        low = w.lower()
        if len(low) < 3 or "'" in low or low in GENERIC_NOUNS or low in POLARITY or low in NEGATABLE \
                or low in _FUNCTION_WORDS or w.isupper():
            continue  # an acronym (DNA) is left alone too
        initial = not text[start:s].strip()
        if w[:1].isupper() and not initial and not wn.may_be_a_name(low):
            continue
        found = _noun_base(low, wn)
        if found is None:
            continue
        base, plural = found
        for sister in sisters.sisters(base):
            lower = sister.lower()
            forms = wn.base_forms(lower, "noun")
            if forms[:1] != [lower] or (len(forms) > 1 and lower.endswith("s")):
                continue  # a plural lemma (funds, times): neither a singular nor a base to pluralise
            new = wn.inflect(lower, "noun", "plural") if plural else lower
            if new is None:
                continue
            new = new[:1].upper() + new[1:] if sister[:1].isupper() else _match_case(w, new)
            out.append(Edit(s, e, new, "entity"))
    return out


def edit_options(text: str, sisters: SisterTerms | None, rng: np.random.Generator) -> dict[str, list[Edit]]:
    """Every edit the level can make in ``text``, by kind (kinds with none left out). Number edits draw their new
    value from ``rng``."""
    options: dict[str, list[Edit]] = {
        "number": [Edit(s, e, changed_number(m, rng), "number") for s, e, m in number_edits(text)],
        "negate": negation_edits(text),
        "entity": entity_edits(text, sisters),
    }
    return {k: v for k, v in options.items() if v}


def _kept_protected(text: str) -> Counter[str]:
    """The protected substrings of ``text`` other than plain quantities (which a number edit may change)."""
    return Counter({k: v for k, v in protected_strings(text).items() if not is_quantity(k)})


@register_level(LEVEL)
class ControlLevel(Perturber):
    """Meaning-changing edits, the falsifier of rho's invariance check (module docstring); opt-in."""

    summary = ("meaning-CHANGING edits, the falsifier (opt-in, never in 'all'): change a number, negate the "
               "question, swap its key entity")
    offline = True
    meaning_preserving = False
    tries_per_variant = 3

    def __init__(self, backend: Any = None, **options: Any) -> None:
        super().__init__(backend=backend, **options)
        try:
            self.sisters: SisterTerms | None = SisterTerms()
            self.missing = ""
        except (UsageError, OSError) as exc:  # WordNet absent: numbers and negations only, and said so
            self.sisters = None
            self.missing = str(exc)

    def candidates(self, texts: Sequence[str], p: int, rngs: Sequence[np.random.Generator]) -> list[list[str]]:
        out: list[list[str]] = []
        for text, rng in zip(texts, rngs, strict=True):
            options = edit_options(text, self.sisters, rng)
            kinds = sorted(options)
            cands = []
            for _ in range(self.tries_per_variant * p if kinds else 0):
                pool = options[kinds[int(rng.integers(len(kinds)))]]
                cands.append(pool[int(rng.integers(len(pool)))].apply(text))
            out.append(cands)
        return out

    def keep(self, original: str, candidates: Sequence[str], p: int | None) -> tuple[list[str], int]:
        """Up to ``p`` distinct candidates that differ from the original and keep every protected span but the
        plain quantities (a number edit changes one on purpose); also how many were rejected."""
        return keep_variants(original, candidates, p, _kept_protected)

    def settings(self) -> dict[str, Any]:
        kinds = [k for k in EDIT_KINDS if k != "entity" or self.sisters is not None]
        out: dict[str, Any] = {MEANING_KEY: True, "edits_per_variant": 1, "kinds": kinds}
        if self.sisters is not None:
            out["wordnet"] = str(self.sisters.wordnet.root)
        else:
            out["entity"] = f"not made: {self.missing}"
        return out


def changes_meaning(level: str, settings: Mapping[str, Mapping[str, Any]] | None = None) -> bool:
    """True for a meaning-changing level: a registered level whose class sets ``meaning_preserving = False`` (the
    control level), or one whose ``settings`` (a variants file's marks, a generated set's provenance) say
    ``meaning_changing``."""
    from routerlab.perturb.base import level_class, level_names

    if settings is not None and (settings.get(level) or {}).get(MEANING_KEY):
        return True
    return level in level_names() and not getattr(level_class(level), "meaning_preserving", True)
