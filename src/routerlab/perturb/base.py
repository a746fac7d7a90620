"""Perturbation levels and the driver that makes p variants per query per level (SPEC 3; hse paper sec. 5.1).

A level is a :class:`Perturber` registered by name with ``@register_level``: ``character``, ``word`` and
``syntax`` are offline and deterministic given the seed; ``paraphrase`` and ``rambling`` are written by an LLM
backend (``offline = False``) and are reported as not generated when none is configured, never faked. Third-party
levels join through the ``routerlab.perturbations`` entry-point group.

:func:`perturb` asks each level for candidates and keeps, per query and level, up to p of them that are distinct,
differ from the original and keep its protected spans (:mod:`routerlab.perturb.spans`). Every query has its own
random stream per level (derived from the seed, the query id and the level), so a query's variants do not depend
on which other queries are perturbed with it, nor on their order.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np
import numpy.typing as npt

from routerlab._registry import Registry
from routerlab.errors import UsageError
from routerlab.perturb.spans import keeps_protected, ordered_strings

if TYPE_CHECKING:
    from routerlab.data.table import RoutingTable
    from routerlab.features.registry import Encoder
    from routerlab.llm.base import Backend
    from routerlab.perturb.similarity import Similarity

LEVELS: tuple[str, ...] = ("character", "word", "syntax", "paraphrase", "rambling")
"""The five levels of the paper's taxonomy, in increasing semantic distance (SPEC 3)."""
OFFLINE_LEVELS: tuple[str, ...] = ("character", "word", "syntax")
LLM_LEVELS: tuple[str, ...] = ("paraphrase", "rambling")
MAX_VARIANTS = 100
"""The most variants per query per level: the paper keeps 5 of 10 asked (hse appendix 11); 100 is far beyond any
use and keeps a typo from asking an LLM for a million rewrites."""
DEFAULT_ASK = 10
"""Rewrites an LLM level is asked for per query (the paper asks 10 and keeps distinct ones)."""
NO_BACKEND = ("not generated: no LLM backend configured (give --backend KIND:MODEL, or bring variants with "
              "--variants-file)")


@dataclass(frozen=True)
class Variant:
    """Variant number ``variant`` (0-based) of query ``query_id`` at ``level``: one line of a variants file."""

    query_id: str
    level: str
    variant: int
    text: str
    similarity: float | None = None
    """The cosine of this variant's encoder vector to its original's (:mod:`routerlab.perturb.similarity`)."""
    encoder: str | None = None
    """The encoder ``similarity`` was measured with (``minilm``, ``tfidf``)."""

    def to_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"query_id": self.query_id, "level": self.level, "variant": self.variant,
                               "text": self.text}
        if self.similarity is not None:
            out["similarity"] = self.similarity
            out["encoder"] = self.encoder
        return out

    @property
    def key(self) -> str:
        """``query_id#level#variant``: the query id of this variant in a table of variant outcomes."""
        return variant_id(self.query_id, self.level, self.variant)


def variant_id(query_id: str, level: str, variant: int) -> str:
    """The id of a variant's row in a table of variant outcomes (``routerlab collect --variants``)."""
    return f"{query_id}#{level}#{variant}"


