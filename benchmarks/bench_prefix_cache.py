"""The local backend's prefix KV cache: option-letter scoring of few-shot prompts with one long shared prefix.

    python benchmarks/bench_prefix_cache.py                                  # SmolLM2-135M, 24 prompts, threads=1
    python benchmarks/bench_prefix_cache.py --model qwen2.5-coder-1.5b --n 6  # keep Qwen runs short

Every prompt is a fixed few-shot prefix (a system message describing four assistants and worked routing
examples, about ``--prefix-words`` words, ~400 tokens by default) followed by a different short question, as the
``prompted`` router sends them (SPEC section 3). The same prompts are scored in the same run by two backends
sharing one loaded model: ``prefix_cache=false`` (the naive reference: every prompt computed whole) and
``prefix_cache=true``, one prompt at a time and in batches of ``--batch-size``. Printed: seconds, the speed-up
ratio, the prefix cache's counters, and the largest absolute difference between the two sets of letter logits
with how many argmax letters agree (the cache must not change the answers). ``uptime`` goes with the numbers:
the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

LETTERS = "ABCD"
ASSISTANTS = [
    ("A", "a small fast model, good at short factual questions and simple arithmetic, weak at long reasoning"),
    ("B", "a code model, good at programs, regular expressions, shell commands and debugging"),
    ("C", "a large general model, slow and expensive, strong at multi-step reasoning and proofs"),
    ("D", "a writing model, good at summaries, letters, translation and changing the tone of a text"),
]
EXAMPLES = [
    ("What is the capital of Peru?", "A"), ("Write a Python function that reverses a linked list.", "B"),
    ("Prove that there are infinitely many primes.", "C"), ("Translate 'good morning' into French.", "D"),
    ("How many legs does a spider have?", "A"), ("Why does my bash loop skip the last line of a file?", "B"),
    ("A train leaves at 3 pm at 60 km/h; another at 4 pm at 80 km/h. When does the second catch up?", "C"),
    ("Summarise the plot of Hamlet in two sentences.", "D"), ("What is 17 times 3?", "A"),
    ("Fix this SQL: SELECT name FROM users WHERE age > '30'", "B"),
    ("Is every bounded monotone sequence of reals convergent? Explain.", "C"),
    ("Make this email sound more polite: send me the report now.", "D"),
]
QUESTIONS = [
    "Who painted the Mona Lisa?", "Write a regex that matches an email address.", "What is 12 squared?",
    "Explain why the square root of 2 is irrational.", "Rewrite this sentence in plain English: per our discussion.",
    "How do I list hidden files in Linux?", "Which ocean is the largest?", "Summarise the causes of World War I.",
    "Find the bug: for i in range(len(xs)): xs.remove(xs[i])", "What is the boiling point of water in Fahrenheit?",
    "Solve x^2 - 5x + 6 = 0 and explain each step.", "Translate 'thank you very much' into German.",
    "What does HTTP status 404 mean?", "Write a haiku about autumn rain.", "How many continents are there?",
    "Show that the sum of two even numbers is even.", "Convert this loop to a list comprehension: out = []",
    "Write a short thank-you note to a teacher.", "What year did the Berlin Wall fall?",
    "Why is quicksort O(n log n) on average?", "Which element has the symbol Fe?",
    "Draft a tweet announcing a bake sale.",
    "How do I undo the last git commit?", "What is the speed of light in km/s?",
]


def few_shot_prefix(words: int) -> str:
    """The shared system message: the assistants, then worked examples until about ``words`` words."""
    lines = ["You are a router. Pick the assistant that should answer the user's question.", "Assistants:"]
    lines += [f"{letter}. {text}" for letter, text in ASSISTANTS]
    lines.append("Examples:")
    i = 0
    while len(" ".join(lines).split()) < words:
        question, letter = EXAMPLES[i % len(EXAMPLES)]
        lines.append(f"Question: {question}\nAssistant: {letter}")
        i += 1
    lines.append("Answer with the letter of one assistant only.")
    return "\n".join(lines)


def score(backend: Any, prompts: list[Any], batch_size: int) -> tuple[float, np.ndarray]:
    """Seconds and the (n, 4) letter logits of scoring ``prompts`` (one at a time when ``batch_size`` is 1)."""
    t0 = time.perf_counter()
    if batch_size == 1:
        out = [backend.choice_scores(p, LETTERS) for p in prompts]
    else:
        out = [s for i in range(0, len(prompts), batch_size)
               for s in backend.choice_scores_batch(prompts[i:i + batch_size], LETTERS)]
    return time.perf_counter() - t0, np.array([s.logits for s in out])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="a local model (smollm2-135m, qwen2.5-coder-1.5b, ...)")
    ap.add_argument("--n", type=int, default=24, help="prompts (shared prefix + different questions)")
    ap.add_argument("--prefix-words", type=int, default=260, help="words of the shared few-shot prefix")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--cache-dir", type=Path, default=None, help="where converted models live (default: user cache)")
    args = ap.parse_args()

    from routerlab.llm.base import BackendSpec, Message
    from routerlab.llm.local import LocalBackend

    opts: dict[str, Any] = {"threads": args.threads, "dtype": args.dtype, "batch_size": args.batch_size}
    cached = LocalBackend(BackendSpec("local", args.model, opts), cache_dir=args.cache_dir)
    naive = LocalBackend(BackendSpec("local", args.model, {**opts, "prefix_cache": False}), cache_dir=args.cache_dir)
    assert cached.prefix_cache is not None and cached.loaded is naive.loaded  # one model, two policies
    prefix = few_shot_prefix(args.prefix_words)
    prompts = [[Message("system", prefix), Message("user", QUESTIONS[i % len(QUESTIONS)] + f" (#{i})")]
               for i in range(args.n)]
    lengths = [cached.count_tokens(cached.prompt(p)) for p in prompts]
    print(f"model {args.model} ({args.dtype}, threads={args.threads}); {args.n} prompts of {min(lengths)}-"
          f"{max(lengths)} tokens; shared prefix {cached.count_tokens(cached.prompt(prompts[0][:1]))} tokens "
          f"(as a lone system turn); load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    score(naive, [[Message("user", "warm up")]], 1)  # first-call overheads out of the timings

    for label, size in (("one at a time", 1), (f"batches of {args.batch_size}", args.batch_size)):
        assert cached.prefix_cache is not None
        cached.prefix_cache.clear()
        t_naive, ref = score(naive, prompts, size)
        t_cached, got = score(cached, prompts, size)
        stats = cached.prefix_stats()
        diff = float(np.max(np.abs(ref - got)))
        same = int(np.sum(ref.argmax(axis=1) == got.argmax(axis=1)))
        print(f"{label:>14}: no cache {t_naive:7.2f} s ({t_naive / args.n:.3f} s/prompt)  cache {t_cached:7.2f} s "
              f"({t_cached / args.n:.3f} s/prompt)  speed-up x{t_naive / t_cached:.2f}  max |logit diff| {diff:.4g}  "
              f"same letter {same}/{args.n}  hits {stats['hits']} misses {stats['misses']} tokens saved "
              f"{stats['tokens_saved']} held {stats['tokens_held']} tokens / {stats['bytes_held'] / 2**20:.1f} MiB")
    print(f"load after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
