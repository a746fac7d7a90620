"""The request log: concurrent requests write whole rows that read_logs reads, the header and a cut-off record
are handled on reopening, one server per file, feedback attached, and the log-to-OPE round trip."""

from __future__ import annotations

import csv
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from routerlab.data.logs import read_logs
from routerlab.datasets import demo
from routerlab.errors import DataError, UsageError
from routerlab.serve import LOG_COLUMNS, LogRecord, RequestLog, attach_feedback
from routerlab.serve.log import encode_record


def record(qid: str, text: str = "what is 2+2?", actor: str = "a", p: float = 0.5) -> LogRecord:
    return LogRecord(query_id=qid, text=text, actor=actor, propensity=p, mode="routed", latency_s=0.25,
                     tokens_in=7, tokens_out=3)


def rows_of(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_records_keep_every_digit_and_awkward_text(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    text = 'a "quoted", multi-line\ntext, with ümlauts\r\nand a trailing comma,'
    with RequestLog(path) as log:
        log.append(record("q1", text, p=1 / 3))
        log.append(LogRecord("q2", "x", "b", 1.0, "forced", 0.5))
    rows = rows_of(path)
    assert [r["query_id"] for r in rows] == ["q1", "q2"] and rows[0]["text"] == text
    assert float(rows[0]["propensity"]) == 1 / 3 and rows[0]["score"] == "" and rows[1]["tokens_in"] == ""
    assert path.read_text(encoding="utf-8").splitlines()[0] == ",".join(LOG_COLUMNS)
    scored = attach_feedback(path, {"q1": 1.0, "q2": 0.0}, tmp_path / "scored.csv", keep_forced=True)
    logs = read_logs(scored.path)
    assert logs.table.queries.text[0] == text and logs.propensity[0] == 1 / 3
    assert logs.table.tokens_in is not None and np.isnan(logs.table.tokens_in[1, 1])


def test_bad_records_are_refused() -> None:
    with pytest.raises(ValueError, match="propensity"):
        record("q", p=0.0)
    with pytest.raises(ValueError, match="mode"):
        LogRecord("q", "t", "a", 1.0, "guessed", 0.1)


def test_concurrent_appends_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    long_text = "word " * 20000  # ~100 kB per record: a torn write would show
    with RequestLog(path) as log, ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: log.append(record(f"q{i}", f"{i} {long_text}", p=1 / (i + 2))), range(40)))
    rows = rows_of(path)
    assert sorted(r["query_id"] for r in rows) == sorted(f"q{i}" for i in range(40))
    for r in rows:
        i = int(r["query_id"][1:])
        assert r["text"] == f"{i} {long_text}" and float(r["propensity"]) == 1 / (i + 2)


def test_twenty_concurrent_requests_through_the_server(tmp_path: Path) -> None:
    """20 requests at once through HTTP: 20 whole rows, each with its own text, readable as a log."""
    openai = pytest.importorskip("openai")
    pytest.importorskip("fastapi")
    from routerlab.serve import RoutingService
    from routerlab.serve.app import ServerThread, create_app
    from tests.serve.test_app import TABLE, echo_pool

    log = RequestLog(tmp_path / "served.csv")
    svc = RoutingService.train("knn:k=5", TABLE, echo_pool(delay=0.05), explore=0.3, seed=2, log=log)
    texts = [f"{TABLE.queries.text[i]} (request {i})" for i in range(20)]
    try:
        with ServerThread(create_app(svc)) as url:
            api = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)

            def ask(text: str) -> tuple[str, str, float]:
                r = api.chat.completions.create(model="routerlab", messages=[{"role": "user", "content": text}])
                return r.id, r.model, (r.model_extra or {})["routerlab"]["propensity"]

            with ThreadPoolExecutor(20) as pool:
                answers = list(pool.map(ask, texts))
    finally:
        svc.close()
    rows = {r["query_id"]: r for r in rows_of(log.path)}
    assert len(rows) == 20
    for text, (rid, actor, p) in zip(texts, answers, strict=True):
        assert rows[rid]["text"] == text and rows[rid]["actor"] == actor and float(rows[rid]["propensity"]) == p
        assert rows[rid]["mode"] == "routed" and float(rows[rid]["latency_s"]) >= 0.05
    scored = attach_feedback(log.path, dict.fromkeys(rows, 1.0), tmp_path / "scored.csv")
    logs = read_logs(scored.path)
    assert logs.n == 20 and set(logs.propensity.round(6)) <= {round(0.7 + 0.3 / 8, 6), round(0.3 / 8, 6)}


