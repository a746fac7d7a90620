"""collect: a scripted backend for the bookkeeping (scores, tokens, latency, cost, logits, resume), then
SmolLM2 (the shared ``smollm2`` fixture) on a handful of questions in both modes."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from routerlab import load
from routerlab.errors import UsageError
from routerlab.llm import base as llm_base
from routerlab.llm.base import (
    GREEDY,
    Backend,
    BackendSpec,
    ChoiceScores,
    Completion,
    Decoding,
    Message,
    register_backend,
)
from routerlab.llm.cache import CachedBackend, CallCache
from routerlab.llm.collect import PROBE_DECODING, batches, choice_logits, collect, prompt_messages
from routerlab.llm.questions import Question, load_questions

MC = [
    Question("m1", "Which is a fruit?", "food", "test", ("stone", "apple", "chair"), "B", "mc"),
    Question("m2", "Which is a colour?", "art", "test", ("red", "dog", "car", "run"), "A", "mc"),
    Question("m3", "Which is a number?", "math", "test", ("cat", "seven", "sky", "hat"), "B", "mc"),
    Question("m4", "Which flies?", "nature", "test", ("rock", "fish", "bird", "tree"), "C", "mc"),
    Question("m5", "Which is frozen water?", "nature", "test", ("ice", "steam", "sand", "oil"), "A", "mc"),
]
SHORT = [
    Question("s1", "What is 6 times 7?", "math", "test", None, "42", "short"),
    Question("s2", "What is the capital of France?", "geo", "test", None, "Paris", "short"),
]


class ScriptedBackend(Backend):
    """Answers from a script keyed by the question's first line: logits peak at the scripted letter, a reply
    is the scripted text. Counts its real calls; fixed latencies, so the bookkeeping can be checked exactly."""

    options: ClassVar[Mapping[str, Any]] = {}
    supports_choice_scores = True

    def __init__(self, spec: BackendSpec, *, cache_dir: Path | None = None,
                 script: Mapping[str, str] | None = None) -> None:
        super().__init__(spec, cache_dir=cache_dir)
        self.script = dict(script or {})
        self.calls = 0
        self.closed = False

    def _answer(self, messages: Sequence[Message]) -> str:
        return self.script.get(messages[-1].content.splitlines()[0], "I am not sure")

    def complete(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Completion:
        self.calls += 1
        text = " ".join(self._answer(messages).split()[: decoding.max_tokens])
        return Completion(text, len(messages[-1].content.split()), len(text.split()), 0.5, 0.1, 0.02)

    def choice_scores(self, messages: Sequence[Message], letters: Sequence[str]) -> ChoiceScores:
        self.calls += 1
        pick = self._answer(messages)
        return ChoiceScores(tuple(letters), tuple(3.0 if x == pick else -float(i) for i, x in enumerate(letters)),
                            0.25, len(messages[-1].content.split()))

    def close(self) -> None:
        self.closed = True


class NoLogitsBackend(ScriptedBackend):
    supports_choice_scores = False

    def choice_scores(self, messages: Sequence[Message], letters: Sequence[str]) -> ChoiceScores:
        raise AssertionError("collect must not ask a backend without logits for them")


SCRIPT = {"Which is a fruit?": "B", "Which is a colour?": "C", "Which is a number?": "B", "Which flies?": "C",
          "Which is frozen water?": "D", "What is 6 times 7?": "The answer is 42", "What is the capital of France?":
          "Lyon"}
REPLIES = {"Which is a fruit?": "The answer is (B).", "Which is a colour?": "A", "Which is a number?": "seven",
           "Which flies?": "I think D.", "Which is frozen water?": "no idea"}


def scripted(script: Mapping[str, str] = SCRIPT, **options: Any) -> ScriptedBackend:
    return ScriptedBackend(BackendSpec("scripted", "fake-1", options), script=script)


def test_prompt_lists_the_options() -> None:
    (msg,) = prompt_messages(MC[0])
    assert msg.role == "user"
    assert msg.content == ("Which is a fruit?\n\nA. stone\nB. apple\nC. chair\n\n"
                           "Answer with the letter of the correct option.")
    assert prompt_messages(SHORT[0])[0].content.endswith("\n\nAnswer with the final answer only.")


def test_logits_mode_cells_and_logits() -> None:
    backend = scripted(input_price=2.0, output_price=10.0, params_b=0.5)
    table = collect(MC + SHORT, [("fake", backend)], mode="logits", timing_probes=3, progress=False)
    assert table.n_queries == 7 and table.actor_names == ["fake"]
    assert table.score[:, 0].tolist() == [1, 0, 1, 1, 0, 1, 0]
    assert table.tokens_out is not None and table.latency_s is not None and table.tokens_in is not None
    assert table.tokens_out[:5, 0].tolist() == [1] * 5  # one letter decided by the forward pass
    assert np.allclose(table.latency_s[:5, 0], 0.25) and np.allclose(table.latency_s[5:, 0], 0.5)
    assert table.cost_usd is not None
    expected = (table.tokens_in[:, 0] * 2.0 + table.tokens_out[:, 0] * 10.0) / 1e6
    assert np.allclose(table.cost_usd[:, 0], expected)
    assert table.actors.input_price.tolist() == [2.0] and table.actors.params_b.tolist() == [0.5]
    # the short answers were generated: TTFT/ITL come from them, no probe needed
    assert table.actors.ttft_ms[0] == pytest.approx(100.0) and table.actors.itl_ms[0] == pytest.approx(20.0)
    assert table.meta["collect"]["actors"]["fake"]["timing_probes"] == 0
    x = table.queries.extra
    assert x["pred.fake"].tolist()[:5] == ["B", "C", "B", "C", "D"] and x["pred.fake"][5] == "42"
    assert json.loads(x["logits.fake"][0]) == [0.0, 3.0, -2.0] and x["logits.fake"][5] == ""
    assert x["output.fake"][0] == "" and x["output.fake"][5] == "The answer is 42"
    assert x["gold"].tolist() == ["B", "A", "B", "C", "A", "42", "Paris"]
    assert x["kind"].tolist() == ["mc"] * 5 + ["generated"] * 2
    # every cell names its grader and the grade's reason
    assert x["grader.fake"].tolist() == ["mc"] * 5 + ["short"] * 2
    assert x["detail.fake"].tolist()[:5] == ["option-letter logits"] * 5 and x["detail.fake"][5] == "f1 1.000"
    grading = table.meta["collect"]["graders"]
    assert {g: v["questions"] for g, v in grading.items()} == {"mc": 5, "short": 2}
    assert table.meta["collect"]["actors"]["fake"]["grading"]["short"]["questions"] == 2
    # routers see the question's form and options, never an answer (README "What a router sees")
    assert table.queries.visible == {"choices", "kind"}
    assert table.queries.hidden == ("detail.fake", "gold", "grader.fake", "logits.fake", "output.fake", "pred.fake")
    logits = choice_logits(table, "fake")
    assert logits.shape == (7, 10) and logits[0, :3].tolist() == [0.0, 3.0, -2.0]
    assert np.isnan(logits[0, 3:]).all() and np.isnan(logits[5]).all()
    assert table.actors.extra["mode"].tolist() == ["logits"]
    assert not backend.closed  # a backend handed in stays open: the caller owns it
    with pytest.raises(UsageError, match=r"no option-letter logits of actor 'other'.*fake"):
        choice_logits(table, "other")


def test_logits_only_actor_is_timed_by_probes() -> None:
    backend = scripted()
    table = collect(MC, [("fake", backend)], mode="auto", timing_probes=2, progress=False)
    assert backend.calls == 5 + 2
    assert table.actors.ttft_ms[0] == pytest.approx(100.0) and table.actors.itl_ms[0] == pytest.approx(20.0)
    assert table.meta["collect"]["actors"]["fake"]["timing_probes"] == 2
    assert table.meta["collect"]["timing_probe_decoding"] == PROBE_DECODING.as_dict()
    untimed = collect(MC, [("fake", scripted())], timing_probes=0, progress=False)
    assert math.isnan(untimed.actors.ttft_ms[0]) and math.isnan(untimed.actors.itl_ms[0])
    assert np.isnan(untimed.cost_usd).all() if untimed.cost_usd is not None else True  # no prices: unknown cost


def test_generate_mode_reads_letters_from_text() -> None:
    backend = scripted(REPLIES)
    table = collect(MC, [("gen", backend)], mode="generate", decoding=Decoding(max_tokens=4), progress=False)
    assert table.score[:, 0].tolist() == [1, 1, 1, 0, 0]  # "seven" is option B's text
    assert table.queries.extra["pred.gen"].tolist() == ["B", "A", "B", "D", ""]
    assert table.queries.extra["logits.gen"].tolist() == [""] * 5
    assert table.queries.extra["output.gen"][0] == "The answer is (B)."
    assert table.tokens_out is not None and table.tokens_out[0, 0] == 4
    assert table.actors.extra["mode"].tolist() == ["generate"]
    assert table.meta["collect"]["decoding"]["max_tokens"] == 4


def test_auto_generates_where_logits_cannot_be_read_and_logits_mode_refuses() -> None:
    spec = BackendSpec("scripted", "nologits", {})
    backend = NoLogitsBackend(spec, script=REPLIES)
    table = collect(MC[:2], [("api", backend)], mode="auto", progress=False)
    assert table.actors.extra["mode"].tolist() == ["generate"] and table.score[:, 0].tolist() == [1, 1]
    with pytest.raises(UsageError, match=r"--mode logits: actor 'api'.*cannot give option-letter logits"):
        collect(MC[:2], [("api", backend)], mode="logits", progress=False)
    assert backend.calls == 2  # refused before any call


def test_several_actors_and_bad_arguments() -> None:
    table = collect(MC, [("a", scripted()), ("b", scripted(REPLIES))], mode="auto", progress=False)
    assert table.actor_names == ["a", "b"] and table.score.shape == (5, 2)
    assert set(table.meta["collect"]["actors"]) == {"a", "b"}
    with pytest.raises(UsageError, match="no questions"):
        collect([], [("a", scripted())], progress=False)
    with pytest.raises(UsageError, match="no actors"):
        collect(MC, [], progress=False)
    with pytest.raises(UsageError, match="distinct"):
        collect(MC, [("a", scripted()), ("a", scripted())], progress=False)
    with pytest.raises(UsageError, match="--mode must be one of"):
        collect(MC, [("a", scripted())], mode="sample", progress=False)
    with pytest.raises(UsageError, match="batch size"):
        collect(MC, [("a", scripted())], batch_size=0, progress=False)
    with pytest.raises(UsageError, match="logits batch size"):
        collect(MC, [("a", scripted())], logits_batch_size=0, progress=False)
    with pytest.raises(UsageError, match="question ids"):
        collect([MC[0], MC[0]], [("a", scripted())], progress=False)


def test_batches_group_questions_by_their_letters() -> None:
    """A batch mixes 3- and 4-option questions: each group of equal letters is one choice_scores_batch call."""
    seen: list[tuple[int, tuple[str, ...]]] = []

    class Recording(ScriptedBackend):
        def choice_scores_batch(self, batch: Sequence[Sequence[Message]], letters: Sequence[str]
                                ) -> list[ChoiceScores]:
            seen.append((len(batch), tuple(letters)))
            return super().choice_scores_batch(batch, letters)

    collect(MC, [("r", Recording(BackendSpec("scripted", "rec", {}), script=SCRIPT))], logits_batch_size=8,
            timing_probes=0, progress=False)
    assert sorted(seen) == [(1, ("A", "B", "C")), (4, ("A", "B", "C", "D"))]


def test_batches_sort_by_prompt_length_within_letter_groups() -> None:
    qs = [Question(f"q{i}", "x" * n, "d", "", ("a", "b"), "A", "mc") for i, n in enumerate([5, 50, 20, 40, 10])]
    qs.append(Question("q5", "long short answer question", "d", "", None, "1", "short"))
    assert batches(qs, True, 2) == [("AB", [1, 3]), ("AB", [2, 4]), ("AB", [0]), (None, [5])]
    assert batches(qs, False, 4) == [(None, [1, 3, 2, 4]), (None, [0, 5])]  # prompts of 63 and 62 characters
    assert batches(qs, True, 4, 1) == [("AB", [1]), ("AB", [3]), ("AB", [2]), ("AB", [4]), ("AB", [0]), (None, [5])]
    assert batches(qs, True, 1, 3) == [("AB", [1, 3, 2]), ("AB", [4, 0]), (None, [5])]


def test_cache_rerun_and_resume(tmp_path: Path) -> None:
    """3 questions, then 5: only the 2 new ones are asked; a rerun asks nothing and gives the same table."""
    inner = scripted()
    cached = CachedBackend(inner, CallCache(tmp_path / "cache"))
    first = collect(MC[:3], [("fake", cached)], timing_probes=2, progress=False)
    assert inner.calls == 3 + 2
    second = collect(MC, [("fake", cached)], timing_probes=2, progress=False)
    assert inner.calls == 3 + 2 + 2  # two new questions; the probes were cached
    run = second.meta["collect"]["actors"]["fake"]
    assert (run["fresh_calls"], run["cached_calls"]) == (2, 3)
    third = collect(MC, [("fake", cached)], timing_probes=2, progress=False)
    assert inner.calls == 7
    assert third.meta["collect"]["actors"]["fake"]["cached_calls"] == 5
    for key in ("score", "tokens_in", "tokens_out", "latency_s", "cost_usd"):
        a, b = getattr(second, key), getattr(third, key)
        assert (a is None and b is None) or np.array_equal(a, b, equal_nan=True), key
    assert np.array_equal(first.latency_s, second.latency_s[:3])  # a hit keeps the latency first measured


@pytest.fixture()
def scripted_kind() -> Iterator[list[ScriptedBackend]]:
    """The scripted backend as a registered kind, so that specs load it; yields every instance made."""
    made: list[ScriptedBackend] = []

    class Registered(ScriptedBackend):
        def __init__(self, spec: BackendSpec, *, cache_dir: Path | None = None) -> None:
            super().__init__(spec, cache_dir=cache_dir, script=SCRIPT)
            made.append(self)

    register_backend("scripted-test")(Registered)
    yield made
    llm_base._REGISTRY.remove("scripted-test")


def test_specs_are_loaded_cached_and_closed(scripted_kind: list[ScriptedBackend], tmp_path: Path) -> None:
    spec = BackendSpec("scripted-test", "m", {"input_price": 1.0, "output_price": 1.0})
    table = collect(MC, [("x", spec)], cache_dir=tmp_path / "c", timing_probes=1, progress=False)
    assert len(scripted_kind) == 1 and scripted_kind[0].closed and scripted_kind[0].calls == 6
    assert table.actors.extra["spec"].tolist() == ["scripted-test:m,input_price=1.0,output_price=1.0"]
    assert table.actors.extra["model_id"].tolist() == ["scripted-test:m"]  # two-model --features checks it
    assert any((tmp_path / "c").rglob("*.json"))
    again = collect(MC, [("x", spec)], cache_dir=tmp_path / "c", timing_probes=1, progress=False)
    assert scripted_kind[1].calls == 0 and np.array_equal(again.score, table.score)
    with pytest.raises(UsageError, match="cannot give option-letter logits"):
        collect(MC, [("api", BackendSpec("openai", "gpt@http://127.0.0.1:9/v1", {}))], mode="logits")


def test_collected_table_saves_and_is_a_question_source(tmp_path: Path) -> None:
    table = collect(MC + SHORT, [("fake", scripted())], progress=False, provenance={"source": "inline", "seed": 3})
    table.save(tmp_path / "t")
    back = load(tmp_path / "t")
    assert back.content_hash == table.content_hash
    assert back.meta["collect"]["source"] == "inline" and back.meta["collect"]["seed"] == 3
    assert back.meta["collect"]["routerlab_version"]
    assert np.array_equal(choice_logits(back, "fake"), choice_logits(table, "fake"), equal_nan=True)
    again = load_questions(tmp_path / "t")
    assert [(q.id, q.kind, q.gold, q.choices) for q in again] == \
        [(q.id, q.kind, q.gold, q.choices) for q in MC + SHORT]


# ------------------------------------------------------------------------------------ SmolLM2 (real model)
def _borrowed(backend: Backend, cache_dir: Path) -> CachedBackend:
    """The session's loaded model behind a fresh call cache of this test (the model itself is not reloaded)."""
    inner = backend.inner if isinstance(backend, CachedBackend) else backend
    return CachedBackend(inner, CallCache(cache_dir))


