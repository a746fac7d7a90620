"""``routerlab serve``'s HTTP app: the official openai client against it (routed, forced, streamed), every
malformed request answered with an OpenAI error object and a 4xx (never a 500 with a traceback), backend
failures as 502, and the SmolLM2 local backend behind a real socket."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")

from fastapi.testclient import TestClient  # noqa: E402

from routerlab.data.logs import read_logs  # noqa: E402
from routerlab.datasets import demo  # noqa: E402
from routerlab.llm.base import Decoding, load_backend, messages_from, parse_actor_list  # noqa: E402
from routerlab.serve import RequestLog, RoutingService  # noqa: E402
from routerlab.serve.app import ServerThread, create_app  # noqa: E402
from tests.serve import _backends  # noqa: E402, F401 - registers the test-echo backend kind

TABLE = demo(300, seed=0)


def echo_pool(**options: Any) -> dict[str, Any]:
    """One test-echo backend per demo actor (label = the actor's name)."""
    extra = "".join(f",{k}={v}" for k, v in options.items())
    specs = parse_actor_list(",".join(f"{a}=test-echo:{a}{extra}" for a in TABLE.actor_names))
    return {name: load_backend(spec, cache=False) for name, spec in specs}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoutingService]:
    log = RequestLog(tmp_path_factory.mktemp("serve") / "served.csv")
    svc = RoutingService.train("knn:k=5", TABLE, echo_pool(), log=log)
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def client(service: RoutingService) -> Iterator[TestClient]:
    with TestClient(create_app(service, max_body_bytes=4096), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="module")
def url(service: RoutingService) -> Iterator[str]:
    with ServerThread(create_app(service)) as base:
        yield base


def argmax_actor(service: RoutingService, text: str) -> str:
    return service.actor_names[int(service.policy(text).argmax())]


def test_the_listening_socket_sends_small_writes_at_once(service: RoutingService) -> None:
    """TCP_NODELAY on the server's socket (accepted connections inherit it): without it every response waited
    ~40 ms for a delayed ACK (Nagle), measured 45 ms per request against 0.5 ms with it."""
    import socket

    thread = ServerThread(create_app(service))
    try:
        assert thread.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        thread.stop()


def test_models_list_the_router_then_the_actors(url: str) -> None:
    api = openai.OpenAI(base_url=url, api_key="unused")
    ids = [m.id for m in api.models.list()]
    assert ids == ["routerlab", *TABLE.actor_names]
    assert api.models.retrieve("tiny-2b").id == "tiny-2b"
    with pytest.raises(openai.NotFoundError):
        api.models.retrieve("no-such-model")


def test_routed_and_forced_completions_with_the_openai_client(url: str, service: RoutingService) -> None:
    api = openai.OpenAI(base_url=url, api_key="unused")
    texts = [str(t) for t in TABLE.queries.text[TABLE.queries.split == "test"][:6]]
    before = service.log.n_records if service.log else 0
    for text in texts:
        r = api.chat.completions.create(model="routerlab", messages=[
            {"role": "system", "content": "be brief"}, {"role": "user", "content": text}])
        actor = argmax_actor(service, text)
        assert r.model == actor  # greedy: the router's argmax answers, and the response names it
        assert r.choices[0].message.content == f"{actor} says: {text}"
        assert r.choices[0].finish_reason == "stop" and r.object == "chat.completion"
        assert r.usage is not None and r.usage.completion_tokens == len(f"{actor} says: {text}".split(" "))
        extra = r.model_extra or {}
        assert extra["routerlab"]["propensity"] == 1.0 and extra["routerlab"]["mode"] == "routed"
        assert extra["routerlab"]["query_id"] == r.id
    forced = api.chat.completions.create(model="coder-7b", messages=[{"role": "user", "content": "hi there"}],
                                         max_tokens=2)
    assert forced.model == "coder-7b" and forced.choices[0].message.content == "coder-7b says:"
    assert forced.choices[0].finish_reason == "length"
    assert service.log is not None and service.log.n_records == before + len(texts) + 1
    logs = read_logs_with_scores(service.log.path)
    assert logs[-1]["mode"] == "forced" and logs[-1]["actor"] == "coder-7b" and logs[-1]["propensity"] == "1.0"


