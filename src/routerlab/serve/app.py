"""The HTTP face of ``routerlab serve``: a FastAPI app that answers like an OpenAI server.

Endpoints: ``GET /v1/models`` (the router's virtual model, then the actors), ``GET /v1/models/{id}``,
``POST /v1/feedback`` (an outcome for a logged request: :mod:`routerlab.serve.feedback_store`) and
``POST /v1/chat/completions`` (``model`` = ``routerlab``/``auto``: routed; an actor's name: forced; ``messages``,
``max_tokens`` or ``max_completion_tokens``, ``temperature``, ``top_p``, ``stop``, ``seed``, ``stream`` and
``stream_options.include_usage``; ``metadata.query_id`` / ``metadata.dataset`` name the log row). The response's
``model`` is the actor that answered; an extra ``routerlab`` object carries the query id, the propensity and the
mode. Streaming answers are server-sent events (``data: {chunk}`` lines, then ``data: [DONE]``).

Every error is an OpenAI error object ``{"error": {"message", "type", "param", "code"}}`` with a 4xx code for the
client's mistakes (400 bad JSON, however deeply nested, or fields, or a prompt past the actor's context window;
404 unknown model or path, 405, 409 repeated query id, 413 body over the limit, checked before parsing; 429 the
actor's queue is full, with ``Retry-After``), 502 when the actor's backend fails, 503 while the server shuts
down, 504 past the request's deadline, and 500 with one line (never a traceback) for a bug. The body is read and
checked by hand, not by a pydantic model, so no validation detail leaks out.

Backend calls never run on the event loop nor on a shared thread pool: each actor has its own workers and bounded
queue (:mod:`routerlab.serve.pool`); a stream's producer pushes its deltas to the event loop and never waits for
the reader. A deadline, a client that goes away, or shutdown cancels the generation between tokens.

fastapi is imported here only: ``import routerlab.serve`` does not load it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from routerlab.errors import UsageError
from routerlab.serve.breaker import ActorUnavailable
from routerlab.serve.pool import DONE, QUEUED, RUNNING, ActorPool, Job, PoolClosed, QueueFull
from routerlab.serve.routing import (
    BackendFailure,
    ContextTooLong,
    DuplicateQuery,
    Plan,
    RequestAborted,
    RoutingService,
    ServedStream,
    UnknownModel,
    new_query_id,
)

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.requests import Request

    from routerlab.llm.base import Backend, Decoding, Message
    from routerlab.serve.feedback_store import FeedbackStore

MAX_BODY_BYTES = 1 << 20
"""Default request body limit (1 MiB); a larger body is answered 413 before it is parsed."""

MAX_TOKENS_LIMIT = 4096
"""Default ceiling on ``max_tokens`` a request may ask for."""

REQUEST_TIMEOUT_S = 300.0
"""Default deadline of one request, seconds (a stream's whole answer included)."""

QUEUE_SIZE = 64
"""Default number of requests that may wait for each actor's workers; one more is answered 429."""

UNSUPPORTED = ("tools", "functions", "tool_choice", "function_call", "audio", "modalities", "prediction")
"""Request fields this server refuses (400) rather than silently ignoring: they change what an answer is."""


class APIError(Exception):
    """An error answered as an OpenAI error object."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = " ".join(message.split())  # one line, always
        self.type = type
        self.param = param
        self.code = code
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


@dataclass(frozen=True)
class ChatRequest:
    """A checked ``/v1/chat/completions`` request."""

    model: str
    messages: tuple[Message, ...]
    decoding: Decoding
    stream: bool
    include_usage: bool
    query_id: str | None
    dataset: str | None


def _bad(message: str, param: str | None = None, code: str | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, int | float) and not isinstance(v, bool)) and math.isfinite(v)


def _content(value: Any, where: str) -> str:
    """A message's content: a string, or a list of text parts (joined by newlines)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for j, part in enumerate(value):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise _bad(f"{where}.content[{j}] must be a text part {{'type': 'text', 'text': ...}}; this server "
                           "routes text only", f"{where}.content")
            texts.append(part["text"])
        return "\n".join(texts)
    raise _bad(f"{where}.content must be a string or a list of text parts", f"{where}.content")


