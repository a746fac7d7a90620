"""The spans of a query that no perturbation may alter: what the question *is* (SPEC 3).

``protected_spans(text)`` returns sorted, non-overlapping (start, end) character spans and ``protected_parts(text)``
the same as :class:`Span` objects with a kind. Every level leaves them verbatim: the offline levels edit only the text
between them, the syntax level never moves a phrase across a structural one (:func:`structural_spans`), and a variant
from any level (LLM-written ones included) is kept only when :func:`keeps_protected` holds: the same protected strings,
as often, and the structural ones in the same order. The rules, by kind (each is a rule about the text, never a list
of known datasets):

* ``code``: fenced blocks (`````...`````) and bare code lines (:mod:`routerlab.perturb._code`): Python lines its parser
  accepts (``def``/``class`` signatures, statements, imports, decorators) with the lines indented under them,
  JavaScript statements and their brace blocks, SQL statements with their clause lines, and comments touching them.
  A Python docstring's prose is not code.
* ``doctest``: ``>>>`` lines, ``...`` continuations and their expected output, and docstring example lines that start
  with a call (``f(3) == 4``, ``f('ab') returns 1``).
* ``assert``: ``assert`` statements, at the start of a line or after a colon, with their continuation lines.
* ``identifier``: every whole-word occurrence (first letter in either case), prose included, of a name the code
  defines (function, class, parameter, variable, import, table, column) or a test calls (the function under test);
  builtins and the one-letter words ``a``, ``A``, ``I`` are left out.
* ``label``: option labels that form a sequence (the first two ordinals, A and B, a and b, 1 and 2 or I and II, in
  one style): ``A.``, ``(A)``, ``A)``, ``[A]``, ``A:`` at the start of a line, ``(A)``, ``[A]``, ``A.``, ``A)`` inside
  a line, roman numerals (``I.``, ``(ii)``), and a capitalised word with an ordinal and ``|`` or ``:`` (``Scenario 1
  |``, ``Statement 2 |``, ``Option 1:``).
* ``cue``: the task's fixed frame. Field cues: one to three words ending in ``:`` at the start of a line or a sentence
  (``Question:``, ``Answer:``, ``Answer Choices:``, ``Clue(s):``, ``Q:``), or one word ending in ``:`` that ends its
  line (``... carbon dioxide Answer:``), whatever the case of their first letter (a typo may flip it); the last
  sentence
  of a line when it ends in ``:``, has at most 6 words and the next line starts an assert, a doctest or a label
  (``Your code should pass these tests:``); a sentence that says how to answer: it quotes two option letters or
  digits (``Print only a single choice from "A" or "B"``) or holds ``\\boxed``.
* ``payload``: quoted strings (``"..."``, ``'...'``, ``\u201c...\u201d`` within a line, up to 200 characters), concept
  lists (a line, or the part after its last ``: ``, of 4 or more comma-separated items of 1-3 words), the word after a
  number (its unit or counted noun: ``60 miles``, ``300 GeV``, ``$140 per month``), inline calls (``d.get('c', 0)``,
  ``print([x for x in y])``), dotted names (``os.path``) and SQL statements inside prose (``SELECT city FROM
  customers``). A rule must give the same answer on a text and on its typo'd variants: a name with an inner capital
  (``getElementById``) is not a rule for that reason (a typo makes ``GMOs`` into ``GMsO``); such a name is protected
  when the text's code defines it, or inside a call or a dotted name.
* ``math``/``url``/``inline``: LaTeX (``$$..$$``, ``$..$``, ``\\(..\\)``, ``\\[..\\]``), URLs, inline code
  (`` `...` ``).
* ``token``: any whitespace-delimited token holding a digit or a math/code symbol (``= ^ < > + * / \\ _ { } | [ ] #
  @ ~``: ``3x+2``, ``H2O``), lone letters other than ``a``, ``A``, ``I`` (variables: ``find x``), upper-case
  roman numerals of two letters or more (``I and III``), and option-label tokens (``(B)``, ``C.``).

Overlapping spans merge into one, whose kind is the first of :data:`KINDS` among them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from routerlab.perturb._code import ASSERT, CODE, DOCTEST, block_identifiers, find_code, inline_sql

KINDS: tuple[str, ...] = ("code", "doctest", "assert", "label", "cue", "inline", "payload", "math", "url",
                          "identifier", "token")
"""The kinds of protected span, in the order that decides the kind of merged spans."""
STRUCTURAL_KINDS: frozenset[str] = frozenset(("code", "doctest", "assert", "label", "cue"))
"""Kinds that keep their order in a variant and that no syntax rule moves a phrase across."""
_RANK = {kind: i for i, kind in enumerate(KINDS)}


@dataclass(frozen=True)
class Span:
    """``text[start:end]`` is protected, as a ``kind`` (one of :data:`KINDS`)."""

    start: int
    end: int
    kind: str


_FENCED = re.compile(r"```.*?```", re.DOTALL)
_BLOCKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (_FENCED, "code"),
    (re.compile(r"`[^`\n]+`"), "inline"),
    (re.compile(r"\$\$.*?\$\$|(?<!\\)\$[^$\n]+?\$|\\\(.*?\\\)|\\\[.*?\\\]", re.DOTALL), "math"),
    (re.compile(r"\b(?:https?://|www\.)\S*[^\s.,;:?!)]"), "url"),
)
_SYMBOLS = set("=^<>+*/\\_{}|[]#@~")
_TOKEN = re.compile(r"\S+")
_OPTION_LABEL = re.compile(r"^\(?[A-Za-z][).:]$|^\([A-Za-z]\)[.,:;]?$")
_LONE_LETTER = re.compile(r"^[\"'(]?([A-Za-z])[\"')]?[.,;:?!]?$")
_TRAILING = ".,;:?!"

# labels: (A) [A] A. A) A: at a line start; (A) [A] A. A) inside a line; "Scenario 1 |"
_LABEL = re.compile(r"(?P<lead>^[ \t]*|(?<=[ \t]))(?P<label>\((?P<o1>[A-Za-z]|\d{1,2})\)|\[(?P<o2>[A-Za-z]|\d{1,2})\]"
                    r"|(?P<o3>[A-Za-z]|\d{1,2})(?P<p3>[.):]))(?=[ \t]|$)", re.MULTILINE)
_ROMAN = re.compile(r"M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
_ROMAN_LABEL = re.compile(r"(?:^[ \t]*|(?<=[ \t]))(?P<label>\(?(?P<ord>[IVX]{1,4}|[ivx]{1,4})[.)])(?=[ \t]|$)",
                          re.MULTILINE)
_WORD_LABEL = re.compile(r"\b(?P<word>[A-Z][a-z]+)[ \t](?P<ord>\d{1,2}|[A-Z])(?P<sep>[ \t]?[|:])(?=[ \t]|$)",
                         re.MULTILINE)
# cues
_FIELD_CUE = re.compile(r"(?:^|(?<=[.?!] )|(?<=[.?!]  ))[ \t]*(?P<cue>[A-Za-z][A-Za-z]*(?:\([a-z]{1,2}\))?"
                        r"(?:[ ][A-Za-z][a-z]*(?:\([a-z]{1,2}\))?){0,2}:)(?=[ \t]|$)", re.MULTILINE)
_END_CUE = re.compile(r"(?<=[ \t])(?P<cue>[A-Za-z]+(?:\([a-z]{1,2}\))?:)[ \t]*$", re.MULTILINE)
_ANSWER_FORMAT = re.compile(r"(?:^|(?<=[ \t]))[\"'\u201c\u2018][A-Z0-9][\"'\u201d\u2019](?=[\s,.;:?!)]|$)|\\boxed",
                            re.MULTILINE)
_SENTENCE_END = re.compile(r"[.?!](?=[ \t]|$)", re.MULTILINE)
_FRAME_MAX_WORDS = 6
# payloads
_QUOTED = re.compile(r"(?<![\w\"])\"[^\"\n]{1,200}\"(?![\w\"])|\u201c[^\u201d\n]{1,200}\u201d"
                     r"|(?<![\w'])'(?=\S)[^'\n]{0,200}?(?<=\S)'(?![\w'])")
_CONCEPT_ITEM = re.compile(r"[A-Za-z][A-Za-z'-]*(?: [A-Za-z][A-Za-z'-]*){0,2}")
_MIN_CONCEPTS = 4
_UNIT = re.compile(r"(?<![^\s(\[])[$\u20ac\u00a3]?\d+(?:,\d{3})*(?:\.\d+)?%?[ \t]+(?P<unit>(?:per[ \t]+)?"
                   r"(?:[A-Za-z]{3,}|[b-df-hj-np-tv-zA-Z]{1,2}|[A-Za-z]?[A-Z][A-Za-z]?)"
                   r"(?:[ \t]+per[ \t]+[A-Za-z]+)?)\b(?!['\u2019][A-Za-z])")
"""The word after a number: three letters or more, or a short unit (``km``, ``GeV``, ``mL``) but not a short word with a
vowel (``8 to a box``), nor the stem of a contraction or possessive (``3 isn't``: "is not" and "isn't" must protect
the same strings, or a contraction would read as an edited unit)."""
_NEST = r"(?:[^()\n]|\((?:[^()\n]|\([^()\n]*\))*\))*"
_CALL = re.compile(rf"(?<![\w$])[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*\({_NEST}\)"
                   rf"(?:\.[A-Za-z_$][\w$]*(?:\({_NEST}\))?)*")
_PLURAL_MARK = re.compile(r"[A-Za-z]+\((?:s|es)\)")
_DOTTED = re.compile(r"(?<![\w$.])[A-Za-z_$][\w$]+(?:\.[A-Za-z_$][\w$]+)+(?![\w$])")


def _protected_token(token: str) -> bool:
    if any(ch.isdigit() for ch in token) or any(ch in _SYMBOLS for ch in token):
        return True
    core = token.strip(_TRAILING + "()")
    if len(core) >= 2 and core.isupper() and _ROMAN.fullmatch(core):
        return True  # a roman numeral: "statements I and III"
    if _OPTION_LABEL.match(token):
        return True
    lone = _LONE_LETTER.match(token)
    return lone is not None and lone.group(1) not in ("a", "A", "I")


def _ordinal(mark: str) -> tuple[str, int]:
    """The alphabet and 0-based place of a label's ordinal: ``B`` -> (upper, 1), ``3`` -> (digit, 2)."""
    if mark.isdigit():
        return "digit", int(mark) - 1
    return ("upper" if mark.isupper() else "lower"), ord(mark.lower()) - ord("a")


