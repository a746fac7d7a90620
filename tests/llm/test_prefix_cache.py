"""The local backend's prefix KV cache: the LRU's policy on hand-made token ids, option parsing, and on SmolLM2
(the ``smollm2`` fixture's model) letter logits with the cache equal to those without it (float32 exactly as
measured, bfloat16 within its rounding), hit counters checked against token prefixes counted by hand, and
concurrent callers."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from routerlab.errors import UsageError
from routerlab.llm.base import BackendSpec, Message, parse_actor_spec
from routerlab.llm.local import LocalBackend, PrefixCache, PrefixEntry, common_prefix_length

# measured on SmolLM2-135M (docs/llm.md "Prefix cache"): bf16 letter logits differ by at most 0.375 (1-3 units
# in the last place at magnitudes 8-32, as batching does); float32 ones did not differ at all
BF16_TOLERANCE = 0.5
F32_TOLERANCE = 1e-4

PREFIX = ("You route each question to one of four assistants. A is a small fast model for short facts. "
          "B is a code model for programs and shell commands. C is a large model for long proofs and "
          "multi-step reasoning. D is a writing model for letters, summaries and translation. Examples: "
          "'Capital of Peru?' goes to A. 'Reverse a linked list in Python' goes to B. 'Prove there are "
          "infinitely many primes' goes to C. 'Translate good morning into French' goes to D. Answer with "
          "the letter only.")
SUFFIXES = ["Who painted the Mona Lisa?", "Write a regex for email addresses.",
            "Why is the square root of 2 irrational?", "Draft a polite reminder email."]
FAMILY = [[Message("system", PREFIX), Message("user", q)] for q in SUFFIXES]
LONE = [[Message("user", "Which of these is a mammal? A. trout B. whale C. shark D. squid. Reply with one letter "
                         "and nothing else, please, since a program reads your answer. " * 2)],
        [Message("system", "You grade arithmetic. Reply A if the sum is right, B if wrong."),
         Message("user", "Is 19 + 23 = 42? " + "Think about carrying the tens digit carefully. " * 3)]]


def _fake(ids: list[int], width: int = 3) -> PrefixEntry:
    """An entry over ``ids`` with two layers of (1, 1, tokens, width) float32 states (16 bytes a token a layer)."""
    arr = np.asarray(ids, dtype=np.int64)
    state = np.broadcast_to(arr[None, None, :, None], (1, 1, len(ids), width)).astype(np.float32)
    return PrefixEntry(arr, ((state, state.copy()), (state.copy(), state.copy())), None)


# ------------------------------------------------------------------------------------------ the policy
def test_common_prefix_length() -> None:
    a = np.array([5, 6, 7, 8])
    assert common_prefix_length(a, np.array([5, 6, 9])) == 2
    assert common_prefix_length(a, np.array([5, 6])) == 2
    assert common_prefix_length(a, a) == 4
    assert common_prefix_length(a, np.array([1, 6, 7, 8])) == 0
    assert common_prefix_length(a, np.array([], dtype=np.int64)) == 0


def test_lookup_store_and_lru_eviction() -> None:
    cache = PrefixCache(slots=2, min_tokens=4)
    cache.store(_fake([1, 2, 3, 4]))  # not longer than min_tokens: never reusable, never kept
    assert cache.stats()["entries"] == 0
    cache.store(_fake([1, 2, 3, 4, 5, 6, 7, 8]))
    # shares 6 tokens (1..6): reuse 6
    entry, reuse = cache.lookup(np.array([1, 2, 3, 4, 5, 6, 9, 9, 9]))
    assert entry is not None and reuse == 6 and list(entry.ids) == [1, 2, 3, 4, 5, 6, 7, 8]
    # shares only 3 < min_tokens: a miss
    assert cache.lookup(np.array([1, 2, 3, 9, 9, 9, 9])) == (None, 0)
    # a 6-token prompt inside the entry: all but its last token (which must run to give the logits)
    entry, reuse = cache.lookup(np.array([1, 2, 3, 4, 5, 6]))
    assert entry is not None and reuse == 5
    cache.count_saved(6 + 5)  # the caller counts what it reused
    assert cache.stats() == {"hits": 2, "misses": 1, "tokens_saved": 11, "evictions": 0, "entries": 1,
                             "tokens_held": 8, "bytes_held": 8 * 2 * 2 * 12}
    # a longer prompt that extends the entry replaces it
    cache.store(_fake([1, 2, 3, 4, 5, 6, 7, 8, 10, 11]))
    assert cache.stats()["entries"] == 1 and cache.stats()["tokens_held"] == 10
    cache.store(_fake([20, 21, 22, 23, 24]))
    cache.lookup(np.array([1, 2, 3, 4, 5, 0]))  # touches the first entry: [20..24] is now the least recent
    cache.store(_fake([30, 31, 32, 33, 34, 35]))
    stats = cache.stats()
    assert stats["entries"] == 2 and stats["evictions"] == 1 and stats["tokens_held"] == 10 + 6
    assert cache.lookup(np.array([20, 21, 22, 23, 24, 25])) == (None, 0)  # evicted
    entry, reuse = cache.lookup(np.array([30, 31, 32, 33, 34, 99]))
    assert entry is not None and reuse == 5
    cache.clear()
    assert cache.stats() == dict.fromkeys(stats, 0)


def test_options_parse_and_validate() -> None:
    _, spec = parse_actor_spec("x=local:smollm2-135m,prefix_cache=false,prefix_min_tokens=32,prefix_slots=2")
    assert spec.options == {"prefix_cache": False, "prefix_min_tokens": 32, "prefix_slots": 2}
    with pytest.raises(UsageError, match="prefix_cache"):
        parse_actor_spec("x=local:smollm2-135m,prefix_cache=7")
    with pytest.raises(UsageError, match="prefix_slots"):
        parse_actor_spec("x=local:smollm2-135m,prefix_slots=1.5")
    with pytest.raises(UsageError, match="prefix_min_tokens must be an integer >= 1"):
        LocalBackend(BackendSpec("local", "smollm2-135m", {"prefix_min_tokens": 0}))
    with pytest.raises(UsageError, match="prefix_slots must be an integer >= 1"):
        LocalBackend(BackendSpec("local", "smollm2-135m", {"prefix_slots": -1}))


# ------------------------------------------------------------------------------------- on SmolLM2
def _pair(smollm2: Any, **opts: Any) -> tuple[LocalBackend, LocalBackend]:
    """A backend with a fresh prefix cache and one without, on the fixture's loaded weights (``opts`` may ask
    for float32: loaded once more, from the folder the fixture converted)."""
    base = {"threads": 1, **opts}
    on = LocalBackend(BackendSpec("local", "smollm2-135m", base), cache_dir=smollm2.cache_dir)
    off = LocalBackend(BackendSpec("local", "smollm2-135m", {**base, "prefix_cache": False}),
                       cache_dir=smollm2.cache_dir)
    assert on.loaded is off.loaded and off.prefix_cache is None and on.prefix_cache is not None
    return on, off


def _ids(backend: LocalBackend, messages: list[Message]) -> list[int]:
    ids: list[int] = backend.tokenizer(backend.prompt(messages), add_special_tokens=False)["input_ids"]
    return ids


def _shared(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _logits(backend: LocalBackend, prompts: list[list[Message]], batched: bool = False) -> np.ndarray:
    if batched:
        return np.array([s.logits for s in backend.choice_scores_batch(prompts, "ABCD")])
    return np.array([backend.choice_scores(p, "ABCD").logits for p in prompts])


@pytest.mark.parametrize("dtype,tolerance", [("bfloat16", BF16_TOLERANCE), ("float32", F32_TOLERANCE)])
def test_same_letters_with_and_without_the_cache(smollm2: Any, dtype: str, tolerance: float) -> None:
    on, off = _pair(smollm2, dtype=dtype)
    prompts = [FAMILY[0], LONE[0], FAMILY[1], FAMILY[2], LONE[1], FAMILY[3]]
    ids = [_ids(on, p) for p in prompts]
    assert min(_shared(ids[0], i) for i in ids[2:4] + ids[5:]) >= 100  # the family shares over 100 tokens
    assert _shared(ids[0], ids[1]) < 64 and _shared(ids[1], ids[4]) < 64  # the lone prompts share no long prefix
    ref = _logits(off, prompts)
    got = _logits(on, prompts)
    assert np.array_equal(ref.argmax(axis=1), got.argmax(axis=1))
    assert np.max(np.abs(ref - got)) < tolerance
    # hand count, one at a time: the three misses (FAMILY[0] and the lone prompts, all over 64 tokens) are kept;
    # FAMILY[1..3] reuse what they share with FAMILY[0] and, their own part being short, are not kept
    assert min(len(ids[k]) for k in (0, 1, 4)) > 64
    assert max(len(ids[k]) - _shared(ids[k], ids[0]) for k in (2, 3, 5)) < 64
    stats = on.prefix_stats()
    assert stats["hits"] == 3 and stats["misses"] == 3 and stats["entries"] == 3
    assert stats["tokens_saved"] == sum(_shared(ids[k], ids[0]) for k in (2, 3, 5))
    assert stats["tokens_held"] == len(ids[0]) + len(ids[1]) + len(ids[4])
    # batched: FAMILY[0] runs alone and is kept, FAMILY[1..3] run together on its states (from the shortest
    # match), the lone prompts in one padded batch
    on.prefix_cache.clear()  # type: ignore[union-attr]
    got = _logits(on, prompts, batched=True)
    assert np.array_equal(ref.argmax(axis=1), got.argmax(axis=1))
    assert np.max(np.abs(ref - got)) < tolerance
    stats = on.prefix_stats()
    assert stats["hits"] == 3 and stats["misses"] == 3 and stats["entries"] == 1
    assert stats["tokens_saved"] == 3 * min(_shared(ids[k], ids[0]) for k in (2, 3, 5))


def test_repeat_is_identical_and_off_counts_nothing(smollm2: Any) -> None:
    on, off = _pair(smollm2)
    first = on.choice_scores(FAMILY[0], "ABCD")
    again = on.choice_scores(FAMILY[0], "ABCD")
    assert again.logits == first.logits and again.tokens_in == first.tokens_in == len(_ids(on, FAMILY[0]))
    assert on.prefix_stats()["hits"] == 1 and on.prefix_stats()["tokens_saved"] == len(_ids(on, FAMILY[0])) - 1
    off.choice_scores(FAMILY[0], "ABCD")
    assert set(off.prefix_stats().values()) == {0}


def test_a_hit_with_a_long_own_part_is_kept(smollm2: Any) -> None:
    """A prompt that shares the system turn with a kept one but goes on for more than 64 tokens of its own is kept
    too, so the next prompt of its kind reuses all of it, not only the shared system turn."""
    on, _ = _pair(smollm2)
    story = "Here is a long user message about a garden, the weather, and the neighbours' dog. " * 4
    second = [Message("system", PREFIX), Message("user", story + "Who should answer?")]
    third = [Message("system", PREFIX), Message("user", story + "Which assistant fits?")]
    a, b, c = (_ids(on, p) for p in (FAMILY[0], second, third))
    assert len(b) - _shared(a, b) > 64 and _shared(b, c) > _shared(a, c)
    for p in (FAMILY[0], second, third):
        on.choice_scores(p, "ABCD")
    stats = on.prefix_stats()
    assert stats["hits"] == 2 and stats["misses"] == 1 and stats["entries"] == 2
    assert stats["tokens_saved"] == _shared(a, b) + _shared(b, c)
    assert stats["tokens_held"] == len(a) + len(b)


def test_two_families_in_one_batch(smollm2: Any) -> None:
    """One batch holding two prefixes: each family's first prompt runs alone and is kept, its other prompts run
    on it; the letters are those scored without the cache."""
    on, off = _pair(smollm2)
    header = PREFIX.replace("You route each question", "Send every query").replace("Examples:", "For instance:")
    other = [[Message("system", header[::-1]), Message("user", q)] for q in SUFFIXES[:2]]
    batch = [FAMILY[0], other[0], FAMILY[1], other[1], FAMILY[2]]
    ids = [_ids(on, p) for p in batch]
    assert _shared(ids[0], ids[1]) < 64
    got = _logits(on, batch, batched=True)
    ref = _logits(off, batch)
    assert np.array_equal(ref.argmax(axis=1), got.argmax(axis=1)) and np.max(np.abs(ref - got)) < BF16_TOLERANCE
    stats = on.prefix_stats()
    assert stats["hits"] == 3 and stats["misses"] == 2 and stats["entries"] == 2
    assert stats["tokens_saved"] == 2 * min(_shared(ids[0], ids[2]), _shared(ids[0], ids[4])) + _shared(ids[1], ids[3])


def test_one_slot_evicts_the_other_family(smollm2: Any) -> None:
    on = LocalBackend(BackendSpec("local", "smollm2-135m", {"threads": 1, "prefix_slots": 1}),
                      cache_dir=smollm2.cache_dir)
    other = [Message("system", PREFIX.replace("four assistants", "4 helpers").upper()), Message("user", "Hi?")]
    for p in (FAMILY[0], other, FAMILY[1]):
        on.choice_scores(p, "ABCD")
    stats = on.prefix_stats()
    assert stats["hits"] == 0 and stats["misses"] == 3 and stats["evictions"] == 2 and stats["entries"] == 1
    assert stats["tokens_held"] == len(_ids(on, FAMILY[1]))


def test_concurrent_callers(smollm2: Any) -> None:
    on, off = _pair(smollm2)
    ref = _logits(off, FAMILY)
    results: dict[tuple[int, int], tuple[float, ...]] = {}
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for k in range(len(FAMILY)):
                results[t, k] = on.choice_scores(FAMILY[(k + t) % len(FAMILY)], "ABCD").logits
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and len(results) == 3 * len(FAMILY)
    for (t, k), logits in results.items():
        expected = ref[(k + t) % len(FAMILY)]
        assert int(np.argmax(logits)) == int(np.argmax(expected))
        assert np.max(np.abs(np.array(logits) - expected)) < BF16_TOLERANCE
    stats = on.prefix_stats()
    assert stats["hits"] + stats["misses"] == 3 * len(FAMILY) and stats["misses"] == 1
