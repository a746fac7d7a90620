"""Build a routing table by running actors (LLM backends) on questions with gold answers.

:func:`collect` loads each actor once, asks it every question, grades each answer with the question's grader
(:mod:`routerlab.llm.graders`; ``Question.grader`` names it) and returns a
:class:`~routerlab.data.table.RoutingTable`:

- **How a question is asked.** One user message, the grader's :meth:`~routerlab.llm.graders.Grader.prompt`:
  for ``mc`` the question, its options as ``A. text`` lines and ``Answer with the letter of the correct
  option.``; for ``short`` and ``f1`` the question and ``Answer with the final answer only.``; ``number``,
  ``math``, ``code`` and ``coverage`` ask as :mod:`routerlab.llm.graders._prompts` says. ``mode`` says how a
  question graded by ``mc`` is answered: ``logits`` reads the next-token
  logits of the option letters after the prompt (one forward pass, no generation; local backends only),
  ``generate`` generates a reply and reads the letter from it, ``auto`` takes logits wherever the backend
  can give them. Every other question is generated (greedy, ``decoding``). Generation goes in batches of
  ``batch_size`` (8: decoding is memory-bound, a batch pays); option-letter scoring one question per forward
  pass by default (``logits_batch_size=1``): on a CPU the prefill is compute-bound, so a padded batch was
  slower than single passes, and in bf16 it changed logits by up to 0.5 and 3 of 50 SmolLM2 answers.
- **Grading.** One grader per name per run (built, and an unknown name refused, before any model loads;
  closed at the end). An actor's generated answers are graded after it has answered everything, each grader's
  in chunks of :data:`GRADE_CHUNK` through ``grade_many`` (the code grader runs its sandboxes side by side); an
  answer read from logits is graded by its letter.
- **What a cell holds.** ``score`` in [0, 1], the grade (1/0 for a binary grader; F1 or a share for ``f1``
  and ``coverage``); ``tokens_in`` (the prompt's tokens);
  ``tokens_out`` (the generated tokens; 1 for an answer read from logits: the one letter a forward pass
  decides); ``latency_s`` as measured for that call (a cache hit keeps the latency first measured, never 0);
  ``cost_usd`` from the actor's ``input_price`` / ``output_price`` (USD per 1M tokens, from the actor spec;
  an actor without prices has NaN cost, never a guessed 0).
- **Actors.** ``ttft_ms`` and ``itl_ms`` are the medians of the measured time to first token and
  inter-token latency of the actor's generated replies. An actor that answered every question from logits
  generated nothing, so it is timed on ``timing_probes`` short greedy replies (16 tokens) to the first
  questions, one request at a time; those replies are only timed, never graded. (Generated answers are
  sent in batches, so their TTFT is a batch's: the time to the batch's first token.) ``params_b`` comes from
  the spec (``params_b=``) or the backend. Actor metadata: ``spec`` (without secrets: keys are named by
  their variable), ``mode`` and ``model_id`` (the weights' identity the call cache keys on: ``two-model
  --features`` checks that hidden states are this model's; ``join`` keeps the column).
- **Per-answer metadata** (query metadata columns, one per actor): ``logits.<actor>`` holds the option-letter
  logits as JSON text (a list in option order, ``""`` where none were read), the input of the logit-based
  two-model routers (read them back with :func:`choice_logits`); ``pred.<actor>`` the answer read (a letter,
  or the short answer); ``output.<actor>`` the generated text (empty for logits). The questions' own
  ``gold``, ``choices`` (JSON list) and ``kind`` are kept too, so a collected table is itself a question
  source for another collect. Routers see only ``choices`` and ``kind``: the gold answer, every actor's
  ``pred``/``logits``/``output`` and the variant columns are hidden (:mod:`routerlab.data.visibility`).
  ``grader.<actor>`` names the grader of each cell and ``detail.<actor>`` holds its reason (hidden too); the
  questions' ``metric`` and ``task_id`` are kept when the source had them.
- **Resuming.** Every call goes through the on-disk call cache (:mod:`routerlab.llm.cache`): a rerun asks
  nothing again, and an interrupted run resumes where it stopped (only the missing calls run). Nothing is
  written until every actor has answered; the caller saves the table once (atomically).
- **Provenance** in ``meta["collect"]``: the question source, sample size and seed, skipped questions by
  reason, mode, decoding, prompt templates, routerlab version and, per actor, the spec, fresh and cached
  calls, the wall time, the model's own time (``model_s``: the calls it answered) and rate
  (``questions_per_s``: fresh questions per second of model time; None when the cache answered everything,
  never a rate of cache lookups), the torch threads of a local model, and ``slowdown`` when the run went far
  slower than its own first questions.
- **Slowdown.** The first :data:`SLOW_WINDOW` questions the model answers set its reference pace (questions/s
  scored by logits, decoding steps/s generated); when the latest :data:`SLOW_WINDOW` go at under
  1/:data:`SLOW_FACTOR` of it, one :class:`SlowdownWarning` says so (usually other processes competing for
  the cores; ``threads=`` in the spec sets torch's thread count).
- **Grading time** in ``meta["collect"]["graders"]``: per grader, the answers graded and the seconds spent
  grading them (all actors), and per actor under ``grading``.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from routerlab.errors import UsageError
from routerlab.llm.base import (
    GREEDY,
    Backend,
    BackendSpec,
    ChoiceScores,
    Completion,
    Decoding,
    Message,
    backend_class,
)
from routerlab.llm.graders import Grade, Grader, _prompts, get_grader
from routerlab.llm.grading import grade_choice, letter_from_logits
from routerlab.llm.questions import Question

if TYPE_CHECKING:
    from routerlab.data.table import RoutingTable

Mode = Literal["auto", "logits", "generate"]
MODES: tuple[str, ...] = ("auto", "logits", "generate")
PROBE_DECODING = Decoding(max_tokens=16)
"""The short greedy reply that times an actor whose answers all came from logits."""
GRADE_CHUNK = 32
"""Answers handed to a grader's ``grade_many`` at once (the code grader runs a chunk's sandboxes side by side)."""


def prompt_messages(question: Question, grader: Grader | None = None) -> tuple[Message, ...]:
    """The chat that asks ``question`` (module docstring): one user message, ``grader``'s prompt (default: the
    question's own grader, built for this one call)."""
    if grader is None:
        with get_grader(question.grader) as own:
            return (Message("user", own.prompt(question.item())),)
    return (Message("user", grader.prompt(question.item())),)


