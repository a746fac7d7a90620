"""The ``openai`` backend: any OpenAI-compatible chat endpoint through the official ``openai`` client.

Spec: ``NAME=openai:MODEL@BASE_URL`` with options

- ``key_env=VAR``: the API key is read from environment variable ``VAR`` when the backend is loaded (a
  missing or empty variable is an error naming the variable). Without ``key_env`` the dummy key
  :data:`DUMMY_KEY` is sent, enough for local servers that check none (vLLM, llama.cpp, routerlab serve);
  the ``OPENAI_API_KEY`` variable is never read behind the user's back.
- ``timeout=S`` (60): seconds allowed to connect, and between two reads of the stream.
- ``retries=N`` (4): extra attempts after a 429, a 5xx, a timeout or a dropped connection, with
  exponential backoff from ``backoff=S`` (0.5 s, doubled per attempt, capped at 30 s, with jitter:
  each wait is drawn in [1/2, 1] of that), or exactly the wait a ``Retry-After`` header asks for. Any
  other 4xx fails at once with the server's message.
- ``concurrency=K`` (4): requests in flight at once across every thread using this backend;
  ``complete_batch`` runs its chats on K threads.
- ``context=N`` (0: unknown): the model's context window in tokens, for ``routerlab serve``'s prompt check
  (the prompt is then estimated at four characters a token; the endpoint's own check stays the last word).

Every request streams, so time to first token (request sent -> first non-empty content delta) and
inter-token latency (mean gap between later deltas) are measured on the client for any server. Token
counts come from the server's ``usage`` (asked for with ``stream_options.include_usage``); where a server
sends none (or refuses ``stream_options``), they are counted instead: one token per content delta out,
about four characters per token in.

The key lives only inside the ``openai`` client: it is in no ``repr``, name, error message, cache key or
record (``model_id`` is ``openai:MODEL@BASE_URL``), and server messages are scrubbed of it. ``openai`` is
imported when a backend is built, never when routerlab is imported. Option-letter scores (logits) are
not available through a chat API: :meth:`OpenAIBackend.choice_scores` is a UsageError.
"""

from __future__ import annotations

import email.utils
import math
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from routerlab._spec import Interval, check_constraints
from routerlab.errors import UsageError
from routerlab.llm.base import GREEDY, Backend, BackendSpec, Completion, Decoding, Message, register_backend

__all__ = ["DUMMY_KEY", "OpenAIBackend"]

#: The key sent when the spec names no ``key_env`` (the client refuses to start without one).
DUMMY_KEY = "routerlab-no-key"
#: The longest wait a ``Retry-After`` header may ask for; a longer one fails at once instead of sleeping.
MAX_RETRY_AFTER_S = 120.0
#: The longest exponential backoff between two attempts.
MAX_BACKOFF_S = 30.0

_CONSTRAINTS = {
    "timeout": Interval(float, 0, None, closed="neither"),
    "retries": Interval(int, 0, None),
    "backoff": Interval(float, 0, None),
    "concurrency": Interval(int, 1, None),
    "context": Interval(int, 0, None),
}
T = TypeVar("T")


