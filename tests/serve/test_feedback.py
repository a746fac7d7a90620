"""Feedback while serving: ``POST /v1/feedback`` rules (200 / 404 / 409 / 400, idempotent repeats, durable across a
restart, a torn tail cut off), the request log + feedback read directly by ``read_logs`` and ``routerlab ope``
(equal to the attach_feedback path), and what the join keeps (forced, aborted, cached rows)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab.data.logs import read_logs
from routerlab.data.served import FEEDBACK_COLUMNS, feedback_path_for, read_feedback, read_served_log
from routerlab.datasets import demo
from routerlab.errors import DataError, UsageError
from routerlab.serve import LOG_COLUMNS, LogRecord, RequestLog, attach_feedback
from routerlab.serve.feedback_store import FeedbackRejected, FeedbackStore

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from routerlab.serve import RoutingService
from routerlab.serve.app import create_app
from tests.serve._backends import EchoBackend  # noqa: F401 - registers the test-echo backend kind
from tests.serve.test_app import echo_pool

TABLE = demo(300, seed=0)


def rec(qid: str, actor: str = "a", p: float = 0.5, **kw: Any) -> LogRecord:
    return LogRecord(query_id=qid, text=f"text of {qid}", actor=actor, propensity=p,
                     mode=kw.pop("mode", "routed"), latency_s=kw.pop("latency_s", 0.25), **kw)


def feedback_rows(path: Path) -> list[dict[str, str]]:
    with feedback_path_for(path).open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[RoutingService, TestClient]]:
    log = RequestLog(tmp_path / "served.csv")
    svc = RoutingService.train("knn:k=5", TABLE, echo_pool(), log=log)
    app = create_app(svc)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield svc, client
    if app.state.feedback is not None:
        app.state.feedback.close()
    svc.close()


def ask(client: TestClient, text: str, qid: str | None = None, model: str = "routerlab") -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": text}]}
    if qid is not None:
        body["metadata"] = {"query_id": qid}
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_feedback_endpoint_rules(served: tuple[RoutingService, TestClient]) -> None:
    svc, client = served
    qid = ask(client, "what is 2+2?")["routerlab"]["query_id"]
    ok = client.post("/v1/feedback", json={"query_id": qid, "score": 1, "metadata": {"user": "u1", "n": 3}})
    assert ok.status_code == 200 and ok.json()["recorded"] is True and ok.json()["score"] == 1.0
    again = client.post("/v1/feedback", json={"query_id": qid, "score": 1.0})  # same score: accepted, not rewritten
    assert again.status_code == 200 and again.json()["recorded"] is False
    assert svc.log is not None
    rows = feedback_rows(svc.log.path)
    assert [(r["query_id"], r["score"]) for r in rows] == [(qid, "1.0")]
    assert json.loads(rows[0]["metadata"]) == {"n": 3, "user": "u1"}
    clash = client.post("/v1/feedback", json={"query_id": qid, "score": 0.0})
    assert clash.status_code == 409 and clash.json()["error"]["code"] == "feedback_conflict"
    missing = client.post("/v1/feedback", json={"query_id": "chatcmpl-nope", "score": 0.5})
    assert missing.status_code == 404 and missing.json()["error"]["param"] == "query_id"
    assert svc.log.reserve("in-flight")  # routed, not yet answered
    early = client.post("/v1/feedback", json={"query_id": "in-flight", "score": 0.5})
    assert early.status_code == 409 and early.json()["error"]["code"] == "query_not_answered"
    for body, param in ((json.dumps({"query_id": qid, "score": 1.5}), "score"),
                        (json.dumps({"query_id": qid, "score": 0.5}).replace("0.5", "NaN"), "score"),
                        (json.dumps({"query_id": qid, "score": "1"}), "score"),
                        (json.dumps({"query_id": qid, "score": True}), "score"),
                        (json.dumps({"query_id": qid}), "score"),
                        (json.dumps({"score": 1}), "query_id"),
                        (json.dumps({"query_id": "", "score": 1}), "query_id"),
                        (json.dumps({"query_id": qid, "score": 1, "metadata": "x"}), "metadata"),
                        (json.dumps({"query_id": qid, "score": 1, "metadata": {"k": "v" * 5000}}), "metadata"),
                        (json.dumps({"query_id": qid, "score": 1, "note": "x"}), "note"),
                        ("[" * 100_000 + "]" * 100_000, None),
                        ("{not json", None)):
        r = client.post("/v1/feedback", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400, (body[:60], r.text)
        err = r.json()["error"]
        assert err["param"] == param and "\n" not in err["message"], err
    assert len(feedback_rows(svc.log.path)) == 1


def test_feedback_without_a_log_is_refused() -> None:
    svc = RoutingService.train("knn:k=5", TABLE, echo_pool())
    with TestClient(create_app(svc)) as client:
        r = client.post("/v1/feedback", json={"query_id": "x", "score": 1})
    svc.close()
    assert r.status_code == 409 and r.json()["error"]["code"] == "no_request_log"
    assert "--log" in r.json()["error"]["message"]


def test_feedback_is_durable_across_a_restart_and_a_torn_tail_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "served.csv"
    with RequestLog(path) as log:
        for q in ("q1", "q2", "q3"):
            log.append(rec(q))
        with FeedbackStore(log) as store:
            assert store.submit("q1", 1.0)[1] and store.submit("q2", 0.0, {"why": "wrong"})[1]
            with pytest.raises(UsageError, match="locked"):
                FeedbackStore(log)
    with feedback_path_for(path).open("ab") as fh:  # a power loss in the middle of a record
        fh.write(b'q3,0.5,"{""a"":')
    assert set(read_feedback(feedback_path_for(path))) == {"q1", "q2"}  # readers skip the torn tail
    with RequestLog(path) as log:
        with pytest.warns(UserWarning, match="incomplete last record"):
            store = FeedbackStore(log)
        with store:
            assert len(store) == 2
            assert store.submit("q1", 1.0)[1] is False  # remembered across the restart
            with pytest.raises(FeedbackRejected) as conflict:
                store.submit("q2", 1.0)
            assert conflict.value.status == 409
            assert store.submit("q3", 0.5)[1]
    text = feedback_path_for(path).read_text(encoding="utf-8")
    assert text.splitlines()[0] == ",".join(FEEDBACK_COLUMNS) and text.endswith("\n")
    assert [r["query_id"] for r in feedback_rows(path)] == ["q1", "q2", "q3"]
    other = tmp_path / "other.csv"
    feedback_path_for(other).write_text("a,b\n1,2\n", encoding="utf-8")
    with RequestLog(other) as log, pytest.raises(UsageError, match="not a routerlab feedback file"):
        FeedbackStore(log)


def test_the_join_keeps_what_it_should(tmp_path: Path) -> None:
    """Forced rows left out, aborted rows kept with their feedback (latency and tokens unknown) or counted, a
    cached answer's latency is the one measured for it (never original_latency_s)."""
    path = tmp_path / "served.csv"
    with RequestLog(path) as log:
        log.append(rec("q1", tokens_in=3, tokens_out=4))
        log.append(rec("q2", actor="b", latency_s=0.03, cached=True, original_latency_s=23.0))
        log.append(rec("q3", p=1.0, mode="forced"))
        log.append(rec("q4", actor="b", p=0.25, status="aborted", tokens_out=2))
        log.append(rec("q5", actor="b", p=0.25, status="aborted"))
        log.append(rec("q6"))
        with FeedbackStore(log) as store:
            for q, s in (("q1", 1.0), ("q2", 0.0), ("q3", 1.0), ("q4", 0.0)):
                store.submit(q, s)
    logs = read_logs(path)
    assert logs.table.queries.ids.tolist() == ["q1", "q2", "q4"]
    assert logs.served is not None
    c = logs.served
    assert (c.rows, c.kept, c.unscored, c.forced, c.aborted_kept, c.aborted_unscored) == (6, 3, 1, 1, 1, 1)
    a = logs.actor
    latency = logs.table.latency_s[np.arange(3), a]
    assert latency[0] == pytest.approx(0.25) and latency[1] == pytest.approx(0.03) and np.isnan(latency[2])
    assert np.isnan(logs.table.tokens_out[2, a[2]])
    assert logs.table.score[np.arange(3), a].tolist() == [1.0, 0.0, 0.0]
    assert logs.propensity.tolist() == [0.5, 0.5, 0.25]
    assert logs.describe()["served"]["aborted_unscored"] == 1
    zero = read_served_log(path, aborted_score=0.0)  # abandonment as a failure: q5 kept with score 0
    assert zero.table.queries.ids.tolist() == ["q1", "q2", "q4", "q5"]
    forced = read_served_log(path, keep_forced=True)
    assert "q3" in forced.table.queries.ids.tolist()
    with pytest.raises(UsageError, match="aborted_score"):
        read_served_log(path, aborted_score=2.0)
    bad = tmp_path / "bad.csv"
    with RequestLog(bad) as log:
        log.append(rec("z1"))
    feedback_path_for(bad).write_text("query_id,score,metadata,created\nz1,1.0,,t\nz1,0.0,,t\n", encoding="utf-8")
    with pytest.raises(DataError, match="scored twice"):
        read_logs(bad)
    none = tmp_path / "none.csv"
    with RequestLog(none) as log:
        log.append(rec("n1"))
    with pytest.raises(UsageError, match="no row of the request log has feedback"):
        read_logs(none)