class Perturber(ABC):
    """One perturbation level. Subclasses set ``level``, ``offline`` and ``summary`` and implement
    :meth:`candidates`; :func:`perturb` filters what they return (distinct, not the original, protected spans
    kept), so a level may return more candidates than asked for, or fewer."""

    level: ClassVar[str]
    summary: ClassVar[str] = ""
    offline: ClassVar[bool] = True
    meaning_preserving: ClassVar[bool] = True
    """False for a level that changes the meaning on purpose (``control``, SPEC 3's falsifier): its variants are
    marked so and left out of every summary of rho over levels."""
    similarity_filter: ClassVar[bool] = False
    """Whether :func:`perturb` drops this level's candidates below the encoder's similarity threshold (the word
    level: a synonym in the wrong sense moves the sentence away from its original)."""

    def __init__(self, backend: Backend | None = None, **options: Any) -> None:
        if not self.offline and backend is None:
            raise UsageError(f"perturbation level {self.level!r} needs an LLM backend")
        if options:
            raise UsageError(f"perturbation level {self.level!r} has no option {sorted(options)}")
        self.backend = backend
        self.dropped = 0  # candidates the level itself discarded (e.g. an LLM reply that answers instead)
        self.counts: Counter[str] = Counter()  # the level's own counts, copied into the run's stats as they are

    @abstractmethod
    def candidates(self, texts: Sequence[str], p: int, rngs: Sequence[np.random.Generator]) -> list[list[str]]:
        """Candidate variants of each text (about p each; more is fine), drawing randomness only from that
        text's ``rngs[i]``. A batch, so LLM levels can batch their calls."""

    def settings(self) -> dict[str, Any]:
        """What determines this level's output besides the text and the seed (provenance)."""
        return {}

    def keep(self, original: str, candidates: Sequence[str], p: int | None) -> tuple[list[str], int]:
        """The candidates :func:`perturb` keeps (:func:`keep_variants`) and how many altered a protected span; a
        level that edits a protected span on purpose (``control`` changes a number) narrows the check."""
        return keep_variants(original, candidates, p)


P = TypeVar("P", bound=type[Perturber])
_REGISTRY: Registry[type[Perturber]] = Registry(
    "perturbation level", package="routerlab.perturb", group="routerlab.perturbations"
)


def register_level(name: str) -> Callable[[P], P]:
    """Class decorator: register a :class:`Perturber` under ``name`` (also set as its ``level``)."""

    def decorate(cls: P) -> P:
        cls.level = name
        _REGISTRY.add(name, cls)
        return cls

    return decorate


def level_class(name: str) -> type[Perturber]:
    """The perturber class of level ``name``; an unknown name is a UsageError listing the known ones."""
    return _REGISTRY.get(name)


def level_names() -> list[str]:
    """Every registered level: the paper's five first, in their order, then plugins by name."""
    names = _REGISTRY.names()
    return [n for n in LEVELS if n in names] + sorted(n for n in names if n not in LEVELS)


def parse_levels(text: str, *, option: str = "--levels") -> list[str]:
    """A comma list of level names (``all`` = the paper's five), each once; bad input is a one-line UsageError."""
    parts = [p.strip() for p in text.split(",")]
    if parts == ["all"]:
        return list(LEVELS)
    if not text.strip() or any(not p for p in parts):
        raise UsageError(f"{option} {text!r}: write a comma list of levels, e.g. character,word,syntax "
                         f"(known: {', '.join(level_names())}, or all)")
    known = level_names()
    for p in parts:
        if p not in known:
            raise UsageError(f"{option}: unknown level {p!r}; known: {', '.join(known)}, or all")
    if len(set(parts)) != len(parts):
        raise UsageError(f"{option} {text!r}: a level is named twice")
    return parts