def test_smollm2_logits_and_generate(smollm2: Backend, tmp_path: Path) -> None:
    model = _borrowed(smollm2, tmp_path / "cache")
    t0 = time.perf_counter()
    table = collect(MC + SHORT[:1], [("smol", model)], mode="logits", timing_probes=2, logits_batch_size=4,
                    decoding=Decoding(max_tokens=4), progress=False)
    fresh_s = time.perf_counter() - t0
    assert table.score.shape == (6, 1) and set(np.unique(table.score).tolist()) <= {0.0, 1.0}
    assert table.latency_s is not None and (table.latency_s > 0).all()
    assert table.tokens_in is not None and (table.tokens_in > 10).all()
    assert table.actors.ttft_ms[0] > 0 and table.actors.itl_ms[0] > 0
    logits = choice_logits(table, "smol")
    assert np.isfinite(logits[0, :3]).all() and np.isfinite(logits[1:5, :4]).all()
    preds = table.queries.extra["pred.smol"].tolist()
    assert preds[:5] == [q.letters[int(np.nanargmax(logits[i]))] for i, q in enumerate(MC)]
    assert table.score[:5, 0].tolist() == [float(p == q.gold) for p, q in zip(preds[:5], MC, strict=True)]

    t0 = time.perf_counter()
    again = collect(MC + SHORT[:1], [("smol", model)], mode="logits", timing_probes=2, logits_batch_size=4,
                    decoding=Decoding(max_tokens=4), progress=False)
    cached_s = time.perf_counter() - t0
    assert again.meta["collect"]["actors"]["smol"]["fresh_calls"] == 0
    assert np.array_equal(again.latency_s, table.latency_s) and np.array_equal(again.score, table.score)
    assert cached_s < fresh_s

    gen = collect(MC[:3], [("smol", model)], mode="generate", decoding=Decoding(max_tokens=4), progress=False)
    assert set(np.unique(gen.score).tolist()) <= {0.0, 1.0}
    assert gen.tokens_out is not None and (gen.tokens_out >= 1).all() and (gen.tokens_out <= 4).all()
    assert all(gen.queries.extra["output.smol"].tolist()) and gen.actors.ttft_ms[0] > 0


def test_smollm2_resume_asks_only_missing_questions(smollm2: Backend, tmp_path: Path) -> None:
    model = _borrowed(smollm2, tmp_path / "cache")
    first = collect(MC[:3], [("smol", model)], mode="logits", timing_probes=0, progress=False)
    second = collect(MC, [("smol", model)], mode="logits", timing_probes=0, progress=False)
    run = second.meta["collect"]["actors"]["smol"]
    assert (run["fresh_calls"], run["cached_calls"]) == (2, 3)
    assert np.array_equal(second.score[:3], first.score)
    assert np.array_equal(choice_logits(second, "smol")[:3], choice_logits(first, "smol"), equal_nan=True)
