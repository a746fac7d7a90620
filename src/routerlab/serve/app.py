"""The HTTP face of ``routerlab serve``: a FastAPI app that answers like an OpenAI server.

Endpoints: ``GET /v1/models`` (the router's virtual model, then the actors), ``GET /v1/models/{id}`` and
``POST /v1/chat/completions`` (``model`` = ``routerlab``/``auto``: routed; an actor's name: forced; ``messages``,
``max_tokens`` or ``max_completion_tokens``, ``temperature``, ``top_p``, ``stop``, ``seed``, ``stream`` and
``stream_options.include_usage``; ``metadata.query_id`` / ``metadata.dataset`` name the log row). The response's
``model`` is the actor that answered; an extra ``routerlab`` object carries the query id, the propensity and the
mode. Streaming answers are server-sent events (``data: {chunk}`` lines, then ``data: [DONE]``).

Every error is an OpenAI error object ``{"error": {"message", "type", "param", "code"}}`` with a 4xx code for the
client's mistakes (400 bad JSON or fields, 404 unknown model or path, 405, 409 repeated query id, 413 body over
the limit, checked before parsing), 502 when the actor's backend fails, and 500 with one line (never a traceback)
for a bug. The body is read and checked by hand, not by a pydantic model, so no validation detail leaks out.

fastapi is imported here only: ``import routerlab.serve`` does not load it.
"""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from routerlab.errors import UsageError
from routerlab.serve.routing import (
    BackendFailure,
    DuplicateQuery,
    RoutingService,
    ServedStream,
    UnknownModel,
    new_query_id,
)

if TYPE_CHECKING:
    from fastapi import FastAPI

    from routerlab.llm.base import Decoding, Message
    from routerlab.serve.feedback_store import FeedbackStore

MAX_BODY_BYTES = 1 << 20
"""Default request body limit (1 MiB); a larger body is answered 413 before it is parsed."""

MAX_TOKENS_LIMIT = 4096
"""Default ceiling on ``max_tokens`` a request may ask for."""

UNSUPPORTED = ("tools", "functions", "tool_choice", "function_call", "audio", "modalities", "prediction")
"""Request fields this server refuses (400) rather than silently ignoring: they change what an answer is."""