def read_logs_with_scores(path: Path) -> list[dict[str, str]]:
    import csv

    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_streaming_matches_the_plain_answer(url: str, service: RoutingService) -> None:
    api = openai.OpenAI(base_url=url, api_key="unused")
    text = "Solve for x: 3x + 4 = 19, showing each step"
    plain = api.chat.completions.create(model="routerlab", messages=[{"role": "user", "content": text}])
    stream = api.chat.completions.create(model="routerlab", messages=[{"role": "user", "content": text}],
                                         stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    deltas = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    assert "".join(deltas) == plain.choices[0].message.content
    assert {c.model for c in chunks} == {plain.model}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == plain.usage.completion_tokens
    rows = read_logs_with_scores(service.log.path)  # type: ignore[union-attr]
    assert rows[-1]["query_id"] == chunks[0].id and rows[-1]["tokens_out"] == str(plain.usage.completion_tokens)
    assert rows[-1]["tokens_in"] == "" and float(rows[-1]["latency_s"]) >= 0


def error_of(response: Any) -> dict[str, Any]:
    """The OpenAI error object of a response, checked for shape: four keys, a one-line message, no traceback."""
    body = response.json()
    assert set(body) == {"error"}, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"] and "\n" not in err["message"]
    assert "Traceback" not in response.text and "File \"" not in response.text
    return dict(err)


GOOD = {"model": "routerlab", "messages": [{"role": "user", "content": "hello"}]}


@pytest.mark.parametrize(("body", "status", "param"), [
    (b"{not json", 400, None),
    (b'{"model": "routerlab", "messages": [{"role": "user", "content": "x"}], "temperature": NaN}', 400, None),
    (b"\xff\xfe", 400, None),
    (b"[1, 2]", 400, None),
    (json.dumps({"messages": GOOD["messages"]}).encode(), 400, "model"),
    (json.dumps({**GOOD, "model": 7}).encode(), 400, "model"),
    (json.dumps({**GOOD, "model": "gpt-9"}).encode(), 404, "model"),
    (json.dumps({"model": "routerlab"}).encode(), 400, "messages"),
    (json.dumps({**GOOD, "messages": []}).encode(), 400, "messages"),
    (json.dumps({**GOOD, "messages": "hello"}).encode(), 400, "messages"),
    (json.dumps({**GOOD, "messages": ["hello"]}).encode(), 400, "messages[0]"),
    (json.dumps({**GOOD, "messages": [{"role": "wizard", "content": "x"}]}).encode(), 400, "messages[0].role"),
    (json.dumps({**GOOD, "messages": [{"role": "user"}]}).encode(), 400, "messages[0].content"),
    (json.dumps({**GOOD, "messages": [{"role": "user", "content": 5}]}).encode(), 400, "messages[0].content"),
    (json.dumps({**GOOD, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}
                ).encode(), 400, "messages[0].content"),
    (json.dumps({**GOOD, "messages": [{"role": "system", "content": "only a system prompt"}]}).encode(), 400,
     "messages"),
    (json.dumps({**GOOD, "max_tokens": "many"}).encode(), 400, "max_tokens"),
    (json.dumps({**GOOD, "max_tokens": 0}).encode(), 400, "max_tokens"),
    (json.dumps({**GOOD, "max_tokens": True}).encode(), 400, "max_tokens"),
    (json.dumps({**GOOD, "max_completion_tokens": 10**9}).encode(), 400, "max_completion_tokens"),
    (json.dumps({**GOOD, "temperature": 3}).encode(), 400, "temperature"),
    (json.dumps({**GOOD, "temperature": "hot"}).encode(), 400, "temperature"),
    (json.dumps({**GOOD, "top_p": 0}).encode(), 400, "top_p"),
    (json.dumps({**GOOD, "stop": [1]}).encode(), 400, "stop"),
    (json.dumps({**GOOD, "stream": "yes"}).encode(), 400, "stream"),
    (json.dumps({**GOOD, "stream_options": {"include_usage": True}}).encode(), 400, "stream_options"),
    (json.dumps({**GOOD, "n": 2}).encode(), 400, "n"),
    (json.dumps({**GOOD, "tools": [{"type": "function"}]}).encode(), 400, "tools"),
    (json.dumps({**GOOD, "metadata": {"query_id": 3}}).encode(), 400, "metadata"),
    (json.dumps({**GOOD, "metadata": {"query_id": "a\nb"}}).encode(), 400, None),
])
def test_malformed_requests_get_openai_errors(client: TestClient, body: bytes, status: int,
                                              param: str | None) -> None:
    r = client.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    err = error_of(r)
    assert err["param"] == param
    assert err["type"] == "invalid_request_error"
    if status == 404:
        assert err["code"] == "model_not_found" and "gpt-9" in err["message"]


def test_oversized_bodies_are_413_before_parsing(client: TestClient) -> None:
    big = json.dumps({**GOOD, "messages": [{"role": "user", "content": "x" * 5000}]}).encode()
    r = client.post("/v1/chat/completions", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and error_of(r)["code"] == "request_too_large"

    def chunks() -> Iterator[bytes]:  # no content-length: counted while reading, refused past the limit
        for _ in range(10):
            yield b" " * 1000

    r = client.post("/v1/chat/completions", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and error_of(r)["code"] == "request_too_large"


def test_unknown_paths_and_methods(client: TestClient) -> None:
    r = client.get("/v1/completions")
    assert r.status_code == 404 and error_of(r)["code"] == "unknown_url"
    r = client.get("/v1/chat/completions")
    assert r.status_code == 405 and error_of(r)["code"] == "method_not_allowed"


def test_duplicate_client_query_ids_are_409(client: TestClient, service: RoutingService) -> None:
    body = {**GOOD, "metadata": {"query_id": "client-7", "dataset": "beta"}}
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200 and r.json()["routerlab"]["query_id"] == "client-7"
    assert r.json()["id"] != "client-7"
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 409 and error_of(r)["param"] == "metadata.query_id"
    rows = [row for row in read_logs_with_scores(service.log.path) if row["query_id"] == "client-7"]  # type: ignore[union-attr]
    assert len(rows) == 1 and rows[0]["dataset"] == "beta"


def test_backend_failures_are_502_and_not_logged(tmp_path: Path) -> None:
    log = RequestLog(tmp_path / "failing.csv")
    svc = RoutingService.train("best-single", TABLE, echo_pool(fail="true"), log=log)
    try:
        with TestClient(create_app(svc), raise_server_exceptions=False) as c:
            r = c.post("/v1/chat/completions", json=GOOD)
            assert r.status_code == 502
            err = error_of(r)
            assert err["type"] == "server_error" and err["code"] == "backend_failed"
            assert "is down" in err["message"] and "second line" not in err["message"]
            r = c.post("/v1/chat/completions", json={**GOOD, "stream": True})
            assert r.status_code == 502 and error_of(r)["code"] == "backend_failed"
        assert log.n_records == 0
    finally:
        svc.close()


def test_a_stream_broken_midway_ends_with_an_error_event(tmp_path: Path) -> None:
    log = RequestLog(tmp_path / "broken.csv")
    svc = RoutingService.train("best-single", TABLE, echo_pool(fail_after=2), log=log)
    try:
        with ServerThread(create_app(svc)) as base:
            api = openai.OpenAI(base_url=base, api_key="unused", max_retries=0)
            stream = api.chat.completions.create(model="routerlab", stream=True,
                                                 messages=[{"role": "user", "content": "one two three four"}])
            got = []
            with pytest.raises(openai.APIError, match="stream broke"):
                for chunk in stream:
                    got.append(chunk.choices[0].delta.content or "")
            assert len([g for g in got if g]) == 2
        # the decision was made and the client has part of that actor's answer: one row, aborted, with its
        # propensity and the tokens generated before the break
        rows = read_logs_with_scores(log.path)
        assert len(rows) == 1 and rows[0]["status"] == "aborted" and rows[0]["propensity"] == "1.0"
        assert rows[0]["tokens_out"] == "2" and float(rows[0]["latency_s"]) >= 0
    finally:
        svc.close()


def test_a_bug_is_a_one_line_500(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    svc = RoutingService.train("best-single", TABLE, echo_pool())

    def broken(text: str) -> Any:
        raise ZeroDivisionError("boom\nwith a second line")

    monkeypatch.setattr(svc, "route", broken)
    with TestClient(create_app(svc), raise_server_exceptions=False) as c:
        r = c.post("/v1/chat/completions", json=GOOD)
    assert r.status_code == 500
    err = error_of(r)
    assert err["type"] == "server_error" and "ZeroDivisionError" in err["message"] and "boom" not in err["message"]


def test_explore_mixes_uniform_into_the_argmax() -> None:
    svc = RoutingService.train("knn:k=5", TABLE, echo_pool(), explore=0.4, seed=3)
    m = len(TABLE.actor_names)
    text = str(TABLE.queries.text[0])
    p = svc.policy(text)
    np.testing.assert_allclose(np.sort(p), np.sort([0.6 + 0.4 / m] + [0.4 / m] * (m - 1)))
    draws = [svc.route(text) for _ in range(800)]
    for d in draws[:50]:
        assert d.propensity == pytest.approx(p[svc.actor_names.index(d.actor)], abs=0)
    share = np.mean([d.actor == argmax_actor(svc, text) for d in draws])
    assert abs(share - (0.6 + 0.4 / m)) < 0.06
    again = RoutingService.train("knn:k=5", TABLE, echo_pool(), explore=0.4, seed=3)
    assert [again.route(text).actor for _ in range(50)] == [d.actor for d in draws[:50]]  # seeded


def test_an_exploring_router_samples_its_own_distribution() -> None:
    svc = RoutingService.train("thompson", TABLE, echo_pool(), seed=1)
    text = str(TABLE.queries.text[5])
    dist = svc.router.route(svc._features(text)).distribution[0]
    np.testing.assert_allclose(svc.policy(text), dist)
    for d in (svc.route(text) for _ in range(20)):
        assert d.propensity == pytest.approx(dist[svc.actor_names.index(d.actor)], rel=1e-12)


def test_served_actors_must_match_the_table() -> None:
    from routerlab.errors import UsageError

    pool = echo_pool()
    pool.pop("tiny-2b")
    pool["stranger"] = pool["coder-7b"]
    with pytest.raises(UsageError, match=r"tiny-2b has no backend; stranger is not an actor"):
        RoutingService.train("knn", TABLE, pool)
    with pytest.raises(UsageError, match="oracle"):
        RoutingService.train("oracle", TABLE, echo_pool())


def test_smollm2_behind_a_real_socket(smollm2: Any, tmp_path: Path) -> None:
    """The built-in local model as one actor of a two-actor pool, through the openai client: routed, forced,
    streamed (greedy: the streamed text equals the plain one) and logged."""
    table = TABLE.select_actors(["tiny-2b", "frontier-235b"])
    pool = {"tiny-2b": smollm2, "frontier-235b": echo_pool()["frontier-235b"]}
    log = RequestLog(tmp_path / "smol.csv")
    svc = RoutingService(*_trained(table), pool, log=log)
    with ServerThread(create_app(svc)) as base:
        api = openai.OpenAI(base_url=base, api_key="unused", max_retries=0)
        msgs = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
        plain = api.chat.completions.create(model="tiny-2b", messages=msgs, max_tokens=12)
        assert plain.model == "tiny-2b" and plain.choices[0].message.content
        assert plain.usage is not None and 0 < plain.usage.completion_tokens <= 12
        streamed = api.chat.completions.create(model="tiny-2b", messages=msgs, max_tokens=12, stream=True)
        chunks = list(streamed)
        assert {c.model for c in chunks} == {"tiny-2b"}
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == \
            plain.choices[0].message.content
        routed = api.chat.completions.create(model="routerlab", messages=msgs, max_tokens=8)
        assert routed.model in ("tiny-2b", "frontier-235b")
    log.close()  # not svc.close(): the session's SmolLM2 backend stays open for the other tests
    logs = read_logs_with_scores(log.path)
    assert [r["mode"] for r in logs] == ["forced", "forced", "routed"] and logs[0]["actor"] == "tiny-2b"
    assert int(logs[0]["tokens_in"]) > 0 and float(logs[0]["latency_s"]) > 0


def _trained(table: Any) -> tuple[Any, Any, Any]:
    """(router, encoder, actors) of knn trained on ``table``'s train split, as RoutingService.train does."""
    from routerlab.features import encode
    from routerlab.features.registry import get_encoder
    from routerlab.routers import get_router

    train = table.select_queries(table.queries.split == "train")
    enc = get_encoder("tfidf").fit(train.queries.text)
    return get_router("knn:k=5").fit(train, encode(train, enc)), enc, train.actors


def test_served_log_reads_back(service: RoutingService) -> None:
    """Every row the module's requests wrote is a well-formed log row (score attached by hand here)."""
    from routerlab.serve import attach_feedback

    assert service.log is not None
    service.complete(messages_from("one more question"), Decoding(max_tokens=4))
    rows = read_logs_with_scores(service.log.path)
    out = service.log.path.with_name("scored.csv")
    attach_feedback(service.log.path, {r["query_id"]: 1.0 for r in rows}, out, keep_forced=True)
    logs = read_logs(out)
    assert logs.n == len(rows) and set(logs.table.actor_names) <= set(TABLE.actor_names)


def test_routerlabs_openai_backend_calls_routerlabs_server(service: RoutingService, url: str,
                                                            tmp_path: Path) -> None:
    """End to end: a second server whose actors are routerlab's ``openai`` backend pointed at the first server
    (each forcing its actor there); the openai client talks to the second one."""
    specs = parse_actor_list(",".join(f"{a}=openai:{a}@{url},retries=0" for a in TABLE.actor_names))
    remote = {name: load_backend(spec, cache=False) for name, spec in specs}
    front_log = RequestLog(tmp_path / "front.csv")
    front = RoutingService.train("knn:k=5", TABLE, remote, log=front_log)
    back_before = service.log.n_records if service.log else 0
    try:
        with ServerThread(create_app(front)) as front_url:
            api = openai.OpenAI(base_url=front_url, api_key="unused", max_retries=0)
            text = "Which court hears appeals on maritime contract disputes?"
            plain = api.chat.completions.create(model="routerlab", messages=[{"role": "user", "content": text}])
            actor = argmax_actor(front, text)
            assert plain.model == actor and plain.choices[0].message.content == f"{actor} says: {text}"
            assert plain.usage is not None and plain.usage.completion_tokens == len(f"{actor} says: {text}".split())
            stream = api.chat.completions.create(model="routerlab", messages=[{"role": "user", "content": text}],
                                                 stream=True)
            assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == \
                plain.choices[0].message.content
            with pytest.raises(openai.NotFoundError):
                api.chat.completions.create(model="nobody", messages=[{"role": "user", "content": text}])
    finally:
        front.close()
    front_rows = read_logs_with_scores(front_log.path)
    assert [r["mode"] for r in front_rows] == ["routed", "routed"] and front_rows[0]["actor"] == actor
    assert int(front_rows[0]["tokens_out"]) == plain.usage.completion_tokens
    assert service.log is not None
    back_rows = read_logs_with_scores(service.log.path)[back_before:]
    assert [(r["mode"], r["actor"]) for r in back_rows] == [("forced", actor)] * 2  # the backend forced its actor
