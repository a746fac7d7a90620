"""Progress on stderr: bars on a terminal, plain rate-limited lines elsewhere, never on stdout."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from routerlab import progress
from routerlab.cli import main
from routerlab.datasets import demo
from routerlab.progress import Progress, task, track


@pytest.fixture
def every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every step gets its line, however short (the real threshold is a second)."""
    monkeypatch.delenv(progress.ENV, raising=False)
    monkeypatch.setattr(progress, "MIN_SECONDS", 0.0)


def test_lines_when_stderr_is_not_a_terminal(every_step: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert progress.mode() == "lines"  # capsys' stderr is no terminal
    assert list(track(["a", "b"], "demo: step", label=str)) == ["a", "b"]
    with task("demo: one task"):
        pass
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines[0].startswith("routerlab: demo: step a (1/2) ... ") and lines[0].endswith(" s")
    assert lines[1].startswith("routerlab: demo: step b (2/2) ... ")
    assert lines[2].startswith("routerlab: demo: one task ... ")
    assert len(lines) == 3  # at most one line per step, no closing line when every item was reported


def test_fast_steps_are_silent_and_long_loops_rate_limited(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(progress.ENV, raising=False)
    for _ in track(range(1000), "fast"):
        pass
    assert capsys.readouterr().err == ""
    clock = iter(float(t) for t in range(0, 10_000, 1))  # one second per reading of the clock
    monkeypatch.setattr(time, "perf_counter", lambda: next(clock))
    with Progress("slow", 100, unit="actor") as bar:
        for _ in range(100):
            bar.update(1)  # unlabelled items: only the heartbeat speaks
    lines = capsys.readouterr().err.splitlines()
    assert 10 <= len(lines) <= 40 < 100
    assert all(line.startswith("routerlab: slow (") for line in lines)
    assert "so far" in lines[0]


def test_silenced_by_the_environment(every_step: None, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(progress.ENV, "0")
    assert list(track([1, 2], "quiet", label=str)) == [1, 2]
    with task("quiet task"):
        pass
    assert capsys.readouterr().err == ""


def test_interrupted_loop_says_nothing_more(every_step: None, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(KeyboardInterrupt), task("broken"):
        raise KeyboardInterrupt
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("as_json", [False, True])
def test_evaluate_progress_goes_to_stderr_only(every_step: None, tmp_path: Path, as_json: bool,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ROUTERLAB_CACHE_DIR", str(tmp_path / "cache"))  # a cold cache: texts are encoded
    demo(400, seed=3).save(tmp_path / "t")
    args = ["evaluate", str(tmp_path / "t"), "--routers", "oracle,best-single,knn", "--n-boot", "50"]
    assert main(args + (["--json"] if as_json else [])) == 0
    out, err = capsys.readouterr()
    progress_lines = [line for line in err.splitlines() if line.startswith("routerlab: evaluate: router")]
    assert [line.split(" (")[0] for line in progress_lines] == [
        "routerlab: evaluate: router oracle", "routerlab: evaluate: router best-single",
        "routerlab: evaluate: router knn"]
    # the first run in this process fits tfidf; later ones reuse the fitted encoder
    assert re.search(r"^routerlab: features: (fitting tfidf on 321 training texts, |tfidf: )encoding 321 texts "
                     r"\.\.\. [0-9.]+ s$", err, re.M)
    assert "routerlab: evaluate: paired bootstrap and Oracle best-of-N ... " in err
    assert "routerlab:" not in out
    if as_json:
        record = json.loads(out)  # stdout is exactly one JSON object
        assert [r["spec"] for r in record["results"]] == ["oracle", "best-single", "knn"]