def level_rng(seed: int, query_id: str, level: str) -> np.random.Generator:
    """The random stream of one query at one level: a function of (seed, query id, level) only."""
    digest = hashlib.sha256(f"{seed}\x1f{query_id}\x1f{level}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "little"))


def keep_variants(original: str, candidates: Sequence[str], p: int | None,
                  protected_of: Callable[[str], Counter[str]] | None = None) -> tuple[list[str], int]:
    """Up to ``p`` (None: every) candidates in order that are distinct (after trimming whitespace), differ from the
    original and keep its protected spans (:func:`routerlab.perturb.spans.keeps_protected`: the same protected
    strings, the structural ones in the same order; a level that changes some protected strings on purpose, the
    control level's numbers, passes ``protected_of``: the multiset of a text's strings that must stay, the
    structural order kept too); also returns how many were rejected for altering a protected span."""
    seen = {original.strip()}
    kept: list[str] = []
    rejected = 0
    protected = protected_of(original) if protected_of is not None else None
    order = ordered_strings(original) if protected_of is not None else None
    for cand in candidates:
        text = cand.strip()
        if not text or text in seen:
            continue
        if not (keeps_protected(original, text) if protected_of is None
                else protected_of(text) == protected and ordered_strings(text) == order):
            rejected += 1
            continue
        seen.add(text)
        kept.append(text)
        if len(kept) == p:
            break
    return kept, rejected


@dataclass(frozen=True)
class PerturbationSet:
    """The variants of some queries: at most ``p`` per query per level. ``not_generated`` names the levels asked
    for but not produced, with the reason (an LLM level without a backend); ``stats`` per level: queries,
    variants, queries with fewer than p, candidates rejected for altering a protected span, candidates the level
    itself dropped (an LLM reply that answers the question instead of rewriting it); ``settings`` per
    level: what determined it (provenance)."""

    variants: tuple[Variant, ...]
    levels: tuple[str, ...]
    p: int
    seed: int | None = None
    not_generated: Mapping[str, str] = field(default_factory=dict)
    stats: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.variants)

    @property
    def generated_levels(self) -> list[str]:
        """The levels that have at least one variant, in ``levels`` order."""
        have = {v.level for v in self.variants}
        return [lv for lv in self.levels if lv in have]

    def grid(self, query_ids: Sequence[str]) -> tuple[list[str], npt.NDArray[np.intp]]:
        """The column layout the robustness metrics read: for each generated level, ``p`` columns (variant 0..p-1);
        returns the level of each column and an (n, columns) matrix of indices into ``variants`` (-1 where the
        query has no such variant)."""
        levels = self.generated_levels
        col = {(lv, j): k * self.p + j for k, lv in enumerate(levels) for j in range(self.p)}
        row = {str(q): i for i, q in enumerate(query_ids)}
        out = np.full((len(row), len(levels) * self.p), -1, dtype=np.intp)
        for idx, v in enumerate(self.variants):
            i = row.get(v.query_id)
            c = col.get((v.level, v.variant))
            if i is not None and c is not None:
                out[i, c] = idx
        return [lv for lv in levels for _ in range(self.p)], out

    def for_queries(self, query_ids: Sequence[str]) -> PerturbationSet:
        """The variants of ``query_ids`` only."""
        keep = {str(q) for q in query_ids}
        return PerturbationSet(tuple(v for v in self.variants if v.query_id in keep), self.levels, self.p,
                               self.seed, self.not_generated, self.stats, self.settings)

    def describe(self) -> dict[str, Any]:
        """A JSON-ready summary (provenance of a robustness run)."""
        return {"levels": list(self.levels), "p": self.p, "seed": self.seed, "n_variants": len(self.variants),
                "not_generated": dict(self.not_generated), "stats": {k: dict(v) for k, v in self.stats.items()},
                "settings": {k: dict(v) for k, v in self.settings.items()}}