def by_logits(question: Question) -> bool:
    """Whether ``question`` can be answered by option-letter logits: options, graded by ``mc``."""
    return bool(question.choices) and question.grader == "mc"


def build_graders(questions: Sequence[Question], cache_dir: str | Path | None = None) -> dict[str, Grader]:
    """One grader per name the questions use (an unknown name: a UsageError, before anything is built)."""
    from routerlab.llm.graders import grader_class

    names = sorted({q.grader for q in questions})
    for name in names:
        grader_class(name)
    out: dict[str, Grader] = {}
    try:
        for name in names:
            out[name] = get_grader(name, cache_dir=None if cache_dir is None else Path(cache_dir))
    except BaseException:
        for g in out.values():
            g.close()
        raise
    return out


@dataclass
class _Column:
    """What one actor gave for every question, filled as the calls return."""

    n: int
    score: np.ndarray = field(init=False)
    tokens_in: np.ndarray = field(init=False)
    tokens_out: np.ndarray = field(init=False)
    latency: np.ndarray = field(init=False)
    logits: list[str] = field(init=False)
    pred: list[str] = field(init=False)
    output: list[str] = field(init=False)
    grader: list[str] = field(init=False)
    detail: list[str] = field(init=False)
    grading: dict[str, list[float]] = field(default_factory=dict)  # grader -> [answers graded, seconds]
    ttft: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)
    fresh: int = 0
    cached: int = 0
    model_s: float = 0.0  # seconds of the calls the model answered (the cache answered the others)
    slowdown: dict[str, Any] | None = None  # set when the run went far slower than its first questions

    def __post_init__(self) -> None:
        self.score = np.full(self.n, np.nan, dtype=np.float32)
        self.tokens_in = np.full(self.n, np.nan, dtype=np.float32)
        self.tokens_out = np.full(self.n, np.nan, dtype=np.float32)
        self.latency = np.full(self.n, np.nan, dtype=np.float32)
        self.logits = [""] * self.n
        self.pred = [""] * self.n
        self.output = [""] * self.n
        self.grader = [""] * self.n
        self.detail = [""] * self.n

    def count(self, cached: bool) -> None:
        if cached:
            self.cached += 1
        else:
            self.fresh += 1

    def from_scores(self, i: int, q: Question, sc: ChoiceScores) -> None:
        t0 = time.perf_counter()
        letter = letter_from_logits(sc.letters, sc.logits)
        self.graded(i, Grade(grade_choice(letter, q.gold), q.grader, letter, "option-letter logits"),
                    time.perf_counter() - t0)
        self.tokens_in[i] = sc.tokens_in
        self.tokens_out[i] = 1.0
        self.latency[i] = sc.latency_s
        self.logits[i] = json.dumps([round(float(v), 6) for v in sc.logits])
        self.count(sc.cached)

    def graded(self, i: int, grade: Grade, seconds: float, n: int = 1) -> None:
        """Record cell ``i``'s grade; ``seconds`` of grading counted once per call of ``n`` answers."""
        self.score[i] = grade.score
        self.pred[i] = grade.extracted
        self.grader[i] = grade.grader
        self.detail[i] = grade.detail
        spent = self.grading.setdefault(grade.grader, [0.0, 0.0])
        spent[0] += 1
        spent[1] += seconds / n

    def from_completion(self, i: int, q: Question, c: Completion) -> None:
        """Keep a generated reply; it is graded once the actor has answered everything (:func:`_grade`)."""
        self.tokens_in[i] = c.tokens_in
        self.tokens_out[i] = c.tokens_out
        self.latency[i] = c.latency_s
        self.output[i] = c.text
        self.timing(c)
        self.count(c.cached)

    def timing(self, c: Completion) -> None:
        if c.ttft_s is not None and math.isfinite(c.ttft_s):
            self.ttft.append(c.ttft_s)
        if c.itl_s is not None and math.isfinite(c.itl_s):
            self.itl.append(c.itl_s)


