"""The serving policy: a trained router, the encoder fitted on its training texts, and one backend per actor.

A request is routed on one text: the **last user message** of the chat. Routers are trained on the query texts of
a routing table, which are single prompts; the last user turn is the prompt the actor is about to answer, while a
system prompt or earlier turns (the same for every request of an application, or the history) would pull every
query towards the same point of the feature space. The same text is what the request log records.

How an actor is picked (the *serving policy*), with ``explore`` = e in [0, 1] and m actors:

- a router that acts by its argmax (``Router.explores`` False): probability ``1 - e + e/m`` on the argmax and
  ``e/m`` on every other actor; with e = 0 (the default) that is the argmax with propensity 1;
- an exploring router (bandits: ``linucb``, ``thompson``, ``eps-greedy``, ``barp``): its own selection
  distribution, mixed the same way with the uniform one (e = 0: the distribution as it is).

One actor is drawn from that distribution (seeded, one draw per request, in arrival order) and its probability is
the ``propensity`` logged, exactly as drawn. A request that names an actor instead of the router is *forced*: that
actor answers, with propensity 1, and its log row says ``mode=forced``.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from routerlab.data.table import Actors, Queries, RoutingTable
from routerlab.errors import RouterlabError, UsageError
from routerlab.features.base import Features
from routerlab.serve.breaker import ActorUnavailable, CircuitBreaker

if TYPE_CHECKING:
    from routerlab.features.registry import Encoder
    from routerlab.llm.base import Backend, Completion, Decoding, Message
    from routerlab.routers.base import Router
    from routerlab.serve.log import RequestLog
    from routerlab.serve.pool import Job

ROUTED_MODELS: tuple[str, ...] = ("routerlab", "auto")
"""Model names a client asks for to be routed (any other known name forces that actor)."""

MAX_QUERY_ID = 200
"""The longest client-given query id (``metadata.query_id``) accepted."""


class BackendFailure(RouterlabError):
    """The chosen actor's backend failed to answer (the server answers 502 with this one line)."""

    def __init__(self, actor: str, error: BaseException) -> None:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        super().__init__(f"actor {actor!r} failed to answer: {first[:300]}")
        self.actor = actor


class UnknownModel(UsageError):
    """The request names a model that is neither the router nor one of its actors (HTTP 404)."""


class DuplicateQuery(UsageError):
    """A client-given query id is already in the request log (HTTP 409): a log has one row per query."""


class ContextTooLong(UsageError):
    """The prompt does not fit the chosen actor's context window with room for one token (HTTP 400,
    ``context_length_exceeded``)."""

    def __init__(self, actor: str, window: int, prompt_tokens: int) -> None:
        super().__init__(f"This model's maximum context length is {window} tokens (actor {actor!r}). However, "
                         f"your messages resulted in at least {prompt_tokens} tokens, leaving no room for an "
                         "answer. Please reduce the length of the messages.")
        self.actor = actor
        self.window = window
        self.prompt_tokens = prompt_tokens


class RequestAborted(RouterlabError):
    """The request was cancelled (its client left, its deadline passed, or the server is stopping) before its
    answer was complete; the row, if the backend had started, is logged ``aborted``."""


@dataclass(frozen=True)
class Plan:
    """A request decided and checked, not yet answered: its query id (claimed in the log), the routed text, the
    decision, and the messages and decoding to send (``max_tokens`` capped to the context left)."""

    query_id: str
    text: str
    decision: Decision
    messages: tuple[Message, ...]
    decoding: Decoding
    dataset: str | None


@dataclass(frozen=True)
class Decision:
    """Which actor answers a request, the probability the serving policy had of choosing it, and how it was
    chosen (``routed`` or ``forced``)."""

    actor: str
    propensity: float
    mode: str


@dataclass(frozen=True)
class Served:
    """One answered request: its query id (also the response id), the decision and the backend's answer."""

    query_id: str
    decision: Decision
    completion: Completion


