"""Where each definition comes from, in words a user can follow: the paper and its section.

routerlab's definitions are pinned down section by section in a developers' specification (sections 1-9: the
data, society diversity, routing robustness, many-model routing, latency-aware routing, two-model routing, what
every result carries, decisions on a development split, grading). Users have the papers, not that file, so
nothing a user reads cites it: help text, console output, findings, the report, errors and the user docs name
the paper and the section instead, e.g. "RouterWorld, section 3.3". This module is the one mapping from a
specification section to that citation; :func:`cite` writes it. Code comments and docstrings for developers
may keep their "SPEC n" references.

Standard library only, so every layer can cite.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """A section of a paper (``paper`` its short name, ``section`` the place in it), or a rule routerlab makes
    itself where no paper gives one (``paper`` is ``"routerlab"``)."""

    paper: str
    section: str

    def __str__(self) -> str:
        return OWN_RULE if self.paper == "routerlab" else f"{self.paper}, {self.section}"


OWN_RULE = "routerlab's own rule"
"""How a definition no paper gives is cited: the intervals, the development split, grading."""

PAPERS: dict[str, str] = {
    "RouterWorld": "RouterWorld: Scaling Conversational AI with Latency-Aware LLM Routing",
    "RouterEval": "RouterEval: A Comprehensive Benchmark for Routing LLMs to Explore Model-level Scaling Up in LLMs "
                  "(Huang et al., 2025)",
    "RouterXBench": "Towards Fair and Comprehensive Evaluation of Routers in Collaborative LLM Systems "
                    "(RouterXBench, ProbeDirichlet)",
    "the HSE paper": "arXiv 2607.09197: society diversity by Hierarchic Social Entropy (HSE), and routing robustness "
                     "under meaning-preserving perturbations",
}
"""Each paper a citation names, by its short name: the full reference."""

SPEC_SOURCES: dict[str, Source] = {
    "1": Source("RouterWorld", "section 3"),  # the data: routing table, observability; latency model = its eq. 1
    "2": Source("the HSE paper", "section 4"),  # society diversity (HSE, coresets, specialist societies)
    "3": Source("the HSE paper", "section 5"),  # routing robustness rho, perturbation levels
    "4": Source("RouterEval", "sections 3, 4.2 and 5.1"),  # r_o(p), scaling (3); groups (4.2); mu_o, V_B, E_p (5.1)
    "5": Source("RouterWorld", "sections 3.3 and 4.4"),  # cold-start, Voyager (3.3); Acc@1, Acc@1-L, DCG, L-DCG (4.4)
    "6": Source("RouterXBench", "section 3"),  # call-rate curve, AUROC, LPM, MPM, HCR
    "7": Source("routerlab", "7"),  # what every result carries: 95% bootstrap intervals, provenance
    "8": Source("routerlab", "8"),  # decisions on a development split
    "9": Source("routerlab", "9"),  # grading and judges
}
"""The one mapping from a specification section to what a user is told to read."""


def source(section: str) -> Source:
    """The source of specification section ``section`` ("1" to "9"); a ValueError for any other."""
    try:
        return SPEC_SOURCES[str(section)]
    except KeyError:
        raise ValueError(f"no specification section {section!r}; known: {', '.join(SPEC_SOURCES)}") from None


def cite(*sections: str) -> str:
    """The citation of one or more specification sections: ``cite("6")`` -> ``RouterXBench, section 3``;
    sections of one paper are merged (``cite("2", "3")`` -> ``the HSE paper, sections 4 and 5``) and a repeated
    source is named once."""
    if not sections:
        raise ValueError("cite needs at least one specification section")
    by_paper: dict[str, list[str]] = {}
    for s in sections:
        src = source(s)
        places = by_paper.setdefault(src.paper, [])
        if src.section not in places:
            places.append(src.section)
    parts = []
    for paper, places in by_paper.items():
        if len(places) > 1:  # "sections 3.3 and 4.4" merged with "section 3": name each section once
            places = list(dict.fromkeys(p for place in places for p in _numbers(place)))
        if paper == "routerlab":
            parts.append(OWN_RULE)
        elif len(places) == 1:
            parts.append(f"{paper}, {places[0]}")
        else:
            parts.append(f"{paper}, sections {', '.join(places[:-1])} and {places[-1]}")
    return "; ".join(parts)


def _numbers(place: str) -> list[str]:
    """``"sections 3.3 and 4.4"`` -> ``["3.3", "4.4"]``."""
    return re.findall(r"[0-9]+(?:\.[0-9]+)*", place)


def cite_sections(text: str) -> str:
    """The citation of sections listed as text, as a protocol declares them (``"SPEC 4, 5, 7"``, ``"4, 5"``);
    empty when the text names none."""
    sections = re.findall(r"[0-9]+", text)
    return cite(*sections) if sections else ""


_SPEC_REF = re.compile(r"\bSPEC ([1-9](?:(?:, ?|-)[1-9])*)\b")


def resolve(text: str) -> str:
    """``text`` with each developers' reference "SPEC 4" (or "SPEC 1, 5", "SPEC 4-5") replaced by its citation,
    for text written once for both audiences (a command's docstring is its help; a table's record of a derived
    column is shown by ``routerlab info``). A placeholder such as ``--backend SPEC`` has no number and stays."""

    def one(match: re.Match[str]) -> str:
        sections: list[str] = []
        for part in re.split(r", ?", match.group(1)):
            lo, _, hi = part.partition("-")
            sections += [str(s) for s in range(int(lo), int(hi or lo) + 1)]
        return cite(*sections)

    return _SPEC_REF.sub(one, text)


def references() -> str:
    """One line naming every paper a citation may name: ``RouterWorld = RouterWorld: Scaling ...; ...``."""
    return "; ".join(f"{short} = {full}" for short, full in PAPERS.items())
