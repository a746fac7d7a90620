"""A light part-of-speech tagger for the word level (SPEC 3): which WordNet part of speech a content word is used
as in its sentence, or None when the context does not say (the word level then leaves the word alone).

No model and no new dependency: a closed-class lexicon (determiners, pronouns, auxiliaries, modals, prepositions,
conjunctions, wh-words, number words) tags the grammar words; a content word's possible parts of speech are those
WordNet has a base form for; its lexical prior is how often each part of speech was tagged in WordNet's semantic
concordance (``cntlist.rev``, summed over senses). The first context rule that applies narrows the possible
parts of speech:

1. after a determiner, quantifier, number word, number or adjective: a noun or an adjective (an adjective when the
   next word is a content word that can be a noun, else a noun);
2. after a modal (can, will, ...), do/does/did, a subject pronoun (I, you, we, they, he, she) or ``not`` after
   one of those: a verb;
3. after ``to``: a verb or a noun (``to answer`` / ``to school``);
4. after a form of ``be``: a verb in its -ing or -ed form, else an adjective or a noun; after a form of ``have``:
   a verb in its -ed form;
5. after a preposition: a noun or an adjective, or a verb in its -ing form (``by using``);
6. at the start of a sentence, followed by a determiner, a pronoun or a number: a verb (an instruction:
   ``Write a ...``, ``Find the ...``);
7. followed by a determiner after a word that is not one: a verb (``plays a guitar``);
8. a word in -ly: an adverb.

When one part of speech is left, it is the tag. When several are, the one with the largest concordance count wins
only if it holds at least :data:`DOMINANT_SHARE` of their counts and at least :data:`MIN_EVIDENCE` tags;
otherwise the tag is None (uncertain).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from routerlab.perturb.wordnet import POS_NAMES, WordNet


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


DETERMINER = _words("the a an this that these those my your his her its our their each every some any no another "
                    "many much several few more most all both such other either neither whose")
NUMERAL = _words("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                 "sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred "
                 "thousand million billion trillion first second third fourth fifth sixth seventh eighth ninth "
                 "tenth half dozen")
SUBJECT = _words("i you we they he she")
OBJECT = _words("me him us them it you her")
MODAL = _words("can could will would shall should may might must cannot")
DO = _words("do does did don't doesn't didn't")
BE = _words("is are was were be been being am isn't aren't wasn't weren't")
HAVE = _words("has have had having hasn't haven't hadn't")
PREPOSITION = _words("of in on at by for with from into onto about above below between under over through during "
                     "without within among across along around behind beyond toward towards upon via per after "
                     "before since until against inside outside near like than")
CONJUNCTION = _words("and or but nor so yet if because although though unless while whereas whether")
WH = _words("what which who whom where when why how")
CLOSED: dict[str, str] = {
    **{w: "conj" for w in CONJUNCTION}, **{w: "wh" for w in WH}, **{w: "prep" for w in PREPOSITION},
    **{w: "num" for w in NUMERAL}, **{w: "obj" for w in OBJECT}, **{w: "subj" for w in SUBJECT},
    **{w: "det" for w in DETERMINER}, **{w: "have" for w in HAVE}, **{w: "be" for w in BE},
    **{w: "do" for w in DO}, **{w: "modal" for w in MODAL}, "to": "to", "not": "not",
}
"""Closed-class words and their tags (a word in two classes gets the later one: ``her`` a determiner)."""
NUMBER = "<number>"
"""The token standing for a protected number (``3 times``): tagged ``num``."""
DOMINANT_SHARE = 0.8
"""The concordance share one part of speech needs among those the context leaves to be chosen by frequency."""
MIN_EVIDENCE = 10
"""... and the least concordance count it needs (puzzles: 6 tags, all verbs, yet "crossword puzzles" is a noun;
left undecided)."""
_NOMINAL = ("noun", "adj")


@dataclass(frozen=True)
class Tag:
    """A token's tag: a closed class (``det``, ``be``, ...), a WordNet part of speech, or None (uncertain);
    ``possible`` are the parts of speech WordNet has for the word; ``rule`` the context rule that decided."""

    word: str
    tag: str | None
    possible: tuple[str, ...] = ()
    rule: str = ""


def pos_counts(word: str, wn: WordNet) -> dict[str, int]:
    """Per part of speech WordNet has ``word`` in: the concordance tag count of its first base form's senses."""
    out: dict[str, int] = {}
    for pos in POS_NAMES:
        bases = wn.base_forms(word, pos)
        if bases:
            out[pos] = sum(wn.sense_counts(bases[0], pos))
    return out


