"""The syntax level (SPEC 3; hse paper sec. 5.1, appendix 11): rule-based reorderings and question-form changes
that keep the bag of content words and every protected span.

The text is cut into sentences (at ``.``, ``?`` or ``!`` followed by space and a capital, a digit, a quote or a
bracket; not inside a protected span, not after an abbreviation such as ``e.g.``), and the sentences are cut again at
every line break and every structural protected span (an option label, a cue, a line of code:
:func:`routerlab.perturb.spans.structural_spans`), so that no rule ever moves a phrase across a label, a cue or a line
break (:func:`sentence_pieces`). The sentence rules apply to each piece; each gives at most one new sentence, or
nothing when it does not apply:

1. **clause to end**: ``If X, Y?`` -> ``Y if X?`` (also when, whenever, since, because, although, unless,
   while, once, after, before, given that).
2. **clause to front**: ``Y if X.`` -> ``If X, y.`` (also when, whenever, because, although, unless; the
   conjunction occurs once, the main part has 3+ words and no comma, and the conjunction does not follow a verb
   that takes an embedded question such as ``tell``, ``know`` or ``find``).
3. **question to instruction**: ``What/Who/Where/Which is|are|was|were the X?`` -> ``Tell me what the X is.``;
   and for ``What``, also ``Determine the X.`` (X starts with a determiner, has no comma and does not end in -ed
   or -en, so it is a whole noun phrase).
   3b. **subject question to instruction**: ``Who wrote X?`` -> ``Tell me who wrote X.``; ``Which/What N V X?``
   -> ``Tell me which N V X.`` when V (not an auxiliary) ends in -s or -ed, so the wh-phrase is the subject and
   the word order stays.
4. **instruction to question**: ``Find/Determine/Calculate/Compute/Identify the X.`` -> ``What is the X?``
   (``are`` when X's head noun, the last word before its first preposition, ends in a plural -s).
5. **prepositional phrase to front**: ``Y in X.`` -> ``In X, y.`` (in, on, at, within, during, inside, across,
   throughout, among, under; X has 1-5 words, determiners and content words only; not in a sentence with a
   subordinate or relative clause, where the phrase may belong to that clause, nor in one that starts with such
   a phrase already).
6. **prepositional phrase to end**: ``In X, Y.`` -> ``Y in X.`` (same prepositions, X of 1-5 words).
7. **coordination swap**, for the coordination of two simple noun phrases only: ``the A and B`` -> ``the B and A``
   (one determiner, or ``of``/``for``/``with``/``both``, before A) and ``the A and the B`` -> ``the B and the A``
   (each with its own determiner), also with ``or``. A and B are single lower-case words that WordNet knows as nouns
   and reads as nouns at least as often as verbs or adjectives (its tagged senses: ``box`` yes, ``serve``,
   ``reverse``, ``black`` no), both singular or both plural; after B comes punctuation, the end, or a word that may
   follow a noun phrase (a preposition, a relative pronoun, an auxiliary: :data:`_AFTER_NOUN_PHRASE`), never a
   number, a determiner or a content word, which would make B a verb with its object (``come 8 to a box and cost
   $2.00`` stays as it is). Not part of a longer list, and never in a sentence whose order matters (``respectively``,
   ``ratio``, ``difference``, ``between``, ``than``, ...: :data:`_ORDER_WORDS`).

A text rule works on the whole text: 8. **question first** moves a final question before the sentences of
context that precede it (one line, two or more sentences, only the last a question), and 9. **question last**
does the reverse; neither applies to a text with a structural protected span (options, cues, code), whose parts
would move past it.

Candidates are every single rule application, in a random order, then (when those are fewer than p) rules applied to
those (two rules), in a random order; each is kept only if its bag of content words
(:func:`routerlab.perturb.word.content_words`, with the frame words :data:`FRAME_WORDS` that rules 3-4 add or remove
left out) and its protected spans equal the original's. A query no rule applies to gets no syntax variant;
:func:`routerlab.perturb.perturb` counts it short.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from routerlab.perturb.base import Perturber, register_level
from routerlab.perturb.spans import protected_spans, structural_spans
from routerlab.perturb.word import (
    DETERMINERS,
    FUNCTION_WORDS,
    IMPERATIVES,
    NUMBER_WORDS,
    STOP_WORDS,
    WORD_PATTERN,
    content_words,
)
from routerlab.perturb.wordnet import WordNet
from routerlab.perturb.wordnet import load as load_wordnet

FRAME_WORDS: frozenset[str] = frozenset(("tell", "determine", "find", "calculate", "compute", "identify"))
"""Verbs that frame a request (rules 3 and 4 add or drop them); left out of the bag of content words."""

_FRONT_CONJ = ("given that", "whenever", "although", "because", "unless", "before", "after", "since", "while",
               "when", "once", "if")
_END_CONJ = ("whenever", "although", "because", "unless", "when", "if")
_SUBORDINATORS = frozenset(w for c in _FRONT_CONJ for w in c.split()) | {"that", "which", "who", "whom", "whose"}
_EMBEDDING_VERBS = frozenset(("tell", "know", "ask", "wonder", "determine", "find", "see", "check", "decide",
                              "show", "me", "out", "whether", "explain", "say", "learn", "understand"))
_PREPOSITIONS = ("in", "on", "at", "within", "during", "inside", "across", "throughout", "among", "under")
_PP_WORD_OK = DETERMINERS | {"and"}
_ASK_VERBS = ("Find", "Determine", "Calculate", "Compute", "Identify")
_NOUN_PHRASE_END = frozenset(("of", "in", "for", "on", "at", "with", "to", "from", "that", "which", "when", "if",
                              "by", "between", "among", "whose", "who"))
_COORD_AFTER = DETERMINERS | {"of", "for", "with", "both"}
_ABBREVIATIONS = frozenset(("e.g.", "i.e.", "etc.", "vs.", "mr.", "mrs.", "ms.", "dr.", "st.", "no.", "fig.",
                            "approx.", "cf.", "al."))
_BOUNDARY = re.compile(r"[.?!][\"')\]]*\s+(?=[A-Z0-9\"'(\[])")
_WORDS = re.compile(r"\S+")


def content_bag(text: str) -> Counter[str]:
    """The bag of content words a syntax variant keeps: :func:`content_words` without :data:`FRAME_WORDS`."""
    return Counter(w for w in content_words(text) if w not in FRAME_WORDS)


def _signature(text: str) -> tuple[Counter[str], Counter[str]]:
    """The content bag (:func:`content_bag`) and the multiset of protected strings of ``text``, from one pass
    over its protected spans: what a candidate must share with the original."""
    spans = sorted(protected_spans(text))
    bag: Counter[str] = Counter()
    pos = 0
    for s, e in [*spans, (len(text), len(text))]:
        if s > pos:
            bag.update(w for w in (m.group().lower() for m in WORD_PATTERN.finditer(text[pos:s]))
                       if w not in STOP_WORDS and w not in FRAME_WORDS)
        pos = max(pos, e)
    return bag, Counter(text[s:e] for s, e in spans)


def sentences(text: str, spans: Sequence[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``text`` (module docstring); the spaces between are not in any.
    ``spans``: the protected spans of ``text`` when already known."""
    if spans is None:
        spans = protected_spans(text)
    cuts: list[tuple[int, int]] = []
    for m in _BOUNDARY.finditer(text):
        end_char = m.start()
        if any(s <= end_char < e for s, e in spans):
            continue
        before = text[:end_char + 1].split()
        if before and before[-1].lower() in _ABBREVIATIONS:
            continue
        stop = m.start() + len(m.group().rstrip())
        cuts.append((stop, m.end()))
    out: list[tuple[int, int]] = []
    pos = len(text) - len(text.lstrip())
    for stop, nxt in cuts:
        out.append((pos, stop))
        pos = nxt
    end = len(text.rstrip())
    if pos < end:
        out.append((pos, end))
    return out