def _roman(mark: str) -> int:
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    digits = [values[ch] for ch in mark.upper()]
    return sum(-d if i + 1 < len(digits) and d < digits[i + 1] else d for i, d in enumerate(digits))


def _sequences(found: Iterable[tuple[tuple[str, ...], int, int, int]]) -> list[Span]:
    """The labels among ``found`` ((style key, ordinal, start, end)) whose style has both of its first two
    ordinals: a sequence of options, not a stray letter."""
    groups: dict[tuple[str, ...], list[tuple[int, int, int]]] = {}
    for key, place, s, e in found:
        groups.setdefault(key, []).append((place, s, e))
    out: list[Span] = []
    for members in groups.values():
        places = {p for p, _, _ in members}
        if 0 in places and 1 in places:
            out.extend(Span(s, e, "label") for _, s, e in members)
    return out


def _labels(text: str) -> list[Span]:
    found: list[tuple[tuple[str, ...], int, int, int]] = []
    for m in _LABEL.finditer(text):
        at_line_start = m.group("lead") != "" or m.start() == 0 or text[m.start() - 1] == "\n"
        if m.group("o1"):
            mark, style = m.group("o1"), "(x)"
        elif m.group("o2"):
            mark, style = m.group("o2"), "[x]"
        else:
            mark, style = m.group("o3"), "x" + m.group("p3")
            if not at_line_start and (mark.isdigit() or m.group("p3") == ":"):
                continue  # "page 1. Then", "Bob: hi": not options inside a line
        alphabet, place = _ordinal(mark)
        found.append(((style, alphabet), place, m.start("label"), m.end("label")))
    for m in _ROMAN_LABEL.finditer(text):
        mark = m.group("ord")
        if _ROMAN.fullmatch(mark.upper()):
            style = ("(x)" if m.group("label").startswith("(") else "x") + m.group("label")[-1]
            found.append(((style, "roman-" + ("upper" if mark.isupper() else "lower")), _roman(mark) - 1,
                          m.start("label"), m.end("label")))
    for m in _WORD_LABEL.finditer(text):
        alphabet, place = _ordinal(m.group("ord"))
        found.append(((m.group("word"), m.group("sep").strip(), alphabet), place, m.start(), m.end()))
    return _sequences(found)


