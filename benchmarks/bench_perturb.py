"""Benchmark the offline perturbation levels (SPEC 3) on real queries, against naive references in the same run.

    .venv/bin/python benchmarks/bench_perturb.py                 # 706 LLMRouter test queries, p = 3
    .venv/bin/python benchmarks/bench_perturb.py --queries 200 --naive-queries 20 --p 5

Queries: LLMRouter's default test split in ../shared/data (or $ROUTERLAB_SHARED_DATA), 14 tasks from one-line
trivia to logic grids and code. Reported, wall-clock seconds (best of ``--repeat``):

* WordNet load: a fresh :class:`~routerlab.perturb.wordnet.WordNet` reading all four parts of speech;
* per level, ``candidates()`` alone and the whole ``perturb()`` (the driver's dedup and protected-span filter
  included), as variants per second;
* naive references on the first ``--naive-queries`` queries, per query, with the ratio naive / routerlab:
  character: spans and editable words recomputed for every variant; word: WordNet re-read for every query (no
  process-wide cache, no memo of synonyms or base forms); syntax: every candidate checked with two separate
  passes over its protected spans (content bag, then ``keeps_protected``) and two-rule candidates always built.
  Each naive reference must keep exactly the variants routerlab keeps (checked).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from routerlab.perturb import _code as code_module
from routerlab.perturb import perturb
from routerlab.perturb import spans as spans_module
from routerlab.perturb import word as word_module
from routerlab.perturb.base import keep_variants, level_class, level_rng
from routerlab.perturb.character import edit_word, editable_words, n_edits
from routerlab.perturb.spans import keeps_protected
from routerlab.perturb.syntax import content_bag, rule_outputs
from routerlab.perturb.word import draw_variant, edit_options
from routerlab.perturb.wordnet import WordNet, load, wordnet_dir

LEVELS = ("character", "word", "syntax")


def read_queries(limit: int | None) -> tuple[list[str], list[str]]:
    root = Path(os.environ.get("ROUTERLAB_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
    path = root / "llmrouter" / "data" / "example_data" / "query_data" / "default_query_test.jsonl"
    if not path.is_file():
        sys.exit(f"queries not found: {path} (set ROUTERLAB_SHARED_DATA)")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = rows[:limit] if limit else rows
    return [f"{r['task_name']}-{i}" for i, r in enumerate(rows)], [r["query"] for r in rows]


def forget_memos() -> None:
    """Clear the word level's memos (synonym options, base forms) and the protected spans' (per text, per line) so
    every timed run starts cold; the loaded WordNet itself stays (it is loaded once per process by design)."""
    word_module._synonym_options.cache_clear()
    for tables in load()._tables.values():
        tables.bases.clear()
    spans_module.protected_parts.cache_clear()
    code_module._find_code.cache_clear()
    code_module.line_kind.cache_clear()


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The fastest of ``repeat`` runs of ``fn`` (each with cold memos) and its output."""
    times, out = [], None
    for _ in range(repeat):
        forget_memos()
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


# -- naive references -------------------------------------------------------------------------------------------
def naive_character(texts: Sequence[str], p: int, rngs: Sequence[np.random.Generator]) -> list[list[str]]:
    out = []
    for text, rng in zip(texts, rngs, strict=True):
        cands = []
        if editable_words(text):
            for _ in range(3 * p):
                words = editable_words(text)  # recomputed for every variant
                chosen = sorted(int(i) for i in rng.choice(len(words), size=n_edits(len(words)), replace=False))
                new = text
                for i in reversed(chosen):
                    s, e = words[i]
                    new = new[:s] + edit_word(text[s:e], rng)[0] + new[e:]
                cands.append(new)
        out.append(cands)
    return out


def naive_word(texts: Sequence[str], p: int, rngs: Sequence[np.random.Generator]) -> list[list[str]]:
    out = []
    for text, rng in zip(texts, rngs, strict=True):
        wn = WordNet(wordnet_dir())  # WordNet re-read for this query: no process-wide instance
        word_module._synonym_options.cache_clear()  # and no memo across queries
        options = edit_options(text, wn)
        out.append([draw_variant(text, options, rng)[0] for _ in range(3 * p)] if options else [])
    return out


