"""``serve --learn N``: an exploring router refitted every N feedback events in the background, swapped in whole,
without blocking requests; status on /v1/models; bad values one line, exit 2."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from routerlab.cli import main
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.llm.base import Decoding, Message
from routerlab.routers import get_router
from routerlab.serve import RequestLog, RoutingService
from routerlab.serve.feedback_store import FeedbackStore
from routerlab.serve.learn import Learner, check_learn
from tests.serve._backends import EchoBackend  # noqa: F401 - registers the test-echo backend kind
from tests.serve.test_app import echo_pool

TABLE = demo(300, seed=0)
ACTORS = ",".join(f"{a}=test-echo:{a}" for a in TABLE.actor_names)


def train_side() -> object:
    from routerlab.protocols.ope import training_split

    return training_split(TABLE, "given", 0).apply(TABLE)[0]


def ask(svc: RoutingService, text: str, qid: str) -> str:
    return svc.complete([Message("user", text)], Decoding(max_tokens=4), query_id=qid).decision.actor


def scores_of(svc: RoutingService, texts: list[str]) -> np.ndarray:
    return np.vstack([svc.router.scores(svc._features(t)) for t in texts])


def test_learn_refits_and_swaps_the_router_without_blocking_requests(tmp_path: Path) -> None:
    log = RequestLog(tmp_path / "served.csv")
    svc = RoutingService.train("linucb", TABLE, echo_pool(), log=log, seed=3)
    store = FeedbackStore(log)
    learner = Learner(svc, "linucb", train_side(), store, 4, seed=3)  # type: ignore[arg-type]
    texts = [str(t) for t in TABLE.queries.text[TABLE.queries.split == "test"][:40]]
    before, first = scores_of(svc, texts), svc.router
    assert svc.describe()["learning"]["refits"] == 0
    # every answer scores 1 when the last actor answered, else 0: the refit learns that actor is best
    best = svc.actor_names[-1]
    for k, text in enumerate(texts[:3]):
        store.submit(f"q{k}", 1.0 if ask(svc, text, f"q{k}") == best else 0.0)
    assert learner.wait(5) and svc.router is first and learner.refits == 0  # 3 < N: no refit yet
    # hold the 4th event's refit inside its fit, and serve a request meanwhile
    gate, inside = threading.Event(), threading.Event()
    real_refit = learner.refit

    def slow_refit() -> object:
        inside.set()
        assert gate.wait(30)
        return real_refit()

    learner.refit = slow_refit  # type: ignore[method-assign]
    store.submit("q3", 1.0 if ask(svc, texts[3], "q3") == best else 0.0)
    assert inside.wait(30) and svc.describe()["learning"]["refitting"] is True
    t0 = time.perf_counter()
    ask(svc, texts[4], "q4")  # answered while the refit is held: not blocked by it
    assert time.perf_counter() - t0 < 5 and svc.router is first
    gate.set()
    assert learner.wait(60)
    assert learner.refits == 1 and svc.router is not first and learner.last_error is None
    status = svc.describe()["learning"]
    assert status["refits"] == 1 and status["last_refit"] is not None and status["feedback_events"] == 4
    after = scores_of(svc, texts)
    assert not np.allclose(before, after)  # the policy changed: it learned from the 4 served outcomes
    table, features = learner.training_data()
    n0 = train_side().n_queries  # type: ignore[attr-defined]
    assert table.n_queries == features.n == n0 + 4 and np.isnan(table.score[n0:]).sum() == 4 * (TABLE.n_actors - 1)
    learner.refit = real_refit  # type: ignore[method-assign]
    for k in range(5, 13):  # 8 more events (q4 had none yet): two more refits, at events 8 and 12
        store.submit(f"q{k}", 1.0 if ask(svc, texts[k], f"q{k}") == best else 0.0)
        learner.wait(60)
    store.submit("q4", 0.0)
    assert learner.wait(60) and learner.refits == 3 and learner.pending == 1
    from routerlab.data.served import read_served_log

    assert read_served_log(log.path, TABLE).n == 13  # every answered request scored, read back for OPE
    store.close()
    svc.close()


def test_learn_status_on_models_and_a_failed_refit_keeps_the_router(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from routerlab.serve.app import create_app

    log = RequestLog(tmp_path / "served.csv")
    svc = RoutingService.train("eps-greedy", TABLE, echo_pool(), log=log)
    store = FeedbackStore(log)
    learner = Learner(svc, "eps-greedy", train_side(), store, 1)  # type: ignore[arg-type]
    first = svc.router

    def broken() -> object:
        raise RuntimeError("out of memory\nmore")

    learner.refit = broken  # type: ignore[method-assign]
    with TestClient(create_app(svc, feedback=store)) as client:
        r = client.post("/v1/chat/completions", json={"model": "routerlab", "messages": [
            {"role": "user", "content": "hello"}], "metadata": {"query_id": "x1"}})
        assert r.status_code == 200
        assert client.post("/v1/feedback", json={"query_id": "x1", "score": 1}).status_code == 200
        assert learner.wait(30)
        card = client.get("/v1/models").json()["data"][0]
    status = card["routerlab"]["learning"]
    assert status["refits"] == 0 and status["last_error"] == "out of memory" and svc.router is first
    store.close()
    svc.close()


def test_check_learn() -> None:
    assert check_learn(5, get_router("thompson")) == 5
    for bad in (0, -1, 2.5, True, "3"):
        with pytest.raises(UsageError, match="--learn: must be an integer >= 1"):
            check_learn(bad)
    with pytest.raises(UsageError, match="does not explore"):
        check_learn(3, get_router("knn"))


def run_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["serve", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("routerlab: error: ") and "\n" not in err, err
    return err


def test_bad_learn_options_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    base = ["--actors", ACTORS, "--port", "0", "--log", str(tmp_path / "served.csv")]
    assert ">= 1" in run_error(["linucb", *base, "--learn", "0"], capsys)
    assert ">= 1" in run_error(["linucb", *base, "--learn", "-2"], capsys)
    assert "--learn" in run_error(["linucb", *base, "--learn", "x"], capsys)
    assert "does not explore" in run_error(["knn", *base, "--learn", "5"], capsys)
    assert "needs --log" in run_error(["linucb", "--actors", ACTORS, "--port", "0", "--learn", "5"], capsys)
    assert not (tmp_path / "served.csv").exists()


def test_a_real_run_with_learn_refits_on_posted_feedback(tmp_path: Path) -> None:
    """``routerlab serve linucb --log L --learn 2``: two answers, two scores posted, one refit on /v1/models;
    the feedback file beside the log holds the scores and ``read_logs`` joins them."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import urllib.request

    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from routerlab.data.logs import read_logs
    from tests.serve.test_cli_serve import REPO, SERVER

    table_dir = tmp_path / "demo"
    TABLE.save(table_dir)
    log = tmp_path / "served.csv"
    env = {**os.environ, "ROUTERLAB_PROGRESS": "0"}
    cmd = [sys.executable, "-c", SERVER.format(repo=str(REPO)), "serve", "linucb", "--table", str(table_dir),
           "--actors", ACTORS, "--port", "0", "--log", str(log), "--learn", "2", "--no-cache"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def call(path: str, body: dict[str, object] | None = None) -> dict[str, object]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url + path, data=data, headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return dict(json.loads(r.read()))

    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        deadline = time.monotonic() + 30
        while True:
            try:
                call("/models")
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        for k in range(2):
            out = call("/chat/completions", {"model": "routerlab", "messages": [{"role": "user", "content": f"q {k}"}],
                                             "metadata": {"query_id": f"r{k}"}})
            assert call("/feedback", {"query_id": f"r{k}", "score": 1.0})["recorded"] is True
            assert out["routerlab"]["query_id"] == f"r{k}"  # type: ignore[index]
        for _ in range(300):
            learning = call("/models")["data"][0]["routerlab"]["learning"]  # type: ignore[index]
            if learning["refits"] == 1:
                break
            time.sleep(0.1)
        assert learning["refits"] == 1 and learning["last_refit"] and learning["last_error"] is None
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert read_logs(log).n == 2 and (tmp_path / "served.feedback.csv").is_file()