def _lines(text: str) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    pos = 0
    for line in text.split("\n"):
        out.append((pos, pos + len(line)))
        pos += len(line) + 1
    return out


def _sentence_around(text: str, start: int, end: int) -> tuple[int, int]:
    """The sentence (within its line) holding ``text[start:end]``."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    s = line_start
    for m in _SENTENCE_END.finditer(text, line_start, start):
        s = m.end()
    after = _SENTENCE_END.search(text, end, line_end)
    e = after.end() if after is not None else line_end
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


def _cues(text: str, introduced: list[Span]) -> list[Span]:
    out = [Span(m.start("cue"), m.end("cue"), "cue") for m in (*_FIELD_CUE.finditer(text), *_END_CUE.finditer(text))]
    starts = {sp.start for sp in introduced}
    lines = _lines(text)
    for i, (s, e) in enumerate(lines):
        body = text[s:e].rstrip()
        if not body.endswith(":"):
            continue
        nxt = next((lines[j] for j in range(i + 1, len(lines)) if text[lines[j][0]:lines[j][1]].strip()), None)
        if nxt is None:
            continue
        first = nxt[0] + len(text[nxt[0]:nxt[1]]) - len(text[nxt[0]:nxt[1]].lstrip())
        if first not in starts:
            continue
        begin, end = _sentence_around(text, s + len(body) - 1, s + len(body))
        if len(text[begin:end].split()) <= _FRAME_MAX_WORDS:
            out.append(Span(begin, end, "cue"))
    marks: dict[tuple[int, int], int] = {}
    for m in _ANSWER_FORMAT.finditer(text):
        sentence = _sentence_around(text, m.start(), m.end())
        marks[sentence] = marks.get(sentence, 0) + (2 if m.group() == "\\boxed" else 1)
    out.extend(Span(begin, end, "cue") for (begin, end), n in marks.items() if n >= 2)
    return out


def _concept_lists(text: str) -> list[Span]:
    out: list[Span] = []
    for s, e in _lines(text):
        line = text[s:e]
        cut = line.rfind(": ")
        start = s + cut + 2 if cut >= 0 else s
        body = text[start:e].rstrip().rstrip(".")
        items = [item.strip() for item in body.split(",")]
        if len(items) >= _MIN_CONCEPTS and all(_CONCEPT_ITEM.fullmatch(item) for item in items):
            lead = len(body) - len(body.lstrip())
            out.append(Span(start + lead, start + len(body), "payload"))
    return out


def _payloads(text: str) -> list[Span]:
    out = [Span(m.start(), m.end(), "payload") for m in _QUOTED.finditer(text)]
    out.extend(_concept_lists(text))
    out.extend(Span(m.start("unit"), m.end("unit"), "payload") for m in _UNIT.finditer(text))
    out.extend(Span(m.start(), m.end(), "payload") for m in _CALL.finditer(text)
               if not _PLURAL_MARK.fullmatch(m.group()))
    out.extend(Span(m.start(), m.end(), "payload") for m in _DOTTED.finditer(text))
    out.extend(Span(s, e, "payload") for s, e in inline_sql(text))
    return out


def _tokens(text: str, covered: Callable[[int], bool]) -> list[Span]:
    """Protected tokens; a token that another span covers in part counts by its uncovered characters."""
    out: list[Span] = []
    for m in _TOKEN.finditer(text):
        start, end = m.span()
        token = m.group()
        if covered(start) or covered(end - 1):
            rest = "".join(ch for i, ch in enumerate(token, start) if not covered(i))
            if rest.strip(_TRAILING) and (any(ch.isdigit() for ch in rest) or any(ch in _SYMBOLS for ch in rest)):
                out.append(Span(start, start + max(len(token.rstrip(_TRAILING)), 1), "token"))
            continue
        if _protected_token(token):
            core = token.rstrip(_TRAILING) if not _OPTION_LABEL.match(token) else token
            out.append(Span(start, start + max(len(core), 1), "token"))
    return out


def _identifiers(text: str, names: Iterable[str]) -> list[Span]:
    names = sorted(set(names), key=len, reverse=True)
    if not names:
        return []
    alternatives = ("[" + re.escape(n[0].lower() + n[0].upper()) + "]" + re.escape(n[1:]) if n[0].isalpha()
                    else re.escape(n) for n in names)  # either case of the first letter: a typo may flip it
    pattern = re.compile(r"(?<![\w$'\u2019])(?:" + "|".join(alternatives) + r")(?![\w$'\u2019])")  # not it's
    return [Span(m.start(), m.end(), "identifier") for m in pattern.finditer(text)]


def _merge(spans: list[Span], text: str) -> tuple[Span, ...]:
    """Overlapping spans (and spans joined by a lone ``.``: ``"ab".count(x)``) as one, of the first kind."""
    merged: list[Span] = []
    for sp in sorted(spans, key=lambda x: (x.start, -x.end)):
        if sp.end <= sp.start:
            continue
        if merged and (sp.start < merged[-1].end or (sp.start == merged[-1].end + 1
                                                      and text[merged[-1].end] == ".")):
            last = merged[-1]
            kind = last.kind if _RANK[last.kind] <= _RANK[sp.kind] else sp.kind
            merged[-1] = Span(last.start, max(last.end, sp.end), kind)
        else:
            merged.append(sp)
    return tuple(merged)


def _covered(spans: Iterable[Span], size: int) -> Callable[[int], bool]:
    mask = bytearray(size)
    for sp in spans:
        mask[sp.start:sp.end] = b"\x01" * (sp.end - sp.start)

    def inside(i: int) -> bool:
        return bool(mask[i])
    return inside


@lru_cache(maxsize=8192)
def protected_parts(text: str) -> tuple[Span, ...]:
    """The protected spans of ``text`` with their kinds (module docstring), sorted and merged."""
    spans: list[Span] = []
    names: set[str] = set()
    for pattern, kind in _BLOCKS:
        for m in pattern.finditer(text):
            spans.append(Span(m.start(), m.end(), kind))
            if pattern is _FENCED:
                inner = m.group()[3:-3]
                names |= block_identifiers(inner.split("\n", 1)[1] if "\n" in inner else inner)
    code = find_code(text)
    names |= code.identifiers
    spans.extend(Span(s, e, kind) for s, e, kind in code.spans)
    labels = _labels(text)
    spans.extend(labels)
    introduced = [sp for sp in (*labels, *(Span(s, e, k) for s, e, k in code.spans)) if sp.kind in (
        "label", ASSERT, DOCTEST, CODE)]
    spans.extend(_cues(text, [sp for sp in introduced if sp.kind != CODE]))
    spans.extend(_payloads(text))
    spans.extend(_identifiers(text, names))
    spans.extend(_tokens(text, _covered(spans, len(text))))
    return _merge(spans, text)


def protected_spans(text: str) -> list[tuple[int, int]]:
    """Sorted, non-overlapping (start, end) spans of ``text`` that every perturbation keeps verbatim (module
    docstring). A protected token's trailing sentence punctuation is not part of its span."""
    return [(sp.start, sp.end) for sp in protected_parts(text)]