class ServedStream:
    """The text deltas of one streamed answer (iterate once). After the last delta: ``latency_s`` (the stream's
    wall time), ``tokens_out`` (None where the backend cannot count) and ``finished`` are set, and the request
    is logged ``answered`` (unless ``log_when_done`` is False: the server logs it once the finishing chunk has
    been sent, before ``[DONE]``, with :meth:`settle`).

    A stream closed early (the reader went away, or :meth:`abort` was called for a deadline) is logged
    ``aborted`` with its propensity, the time until the abort as its latency and the tokens generated so far;
    so is one the backend broke after its first delta (the client has part of that actor's answer, and the
    decision was made). A backend that fails before any delta leaves no row (the server answers 502)."""

    def __init__(self, service: RoutingService, query_id: str, text: str, decision: Decision,
                 messages: Sequence[Message], decoding: Decoding, dataset: str | None) -> None:
        self.query_id = query_id
        self.decision = decision
        self.latency_s: float | None = None
        self.tokens_out: int | None = None
        self.finished = False
        self.log_when_done = True
        self.aborted_at: float | None = None
        self._service = service
        self._text = text
        self._messages = messages
        self._decoding = decoding
        self._dataset = dataset
        self._started = False
        self._failed = False
        self._t0: float | None = None
        self._parts: list[str] = []
        self._settled = False
        self._settle_lock = threading.Lock()

    def __iter__(self) -> Iterator[str]:
        return self.deltas()

    def deltas(self) -> Generator[str, None, None]:
        """The deltas as a generator (``close()`` it to stop the backend early); once per stream."""
        if self._started:
            raise RuntimeError("a served stream is iterated once")
        self._started = True
        return self._deltas()

    def _deltas(self) -> Generator[str, None, None]:
        service, decision = self._service, self.decision
        backend = service.backends[decision.actor]
        breaker = service.breakers[decision.actor]
        parts = self._parts
        try:
            breaker.before_call()
        except ActorUnavailable:
            self._failed = True
            self.settle(None)  # never called: no row, the query id is free again
            raise
        self._t0 = t0 = time.perf_counter()
        try:
            gen = backend.stream(self._messages, self._decoding)
            try:
                for delta in gen:
                    if delta:
                        parts.append(delta)
                        yield delta
            except Exception as exc:
                self._failed = True
                breaker.failure()
                raise BackendFailure(decision.actor, exc) from exc
            finally:
                close = getattr(gen, "close", None)
                if close is not None:
                    close()  # a closed reader closes the backend's stream now (a local model stops generating)
            breaker.success()
            self.latency_s = time.perf_counter() - t0
            self.tokens_out = _count_tokens(backend, "".join(parts))
            self.finished = True
            if self.log_when_done:
                self.settle("answered")
        finally:
            if not self.finished:
                if not self._failed:
                    breaker.cancelled()  # closed by its reader: says nothing about the backend
                self.settle(None if self._failed and not parts else "aborted")

    @property
    def started(self) -> bool:
        """Whether the backend was called (the decision then has a row, answered or aborted)."""
        return self._t0 is not None

    def abort(self) -> None:
        """Mark the stream aborted now (the deadline passed or the client left): its row's latency ends here."""
        if self.aborted_at is None:
            self.aborted_at = time.perf_counter()

    def settle(self, status: str | None) -> None:
        """Log the row once (``answered`` or ``aborted``), or release its query id unlogged (None); later calls do
        nothing. Thread-safe: the server and the producing thread may both get here."""
        with self._settle_lock:
            if self._settled:
                return
            self._settled = True
        service = self._service
        if status is None or (status == "aborted" and self._t0 is None):  # never reached the backend
            service._release(self.query_id)
            return
        if status == "answered":
            latency, tokens = self.latency_s, self.tokens_out
        else:
            end = self.aborted_at if self.aborted_at is not None else time.perf_counter()
            latency = end - (self._t0 or end)
            tokens = _count_tokens(service.backends[self.decision.actor], "".join(list(self._parts)))
        service._record(self.query_id, self._text, self.decision, latency_s=float(latency or 0.0), tokens_in=None,
                        tokens_out=tokens, cached=False, dataset=self._dataset, status=status)