def naive_syntax(texts: Sequence[str], p: int, rngs: Sequence[np.random.Generator]) -> list[list[str]]:
    out = []
    for text, rng in zip(texts, rngs, strict=True):
        bag, seen = content_bag(text), {text}

        def checked(cands: list[str], bag: Any = bag, seen: set[str] = seen, text: str = text) -> list[str]:
            kept = []
            for c in cands:
                if c not in seen and content_bag(c) == bag and keeps_protected(text, c):
                    seen.add(c)
                    kept.append(c)
            return kept

        singles = checked(rule_outputs(text))
        doubles = checked([two for one in singles for two in rule_outputs(one)])  # always built
        o1, o2 = rng.permutation(len(singles)), rng.permutation(len(doubles))
        out.append([singles[int(i)] for i in o1] + [doubles[int(i)] for i in o2])
    return out


NAIVE = {"character": naive_character, "word": naive_word, "syntax": naive_syntax}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=None, help="first N queries (default: all 706)")
    ap.add_argument("--naive-queries", type=int, default=30, help="queries the naive references run on")
    ap.add_argument("--p", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args()
    ids, texts = read_queries(args.queries)
    results: dict[str, Any] = {"queries": len(texts), "p": args.p}

    load_s, _ = best(lambda: WordNet(wordnet_dir()).preload(), args.repeat)
    results["wordnet_load_s"] = load_s
    print(f"WordNet 3.0 load (4 parts of speech, {wordnet_dir()}): {load_s:.3f} s")
    load().preload()

    print(f"\n{len(texts)} queries, p = {args.p}; naive references on the first {args.naive_queries}")
    print(f"{'level':<10} {'cand s':>8} {'perturb s':>10} {'variants/s':>11} {'full share':>11} "
          f"{'naive s/q':>10} {'ours s/q':>9} {'ratio':>7}")
    sub_ids, sub_texts = ids[:args.naive_queries], texts[:args.naive_queries]
    for level in LEVELS:
        perturber = level_class(level)()
        cand_s, _ = best(lambda lv=level, pt=perturber: pt.candidates(
            texts, args.p, [level_rng(0, q, lv) for q in ids]), args.repeat)
        run_s, ps = best(lambda lv=level: perturb(ids, texts, [lv], args.p, seed=0), args.repeat)
        counts: dict[str, int] = {}
        for v in ps.variants:
            counts[v.query_id] = counts.get(v.query_id, 0) + 1
        full = sum(n == args.p for n in counts.values()) / len(ids)

        ours_s, ours = best(lambda lv=level, pt=perturber: pt.candidates(
            sub_texts, args.p, [level_rng(0, q, lv) for q in sub_ids]), args.repeat)
        naive_s, naive = best(lambda lv=level: NAIVE[lv](
            sub_texts, args.p, [level_rng(0, q, lv) for q in sub_ids]), 1)
        for t, a, b in zip(sub_texts, ours, naive, strict=True):
            if keep_variants(t, a, args.p) != keep_variants(t, b, args.p):
                sys.exit(f"{level}: the naive reference keeps other variants than routerlab for {t[:60]!r}")
        per_q_naive, per_q_ours = naive_s / len(sub_texts), ours_s / len(sub_texts)
        results[level] = {"candidates_s": cand_s, "perturb_s": run_s, "variants": len(ps.variants),
                          "variants_per_s": len(ps.variants) / run_s, "full_share": full,
                          "naive_s_per_query": per_q_naive, "ours_s_per_query": per_q_ours,
                          "ratio": per_q_naive / per_q_ours}
        print(f"{level:<10} {cand_s:>8.2f} {run_s:>10.2f} {len(ps.variants) / run_s:>11.0f} {full:>11.1%} "
              f"{per_q_naive:>10.4f} {per_q_ours:>9.4f} {per_q_naive / per_q_ours:>6.1f}x")
    lengths = [len(t) for t in texts]
    print(f"\nquery length: median {statistics.median(lengths):.0f} chars, max {max(lengths)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
