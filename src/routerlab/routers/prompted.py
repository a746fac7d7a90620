"""The ``prompted`` router (HSE paper, sec. 5 and appendix 12): an LLM reads the actors' descriptions and
few-shot exemplars of training queries with their best actor, and names the actor for each new query.

Exemplars (appendix 12.2): for each actor, ``k`` training queries where it is the *clear winner* (its score
exceeds every other observed actor's by at least ``delta``), drawn with the router's seed; where fewer than
``k`` qualify, all of those are kept and the rest is drawn from the queries where the actor has the highest
score (ties allowed). The exemplars of all actors are shuffled together. They are fixed at fit time.

Two modes: ``generate`` asks for the letter of the best actor and parses the answer (one-hot scores; an
answer naming no actor of the pool is a counted parse failure routed to the ``fallback`` actor);
``logits`` reads the next-token logits of the actor letters in one forward pass (scores = their
log-probabilities, so the selection distribution is the model's own, SPEC 4). Every call goes through the
backend's call cache when the router loads its backend itself (:func:`routerlab.llm.base.load_backend`).
See docs/prompted.md for the prompt, verbatim.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from routerlab._spec import Constraint, Interval, Options
from routerlab.data.table import Actors, RoutingTable, column_means
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.llm.base import Backend, Decoding, Message, parse_backend_spec
from routerlab.metrics.selection import softmax
from routerlab.routers.base import FloatMatrix, Router, register

LETTERS = string.ascii_uppercase  # one letter per actor: at most 26 actors
ELLIPSIS = " [...]"  # appended to a text cut at max_chars
# A score difference counts as >= delta up to this rounding slack: tables hold float32 scores, where
# 0.9 - 0.5 is 0.39999998, and a margin written as 0.4 must count as 0.4.
_MARGIN_SLACK = 1e-6

SYSTEM_INTRO = ("You are a router. For each query you choose the actor (a model or an agent) most likely to "
                "answer it best.")
MISSING_BACKEND = ("router 'prompted' needs an LLM backend: give --backend KIND:MODEL or "
                   "prompted:backend=KIND:MODEL")


class _Text(Options):
    """Any text (the ``backend`` spec, checked by :func:`parse_backend_spec` when the router is built)."""

    def __init__(self) -> None:
        super().__init__(frozenset())

    def describe(self) -> str:
        return "text"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str)


@dataclass(frozen=True)
class Exemplar:
    """One few-shot exemplar: training row ``row`` with its best actor ``actor`` (a column index);
    ``fallback`` is True when it was drawn from the actor's best (possibly tied) cases, not its clear wins."""

    row: int
    actor: int
    fallback: bool


def select_exemplars(score: npt.ArrayLike, k: int, delta: float, rng: np.random.Generator) -> list[Exemplar]:
    """Appendix 12.2's exemplars from a training score matrix (n, m) with NaN = unobserved: per actor, ``k``
    rows drawn from its clear wins (observed, and >= ``delta`` above every other observed cell of the row, of
    which there must be one);
    if fewer than ``k``, all of them plus rows drawn from its best cases (observed and equal to the row's
    maximum, ties allowed) up to ``k``; then all exemplars shuffled together. Deterministic for ``rng``."""
    s = np.asarray(score, dtype=np.float64)
    observed = ~np.isnan(s)
    filled = np.where(observed, s, -np.inf)
    row_max = filled.max(axis=1) if s.shape[1] else np.full(s.shape[0], -np.inf)
    out: list[Exemplar] = []
    for a in range(s.shape[1]):
        others = np.delete(filled, a, axis=1)
        if others.shape[1]:  # a clear win needs another observed actor to beat
            other_max = others.max(axis=1)
            beats = np.isfinite(other_max) & (filled[:, a] >= other_max + (delta - _MARGIN_SLACK))
        else:  # a single actor: every observed query
            beats = np.ones(s.shape[0], dtype=bool)
        clear = np.flatnonzero(observed[:, a] & beats)
        if clear.size >= k:
            out += [Exemplar(int(r), a, False) for r in rng.choice(clear, size=k, replace=False)]
            continue
        out += [Exemplar(int(r), a, False) for r in rng.permutation(clear)]
        best = np.flatnonzero(observed[:, a] & (filled[:, a] >= row_max))
        spare = np.setdiff1d(best, clear)
        take = min(k - clear.size, spare.size)
        out += [Exemplar(int(r), a, True) for r in rng.choice(spare, size=take, replace=False)]
    return [out[i] for i in rng.permutation(len(out))]


