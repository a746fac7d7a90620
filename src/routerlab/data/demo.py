"""The embedded demo benchmark: a synthetic routing table routerlab generates itself, from a seed.

It is **synthetic**, made so that routing questions have real answers: six domains of templated
queries whose wording carries the domain and a difficulty cue; eight fictional actors with
domain-specific skills, latency profiles of the kind routerworld.txt Table 4 measures (TTFT 13 ms to
5.7 s, ITL 3.5 to 19 ms) and per-1M-token prices; and 0/1 scores drawn from a two-parameter
item-response model, P(correct) = sigmoid(discrimination_q * (skill[actor, domain] - difficulty_q)).
Tokens come from per-actor verbosity, latency and cost from SPEC 1. No number in it is real data.

The query metadata ``difficulty`` and ``tier`` are the generator's latent variables: hidden from routers (a
deployed router never knows them), kept for reports. A router must read the difficulty cue from the text.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from routerlab.data.table import Actors, Queries, RoutingTable

DOMAINS: tuple[str, ...] = ("math", "code", "science", "law", "commonsense", "trivia")


@dataclass(frozen=True)
class _Actor:
    name: str
    params_b: float
    ttft_ms: float
    itl_ms: float
    input_price: float
    output_price: float
    verbosity: float  # median output tokens on an average query
    skill: tuple[float, ...]  # one per DOMAINS entry, on the difficulty scale


# Latency profiles follow the shape of routerworld Table 4 (small models ~13-120 ms TTFT, large
# ones seconds). Skills: the frontier actor is the best single actor, but in four domains a
# specialist beats it (math-7b, coder-7b, reasoner-9b on science, large-120b on law), so a router
# that reads the query can beat always calling the best single actor.
_ACTORS: tuple[_Actor, ...] = (
    _Actor("tiny-2b", 2, 12.6, 4.0, 0.02, 0.04, 90, (-1.2, -1.4, -0.6, -0.9, 0.6, 0.2)),
    _Actor("coder-7b", 7, 14.2, 5.2, 0.05, 0.10, 160, (-0.6, 2.4, -0.5, -1.2, -0.2, -0.8)),
    _Actor("math-7b", 7, 117.2, 4.4, 0.05, 0.10, 220, (2.4, -0.3, 0.2, -1.3, -0.4, -0.9)),
    _Actor("general-7b", 7, 100.2, 4.1, 0.05, 0.10, 140, (-0.4, -0.3, 0.0, 0.0, 0.9, 0.6)),
    _Actor("mid-20b", 20, 1137.5, 4.1, 0.10, 0.40, 260, (0.5, 0.5, 0.6, 0.5, 0.9, 0.7)),
    _Actor("reasoner-9b", 9, 5733.6, 6.3, 0.08, 0.25, 420, (1.1, 0.6, 2.3, 0.9, 0.8, 0.3)),
    _Actor("large-120b", 120, 1212.6, 6.0, 0.30, 1.20, 300, (1.0, 1.0, 1.1, 2.3, 1.1, 1.5)),
    _Actor("frontier-235b", 235, 2258.1, 18.8, 0.90, 3.00, 380, (1.4, 1.3, 1.4, 1.4, 1.4, 1.9)),
)

_EASY, _HARD = 0, 2
_TEMPLATES: dict[str, tuple[tuple[str, ...], ...]] = {
    # (easy, medium, hard) templates per domain; {a}..{d} are numbers, {w} a domain word.
    "math": (
        ("What is {a} plus {b}?", "Compute {a} times {c}.", "Round {a}.{b} to the nearest integer."),
        ("Solve for x: {a}x + {b} = {c}.", "A train travels {a} km in {c} hours; what is its average speed?",
         "What is the remainder when {a}{b} is divided by {c}?"),
        ("Prove that the sum of the first {a} odd numbers is a perfect square, step by step.",
         "Find all integer solutions of x^2 - {c}y^2 = 1 with x < {a}{b}, showing each step.",
         "Evaluate the integral of x^{c} times e^x from 0 to {d}, explaining the {w} method."),
    ),
    "code": (
        ("Write a Python function that returns the maximum of a list of {a} numbers.",
         "Write a function to reverse a string of length {a}.", "Write a Python one-liner that sums {a} to {b}."),
        ("Write a Python function that merges two sorted lists using a {w}.",
         "Implement binary search over an array of {a} integers and return the index.",
         "Write a function that parses a CSV line with {c} quoted fields."),
        ("Implement a thread-safe LRU cache with capacity {a} and O(1) {w} operations, with tests.",
         "Write an interpreter for arithmetic expressions with {c} precedence levels and a {w}.",
         "Design a Python generator pipeline that deduplicates {a}{b} records by a rolling {w}."),
    ),
    "science": (
        ("What gas do plants release during {w}?", "What is the chemical symbol of element {c}?",
         "How many chambers does the human heart have?"),
        ("Explain why the sky looks blue, in terms of {w} scattering.",
         "A {a} kg object falls for {c} seconds; what is its speed, ignoring air resistance?",
         "Which organelle performs {w}, and how?"),
        ("Derive the energy levels of a particle in a box of width {c} nm and relate them to {w}.",
         "Explain how {w} regulates gene expression in eukaryotes, citing the {a} key steps.",
         "Estimate the {w} of a protein with {a}{b} residues from first principles."),
    ),
    "law": (
        ("What is a {w} in contract law?", "Who signs a bill into law in a presidential system?",
         "What does the term {w} mean in a lease?"),
        ("Is a verbal agreement worth {a}{b} dollars enforceable without a {w}?",
         "Explain the difference between a {w} and a misdemeanour.",
         "Can a tenant withhold rent after {c} weeks without heating?"),
        ("Analyse whether the {w} doctrine bars a claim filed {c} years after discovery, citing precedent.",
         "Draft the holding of an appellate court on {w} under a statute with {c} conflicting clauses.",
         "Assess liability of {c} joint tortfeasors for {w} under comparative negligence."),
    ),
    "commonsense": (
        ("If it rains, what do people usually carry to stay dry near a {w}?",
         "Where would you put {a} eggs to keep them fresh?", "What do you use to cut {w}?"),
        ("Tom left his {w} outside in winter for {c} days; what most likely happened to it?",
         "Why would someone whisper in a {w}?", "Which is heavier: {a} feathers or one {w}?"),
        ("Order these {c} everyday events by when they usually happen and justify the {w}.",
         "A {w} is locked and the key is inside; list {c} sensible steps and why.",
         "Explain the unstated assumption in: the {w} was late, so dinner was cold."),
    ),
    "trivia": (
        ("What is the capital of {w}?", "How many players are on a {w} team?", "Who wrote {w}?"),
        ("In which year did the {w} begin?", "Which river flows through {w}?",
         "Who painted the {w} in the {c}th century?"),
        ("Name the {c} monarchs who ruled {w} between {a}{b} and {a}{d}.",
         "Which composer wrote a symphony nicknamed after a {w}, and in which key?",
         "Which element was named after the {w}, and who isolated it first?"),
    ),
}
_WORDS: dict[str, tuple[str, ...]] = {
    "math": ("substitution", "parts", "induction", "contour", "series", "symmetry", "telescoping",
             "generating-function", "Lagrange", "matrix", "modular", "geometric"),
    "code": ("heap", "hash map", "trie", "tokenizer", "window", "deque", "segment tree", "bitset",
             "ring buffer", "skip list", "union-find", "bloom filter"),
    "science": ("photosynthesis", "Rayleigh", "methylation", "entropy", "folding", "osmosis", "fission",
                "respiration", "diffraction", "catalysis", "mitosis", "convection"),
    "law": ("consideration", "felony", "writ", "estoppel", "negligence", "easement", "tort", "lien",
            "injunction", "indemnity", "subpoena", "covenant"),
    "commonsense": ("bicycle", "library", "bread", "door", "oven", "umbrella", "garden", "kettle",
                    "backpack", "window", "candle", "ladder"),
    "trivia": ("Portugal", "rugby", "Hamlet", "Crimean War", "Danube", "Norway", "cricket", "Faust",
               "Thirty Years' War", "Rhine", "Peru", "Mona Lisa"),
}
_OPENERS: tuple[str, ...] = ("", "", "", "Quick question: ", "Please answer briefly. ", "I need help with this. ",
                             "For a quiz: ", "Be precise. ", "From my notes: ", "Question {d}: ")
_DOMAIN_DIFFICULTY = (0.3, 0.2, 0.0, 0.4, -0.6, -0.2)


DEFAULT_QUERIES = 3000
"""The demo's size when none is asked for."""


