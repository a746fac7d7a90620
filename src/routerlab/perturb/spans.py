"""The spans of a query that no perturbation may alter: numbers, formulae, code and the like carry the answer.

``protected_spans(text)`` returns sorted, non-overlapping (start, end) character spans; every level leaves them
verbatim (offline levels edit only the text between them; LLM-written variants that change, drop or add one are
rejected by :func:`keeps_protected`). What is protected, in order of precedence: fenced and inline code
(```...```, `...`), LaTeX (``$$..$$``, ``$..$``, ``\\(..\\)``, ``\\[..\\]``), URLs, any whitespace-delimited token
holding a digit or a math/code symbol (``= ^ < > + * / \\ _ { } | [ ] # @ ~``, e.g. ``3x+2``, ``x^2``, ``H2O``,
``f(x)=1``), and lone letters other than the words ``a``, ``A`` and ``I`` (variables: ``find x``) and option
labels (``(B)``, ``C.``, ``D)``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

_BLOCKS = re.compile(
    r"```.*?```"             # fenced code
    r"|`[^`\n]+`"            # inline code
    r"|\$\$.*?\$\$"          # display LaTeX
    r"|(?<!\\)\$[^$\n]+?\$"  # inline LaTeX
    r"|\\\(.*?\\\)|\\\[.*?\\\]"
    r"|\b(?:https?://|www\.)\S*[^\s.,;:?!)]",
    re.DOTALL,
)
_SYMBOLS = set("=^<>+*/\\_{}|[]#@~")
_TOKEN = re.compile(r"\S+")
_OPTION_LABEL = re.compile(r"^\(?[A-Za-z][).:]$|^\([A-Za-z]\)[.,:;]?$")
_LONE_LETTER = re.compile(r"^[\"'(]?([A-Za-z])[\"')]?[.,;:?!]?$")
_TRAILING = ".,;:?!"


def _protected_token(token: str) -> bool:
    if any(ch.isdigit() for ch in token) or any(ch in _SYMBOLS for ch in token):
        return True
    if _OPTION_LABEL.match(token):
        return True
    lone = _LONE_LETTER.match(token)
    return lone is not None and lone.group(1) not in ("a", "A", "I")


def protected_spans(text: str) -> list[tuple[int, int]]:
    """Sorted, non-overlapping (start, end) spans of ``text`` that every perturbation keeps verbatim (module
    docstring); overlapping matches are merged. A protected token's trailing sentence punctuation is not part of
    its span."""
    spans: list[tuple[int, int]] = [m.span() for m in _BLOCKS.finditer(text)]
    covered = _covered(spans)
    for m in _TOKEN.finditer(text):
        start, end = m.span()
        if any(covered(i) for i in (start, end - 1)):
            continue
        token = m.group()
        if _protected_token(token):
            core = token.rstrip(_TRAILING) if not _OPTION_LABEL.match(token) else token
            spans.append((start, start + max(len(core), 1)))
    merged: list[tuple[int, int]] = []
    for s, e in sorted(spans):  # a token may enclose a block (label("$A$",(1,2))): one span, the union
        if merged and s < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def _covered(spans: list[tuple[int, int]]) -> Callable[[int], bool]:
    def inside(i: int) -> bool:
        return any(s <= i < e for s, e in spans)
    return inside


def protected_strings(text: str) -> Counter[str]:
    """The multiset of protected substrings of ``text``."""
    return Counter(text[s:e] for s, e in protected_spans(text))


def keeps_protected(original: str, variant: str) -> bool:
    """True when ``variant`` holds exactly the protected substrings of ``original``, each as often (none changed,
    dropped or added): the filter that LLM-written variants pass before they are kept."""
    return protected_strings(original) == protected_strings(variant)


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
