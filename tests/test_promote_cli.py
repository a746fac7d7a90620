"""``routerlab promote`` end to end on the demo: the JSON record, the text, -o, a candidate equal to the current
router kept, and every bad option or file as one line with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routerlab.cli import main
from routerlab.data.logs import write_logs
from routerlab.datasets import demo
from routerlab.protocols.policies import simulate_logs

ENC = ["--encoder", "tfidf:dim=32"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A saved demo table, an eps-greedy log of its test split by best-single, and a 20-row log."""
    root = tmp_path_factory.mktemp("promote")
    table = demo(1500, seed=3)
    table.save(root / "table")
    logs = simulate_logs(table, "eps-greedy:best-single:0.5", part="test", seed=1)
    log, _ = write_logs(logs, root / "test.csv")
    small_table = demo(100, seed=5)
    small_table.save(root / "small-table")
    small = write_logs(simulate_logs(small_table, "uniform", part="test", seed=1), root / "small.csv")[0]
    return {"table": root / "table", "log": log, "small": small, "small_table": root / "small-table"}


def _run(files: dict[str, Path], *args: str) -> int:
    return main(["promote", "--table", str(files["table"]), "--log", str(files["log"]), *ENC, *args])


def test_json_record(files: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert _run(files, "--current", "best-single", "--candidate", "knn:k=10", "--json", "-o", str(out),
                "--seed", "2") == 0
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    assert record["command"] == "promote" and record["routers"] == ["best-single", "knn:k=10"]
    assert record["seed"] == 2 and record["routerlab_version"] and record["data"]["content_hash"]
    assert record["estimator"] == "dr" and record["margin"] == 0.0 and record["metric"] == "mu_o"
    assert record["settings"] == {"current": "best-single", "candidate": "knn:k=10", "estimator": "dr",
                                  "margin": 0.0, "interval": "normal", "n_boot": 1000, "reward_model": "ridge",
                                  "encoder": "tfidf:dim=32", "split": "given", "min_support_rows": 5,
                                  "min_ess": 30.0}
    assert record["interval"] == {"method": "normal", "level": 0.95, "sides": "two-sided"}
    assert record["nominal_false_promotion"] == 0.025
    d = record["difference"]
    assert d["ci"][0] <= d["value"] <= d["ci"][1]
    assert d["value"] == pytest.approx(record["candidate"]["value"] - record["current"]["value"])
    assert record["decision"] in ("promote", "keep", "undecided")
    assert record["promote"] == (record["decision"] == "promote")
    assert record["promote"] == (d["ci"][0] > 0 and not record["support"]["thin"])
    assert record["n"] == record["log"]["n_logged"] == record["support"]["n"] > 30
    assert set(record["ess"]) == {"candidate", "current"} and record["ess"]["current"] > 0
    assert {"n_disagree", "n_disagree_logged_candidate", "unsupported_rows", "thin", "reasons"} <= set(
        record["support"])
    assert record["log"]["content_hash"] and record["log"]["files"] == [str(files["log"])]
    assert record["reward_model"]["kind"] == "ridge"
    assert record["truth"]["difference"] == pytest.approx(record["truth"]["candidate"] - record["truth"]["current"])
    assert json.loads((out / "promote.json").read_text()) == record
    assert f"wrote {out / 'promote.json'}" in captured.err


def test_text_and_the_same_router_is_kept(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(files, "--current", "knn:k=10", "--candidate", "knn:k=10", "--estimator", "snips") == 0
    out = capsys.readouterr().out
    assert out.startswith("keep: knn:k=10 (candidate) vs knn:k=10 (current)")
    assert "difference    +0.0000  95% CI [+0.0000, +0.0000]" in out and "disagree on 0 rows" in out


def test_bootstrap_interval(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(files, "--current", "best-single", "--candidate", "knn:k=10", "--estimator", "ips", "--interval",
                "bootstrap", "--n-boot", "200", "--json", "--margin", "0.5") == 0
    record = json.loads(capsys.readouterr().out)
    assert record["interval"] == {"method": "bootstrap", "level": 0.95, "sides": "two-sided", "n_boot": 200}
    assert record["margin"] == 0.5 and not record["promote"]


def test_below_thirty_rows_cannot_decide(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["promote", "--log", str(files["small"]), "--table", str(files["small_table"]), "--current",
                 "best-single", "--candidate", "knn", *ENC, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["n"] < 30 and record["decision"] == "undecided" and record["difference"]["value"] is None
    assert "cannot decide" in record["reason"]


@pytest.mark.parametrize(("args", "needle"), [
    (["--estimator", "bogus"], "--estimator must be one of dr, ips, snips, got 'bogus'"),
    (["--interval", "bca"], "--interval must be one of normal, bootstrap, got 'bca'"),
    (["--reward-model", "forest"], "--reward-model must be one of"),
    (["--margin", "nan"], "--margin must be a finite number"),
    (["--margin", "-0.01"], "--margin must be >= 0"),
    (["--margin", "1"], "--margin must be below 1"),
    (["--n-boot", "5"], "--n-boot must be an integer in 40..1,000,000, got 5"),
    (["--seed", "-1"], "--seed"),
    (["--split", "sideways"], "--split"),
    (["--encoder", "nosuch"], "--encoder"),
    (["--candidate", "nosuch"], "--candidate"),
    (["--candidate", "oracle"], "'oracle' is a bound"),
    (["--current", " "], "--current needs a router spec"),
])
def test_bad_options_are_one_line(files: dict[str, Path], capsys: pytest.CaptureFixture[str], args: list[str],
                                  needle: str) -> None:
    base = {"--current": "best-single", "--candidate": "knn"}
    for i in range(0, len(args), 2):
        base.pop(args[i], None)
    extra = [x for k, v in base.items() for x in (k, v)]
    assert _run(files, *extra, *args) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and err.startswith("routerlab: error:"), err


def test_bad_files_are_one_line(files: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    routers = ["--current", "best-single", "--candidate", "knn"]
    cases = [
        (["--log", str(tmp_path / "missing.csv")], "missing.csv: no such log file"),
        (["--log", str(tmp_path)], "is a directory, not a log file"),
        (["--log", str(files["table"] / "manifest.json")], "a log file name ends in"),
    ]
    for args, needle in cases:
        assert main(["promote", "--table", str(files["table"]), *routers, *args]) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1, err
    assert main(["promote", "--table", str(tmp_path / "nope"), "--log", str(files["log"]), *routers]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    (tmp_path / "file").write_text("x")
    assert _run(files, *routers, "-o", str(tmp_path / "file")) == 2
    assert "is an existing file" in capsys.readouterr().err
    full = tmp_path / "full"
    full.mkdir()
    (full / "promote.json").write_text("{}")
    assert _run(files, *routers, "-o", str(full)) == 2
    err = capsys.readouterr().err
    assert "already exists and is not empty; pass --force" in err and err.count("\n") == 1
    assert (full / "promote.json").read_text() == "{}"
    assert _run(files, *routers, "-o", str(full), "--force") == 0
    assert json.loads((full / "promote.json").read_text())["command"] == "promote"


def test_a_served_log_with_its_feedback(files: dict[str, Path], capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    """The request log of ``routerlab serve`` (its own columns, ids of its own, an empty score), scored by
    attach_feedback, is what promote judges on: the rows a deployment of best-single with exploration logged."""
    import numpy as np

    from routerlab.data.store import load
    from routerlab.serve.feedback import attach_feedback
    from routerlab.serve.log import LogRecord, RequestLog

    table = load(files["table"])
    logged = simulate_logs(table, "eps-greedy:best-single:0.5", part="test", seed=7)
    texts, actors = logged.table.queries.text, logged.actor
    full = table.select_queries(np.isin(table.queries.ids, logged.table.queries.ids))
    order = {q: i for i, q in enumerate(full.queries.ids)}
    log = RequestLog(tmp_path / "served.csv")
    scores: dict[str, float] = {}
    for i, qid in enumerate(logged.table.queries.ids):
        rid = f"req-{i:04d}"
        actor = table.actor_names[int(actors[i])]
        log.append(LogRecord(query_id=rid, text=str(texts[i]), actor=actor, propensity=float(logged.propensity[i]),
                             mode="routed", latency_s=0.01))
        scores[rid] = float(full.score[order[qid], int(actors[i])])
    log.append(LogRecord(query_id="req-forced", text="What is 2 + 2?", actor=table.actor_names[0], propensity=1.0,
                         mode="forced", latency_s=0.01))
    scores["req-forced"] = 1.0
    log.close()
    result = attach_feedback(tmp_path / "served.csv", scores, tmp_path / "scored.csv")
    assert result.forced == 1 and result.written == logged.n
    assert main(["promote", "--table", str(files["table"]), "--log", str(tmp_path / "scored.csv"), *ENC,
                 "--current", "best-single", "--candidate", "knn:k=10", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["n"] == logged.n and "truth" not in record  # served ids are not the table's
    assert record["log"]["min_propensity"] == pytest.approx(float(logged.propensity.min()))
    assert record["decision"] in ("promote", "keep", "undecided")


def test_missing_options_are_one_line(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    for args, needle in ((["--current", "knn", "--candidate", "knn"], "Missing option '--log'"),
                         (["--log", str(files["log"]), "--candidate", "knn"], "Missing option '--current'"),
                         (["--log", str(files["log"]), "--current", "knn", "--candidate", "knn", "--margin", "x"],
                          "Invalid value for '--margin'")):
        assert main(["promote", *args]) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1, err