def _first_word_protected(sentence: str) -> bool:
    first = sentence.split(None, 1)[0] if sentence.strip() else ""
    spans = protected_spans(first) if first else []
    return bool(spans) and spans[0][0] == 0


def _capitalise(part: str) -> str | None:
    """``part`` with a capital first letter; None when it starts with a protected span (left alone)."""
    if not part or _first_word_protected(part):
        return None
    return part[0].upper() + part[1:]


def _decapitalise(part: str) -> str:
    """``part`` with its first word lower-cased when that word is a function word, a wh-word or an imperative
    (a name or ``I`` keeps its capital)."""
    first = part.split(" ", 1)[0]
    if first[:1].isupper() and first[1:].islower() and first.lower() in STOP_WORDS | IMPERATIVES:
        return first.lower() + part[len(first):]
    return part


def _split_end(sentence: str) -> tuple[str, str]:
    """The sentence without its final punctuation, and that punctuation ('' when none)."""
    body = sentence.rstrip()
    if body and body[-1] in ".?!":
        return body[:-1].rstrip(), body[-1]
    return body, ""


def clause_to_end(sentence: str) -> str | None:
    """Rule 1: ``If X, Y?`` -> ``Y if X?``."""
    body, punct = _split_end(sentence)
    for conj in _FRONT_CONJ:
        m = re.match(rf"({re.escape(conj)})\s+([^,;:]+),\s+([^,;:]+)$", body, flags=re.IGNORECASE)
        if m is None or not m.group(1)[:1].isupper():
            continue
        main = _capitalise(m.group(3))
        if main is None or len(m.group(3).split()) < 2:
            return None
        return f"{main} {m.group(1).lower()} {m.group(2)}{punct}"
    return None