def _count_tokens(backend: Backend, text: str) -> int | None:
    """The backend tokenizer's count of ``text`` (None where it has none, or it fails: the answer was served,
    a missing count must not turn it into an error)."""
    if not text:
        return 0
    try:
        return backend.count_tokens(text)
    except Exception:
        return None


def request_text(messages: Sequence[Message]) -> str:
    """The text a request is routed on: its last user message (see the module docstring)."""
    for message in reversed(messages):
        if message.role == "user":
            return message.content
    raise UsageError("messages must include a user message: the router routes on the last one")


def new_query_id() -> str:
    """A fresh query id, also the response's ``id``: ``chatcmpl-`` + 32 random hex digits."""
    return f"chatcmpl-{uuid.uuid4().hex}"


def check_actor_names(table: RoutingTable, actors: Sequence[str]) -> None:
    """The served actors must be exactly the table's actors, by name (order free): the router learned scores
    for the table's actors and routes among them. One UsageError naming the difference."""
    have, want = set(actors), set(table.actor_names)
    if have == want:
        return
    parts = []
    if want - have:
        parts.append(f"the table's {', '.join(sorted(want - have))} {'has' if len(want - have) == 1 else 'have'} "
                     "no backend")
    if have - want:
        extra = len(have - want)
        parts.append(f"{', '.join(sorted(have - want))} {'is not an actor' if extra == 1 else 'are not actors'} "
                     "of the table")
    raise UsageError(f"--actors must name exactly the actors of table {table.name!r} "
                     f"({', '.join(table.actor_names)}): {'; '.join(parts)}")


def check_serving_encoder(spec: str) -> Encoder:
    """An unfitted encoder for ``spec`` that can encode a new request's text: a UsageError for a bad spec, and
    for ``precomputed`` vectors, which are joined by query id and know no text they were not given."""
    from routerlab.features.registry import get_encoder

    enc = get_encoder(spec)
    if not enc.cacheable:
        raise UsageError(f"encoder {enc.spec!r} reads vectors by query id and cannot encode a request's text; "
                         "serve with an encoder that reads text (tfidf or minilm)")
    return enc