def test_reopening_appends_under_the_same_header_and_knows_the_ids(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    with RequestLog(path) as log:
        log.append(record("q1"))
    with RequestLog(path) as log:
        assert log.n_records == 1 and not log.reserve("q1") and log.reserve("q2")
        log.append(record("q2"))
    assert [r["query_id"] for r in rows_of(path)] == ["q1", "q2"]
    assert path.read_text(encoding="utf-8").count("query_id,text") == 1


def test_a_record_cut_off_by_a_crash_is_dropped_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    with RequestLog(path) as log:
        log.append(record("q1", "first\nline"))
    whole = encode_record(record("q2", "a text with\na newline"))
    with open(path, "ab") as fh:
        fh.write(whole[: len(whole) // 2])  # what a power cut mid-write leaves
    with pytest.warns(UserWarning, match="incomplete last record"), RequestLog(path) as log:
        log.append(record("q3"))
    rows = rows_of(path)
    assert [r["query_id"] for r in rows] == ["q1", "q3"] and rows[0]["text"] == "first\nline"


def test_another_header_or_a_second_server_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.csv"
    other.write_text("id,answer\n1,2\n", encoding="utf-8")
    with pytest.raises(UsageError, match="not a routerlab serve log"):
        RequestLog(other)
    assert other.read_text(encoding="utf-8") == "id,answer\n1,2\n"  # untouched
    with pytest.raises(UsageError, match=r"ending in \.csv"):
        RequestLog(tmp_path / "log.jsonl")
    path = tmp_path / "log.csv"
    with RequestLog(path), pytest.raises(UsageError, match="another process"):
        RequestLog(path)
    with RequestLog(path) as log:  # the first one closed: the lock is gone
        assert log.n_records == 0


def test_attach_feedback_counts_what_it_leaves_out(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    with RequestLog(path) as log:
        log.append(record("q1"))
        log.append(record("q2"))
        log.append(LogRecord("q3", "t", "a", 1.0, "forced", 0.1))
    scores = tmp_path / "scores.csv"
    scores.write_text("query_id,score,note\nq1,1,x\nq3,0,y\nq9,1,z\n", encoding="utf-8")
    res = attach_feedback(path, scores, tmp_path / "scored.csv")
    assert (res.written, res.unscored, res.forced, res.unmatched) == (1, 1, 1, 1)
    assert [r["query_id"] for r in rows_of(res.path)] == ["q1"] and rows_of(res.path)[0]["score"] == "1.0"
    bad = tmp_path / "bad.csv"
    bad.write_text("query_id,score\nq1,1.5\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad.csv, row 2, field 'score'"):
        attach_feedback(path, bad, tmp_path / "x.csv")
    with pytest.raises(UsageError, match="no row"):
        attach_feedback(path, {"q9": 1.0}, tmp_path / "x.csv")
    with pytest.raises(UsageError, match="new file"):
        attach_feedback(path, {"q1": 1.0}, path)


def test_log_to_ope_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Serve the demo's 300 test queries (explore 0.5 around knn, client ids = the table's), attach the table's
    scores of the actors that answered, and ``routerlab ope`` estimates routers close to their truth."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from routerlab.cli import main
    from routerlab.serve import RoutingService
    from routerlab.serve.app import create_app
    from tests.serve.test_app import echo_pool

    table = demo(1500, seed=7)
    table_dir = tmp_path / "demo"
    table.save(table_dir)
    test = np.flatnonzero(table.queries.split == "test")
    assert test.size >= 300
    log = RequestLog(tmp_path / "served.csv")
    svc = RoutingService.train("knn:k=10", table, echo_pool(), explore=0.5, seed=5, log=log)
    with TestClient(create_app(svc)) as client:
        for i in test[:300]:
            r = client.post("/v1/chat/completions", json={
                "model": "routerlab", "messages": [{"role": "user", "content": str(table.queries.text[i])}],
                "metadata": {"query_id": str(table.queries.ids[i])}})
            assert r.status_code == 200
    svc.close()
    ids = {str(q): k for k, q in enumerate(table.queries.ids)}
    actor_at = {a: j for j, a in enumerate(table.actor_names)}
    scores = {r["query_id"]: float(table.score[ids[r["query_id"]], actor_at[r["actor"]]]) for r in rows_of(log.path)}
    scored = attach_feedback(log.path, scores, tmp_path / "scored.csv")
    assert scored.written == 300
    assert main(["ope", str(table_dir), str(scored.path), "--routers", "best-single,knn:k=10", "--json",
                 "--n-boot", "200"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["n_logged"] == 300
    for r in result["results"]:
        truth = r["truth"]["mu_o"]
        for est in ("ips", "snips", "dr"):
            value = r["estimates"][est]["mu_o"]["value"]
            lo, hi = r["estimates"][est]["mu_o"]["ci"]
            # within about four standard errors (the 95% interval is ~3.9 se wide): a wrong propensity in the
            # log (1 instead of 1/16, say) moves IPS far outside; seeded, so the check is deterministic
            assert abs(value - truth) <= max(0.05, hi - lo), (r["router"], est, value, truth, lo, hi)
        lo, hi = r["estimates"]["dr"]["mu_o"]["ci"]
        assert lo <= truth <= hi, (r["router"], lo, truth, hi)
    knn = next(r for r in result["results"] if r["router"] == "knn:k=10")  # the served router: good overlap
    assert knn["diagnostics"]["ess"] > 100
    assert abs(knn["estimates"]["dr"]["mu_o"]["value"] - knn["truth"]["mu_o"]) < 0.05


def test_a_log_of_an_earlier_version_is_read_but_not_appended_to(tmp_path: Path) -> None:
    from routerlab.serve.log import OLD_LOG_COLUMNS

    old = tmp_path / "old.csv"
    old.write_text(",".join(OLD_LOG_COLUMNS) + "\nq1,hello,served,served,a,,0.5,3,4,0.25,routed,0,"
                   "2026-01-01T00:00:00.000Z\n", encoding="utf-8")
    with pytest.raises(UsageError, match="earlier routerlab"):
        RequestLog(old)
    out = attach_feedback(old, {"q1": 1.0}, tmp_path / "scored.csv")
    assert out.written == 1
    assert (tmp_path / "scored.csv").read_text(encoding="utf-8").splitlines()[1].split(",")[5] == "1.0"


def test_status_and_original_latency_are_checked_and_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="status"):
        LogRecord("q", "t", "a", 1.0, "routed", 0.1, status="gone")
    with pytest.raises(ValueError, match="cached=True"):
        LogRecord("q", "t", "a", 1.0, "routed", 0.1, original_latency_s=23.0)
    path = tmp_path / "log.csv"
    with RequestLog(path) as log:
        log.append(LogRecord("q", "t", "a", 1.0, "routed", 0.03, cached=True, original_latency_s=23.0))
        log.append(LogRecord("r", "t", "a", 0.5, "routed", 0.2, status="aborted"))
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0]["cached"] == "1" and rows[0]["latency_s"] == "0.03" and rows[0]["original_latency_s"] == "23.0"
    assert rows[0]["status"] == "answered" and rows[1]["status"] == "aborted" and rows[1]["original_latency_s"] == ""


@pytest.mark.parametrize(("mode", "interval_ms"), [("per-request", 0.0), ("batch", 0.0), ("batch", 5.0)])
def test_each_append_returns_only_once_its_record_is_on_disk(tmp_path: Path, mode: str, interval_ms: float,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Both fsync modes: when append returns, an fsync has run after the record's bytes were written (the file's
    size at the fsync covers them); batch mode does fewer fsyncs than records under concurrent appends, and no
    record is torn or interleaved."""
    import os
    import threading

    path = tmp_path / "log.csv"
    synced_size = [0]
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        size = os.fstat(fd).st_size  # everything written before this call is covered by it
        real_fsync(fd)
        synced_size[0] = max(synced_size[0], size)

    monkeypatch.setattr("routerlab.serve.log.os.fsync", fsync)
    long_text = "word " * 2000
    uncovered: list[str] = []
    guard = threading.Lock()

    def one(i: int) -> None:
        log.append(record(f"q{i}", f"{i} {long_text}"))
        with guard:  # the fsync that covered this record must have run before append returned
            rows = path.read_bytes().count(f"\nq{i},".encode())
            if rows != 1 or synced_size[0] < _end_of(path, f"q{i}"):
                uncovered.append(f"q{i}")

    with RequestLog(path, fsync=mode, fsync_interval_ms=interval_ms) as log, ThreadPoolExecutor(16) as pool:
        list(pool.map(one, range(160)))
        n_fsyncs = log.n_fsyncs
    assert not uncovered
    rows = rows_of(path)
    assert sorted(r["query_id"] for r in rows) == sorted(f"q{i}" for i in range(160))
    assert all(r["text"] == f"{r['query_id'][1:]} {long_text}" for r in rows)
    if mode == "per-request":
        assert n_fsyncs == 160
    else:
        assert 1 <= n_fsyncs < 160


def _end_of(path: Path, qid: str) -> int:
    """The byte offset just after the record of ``qid`` in the log (these records are one line each)."""
    data = path.read_bytes()
    start = data.index(f"\n{qid},".encode()) + 1
    return data.index(b"\n", start) + 1


def test_batch_mode_closes_with_every_record_flushed_and_checks_its_options(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    with RequestLog(path, fsync="batch", fsync_interval_ms=50) as log:
        log.append(record("q1"))
        log.append(record("q2"))
    assert [r["query_id"] for r in rows_of(path)] == ["q1", "q2"]
    with RequestLog(path, fsync="batch") as log:  # reopened: the ids are known, appending goes on
        assert log.n_records == 2 and not log.reserve("q1")
        log.append(record("q3"))
    assert [r["query_id"] for r in rows_of(path)] == ["q1", "q2", "q3"]
    for bad, match in [({"fsync": "sometimes"}, "--fsync must be one of per-request, batch"),
                       ({"fsync_interval_ms": -0.1}, "--fsync-interval-ms"),
                       ({"fsync_interval_ms": -5}, "--fsync-interval-ms"),
                       ({"fsync_interval_ms": float("nan")}, "--fsync-interval-ms"),
                       ({"fsync_interval_ms": 5000}, r"\[0, 1000\]")]:
        with pytest.raises(UsageError, match=match):
            RequestLog(tmp_path / "other.csv", **bad)  # type: ignore[arg-type]


def test_a_row_longer_than_the_csv_field_limit_survives_a_reopen_and_reads(tmp_path: Path) -> None:
    """Python's csv reader refuses fields over 128 KB by default; a long served prompt must not read as a
    cut-off tail (which reopening would truncate away)."""
    from routerlab.data.served import feedback_path_for, read_served_log

    path = tmp_path / "log.csv"
    long_text = "word " * 50_000  # 250 KB
    with RequestLog(path) as log:
        log.append(record("q1", text=long_text, actor="a", p=0.5))
        log.append(record("q2", actor="b", p=0.5))
    size = path.stat().st_size
    with RequestLog(path) as log:
        assert log.n_records == 2
    assert path.stat().st_size == size
    feedback_path_for(path).write_text("query_id,score,metadata,created\nq1,1.0,,2026-01-01T00:00:00Z\n"
                                       "q2,0.0,,2026-01-01T00:00:00Z\n", encoding="utf-8")
    logs = read_served_log(path)
    assert logs.n == 2 and str(logs.table.queries.text[0]) == long_text