class APIError(Exception):
    """An error answered as an OpenAI error object."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = " ".join(message.split())  # one line, always
        self.type = type
        self.param = param
        self.code = code

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
    if isinstance(exc, UnknownModel):
        return APIError(404, str(exc), param="model", code="model_not_found")
    if isinstance(exc, DuplicateQuery):
        return APIError(409, str(exc), param="metadata.query_id", code="duplicate_query_id")
    if isinstance(exc, BackendFailure):
        return APIError(502, str(exc), type="server_error", code="backend_failed")
    if isinstance(exc, UsageError):
        return APIError(400, str(exc))
    return APIError(500, f"internal error ({type(exc).__name__}); see the server's log", type="server_error")


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
               max_tokens_limit: int = MAX_TOKENS_LIMIT, feedback: FeedbackStore | None = None) -> FastAPI:
    """The FastAPI app serving ``service``. The caller owns the service (closing it closes backends and log) and
    ``feedback``, the store of ``POST /v1/feedback`` (default: one opened on the service's log at the first
    feedback request)."""
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response, StreamingResponse
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException

    app = FastAPI(title="routerlab serve", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.service = service

    def reply(err: APIError) -> JSONResponse:
        return JSONResponse(err.body(), status_code=err.status)

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return reply(exc)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 404:
            message, code = f"unknown path {request.url.path}; this server answers /v1/models and " \
                            "/v1/chat/completions", "unknown_url"
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

    async def chat_completions(request: Request) -> Response:
        body = await read_body(request)
        try:
            parsed = json.loads(body, parse_constant=_no_constants)
        except (ValueError, UnicodeDecodeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise APIError(400, f"could not parse the JSON body of the request ({first})") from None
        req = parse_chat_request(parsed, max_tokens_limit=max_tokens_limit)
        created = int(time.time())
        if req.stream:
            return await start_stream(req, created)
        try:
            served = await run_in_threadpool(service.complete, req.messages, req.decoding, model=req.model,
                                             query_id=req.query_id, dataset=req.dataset)
        except Exception as exc:
            raise _error_status(exc) from None
        c = served.completion
        return JSONResponse({
            "id": served.query_id if req.query_id is None else new_query_id(),
            "object": "chat.completion", "created": created, "model": served.decision.actor,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": c.text, "refusal": None},
                         "logprobs": None,
                         "finish_reason": _finish_reason(c.tokens_out, req.decoding.max_tokens, c.finish_reason)}],
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

    async def start_stream(req: ChatRequest, created: int) -> Response:
        try:  # routing encodes and scores the text: off the event loop, like every blocking step
            served = await run_in_threadpool(service.stream, req.messages, req.decoding, model=req.model,
                                             query_id=req.query_id, dataset=req.dataset)
        except Exception as exc:
            raise _error_status(exc) from None
        deltas = iter(served)
        # the first delta is awaited before answering, so a backend that fails at once is a 502, not a broken stream
        try:
            first: str | None = await run_in_threadpool(next, deltas, None)
        except Exception as exc:
            raise _error_status(exc) from None
        rid = served.query_id if req.query_id is None else new_query_id()
        extra = {"query_id": served.query_id, "propensity": served.decision.propensity,
                 "mode": served.decision.mode}
        return StreamingResponse(_events(served, deltas, first, rid, created, req, extra),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    app.add_route("/v1/models", list_models, methods=["GET"])
    app.add_route("/v1/models/{model_id:path}", get_model, methods=["GET"])
    app.add_route("/v1/chat/completions", chat_completions, methods=["POST"])
    app.add_route("/v1/feedback", post_feedback, methods=["POST"])
    return app


def _events(served: ServedStream, deltas: Iterator[str], first: str | None, rid: str, created: int,
            req: ChatRequest, extra: Mapping[str, Any]) -> Iterator[str]:
    """The server-sent events of one streamed answer: a role chunk, one chunk per delta, the finishing chunk,
    a usage chunk when asked, then ``[DONE]``; a backend failure mid-stream is one error event instead."""

    def chunk(delta: Mapping[str, Any], finish: str | None = None, **more: Any) -> str:
        payload = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": served.decision.actor,
                   "system_fingerprint": None,
                   "choices": [{"index": 0, "delta": dict(delta), "logprobs": None, "finish_reason": finish}],
                   **more}
        return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"

    yield chunk({"role": "assistant", "content": ""}, routerlab=dict(extra))
    try:
        if first is not None:
            yield chunk({"content": first})
            for delta in deltas:
                yield chunk({"content": delta})
    except Exception as exc:
        yield f"data: {json.dumps(_error_status(exc).body())}\n\n"
        return
    yield chunk({}, _finish_reason(served.tokens_out, req.decoding.max_tokens))
    if req.include_usage:
        usage = {"prompt_tokens": None, "completion_tokens": served.tokens_out,
                 "total_tokens": None}
        payload = {"id": rid, "object": "chat.completion.chunk", "created": created,
                   "model": served.decision.actor, "choices": [], "usage": usage}
        yield f"data: {json.dumps(payload)}\n\n"
    yield "data: [DONE]\n\n"


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


def make_server(app: FastAPI, *, log_level: str = "warning", access_log: bool = False) -> Any:
    """A uvicorn server for ``app`` (run it with ``server.run(sockets=[sock])``; set ``should_exit`` to stop)."""
    import uvicorn

    config = uvicorn.Config(app, log_level=log_level, access_log=access_log, lifespan="off",
                            timeout_graceful_shutdown=10)
    return uvicorn.Server(config)


class ServerThread:
    """``app`` served by uvicorn in a background thread on ``host`` (a free port): for tests and benchmarks.

    ``with ServerThread(app) as url:`` yields the base URL (``http://127.0.0.1:PORT/v1``) once the server
    accepts connections, and stops it (waiting for requests in flight) on exit.
    """

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> None:
        self.sock = bind(host, port)
        self.url = base_url(self.sock)
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
        self.server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        self.sock.close()

    def __exit__(self, *exc: object) -> None:
        self.stop()