def truncate(text: str, max_chars: int) -> str:
    """``text`` stripped; one longer than ``max_chars`` is cut to its first ``max_chars`` characters and
    marked with `` [...]`` (keeps prompts bounded: a long query must not push the actors out of context)."""
    t = str(text).strip()
    return t if len(t) <= max_chars else t[:max_chars].rstrip() + ELLIPSIS


def actor_descriptions(actors: Actors) -> list[str]:
    """One line of text per actor: its ``description`` metadata where the table has one (appendix 12.3's
    descriptions), else its name, with its size when known (``7B parameters``)."""
    described = actors.extra.get("description")
    out = []
    for j, name in enumerate(actors.names.tolist()):
        text = "" if described is None else str(described[j] if described[j] is not None else "").strip()
        if text and text.lower() != "nan":
            out.append(f"{name}: {text}")
            continue
        size = float(actors.params_b[j])
        out.append(f"{name} ({size:g}B parameters)" if np.isfinite(size) and size > 0 else str(name))
    return out


def build_system_prompt(actors: Actors, exemplars: list[tuple[str, int]], max_chars: int) -> str:
    """The system message shared by every query: the actors by letter, then the exemplars (query text, best
    actor index) in their shuffled order. Shared so a backend can reuse its prefix across queries."""
    names = [str(n) for n in actors.names.tolist()]
    lines = [SYSTEM_INTRO, "", "Actors:"]
    lines += [f"{LETTERS[j]}. {d}" for j, d in enumerate(actor_descriptions(actors))]
    if exemplars:
        lines += ["", "Examples of queries and the actor that answered them best:"]
        for text, a in exemplars:
            lines += ["", f"Query: {truncate(text, max_chars)}", f"Best actor: {LETTERS[a]} ({names[a]})"]
    return "\n".join(lines)


def build_user_prompt(query: str, m: int, max_chars: int) -> str:
    """The user message of one query: the query, then the request for one letter."""
    letters = f"{LETTERS[0]}-{LETTERS[m - 1]}" if m > 1 else LETTERS[0]
    return (f"Query: {truncate(query, max_chars)}\n\n"
            f"Which actor should answer this query? Reply with the letter ({letters}) of the best actor only.")


# Letter forms accepted in a generated answer (uppercase letters only: a lowercase "a" is an English word).
_LETTER_FORMS = (
    re.compile(r"^\W*([A-Z])\W*$"),  # the whole answer is one letter: "B", "B.", "(B)", "**B**"
    re.compile(r"\(([A-Z])\)"),  # "(B)" anywhere
    re.compile(r"^\s*\W{0,2}([A-Z])(?:[).:\]]|\s+\()"),  # "B) ...", "B. ...", "B: ...", "B (name)" at the start
    re.compile(r"(?i:answer|best actor|actor|choice|option|letter)\s*(?:is\s*)?[:=\-]?\s*\**\(?([A-Z])\b"),
)


def parse_choice(answer: str, names: list[str]) -> int | None:
    """The actor an answer names, or None (a parse failure). Accepted: a letter of the pool alone or as
    ``B)``, ``(B)``, ``B.``, ``B (name)``, ``Answer: B`` / ``Best actor: B``, or an actor's name anywhere
    (case-insensitive, the longest name at a position). The match that starts first in the answer wins
    (a letter form before a name at the same place); a letter outside the pool is no match."""
    found = _matches(answer, names)
    return min(found)[2] if found else None


def named_actors(answer: str, names: list[str]) -> set[int]:
    """Every actor an answer names in any accepted form: more than one = an ambiguous answer (``A (beta)``
    where beta is B), which :func:`parse_choice` resolves by position and the router counts."""
    return {actor for _, _, actor in _matches(answer, names)}


def _matches(answer: str, names: list[str]) -> list[tuple[int, int, int]]:
    """(position, 0 = letter form / 1 = name, actor) of every accepted mention of an actor in ``answer``."""
    m = len(names)
    found: list[tuple[int, int, int]] = []  # (position, 0 = letter / 1 = name, actor)
    for form in _LETTER_FORMS:
        for hit in form.finditer(answer):
            j = LETTERS.find(hit.group(1))
            if 0 <= j < m:
                found.append((hit.start(1), 0, j))
    low = answer.lower()
    for j in sorted(range(m), key=lambda i: -len(names[i])):  # longest first: "gpt-4o" before "gpt-4"
        name = names[j].lower()
        pos = low.find(name) if name else -1
        if pos >= 0 and not any(p == pos and kind == 1 for p, kind, _ in found):
            found.append((pos, 1, j))
    return found


CONTENT_FREE = ("N/A", "", "[MASK]")
"""The content-free queries whose mean letter distribution is the prior that ``calibrate=true`` divides out (the
three of Zhao et al. 2021)."""


