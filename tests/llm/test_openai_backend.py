"""The ``openai`` backend against a stub OpenAI-compatible server on 127.0.0.1 (a random port).

The stub streams SSE chunks with set delays (so TTFT and ITL can be checked against them), answers
with scripted statuses (429, 500, 400, a Retry-After), counts requests and the most in flight at once,
and records each request's body and Authorization header. Nothing leaves the loopback interface.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")

from routerlab.errors import UsageError
from routerlab.llm.base import Decoding, Message, load_backend, parse_actor_spec
from routerlab.llm.openai_backend import DUMMY_KEY, OpenAIBackend

SENTINEL = "sk-routerlab-SENTINEL-7f3a9c"
HELLO = [Message("user", "hello")]


@dataclass
class StubState:
    """What the stub answers next and what it has seen (guarded by ``lock``)."""

    pieces: list[str] = field(default_factory=lambda: ["Hel", "lo", " wor", "ld"])
    first_delay: float = 0.0
    gap: float = 0.0
    usage: bool = True
    refuse_stream_options: bool = False
    echo: bool = False  # answer with the last message's content (one piece)
    error_after: int | None = None  # send an SSE error event after this many pieces
    plan: list[tuple[int, dict[str, str], str]] = field(default_factory=list)  # scripted answers, first first
    requests: list[dict[str, Any]] = field(default_factory=list)
    auth: list[str] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    # hold each request until this many have been in flight at once (at most 5 s): concurrency tests then see the
    # limit reached whatever the machine's load, and a broken limit still shows as more in flight
    hold_until: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    state: StubState  # set on the subclass each server gets

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest's output clean
        pass

    def _send_json(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _event(self, payload: object) -> None:
        self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
        self.wfile.flush()

    def do_POST(self) -> None:
        st = self.state
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with st.lock:
            st.requests.append(body)
            st.auth.append(self.headers.get("Authorization", ""))
            st.in_flight += 1
            st.max_in_flight = max(st.max_in_flight, st.in_flight)
            scripted = st.plan.pop(0) if st.plan else None
        left = False

        def leave() -> None:  # once, and before the client can see the end of its answer: a client that got its
            nonlocal left  # last byte may start its next call at once, and must not find this one still counted
            if not left:
                left = True
                with st.lock:
                    st.in_flight -= 1

        deadline = time.monotonic() + 5.0
        while st.max_in_flight < st.hold_until and time.monotonic() < deadline:
            time.sleep(0.005)
        try:
            if scripted is not None:
                status, headers, message = scripted
                self._send_json(status, {"error": {"message": message, "type": "stub"}}, headers)
                return
            if st.refuse_stream_options and "stream_options" in body:
                self._send_json(400, {"error": {"message": "Unrecognized request argument: stream_options"}})
                return
            pieces = [body["messages"][-1]["content"]] if st.echo else list(st.pieces)
            assert body.get("stream") is True, "the backend always streams"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            base = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body["model"]}
            self._event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
            time.sleep(st.first_delay)
            for i, piece in enumerate(pieces):
                if i:
                    time.sleep(st.gap)
                if st.error_after is not None and i == st.error_after:
                    self._event({"error": {"message": "the model crashed"}})
                    return
                self._event({**base, "choices": [{"index": 0, "delta": {"content": piece}}]})
            self._event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
            if st.usage and body.get("stream_options", {}).get("include_usage"):
                self._event({**base, "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": len(pieces),
                                                               "total_tokens": 7 + len(pieces)}})
            leave()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass
        finally:
            leave()


@dataclass
class Stub:
    state: StubState
    url: str

    def reset(self) -> StubState:
        """A fresh state, once the previous test's requests have finished (a request a client gave up on may still
        be sleeping in its handler; counted after the reset, it would put ``in_flight`` off by one)."""
        deadline = time.monotonic() + 10.0
        while self.state.in_flight and time.monotonic() < deadline:
            time.sleep(0.01)
        self.state.__init__()  # type: ignore[misc]
        return self.state

    def spec(self, options: str = "", model: str = "stub-model") -> str:
        return f"a=openai:{model}@{self.url}" + (f",{options}" if options else "")


@pytest.fixture(scope="module")
def stub() -> Iterator[Stub]:
    state = StubState()
    handler = type("Handler", (_Handler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Stub(state, f"http://127.0.0.1:{server.server_address[1]}/v1")
    finally:
        server.shutdown()
        server.server_close()


def backend(stub: Stub, options: str = "", **kw: Any) -> OpenAIBackend:
    """An uncached backend on the stub, with backoff waits recorded instead of slept."""
    _, spec = parse_actor_spec(stub.spec(options, **kw))
    b = load_backend(spec, cache=False)
    assert isinstance(b, OpenAIBackend)
    waits: list[float] = []
    b.sleep = waits.append
    b.waits = waits  # type: ignore[attr-defined]
    return b


# ------------------------------------------------------------------------------- answers and timings
def test_streamed_answer_has_text_usage_and_timings_close_to_the_servers_delays(stub: Stub) -> None:
    st = stub.reset()
    st.first_delay, st.gap = 0.30, 0.10
    with backend(stub) as b:
        c = b.complete(HELLO, Decoding(max_tokens=9, stop=("END",), seed=3))
    assert c.text == "Hello world"
    assert (c.tokens_in, c.tokens_out, c.finish_reason, c.cached) == (7, 4, "length", False)
    assert c.ttft_s is not None and c.itl_s is not None
    assert 0.28 <= c.ttft_s <= 0.60, c.ttft_s   # first delay 0.30 s, plus a loaded machine's noise
    assert 0.09 <= c.itl_s <= 0.25, c.itl_s      # gap 0.10 s
    assert c.latency_s >= c.ttft_s + 3 * 0.09
    sent = st.requests[-1]
    assert sent["model"] == "stub-model" and sent["messages"] == [{"role": "user", "content": "hello"}]
    assert (sent["max_tokens"], sent["temperature"], sent["stop"], sent["seed"]) == (9, 0.0, ["END"], 3)
    assert sent["stream_options"] == {"include_usage": True}
    assert "top_p" not in sent  # the default is left to the server


def test_stream_yields_the_deltas_in_order(stub: Stub) -> None:
    st = stub.reset()
    with backend(stub) as b:
        assert list(b.stream(HELLO)) == ["Hel", "lo", " wor", "ld"]
    assert len(st.requests) == 1


def test_without_usage_tokens_are_counted_and_a_server_refusing_stream_options_is_asked_again(stub: Stub) -> None:
    st = stub.reset()
    st.refuse_stream_options = True
    with backend(stub) as b:
        c = b.complete([Message("system", "be brief"), Message("user", "x" * 40)])
        assert c.text == "Hello world"
        assert c.tokens_out == 4                       # one per content delta
        assert c.tokens_in == (4 + 2) + (4 + 10)       # ~4 characters a token, 4 a message
        assert ["stream_options" in r for r in st.requests] == [True, False]
        b.complete(HELLO)                              # remembered: no second refusal
    assert ["stream_options" in r for r in st.requests] == [True, False, False]


def test_a_one_delta_answer_has_no_inter_token_latency(stub: Stub) -> None:
    st = stub.reset()
    st.echo = True
    with backend(stub) as b:
        c = b.complete([Message("user", "ping")])
    assert c.text == "ping" and c.ttft_s is not None and c.itl_s is None


# ------------------------------------------------------------------------------- retries and errors
def test_two_429s_then_success_retries_with_exponential_backoff(stub: Stub) -> None:
    st = stub.reset()
    st.plan = [(429, {}, "slow down"), (429, {}, "slow down")]
    with backend(stub, "retries=3,backoff=0.2") as b:
        c = b.complete(HELLO)
        assert c.text == "Hello world"
        assert len(st.requests) == 3 and b.attempts == 3
        w0, w1 = b.waits  # type: ignore[attr-defined]
        assert 0.1 <= w0 <= 0.2 and 0.2 <= w1 <= 0.4  # backoff * 2**attempt, jitter in [1/2, 1]
        assert b.backoff_s == pytest.approx(w0 + w1)


def test_retry_after_is_honoured_and_a_too_long_one_fails_at_once(stub: Stub) -> None:
    st = stub.reset()
    st.plan = [(503, {"Retry-After": "2"}, "busy"), (429, {"retry-after-ms": "150"}, "busy")]
    with backend(stub, "backoff=0.01") as b:
        assert b.complete(HELLO).text == "Hello world"
        assert b.waits == [2.0, 0.15]  # type: ignore[attr-defined]
    st = stub.reset()
    st.plan = [(429, {"Retry-After": "3600"}, "quota exhausted")]
    with backend(stub) as b, pytest.raises(UsageError, match="asks to wait 3600 s"):
        b.complete(HELLO)
    assert len(st.requests) == 1


def test_500_always_fails_after_retries_plus_one_attempts_with_one_line(stub: Stub) -> None:
    st = stub.reset()
    st.plan = [(500, {}, "internal\nexplosion")] * 10
    with backend(stub, "retries=2,backoff=0.05") as b, pytest.raises(UsageError) as err:
        b.complete(HELLO)
    message = str(err.value)
    assert len(st.requests) == 3 and len(b.waits) == 2  # type: ignore[attr-defined]
    assert "\n" not in message
    assert message == (f"openai actor stub-model@{stub.url}: failed after 3 attempts: HTTP 500: internal explosion")


def test_400_fails_at_once_with_the_servers_message(stub: Stub) -> None:
    st = stub.reset()
    st.plan = [(400, {}, "max_tokens is too large"), (404, {}, "no such model")]
    with backend(stub, "retries=5") as b:
        with pytest.raises(UsageError, match=r"HTTP 400: max_tokens is too large$"):
            b.complete(HELLO)
        assert len(st.requests) == 1
        with pytest.raises(UsageError, match="HTTP 404: no such model"):
            list(b.stream(HELLO))
        assert len(st.requests) == 2 and b.waits == []  # type: ignore[attr-defined]


def test_a_timeout_is_retried_then_reported(stub: Stub) -> None:
    st = stub.reset()
    st.first_delay = 1.0
    with backend(stub, "timeout=0.2,retries=1,backoff=0") as b, pytest.raises(UsageError) as err:
        b.complete(HELLO)
    assert "failed after 2 attempts: no answer within timeout=0.2 s" in str(err.value)
    assert len(st.requests) == 2


def test_a_refused_connection_is_retried_then_reported() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _, spec = parse_actor_spec(f"a=openai:m@http://127.0.0.1:{port}/v1,retries=1,backoff=0")
    with load_backend(spec, cache=False) as b, pytest.raises(UsageError, match="failed after 2 attempts: connection"):
        b.complete(HELLO)


def test_an_error_event_in_the_middle_of_a_stream(stub: Stub) -> None:
    st = stub.reset()
    st.error_after = 2
    with backend(stub, "retries=1,backoff=0") as b:
        with pytest.raises(UsageError, match="failed after 2 attempts: the server sent an error: the model crashed"):
            b.complete(HELLO)  # a whole answer is simply asked again
        received: list[str] = []
        with pytest.raises(UsageError, match=r"the stream broke after 2 delta\(s\)"):
            received.extend(b.stream(HELLO))  # half an answer was handed out: not asked again
        assert received == ["Hel", "lo"]
    assert len(st.requests) == 3


# ------------------------------------------------------------------------------- concurrency
def test_concurrency_limit_holds_across_threads(stub: Stub) -> None:
    st = stub.reset()
    st.first_delay, st.gap, st.hold_until = 0.12, 0.01, 2
    with backend(stub, "concurrency=2") as b:
        threads = [threading.Thread(target=b.complete, args=(HELLO,)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(st.requests) == 8
    assert st.max_in_flight == 2, st.max_in_flight  # never more than 2, and the 8 threads did run 2 at a time


def test_complete_batch_runs_concurrently_and_keeps_the_order(stub: Stub) -> None:
    st = stub.reset()
    st.echo, st.first_delay, st.hold_until = True, 0.15, 3
    chats = [[Message("user", f"q{i}")] for i in range(9)]
    with backend(stub, "concurrency=3") as b:
        out = b.complete_batch(chats)
    assert [c.text for c in out] == [f"q{i}" for i in range(9)]
    assert st.max_in_flight == 3, st.max_in_flight  # three at a time, never more


# ------------------------------------------------------------------------------- cache and key
def test_a_second_identical_call_is_served_by_the_cache(stub: Stub, tmp_path: Path) -> None:
    st = stub.reset()
    _, spec = parse_actor_spec(stub.spec())
    with load_backend(spec, cache_dir=tmp_path) as b:
        first = b.complete(HELLO)
        again = b.complete(HELLO)
        other = b.complete(HELLO, Decoding(max_tokens=5))  # other decoding settings: a new call
    assert len(st.requests) == 2
    assert (first.cached, again.cached, other.cached) == (False, True, False)
    assert (again.text, again.latency_s, again.ttft_s, again.itl_s) == (first.text, first.latency_s, first.ttft_s,
                                                                       first.itl_s)
    with load_backend(spec, cache_dir=tmp_path) as b:  # a rerun: nothing is asked
        assert b.complete(HELLO).cached
    assert len(st.requests) == 2


def test_the_key_is_sent_but_never_shown_or_stored(stub: Stub, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    st = stub.reset()
    monkeypatch.setenv("ROUTERLAB_TEST_KEY", SENTINEL)
    _, spec = parse_actor_spec(stub.spec("key_env=ROUTERLAB_TEST_KEY,retries=1,backoff=0"))
    texts: list[str] = []
    with load_backend(spec, cache_dir=tmp_path) as b:
        b.complete(HELLO)
        inner = b.inner  # type: ignore[attr-defined]
        texts += [repr(b), repr(inner), b.name, b.model_id, json.dumps(inner.describe()), spec.describe(), repr(spec)]
        # a server that echoes the Authorization header back in its error message
        st.plan = [(401, {}, f"bad key Bearer {SENTINEL}"), (500, {}, f"key {SENTINEL}"), (500, {}, SENTINEL)]
        for chat in ([Message("user", "a")], [Message("user", "b")]):
            with pytest.raises(UsageError) as err:
                b.complete(chat)
            texts.append(str(err.value))
            texts.append(repr(err.value.__cause__) + repr(err.value.__context__))
    assert st.auth[0] == f"Bearer {SENTINEL}"
    assert "bad key Bearer ***" in texts[-4] and "HTTP 500: ***" in texts[-2]
    for text in texts:
        assert SENTINEL not in text
    stored = [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()]
    assert stored and all(SENTINEL.encode() not in data for data in stored)


def test_key_env_missing_names_the_variable_and_no_key_env_sends_the_dummy_key(
        stub: Stub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROUTERLAB_ABSENT_KEY", raising=False)
    _, spec = parse_actor_spec(stub.spec("key_env=ROUTERLAB_ABSENT_KEY"))
    with pytest.raises(UsageError, match=r"environment variable ROUTERLAB_ABSENT_KEY .* is not set or empty"):
        load_backend(spec, cache=False)
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)  # never read behind the user's back
    st = stub.reset()
    with backend(stub) as b:
        b.complete(HELLO)
    assert st.auth == [f"Bearer {DUMMY_KEY}"]


# ------------------------------------------------------------------------------- specs and the contract
@pytest.mark.parametrize(("spec", "match"), [
    ("a=openai:gpt-4o-mini", "write openai:MODEL@BASE_URL"),
    ("a=openai:gpt@", "write openai:MODEL@BASE_URL"),
    ("a=openai:gpt@ftp://h/v1", "must start with http:// or https://"),
    ("a=openai:gpt@http://h/v1,retries=-1", "retries=-1 is out of range"),
    ("a=openai:gpt@http://h/v1,concurrency=0", "concurrency=0 is out of range"),
    ("a=openai:gpt@http://h/v1,timeout=0", "timeout=0 is out of range"),
    ("a=openai:gpt@http://h/v1,retries=1.5", "retries=1.5 should be int"),
    ("a=openai:gpt@http://h/v1,api_key=x", "unknown option 'api_key'"),
])
def test_bad_specs_are_one_line_errors(spec: str, match: str) -> None:
    with pytest.raises(UsageError, match=match) as err:
        load_backend(parse_actor_spec(spec)[1], cache=False)
    assert "\n" not in str(err.value)


def test_spec_settings_and_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("K", "k")
    text = "a=openai:m@http://127.0.0.1:9/v1/,key_env=K,timeout=5,retries=2,backoff=1,concurrency=7,input_price=0.5"
    b = OpenAIBackend(parse_actor_spec(text)[1])
    assert b.model_id == "openai:m@http://127.0.0.1:9/v1"  # the trailing slash does not make a new model
    assert b.describe() == {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", "key_env": "K",
                            "timeout": 5.0, "retries": 2, "backoff": 1.0, "concurrency": 7}
    assert b.spec.input_price == 0.5
    with pytest.raises(UsageError, match="option-letter scores need a local model"):
        b.choice_scores(HELLO, ["A", "B"])
    b.close()


def test_importing_the_module_does_not_import_openai() -> None:
    code = ("import sys, routerlab.llm.base as base; base.parse_actor_spec('a=openai:m@http://h/v1'); "
            "assert 'openai' not in sys.modules, 'openai imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------------------- against routerlab serve
def test_against_routerlab_serve(tmp_path: Path) -> None:
    """routerlab's openai backend calling routerlab's own server (a knn router over test-echo actors): routed and
    forced answers, streamed deltas, usage, the server's error message on a 404, and every request in its log."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from routerlab.datasets import demo
    from routerlab.serve import RequestLog, RoutingService
    from routerlab.serve.app import ServerThread, create_app
    from tests.serve import _backends  # noqa: F401 - registers the test-echo backend kind

    table = demo(200, seed=0)
    pool = {name: load_backend(spec, cache=False) for name, spec in
            (parse_actor_spec(f"{a}=test-echo:{a}") for a in table.actor_names)}
    log = RequestLog(tmp_path / "served.csv")
    service = RoutingService.train("knn:k=5", table, pool, log=log)
    text = "Solve for x: 3x + 4 = 19"
    try:
        with ServerThread(create_app(service)) as url:
            _, routed_spec = parse_actor_spec(f"r=openai:routerlab@{url},retries=0")
            _, forced_spec = parse_actor_spec(f"f=openai:coder-7b@{url},retries=0")
            _, missing_spec = parse_actor_spec(f"m=openai:no-such-model@{url},retries=3")
            with load_backend(routed_spec, cache_dir=tmp_path / "cache") as routed:
                first = routed.complete([Message("system", "be brief"), Message("user", text)])
                again = routed.complete([Message("system", "be brief"), Message("user", text)])
                deltas = list(routed.stream([Message("user", text)]))
            actor = service.actor_names[int(service.policy(text).argmax())]
            assert first.text == f"{actor} says: {text}" and again.cached and again.text == first.text
            assert first.tokens_out == len(first.text.split(" ")) and first.ttft_s is not None
            assert first.itl_s is not None and first.latency_s >= first.ttft_s
            assert len(deltas) == len(first.text.split(" ")) and "".join(deltas) == first.text
            with load_backend(forced_spec, cache=False) as forced:
                c = forced.complete([Message("user", "hi there")], Decoding(max_tokens=2))
            assert (c.text, c.tokens_out, c.finish_reason) == ("coder-7b says:", 2, "length")
            with load_backend(missing_spec, cache=False) as missing, pytest.raises(UsageError) as err:
                missing.complete(HELLO)
            assert "HTTP 404" in str(err.value) and "no-such-model" in str(err.value)
            assert missing.attempts == 1  # a 404 is not retried
    finally:
        service.close()
    with open(log.path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["actor"], r["mode"]) for r in rows] == [(actor, "routed"), (actor, "routed"), ("coder-7b", "forced")]