def serve_and_score(tmp_path: Path, n: int, part: str = "test") -> tuple[Path, Path, Path, dict[str, float]]:
    """Serve ``n`` demo queries of ``part`` (client ids = the table's), post the table's score of each answering actor
    as feedback (every third one left without), force one request; (table dir, log, feedback-free scored copy
    by attach_feedback, the scores)."""
    table = demo(1500, seed=7)
    table_dir = tmp_path / "demo"
    table.save(table_dir)
    test = np.flatnonzero(table.queries.split == part)[:n]
    log = RequestLog(tmp_path / "served.csv")
    svc = RoutingService.train("knn:k=10", table, echo_pool(), explore=0.5, seed=5, log=log)
    ids = {str(q): k for k, q in enumerate(table.queries.ids)}
    actor_at = {a: j for j, a in enumerate(table.actor_names)}
    scores: dict[str, float] = {}
    app = create_app(svc)
    with TestClient(app) as client:
        for k, i in enumerate(test):
            qid = str(table.queries.ids[i])
            out = ask(client, str(table.queries.text[i]), qid)
            if k % 3 == 2:
                continue
            s = float(table.score[ids[qid], actor_at[out["model"]]])
            assert client.post("/v1/feedback", json={"query_id": qid, "score": s}).status_code == 200
            scores[qid] = s
        ask(client, "a forced one", "forced-1", model=table.actor_names[0])
        assert client.post("/v1/feedback", json={"query_id": "forced-1", "score": 1.0}).status_code == 200
    app.state.feedback.close()
    svc.close()
    scored = attach_feedback(log.path, scores, tmp_path / "scored.csv")
    return table_dir, log.path, scored.path, scores