@register
class PromptedRouter(Router):
    """HSE's prompted router (appendix 12): an LLM picks the actor from their descriptions and few-shot
    exemplars (``k`` clear wins per actor by margin ``delta``). Options: ``backend`` (KIND:MODEL, ``;`` between
    its options; "" = a backend attached with :meth:`attach_backend`), ``k`` (4), ``delta`` (0.4), ``mode``
    (auto | generate | logits), ``max_chars`` (600, per text in the prompt), ``fallback`` (best | first: the
    actor of an unparsable answer), ``max_tokens`` (16, generate mode), ``calibrate`` (False; logits mode: divide
    out the letters' prior on content-free queries, contextual calibration)."""

    name = "prompted"
    summary = "an LLM picks the actor from actor descriptions and few-shot exemplars (HSE appendix 12)"
    needs_backend = True
    # None: the exemplars need every actor's score on a query (a clear win is a margin over all of them);
    # logged feedback has one actor per query, and a correct-only table would make every logged success
    # a "clear win" over actors never tried, which is not the paper's criterion.
    logged_recipe = None
    defaults: ClassVar[dict[str, Any]] = {"backend": "", "k": 4, "delta": 0.4, "mode": "auto", "max_chars": 600,
                                          "fallback": "best", "max_tokens": 16, "calibrate": False}
    constraints: ClassVar[dict[str, Constraint]] = {
        "backend": _Text(), "k": Interval(int, 1, None), "delta": Interval(float, 0, None),
        "mode": Options({"auto", "generate", "logits"}), "max_chars": Interval(int, 1, None),
        "fallback": Options({"best", "first"}), "max_tokens": Interval(int, 1, 4096),
        "calibrate": Options({True, False}),
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        spec = str(self.params["backend"]).strip()
        self._spec = parse_backend_spec(spec, option="router 'prompted': option backend") if spec else None
        self._backend: Backend | None = None
        self._attached: Backend | None = None
        self.calls = 0
        self.cached_calls = 0
        self.parse_failures = 0
        self.last_parse_failures = 0
        self.ambiguous = 0  # answers naming several actors (resolved by position, not failures)
        self.last_mode: str | None = None
        self.letter_prior: dict[str, float] = {}  # calibrate=true: the letters' content-free distribution
        self.last_answers: list[str] = []  # the raw answers of the last generate pass (to audit the parsing)
        self.exemplars: list[Exemplar] = []
        self.fallback_actor = 0
        self.system_prompt = ""

    # -- the backend --------------------------------------------------------------------
    def attach_backend(self, backend: Backend) -> PromptedRouter:
        """Hand the router an already-loaded backend (a protocol's or the CLI's ``--backend``); it is used
        when the router's own ``backend`` option is empty (a router spec's own backend wins)."""
        if not isinstance(backend, Backend):
            raise UsageError(f"router 'prompted': attach_backend needs a Backend, got {type(backend).__name__}")
        self._attached = backend
        return self

    def backend(self) -> Backend:
        """The backend the router calls: its own (``backend`` option, loaded once, cached calls), else the
        attached one; none is a UsageError saying how to give one."""
        if self._spec is not None:
            if self._backend is None:
                from routerlab.llm.base import load_backend

                self._backend = load_backend(self._spec)
            return self._backend
        if self._attached is not None:
            return self._attached
        raise UsageError(MISSING_BACKEND)

    def has_backend(self) -> bool:
        """Whether a backend is given (by option or attached), without loading it."""
        return self._spec is not None or self._attached is not None

    def _check_table(self, train: RoutingTable) -> None:
        if train.n_actors > len(LETTERS):
            raise UsageError(f"router 'prompted' names actors by letter A-Z: at most {len(LETTERS)} actors, "
                             f"the table has {train.n_actors}")
        if train.n_queries and not any(str(t).strip() for t in train.queries.text):
            raise UsageError("router 'prompted' shows the LLM training queries as exemplars, but this training "
                             "table has no query texts")

    # -- the router -----------------------------------------------------------------------
    def _fit(self, train: RoutingTable, features: Features) -> None:
        rng = np.random.default_rng([self.seed, 0x50524F4D])
        texts = train.queries.text
        score = np.array(train.score, dtype=np.float64)
        score[[not str(t).strip() for t in texts]] = np.nan  # a query without text cannot be shown
        self.exemplars = select_exemplars(score, int(self.params["k"]), float(self.params["delta"]), rng)
        shots = [(str(texts[e.row]), e.actor) for e in self.exemplars]
        self.system_prompt = build_system_prompt(train.actors, shots, int(self.params["max_chars"]))
        if self.params["fallback"] == "best":
            means = np.nan_to_num(column_means(train.score), nan=-np.inf)
            self.fallback_actor = int(np.argmax(means))
        else:
            self.fallback_actor = 0

    def messages(self, query: str) -> list[Message]:
        """The chat of one query: the shared system message (actors, exemplars) and the query's user message."""
        m = len(self.actor_names)
        return [Message("system", self.system_prompt),
                Message("user", build_user_prompt(query, m, int(self.params["max_chars"])))]

    def resolved_mode(self, backend: Backend) -> str:
        """``generate`` or ``logits``: ``auto`` is logits where the backend gives letter logits (local)."""
        mode = str(self.params["mode"])
        if mode == "auto":
            return "logits" if backend.supports_choice_scores else "generate"
        return mode

    def _scores(self, features: Features) -> npt.ArrayLike:
        backend = self.backend()
        mode = self.resolved_mode(backend)
        self.last_mode = mode
        self.last_parse_failures = 0
        self.last_answers = []
        m = len(self.actor_names)
        if features.n == 0:
            return np.zeros((0, m))
        batch = [self.messages(str(t)) for t in features.queries.text]
        self.calls += len(batch)
        if mode == "logits":
            results = backend.choice_scores_batch(batch, tuple(LETTERS[:m]))
            self.cached_calls += sum(r.cached for r in results)
            from scipy.special import log_softmax  # here, not at the top: listing the routers needs no scipy

            log_probs: FloatMatrix = log_softmax(np.array([r.logits for r in results], dtype=np.float64), axis=1)
            if self.params["calibrate"]:
                return log_probs - self._letter_prior(backend, m)
            return log_probs
        if self.params["calibrate"]:
            raise UsageError("router 'prompted': calibrate=true divides out the letters' prior, which needs "
                             "option-letter scores (mode=logits, a local backend)")
        answers = backend.complete_batch(batch, Decoding(max_tokens=int(self.params["max_tokens"])))
        self.cached_calls += sum(a.cached for a in answers)
        self.last_answers = [a.text for a in answers]
        picks = [parse_choice(a.text, self.actor_names) for a in answers]
        failures = sum(p is None for p in picks)
        self.last_parse_failures = failures
        self.parse_failures += failures
        self.ambiguous += sum(len(named_actors(a, self.actor_names)) > 1 for a in self.last_answers)
        choice = np.array([self.fallback_actor if p is None else p for p in picks], dtype=np.intp)
        out = np.zeros((features.n, m))
        out[np.arange(features.n), choice] = 1.0
        return out

    def _letter_prior(self, backend: Backend, m: int) -> FloatMatrix:
        """log of the mean letter distribution over content-free queries (:data:`CONTENT_FREE`): what the model
        answers for no query at all. Contextual calibration (Zhao et al. 2021, "Calibrate before use") divides it
        out, so a model's preference for a letter (small models favour "A") does not decide the route."""
        results = backend.choice_scores_batch([self.messages(t) for t in CONTENT_FREE], tuple(LETTERS[:m]))
        self.calls += len(results)
        self.cached_calls += sum(r.cached for r in results)
        from scipy.special import log_softmax

        prior = np.exp(log_softmax(np.array([r.logits for r in results], dtype=np.float64), axis=1)).mean(axis=0)
        self.letter_prior = {name: float(p) for name, p in zip(self.actor_names, prior, strict=True)}
        log_prior: FloatMatrix = np.log(prior)[None, :]
        return log_prior

    def _distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        """Logits mode: softmax of the letters' log-probabilities = the model's own distribution over actors.
        Generate mode: greedy decoding names one actor, a hard assignment: the one-hot choice (SPEC 4)."""
        if self.last_mode == "generate":
            return scores
        return np.asarray(softmax(scores), dtype=np.float64)

    def diagnostics(self) -> dict[str, Any]:
        """What the router did: mode of the last pass, calls (and how many came from the cache), parse
        failures (cumulative and last pass), ambiguous answers (several actors named; cumulative), exemplars
        per actor and how many of them came from the fallback."""
        per_actor = {name: 0 for name in self.actor_names}
        fallback = {name: 0 for name in self.actor_names}
        for e in self.exemplars:
            per_actor[self.actor_names[e.actor]] += 1
            fallback[self.actor_names[e.actor]] += int(e.fallback)
        return {"mode": self.last_mode or str(self.params["mode"]), "calls": self.calls,
                "cached_calls": self.cached_calls, "parse_failures": self.parse_failures,
                "last_parse_failures": self.last_parse_failures, "ambiguous_answers": self.ambiguous,
                "fallback_actor":
                    self.actor_names[self.fallback_actor] if self.actor_names else None,
                "exemplars": per_actor, "exemplars_from_fallback": fallback,
                **({"letter_prior": self.letter_prior} if self.letter_prior else {})}
