"""Counts in words: ``1 request``, ``2 requests``, ``1 query repeats``, ``3 queries repeat``.

Every count routerlab prints (console lines, findings, the report, warnings) goes through :func:`plural`, so that
a run that happens to hold one request, query or actor does not print "1 requests". Standard library only.
"""

from __future__ import annotations

_IRREGULAR = {"query": "queries", "entry": "entries", "family": "families", "child": "children"}


def noun(n: int, singular: str, many: str | None = None) -> str:
    """``singular`` when ``n`` is 1, else its plural (``many``, an irregular one, or ``singular`` + s/es)."""
    if n == 1:
        return singular
    if many is not None:
        return many
    if singular in _IRREGULAR:
        return _IRREGULAR[singular]
    if singular.endswith(("s", "x", "ch", "sh")):
        return singular + "es"
    return singular + "s"


def plural(n: int, singular: str, many: str | None = None) -> str:
    """``n`` with its noun agreeing: ``plural(1, "request")`` -> ``1 request``, ``plural(3, "query")`` ->
    ``3 queries``; a number formatted by the caller may be passed as ``n`` only when it is an int."""
    return f"{n} {noun(n, singular, many)}"


def verb(n: int, singular: str, many: str) -> str:
    """The verb agreeing with a count: ``verb(1, "has", "have")`` -> ``has``."""
    return singular if n == 1 else many
