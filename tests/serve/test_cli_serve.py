"""``routerlab serve``: every bad option is one line and exit 2 before anything is loaded; a real run answers the
openai client, logs, and stops cleanly on Ctrl-C (SIGINT) with the log closed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from routerlab.cli import main
from routerlab.datasets import demo
from tests.serve import _backends  # noqa: F401 - registers the test-echo backend kind

REPO = Path(__file__).resolve().parents[2]
ACTORS = ",".join(f"{a}=test-echo:{a}" for a in demo(50).actor_names)


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tables") / "demo"
    demo(200, seed=1).save(path)
    return path


def run_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["serve", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("routerlab: error: ") and "\n" not in err, err
    return err


def test_bad_options_are_one_line_exit_2(table_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    base = ["--table", str(table_dir), "--actors", ACTORS, "--port", "0"]
    assert "unknown router" in run_error(["no-such-router", *base], capsys).lower()
    assert "k" in run_error(["knn:k=-3", *base], capsys)
    assert "oracle" in run_error(["oracle", *base], capsys)
    assert "no-such" in run_error(["knn", *base, "--encoder", "no-such"], capsys)
    vectors = tmp_path / "v.npy"
    vectors.write_bytes(b"")
    assert "cannot encode a request's text" in run_error(["knn", *base, "--encoder",
                                                          f"precomputed:path={vectors}"], capsys)
    assert "unknown backend kind" in run_error(["knn", "--table", str(table_dir), "--actors", "a=nope:x"], capsys)
    err = run_error(["knn", *base, "--host", "0.0.0.0"], capsys)
    assert "--allow-remote" in err
    assert "65535" in run_error(["knn", "--table", str(table_dir), "--actors", ACTORS, "--port", "70000"], capsys)
    assert "explore" in run_error(["knn", *base, "--explore", "1.5"], capsys).lower()
    for bad in ("0", "-1", "nan", "inf"):
        assert "--request-timeout must be a finite number of seconds > 0" in run_error(
            ["knn", *base, "--request-timeout", bad], capsys)
    assert "--workers must be an integer >= 1, got 0" in run_error(["knn", *base, "--workers", "0"], capsys)
    assert "--queue must be an integer >= 0, got -1" in run_error(["knn", *base, "--queue", "-1"], capsys)
    assert "--trip-after must be an integer >= 0" in run_error(["knn", *base, "--trip-after", "-1"], capsys)
    for bad in ("0", "-2", "nan", "inf"):
        assert "--cooldown must be a finite number of seconds > 0" in run_error(
            ["knn", *base, "--cooldown", bad], capsys)
    assert "ending in .csv" in run_error(["knn", *base, "--log", str(tmp_path / "log.txt")], capsys)
    (tmp_path / "dir.csv").mkdir()
    assert "is a directory" in run_error(["knn", *base, "--log", str(tmp_path / "dir.csv")], capsys)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert "which is a file" in run_error(["knn", *base, "--log", str(blocker / "log.csv")], capsys)
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    assert "not a routerlab serve log" in run_error(["knn", *base, "--log", str(other)], capsys)
    assert other.read_text() == "a,b\n1,2\n"
    short = ",".join(ACTORS.split(",")[:-1]) + ",extra=test-echo:x"
    err = run_error(["knn", "--table", str(table_dir), "--actors", short, "--port", "0"], capsys)
    assert "frontier-235b has no backend" in err and "extra is not an actor" in err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        assert "cannot listen on 127.0.0.1" in run_error(["knn", *base[:-1], str(port)], capsys)


SERVER = """
import sys
sys.path.insert(0, {repo!r})
import tests.serve._backends  # the test-echo backend kind
from routerlab.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_real_run_answers_logs_and_stops_on_ctrl_c(table_dir: Path, tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    pytest.importorskip("fastapi")
    from routerlab.data.logs import read_logs
    from routerlab.serve import attach_feedback

    log = tmp_path / "logs" / "served.csv"
    env = {**os.environ, "ROUTERLAB_PROGRESS": "0"}
    cmd = [sys.executable, "-c", SERVER.format(repo=str(REPO)), "serve", "knn:k=5", "--table", str(table_dir),
           "--actors", ACTORS, "--port", "0", "--log", str(log), "--explore", "0.2", "--no-cache"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1"), url
        api = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
        deadline = time.monotonic() + 30
        while True:  # the URL is printed just before uvicorn starts accepting
            try:
                r = api.chat.completions.create(model="routerlab",
                                                messages=[{"role": "user", "content": "integrate x squared"}])
                break
            except openai.APIConnectionError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert r.model in demo(50).actor_names and r.choices[0].message.content.startswith(r.model)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "the log holds 1 request" in err
    scored = attach_feedback(log, {r.id: 1.0}, tmp_path / "scored.csv")
    assert read_logs(scored.path).table.actor_names == [r.model]
