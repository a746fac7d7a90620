"""``routerlab serve`` under load, and its faults (issue 26): many concurrent clients against a real ``routerlab
serve`` process whose actors are stub OpenAI-compatible servers on 127.0.0.1.

Run:  .venv/bin/python benchmarks/bench_serve_load.py [--clients 64] [--per-client 1000] [--stream-share 0.25]
          [--malformed 200] [--router knn:k=10] [--fsync per-request] [--backend openai] [--json OUT]
          [--skip-kill] [--skip-faults]

The server is the real command (``python -m routerlab serve ...`` in its own process, cache off, log on), its
actors ``NAME=openai:MODEL@URL`` served by ``benchmarks/stub_openai.py`` (a raw asyncio HTTP server in another
process; ``--backend test-echo`` uses the in-process echo backend of the test suite instead). The load generator
is raw asyncio sockets speaking HTTP/1.1 with keep-alive (no HTTP library, no openai client), one connection per
client, so the client side costs the two cores little. Every loop is bounded: each request has a timeout
(``--request-timeout``), the whole run a deadline (``--deadline``), and the server is stopped with SIGINT, then
SIGTERM, then SIGKILL if it does not stop in time (what happened is reported).

1. Load: ``clients x per-client`` requests routed by the router (``model=routerlab``), ``--stream-share`` of them
   streamed, and ``--malformed`` malformed requests of 20 kinds spread among them. Recorded: throughput of the
   well-formed requests, their p50/p95/p99 latency, the count of 5xx (must be 0), whether every malformed request
   got a 4xx with an OpenAI error object, and the reconciliation of the request log with the client's records:
   exactly one well-formed row per answered request (its text and actor those the client sent and received), no
   torn or interleaved rows, unique ids.
2. ``kill -9`` of the server mid-load: the rows logged are a subset of the requests sent, every request answered
   before the kill has its row, at most the requests in flight are lost; the log reopens (a cut-off record, if
   any, is dropped with a warning), a restarted server appends to it, and the whole log reads with
   ``read_logs`` after ``attach_feedback``.
3. Faulty actors: one actor answers 500 every time, one never answers (``timeout``/``retries`` as configured on
   their specs); requests forced to them must fail fast (a 5xx after the configured attempts) and requests to the
   healthy actors, sent at the same time, must keep their latency (compared with the same load without faults).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import io
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STUB = REPO / "benchmarks" / "stub_openai.py"
SERVER = """
import sys
sys.path.insert(0, {repo!r})
if {echo!r}:
    import tests.serve._backends  # the test-echo backend kind
from routerlab.cli import main
sys.exit(main(sys.argv[1:]))
"""
MAX_BODY = 65536
STALLED: dict[int, float] = {}  # id(results) of a load run that stalled -> when it stopped (seconds into it)

# ----------------------------------------------------------------------------------------------- processes


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()
    except OSError:
        return "n/a"


def start_stub() -> tuple[subprocess.Popen[str], str]:
    """The stub OpenAI server in its own process, and its base URL."""
    proc = subprocess.Popen([sys.executable, str(STUB), "--port", "0"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.kill()
        raise RuntimeError("the stub OpenAI server did not start")
    return proc, url


def actor_specs(actors: list[str], backend: str, stub_url: str | None, *, faults: dict[str, str] | None = None,
                timeout: float = 10.0, retries: int = 1) -> str:
    """``--actors`` for the table's actors: each an openai actor on the stub (model ``stub-NAME``, or the
    fault's model name), or a test-echo backend."""
    specs = []
    for a in actors:
        if backend == "test-echo":
            specs.append(f"{a}=test-echo:{a}")
        else:
            model = (faults or {}).get(a, f"stub-{a}")
            specs.append(f"{a}=openai:{model}@{stub_url},timeout={timeout:g},retries={retries},backoff=0.05")
    return ",".join(specs)


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    url: str
    stderr_path: Path

    @property
    def host_port(self) -> tuple[str, int]:
        hostport = self.url.split("//", 1)[1].split("/", 1)[0]
        host, port = hostport.rsplit(":", 1)
        return host, int(port)

    def stop(self, grace_s: float = 15.0) -> dict[str, Any]:
        """SIGINT, then SIGTERM, then SIGKILL, each after ``grace_s``: how it stopped and its exit code."""
        for sig, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM"), (signal.SIGKILL, "SIGKILL")):
            if self.proc.poll() is not None:
                break
            t0 = time.monotonic()
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=grace_s if sig != signal.SIGKILL else 30)
                return {"stopped_by": name, "exit_code": self.proc.returncode,
                        "stop_s": round(time.monotonic() - t0, 2), "stderr_tail": self.stderr_tail()}
            except subprocess.TimeoutExpired:
                continue
        return {"stopped_by": "already", "exit_code": self.proc.returncode, "stderr_tail": self.stderr_tail()}

    def stderr_tail(self, n: int = 600) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def start_server(router: str, actors: str, log: Path, workdir: Path, *, echo: bool, fsync: str = "per-request",
                 extra: list[str] | None = None, blas_threads: int | None = 1) -> Server:
    """``routerlab serve`` in its own process (port 0, cache off, log on), once it prints its URL."""
    args = ["serve", router, "--actors", actors, "--port", "0", "--log", str(log), "--no-cache",
            "--max-body", str(MAX_BODY), "--fsync", fsync, *(extra or [])]
    if blas_threads is not None:
        args += ["--blas-threads", str(blas_threads)]
    stderr_path = workdir / f"server-{time.monotonic_ns()}.err"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "MPLBACKEND": "Agg"}
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", SERVER.format(repo=str(REPO), echo=echo), *args],
                                stdout=subprocess.PIPE, stderr=err, env=env, cwd=str(REPO))
    assert proc.stdout is not None
    line = _readline(proc, 120.0)  # printed once the router is trained and the port bound
    if not line.startswith("http://"):
        proc.kill()
        raise RuntimeError(f"routerlab serve did not start: {stderr_path.read_text(errors='replace')[-2000:]}")
    server = Server(proc, line, stderr_path)
    _wait_accepting(*server.host_port)
    return server