def test_a_transport_error_the_client_lets_through_is_retried(stub: Stub, monkeypatch: pytest.MonkeyPatch) -> None:
    """Older ``openai`` clients let an httpx error escape from the middle of a stream: it counts as a dropped
    connection (retried by complete, reported by stream), while any other exception is a bug and propagates."""
    try:  # the HTTP library under the installed openai client
        import httpx2 as httpx
    except ImportError:
        httpx = pytest.importorskip("httpx")
    real = OpenAIBackend._deltas
    failures: list[Exception] = [httpx.RemoteProtocolError("peer closed connection")]

    def flaky(stream: Any, attempt: Any) -> Iterator[str]:
        if failures:
            raise failures.pop(0)
        yield from real(stream, attempt)

    monkeypatch.setattr(OpenAIBackend, "_deltas", staticmethod(flaky))
    st = stub.reset()
    with backend(stub, "retries=1,backoff=0") as b:
        assert b.complete(HELLO).text == "Hello world" and b.attempts == 2
        failures.append(ValueError("a bug"))
        with pytest.raises(ValueError, match="a bug"):
            b.complete(HELLO)
        assert b.attempts == 3
        failures.append(httpx.ReadTimeout("read timed out"))
        with pytest.raises(UsageError, match=r"stream broke after 0 delta\(s\): connection failed \(ReadTimeout\)"):
            list(b.stream(HELLO))
    assert len(st.requests) == 4