def demo(n_queries: int = DEFAULT_QUERIES, seed: int = 0, test_fraction: float = 0.2) -> RoutingTable:
    """The demo benchmark: ``n_queries`` queries over six domains x eight actors, deterministic in ``seed``.

    Splits are ``train``/``test`` (random, stratified by domain). Scores are 0/1; tokens, latency
    and cost are filled for every cell. See the module docstring: everything here is synthetic.
    """
    if n_queries < len(DOMAINS) * 2:
        raise ValueError(f"n_queries must be at least {len(DOMAINS) * 2}")
    rng = np.random.default_rng(seed)
    d = rng.integers(0, len(DOMAINS), n_queries)
    tier = rng.choice(3, size=n_queries, p=(0.35, 0.4, 0.25))
    difficulty = (np.asarray(_DOMAIN_DIFFICULTY)[d] + (tier - 1) * 1.1 + rng.normal(0, 0.6, n_queries))
    discrimination = rng.lognormal(0.4, 0.25, n_queries)
    text = _texts(rng, d, tier)

    skill = np.array([a.skill for a in _ACTORS])  # (m, domains)
    logits = discrimination[:, None] * (skill[:, d].T - difficulty[:, None])
    score = (rng.random(logits.shape) < 1.0 / (1.0 + np.exp(-logits))).astype(np.float32)

    verbosity = np.array([a.verbosity for a in _ACTORS])
    length = np.exp(0.35 * (tier - 1))[:, None] * verbosity[None, :]
    tokens_out = np.maximum(1, np.round(length * rng.lognormal(0.0, 0.45, logits.shape))).astype(np.float32)
    words = np.array([len(t.split()) for t in text], dtype=np.float32)
    tokens_in = np.repeat((np.round(words * 1.3) + 24)[:, None], len(_ACTORS), axis=1)

    split = np.full(n_queries, "train", dtype=object)
    for k in range(len(DOMAINS)):
        rows = np.flatnonzero(d == k)
        split[rng.permutation(rows)[: round(test_fraction * rows.size)]] = "test"

    queries = Queries.create(
        [f"demo-{i:05d}" for i in range(n_queries)],
        text=text,
        dataset=np.asarray(DOMAINS, dtype=object)[d],
        split=split,
        extra={"difficulty": difficulty.round(4), "tier": np.asarray(["easy", "medium", "hard"], dtype=object)[tier]},
        visible=(),  # both are the generator's latent variables: hidden from routers
    )
    actors = Actors.create(
        [a.name for a in _ACTORS],
        params_b=[a.params_b for a in _ACTORS],
        ttft_ms=[a.ttft_ms for a in _ACTORS],
        itl_ms=[a.itl_ms for a in _ACTORS],
        input_price=[a.input_price for a in _ACTORS],
        output_price=[a.output_price for a in _ACTORS],
    )
    return RoutingTable(
        queries=queries,
        actors=actors,
        score=score,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        name=f"demo(seed={seed})",
        meta={"source": "routerlab synthetic demo benchmark (not real data)", "seed": seed,
              "generator": "2PL item-response model, see routerlab.data.demo"},
    )


def _texts(rng: np.random.Generator, d: npt.NDArray[np.int64], tier: npt.NDArray[np.int64]) -> list[str]:
    """One templated query per row; numbers and words are drawn so texts rarely repeat."""
    n = d.shape[0]
    out: list[str] = []
    seen: set[str] = set()
    for i in range(n):
        dom = DOMAINS[d[i]]
        for _ in range(20):  # redraw a repeated text a few times; the rare survivor stays a duplicate
            a, b, c, e = rng.integers(2, 99, size=4)
            tmpl = _OPENERS[rng.integers(len(_OPENERS))] + _TEMPLATES[dom][tier[i]][rng.integers(3)]
            text = tmpl.format(a=a, b=b, c=c, d=e, w=_WORDS[dom][rng.integers(len(_WORDS[dom]))])
            if text not in seen:
                break
        seen.add(text)
        out.append(text)
    return out
