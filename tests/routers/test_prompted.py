"""The ``prompted`` router (HSE appendix 12): exemplar selection by hand, the prompt, answer parsing with its
counted fallback, logits mode, batching, backend handling and option checks against a scripted fake backend;
then one small run with the real SmolLM2 in both modes."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import pytest

from routerlab.data.feedback import Feedback
from routerlab.data.table import Actors, Queries, RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
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
from routerlab.routers import get_router, routers
from routerlab.routers.prompted import (
    ELLIPSIS,
    MISSING_BACKEND,
    PromptedRouter,
    named_actors,
    parse_choice,
    select_exemplars,
    truncate,
)

nan = math.nan

# Rows of a hand-made score matrix (actors A, B, C) and what appendix 12.2 makes of them with delta = 0.4:
SCORES = [
    [1.0, 0.5, 0.2],  # 0: A clear (by 0.5)
    [0.9, 0.5, 0.0],  # 1: A clear (by exactly 0.4, in float32: 0.39999998)
    [0.7, 0.4, 0.0],  # 2: A best but not clear (by 0.3)
    [0.0, 1.0, 0.0],  # 3: B clear
    [0.0, 1.0, 0.7],  # 4: B best, not clear
    [1.0, 1.0, 0.0],  # 5: A and B tied best
    [0.0, 0.0, 1.0],  # 6: C clear
    [nan, 0.2, 0.8],  # 7: C clear over the observed B (A unobserved: never an exemplar of A)
    [0.0, 0.0, 0.0],  # 8: all tied best, nobody clear
]
CLEAR = {0: {0, 1}, 1: {3}, 2: {6, 7}}
BEST_NOT_CLEAR = {0: {2, 5, 8}, 1: {4, 5, 8}, 2: {8}}
NAMES = ["alpha", "beta", "gamma"]


def make_table(score: Sequence[Sequence[float]], texts: Sequence[str] | None = None,
               names: Sequence[str] = tuple(NAMES), descriptions: Sequence[str] | None = None,
               params_b: Sequence[float] | None = None) -> RoutingTable:
    n = len(score)
    queries = Queries.create([f"q{i}" for i in range(n)], text=texts or [f"train query {i}" for i in range(n)],
                             split=["train"] * n)
    extra = None if descriptions is None else {"description": list(descriptions)}
    actors = Actors.create(names, params_b=params_b, extra=extra)
    return RoutingTable(queries, actors, np.asarray(score, dtype=np.float64).reshape(n, len(names)))


def features_of(table: RoutingTable) -> Features:
    return Features(np.zeros((table.n_queries, 1)), table, "none")


def queries_table(texts: Sequence[str], names: Sequence[str] = tuple(NAMES)) -> Features:
    """Features of test queries with these texts (their scores are never read by the router)."""
    return features_of(make_table([[0.0] * len(names)] * len(texts), texts, names))


def query_of(messages: Sequence[Message]) -> str:
    """The routed query's text, read back from the user message the router built."""
    found = re.match(r"Query: (.*?)\n\nWhich actor", messages[-1].content, flags=re.S)
    assert found is not None, messages[-1].content
    return found.group(1)


