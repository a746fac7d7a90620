"""A tiny OpenAI-compatible chat server for load tests: a raw asyncio HTTP/1.1 server, no framework, so that it
costs the machine little next to the server under test.

Run:  python benchmarks/stub_openai.py [--host 127.0.0.1] [--port 0]
It prints ``http://HOST:PORT/v1`` on stdout once it listens, then serves until killed.

``POST /v1/chat/completions`` answers ``"<model> says: ok"`` (three content deltas when ``stream`` is true, as
server-sent events over chunked transfer encoding, with a usage chunk when ``stream_options.include_usage`` is
true; one JSON object otherwise). The requested ``model`` name sets the behaviour, so one stub plays every actor
of a pool (``NAME=openai:MODEL@URL``):

- a name starting with ``fail``: HTTP 500 with an OpenAI error object, every time;
- a name starting with ``hang``: the request is read and never answered (the connection stays open);
- a name holding ``delay=MS`` (e.g. ``slow-delay=50``): answers after MS milliseconds;
- any other name: answers at once.

``GET /v1/models`` lists nothing; any other path is a 404. Connections are kept alive.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from typing import Any

_DELAY = re.compile(r"delay=(\d+)")
_HANGING: set[asyncio.Task[Any]] = set()


def _response(status: int, body: bytes, content_type: str = "application/json") -> bytes:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}.get(status, "Error")
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}\r\n"
            "connection: keep-alive\r\n\r\n")
    return head.encode() + body


def _error(status: int, message: str, type_: str) -> bytes:
    body = json.dumps({"error": {"message": message, "type": type_, "param": None, "code": None}}).encode()
    return _response(status, body)


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _sse(payload: dict[str, Any] | str) -> bytes:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return _chunk(f"data: {text}\n\n".encode())


async def _answer(body: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
    """Write the answer to one chat request; False when the connection must stay silent (a hanging model)."""
    model = str(body.get("model", ""))
    if model.startswith("hang"):
        return False
    if model.startswith("fail"):
        writer.write(_error(500, f"{model} is broken (a stub that always fails)", "server_error"))
        return True
    delay = _DELAY.search(model)
    if delay:
        await asyncio.sleep(int(delay.group(1)) / 1000.0)
    rid, created = f"chatcmpl-stub{time.monotonic_ns()}", int(time.time())
    pieces = [model, " says:", " ok"]
    usage = {"prompt_tokens": 8, "completion_tokens": len(pieces), "total_tokens": 8 + len(pieces)}
    if not body.get("stream"):
        out = {"id": rid, "object": "chat.completion", "created": created, "model": model,
               "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(pieces)},
                            "finish_reason": "stop", "logprobs": None}], "usage": usage}
        writer.write(_response(200, json.dumps(out).encode()))
        return True
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
            b"connection: keep-alive\r\n\r\n")

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]})

    parts = [head, chunk({"role": "assistant", "content": ""})]
    parts += [chunk({"content": p}) for p in pieces]
    parts.append(chunk({}, "stop"))
    if (body.get("stream_options") or {}).get("include_usage"):
        parts.append(_sse({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                           "choices": [], "usage": usage}))
    parts += [_sse("[DONE]"), b"0\r\n\r\n"]
    writer.write(b"".join(parts))
    return True


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            line = await reader.readline()
            if not line:
                return
            method, path, _ = line.decode("latin-1").split(" ", 2)
            length = 0
            while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = header.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            raw = await reader.readexactly(length) if length else b""
            if method == "GET" and path.startswith("/v1/models"):
                writer.write(_response(200, b'{"object": "list", "data": []}'))
            elif method == "POST" and path.rstrip("/").endswith("/chat/completions"):
                try:
                    body = json.loads(raw)
                except ValueError:
                    writer.write(_error(400, "bad JSON", "invalid_request_error"))
                else:
                    if not await _answer(body, writer):
                        task = asyncio.current_task()
                        if task is not None:
                            _HANGING.add(task)
                        await asyncio.Event().wait()  # a hanging actor: never answers
            else:
                writer.write(_error(404, f"unknown path {path}", "invalid_request_error"))
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        return
    finally:
        writer.close()


async def main_async(host: str, port: int) -> None:
    server = await asyncio.start_server(_serve, host, port, backlog=4096)
    sock_host, sock_port = server.sockets[0].getsockname()[:2]
    print(f"http://{sock_host}:{sock_port}/v1", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    try:
        asyncio.run(main_async(args.host, args.port))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
