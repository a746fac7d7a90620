"""collect's throughput (issue 21): the model's own rate counts the calls it answered, never cache lookups; and a
run that goes far slower than its own first questions warns once. A fake clock that the scripted backend
advances by each call's scripted seconds; no model, no real timing."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path

import pytest

from routerlab.cli import main
from routerlab.llm import collect as collect_mod
from routerlab.llm.base import GREEDY, BackendSpec, ChoiceScores, Completion, Decoding, Message
from routerlab.llm.cache import CachedBackend, CallCache
from routerlab.llm.collect import SLOW_FACTOR, SLOW_WINDOW, SlowdownWarning, collect
from routerlab.llm.questions import Question
from tests.llm.test_collect import ScriptedBackend


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Timed(ScriptedBackend):
    """Each call takes the next of ``seconds`` on the fake clock (the last value repeats); a generated reply has
    ``tokens`` tokens."""

    def __init__(self, clock: Clock, seconds: Sequence[float], tokens: Sequence[int] = (4,)) -> None:
        super().__init__(BackendSpec("scripted", "timed", {}), script={})
        self.clock, self.seconds, self.tokens = clock, list(seconds), list(tokens)
        self.threads = 2

    def _tick(self) -> None:
        self.clock.t += self.seconds[min(self.calls, len(self.seconds) - 1)]

    def choice_scores(self, messages: Sequence[Message], letters: Sequence[str]) -> ChoiceScores:
        self._tick()
        return super().choice_scores(messages, letters)

    def complete(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Completion:
        self._tick()
        n = self.tokens[min(self.calls, len(self.tokens) - 1)]
        self.calls += 1
        return Completion("x " * n, 5, n, 0.5, 0.1, 0.02)


def questions(n: int, kind: str = "mc") -> list[Question]:
    if kind == "mc":
        return [Question(f"q{i:03d}", f"Question {i:03d}?", "d", "test", ("a", "b", "c"), "A", "mc")
                for i in range(n)]
    return [Question(f"s{i:03d}", f"Short {i:03d}?", "d", "test", None, "x", "short") for i in range(n)]


@pytest.fixture()
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(collect_mod, "_now", c, raising=False)
    return c


def run(qs: list[Question], backend: object, **kwargs: object) -> dict[str, object]:
    table = collect(qs, [("m", backend)], timing_probes=0, progress=False, **kwargs)  # type: ignore[arg-type]
    record: dict[str, object] = table.meta["collect"]["actors"]["m"]
    return record


def test_the_rate_is_the_models_own_and_cache_hits_are_apart(clock: Clock, tmp_path: Path) -> None:
    inner = Timed(clock, [0.5])
    cached = CachedBackend(inner, CallCache(tmp_path / "cache"))
    first = run(questions(6), cached)
    assert first["questions_per_s"] == 2.0 and first["model_s"] == 3.0  # 6 calls of 0.5 s
    again = run(questions(10), cached)  # 6 answered from the cache, 4 asked
    assert (again["fresh_calls"], again["cached_calls"]) == (4, 6)
    assert again["questions_per_s"] == 2.0 and again["model_s"] == 2.0
    rerun = run(questions(10), cached)  # nothing asked: no rate at all, never one of cache lookups
    assert rerun["questions_per_s"] is None and rerun["model_s"] == 0.0 and rerun["cached_calls"] == 10


def test_a_run_far_slower_than_its_first_questions_warns_once(clock: Clock) -> None:
    n_first = SLOW_WINDOW
    slow = 0.1 * SLOW_FACTOR * 1.25  # 5x slower than the first questions' 0.1 s
    backend = Timed(clock, [0.1] * n_first + [slow])
    with pytest.warns(SlowdownWarning) as caught:
        record = run(questions(n_first + 3 * SLOW_WINDOW), backend)
    assert len(caught) == 1
    assert str(caught[0].message) == (
        f"collect: actor 'm' now answers at 2.00 questions/s, under 1/4 of the 10.00 of its first {n_first} "
        "questions (torch on 2 threads): other processes are probably competing for the cores; set threads= in "
        "the actor spec (e.g. threads=1) or run it when the machine is less busy")
    assert record["slowdown"] == {"kind": "logits", "rate": 2.0, "first_rate": 10.0, "first_questions": n_first}


def test_a_slower_but_not_far_slower_run_is_quiet(clock: Clock) -> None:
    backend = Timed(clock, [0.1] * SLOW_WINDOW + [0.1 * SLOW_FACTOR * 0.9])  # 3.6x slower: under the bar
    with warnings.catch_warnings():
        warnings.simplefilter("error", SlowdownWarning)
        record = run(questions(4 * SLOW_WINDOW), backend)
    assert "slowdown" not in record


def test_long_generated_answers_are_not_a_slowdown(clock: Clock) -> None:
    """Generation is paced per decoding step: answers 8x longer taking 8x the time are the same pace."""
    n = 2 * SLOW_WINDOW
    backend = Timed(clock, [0.1] * SLOW_WINDOW + [0.8], tokens=[4] * SLOW_WINDOW + [32])
    with warnings.catch_warnings():
        warnings.simplefilter("error", SlowdownWarning)
        run(questions(n, "short"), backend, batch_size=1)
    stalled = Timed(clock, [0.1] * SLOW_WINDOW + [0.8], tokens=[4])  # the same time for the same length: slow
    with pytest.warns(SlowdownWarning, match="generated tokens/s"):
        run(questions(n, "short"), stalled, batch_size=1)


def test_cache_hits_never_set_the_pace(clock: Clock, tmp_path: Path) -> None:
    """The first questions come from the cache (instant): the model's first own calls set the pace."""
    inner = Timed(clock, [1.0])
    cached = CachedBackend(inner, CallCache(tmp_path / "cache"))
    run(questions(SLOW_WINDOW), cached)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SlowdownWarning)
        record = run(questions(4 * SLOW_WINDOW), cached)
    assert record["questions_per_s"] == 1.0 and record["cached_calls"] == SLOW_WINDOW


def test_cli_prints_the_models_rate_and_the_cache_hits(clock: Clock, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from routerlab.llm import base as llm_base

    monkeypatch.setenv("ROUTERLAB_PROGRESS", "0")

    class Registered(Timed):
        def __init__(self, spec: BackendSpec, *, cache_dir: Path | None = None) -> None:
            super().__init__(clock, [0.25])

    llm_base.register_backend("timed-test")(Registered)
    try:
        src = tmp_path / "q.jsonl"
        src.write_text("".join(json.dumps({"id": q.id, "question": q.text, "choices": list(q.choices or ()),
                                           "answer": "A"}) + "\n" for q in questions(8)))
        args = ["collect", str(src), "--actors", "m=timed-test:x", "--cache-dir", str(tmp_path / "c"),
                "--timing-probes", "0"]
        assert main([*args, "-o", str(tmp_path / "t1")]) == 0
        line = capsys.readouterr().out.splitlines()[1]
        assert "model 4.00 q/s" in line and "calls 8 new, 0 cached" in line
        assert main([*args, "-o", str(tmp_path / "t2")]) == 0
        line = capsys.readouterr().out.splitlines()[1]
        assert "model - q/s (every answer from the cache)" in line and "calls 0 new, 8 cached" in line
    finally:
        llm_base._REGISTRY.remove("timed-test")