class RoutingService:
    """Routes chat requests among ``backends`` (actor name -> backend) with a fitted ``router`` and the
    ``encoder`` fitted on its training texts, and logs each answered request to ``log`` (when given).

    Thread-safe: encoding, routing and the seeded draw happen under one lock (a few milliseconds), backend calls
    outside it, so requests to different actors run concurrently. :meth:`train` builds one from a table.
    """

    def __init__(self, router: Router, encoder: Encoder, actors: Actors, backends: Mapping[str, Backend], *,
                 explore: float = 0.0, seed: int = 0, log: RequestLog | None = None, name: str = "routerlab",
                 dataset: str = "served", trip_after: int = 5, cooldown_s: float = 10.0) -> None:
        names = [str(a) for a in actors.names.tolist()]
        if router.actor_names != names:
            raise UsageError(f"router {router.name!r} was fitted on actors {router.actor_names}, asked to serve "
                             f"{names}")
        missing = [a for a in names if a not in backends]
        extra = [a for a in backends if a not in names]
        if missing or extra:
            raise UsageError(f"the backends must be exactly the router's actors {names}: missing {missing}, "
                             f"unknown {extra}")
        if not (0.0 <= explore <= 1.0):
            raise UsageError(f"explore must be in [0, 1], got {explore!r}")
        if name in names:
            raise UsageError(f"the router's model name {name!r} is also an actor's name; pick another")
        self.router = router
        self.encoder = encoder
        self.actors = actors
        self.actor_names = names
        self.backends = dict(backends)
        self.explore = float(explore)
        self.seed = seed
        self.log = log
        self.name = name
        self.dataset = dataset
        self.breakers = {a: CircuitBreaker(a, trip_after, cooldown_s) for a in names}
        self._rng = np.random.default_rng([seed, 0x53455256])  # 'SERV': the serving policy's own stream
        self._lock = threading.Lock()
        self.started = time.time()
        self.learning: dict[str, Any] | None = None  # serve --learn's status (routerlab.serve.learn), for describe

    @classmethod
    def train(cls, router_spec: str, table: RoutingTable, backends: Mapping[str, Backend], *,
              encoder: str = "tfidf", split: str = "given", explore: float = 0.0, seed: int = 0,
              log: RequestLog | None = None, trip_after: int = 5, cooldown_s: float = 10.0) -> RoutingService:
        """Train ``router_spec`` on the train part of ``table`` (``split`` as in ``routerlab ope``: given, all,
        random[:F] or ood:DS1,DS2) with features from ``encoder`` fitted on those training texts; the backends
        must be exactly the table's actors."""
        from routerlab.features import encode
        from routerlab.protocols.ope import refuse_bounds, training_split
        from routerlab.routers import get_router

        check_actor_names(table, list(backends))
        refuse_bounds([router_spec])
        router = get_router(router_spec, seed=seed)
        enc = check_serving_encoder(encoder)
        train, _ = training_split(table, split, seed).apply(table)
        router.check_applicable(train)
        enc.fit(train.queries.text)  # fitted once here: every request's text is encoded in this space
        router.fit(train, encode(train, enc))
        return cls(router, enc, train.actors, backends, explore=explore, seed=seed, log=log, name="routerlab",
                   trip_after=trip_after, cooldown_s=cooldown_s)

    # -- the policy ----------------------------------------------------------------------------
    def _features(self, text: str) -> Features:
        X = self.encoder.transform([text])
        # built directly, not by Queries.create: one row needs no column checks (a tenth of a ms per request)
        queries = Queries(ids=np.array(["request"], dtype=object), text=np.array([text], dtype=object),
                          dataset=np.array([self.dataset], dtype=object), split=np.array(["served"], dtype=object))
        return Features.of(X, queries, self.actors, self.encoder.spec)

    def policy(self, text: str) -> npt.NDArray[np.float64]:
        """The serving policy's distribution over the actors (in table order) for a request routed on ``text``."""
        features = self._features(text)  # the fitted encoder is read-only: encoding needs no lock
        with self._lock:
            return self._policy(text, features)

    def _policy(self, text: str, features: Features | None = None) -> npt.NDArray[np.float64]:
        features = self._features(text) if features is None else features
        m = len(self.actor_names)
        if self.router.explores:
            base = np.asarray(self.router.route(features).policy[0], dtype=np.float64)
        else:  # acts by its argmax: the scores alone (route's choice), no distribution to compute and check
            base = np.zeros(m)
            base[int(self.router.choose(features)[0])] = 1.0
        if self.explore == 0.0:
            return base
        return (1.0 - self.explore) * base + self.explore / m

    def route(self, text: str) -> Decision:
        """Draw an actor for ``text`` from the serving policy; the decision carries its exact probability."""
        features = self._features(text)  # outside the lock: requests encode in parallel, only routing queues
        with self._lock:
            p = self._policy(text, features)
            if p.max() >= 1.0:  # a deterministic choice: no draw, the stream stays as it was
                a = int(p.argmax())
            else:
                cdf = np.cumsum(p)
                a = min(int(np.searchsorted(cdf, self._rng.random() * cdf[-1], side="right")), p.size - 1)
                while p[a] <= 0.0:  # rounding at the top of the CDF never lands on an impossible actor
                    a -= 1
        return Decision(self.actor_names[a], float(p[a]), "routed")

    def decide(self, model: str, text: str) -> Decision:
        """Route (``model`` is the router's name or one of :data:`ROUTED_MODELS`) or force the named actor."""
        if model == self.name or model in ROUTED_MODELS:
            return self.route(text)
        if model in self.backends:
            return Decision(model, 1.0, "forced")
        raise UnknownModel(f"The model '{model}' does not exist; this server has "
                           f"{', '.join(self.model_names())}")

    def swap_router(self, router: Router) -> None:
        """Route with ``router`` from the next decision on (``serve --learn``: a refitted router, swapped whole
        under the routing lock; a decision already made keeps the propensity it was drawn with)."""
        if router.actor_names != self.actor_names:
            raise UsageError(f"router {router.name!r} was fitted on actors {router.actor_names}, this server "
                             f"routes among {self.actor_names}")
        with self._lock:
            self.router = router

    def model_names(self) -> list[str]:
        """What ``/v1/models`` lists: the router first, then the actors."""
        return [self.name, *self.actor_names]

    # -- answering -----------------------------------------------------------------------------
    def _claim(self, query_id: str | None) -> str:
        if query_id is None:
            qid = new_query_id()
            if self.log is not None:
                self.log.reserve(qid)  # a fresh uuid: held while in flight, so its feedback is "not answered yet"
            return qid
        if not query_id or len(query_id) > MAX_QUERY_ID or any(c in query_id for c in "\r\n"):
            raise UsageError(f"metadata.query_id must be a non-empty one-line id of at most {MAX_QUERY_ID} "
                             "characters")
        if self.log is not None and not self.log.reserve(query_id):
            raise DuplicateQuery(f"query id {query_id!r} is already in the request log (one row per query)")
        return query_id

    def _release(self, query_id: str) -> None:
        if self.log is not None:
            self.log.release(query_id)

    def check_context(self, actor: str, messages: Sequence[Message], decoding: Decoding) -> Decoding:
        """``decoding`` with ``max_tokens`` capped to the chosen actor's context window minus the prompt's
        tokens; :class:`ContextTooLong` when the prompt leaves no room. Backends that know no window (or cannot
        count) are not checked. Counting stops early on a huge prompt (``Backend.prompt_tokens``' limit)."""
        backend = self.backends[actor]
        window = backend.context_window()
        if window is None:
            return decoding
        n = backend.prompt_tokens(messages, limit=window - 1)
        if n is None:
            return decoding
        if n >= window:
            raise ContextTooLong(actor, window, n)
        room = window - n
        if decoding.max_tokens <= room:
            return decoding
        return dataclasses.replace(decoding, max_tokens=room)

    def plan(self, messages: Sequence[Message], decoding: Decoding, *, model: str = "routerlab",
             query_id: str | None = None, dataset: str | None = None) -> Plan:
        """Route (or force), check the prompt against the chosen actor's context window, and claim the query id:
        everything a request needs before its backend is called (no backend work, a bounded cost)."""
        text = request_text(messages)
        decision = self.decide(model, text)
        capped = self.check_context(decision.actor, messages, decoding)
        qid = self._claim(query_id)
        return Plan(qid, text, decision, tuple(messages), capped, dataset)

    def execute(self, plan: Plan, *, job: Job[Any] | None = None) -> Served:
        """Call the planned backend and log the row. With ``job`` (the server's), the call stops between tokens
        once the job is cancelled, and when the job was aborted before its answer counted, nothing is logged here
        (the server logged the row ``aborted`` when it aborted the job: :meth:`record_aborted`) and
        :class:`RequestAborted` is raised. A cached answer logs the time measured now as ``latency_s`` and the
        first-measured one as ``original_latency_s``."""
        backend = self.backends[plan.decision.actor]
        breaker = self.breakers[plan.decision.actor]
        try:
            breaker.before_call()
        except ActorUnavailable:
            self._release(plan.query_id)
            raise
        t0 = time.perf_counter()
        try:
            if job is None:
                completion = backend.complete(plan.messages, plan.decoding)
            else:
                completion = backend.complete_cancellable(plan.messages, plan.decoding, job.cancel)
        except Exception as exc:
            if job is not None and job.cancel.is_set():
                breaker.cancelled()
                raise RequestAborted("the request was cancelled") from None
            breaker.failure()
            self._release(plan.query_id)
            raise BackendFailure(plan.decision.actor, exc) from exc
        wall = time.perf_counter() - t0
        if job is not None and not job.finish():  # stopped (a deadline already counted there): not a success
            breaker.cancelled()
            raise RequestAborted("the request was cancelled")
        breaker.success()
        self._record(plan.query_id, plan.text, plan.decision,
                     latency_s=wall if completion.cached else completion.latency_s,
                     tokens_in=completion.tokens_in, tokens_out=completion.tokens_out, cached=completion.cached,
                     dataset=plan.dataset, original_latency_s=completion.latency_s if completion.cached else None)
        return Served(plan.query_id, plan.decision, completion)

    def record_aborted(self, plan: Plan, latency_s: float) -> None:
        """Log a request whose backend call started and was aborted (client gone, deadline, shutdown) before its
        answer was complete: the decision with its propensity, ``status=aborted``, the time until the abort; no
        token counts (a non-streamed partial answer is discarded)."""
        self._record(plan.query_id, plan.text, plan.decision, latency_s=max(0.0, latency_s), tokens_in=None,
                     tokens_out=None, cached=False, dataset=plan.dataset, status="aborted")

    def complete(self, messages: Sequence[Message], decoding: Decoding, *, model: str = "routerlab",
                 query_id: str | None = None, dataset: str | None = None) -> Served:
        """Route (or force), call the chosen backend, log the request; :class:`BackendFailure` when the backend
        raises (the request is then not logged: there is no answer to score), :class:`ContextTooLong` when the
        prompt does not fit the actor's context window."""
        return self.execute(self.plan(messages, decoding, model=model, query_id=query_id, dataset=dataset))

    def stream(self, messages: Sequence[Message], decoding: Decoding, *, model: str = "routerlab",
               query_id: str | None = None, dataset: str | None = None) -> ServedStream:
        """Route (or force) now and return the answer as a :class:`ServedStream` of text deltas. The request is
        logged when the last delta has been taken, with the wall time of the stream as its latency and the
        output tokens the backend's tokenizer counts (empty where it has none); a stream closed early or broken
        by the backend after its first delta is logged ``aborted``; one that fails before (:class:`BackendFailure`)
        is not logged."""
        return self.stream_plan(self.plan(messages, decoding, model=model, query_id=query_id, dataset=dataset))

    def stream_plan(self, plan: Plan) -> ServedStream:
        """The :class:`ServedStream` of a planned request."""
        return ServedStream(self, plan.query_id, plan.text, plan.decision, plan.messages, plan.decoding,
                            plan.dataset)

    def _record(self, qid: str, text: str, decision: Decision, *, latency_s: float, tokens_in: int | None,
                tokens_out: int | None, cached: bool, dataset: str | None, status: str = "answered",
                original_latency_s: float | None = None) -> None:
        if self.log is None:
            return
        from routerlab.serve.log import LogRecord

        self.log.append(LogRecord(query_id=qid, text=text, actor=decision.actor, propensity=decision.propensity,
                                  mode=decision.mode, latency_s=float(latency_s), tokens_in=tokens_in,
                                  tokens_out=tokens_out, cached=cached, dataset=dataset or self.dataset,
                                  original_latency_s=original_latency_s, status=status))

    def describe(self) -> dict[str, Any]:
        """The served pool and policy, for ``/v1/models`` metadata and the startup line."""
        return {"router": self.router.name, "params": dict(self.router.params), "encoder": self.encoder.spec,
                "explore": self.explore, "seed": self.seed, "actors": list(self.actor_names),
                "log": None if self.log is None else str(self.log.path),
                "breakers": {a: b.describe() for a, b in self.breakers.items()},
                **({} if self.learning is None else {"learning": dict(self.learning)})}

    def close(self) -> None:
        """Close every backend and the log."""
        for backend in self.backends.values():
            backend.close()
        if self.log is not None:
            self.log.close()