def clause_to_front(sentence: str) -> str | None:
    """Rule 2: ``Y if X.`` -> ``If X, y.``."""
    body, punct = _split_end(sentence)
    if not punct or "," in body or ";" in body or ":" in body:
        return None
    words = body.split()
    found = [i for i, w in enumerate(words) if w.lower() in _END_CONJ and w.islower()]
    if len(found) != 1 or "given" in (w.lower() for w in words):
        return None
    i = found[0]
    if i < 3 or i > len(words) - 2 or words[i - 1].lower() in _EMBEDDING_VERBS:
        return None
    main, clause = " ".join(words[:i]), " ".join(words[i + 1:])
    conj = _capitalise(words[i])
    if conj is None:
        return None
    return f"{conj} {clause}, {_decapitalise(main)}{punct}"


def question_to_instruction(sentence: str) -> list[str]:
    """Rule 3: ``What is the X?`` -> ``Tell me what the X is.`` and ``Determine the X.``."""
    m = re.fullmatch(r"(What|Who|Where|Which)\s+(is|are|was|were)\s+([^,;:?]+)\?", sentence.strip())
    if m is None:
        return []
    wh, aux, rest = m.groups()
    words = rest.split()
    if words[0].lower() not in DETERMINERS or len(words) < 2 or re.search(r"(ed|en)$", words[-1]):
        return []
    out = [f"Tell me {wh.lower()} {rest} {aux}."]
    if wh == "What":
        out.append(f"Determine {rest}.")
    return out


_AUXILIARIES = frozenset(("is", "are", "was", "were", "do", "does", "did", "can", "could", "will", "would",
                          "shall", "should", "may", "might", "must"))