def parse_chat_request(body: Any, *, max_tokens_limit: int = MAX_TOKENS_LIMIT) -> ChatRequest:
    """Check a parsed JSON body field by field; the first problem is an :class:`APIError` (400) naming it."""
    from routerlab.llm.base import ROLES, Decoding, Message

    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object")
    model = body.get("model")
    if model is None:
        raise _bad("you must provide a model parameter", "model", "missing_required_parameter")
    if not isinstance(model, str) or not model:
        raise _bad("model must be a non-empty string", "model")
    for key in UNSUPPORTED:
        if body.get(key) is not None:
            raise _bad(f"{key} is not supported by routerlab serve (it routes plain chat completions)", key)
    if body.get("logprobs") not in (None, False):
        raise _bad("logprobs is not supported by routerlab serve", "logprobs")
    fmt = body.get("response_format")
    if fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        raise _bad("response_format other than text is not supported by routerlab serve", "response_format")
    n = body.get("n")
    if n is not None and n != 1:
        raise _bad("n must be 1: routerlab serve answers with one choice", "n")

    raw = body.get("messages")
    if raw is None:
        raise _bad("you must provide a messages parameter", "messages", "missing_required_parameter")
    if not isinstance(raw, list):
        raise _bad("messages must be an array of message objects", "messages")
    if not raw:
        raise _bad("messages must not be empty", "messages")
    messages = []
    for i, m in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise _bad(f"{where} must be an object with role and content", where)
        role = m.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise _bad(f"{where}.role must be one of {', '.join(sorted(ROLES))}", f"{where}.role")
        if "content" not in m or m["content"] is None:
            raise _bad(f"{where}.content is missing", f"{where}.content")
        messages.append(Message(role, _content(m["content"], where)))
    if not any(m.role == "user" for m in messages):
        raise _bad("messages must include a user message: the router routes on the last one", "messages")

    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    param = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    if max_tokens is None:
        max_tokens = min(Decoding().max_tokens, max_tokens_limit)
    elif not _is_int(max_tokens) or not 1 <= max_tokens <= max_tokens_limit:
        raise _bad(f"{param} must be an integer in 1..{max_tokens_limit}", param)
    temperature = body.get("temperature", 0.0)
    if temperature is None:
        temperature = 0.0
    if not _is_number(temperature) or not 0 <= temperature <= 2:
        raise _bad("temperature must be a number in [0, 2]", "temperature")
    top_p = body.get("top_p", 1.0)
    if top_p is None:
        top_p = 1.0
    if not _is_number(top_p) or not 0 < top_p <= 1:
        raise _bad("top_p must be a number in (0, 1]", "top_p")
    stop = body.get("stop")
    stops: tuple[str, ...]
    if stop is None:
        stops = ()
    elif isinstance(stop, str):
        stops = (stop,) if stop else ()
    elif isinstance(stop, list) and len(stop) <= 4 and all(isinstance(s, str) and s for s in stop):
        stops = tuple(stop)
    else:
        raise _bad("stop must be a string or an array of at most 4 non-empty strings", "stop")
    seed = body.get("seed")
    if seed is not None and not _is_int(seed):
        raise _bad("seed must be an integer", "seed")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise _bad("stream must be a boolean", "stream")
    options = body.get("stream_options")
    include_usage = False
    if options is not None:
        if not isinstance(options, dict) or not isinstance(options.get("include_usage", False), bool):
            raise _bad("stream_options must be an object whose include_usage is a boolean", "stream_options")
        if not stream:
            raise _bad("stream_options is only allowed when stream is true", "stream_options")
        include_usage = bool(options.get("include_usage", False))
    metadata = body.get("metadata")
    if metadata is not None and (not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise _bad("metadata must be an object of string values", "metadata")
    meta = metadata or {}
    try:
        decoding = Decoding(max_tokens=max_tokens, temperature=float(temperature), stop=stops, top_p=float(top_p),
                            seed=seed)
    except UsageError as exc:
        raise _bad(str(exc)) from None
    return ChatRequest(model, tuple(messages), decoding, stream, include_usage, meta.get("query_id"),
                       meta.get("dataset"))


def _finish_reason(tokens_out: int | None, max_tokens: int, reported: str | None = None) -> str:
    if reported in ("stop", "length"):
        return reported
    return "length" if tokens_out is not None and tokens_out >= max_tokens else "stop"


def _error_status(exc: Exception) -> APIError:
    """The HTTP error of an exception raised while serving a request."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, ContextTooLong):
        return APIError(400, str(exc), param="messages", code="context_length_exceeded")
    if isinstance(exc, QueueFull):
        return APIError(429, str(exc), type="rate_limit_error", code="actor_busy",
                        headers={"Retry-After": str(exc.retry_after)})
    if isinstance(exc, PoolClosed):
        return _shutting_down()
    if isinstance(exc, ActorUnavailable):
        return APIError(503, str(exc), type="server_error", code="actor_unavailable",
                        headers={"Retry-After": str(exc.retry_after)})
    if isinstance(exc, UnknownModel):
        return APIError(404, str(exc), param="model", code="model_not_found")
    if isinstance(exc, DuplicateQuery):
        return APIError(409, str(exc), param="metadata.query_id", code="duplicate_query_id")
    if isinstance(exc, BackendFailure):
        return APIError(502, str(exc), type="server_error", code="backend_failed")
    if isinstance(exc, UsageError):
        return APIError(400, str(exc))
    return APIError(500, f"internal error ({type(exc).__name__}); see the server's log", type="server_error")


def _shutting_down() -> APIError:
    return APIError(503, "the server is shutting down; retry on another instance or after it restarts",
                    type="server_error", code="server_shutting_down")


def _timed_out(timeout: float) -> APIError:
    return APIError(504, f"the answer took longer than this server's request timeout ({timeout:g} s); its "
                    "generation was stopped", type="server_error", code="timeout")


def default_workers(backend: Backend) -> int:
    """How many calls an actor runs at once by default: 1 for a local model (one model runs one call at a time
    on the cores), the ``concurrency`` option where the backend has one (openai: 4), else 4."""
    if backend.spec.kind == "local":
        return 1
    value = backend.spec.option("concurrency")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 4


INLINE_PLAN_CPU_S = 0.010
"""A request's plan (routing and the context check) runs on the event loop when its router calls no LLM, plans
have used less than this much CPU on average, and its prompt is short: handing such a plan to a thread costs more
than it saves, since a thread computing holds the interpreter as the event loop would (measured with knn:k=10 and
tf-idf, 64 clients: 218 against 189 routed requests/s, the mean of 6 alternating runs each). CPU time, not wall
time: under load a plan's wall time counts the other threads' turns. A router that asks an LLM, or a heavy
encoder (MiniLM: tens of ms), is planned on a thread, so the event loop is never held for long."""

INLINE_PROMPT_CHARS = 8192
"""Prompts longer than this (characters, all messages) are planned on a thread whatever the average."""


class ServingState:
    """What the app holds besides the service: one :class:`ActorPool` per actor, the shutdown switch, the waiting
    requests' stop futures and the open streams' queues (both told when the server stops), and a small executor
    for log rows written from the event loop's side (an aborted request, a stream settled after its last event)."""

    def __init__(self, service: RoutingService, *, request_timeout: float, workers: int | None,
                 queue_size: int) -> None:
        self.service = service
        self.request_timeout = request_timeout
        self.pools = {a: ActorPool(a, workers or default_workers(service.backends[a]), queue_size)
                      for a in service.actor_names}
        self.stopping = False
        self.waiters: set[asyncio.Future[None]] = set()
        self.streams: set[asyncio.Queue[tuple[str, Any]]] = set()
        self.log_writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="routerlab-log")
        self.plan_cpu_s: float | None = None  # running mean of the plans' CPU time; None: none measured yet

    def plan_inline(self, messages: Sequence[Message]) -> bool:
        """Whether to plan a request on the event loop (:data:`INLINE_PLAN_CPU_S`): only once plans are known to
        be cheap, and never for a router that calls an LLM."""
        cpu = self.plan_cpu_s
        return cpu is not None and cpu < INLINE_PLAN_CPU_S and not self.service.router.needs_backend \
            and sum(len(m.content) for m in messages) <= INLINE_PROMPT_CHARS

    def plan(self, messages: Sequence[Message], decoding: Decoding, **kwargs: Any) -> Plan:
        """:meth:`RoutingService.plan`, its CPU time added to the running mean :meth:`plan_inline` reads."""
        c0 = time.thread_time()
        try:
            return self.service.plan(messages, decoding, **kwargs)
        finally:
            cpu = time.thread_time() - c0
            self.plan_cpu_s = cpu if self.plan_cpu_s is None else 0.9 * self.plan_cpu_s + 0.1 * cpu

    def begin_shutdown(self) -> None:
        """Refuse new requests (503), cancel every queued and running backend call, and end every open stream
        with an error event. Runs on the event loop."""
        if self.stopping:
            return
        self.stopping = True
        for waiter in list(self.waiters):
            if not waiter.done():
                waiter.set_result(None)
        for q in list(self.streams):
            q.put_nowait(("stopping", None))
        for pool in self.pools.values():
            pool.close()

    def flush_log(self) -> None:
        """Write the log rows still pending (aborted requests settled from the event loop's side)."""
        self.log_writer.shutdown(wait=True)

    def close(self, timeout: float = 2.0) -> bool:
        """After the server has stopped: wait up to ``timeout`` seconds for the actors' workers (False when one
        is still inside a hanging backend; it is a daemon thread) and for the pending log rows."""
        for pool in self.pools.values():
            pool.close()
        end = time.monotonic() + timeout
        done = all([pool.join(max(0.0, end - time.monotonic())) for pool in self.pools.values()])
        self.log_writer.shutdown(wait=True)
        return done


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a job's outcome as seen (an aborted request's future is not awaited; asyncio would warn)."""
    if not future.cancelled():
        future.exception()


def feedback_reply(store: FeedbackStore | None, body: bytes) -> dict[str, Any]:
    """The answer to a ``POST /v1/feedback`` body (an :class:`APIError` for a refusal); blocking (it writes and
    fsyncs the feedback file): run it off the event loop. See :mod:`routerlab.serve.feedback_store`."""
    from routerlab.serve.feedback_store import FeedbackRejected, check_feedback

    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise APIError(400, f"could not parse the JSON body of the request ({first})") from None
    try:
        qid, score, metadata = check_feedback(parsed)
        if store is None:
            raise FeedbackRejected(409, "this server keeps no request log (start it with --log), so it has no "
                                   "request to attach feedback to", code="no_request_log")
        entry, recorded = store.submit(qid, score, metadata)
    except FeedbackRejected as exc:
        raise APIError(exc.status, str(exc), param=exc.param, code=exc.code) from None
    return {"object": "feedback", "query_id": entry.query_id, "score": entry.score, "created": entry.created,
            "recorded": recorded}


def create_app(service: RoutingService, *, max_body_bytes: int = MAX_BODY_BYTES,
               max_tokens_limit: int = MAX_TOKENS_LIMIT, request_timeout: float = REQUEST_TIMEOUT_S,
               workers: int | None = None, queue_size: int = QUEUE_SIZE,
               feedback: FeedbackStore | None = None) -> FastAPI:
    """The FastAPI app serving ``service``. The caller owns the service (closing it closes backends and log);
    ``app.state.serving`` (:class:`ServingState`) holds the actors' pools: :func:`make_server` stops them with
    the server. ``workers`` (None: :func:`default_workers` per actor) and ``queue_size`` size each actor's pool;
    ``request_timeout`` is each request's deadline in seconds; ``feedback`` is the store of ``POST /v1/feedback``
    (default: one opened on the service's log at the first feedback request)."""
    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response, StreamingResponse
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException

    if not (isinstance(request_timeout, int | float) and math.isfinite(request_timeout) and request_timeout > 0):
        raise UsageError(f"request_timeout must be a finite number of seconds > 0, got {request_timeout!r}")
    app = FastAPI(title="routerlab serve", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.service = service
    state = ServingState(service, request_timeout=float(request_timeout), workers=workers, queue_size=queue_size)
    app.state.serving = state

    def reply(err: APIError) -> JSONResponse:
        return JSONResponse(err.body(), status_code=err.status, headers=err.headers or None)

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return reply(exc)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 404:
            message, code = f"unknown path {request.url.path}; this server answers /v1/models, " \
                            "/v1/chat/completions and /v1/feedback", "unknown_url"
        elif exc.status_code == 405:
            message, code = f"method {request.method} is not allowed on {request.url.path}", "method_not_allowed"
        else:
            message, code = str(exc.detail), None
        return reply(APIError(exc.status_code, message, code=code))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return reply(APIError(400, "the request does not match this endpoint's parameters"))

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        return reply(_error_status(exc))

    def model_card(name: str, owner: str, **extra: Any) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": int(service.started), "owned_by": owner, **extra}

    def cards() -> list[dict[str, Any]]:
        out = [model_card(service.name, "routerlab", routerlab=service.describe())]
        out.extend(model_card(a, f"routerlab:{service.backends[a].spec.kind}") for a in service.actor_names)
        return out

    # plain Starlette routes (the endpoint takes the request): FastAPI's signature reading would need the
    # annotations resolvable at module level, and fastapi is only imported inside this function
    async def list_models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": cards()})

    async def get_model(request: Request) -> Response:
        model_id = request.path_params["model_id"]
        for card in cards():
            if card["id"] == model_id:
                return JSONResponse(card)
        raise APIError(404, f"The model '{model_id}' does not exist", param="model", code="model_not_found")

    async def read_body(request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_body_bytes:
            raise APIError(413, f"the request body ({int(declared)} bytes) is over this server's limit of "
                           f"{max_body_bytes} bytes", code="request_too_large")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body_bytes:
                raise APIError(413, f"the request body is over this server's limit of {max_body_bytes} bytes",
                               code="request_too_large")
            chunks.append(chunk)
        return b"".join(chunks)

    def _no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    async def watch_disconnect(request: Request) -> None:
        """Returns when the client has gone away (the body was read already: only a disconnect arrives)."""
        while (await request.receive())["type"] != "http.disconnect":
            pass

    def submit(plan: Plan, fn: Callable[[Job[Any]], Any]) -> Job[Any]:
        job: Job[Any] = Job(fn, asyncio.get_running_loop())
        job.future.add_done_callback(_retrieve)
        try:
            service.breakers[plan.decision.actor].check()
            state.pools[plan.decision.actor].submit(job)
        except (ActorUnavailable, QueueFull, PoolClosed) as exc:
            service._release(plan.query_id)
            raise _error_status(exc) from None
        return job

    def stop_job(job: Job[Any], plan: Plan, kind: str) -> str:
        """Abort ``job`` for ``kind`` (timeout, disconnect, stopping) and return the state it was in. A deadline
        counts as a failure of the actor's backend when the call was running, or when it waited behind workers
        that are all stuck in calls told to stop: so a backend that hangs without ever raising trips the breaker
        too. A client leaving or a stop says nothing about the backend and does not count."""
        before = job.abort()
        if kind == "timeout" and (before == RUNNING
                                  or (before == QUEUED and state.pools[plan.decision.actor].stuck())):
            service.breakers[plan.decision.actor].failure()
        return before

    def abandon(job: Job[Any], plan: Plan, kind: str) -> bool:
        """Abort a non-streamed request's job (:func:`stop_job`): True when it was too late (the answer is
        complete and stands). Otherwise the row is settled now: a job that never ran frees its query id, one whose
        backend started is logged ``aborted`` with the time until now (its worker stays busy until the backend
        really returns)."""
        if stop_job(job, plan, kind) == DONE:
            return True
        if job.claim():
            if job.started_at is None:
                service._release(plan.query_id)
            else:
                latency = (job.aborted_at or time.perf_counter()) - job.started_at
                state.log_writer.submit(service.record_aborted, plan, latency)
        return False

    def stop_reason(kind: str) -> APIError:
        if kind == "stopping":
            return _shutting_down()
        if kind == "disconnect":
            return APIError(499, "the client closed the request", code="client_closed")
        return _timed_out(state.request_timeout)

    async def chat_completions(request: Request) -> Response:
        if state.stopping:
            raise _shutting_down()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + state.request_timeout
        body = await read_body(request)
        try:
            parsed = json.loads(body, parse_constant=_no_constants)
        except RecursionError:
            raise APIError(400, "could not parse the JSON body of the request (it is nested too deeply)") from None
        except (ValueError, UnicodeDecodeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise APIError(400, f"could not parse the JSON body of the request ({first})") from None
        req = parse_chat_request(parsed, max_tokens_limit=max_tokens_limit)
        created = int(time.time())
        try:  # routing encodes and scores the text, the context check counts the prompt: on a thread unless fast
            kwargs = {"model": req.model, "query_id": req.query_id, "dataset": req.dataset}
            if state.plan_inline(req.messages):
                plan = state.plan(req.messages, req.decoding, **kwargs)
            else:
                plan = await run_in_threadpool(state.plan, req.messages, req.decoding, **kwargs)
        except Exception as exc:
            raise _error_status(exc) from None
        if req.stream:
            return await start_stream(request, req, plan, created, deadline)
        job = submit(plan, lambda j: service.execute(plan, job=j))
        stop: asyncio.Future[None] = loop.create_future()  # resolved by begin_shutdown
        state.waiters.add(stop)
        watchers = [asyncio.ensure_future(watch_disconnect(request)), stop]
        try:
            done, _ = await asyncio.wait({job.future, *watchers}, timeout=max(0.0, deadline - loop.time()),
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            state.waiters.discard(stop)
            for w in watchers:
                w.cancel()
        if job.future not in done:
            kind = "stopping" if watchers[1] in done else "disconnect" if watchers[0] in done else "timeout"
            if not abandon(job, plan, kind):
                raise stop_reason(kind)
            await job.future  # the answer was complete just before: it stands
        try:
            served = job.future.result()
        except RequestAborted:
            raise stop_reason("stopping" if state.stopping else "timeout") from None
        except Exception as exc:
            raise _error_status(exc) from None
        c = served.completion
        return JSONResponse({
            "id": served.query_id if req.query_id is None else new_query_id(),
            "object": "chat.completion", "created": created, "model": served.decision.actor,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": c.text, "refusal": None},
                         "logprobs": None,
                         "finish_reason": _finish_reason(c.tokens_out, plan.decoding.max_tokens, c.finish_reason)}],
            "usage": {"prompt_tokens": c.tokens_in, "completion_tokens": c.tokens_out,
                      "total_tokens": c.tokens_in + c.tokens_out},
            "system_fingerprint": None,
            "routerlab": {"query_id": served.query_id, "propensity": served.decision.propensity,
                          "mode": served.decision.mode, "cached": c.cached},
        })

    app.state.feedback = feedback
    feedback_lock = threading.Lock()

    def feedback_store() -> FeedbackStore | None:
        with feedback_lock:
            if app.state.feedback is None and service.log is not None:
                from routerlab.serve.feedback_store import FeedbackStore

                app.state.feedback = FeedbackStore(service.log)
            return app.state.feedback  # type: ignore[no-any-return]

    async def post_feedback(request: Request) -> Response:
        body = await read_body(request)
        answer = await run_in_threadpool(lambda: feedback_reply(feedback_store(), body))
        return JSONResponse(answer)

    async def start_stream(request: Request, req: ChatRequest, plan: Plan, created: int,
                           deadline: float) -> Response:
        loop = asyncio.get_running_loop()
        served = service.stream_plan(plan)
        served.log_when_done = False  # logged after the finishing chunk (answered), or aborted
        q: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def produce(job: Job[Any]) -> None:
            """On the actor's worker: every delta to the event loop, never waiting for the reader."""
            gen = served.deltas()
            try:
                for delta in gen:
                    job.call_in_loop(q.put_nowait, ("delta", delta))
                    if job.cancel.is_set():
                        break
                else:
                    job.finish()
                    job.call_in_loop(q.put_nowait, ("end", None))
            except BaseException as exc:
                job.call_in_loop(q.put_nowait, ("error", exc))
            finally:
                gen.close()  # stops the backend between tokens when the loop broke off

        job = submit(plan, produce)
        state.streams.add(q)
        timer = loop.call_at(deadline, q.put_nowait, ("timeout", None))
        watcher = asyncio.ensure_future(watch_disconnect(request))

        def gone(w: asyncio.Future[None]) -> None:
            if not w.cancelled() and w.exception() is None:
                q.put_nowait(("disconnect", None))

        watcher.add_done_callback(gone)
        open_ = True

        def finish_up(status: str | None, kind: str = "disconnect") -> None:
            """End of the stream for the server: stop the backend (:func:`stop_job` for ``kind``), log the row,
            forget the queue."""
            nonlocal open_
            if not open_:
                return
            open_ = False
            timer.cancel()
            watcher.cancel()
            state.streams.discard(q)
            if status == "answered":
                return
            stop_job(job, plan, kind)
            served.abort()
            state.log_writer.submit(served.settle, status)

        # the first delta is awaited before answering, so a backend that fails at once is a 502, not a broken
        # stream, and a deadline or disconnect before it is an error response
        try:
            kind, value = await q.get()
        except BaseException:
            finish_up("aborted")
            raise
        if kind != "delta":
            watcher.cancel()
            if kind == "end":
                first: str | None = None
            elif kind == "error":
                finish_up(None, "error")
                raise _error_status(value)
            else:
                finish_up("aborted", kind)
                raise stop_reason(kind)
        else:
            first = value
        watcher.cancel()  # from here, the streaming response watches for a disconnect itself
        rid = served.query_id if req.query_id is None else new_query_id()
        extra = {"query_id": served.query_id, "propensity": served.decision.propensity,
                 "mode": served.decision.mode}
        return StreamingResponse(_events(request, served, q, first, kind == "end", rid, created, req, plan, extra,
                                         stop_reason, finish_up, state),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    app.add_route("/v1/models", list_models, methods=["GET"])
    app.add_route("/v1/models/{model_id:path}", get_model, methods=["GET"])
    app.add_route("/v1/chat/completions", chat_completions, methods=["POST"])
    app.add_route("/v1/feedback", post_feedback, methods=["POST"])
    return app


async def _events(request: Request, served: ServedStream, q: asyncio.Queue[tuple[str, Any]], first: str | None,
                  ended: bool,
                  rid: str, created: int, req: ChatRequest, plan: Plan, extra: Mapping[str, Any],
                  stop_reason: Callable[[str], APIError], finish_up: Callable[[str | None, str], None],
                  state: ServingState) -> AsyncIterator[str]:
    """The server-sent events of one streamed answer: a role chunk, one chunk per delta, the finishing chunk,
    a usage chunk when asked, then ``[DONE]``; a backend failure, the deadline or shutdown mid-stream is one
    error event instead (the row is then ``aborted``), and so is a client that goes away (no event: it is gone)."""

    def chunk(delta: Mapping[str, Any], finish: str | None = None, **more: Any) -> str:
        payload = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": served.decision.actor,
                   "system_fingerprint": None,
                   "choices": [{"index": 0, "delta": dict(delta), "logprobs": None, "finish_reason": finish}],
                   **more}
        return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"

    try:
        yield chunk({"role": "assistant", "content": ""}, routerlab=dict(extra))
        if first is not None:
            yield chunk({"content": first})
        while not ended:
            kind, value = await q.get()
            if kind == "delta":
                yield chunk({"content": value})
            elif kind == "end":
                ended = True
            elif kind == "error":  # the backend broke mid-stream: its row is logged aborted by the producer
                finish_up(None, "error")
                yield f"data: {json.dumps(_error_status(value).body())}\n\n"
                return
            elif kind != "disconnect":  # timeout or stopping
                finish_up("aborted", kind)
                yield f"data: {json.dumps(stop_reason(kind).body())}\n\n"
                return
        yield chunk({}, _finish_reason(served.tokens_out, plan.decoding.max_tokens))
        if req.include_usage:
            usage = {"prompt_tokens": None, "completion_tokens": served.tokens_out,
                     "total_tokens": None}
            payload = {"id": rid, "object": "chat.completion.chunk", "created": created,
                       "model": served.decision.actor, "choices": [], "usage": usage}
            yield f"data: {json.dumps(payload)}\n\n"
        if await request.is_disconnected():  # a send to a closed connection returns quietly: the client left
            finish_up("aborted", "disconnect")
            return
        # logged before [DONE]: a client that has its whole answer finds its row (e.g. to send feedback on it)
        finish_up("answered", "end")
        await asyncio.get_running_loop().run_in_executor(state.log_writer, served.settle, "answered")
        yield "data: [DONE]\n\n"
    finally:
        finish_up("aborted", "disconnect")  # the client left (this generator was cancelled or closed); else a no-op


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0: a free port the system picks). Bound before any model is
    loaded, so a port in use is one error line at once; uvicorn then serves on it."""
    import ipaddress

    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:  # a host name (localhost): resolved by bind
        family = socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def base_url(sock: socket.socket) -> str:
    """``http://HOST:PORT/v1`` of a bound socket (IPv6 hosts in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/v1" if ":" in host else f"http://{host}:{port}/v1"


GRACE_S = 5.0
"""uvicorn's own limit on the wait for responses in flight after a stop (a backstop: routerlab's wait below ends
first)."""

DRAIN_S = 1.0
"""After a stop, how long responses in flight may take to reach their clients (each was answered at once: a 503
or an error event) before the connections still open are cut (a client that does not read its stream)."""


def make_server(app: FastAPI, *, log_level: str = "warning", access_log: bool = False) -> Any:
    """A uvicorn server for ``app`` (run it with ``server.run(sockets=[sock])``; ``server.request_stop()`` or
    SIGINT/SIGTERM stops it).

    Stopping: the app answers every request in flight at once (a 503 ``server_shutting_down``, or an error
    event that ends a stream), cancels the backends' generations between tokens, then uvicorn closes the
    connections; a second signal skips the wait. Signals are handled here, not by uvicorn's default, which
    re-raises the signal after shutting down (SIGTERM then ends the process with 143): a stop asked for is the
    normal end of the server, and ``run`` returns."""
    import uvicorn

    config = uvicorn.Config(app, log_level=log_level, access_log=access_log, lifespan="off",
                            timeout_graceful_shutdown=int(GRACE_S))
    return _server_class()(config, getattr(app.state, "serving", None))


def _server_class() -> type[Any]:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server with routerlab's stop (see :func:`make_server`)."""

        def __init__(self, config: Any, serving: ServingState | None) -> None:
            super().__init__(config)
            self.serving = serving
            self.loop: asyncio.AbstractEventLoop | None = None
            self.signals = 0

        async def serve(self, sockets: list[socket.socket] | None = None) -> None:
            self.loop = asyncio.get_running_loop()
            await super().serve(sockets=sockets)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            handled = (signal.SIGINT, signal.SIGTERM)
            before = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in before.items():
                    signal.signal(sig, handler)

        async def _wait_tasks_to_complete(self) -> None:
            """uvicorn's wait for the responses in flight, bounded by routerlab: every request was answered at once
            by the stop (503 or an error event), so what is left after ``DRAIN_S`` is a response its client does
            not read (a paused stream, its socket full). Those connections are cut: their handlers see the client
            gone and end normally (the row is logged aborted). Otherwise uvicorn would cancel their tasks after its
            grace period and print an ASGI ``CancelledError`` traceback for each."""
            loop = asyncio.get_running_loop()
            state = self.server_state
            end = loop.time() + (0.0 if self.force_exit else DRAIN_S)
            while state.connections and loop.time() < end and not self.force_exit:
                await asyncio.sleep(0.05)
            for connection in list(state.connections):
                transport = getattr(connection, "transport", None)
                if transport is not None:
                    transport.abort()
            end = loop.time() + 1.0
            while state.tasks and loop.time() < end:
                await asyncio.sleep(0.02)

        def handle_exit(self, sig: int, frame: Any) -> None:
            self.signals += 1
            if self.signals > 1:
                self.force_exit = True  # a second Ctrl-C: do not wait for anything
            self.request_stop()

        def request_stop(self) -> None:
            """Stop serving (thread-safe): the app ends what is in flight, then uvicorn shuts down."""
            loop, serving = self.loop, self.serving
            if serving is not None and loop is not None and not loop.is_closed():
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(serving.begin_shutdown)
            self.should_exit = True

    return Server


class ServerThread:
    """``app`` served by uvicorn in a background thread on ``host`` (a free port): for tests and benchmarks.

    ``with ServerThread(app) as url:`` yields the base URL (``http://127.0.0.1:PORT/v1``) once the server
    accepts connections, and stops it on exit (requests in flight get a 503 or an error event, the actors'
    workers are waited for a little).
    """

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> None:
        self.sock = bind(host, port)
        self.url = base_url(self.sock)
        self.app = app
        self.server = make_server(app)
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True,
                                        name="routerlab-serve")

    def __enter__(self) -> str:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        return self.url

    def stop(self) -> None:
        self.server.request_stop()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        serving = getattr(self.app.state, "serving", None)
        if serving is not None:
            serving.close(timeout=2.0)
        self.sock.close()

    def __exit__(self, *exc: object) -> None:
        self.stop()