class _Transient(Exception):
    """One failed attempt that may succeed if made again (429, 5xx, timeout, dropped connection)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class _Attempt:
    """What one streamed attempt measured (times from ``time.perf_counter``)."""

    start: float
    text: str = ""
    deltas: int = 0
    t_first: float | None = None
    t_last: float | None = None
    usage_in: int | None = None
    usage_out: int | None = None
    finish_reason: str | None = None


@register_backend("openai")
class OpenAIBackend(Backend):
    """An OpenAI-compatible chat endpoint: streamed calls with retries, a concurrency limit and client-side
    TTFT/ITL (see the module docstring for the spec and its options). Thread-safe."""

    options: ClassVar[Mapping[str, Any]] = {
        "key_env": "", "timeout": 60.0, "retries": 4, "backoff": 0.5, "concurrency": 4, "context": 0,
    }

    def __init__(self, spec: BackendSpec, *, cache_dir: Path | None = None) -> None:
        super().__init__(spec, cache_dir=cache_dir)
        model, at, url = spec.model.partition("@")
        model, url = model.strip(), url.strip().rstrip("/")
        if not at or not model or not url:
            raise UsageError(f"openai actor {spec.model!r}: write openai:MODEL@BASE_URL, "
                             "e.g. openai:gpt-4o-mini@https://api.openai.com/v1")
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"openai actor {spec.model!r}: the base URL {url!r} must start with http:// or https://")
        opts = {**self.options, **spec.backend_options()}
        check_constraints(f"openai actor {spec.model!r}", opts, _CONSTRAINTS)
        self.model = model
        self.base_url = url
        self.key_env: str | None = str(opts["key_env"]).strip() or None
        self.timeout = float(opts["timeout"])
        self.retries = int(opts["retries"])
        self.backoff = float(opts["backoff"])
        self.concurrency = int(opts["concurrency"])
        self.context = int(opts["context"])
        self.model_id = f"openai:{model}@{url}"  # the cache's identity of this model: never the key
        key = self._read_key()
        try:
            import openai
        except ImportError:  # pragma: no cover - the llm extra is missing
            raise UsageError("the openai backend needs the openai package: pip install 'routerlab[llm]'") from None
        self._openai = openai
        self._client = openai.OpenAI(base_url=url, api_key=key, timeout=self.timeout, max_retries=0)
        self._scrub_key = key if key != DUMMY_KEY else None
        self._slots = threading.BoundedSemaphore(self.concurrency)
        self._lock = threading.Lock()
        self._usage_supported = True  # cleared once the server refuses stream_options
        #: attempts made and seconds slept in backoff since the backend was built (for reports and tests)
        self.attempts = 0
        self.backoff_s = 0.0
        self.sleep: Callable[[float], None] = time.sleep  # tests may count the waits instead

    @property
    def where(self) -> str:
        """``MODEL@BASE_URL``, how error messages name this actor."""
        return f"{self.model}@{self.base_url}"

    def _read_key(self) -> str:
        """The API key from ``key_env`` (the dummy key when none is named); a missing variable is a
        UsageError naming the variable, never showing a value."""
        if self.key_env is None:
            return DUMMY_KEY
        key = os.environ.get(self.key_env, "").strip()
        if not key:
            raise UsageError(f"openai actor {self.where}: environment variable {self.key_env} "
                             "(named by key_env) is not set or empty")
        return key

    def _clean(self, text: object) -> str:
        """A server's text on one line, at most 500 characters, with the key (if a server echoed it) masked."""
        line = " ".join(str(text).split())
        if self._scrub_key:
            line = line.replace(self._scrub_key, "***")
        return line[:500]

    # ------------------------------------------------------------------------- one attempt
    def _open(self, messages: Sequence[Message], decoding: Decoding) -> Any:
        """Send one streaming request; the server's status is known when this returns."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": decoding.max_tokens, "temperature": decoding.temperature, "stream": True,
        }
        if decoding.top_p != 1.0:
            kwargs["top_p"] = decoding.top_p
        if decoding.seed is not None:
            kwargs["seed"] = decoding.seed
        if decoding.stop:
            kwargs["stop"] = list(decoding.stop)
        if self._usage_supported:
            kwargs["stream_options"] = {"include_usage": True}
        return self._client.chat.completions.create(**kwargs)

    @staticmethod
    def _deltas(stream: Any, attempt: _Attempt) -> Iterator[str]:
        """The stream's non-empty content deltas; their times, the usage and the finish reason go to ``attempt``."""
        for chunk in stream:
            usage = getattr(chunk, "usage", None)
            if usage is not None:
                attempt.usage_in, attempt.usage_out = usage.prompt_tokens, usage.completion_tokens
            for choice in chunk.choices or ():
                if choice.finish_reason:
                    attempt.finish_reason = str(choice.finish_reason)
                piece = choice.delta.content if choice.delta is not None else None
                if piece:
                    now = time.perf_counter()
                    if attempt.t_first is None:
                        attempt.t_first = now
                    attempt.t_last = now
                    attempt.deltas += 1
                    attempt.text += piece
                    yield piece

    def _classify(self, error: Exception) -> Exception:
        """An ``openai`` error -> a :class:`_Transient` (worth another attempt) or a one-line UsageError."""
        o = self._openai
        if isinstance(error, o.APIStatusError):
            status, message = error.status_code, self._clean(_server_message(error))
            if status == 429 or status >= 500:
                return _Transient(f"HTTP {status}: {message}", _retry_after(error.response.headers))
            return UsageError(f"openai actor {self.where}: HTTP {status}: {message}")
        if isinstance(error, o.APITimeoutError):
            return _Transient(f"no answer within timeout={self.timeout:g} s")
        if isinstance(error, o.APIConnectionError):
            return _Transient(f"connection failed ({self._clean(error.message)})")
        if isinstance(error, o.APIError):  # an error event inside the stream
            return _Transient(f"the server sent an error: {self._clean(error.message)}")
        return UsageError(f"openai actor {self.where}: {type(error).__name__}: {self._clean(error)}")

    def _with_retries(self, run: Callable[[], T], *, hold_slot: bool = True,
                      cancel: threading.Event | None = None) -> T:
        """``run()`` (one attempt, inside a concurrency slot unless the caller holds one) until it succeeds;
        transient failures are retried ``retries`` times after a backoff or the server's ``Retry-After``
        (no further attempt, and no further wait, once ``cancel`` is set)."""
        for attempt in range(self.retries + 1):
            if cancel is not None and cancel.is_set() and attempt:
                raise UsageError(f"openai actor {self.where}: cancelled after {attempt} attempt(s)")
            with self._lock:
                self.attempts += 1
            try:
                if not hold_slot:
                    return run()
                with self._slots:
                    return run()
            except self._openai.OpenAIError as raw:
                error = self._classify(raw)
            except Exception as raw:
                if not _is_transport_error(raw):
                    raise
                error = _Transient(f"connection failed ({type(raw).__name__})")
            if isinstance(error, UsageError):
                if self._usage_supported and "stream_options" in str(error):
                    self._usage_supported = False  # an older server: count tokens instead; ask again at once
                    return self._with_retries(run, hold_slot=hold_slot, cancel=cancel)
                raise error from None
            assert isinstance(error, _Transient)
            if attempt == self.retries:
                raise UsageError(f"openai actor {self.where}: failed after {attempt + 1} "
                                 f"attempt{'s' if attempt else ''}: {error}") from None
            wait = min(MAX_BACKOFF_S, self.backoff * 2.0 ** attempt) * random.uniform(0.5, 1.0)
            if error.retry_after is not None:
                if error.retry_after > MAX_RETRY_AFTER_S:
                    raise UsageError(f"openai actor {self.where}: {error}; the server asks to wait "
                                     f"{error.retry_after:.0f} s, more than {MAX_RETRY_AFTER_S:.0f} s") from None
                wait = error.retry_after
            with self._lock:
                self.backoff_s += wait
            if cancel is not None:
                cancel.wait(wait)
            else:
                self.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    # ------------------------------------------------------------------------- the contract
    def complete(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Completion:
        """One whole answer, streamed, with its timings.

        Times are those of the attempt that succeeded, from sending its request: the table should hold
        the model's speed, not the time spent waiting out rate limits (``backoff_s`` counts that)."""
        return self._complete(messages, decoding, None)

    def complete_cancellable(self, messages: Sequence[Message], decoding: Decoding,
                             cancel: threading.Event) -> Completion:
        """:meth:`complete` that stops reading between deltas, and makes no further attempt, once ``cancel``
        is set (the text so far is returned)."""
        return self._complete(messages, decoding, cancel)

    def _complete(self, messages: Sequence[Message], decoding: Decoding,
                  cancel: threading.Event | None) -> Completion:
        def run() -> tuple[_Attempt, float]:
            attempt = _Attempt(start=time.perf_counter())
            stream = self._open(messages, decoding)
            try:
                for _ in self._deltas(stream, attempt):
                    if cancel is not None and cancel.is_set():
                        break
            finally:
                stream.close()
            return attempt, time.perf_counter()

        attempt, end = self._with_retries(run, cancel=cancel)
        ttft = None if attempt.t_first is None else attempt.t_first - attempt.start
        itl = None
        if attempt.deltas >= 2 and attempt.t_first is not None and attempt.t_last is not None:
            itl = (attempt.t_last - attempt.t_first) / (attempt.deltas - 1)
        tokens_in = attempt.usage_in if attempt.usage_in is not None else _estimate_tokens(messages)
        tokens_out = attempt.usage_out if attempt.usage_out is not None else attempt.deltas
        return Completion(text=attempt.text, tokens_in=int(tokens_in), tokens_out=int(tokens_out),
                          latency_s=end - attempt.start, ttft_s=ttft, itl_s=itl,
                          finish_reason=attempt.finish_reason or "stop")

    def context_window(self) -> int | None:
        """The ``context`` option (None when not given: the endpoint checks its own prompts)."""
        return self.context or None

    def prompt_tokens(self, messages: Sequence[Message], *, limit: int | None = None) -> int | None:
        """An estimate (four characters a token, four more a message) when ``context`` is given; the endpoint
        has the tokenizer, this client does not."""
        return _estimate_tokens(messages) if self.context else None

    def complete_batch(self, batch: Sequence[Sequence[Message]], decoding: Decoding = GREEDY) -> list[Completion]:
        """The chats on ``concurrency`` threads at once, answers in the batch's order."""
        if len(batch) <= 1 or self.concurrency == 1:
            return [self.complete(m, decoding) for m in batch]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(batch))) as pool:
            return list(pool.map(lambda m: self.complete(m, decoding), batch))

    def stream(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Iterator[str]:
        """The answer's content deltas as they arrive, holding one concurrency slot until the stream ends.

        Opening the request is retried like :meth:`complete`; a failure after text was yielded is not
        (the reader already has part of an answer) and raises a one-line UsageError."""
        with self._slots:
            stream = self._with_retries(lambda: self._open(messages, decoding), hold_slot=False)
            attempt = _Attempt(start=time.perf_counter())
            try:
                yield from self._deltas(stream, attempt)
            except Exception as raw:
                if isinstance(raw, self._openai.OpenAIError):
                    error: Exception = self._classify(raw)
                elif _is_transport_error(raw):
                    error = _Transient(f"connection failed ({type(raw).__name__})")
                else:
                    raise
                raise UsageError(f"openai actor {self.where}: the stream broke after {attempt.deltas} "
                                 f"delta(s): {error}") from None
            finally:
                stream.close()

    def describe(self) -> dict[str, Any]:
        """The endpoint and settings, safe to log (the key's variable name, never its value)."""
        return {"kind": "openai", "model": self.model, "base_url": self.base_url, "key_env": self.key_env,
                "timeout": self.timeout, "retries": self.retries, "backoff": self.backoff,
                "concurrency": self.concurrency}

    def close(self) -> None:
        """Close the client's HTTP connections."""
        self._client.close()


def _is_transport_error(error: BaseException) -> bool:
    """An HTTP transport failure the ``openai`` client let through unwrapped (older clients do so for a
    timeout or a dropped connection in the middle of a stream): worth another attempt, like a wrapped one."""
    return type(error).__module__.split(".")[0] in {"httpx", "httpx2", "httpcore"} and any(
        cls.__name__ in {"TransportError", "TimeoutException", "NetworkError", "ProtocolError"}
        for cls in type(error).__mro__)


def _retry_after(headers: Any) -> float | None:
    """Seconds a ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date) header asks to wait."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            try:
                seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
            except (TypeError, ValueError, IndexError):
                continue
        if math.isfinite(seconds):
            return max(0.0, seconds)
    return None


def _server_message(error: Any) -> str:
    """The server's own error text: ``{"error": {"message": ...}}``, ``{"detail": ...}`` or the client's message."""
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            for field in ("message", "detail"):
                if inner.get(field):
                    return str(inner[field])
        elif isinstance(inner, str) and inner:
            return inner
    return str(getattr(error, "message", error))


def _estimate_tokens(messages: Sequence[Message]) -> int:
    """About four characters per token plus four per message: only for servers that report no usage."""
    return sum(4 + math.ceil(len(m.content) / 4) for m in messages)