def subject_question_to_instruction(sentence: str) -> str | None:
    """Rule 3b: a question whose wh-phrase is the subject keeps its word order when embedded: ``Who wrote X?`` ->
    ``Tell me who wrote X.``, ``Which planet has X?`` -> ``Tell me which planet has X.``."""
    m = re.fullmatch(r"(Who|(?:Which|What)\s+[a-z]+)\s+([a-z]+)\s+([^?]+)\?", sentence.strip())
    if m is None:
        return None
    wh, verb, rest = m.groups()
    noun = wh.split()[-1]
    if verb in _AUXILIARIES or (verb in FUNCTION_WORDS and verb not in ("has", "had")) or (
            noun != "Who" and noun in FUNCTION_WORDS):
        return None
    if noun != "Who" and not (verb.endswith(("s", "ed")) or verb in ("has", "had")):
        return None  # "Which way round ..." : the word after the noun is not a verb
    return f"Tell me {wh[0].lower()}{wh[1:]} {verb} {rest}."


def instruction_to_question(sentence: str) -> str | None:
    """Rule 4: ``Find the X.`` -> ``What is the X?`` (``are`` for a plural head noun)."""
    body, punct = _split_end(sentence)
    if punct == "?":
        return None
    m = re.fullmatch(rf"({'|'.join(_ASK_VERBS)})\s+(the\s+[^,;:]+)", body)
    if m is None:
        return None
    rest = m.group(2)
    head = ""
    for w in rest.split()[1:]:
        if w.lower() in _NOUN_PHRASE_END:
            break
        head = w
    plural = head.isalpha() and head.islower() and head.endswith("s") and not head.endswith(("ss", "us", "is"))
    return f"What {'are' if plural else 'is'} {rest}?"


def _pp_words_ok(words: Sequence[str]) -> bool:
    return 1 <= len(words) <= 5 and all(
        w.lower() in _PP_WORD_OK or w.lower().strip(".,") not in FUNCTION_WORDS for w in words)


def pp_to_front(sentence: str) -> str | None:
    """Rule 5: ``Y in X.`` -> ``In X, y.``."""
    body, punct = _split_end(sentence)
    if not punct or "," in body or ";" in body or ":" in body:
        return None
    words = body.split()
    if not words or any(w.lower() in _SUBORDINATORS for w in words) or words[0].lower() in _PREPOSITIONS:
        return None  # the phrase may belong to a subordinate clause, or one is fronted already
    for i in range(len(words) - 2, 2, -1):
        if words[i].lower() in FUNCTION_WORDS and words[i].lower() not in _PP_WORD_OK:
            if words[i] in _PREPOSITIONS and _pp_words_ok(words[i + 1:]):
                pp = _capitalise(words[i])
                if pp is None:
                    return None
                return f"{pp} {' '.join(words[i + 1:])}, {_decapitalise(' '.join(words[:i]))}{punct}"
            return None
    return None


def pp_to_end(sentence: str) -> str | None:
    """Rule 6: ``In X, Y.`` -> ``Y in X.``."""
    body, punct = _split_end(sentence)
    m = re.fullmatch(rf"({'|'.join(p.capitalize() for p in _PREPOSITIONS)})\s+([^,;:]+),\s+([^,;:]+)", body)
    if m is None or not _pp_words_ok(m.group(2).split()) or len(m.group(3).split()) < 2:
        return None
    main = _capitalise(m.group(3))
    if main is None:
        return None
    return f"{main} {m.group(1).lower()} {m.group(2)}{punct}"


_ORDER_WORDS = frozenset(("respectively", "between", "ratio", "difference", "minus", "subtract", "subtracted",
                          "divide", "divided", "quotient", "than", "versus", "vs", "vs."))
"""Words that make the order of two coordinated nouns matter (the ratio of boys and girls): no swap in their
sentence."""
_AFTER_NOUN_PHRASE = frozenset(("of", "in", "on", "at", "with", "for", "from", "by", "into", "onto", "over", "under",
                                "about", "near", "inside", "within", "during", "across", "through", "throughout",
                                "among", "without", "that", "which", "who", "whose", "where", "when", "are", "were",
                                "is", "was", "have", "has", "had", "can", "could", "will", "would", "should", "must",
                                "may", "might", "do", "does", "did", "but"))