def _readline(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """The process's first stdout line, or "" when none comes within ``timeout`` seconds (bounded: a server
    that hangs while starting does not hang the benchmark)."""
    import select

    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline().decode().strip() if ready else ""


def _wait_accepting(host: str, port: int, timeout: float = 60.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
            return
        time.sleep(0.05)
    raise RuntimeError(f"the server on {host}:{port} accepts no connection")


# ----------------------------------------------------------------------------------------------- requests


def _malformed_kinds(texts: list[str]) -> list[tuple[str, str, str, bytes, tuple[int, ...]]]:
    """(kind, method, path, body, accepted statuses) of every malformed request kind."""

    def j(obj: Any) -> bytes:
        return json.dumps(obj).encode()

    msg = [{"role": "user", "content": texts[0]}]
    deep = MAX_BODY // 2 - 64  # as deep as fits under the body limit: the parser must see it
    return [
        ("bad-json", "POST", "/v1/chat/completions", b'{"model": "routerlab", "messages": [', (400,)),
        ("not-an-object", "POST", "/v1/chat/completions", b"[1, 2, 3]", (400,)),
        ("no-model", "POST", "/v1/chat/completions", j({"messages": msg}), (400,)),
        ("no-messages", "POST", "/v1/chat/completions", j({"model": "routerlab"}), (400,)),
        ("empty-messages", "POST", "/v1/chat/completions", j({"model": "routerlab", "messages": []}), (400,)),
        ("messages-not-list", "POST", "/v1/chat/completions", j({"model": "routerlab", "messages": "hi"}), (400,)),
        ("bad-role", "POST", "/v1/chat/completions",
         j({"model": "routerlab", "messages": [{"role": "wizard", "content": "hi"}]}), (400,)),
        ("no-user-message", "POST", "/v1/chat/completions",
         j({"model": "routerlab", "messages": [{"role": "system", "content": "hi"}]}), (400,)),
        ("max-tokens-0", "POST", "/v1/chat/completions", j({"model": "routerlab", "messages": msg, "max_tokens": 0}),
         (400,)),
        ("temperature-9", "POST", "/v1/chat/completions",
         j({"model": "routerlab", "messages": msg, "temperature": 9}), (400,)),
        ("n-3", "POST", "/v1/chat/completions", j({"model": "routerlab", "messages": msg, "n": 3}), (400,)),
        ("tools", "POST", "/v1/chat/completions",
         j({"model": "routerlab", "messages": msg, "tools": [{"type": "function"}]}), (400,)),
        ("stream-options-alone", "POST", "/v1/chat/completions",
         j({"model": "routerlab", "messages": msg, "stream_options": {"include_usage": True}}), (400,)),
        ("image-part", "POST", "/v1/chat/completions",
         j({"model": "routerlab", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}), (400,)),
        ("stream-not-bool", "POST", "/v1/chat/completions",
         j({"model": "routerlab", "messages": msg, "stream": "yes"}), (400,)),
        ("not-utf8", "POST", "/v1/chat/completions", b'{"model": "routerlab", "messages": "\xff\xfe"}', (400,)),
        ("unknown-model", "POST", "/v1/chat/completions", j({"model": "gpt-17", "messages": msg}), (404,)),
        ("unknown-path", "POST", "/v1/nothing", j({"model": "routerlab", "messages": msg}), (404,)),
        ("wrong-method", "GET", "/v1/chat/completions", b"", (405,)),
        ("body-over-limit", "POST", "/v1/chat/completions",
         j({"model": "routerlab", "messages": [{"role": "user", "content": "x" * (MAX_BODY + 10)}]}), (413,)),
        ("duplicate-query-id", "POST", "/v1/chat/completions",
         j({"model": "routerlab", "messages": msg, "metadata": {"query_id": "load-dup-0"}}), (409,)),
        ("deep-nesting", "POST", "/v1/chat/completions", b"[" * deep + b"]" * deep, (400,)),
    ]


@dataclass
class Result:
    """One request as the client saw it."""

    i: int
    kind: str  # "routed", "stream" or a malformed kind
    status: int | None = None  # None: no HTTP answer (timeout, connection error)
    latency_s: float | None = None
    query_id: str | None = None
    actor: str | None = None
    text: str | None = None
    error_object: bool = False
    outcome: str = "pending"  # answered, http-error, timeout, connection-error, stream-broken, not-sent
    detail: str = ""
    expect: tuple[int, ...] = field(default_factory=tuple)


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    line = await reader.readline()
    if not line:
        raise ConnectionError("the server closed the connection")
    status = int(line.split(b" ", 2)[1])
    headers: dict[str, str] = {}
    while (h := await reader.readline()) not in (b"\r\n", b"\n", b""):
        k, _, v = h.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size_line = await reader.readline()
            if not size_line:  # the connection ended mid-answer (the server died): not a finished answer
                raise ConnectionError("the server closed the connection in the middle of an answer")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readline()
                break
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        body = b"".join(parts)
    elif "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    else:
        body = await reader.read()
    return status, headers, body


class Client:
    """One keep-alive HTTP/1.1 connection, reopened after the server closes it."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        if self.writer is None or self.writer.is_closing():
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = (f"{method} {path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\n\r\n").encode()
        self.writer.write(head + body)
        await self.writer.drain()
        status, headers, data = await _read_response(self.reader)
        if headers.get("connection", "").lower() == "close" or status >= 400:
            # after an error the server may not have read the whole body (a 413): a fresh connection is sent next
            self.close()
        return status, headers, data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


def _check_error_object(data: bytes) -> bool:
    try:
        err = json.loads(data)["error"]
    except (ValueError, KeyError, TypeError):
        return False
    return (isinstance(err, dict) and isinstance(err.get("message"), str) and bool(err["message"])
            and isinstance(err.get("type"), str) and "param" in err and "code" in err)


def _parse_answer(res: Result, status: int, data: bytes, stream: bool) -> None:
    res.status = status
    if status >= 400:
        res.error_object = _check_error_object(data)
        res.outcome = "http-error"
        res.detail = data[:300].decode(errors="replace")
        return
    if not stream:
        body = json.loads(data)
        res.query_id, res.actor = body["routerlab"]["query_id"], body["model"]
        res.outcome = "answered"
        return
    events = [e[len("data: "):] for e in data.decode().split("\n\n") if e.startswith("data: ")]
    if not events or events[-1] != "[DONE]":
        res.outcome, res.detail = "stream-broken", (events[-1][:300] if events else "no event")
        return
    first = json.loads(events[0])
    res.query_id, res.actor = first["routerlab"]["query_id"], first["model"]
    for e in events[1:-1]:
        if '"error"' in e and "error" in json.loads(e):
            res.outcome, res.detail = "stream-broken", e[:300]
            return
    res.outcome = "answered"


@dataclass
class Plan:
    """The requests of one load run, in the order the clients take them."""

    items: list[tuple[str, str, str, bytes, tuple[int, ...], str | None]]  # kind, method, path, body, expect, text


def make_plan(texts: list[str], n: int, stream_share: float, n_malformed: int, seed: int, *,
              models: list[str] | None = None) -> Plan:
    """``n`` requests: ``n_malformed`` malformed (every kind in turn), the rest well-formed, ``stream_share`` of
    them streamed; ``models`` (default ``routerlab``) is drawn from for the model of each well-formed one."""
    rng = random.Random(seed)
    kinds = _malformed_kinds(texts)
    bad_at = set(rng.sample(range(n), min(n_malformed, n)))
    items = []
    k = 0
    for i in range(n):
        if i in bad_at:
            kind, method, path, body, expect = kinds[k % len(kinds)]
            k += 1
            items.append((kind, method, path, body, expect, None))
            continue
        text = f"{texts[rng.randrange(len(texts))]} [{i}]"  # unique: the log's text identifies the request
        stream = rng.random() < stream_share
        payload: dict[str, Any] = {"model": rng.choice(models) if models else "routerlab",
                                   "messages": [{"role": "user", "content": text}], "max_tokens": 16,
                                   "temperature": 0}
        if stream:
            payload["stream"] = True
            if rng.random() < 0.5:
                payload["stream_options"] = {"include_usage": True}
        items.append(("stream" if stream else "routed", "POST", "/v1/chat/completions",
                      json.dumps(payload).encode(), (200,), text))
    return Plan(items)


async def run_load(host: str, port: int, plan: Plan, n_clients: int, *, request_timeout: float,
                   deadline_s: float, stop_on_connection_error: bool = False,
                   live: list[Result] | None = None, stall_s: float = 45.0) -> tuple[list[Result], float]:
    """The plan's requests over ``n_clients`` keep-alive connections; every request bounded by
    ``request_timeout``, the run by ``deadline_s`` (requests not sent by then are ``not-sent``).
    ``stop_on_connection_error``: a client stops at its first connection error (the server was killed).
    ``live``: a list the results are put in at once, to watch them as they come. ``stall_s``: when no request
    has finished for that long (every client waiting: a stuck server), the run stops, the requests left are
    ``not-sent`` and :data:`STALLED` records when. Returns the results and the wall time."""
    results = [Result(i, kind, expect=expect, text=text) for i, (kind, _, _, _, expect, text) in
               enumerate(plan.items)]
    if live is not None:
        live.extend(results)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(plan.items)):
        queue.put_nowait(i)
    t_start = time.perf_counter()

    async def worker() -> None:
        client = Client(host, port)
        try:
            while True:
                try:
                    i = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                kind, method, path, body, _, _ = plan.items[i]
                res = results[i]
                t0 = time.perf_counter()
                res.outcome = "in-flight"
                try:
                    status, _, data = await asyncio.wait_for(client.request(method, path, body), request_timeout)
                except TimeoutError:
                    res.outcome, res.detail = "timeout", f"no answer within {request_timeout:g} s"
                    client.close()
                    continue
                except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
                    res.outcome, res.detail = "connection-error", type(exc).__name__
                    client.close()
                    if stop_on_connection_error:  # the server is gone (the kill -9 case): this client stops
                        return
                    continue
                res.latency_s = time.perf_counter() - t0
                try:
                    _parse_answer(res, status, data, kind == "stream")
                except (ValueError, KeyError, TypeError) as exc:
                    res.outcome, res.detail = "bad-answer", f"{type(exc).__name__}: {data[:200]!r}"
        finally:
            client.close()

    tasks = [asyncio.create_task(worker()) for _ in range(n_clients)]

    async def watchdog() -> None:  # no answer for stall_s (timeouts do not count): the server is stuck; stop
        seen, last = -1, time.perf_counter()
        while True:
            await asyncio.sleep(0.5)
            done = sum(r.outcome in ("answered", "http-error", "bad-answer") for r in results)  # not timeouts
            if done != seen:
                seen, last = done, time.perf_counter()
            elif time.perf_counter() - last > stall_s:
                stalled.append(round(time.perf_counter() - t_start, 1))
                for task in tasks:
                    task.cancel()
                return

    stalled: list[float] = []
    dog = asyncio.create_task(watchdog())
    _, pending = await asyncio.wait(tasks, timeout=deadline_s)
    dog.cancel()
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for res in results:
        if res.outcome == "pending":
            res.outcome = "not-sent"
    if stalled:
        STALLED[id(results)] = stalled[0]
    return results, time.perf_counter() - t_start


# ----------------------------------------------------------------------------------------------- the log


def read_log_rows(path: Path) -> tuple[list[list[str]], int, bool]:
    """(rows, count of malformed rows, whether the file ends in the middle of a record)."""
    from routerlab.serve.log import LOG_COLUMNS

    data = path.read_bytes()
    torn_tail = bool(data) and not data.endswith(b"\n")
    rows = list(csv.reader(io.StringIO(data.decode("utf-8", errors="replace"), newline="")))
    if not rows or tuple(rows[0]) != LOG_COLUMNS:
        raise RuntimeError(f"{path}: no request-log header")
    body = rows[1:]
    if torn_tail and body:
        body = body[:-1]
    bad = 0
    for r in body:
        if len(r) != len(LOG_COLUMNS) or not _well_formed(r):
            bad += 1
    return body, bad, torn_tail


def _well_formed(r: list[str]) -> bool:
    from datetime import datetime

    try:
        p = float(r[6])
        float(r[9])
        datetime.fromisoformat(r[14].replace("Z", "+00:00"))
    except ValueError:
        return False
    return bool(r[0]) and 0 < p <= 1 and r[10] in ("routed", "forced") and r[11] in ("0", "1") \
        and r[13] in ("answered", "aborted")


def reconcile(path: Path, results: list[Result], *, skip_ids: set[str] | None = None) -> dict[str, Any]:
    """The log against the client's records: one well-formed row per answered request, with its text and actor;
    no row for a request that was not answered, unless it was in flight when it ended (a timeout, a broken
    connection); unique ids. ``skip_ids``: rows of requests not in ``results`` (an earlier run)."""
    rows, bad, torn_tail = read_log_rows(path)
    rows = [r for r in rows if r[0] not in (skip_ids or set())]
    ids = Counter(r[0] for r in rows)
    by_id = {r[0]: r for r in rows}
    answered = {r.query_id: r for r in results if r.outcome == "answered" and r.query_id}
    in_flight = sum(r.outcome in ("timeout", "connection-error", "stream-broken", "in-flight") for r in results)
    missing = [q for q in answered if q not in by_id]
    mismatched = [q for q, r in answered.items() if q in by_id and (by_id[q][1] != r.text or by_id[q][4] != r.actor
                                                                     or by_id[q][13] != "answered")]
    extra = [q for q in by_id if q not in answered]
    return {"rows": len(rows), "malformed_rows": bad, "torn_tail": torn_tail,
            "duplicate_ids": sum(c - 1 for c in ids.values() if c > 1), "answered": len(answered),
            "answered_without_row": len(missing), "rows_not_matching_their_request": len(mismatched),
            "rows_of_unanswered_requests": len(extra), "requests_in_flight_at_end": in_flight,
            "aborted_rows": sum(r[13] == "aborted" for r in rows),
            "exact": not missing and not mismatched and not bad and not extra
            and all(c == 1 for c in ids.values())}


# ----------------------------------------------------------------------------------------------- summaries


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s) + 0.5) - 1))]


def summarise(results: list[Result], wall_s: float) -> dict[str, Any]:
    good = [r for r in results if r.kind in ("routed", "stream")]
    bad = [r for r in results if r.kind not in ("routed", "stream")]
    answered = [r for r in good if r.outcome == "answered"]
    lat = [r.latency_s * 1000 for r in answered if r.latency_s is not None]
    five = [r for r in results if r.status is not None and r.status >= 500]
    wrong_bad = [f"{r.kind}: {r.status} {r.outcome} {r.detail[:120]}" for r in bad
                 if r.status not in r.expect or not r.error_object]
    return {
        "requests": len(results), "well_formed": len(good), "streamed": sum(r.kind == "stream" for r in good),
        "answered": len(answered), "throughput_rps": round(len(answered) / wall_s, 1) if wall_s else None,
        "wall_s": round(wall_s, 2),
        "stalled_at_s": STALLED.get(id(results)),
        "p50_ms": _r(pct(lat, 50)), "p95_ms": _r(pct(lat, 95)), "p99_ms": _r(pct(lat, 99)),
        "max_ms": _r(max(lat) if lat else None),
        "by_kind": {kind: {f"p{q}_ms": _r(pct([r.latency_s * 1000 for r in answered if r.kind == kind
                                              and r.latency_s is not None], q)) for q in (50, 95, 99)}
                    for kind in ("routed", "stream")},
        "status_5xx": len(five), "five_xx_examples": sorted({f"{r.kind}: {r.status} {r.detail[:150]}"
                                                             for r in five})[:5],
        "outcomes": dict(Counter(r.outcome for r in good)),
        "malformed": len(bad), "malformed_kinds": len({r.kind for r in bad}),
        "malformed_right_4xx_with_error_object": len(bad) - len(wrong_bad),
        "malformed_wrong": sorted(set(wrong_bad))[:10],
    }


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 2)


def demo_texts() -> list[str]:
    from routerlab.datasets import demo

    table = demo(3000, seed=0)
    return [str(t) for t in table.queries.text[table.queries.split == "test"]]


def actor_names() -> list[str]:
    from routerlab.datasets import demo

    return list(demo(50).actor_names)


async def _seed_duplicate(host: str, port: int) -> None:
    """The request whose query id the ``duplicate-query-id`` kind repeats (answered, not counted)."""
    client = Client(host, port)
    body = json.dumps({"model": "routerlab", "messages": [{"role": "user", "content": "seed"}],
                       "metadata": {"query_id": "load-dup-0"}}).encode()
    try:
        await asyncio.wait_for(client.request("POST", "/v1/chat/completions", body), 30)
    finally:
        client.close()


# ----------------------------------------------------------------------------------------------- the cases


def load_case(args: argparse.Namespace, workdir: Path, stub_url: str | None) -> dict[str, Any]:
    texts = demo_texts()
    log = workdir / "load.csv"
    actors = actor_specs(actor_names(), args.backend, stub_url)
    before = loadavg()
    server = start_server(args.router, actors, log, workdir, echo=args.backend == "test-echo", fsync=args.fsync,
                          extra=["--fsync-interval-ms", str(args.fsync_interval_ms)],
                          blas_threads=args.blas_threads)
    n = args.clients * args.per_client
    plan = make_plan(texts, n, args.stream_share, args.malformed, args.seed)
    host, port = server.host_port
    try:
        asyncio.run(_seed_duplicate(host, port))
        results, wall = asyncio.run(run_load(host, port, plan, args.clients, request_timeout=args.request_timeout,
                                             deadline_s=args.deadline, stall_s=args.stall))
    finally:
        stopped = server.stop()
    out = summarise(results, wall)
    out["log"] = reconcile(log, results, skip_ids={"load-dup-0"})
    out["server_stop"] = stopped
    out["loadavg_before"], out["loadavg_after"] = before, loadavg()
    out["setup"] = {"router": args.router, "backend": args.backend, "clients": args.clients,
                    "per_client": args.per_client, "stream_share": args.stream_share, "fsync": args.fsync,
                    "fsync_interval_ms": args.fsync_interval_ms, "blas_threads": args.blas_threads}
    return out


def kill_case(args: argparse.Namespace, workdir: Path, stub_url: str | None) -> dict[str, Any]:
    """kill -9 mid-load, then a restart on the same log, then attach_feedback + read_logs on it."""
    from routerlab.data.logs import read_logs
    from routerlab.serve import attach_feedback

    texts = demo_texts()
    log = workdir / "killed.csv"
    actors = actor_specs(actor_names(), args.backend, stub_url)
    echo = args.backend == "test-echo"
    server = start_server(args.router, actors, log, workdir, echo=echo, fsync=args.fsync)
    host, port = server.host_port
    n_clients = min(args.clients, 32)
    plan = make_plan(texts, n_clients * 200, args.stream_share, 0, args.seed + 1)

    async def load_then_kill() -> tuple[list[Result], float]:
        task = asyncio.create_task(run_load(host, port, plan, n_clients, request_timeout=args.request_timeout,
                                            deadline_s=args.deadline, stop_on_connection_error=True,
                                            stall_s=args.stall))
        await asyncio.sleep(args.kill_after)
        os.kill(server.proc.pid, signal.SIGKILL)
        return await task

    results, _ = asyncio.run(load_then_kill())
    server.proc.wait(timeout=30)
    first = reconcile(log, results)
    size_before = log.stat().st_size
    prefix = log.read_bytes()
    # the restart: the log reopens (an incomplete last record is cut off with a warning) and takes new rows
    server = start_server(args.router, actors, log, workdir, echo=echo, fsync=args.fsync)
    host, port = server.host_port
    plan2 = make_plan(texts, 200, args.stream_share, 0, args.seed + 2)
    try:
        results2, _ = asyncio.run(run_load(host, port, plan2, 8, request_timeout=args.request_timeout,
                                           deadline_s=args.deadline, stall_s=args.stall))
    finally:
        stopped = server.stop()
    after = log.read_bytes()
    kept = first["rows"]
    old_ids = {r[0] for r in read_log_rows(log)[0][:kept]}
    second = reconcile(log, results2, skip_ids=old_ids)
    rows_all, bad_all, torn_all = read_log_rows(log)
    scores = {r[0]: 1.0 for r in rows_all}
    scored = attach_feedback(log, scores, workdir / "killed-scored.csv", keep_forced=True)
    logs = read_logs(scored.path)
    sent = sum(r.outcome != "not-sent" for r in results)
    answered_before_kill = sum(r.outcome == "answered" for r in results)
    return {
        "sent_before_kill": sent, "answered_before_kill": answered_before_kill, "log_after_kill": first,
        "rows_lost_in_flight_at_most": first["requests_in_flight_at_end"],
        "torn_tail_after_kill": first["torn_tail"],
        "restart_kept_old_rows": after.startswith(prefix[: prefix.rfind(b"\n") + 1]),  # a torn tail is cut off
        "log_bytes_at_kill": size_before,
        "restart": second, "rows_total": len(rows_all), "malformed_rows_total": bad_all, "torn_tail_total": torn_all,
        "read_logs_rows": len(logs.propensity), "server_stop_after_restart": stopped,
    }


def faults_case(args: argparse.Namespace, workdir: Path, stub_url: str) -> dict[str, Any]:
    """One actor answering 500, one hanging, under load with the healthy actors; compared with no faults."""
    names = actor_names()
    fail_actor, hang_actor = names[0], names[1]
    healthy = names[2:]
    texts = demo_texts()
    timeout, retries = args.fault_timeout, args.fault_retries
    out: dict[str, Any] = {"fail_actor": fail_actor, "hang_actor": hang_actor, "timeout_s": timeout,
                           "retries": retries}
    for label, faults in (("without_faults", {}), ("with_faults", {fail_actor: f"fail-{fail_actor}",
                                                                    hang_actor: f"hang-{hang_actor}"})):
        log = workdir / f"faults-{label}.csv"
        actors = actor_specs(names, "openai", stub_url, faults=faults, timeout=timeout, retries=retries)
        server = start_server(args.router, actors, log, workdir, echo=False, fsync=args.fsync)
        host, port = server.host_port
        # every request forced to one actor: --hang-share of them to the hanging one, 1 in 10 to the failing one,
        # the rest to the healthy ones (drawn uniformly)
        n_hang = round(10 * args.hang_share)
        models = [fail_actor] + [hang_actor] * n_hang + [healthy[i % len(healthy)] for i in range(9 - n_hang)]
        plan = make_plan(texts, args.fault_requests, args.fault_stream_share, 0, args.seed + 3, models=models)
        try:
            results, wall = asyncio.run(run_load(host, port, plan, args.fault_clients,
                                                 request_timeout=args.request_timeout, deadline_s=args.deadline,
                                                 stall_s=args.stall))
        finally:
            stopped = server.stop()
        per: dict[str, Any] = {}
        for group, members in (("fail", {fail_actor}), ("hang", {hang_actor}), ("healthy", set(healthy))):
            rs = [r for r, item in zip(results, plan.items, strict=True)
                  if json.loads(item[3])["model"] in members]
            lat = [r.latency_s * 1000 for r in rs if r.latency_s is not None]
            ok = [r.latency_s * 1000 for r in rs if r.outcome == "answered" and r.latency_s is not None]
            per[group] = {"requests": len(rs), "answered": len(ok),
                          "statuses": dict(Counter(str(r.status) for r in rs)),
                          "outcomes": dict(Counter(r.outcome for r in rs)),
                          "p50_ms": _r(pct(lat, 50)), "p95_ms": _r(pct(lat, 95)),
                          "max_ms": _r(max(lat) if lat else None),
                          "answered_p50_ms": _r(pct(ok, 50)), "answered_p95_ms": _r(pct(ok, 95))}
        out[label] = {"wall_s": round(wall, 2), "groups": per, "server_stop": stopped}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--per-client", type=int, default=1000, help="requests per client (well-formed + malformed)")
    parser.add_argument("--stream-share", type=float, default=0.25)
    parser.add_argument("--malformed", type=int, default=200)
    parser.add_argument("--router", default="knn:k=10")
    parser.add_argument("--backend", choices=("openai", "test-echo"), default="openai",
                        help="openai: actors are openai:MODEL@URL on the stub server; test-echo: in-process echo")
    parser.add_argument("--fsync", choices=("per-request", "batch"), default="per-request")
    parser.add_argument("--fsync-interval-ms", type=float, default=0.0)
    parser.add_argument("--blas-threads", type=int, default=1)
    parser.add_argument("--request-timeout", type=float, default=30.0, help="seconds a client waits for one answer")
    parser.add_argument("--deadline", type=float, default=900.0, help="seconds the load run may take in all")
    parser.add_argument("--stall", type=float, default=45.0,
                        help="stop a run when no request has finished for this many seconds (a stuck server)")
    parser.add_argument("--kill-after", type=float, default=2.0, help="seconds of load before kill -9")
    parser.add_argument("--fault-requests", type=int, default=192)
    parser.add_argument("--fault-clients", type=int, default=64)
    parser.add_argument("--hang-share", type=float, default=0.7,
                        help="share of the fault run's requests forced to the hanging actor (tenths)")
    parser.add_argument("--fault-timeout", type=float, default=2.0)
    parser.add_argument("--fault-stream-share", type=float, default=0.0,
                        help="streamed share of the fault runs (0: keeps them apart from the streaming deadlock)")
    parser.add_argument("--fault-retries", type=int, default=1)
    parser.add_argument("--skip-load", action="store_true")
    parser.add_argument("--skip-kill", action="store_true")
    parser.add_argument("--skip-faults", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the whole report here as JSON")
    args = parser.parse_args()
    report: dict[str, Any] = {"cpus": os.cpu_count()}
    stub, stub_url = (None, None)
    try:
        if args.backend == "openai" or not args.skip_faults:
            stub, stub_url = start_stub()
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            if not args.skip_load:
                report["load"] = load_case(args, workdir, stub_url)
                print_load(report["load"])
            if not args.skip_kill:
                report["kill9"] = kill_case(args, workdir, stub_url)
                print_kill(report["kill9"])
            if not args.skip_faults:
                assert stub_url is not None
                report["faults"] = faults_case(args, workdir, stub_url)
                print_faults(report["faults"])
    finally:
        if stub is not None:
            stub.kill()
            stub.wait()
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))


def print_load(r: dict[str, Any]) -> None:
    s = r["setup"]
    print(f"\nload: {s['clients']} clients x {s['per_client']} requests, router {s['router']}, actors {s['backend']}, "
          f"{s['stream_share']:.0%} streamed, fsync {s['fsync']}, BLAS threads {s['blas_threads']}; "
          f"load average {r['loadavg_before']} -> {r['loadavg_after']}")
    if r["stalled_at_s"] is not None:
        print(f"  (!) the server STALLED: no request finished for the stall window; the run stopped at "
              f"{r['stalled_at_s']} s")
    print(f"  answered {r['answered']} of {r['well_formed']} well-formed in {r['wall_s']} s: "
          f"{r['throughput_rps']} req/s; latency p50 {r['p50_ms']} ms, p95 {r['p95_ms']} ms, p99 {r['p99_ms']} ms "
          f"(max {r['max_ms']})")
    print("  " + "; ".join(f"{'streamed' if k == 'stream' else 'not streamed'}: p50 {v['p50_ms']} ms, p95 "
                           f"{v['p95_ms']} ms, p99 {v['p99_ms']} ms" for k, v in r["by_kind"].items()))
    print(f"  outcomes {r['outcomes']}; 5xx: {r['status_5xx']} {r['five_xx_examples']}")
    print(f"  malformed: {r['malformed_right_4xx_with_error_object']} of {r['malformed']} ({r['malformed_kinds']} "
          f"kinds) got the right 4xx with an OpenAI error object; wrong: {r['malformed_wrong']}")
    lg = r["log"]
    print(f"  log: {lg['rows']} rows, exact={lg['exact']} (answered without row {lg['answered_without_row']}, "
          f"rows not matching {lg['rows_not_matching_their_request']}, rows of unanswered requests "
          f"{lg['rows_of_unanswered_requests']} with {lg['requests_in_flight_at_end']} in flight at the end, "
          f"malformed rows {lg['malformed_rows']}, duplicate ids {lg['duplicate_ids']}, torn tail {lg['torn_tail']})")
    st = r["server_stop"]
    print(f"  server stopped by {st['stopped_by']} (exit {st['exit_code']}, {st.get('stop_s')} s)")


def print_kill(r: dict[str, Any]) -> None:
    k = r["log_after_kill"]
    print(f"\nkill -9 mid-load: {r['sent_before_kill']} requests sent, {r['answered_before_kill']} answered before "
          f"the kill; log: {k['rows']} complete rows, answered without row {k['answered_without_row']}, rows of "
          f"unanswered requests {k['rows_of_unanswered_requests']} (<= {k['requests_in_flight_at_end']} in flight), "
          f"malformed {k['malformed_rows']}, torn tail {k['torn_tail']}")
    s = r["restart"]
    print(f"  restart on the same log: old rows kept {r['restart_kept_old_rows']}; {s['answered']} answered, "
          f"exact={s['exact']}; whole log {r['rows_total']} rows ({r['malformed_rows_total']} malformed), "
          f"read_logs after attach_feedback: {r['read_logs_rows']} rows")


def print_faults(r: dict[str, Any]) -> None:
    print(f"\nfaulty actors: {r['fail_actor']} answers 500, {r['hang_actor']} never answers (timeout "
          f"{r['timeout_s']} s, retries {r['retries']})")
    for label in ("without_faults", "with_faults"):
        g = r[label]["groups"]
        print(f"  {label}: " + "; ".join(
            f"{k}: {v['answered']}/{v['requests']} answered, statuses {v['statuses']}, p50 {v['p50_ms']} ms, "
            f"p95 {v['p95_ms']} ms, max {v['max_ms']} ms" for k, v in g.items()))


def as_dict(results: list[Result]) -> list[dict[str, Any]]:
    return [asdict(r) for r in results]


if __name__ == "__main__":
    main()
