"""The LLM-written levels (paraphrase, rambling): reply parsing, the filters, batching, caching, no faking."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from routerlab.errors import UsageError
from routerlab.llm.base import Backend, BackendSpec, Completion, Decoding, Message
from routerlab.perturb import keeps_protected, perturb
from routerlab.perturb.base import NO_BACKEND
from routerlab.perturb.llm_levels import PROMPTS, SYSTEM, Paraphrase, parse_rewrites

GREEDY = Decoding()


class Scripted(Backend):
    """Replies from a script keyed by the question inside the prompt; records every batch it is sent."""

    kind = "scripted"

    def __init__(self, replies: dict[str, str], finish: str = "stop") -> None:
        super().__init__(BackendSpec("scripted", "m", {}))
        self.replies = replies
        self.finish = finish
        self.batches: list[tuple[int, int]] = []  # (batch size, max_tokens)

    def complete(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Completion:
        question = messages[-1].content.split('"""')[1].strip()
        return Completion(self.replies[question], 10, 10, 0.0, None, None, finish_reason=self.finish)

    def complete_batch(self, batch: Sequence[Sequence[Message]], decoding: Decoding = GREEDY) -> list[Completion]:
        self.batches.append((len(batch), decoding.max_tokens))
        return [self.complete(m, decoding) for m in batch]

    def count_tokens(self, text: str) -> int | None:
        return len(text.split())


def test_parse_numbered_items_bullets_and_preambles() -> None:
    reply = "Here are 3 rewrites:\n1. What is 2+2?\n2) **How much is 2+2?**\n3. \"Tell me\n   2+2.\""
    assert parse_rewrites(reply) == ["What is 2+2?", "How much is 2+2?", "Tell me 2+2."]
    assert parse_rewrites("- First one\n* Second one\n\nRewrite 3: Third one") == ["First one", "Second one",
                                                                                   "Third one"]
    assert parse_rewrites("") == []


def test_prompts_ask_for_the_number_and_carry_the_query() -> None:
    level = Paraphrase(backend=Scripted({}), ask=4)
    prompt = level.prompt("  Why is the sky blue?  ")
    assert '"""\nWhy is the sky blue?\n"""' in prompt and "Write 4 paraphrases" in prompt
    assert "numbered 1 to 4" in PROMPTS["rambling"].format(ask=4, prompt="q")
    assert "never answer" in SYSTEM


def test_variants_filtered_for_protected_spans_length_and_duplicates() -> None:
    q = "A car travels 60 miles in 1.5 hours. What is its average speed?"
    reply = ("1. What is the average speed of a car covering 60 miles in 1.5 hours?\n"
             "2. What is the average speed of a car covering 60 miles in 2 hours?\n"   # alters a number: rejected
             "3. 40 mph\n"                                                              # an answer: too short
             "4. What is the average speed of a car covering 60 miles in 1.5 hours?\n"  # duplicate
             "5. If a car goes 60 miles in 1.5 hours, how fast is it on average?")
    backend = Scripted({q: reply})
    ps = perturb(["q1"], [q], ["paraphrase"], 3, backend=backend, options={"paraphrase": {"ask": 5}})
    texts = [v.text for v in ps.variants]
    assert texts == ["What is the average speed of a car covering 60 miles in 1.5 hours?",
                     "If a car goes 60 miles in 1.5 hours, how fast is it on average?"]
    assert all(keeps_protected(q, t) for t in texts)
    assert ps.stats["paraphrase"] == {"queries": 1, "variants": 2, "short": 1, "rejected": 1, "dropped": 1}
    assert [v.variant for v in ps.variants] == [0, 1]


def test_a_reply_cut_at_the_token_limit_loses_its_last_item() -> None:
    q = "Why do leaves change colour in autumn?"
    reply = "1. Why do leaves turn a different colour in autumn?\n2. In autumn, why do the leaves change"
    ps = perturb(["q"], [q], ["paraphrase"], 2, backend=Scripted({q: reply}, finish="length"))
    assert [v.text for v in ps.variants] == ["Why do leaves turn a different colour in autumn?"]
    assert ps.stats["paraphrase"]["dropped"] == 1


def test_rambling_must_add_material() -> None:
    q = "What gas do plants absorb from the air?"
    reply = ("1. Plants absorb what gas?\n"
             "2. So my kid asked me this at dinner and I had no idea: what gas do plants absorb from the air?")
    ps = perturb(["q"], [q], ["rambling"], 2, backend=Scripted({q: reply}))
    assert [v.text for v in ps.variants] == [reply.splitlines()[1][3:]]


def test_batches_group_queries_by_budget_only() -> None:
    short = [f"Is {w} a colour?" for w in ("red", "blue", "green")]
    long_q = "Which of these animals, all of them found in the northern forests of Europe, hibernates in winter?"
    replies = {q: f"1. {q} please\n2. Tell me: {q}" for q in [*short, long_q]}
    backend = Scripted(replies)
    perturb(["a", "b", "c", "d"], [*short, long_q], ["paraphrase"], 2, backend=backend,
            options={"paraphrase": {"batch_size": 2}})
    budgets = sorted({b for _, b in backend.batches})
    assert len(budgets) == 2 and all(b % 64 == 0 for b in budgets)
    assert sorted(n for n, _ in backend.batches) == [1, 1, 2]  # three short ones in batches of <= 2, one long


def test_no_backend_means_not_generated_never_faked() -> None:
    ps = perturb(["q"], ["What is an atom?"], ["paraphrase", "rambling"], 2)
    assert len(ps) == 0 and ps.not_generated == {"paraphrase": NO_BACKEND, "rambling": NO_BACKEND}
    with pytest.raises(UsageError, match="needs an LLM backend"):
        Paraphrase()


@pytest.mark.parametrize("options", [{"ask": 0}, {"ask": 101}, {"ask": True}, {"batch_size": 0}, {"colour": 1}])
def test_bad_options_are_usage_errors(options: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        Paraphrase(backend=Scripted({}), **options)


def test_real_small_model_through_the_call_cache(smollm2: Any, tmp_path: Path) -> None:
    """SmolLM2-135M, on two queries: whatever it writes is parsed and filtered, the stats add up, and a second run
    is served from the call cache with the same variants."""
    from routerlab.llm.cache import CachedBackend, CallCache

    cached = CachedBackend(smollm2, CallCache(tmp_path))
    ids, texts = ["q1", "q2"], ["What is the capital city of France?", "Name a mammal that can fly."]
    options = {"paraphrase": {"ask": 3}}
    first = perturb(ids, texts, ["paraphrase"], 2, backend=cached, options=options)
    stats = first.stats["paraphrase"]
    assert stats["queries"] == 2 and stats["variants"] == len(first) <= 4
    assert all(keeps_protected(texts[ids.index(v.query_id)], v.text) for v in first.variants)
    calls = len(list(tmp_path.rglob("*.json")))
    assert calls == 2
    second = perturb(ids, texts, ["paraphrase"], 2, backend=cached, options=options)
    assert second.variants == first.variants and len(list(tmp_path.rglob("*.json"))) == calls


def test_spans_that_overlap_are_merged_and_segments_give_the_text_back() -> None:
    from routerlab.perturb.spans import protected_spans, segments

    text = 'Draw label("$A$",(10,22),S) and $x$ then stop.'
    spans = protected_spans(text)
    assert [text[s:e] for s, e in spans] == ['label("$A$",(10,22),S)', "$x$"]
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert "".join(piece for piece, _ in segments(text)) == text