"""Words that may follow a noun phrase and not a verb's object: after B, one of these (or punctuation, or the end)
shows that ``A and B`` is a pair of nouns, not two actions (``come 8 to a box and cost $2.00``)."""
_NP_END = ".;:?!)"


def _mainly_noun(word: str, wn: WordNet) -> bool:
    """A noun for WordNet, and no verb or adjective reading has more tagged senses (``box`` yes, ``serve``, ``drink``,
    ``black`` no)."""
    bases = wn.base_forms(word, "noun")
    if not bases:
        return False

    def tagged(pos: str) -> int:
        found = wn.base_forms(word, pos)
        entries = [wn.entry(b, pos) for b in found]
        return max((e.tagsense_cnt for e in entries if e is not None), default=-1)

    noun = tagged("noun")
    return noun >= tagged("verb") and noun >= tagged("adj")


def _plural(word: str, wn: WordNet) -> bool:
    return wn.base_forms(word, "noun")[0] != word


def _simple_noun(token: str) -> bool:
    return token.isalpha() and token.islower() and len(token) >= 3 and token not in FUNCTION_WORDS | NUMBER_WORDS


def coordination_swap(sentence: str, wn: WordNet | None = None) -> list[str]:
    """Rule 7: ``the A and B`` -> ``the B and A`` and ``the A and the B`` -> ``the B and the A`` (also ``or``), for
    simple noun phrases only (module docstring)."""
    words = [(m.start(), m.end(), m.group()) for m in _WORDS.finditer(sentence)]
    if any(w.lower().strip(",.;:?!") in _ORDER_WORDS for _, _, w in words):
        return []
    net = wn if wn is not None else load_wordnet()
    out: list[str] = []
    for i, (_, _, conj) in enumerate(words):
        if conj not in ("and", "or") or i < 2 or i + 1 >= len(words):
            continue
        a_tok = words[i - 1][2]
        shared = words[i + 1][2] not in DETERMINERS
        b_at = i + 1 if shared else i + 2
        if b_at >= len(words) or not _simple_noun(a_tok):
            continue
        b_tok = words[b_at][2]
        b = b_tok.rstrip(_NP_END)
        if not _simple_noun(b) or a_tok == b:
            continue
        before = words[i - 2][2]
        if shared:
            if before not in _COORD_AFTER or (i >= 3 and words[i - 3][2].endswith(",")):
                continue
            left = i - 1
        else:
            if before not in DETERMINERS:
                continue
            left = i - 2
        if b == b_tok and b_at + 1 < len(words) and words[b_at + 1][2].lower() not in _AFTER_NOUN_PHRASE:
            continue  # "a box and cost $2.00": B takes an object, so it is a verb
        if not (_mainly_noun(a_tok, net) and _mainly_noun(b, net)) or _plural(a_tok, net) != _plural(b, net):
            continue
        start, end = words[left][0], words[b_at][0] + len(b)
        first = sentence[start:words[i - 1][1]]
        second = sentence[words[i + 1][0]:end]
        out.append(sentence[:start] + f"{second} {conj} {first}" + sentence[end:] if not shared
                   else sentence[:start] + f"{b} {conj} {a_tok}" + sentence[end:])
    return out


SentenceRule = Callable[[str], "str | list[str] | None"]
SENTENCE_RULES: tuple[tuple[str, SentenceRule], ...] = (
    ("clause_to_end", clause_to_end), ("clause_to_front", clause_to_front),
    ("question_to_instruction", question_to_instruction),
    ("subject_question_to_instruction", subject_question_to_instruction),
    ("instruction_to_question", instruction_to_question),
    ("pp_to_front", pp_to_front), ("pp_to_end", pp_to_end), ("coordination_swap", coordination_swap),
)
"""Rules 1-7 (and 3b) by name, in the module docstring's order."""