def _verb_form(word: str, forms: tuple[str, ...], wn: WordNet) -> bool:
    """Is ``word`` the -ing or -ed form (those in ``forms``) of a WordNet verb? An irregular past (written, made)
    counts as -ed."""
    for base in wn.base_forms(word, "verb"):
        if base == word:
            continue
        form = wn.form_of(word, base, "verb")
        if form in forms:
            return True
        if form is None and "ed" in forms and not word.endswith("s") and word in wn.irregular_forms(base, "verb"):
            return True
    return False


def _by_frequency(allowed: Sequence[str], counts: dict[str, int]) -> str | None:
    """The one part of speech left, or the dominant one by concordance count (:data:`DOMINANT_SHARE`)."""
    if len(allowed) == 1:
        return allowed[0]
    if not allowed:
        return None
    total = sum(counts.get(p, 0) for p in allowed)
    best = max(allowed, key=lambda p: counts.get(p, 0))
    top = counts.get(best, 0)
    return best if top >= MIN_EVIDENCE and top >= DOMINANT_SHARE * total else None


def tag_words(words: Sequence[str | None], sentence_start: Sequence[bool], wn: WordNet) -> list[Tag | None]:
    """Tags of ``words`` (lower-cased tokens; None stands for a protected span that is not a number and breaks the
    context; :data:`NUMBER` for a protected number); ``sentence_start[i]`` says word i opens a sentence. Returns a
    :class:`Tag` per word (None for a None token)."""
    tags: list[Tag | None] = []
    for i, word in enumerate(words):
        if word is None:
            tags.append(None)
            continue
        if word == NUMBER:
            tags.append(Tag(word, "num"))
            continue
        closed = CLOSED.get(word)
        if closed is not None:
            tags.append(Tag(word, closed))
            continue
        counts = pos_counts(word, wn)
        possible = tuple(counts)
        if not possible:
            tags.append(Tag(word, None, (), "unknown"))
            continue
        prev = tags[i - 1] if i > 0 else None
        prev_tag = prev.tag if prev is not None else None
        before = tags[i - 2] if i > 1 else None
        nxt = words[i + 1] if i + 1 < len(words) else None
        nxt_closed = CLOSED.get(nxt) if nxt is not None else None
        nxt_noun = nxt is not None and nxt != NUMBER and nxt_closed is None and bool(wn.base_forms(nxt, "noun"))
        allowed, rule = _context(word, possible, prev_tag, before.tag if before is not None else None,
                                 sentence_start[i], nxt, nxt_closed, nxt_noun, wn)
        tags.append(Tag(word, _by_frequency(allowed, counts), possible, rule))
    return tags


def _context(word: str, possible: tuple[str, ...], prev: str | None, before: str | None, start: bool,
             nxt: str | None, nxt_closed: str | None, nxt_noun: bool, wn: WordNet) -> tuple[list[str], str]:
    """The parts of speech the first applicable context rule (module docstring) leaves, and its name."""

    def keep(*names: str) -> list[str]:
        return [p for p in possible if p in names]

    if prev in ("det", "num", "adj"):
        nominal = keep(*_NOMINAL)
        if "adj" in nominal and "noun" in nominal:
            return (["adj"] if nxt_noun else ["noun"]), "after a determiner or adjective"
        return nominal, "after a determiner or adjective"
    if prev in ("modal", "do", "subj") or (prev == "not" and before in ("modal", "do")):
        return keep("verb"), "after a modal or subject"
    if prev == "to":
        return keep("verb", "noun"), "after to"
    if prev == "be":
        if "verb" in possible and _verb_form(word, ("ing", "ed"), wn):
            return ["verb"], "participle after be"
        return keep("adj", "noun", "adv"), "after be"
    if prev == "have" and "verb" in possible and _verb_form(word, ("ed",), wn):
        return ["verb"], "participle after have"
    if prev == "prep":
        if "verb" in possible and _verb_form(word, ("ing",), wn):
            return ["verb"], "gerund after a preposition"
        return keep(*_NOMINAL), "after a preposition"
    if start and nxt_closed in ("det", "num", "obj", "subj") and "verb" in possible:
        return ["verb"], "instruction"
    if nxt_closed == "det" and prev not in (None, "det") and "verb" in possible:
        return ["verb"], "before a determiner"
    if word.endswith("ly") and "adv" in possible:
        return ["adv"], "-ly"
    return list(possible), "frequency"
