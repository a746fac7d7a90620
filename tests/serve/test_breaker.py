"""The per-actor circuit breaker: an actor whose backend keeps failing is refused at once (503, Retry-After)
for a cooldown, then tried once; healthy actors never notice."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from routerlab.serve.breaker import ActorUnavailable, CircuitBreaker

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from routerlab.datasets import demo
from routerlab.llm.base import load_backend, parse_actor_list
from routerlab.serve import RequestLog, RoutingService
from routerlab.serve.app import create_app
from tests.serve import _backends  # noqa: F401 - registers the test-echo backend kind

TABLE = demo(300, seed=0)
ACTORS = TABLE.actor_names


def test_it_opens_after_n_failures_in_a_row_and_a_success_resets_the_count() -> None:
    b = CircuitBreaker("a", trip_after=3, cooldown_s=60)
    for _ in range(2):
        b.before_call()
        b.failure()
    b.before_call()
    b.success()  # the count restarts
    for _ in range(2):
        b.before_call()
        b.failure()
    assert b.state == "closed"
    b.before_call()
    b.failure()
    assert b.state == "open" and b.trips == 1
    with pytest.raises(ActorUnavailable, match="failed 3 times in a row") as refused:
        b.before_call()
    assert 59 <= refused.value.retry_after <= 60


def test_after_the_cooldown_one_trial_goes_through_and_decides() -> None:
    b = CircuitBreaker("a", trip_after=1, cooldown_s=0.05)
    b.before_call()
    b.failure()
    time.sleep(0.06)
    b.before_call()  # the trial
    with pytest.raises(ActorUnavailable):
        b.before_call()  # the others wait for the trial
    b.failure()  # a failed trial: open again for twice as long
    assert b.state == "open" and b.trips == 2
    time.sleep(0.06)
    with pytest.raises(ActorUnavailable):
        b.before_call()  # 0.1 s now
    time.sleep(0.06)
    b.before_call()
    b.success()
    assert b.state == "closed" and b.failures == 0
    b.before_call()
    b.before_call()  # closed: every call goes through


def test_a_cancelled_trial_lets_the_next_call_try_and_zero_never_trips() -> None:
    b = CircuitBreaker("a", trip_after=1, cooldown_s=0.01)
    b.before_call()
    b.failure()
    time.sleep(0.02)
    b.before_call()
    b.cancelled()  # the client left: says nothing about the backend
    b.before_call()  # the next call is the trial
    off = CircuitBreaker("a", trip_after=0)
    for _ in range(100):
        off.before_call()
        off.failure()
    assert off.state == "closed"
    with pytest.raises(ValueError):
        CircuitBreaker("a", trip_after=-1)
    with pytest.raises(ValueError):
        CircuitBreaker("a", cooldown_s=float("nan"))


def test_a_failing_actor_is_refused_at_once_and_the_others_are_answered(tmp_path: Path) -> None:
    specs = ",".join(f"{a}=test-echo:{a}" + (",fail=true" if a == "coder-7b" else "") for a in ACTORS)
    backends = {n: load_backend(s, cache=False) for n, s in parse_actor_list(specs)}
    svc = RoutingService.train("best-single", TABLE, backends, log=RequestLog(tmp_path / "log.csv"),
                               trip_after=3, cooldown_s=30)
    with TestClient(create_app(svc)) as client:
        def ask(model: str, stream: bool = False, qid: str | None = None) -> tuple[int, dict[str, str], str]:
            body: dict[str, object] = {"model": model, "messages": [{"role": "user", "content": "hi"}],
                                       "stream": stream}
            if qid:
                body["metadata"] = {"query_id": qid}
            r = client.post("/v1/chat/completions", json=body)
            return r.status_code, dict(r.headers), r.text

        assert [ask("coder-7b")[0] for _ in range(3)] == [502, 502, 502]
        t0 = time.perf_counter()
        status, headers, text = ask("coder-7b", qid="q-refused")
        assert status == 503 and '"code":"actor_unavailable"' in text.replace(" ", "")
        assert 1 <= int(headers["retry-after"]) <= 30 and time.perf_counter() - t0 < 1.0
        assert ask("coder-7b", stream=True)[0] == 503  # a stream is refused before it starts
        assert ask("coder-7b", qid="q-refused")[0] == 503  # its query id was freed, not logged
        assert ask("tiny-2b")[0] == 200 and ask("routerlab")[0] == 200
        models = client.get("/v1/models").json()["data"][0]["routerlab"]["breakers"]
        assert models["coder-7b"]["state"] == "open" and models["tiny-2b"]["state"] == "closed"
    svc.close()
    rows = (tmp_path / "log.csv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 3 and not any("coder-7b" in r.split(",")[4] for r in rows[1:])  # header + 2 answers