def _question_moves(text: str) -> list[str]:
    """Rules 8 and 9 on the whole text: only a one-line text without structural spans (labels, cues, code), whose
    sentences may move without crossing one."""
    if "\n" in text or structural_spans(text):
        return []
    sents = sentences(text)
    if len(sents) < 2:
        return []
    pieces = [text[s:e] for s, e in sents]
    questions = [p.endswith("?") for p in pieces]
    if questions[-1] and not any(questions[:-1]):
        return [" ".join([pieces[-1], *pieces[:-1]])]
    if questions[0] and not any(questions[1:]):
        return [" ".join([*pieces[1:], pieces[0]])]
    return []


def sentence_pieces(text: str) -> list[tuple[int, int]]:
    """(start, end) of the stretches of ``text`` that rules 1-7 may rewrite: its sentences (:func:`sentences`), cut
    at every line break and every structural span (:func:`routerlab.perturb.spans.structural_spans`: an option label,
    a cue, a line of code), without surrounding spaces; pieces with no letter are left out. No rule moves a phrase
    across a label, a cue or a line break, because no piece holds one."""
    barriers = sorted([*structural_spans(text), *((m.start(), m.end()) for m in re.finditer("\n", text))])
    out: list[tuple[int, int]] = []
    for s, e in sentences(text):
        pos = s
        for a, b in barriers:
            if b <= pos or a >= e:
                continue
            out.append((pos, a))
            pos = max(pos, b)
        out.append((pos, e))
    pieces: list[tuple[int, int]] = []
    for s, e in out:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if s < e and any(ch.isalpha() for ch in text[s:e]):
            pieces.append((s, e))
    return pieces


def rule_outputs(text: str) -> list[str]:
    """Every text one rule application makes from ``text`` (rules 1-7 on each sentence piece, then 8-9),
    unchecked and in a fixed order."""
    out: list[str] = []
    for s, e in sentence_pieces(text):
        sentence = text[s:e]
        for _, rule in SENTENCE_RULES:
            made = rule(sentence)
            for new in ([made] if isinstance(made, str) else made or []):
                out.append(text[:s] + new + text[e:])
    out.extend(_question_moves(text))
    return out


def syntax_candidates(text: str, p: int, rng: np.random.Generator) -> list[str]:
    """The checked candidates of ``text`` (module docstring): single rule applications in a random order, then
    (only when there are fewer than ``p`` of those) two-rule ones in a random order, each distinct and keeping
    the content bag and the protected spans."""
    signature = _signature(text)
    seen = {text}

    def checked(cands: list[str]) -> list[str]:
        kept: list[str] = []
        for cand in cands:
            if cand not in seen and _signature(cand) == signature:
                seen.add(cand)
                kept.append(cand)
        return kept

    singles = checked(rule_outputs(text))
    doubles = checked([two for one in singles for two in rule_outputs(one)]) if len(singles) < p else []
    order1 = rng.permutation(len(singles))
    order2 = rng.permutation(len(doubles))
    return [singles[int(i)] for i in order1] + [doubles[int(i)] for i in order2]


@register_level("syntax")
class SyntaxLevel(Perturber):
    """Rule-based reorderings and question-form changes (module docstring)."""

    summary = "reorder clauses and phrases, question <-> instruction, question first/last; content words kept"
    offline = True

    def __init__(self, backend: Any = None, **options: Any) -> None:
        super().__init__(backend=backend, **options)
        self.wordnet = load_wordnet()  # rule 7 asks WordNet whether a word is a noun; fail early without it

    def candidates(self, texts: Sequence[str], p: int, rngs: Sequence[np.random.Generator]) -> list[list[str]]:
        return [syntax_candidates(text, p, rng) for text, rng in zip(texts, rngs, strict=True)]

    def settings(self) -> dict[str, Any]:
        return {"rules": [name for name, _ in SENTENCE_RULES] + ["question_first", "question_last"],
                "wordnet": str(self.wordnet.root)}