def check_mode(mode: str, actors: Sequence[tuple[str, BackendSpec | Backend]]) -> None:
    """Refuse, before any model loads, an unknown mode or ``logits`` for an actor that cannot give them."""
    if mode not in MODES:
        raise UsageError(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode != "logits":
        return
    for name, actor in actors:
        can = actor.supports_choice_scores if isinstance(actor, Backend) else \
            backend_class(actor.kind).supports_choice_scores
        if not can:
            kind = actor.spec.kind if isinstance(actor, Backend) else actor.kind
            raise UsageError(f"--mode logits: actor {name!r} ({kind}) cannot give option-letter logits; "
                             "use --mode auto (logits where possible) or --mode generate")


def collect(
    questions: Sequence[Question],
    actors: Sequence[tuple[str, BackendSpec | Backend]],
    *,
    graders: Mapping[str, Grader] | None = None,
    mode: str = "auto",
    decoding: Decoding = GREEDY,
    cache_dir: str | Path | None = None,
    batch_size: int = 8,
    logits_batch_size: int = 1,
    timing_probes: int = 8,
    name: str = "collected",
    provenance: Mapping[str, Any] | None = None,
    progress: bool | None = None,
    query_meta: Mapping[str, Sequence[Any]] | None = None,
) -> RoutingTable:
    """Run every actor on every question and return the routing table (module docstring).

    ``actors`` pairs a name with a spec (loaded here through the call cache under ``cache_dir``, closed after
    its questions) or an already loaded backend (used as it is and left open: the caller owns it).
    ``provenance`` adds entries to ``meta["collect"]`` (the question source, seed, skipped counts).
    ``progress``: None shows it on stderr as :mod:`routerlab.progress` decides, False hides it.
    ``query_meta`` adds query metadata columns, one value per question (``collect --variants``: ``variant_of``,
    ``level``, ``variant``). ``graders`` maps grader names to instances the caller owns (left open); the others
    the questions name are built here, before any model loads, and closed at the end.
    """
    if not questions:
        raise UsageError("no questions to ask")
    if not actors:
        raise UsageError("no actors: give at least one NAME=KIND:MODEL")
    for what, size in (("batch size", batch_size), ("logits batch size", logits_batch_size)):
        if isinstance(size, bool) or size < 1:
            raise UsageError(f"{what} must be at least 1, got {size}")
    if timing_probes < 0:
        raise UsageError(f"timing probes must be >= 0, got {timing_probes}")
    names = [a for a, _ in actors]
    if len(set(names)) != len(names):
        raise UsageError(f"actor names must be distinct, got {names}")
    check_mode(mode, actors)
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        raise UsageError("question ids must be distinct")
    for column, values in (query_meta or {}).items():
        if len(values) != len(questions):
            raise UsageError(f"query metadata {column!r} has {len(values)} values for {len(questions)} questions")

    given = dict(graders or {})
    owned_graders = build_graders([q for q in questions if q.grader not in given], cache_dir)
    try:
        return _collect(questions, actors, {**owned_graders, **given}, mode=mode, decoding=decoding,
                        cache_dir=cache_dir, batch_size=batch_size, logits_batch_size=logits_batch_size,
                        timing_probes=timing_probes, name=name, provenance=provenance, progress=progress,
                        query_meta=query_meta)
    finally:
        for g in owned_graders.values():
            g.close()


def _collect(
    questions: Sequence[Question],
    actors: Sequence[tuple[str, BackendSpec | Backend]],
    graders: Mapping[str, Grader],
    *,
    mode: str,
    decoding: Decoding,
    cache_dir: str | Path | None,
    batch_size: int,
    logits_batch_size: int,
    timing_probes: int,
    name: str,
    provenance: Mapping[str, Any] | None,
    progress: bool | None,
    query_meta: Mapping[str, Sequence[Any]] | None,
) -> RoutingTable:
    """:func:`collect` once its arguments are checked and its graders built."""
    from routerlab._version import __version__
    from routerlab.data.table import Actors, Queries, RoutingTable
    from routerlab.data.visibility import declared_visible

    names = [a for a, _ in actors]
    ids = [q.id for q in questions]
    prompts = [prompt_messages(q, graders[q.grader]) for q in questions]
    columns: list[_Column] = []
    per_actor: dict[str, Any] = {}
    params: list[float] = []
    specs: list[str] = []
    modes: list[str] = []
    model_ids: list[str] = []
    for actor_name, actor in actors:
        owned = not isinstance(actor, Backend)
        backend = actor if isinstance(actor, Backend) else _load(actor_name, actor, cache_dir, progress)
        try:
            use_logits = mode == "logits" or (mode == "auto" and backend.supports_choice_scores)
            t0 = time.perf_counter()
            col = _ask(actor_name, backend, questions, prompts, use_logits, decoding,
                       (batch_size, logits_batch_size), progress)
            wall = time.perf_counter() - t0
            probes = 0
            if not col.ttft and timing_probes:
                probes = _probe(backend, prompts, timing_probes, col)
        finally:
            if owned:
                backend.close()
        _grade(actor_name, questions, col, graders, progress)
        columns.append(col)
        spec = backend.spec
        specs.append(spec.describe())
        model_ids.append(str(backend.model_id))
        params_b: Any = spec.params_b if spec.params_b is not None else getattr(backend, "params_b", None)
        known = isinstance(params_b, int | float) and not isinstance(params_b, bool)
        params.append(float(params_b) if known else math.nan)
        used = "logits" if use_logits and any(by_logits(q) for q in questions) else "generate"
        modes.append(used)
        threads = getattr(backend, "threads", None)
        per_actor[actor_name] = {
            "spec": spec.describe(), "model_id": backend.model_id, "mode": used,
            "fresh_calls": col.fresh, "cached_calls": col.cached, "timing_probes": probes,
            "wall_s": round(wall, 3), "model_s": round(col.model_s, 3),
            "questions_per_s": round(col.fresh / col.model_s, 3) if col.fresh and col.model_s > 0 else None,
            "accuracy": float(np.nanmean(col.score)),
            "grading": {g: {"questions": int(n), "seconds": round(sec, 4)}
                        for g, (n, sec) in sorted(col.grading.items())},
            **({"threads": threads} if isinstance(threads, int) and not isinstance(threads, bool) else {}),
            **({"slowdown": col.slowdown} if col.slowdown is not None else {}),
        }

    qx: dict[str, Any] = {
        "gold": [q.gold for q in questions],
        "choices": [json.dumps(list(q.choices), ensure_ascii=False) if q.choices else "" for q in questions],
        "kind": [q.kind for q in questions],
        **{column: [getattr(q, column) for q in questions] for column in ("metric", "task_id")
           if any(getattr(q, column) for q in questions)},
        **{column: list(values) for column, values in (query_meta or {}).items()},
    }
    for actor_name, col in zip(names, columns, strict=True):
        qx[f"pred.{actor_name}"] = col.pred
        qx[f"logits.{actor_name}"] = col.logits
        qx[f"output.{actor_name}"] = col.output
        qx[f"grader.{actor_name}"] = col.grader
        qx[f"detail.{actor_name}"] = col.detail
    prices = [_price(actor, "input_price") for _, actor in actors]
    out_prices = [_price(actor, "output_price") for _, actor in actors]
    actor_table = Actors.create(
        names,
        params_b=params,
        ttft_ms=[_median_ms(c.ttft) for c in columns],
        itl_ms=[_median_ms(c.itl) for c in columns],
        input_price=prices,
        output_price=out_prices,
        extra={"spec": np.array(specs, dtype=object), "mode": np.array(modes, dtype=object),
               "model_id": np.array(model_ids, dtype=object)},
    )
    meta_collect = {
        **dict(provenance or {}),
        "n_questions": len(questions),
        "mode": mode,
        "decoding": decoding.as_dict(),
        "prompt": {"multiple_choice": "QUESTION\\n\\nA. OPTION\\n...\\n\\n" + _prompts.MC,
                   "short": "QUESTION\\n\\n" + _prompts.SHORT,
                   "graders": "each question is asked with its grader's prompt (routerlab.llm.graders)"},
        "graders": _grading_totals(columns),
        "timing_probe_decoding": PROBE_DECODING.as_dict(),
        "batch_size": batch_size,
        "logits_batch_size": logits_batch_size,
        "actors": per_actor,
        "routerlab_version": __version__,
    }
    return RoutingTable(
        queries=Queries.create(ids, text=[q.text for q in questions], dataset=[q.dataset for q in questions],
                               split=[q.split for q in questions], extra=qx,
                               visible=declared_visible("collect", qx)),  # choices, kind; never an answer
        actors=actor_table,
        score=np.stack([c.score for c in columns], axis=1),
        tokens_in=np.stack([c.tokens_in for c in columns], axis=1),
        tokens_out=np.stack([c.tokens_out for c in columns], axis=1),
        latency_s=np.stack([c.latency for c in columns], axis=1),
        name=name,
        meta={"format": "collect", "source": str((provenance or {}).get("source", "")), "collect": meta_collect},
    )


def _load(name: str, spec: BackendSpec, cache_dir: str | Path | None, progress: bool | None) -> Backend:
    from routerlab.llm.base import load_backend
    from routerlab.progress import task

    with task(f"collect: loading {name} ({spec.describe()})", enabled=progress):
        return load_backend(spec, cache_dir=None if cache_dir is None else Path(cache_dir))


def batches(questions: Sequence[Question], use_logits: bool, batch_size: int, logits_batch_size: int | None = None,
            prompts: Sequence[Sequence[Message]] | None = None) -> list[tuple[str | None, list[int]]]:
    """The calls that ask ``questions``: (option letters, rows) for a batch scored by logits (at most
    ``logits_batch_size`` rows, default ``batch_size``), (None, rows) for a batch generated (at most
    ``batch_size``). Multiple-choice questions scored by logits are grouped by their letters (one call scores
    one set of letters); within a group, rows are ordered by prompt length, longest first, so that a batch pads
    its prompts as little as possible and the rate shown early is the slow end's. ``prompts`` are the questions'
    chats (default: :func:`prompt_messages` with each question's own grader)."""
    chats = list(prompts) if prompts is not None else [prompt_messages(q) for q in questions]
    groups: dict[str | None, list[int]] = {}
    for i, q in enumerate(questions):
        groups.setdefault(q.letters if use_logits and by_logits(q) else None, []).append(i)
    out: list[tuple[str | None, list[int]]] = []
    for key, rows in groups.items():
        rows = sorted(rows, key=lambda i: (-len(chats[i][-1].content), i))
        size = batch_size if key is None or logits_batch_size is None else logits_batch_size
        out.extend((key, rows[s : s + size]) for s in range(0, len(rows), size))
    return out


SLOW_FACTOR = 4.0
"""A run is "far slower than its own first questions" when its latest questions go at under 1/SLOW_FACTOR of
the rate of its first ones (SmolLM2 on 2 shared cores fell 49-fold, from 9.8 to 0.2 questions/s)."""
SLOW_WINDOW = 16
"""The first SLOW_WINDOW questions the model itself answered set the reference rate; the latest SLOW_WINDOW are
compared with it."""


class SlowdownWarning(RuntimeWarning):
    """A collect run went far slower than its own first questions (:data:`SLOW_FACTOR`)."""


@dataclass
class _Pace:
    """The model's own pace in one kind of call (scored by logits, or generated): calls answered wholly by the
    model (no cache hit) only. Work is questions for logits, decoding steps (the batch's longest answer in
    tokens) for generation, so that long answers late in a run are not taken for a slowdown."""

    first: list[tuple[int, float, float]] = field(default_factory=list)  # (questions, work, seconds)
    recent: list[tuple[int, float, float]] = field(default_factory=list)

    def add(self, questions: int, work: float, seconds: float) -> tuple[float, float, int] | None:
        """Record one call; (latest rate, first rate, questions of the first) when the latest SLOW_WINDOW
        questions went at under 1/SLOW_FACTOR of the first SLOW_WINDOW's rate, else None."""
        if sum(q for q, _, _ in self.first) < SLOW_WINDOW:
            self.first.append((questions, work, seconds))
            return None
        self.recent.append((questions, work, seconds))
        while len(self.recent) > 1 and sum(q for q, _, _ in self.recent[1:]) >= SLOW_WINDOW:
            self.recent.pop(0)
        if sum(q for q, _, _ in self.recent) < SLOW_WINDOW:
            return None
        first, latest = _rate(self.first), _rate(self.recent)
        if latest * SLOW_FACTOR < first:
            return latest, first, sum(q for q, _, _ in self.first)
        return None


def _rate(calls: Sequence[tuple[int, float, float]]) -> float:
    seconds = sum(t for _, _, t in calls)
    return sum(w for _, w, _ in calls) / seconds if seconds > 0 else math.inf


_now = time.perf_counter
"""The clock of the model's pace (a test replaces it with a fake one)."""


def _ask(name: str, backend: Backend, questions: Sequence[Question], prompts: Sequence[tuple[Message, ...]],
         use_logits: bool, decoding: Decoding, sizes: tuple[int, int], progress: bool | None) -> _Column:
    """Every question to one backend, in the batches of :func:`batches`: multiple choice by logits when
    ``use_logits``, everything else generated. The model's own rate counts the calls it answered (cache hits
    take no model time): ``model_s`` and ``fresh`` on the column; a run that goes far slower than its own first
    questions warns once (:class:`SlowdownWarning`)."""
    import warnings

    from routerlab.progress import Progress

    col = _Column(len(questions))
    paces = {"logits": _Pace(), "generate": _Pace()}
    warned = False
    done = 0
    with Progress(f"collect: {name}", len(questions), unit="q", enabled=progress) as bar:
        for letters, rows in batches(questions, use_logits, *sizes, prompts=prompts):
            chats = [prompts[i] for i in rows]
            fresh_before = col.fresh
            t0 = _now()
            if letters is not None:
                scores = backend.choice_scores_batch(chats, tuple(letters))
                seconds = _now() - t0
                _check_count(backend, scores, rows)
                for i, sc in zip(rows, scores, strict=True):
                    col.from_scores(i, questions[i], sc)
                work: float = len(rows)
            else:
                replies = backend.complete_batch(chats, decoding)
                seconds = _now() - t0
                _check_count(backend, replies, rows)
                for i, c in zip(rows, replies, strict=True):
                    col.from_completion(i, questions[i], c)
                work = max(max((c.tokens_out for c in replies), default=1), 1)
            fresh = col.fresh - fresh_before
            if fresh:  # the model answered (some of) this call; hits in a mixed call cost next to nothing
                col.model_s += seconds
            if fresh == len(rows) and not warned:
                kind = "generate" if letters is None else "logits"
                slow = paces[kind].add(len(rows), work, seconds)
                if slow is not None:
                    warned = True
                    col.slowdown = {"kind": kind, "rate": round(slow[0], 3), "first_rate": round(slow[1], 3),
                                    "first_questions": slow[2]}
                    warnings.warn(_slow_message(name, backend, kind, *slow), SlowdownWarning, stacklevel=2)
            done += len(rows)
            bar.update(len(rows), _bar_label(col, len(questions) - done))
    return col


def _slow_message(name: str, backend: Backend, kind: str, rate: float, first: float, n_first: int) -> str:
    unit = "questions/s" if kind == "logits" else "generated tokens/s"
    threads = getattr(backend, "threads", None)
    on = f" (torch on {threads} threads)" if isinstance(threads, int) and threads > 0 else ""
    return (f"collect: actor {name!r} now answers at {rate:.2f} {unit}, under 1/{SLOW_FACTOR:g} of the {first:.2f} "
            f"of its first {n_first} questions{on}: other processes are probably competing for the cores; set "
            "threads= in the actor spec (e.g. threads=1) or run it when the machine is less busy")


def _bar_label(col: _Column, remaining: int) -> str:
    """The progress bar's rate: the model's own (cache hits apart), and the ETA at that rate."""
    hits = f", {col.cached} cached" if col.cached else ""
    if not col.fresh or col.model_s <= 0:
        return f"model - q/s{hits}"
    rate = col.fresh / col.model_s
    return f"model {rate:.2f} q/s{hits}, ETA {_duration(remaining / rate)}"


def _probe(backend: Backend, prompts: Sequence[tuple[Message, ...]], k: int, col: _Column) -> int:
    """Time ``k`` short greedy replies (never graded) to the first questions' prompts, one request at a time so
    that TTFT is a single request's, to set TTFT/ITL when no answer was generated."""
    asked = list(prompts[:k])
    for chat in asked:
        col.timing(backend.complete(chat, PROBE_DECODING))
    return len(asked)


def _grade(name: str, questions: Sequence[Question], col: _Column, graders: Mapping[str, Grader],
           progress: bool | None) -> None:
    """Grade ``name``'s generated answers (those not read from logits), each grader's in chunks of
    :data:`GRADE_CHUNK` through ``grade_many``; the seconds of a chunk are shared evenly by its answers."""
    from routerlab.progress import Progress

    todo: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        if not col.grader[i]:
            todo.setdefault(q.grader, []).append(i)
    total = sum(len(rows) for rows in todo.values())
    if not total:
        return
    with Progress(f"collect: grading {name}", total, unit="answer", enabled=progress) as bar:
        for grader_name, rows in todo.items():
            grader = graders[grader_name]
            for s in range(0, len(rows), GRADE_CHUNK):
                chunk = rows[s : s + GRADE_CHUNK]
                t0 = time.perf_counter()
                grades = grader.grade_many([questions[i].item(col.output[i]) for i in chunk])
                seconds = time.perf_counter() - t0
                if len(grades) != len(chunk):
                    raise UsageError(f"grader {grader_name} returned {len(grades)} grades for {len(chunk)} answers")
                for i, g in zip(chunk, grades, strict=True):
                    col.graded(i, g, seconds, len(chunk))
                bar.update(len(chunk), grader_name)


def _grading_totals(columns: Sequence[_Column]) -> dict[str, dict[str, Any]]:
    """Per grader over every actor: answers graded, seconds of grading, and seconds per answer."""
    totals: dict[str, list[float]] = {}
    for col in columns:
        for g, (n, sec) in col.grading.items():
            t = totals.setdefault(g, [0.0, 0.0])
            t[0] += n
            t[1] += sec
    return {g: {"questions": int(n), "seconds": round(sec, 4), "s_per_question": round(sec / n, 6) if n else None}
            for g, (n, sec) in sorted(totals.items())}


def _check_count(backend: Backend, got: Sequence[Any], asked: Sequence[int]) -> None:
    if len(got) != len(asked):
        raise UsageError(f"backend {backend.name} returned {len(got)} answers for {len(asked)} questions")


def _price(actor: BackendSpec | Backend, key: str) -> float:
    """A price the user gave in the spec; NaN when not given (cost unknown, never a guessed 0)."""
    spec = actor.spec if isinstance(actor, Backend) else actor
    value = spec.options.get(key)
    return math.nan if value is None else float(value)


def _median_ms(seconds: list[float]) -> float:
    return statistics.median(seconds) * 1000.0 if seconds else math.nan


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    s = round(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def choice_logits(table: RoutingTable, actor: str) -> np.ndarray:
    """The option-letter logits ``actor`` gave, as an (n_queries, 10) float32 array in option order (A..J),
    NaN beyond a question's options and for questions answered without logits."""
    from routerlab.llm.grading import LETTERS

    key = f"logits.{actor}"
    if key not in table.queries.extra:
        have = sorted(k[len("logits."):] for k in table.queries.extra if k.startswith("logits."))
        raise UsageError(f"table {table.name!r} holds no option-letter logits of actor {actor!r}; "
                         f"it has them for: {', '.join(have) or 'no actor'}")
    out = np.full((table.n_queries, len(LETTERS)), np.nan, dtype=np.float32)
    for i, text in enumerate(table.queries.extra[key].tolist()):
        if text:
            values = json.loads(str(text))
            out[i, : len(values)] = values
    return out