def perturb(
    ids: Sequence[str],
    texts: Sequence[str],
    levels: Sequence[str],
    p: int,
    *,
    seed: int = 0,
    backend: Backend | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    similarity: Similarity | str | Encoder | None = None,
) -> PerturbationSet:
    """Up to ``p`` variants of every text at every level (module docstring). An LLM level without ``backend`` is
    listed in ``not_generated``; ``options`` gives per-level options (e.g. ``{"paraphrase": {"ask": 4}}``).
    ``similarity`` scores every variant against its original (a :class:`~routerlab.perturb.similarity.Similarity`,
    or an encoder spec; None: the default encoder, tf-idf fitted on ``texts``); a level with
    ``similarity_filter`` keeps only candidates at or above its threshold."""
    if isinstance(p, bool) or not isinstance(p, int) or p < 1:
        raise UsageError(f"the number of variants per level must be an integer >= 1, got {p!r}")
    if len(ids) != len(texts):
        raise UsageError(f"{len(ids)} query ids for {len(texts)} texts")
    if len(set(map(str, ids))) != len(ids):
        raise UsageError("query ids must be unique")
    from routerlab.perturb.similarity import Similarity

    variants: list[Variant] = []
    not_generated: dict[str, str] = {}
    stats: dict[str, dict[str, int]] = {}
    settings: dict[str, dict[str, Any]] = {}
    scorer: Similarity | None = similarity if isinstance(similarity, Similarity) else None
    for level in levels:
        cls = level_class(level)
        if not cls.offline and backend is None:
            not_generated[level] = NO_BACKEND
            continue
        perturber = cls(backend=backend, **dict((options or {}).get(level, {})))
        rngs = [level_rng(seed, str(q), level) for q in ids]
        cands = perturber.candidates([str(t) for t in texts], p, rngs)
        if len(cands) != len(texts):
            raise RuntimeError(f"perturbation level {level!r} returned {len(cands)} candidate lists for "
                               f"{len(texts)} texts")
        if scorer is None:
            assert not isinstance(similarity, Similarity)
            scorer = Similarity(similarity, [str(t) for t in texts])
        threshold = scorer.threshold if cls.similarity_filter else None
        rejected = 0
        pools: list[list[str]] = []
        for text, cand in zip(texts, cands, strict=True):
            kept, bad = perturber.keep(str(text), cand, None if threshold is not None else p)
            rejected += bad
            pools.append(kept)
        sims = scorer.cosines([str(t) for t, pool in zip(texts, pools, strict=True) for _ in pool],
                              [v for pool in pools for v in pool]).tolist()
        short = made = below = 0
        at = 0
        for qid, pool in zip(ids, pools, strict=True):
            scored = list(zip(pool, sims[at:at + len(pool)], strict=True))
            at += len(pool)
            if threshold is not None:
                below += sum(sim < threshold for _, sim in scored)
                scored = [(t, sim) for t, sim in scored if sim >= threshold]
            scored = scored[:p]
            short += len(scored) < p
            made += len(scored)
            variants.extend(Variant(str(qid), level, j, t, sim, scorer.name) for j, (t, sim) in enumerate(scored))
        stats[level] = {"queries": len(texts), "variants": made, "short": short, "rejected": rejected,
                        "dropped": perturber.dropped}
        if threshold is not None:
            stats[level]["below_similarity"] = below
        stats[level].update(perturber.counts)
        settings[level] = {**perturber.settings(), "similarity_encoder": scorer.name,
                           "min_similarity": threshold}
    return PerturbationSet(tuple(variants), tuple(levels), p, seed, not_generated, stats, settings)


def perturb_queries(table: RoutingTable, positions: Any, levels: Sequence[str], p: int, seed: int,
                    backend: Backend | None, ask: int = DEFAULT_ASK,
                    similarity: Similarity | str | Encoder | None = None) -> PerturbationSet:
    """Up to p variants of the queries of ``table`` at ``positions`` at every level (SPEC 3), seeded per query and
    level; the LLM levels ask for ``ask`` rewrites per call. Variants are scored with ``similarity`` (default: the
    default encoder; tf-idf is fitted on every query text of the table, so a query's variants do not depend on
    which of its queries are perturbed)."""
    ids = [str(x) for x in table.queries.ids[positions].tolist()]
    texts = [str(x) for x in table.queries.text[positions].tolist()]
    if not ids:
        raise UsageError("no queries to perturb in that part of the split")
    llm_options = {"ask": ask}
    from routerlab.perturb.similarity import Similarity

    if not isinstance(similarity, Similarity):
        similarity = Similarity(similarity, [str(x) for x in table.queries.text.tolist()])
    return perturb(ids, texts, levels, p, seed=seed, backend=backend,
                   options={"paraphrase": llm_options, "rambling": llm_options}, similarity=similarity)