def structural_spans(text: str) -> list[tuple[int, int]]:
    """The spans of the structural kinds (:data:`STRUCTURAL_KINDS`: code, doctests, asserts, labels, cues): no
    syntax rule moves a phrase across one."""
    return [(sp.start, sp.end) for sp in protected_parts(text) if sp.kind in STRUCTURAL_KINDS]


def protected_strings(text: str) -> Counter[str]:
    """The multiset of protected substrings of ``text``."""
    return Counter(text[sp.start:sp.end] for sp in protected_parts(text))


def ordered_strings(text: str) -> list[str]:
    """The structural protected substrings of ``text`` in order (labels and code lines keep their order)."""
    return [text[sp.start:sp.end] for sp in protected_parts(text) if sp.kind in STRUCTURAL_KINDS]


def keeps_protected(original: str, variant: str) -> bool:
    """True when ``variant`` holds exactly the protected substrings of ``original``, each as often (none changed,
    dropped or added), with the structural ones in the same order: the filter every variant passes before it is
    kept."""
    return ordered_strings(original) == ordered_strings(variant) and \
        protected_strings(original) == protected_strings(variant)


def segments(text: str) -> list[tuple[str, bool]]:
    """``text`` cut into consecutive (piece, protected) parts; joining the pieces gives ``text`` back. Offline
    levels edit only the unprotected pieces."""
    out: list[tuple[str, bool]] = []
    pos = 0
    for s, e in protected_spans(text):
        if s > pos:
            out.append((text[pos:s], False))
        out.append((text[s:e], True))
        pos = e
    if pos < len(text):
        out.append((text[pos:], False))
    return out