class ScriptedBackend(Backend):
    """A deterministic fake: answers (or letter logits) scripted per routed query text; records every batch."""

    kind = "scripted"

    def __init__(self, replies: Callable[[str], str] | None = None,
                 logits: Callable[[str], Sequence[float]] | None = None, *, choice_scores: bool = False) -> None:
        super().__init__(BackendSpec("scripted", "fake"))
        self.replies = replies or (lambda q: "A")
        self.logits = logits
        self.supports_choice_scores = choice_scores  # type: ignore[misc]
        self.batches: list[list[Sequence[Message]]] = []
        self.letter_calls: list[tuple[str, ...]] = []
        self.decodings: list[Decoding] = []

    def complete(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Completion:
        return Completion(self.replies(query_of(messages)), 10, 1, 0.01, None, None)

    def complete_batch(self, batch: Sequence[Sequence[Message]], decoding: Decoding = GREEDY) -> list[Completion]:
        self.batches.append(list(batch))
        self.decodings.append(decoding)
        return [self.complete(m, decoding) for m in batch]

    def choice_scores_batch(self, batch: Sequence[Sequence[Message]], letters: Sequence[str]) -> list[ChoiceScores]:
        if self.logits is None:
            return super().choice_scores_batch(batch, letters)
        self.batches.append(list(batch))
        self.letter_calls.append(tuple(letters))
        return [ChoiceScores(tuple(letters), tuple(float(v) for v in self.logits(query_of(m))), 0.01, 10)
                for m in batch]


def fitted(attach: Backend | None = None, table: RoutingTable | None = None, /, **options: Any) -> PromptedRouter:
    """A prompted router with ``attach`` attached (if any), fitted on ``table`` (default: SCORES)."""
    router = PromptedRouter(**options)
    if attach is not None:
        router.attach_backend(attach)
    train = table if table is not None else make_table(SCORES)
    return router.fit(train, features_of(train))


# ------------------------------------------------------------------------------------ exemplar selection
def _rows_by_actor(exemplars: Sequence[Any]) -> dict[int, list[tuple[int, bool]]]:
    out: dict[int, list[tuple[int, bool]]] = {0: [], 1: [], 2: []}
    for e in exemplars:
        out[e.actor].append((e.row, e.fallback))
    return out


def test_exemplars_are_clear_wins_k_per_actor_then_best_cases() -> None:
    score = np.asarray(SCORES, dtype=np.float32)  # as tables hold them
    by_actor = _rows_by_actor(select_exemplars(score, 2, 0.4, np.random.default_rng(0)))
    # A and C have exactly 2 clear wins each: both taken, none from the fallback
    assert sorted(by_actor[0]) == [(0, False), (1, False)]
    assert sorted(by_actor[2]) == [(6, False), (7, False)]
    # B has one clear win (row 3); the second is drawn from its best-but-not-clear rows 4, 5, 8
    assert (3, False) in by_actor[1] and len(by_actor[1]) == 2
    (extra, from_fallback), = [x for x in by_actor[1] if x[0] != 3]
    assert from_fallback and extra in BEST_NOT_CLEAR[1]


def test_fallback_fills_up_to_k_from_tied_best_cases_and_stops_when_they_run_out() -> None:
    score = np.asarray(SCORES, dtype=np.float32)
    by_actor = _rows_by_actor(select_exemplars(score, 10, 0.4, np.random.default_rng(3)))
    for a in range(3):  # every clear win, then every best (tied) case: fewer than k exist
        assert {r for r, fb in by_actor[a] if not fb} == CLEAR[a]
        assert {r for r, fb in by_actor[a] if fb} == BEST_NOT_CLEAR[a]
        assert len(by_actor[a]) == len(CLEAR[a]) + len(BEST_NOT_CLEAR[a])
    assert all(r != 7 for r, _ in by_actor[0])  # an unobserved cell never makes an exemplar


def test_a_query_where_no_other_actor_is_observed_is_a_best_case_not_a_clear_win() -> None:
    score = np.array([[1.0, nan, nan], [1.0, 0.0, 0.0], [0.0, 1.0, nan]])
    by_actor = _rows_by_actor(select_exemplars(score, 2, 0.4, np.random.default_rng(0)))
    assert sorted(by_actor[0]) == [(0, True), (1, False)]
    assert by_actor[1] == [(2, False)] and by_actor[2] == []  # C is never observed to win
    (only,) = select_exemplars(np.array([[0.3], [nan]]), 4, 0.4, np.random.default_rng(0))
    assert (only.row, only.actor, only.fallback) == (0, 0, False)  # one actor: its observed queries


def test_k_draws_among_more_clear_wins_and_delta_moves_the_line() -> None:
    score = np.asarray(SCORES, dtype=np.float32)
    picked = set()
    for seed in range(12):
        by_actor = _rows_by_actor(select_exemplars(score, 1, 0.4, np.random.default_rng(seed)))
        assert all(len(v) == 1 and not v[0][1] and v[0][0] in CLEAR[a] for a, v in by_actor.items())
        picked.add(by_actor[0][0][0])
    assert picked == {0, 1}  # random among A's two clear wins, not always the first
    # delta 0.45: row 1 (margin 0.4) no longer counts as a clear win of A; row 0 (0.5) still does
    by_actor = _rows_by_actor(select_exemplars(score, 2, 0.45, np.random.default_rng(0)))
    assert (0, False) in by_actor[0] and (1, False) not in by_actor[0]
    assert [fb for r, fb in by_actor[0] if r != 0] == [True]


def test_exemplars_are_shuffled_across_actors_deterministically_by_seed() -> None:
    score = np.asarray(SCORES, dtype=np.float32)
    orders = [[(e.row, e.actor) for e in select_exemplars(score, 2, 0.4, np.random.default_rng(s))]
              for s in range(6)]
    again = [(e.row, e.actor) for e in select_exemplars(score, 2, 0.4, np.random.default_rng(0))]
    assert orders[0] == again
    assert len({tuple(o) for o in orders}) > 1
    grouped = [o for o in orders if [a for _, a in o] == sorted(a for _, a in o)]
    assert len(grouped) < len(orders)  # not listed actor by actor
    # the router: the same seed gives the same prompt, another seed another order
    assert fitted(ScriptedBackend(), k=2).system_prompt == fitted(ScriptedBackend(), k=2).system_prompt
    prompts = {fitted(ScriptedBackend(), k=2, seed=s).system_prompt for s in range(4)}
    assert len(prompts) > 1


# ------------------------------------------------------------------------------------------- the prompt
def test_the_prompt_lists_actors_exemplars_and_the_query() -> None:
    texts = [f"train query {i}" for i in range(len(SCORES))]
    texts[0] = "x" * 50
    train = make_table(SCORES, texts, descriptions=["solves algebra step by step", "", "nan"],
                       params_b=[1.5, 7.0, nan])
    backend = ScriptedBackend()
    router = fitted(backend, train, k=1, max_chars=20, seed=5)
    system = router.system_prompt
    assert "A. alpha: solves algebra step by step" in system  # the table's description
    assert "B. beta (7B parameters)" in system  # no description: the name and size
    assert "C. gamma\n" in system  # neither
    for e in router.exemplars:  # each exemplar: its (truncated) text, then its letter and name
        text = truncate(texts[e.row], 20)
        assert f"Query: {text}\nBest actor: {'ABC'[e.actor]} ({NAMES[e.actor]})" in system
    assert len(router.exemplars) == 3
    assert truncate("x" * 50, 20) == "x" * 20 + ELLIPSIS and truncate("  short  ", 20) == "short"
    router.scores(queries_table(["what is 2+2?", "y" * 30]))
    (batch,) = backend.batches
    assert [m.role for m in batch[0]] == ["system", "user"] and batch[0][0].content == system
    assert batch[0][1].content.startswith("Query: what is 2+2?\n\n")
    assert "letter (A-C)" in batch[0][1].content
    assert batch[1][1].content.startswith("Query: " + "y" * 20 + ELLIPSIS + "\n\n")


# ------------------------------------------------------------------------------------------- parsing
@pytest.mark.parametrize("answer,actor", [
    ("B", 1), (" C.", 2), ("(B)", 1), ("**A**", 0), ("A)", 0), ("B) beta is best", 1), ("C: gamma", 2),
    ("Answer: B", 1), ("Best actor: C (gamma)", 2), ("The best actor is B", 1), ("C (gamma)", 2),
    ("I would pick Gamma here", 2), ("BETA", 1), ("A good choice is (C)", 2),
    ("beta, or maybe (A)", 1), ("(A) or beta", 0),  # the first match wins
])
def test_every_accepted_answer_form(answer: str, actor: int) -> None:
    assert parse_choice(answer, NAMES) == actor


@pytest.mark.parametrize("answer", ["", "hello", "D", "(Z)", "Answer: E", "delta-model", "answer is b", "I am"])
def test_answers_naming_no_actor_of_the_pool_are_parse_failures(answer: str) -> None:
    assert parse_choice(answer, NAMES) is None


def test_answers_naming_several_actors_are_resolved_by_position_and_counted() -> None:
    assert named_actors("A (beta)", NAMES) == {0, 1} and parse_choice("A (beta)", NAMES) == 0
    assert named_actors("B (beta)", NAMES) == {1} and named_actors("nothing", NAMES) == set()
    router = fitted(ScriptedBackend(lambda q: {"x": "A (beta)", "y": "C (gamma)", "z": "beta or gamma"}[q]))
    assert router.choose(queries_table(["x", "y", "z"])).tolist() == [0, 2, 1]
    assert router.ambiguous == 2 and router.parse_failures == 0
    assert router.diagnostics()["ambiguous_answers"] == 2


def test_longest_name_wins_at_a_position() -> None:
    assert parse_choice("use gpt-4o", ["gpt-4", "gpt-4o"]) == 1
    assert parse_choice("use gpt-4 now", ["gpt-4", "gpt-4o"]) == 0


def test_generate_mode_one_hot_with_counted_fallback_to_the_best_training_actor() -> None:
    script = {"q-a": "A", "q-b": "Answer: (B)", "q-bad": "I cannot tell", "q-out": "delta",
              "q-c": "gamma", "q-z": "Z"}
    backend = ScriptedBackend(lambda q: script[q])
    # training means: A (0.6+... ) vs B vs C: make B the best single actor by mean
    train = make_table([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
    router = fitted(backend, train)
    assert router.fallback_actor == 1
    f = queries_table(list(script))
    routed = router.route(f)
    np.testing.assert_array_equal(routed.choice, [0, 1, 1, 1, 2, 1])  # failures -> beta
    np.testing.assert_array_equal(routed.scores, np.eye(3)[[0, 1, 1, 1, 2, 1]])
    np.testing.assert_array_equal(routed.distribution, routed.scores)  # a hard assignment: one-hot
    assert (router.last_parse_failures, router.parse_failures, router.calls) == (3, 3, 6)
    assert router.ambiguous == 0
    assert router.last_answers == list(script.values())
    router.scores(queries_table(["q-a", "q-z"]))
    assert (router.last_parse_failures, router.parse_failures, router.calls) == (1, 4, 8)
    d = router.diagnostics()
    assert d["mode"] == "generate" and d["parse_failures"] == 4 and d["last_parse_failures"] == 1
    assert d["fallback_actor"] == "beta" and d["calls"] == 8
    first = fitted(ScriptedBackend(lambda q: script[q]), train, fallback="first")
    np.testing.assert_array_equal(first.choose(f), [0, 1, 0, 0, 2, 0])
    assert backend.decodings[0].max_tokens == 16 and backend.decodings[0].greedy


def test_logits_mode_scores_are_log_probabilities_and_the_distribution_their_softmax() -> None:
    table = {"q1": [2.0, 0.5, -1.0], "q2": [0.0, 0.0, 3.0], "q3": [100.0, 99.0, 0.0]}
    backend = ScriptedBackend(logits=lambda q: table[q], choice_scores=True)
    router = fitted(backend)
    routed = router.route(queries_table(list(table)))
    assert router.last_mode == "logits" and backend.letter_calls == [("A", "B", "C")]
    for i, logits in enumerate(table.values()):
        z = np.exp(np.array(logits) - max(logits))
        p = z / z.sum()
        np.testing.assert_allclose(routed.distribution[i], p, rtol=1e-12)
        np.testing.assert_allclose(routed.scores[i], np.log(p), rtol=1e-12)
    np.testing.assert_array_equal(routed.choice, [0, 2, 0])
    assert router.parse_failures == 0 and router.calls == 3


def test_auto_mode_follows_the_backend_and_logits_mode_needs_letter_scores() -> None:
    gen = ScriptedBackend(lambda q: "B")
    r = fitted(gen)
    r.scores(queries_table(["x"]))
    assert r.last_mode == "generate"
    lg = ScriptedBackend(lambda q: "B", logits=lambda q: [0.0, 0.0, 1.0], choice_scores=True)
    r = fitted(lg)
    assert r.choose(queries_table(["x"])).tolist() == [2] and r.last_mode == "logits"
    assert fitted(lg, mode="generate").choose(queries_table(["x"])).tolist() == [1]
    with pytest.raises(UsageError, match="option-letter scores need a local model"):
        fitted(ScriptedBackend(), mode="logits").scores(queries_table(["x"]))


def test_one_batch_call_per_scoring_pass() -> None:
    backend = ScriptedBackend(lambda q: "C")
    router = fitted(backend)
    f = queries_table([f"query {i}" for i in range(7)])
    router.scores(f)
    assert len(backend.batches) == 1 and [query_of(m) for m in backend.batches[0]] == [f"query {i}" for i in range(7)]
    router.route(f)
    assert len(backend.batches) == 2
    empty = queries_table([])
    assert router.scores(empty).shape == (0, 3) and len(backend.batches) == 2  # nothing to ask


# --------------------------------------------------------------------------------- backend and options
def test_no_backend_is_one_clear_error_when_scoring() -> None:
    """Fitting needs no backend (a protocol attaches one after checking and before scoring); scoring does."""
    router = fitted()
    assert not router.has_backend() and len(router.exemplars) == 4 + 4 + 3  # C: rows 6, 7, 8 only
    with pytest.raises(UsageError) as err:
        router.scores(queries_table(["q"]))
    assert str(err.value) == MISSING_BACKEND
    with pytest.raises(UsageError, match="needs an LLM backend"):
        router.backend()
    assert router.attach_backend(ScriptedBackend(lambda q: "B")).choose(queries_table(["q"])).tolist() == [1]
    with pytest.raises(UsageError, match="needs a Backend"):
        router.attach_backend("local:smollm2-135m")  # type: ignore[arg-type]
    assert PromptedRouter.needs_backend and not routers()["knn"].needs_backend


def test_a_backend_option_is_parsed_at_once_and_loaded_only_when_scoring() -> None:
    router = get_router("prompted:backend=local:smollm2-135m;threads=1,k=2")
    assert router._spec is not None and router._spec.describe() == "local:smollm2-135m,threads=1"
    assert router._backend is None and router.has_backend()
    with pytest.raises(UsageError, match="unknown backend kind"):
        get_router("prompted:backend=nowhere:model")
    with pytest.raises(UsageError, match="option backend"):
        get_router("prompted:backend=local")


@register_backend("prompted-test")
class _RuleBackend(ScriptedBackend):
    """A fake kind loadable by spec (``prompted-test:any``): answers C, counts what reaches it."""

    options: ClassVar[dict[str, Any]] = {}
    seen: ClassVar[list[str]] = []

    def __init__(self, spec: BackendSpec, *, cache_dir: Any = None) -> None:
        super().__init__(lambda q: "C")
        self.spec, self.name, self.model_id = spec, spec.describe(), f"{spec.kind}:{spec.model}"

    def complete(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Completion:
        _RuleBackend.seen.append(query_of(messages))
        return super().complete(messages, decoding)


def test_a_backend_given_by_spec_is_loaded_once_with_every_call_cached() -> None:
    tag = f"cached-{time.time_ns()}"  # fresh queries: the session's cache directory is shared
    f = queries_table([f"{tag} one", f"{tag} two"])
    first = fitted(None, None, backend="prompted-test:any")
    assert first.choose(f).tolist() == [2, 2] and _RuleBackend.seen[-2:] == [f"{tag} one", f"{tag} two"]
    assert first.backend() is first.backend()
    seen = len(_RuleBackend.seen)
    second = fitted(None, None, backend="prompted-test:any")
    assert second.choose(f).tolist() == [2, 2]
    assert len(_RuleBackend.seen) == seen and second.cached_calls == 2 and second.calls == 2
    # an attached backend does not replace the router's own
    assert second.attach_backend(ScriptedBackend(lambda q: "A")).choose(f).tolist() == [2, 2]


@pytest.mark.parametrize("spec,needle", [
    ("prompted:k=0", "option k=0 is out of range"),
    ("prompted:delta=nan", "option delta=nan is out of range"),
    ("prompted:delta=-0.1", "option delta=-0.1 is out of range"),
    ("prompted:mode=vote", "option mode='vote' is out of range; it must be one of auto, generate, logits"),
    ("prompted:fallback=random", "option fallback='random'"),
    ("prompted:max_chars=0", "option max_chars=0"),
    ("prompted:max_tokens=0", "option max_tokens=0"),
    ("prompted:k=1.5", "option k=1.5 should be int"),
    ("prompted:temperature=1", "has no option ['temperature']"),
])
def test_bad_options_are_usage_errors(spec: str, needle: str) -> None:
    with pytest.raises(UsageError) as err:
        get_router(spec)
    assert needle in str(err.value)


def test_at_most_26_actors_and_no_logged_feedback() -> None:
    names = [f"m{i}" for i in range(27)]
    big = make_table([[0.5] * 27] * 3, names=names)
    with pytest.raises(UsageError, match="at most 26 actors"):
        fitted(ScriptedBackend(), big)
    names26 = names[:26]
    t26 = make_table(np.eye(26)[:26].tolist(), names=names26)
    r = fitted(ScriptedBackend(lambda q: "Z"), t26, k=1)
    assert r.choose(queries_table(["q"], names26)).tolist() == [25]
    assert PromptedRouter.logged_recipe is None  # a clear win needs every actor's score on the query
    fb = Feedback.logged(make_table(SCORES), np.zeros(len(SCORES), dtype=np.intp), np.ones(len(SCORES)))
    with pytest.raises(UsageError, match="cannot learn from logged feedback"):
        fitted(ScriptedBackend()).fit(fb, features_of(make_table(SCORES)))


def test_queries_without_text_are_never_exemplars() -> None:
    texts = [f"train query {i}" for i in range(len(SCORES))]
    texts[0] = "   "  # A's clear win 0 has no text: A keeps clear win 1 and falls back for the second
    r = fitted(ScriptedBackend(), make_table(SCORES, texts), k=2)
    assert 0 not in {e.row for e in r.exemplars}
    assert sorted((e.row, e.fallback) for e in r.exemplars if e.actor == 0)[0] == (1, False)
    assert r.diagnostics()["exemplars_from_fallback"]["alpha"] == 1
    with pytest.raises(UsageError, match="no query texts"):
        fitted(ScriptedBackend(), make_table(SCORES, [""] * len(SCORES)))


def test_diagnostics_count_exemplars_per_actor_and_from_the_fallback() -> None:
    d = fitted(ScriptedBackend(), k=3).diagnostics()
    assert d["exemplars"] == {"alpha": 3, "beta": 3, "gamma": 3}
    assert d["exemplars_from_fallback"] == {"alpha": 1, "beta": 2, "gamma": 1}
    assert d["calls"] == 0 and d["parse_failures"] == 0 and d["mode"] == "auto"


# ------------------------------------------------------------------------------------ the real model
def test_smollm2_routes_a_few_queries_in_both_modes(smollm2: Backend) -> None:
    texts = ["Solve 12 * 7 + 3.", "Write a Python function that reverses a list.", "Who wrote Hamlet?",
             "Integrate x^2 from 0 to 1.", "Fix this SQL: SELEC * FROM t;", "What is the capital of Peru?"]
    score = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
    train = make_table(score, texts, names=["math-solver", "code-writer", "trivia-expert"],
                       descriptions=["answers mathematics", "writes and fixes code", "answers general knowledge"])
    test = queries_table(["What is 15% of 80?", "Sort a dict by value in Python.", "Who painted the Mona Lisa?",
                          "How many legs has a spider?"], ["math-solver", "code-writer", "trivia-expert"])
    gen = fitted(smollm2, train, k=1, mode="generate", max_tokens=8, max_chars=80)
    routed = gen.route(test)
    assert routed.scores.shape == (4, 3) and set(routed.scores.sum(axis=1)) == {1.0}
    failures = [parse_choice(a, gen.actor_names) is None for a in gen.last_answers]
    assert gen.last_parse_failures == sum(failures) and len(gen.last_answers) == 4
    assert all(routed.choice[i] == gen.fallback_actor for i, bad in enumerate(failures) if bad)
    logits = fitted(smollm2, train, k=1, mode="logits", max_chars=80)
    p = logits.distribution(test)
    assert p.shape == (4, 3) and np.allclose(p.sum(axis=1), 1.0) and (p > 0).all()
    assert logits.last_mode == "logits" and logits.parse_failures == 0


def test_protocols_hand_the_run_backend_over_or_refuse_before_training() -> None:
    """``applicable_routers`` (every protocol's first step) gives a backend-less prompted router the run's backend,
    leaves a router with its own alone, and without either refuses it before any training: an error, or a named
    skip under ``skip_inapplicable`` (a zoo-wide run such as cold-start over every registered router)."""
    from routerlab.protocols.full import applicable_routers

    train = make_table(SCORES)
    backend = ScriptedBackend()
    chosen, skipped = applicable_routers(["prompted", "random"], train, 0, backend=backend)
    router = dict(chosen)["prompted"]
    assert not skipped and router.backend() is backend  # type: ignore[attr-defined]
    own = PromptedRouter(backend="local:smollm2-135m")
    (_, kept), = applicable_routers([own], train, 0, backend=backend)[0]
    assert kept is own and own._attached is None
    with pytest.raises(UsageError, match="asks an LLM and none is given"):
        applicable_routers(["prompted", "random"], train, 0)
    chosen, skipped = applicable_routers(["prompted", "random"], train, 0, skip_inapplicable=True)
    assert [spec for spec, _ in chosen] == ["random"] and "asks an LLM" in skipped["prompted"]


def test_calibrate_divides_out_the_letters_prior_on_content_free_queries() -> None:
    """Contextual calibration, by hand: the model favours A on every content-free query (logits [2, 0, 0]); a query
    with logits [1.5, 0.5, 0.5] goes to A uncalibrated, but relative to that prior B and C gained and A lost."""
    from routerlab.routers.prompted import CONTENT_FREE

    logits = {q: [2.0, 0.0, 0.0] for q in CONTENT_FREE} | {"q1": [1.5, 0.5, 0.5], "q2": [4.0, 0.0, 0.0]}
    backend = ScriptedBackend(logits=lambda q: logits[q], choice_scores=True)
    plain = fitted(backend).route(queries_table(["q1", "q2"]))
    router = fitted(backend, None, calibrate=True)
    routed = router.route(queries_table(["q1", "q2"]))

    def softmax(v: list[float]) -> np.ndarray:
        z = np.exp(np.array(v) - max(v))
        return z / z.sum()

    prior = softmax([2.0, 0.0, 0.0])  # the same for the three content-free queries
    np.testing.assert_allclose(routed.scores[0], np.log(softmax([1.5, 0.5, 0.5]) / prior), rtol=1e-12)
    np.testing.assert_allclose(routed.scores[1], np.log(softmax([4.0, 0.0, 0.0]) / prior), rtol=1e-12)
    assert plain.choice.tolist() == [0, 0] and routed.choice.tolist() == [1, 0]  # q2 beats the prior: still A
    assert router.calls == 2 + len(CONTENT_FREE)
    assert router.diagnostics()["letter_prior"] == pytest.approx(dict(zip(NAMES, prior, strict=True)))
    with pytest.raises(UsageError, match=r"calibrate=true .* needs option-letter scores"):
        fitted(ScriptedBackend(lambda q: "A"), None, calibrate=True, mode="generate").route(queries_table(["q1"]))