def test_ope_reads_the_log_and_its_feedback_like_attach_feedback(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from routerlab.cli import main

    table_dir, log, scored, scores = serve_and_score(tmp_path, 240)
    direct, old = read_logs(log), read_logs(scored)
    assert direct.n == old.n == len(scores) == 160
    assert direct.served is not None and (direct.served.unscored, direct.served.forced) == (80, 1)
    assert np.array_equal(direct.propensity, old.propensity)
    assert np.array_equal(direct.table.score, old.table.score, equal_nan=True)
    outs = []
    for path in (log, scored):
        assert main(["ope", str(table_dir), str(path), "--routers", "best-single,knn:k=10", "--json",
                     "--n-boot", "100"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0]["logs"]["served"]["unscored"] == 80
    for a, b in zip(outs[0]["results"], outs[1]["results"], strict=True):
        assert a["estimates"] == b["estimates"] and a["truth"] == b["truth"]
    assert main(["ope", str(table_dir), str(log), "--routers", "best-single", "--n-boot", "50"]) == 0
    text = capsys.readouterr().out
    assert "request log: 160 of 241 served rows kept (left out: 80 without feedback, 1 forced)" in text


def test_train_logs_read_the_log_and_its_feedback_like_attach_feedback(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Routers trained on a served log of training queries + its feedback (``--train-logs``), evaluated on a
    simulated log of the test part: the same numbers as with the attach_feedback copy."""
    from routerlab.cli import main

    table_dir, log, scored, scores = serve_and_score(tmp_path, 150, part="train")
    trained = []
    for path in (log, scored):
        assert main(["ope", str(table_dir), "--train-logs", str(path), "--routers", "linucb,knn:k=10",
                     "--json", "--n-boot", "50"]) == 0
        trained.append(json.loads(capsys.readouterr().out))
    assert trained[0]["training"]["n_train"] == trained[1]["training"]["n_train"] == len(scores) == 100
    for a, b in zip(trained[0]["results"], trained[1]["results"], strict=True):
        assert a["estimates"] == b["estimates"]


def test_the_feedback_file_sits_beside_the_log() -> None:
    assert feedback_path_for("logs/served.csv") == Path("logs/served.feedback.csv")
    assert LOG_COLUMNS[0] == "query_id"


def test_a_feedback_file_given_as_a_log_is_one_clear_error(tmp_path: Path) -> None:
    from routerlab.data.logs import read_logs
    from routerlab.errors import UsageError

    path = tmp_path / "served.feedback.csv"
    path.write_text("query_id,score,metadata,created\nq1,1.0,,2026-01-01T00:00:00Z\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"is the feedback file of a request log; give the log .*served\.csv"):
        read_logs(path)


def test_feedback_on_a_server_generated_id_in_flight_is_409_not_404(
        served: tuple[RoutingService, TestClient]) -> None:
    from routerlab.llm.base import Decoding, Message

    svc, client = served
    plan = svc.plan([Message("user", "still generating")], Decoding())  # routed, id claimed, not answered yet
    r = client.post("/v1/feedback", json={"query_id": plan.query_id, "score": 1.0})
    assert r.status_code == 409 and r.json()["error"]["code"] == "query_not_answered", r.text
    svc._release(plan.query_id)  # the request failed before its answer: the id is unknown again
    assert client.post("/v1/feedback", json={"query_id": plan.query_id, "score": 1.0}).status_code == 404
