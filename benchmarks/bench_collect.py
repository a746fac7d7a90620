"""A real local routing table: the built-in PyPI models on multiple-choice questions from ../shared/data.

    python benchmarks/bench_collect.py                       # SmolLM2 and Qwen on 1,000 LLMRouter MC questions
    python benchmarks/bench_collect.py --models smol=local:smollm2-135m --n 200
    python benchmarks/bench_collect.py --extra mine=local:/models/x.gguf -o tables/local-mc

Questions: a seeded sample stratified by dataset of the multiple-choice questions in LLMRouter's query files
(ARC-Challenge, OpenBookQA, MMLU, CommonsenseQA, GPQA, logic grids: ``--source llmrouter``, the default) or
MMLU-Pro (up to ten options, ``--source mmlu-pro``). Every model answers by option-letter logits (one forward
pass per question, batched), through the on-disk call cache: an interrupted run resumes, a rerun is free.

Printed per model: accuracy with a 95% Wilson interval (and per dataset), questions/s of the fresh calls
of this run (and the median measured latency per question), the TTFT/ITL of short greedy replies (the
collect timing probes), and the naive reference measured in the same run: the same 50 questions scored one
at a time (no batching, no cache) against batches of ``--batch-size``, with the largest difference between
the two sets of logits (batching pads prompts; the answers must not change).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
DEFAULT_MODELS = "smol=local:smollm2-135m,qwen=local:qwen2.5-coder-1.5b"


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k/n."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def source_table(source: str):  # type: ignore[no-untyped-def]
    import routerlab

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if source == "mmlu-pro":
            return routerlab.read("mmlu-pro", DATA / "mmlu-pro-outputs" / "eval_results")
        base = DATA / "llmrouter" / "data"
        return routerlab.read(
            "routerdc", base / "dcrouter_preprocessed" / "train.json", base / "dcrouter_preprocessed" / "test.json",
            base / "example_data" / "query_data" / "default_query_train.jsonl",
            base / "example_data" / "query_data" / "default_query_test.jsonl")


def reference(backend, questions, batch_size: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Unbatched vs batched choice scoring of the same questions on the uncached model."""
    from routerlab.llm.collect import batches, prompt_messages

    inner = getattr(backend, "inner", backend)
    t0 = time.perf_counter()
    single = {q.id: inner.choice_scores(prompt_messages(q), tuple(q.letters)).logits for q in questions}
    t_single = time.perf_counter() - t0
    t0 = time.perf_counter()
    batched = {}
    for letters, rows in batches(questions, True, batch_size):  # as collect batches them
        out = inner.choice_scores_batch([prompt_messages(questions[i]) for i in rows], tuple(letters or ""))
        batched.update({questions[i].id: sc.logits for i, sc in zip(rows, out, strict=True)})
    t_batched = time.perf_counter() - t0
    diff = max(float(np.max(np.abs(np.array(single[k]) - np.array(batched[k])))) for k in single)
    same = sum(int(np.argmax(single[k]) == np.argmax(batched[k])) for k in single)
    return {"n": len(questions), "unbatched_s": t_single, "batched_s": t_batched,
            "speedup": t_single / t_batched, "max_logit_diff": diff, "same_answer": same}


def merge_actors(tables):  # type: ignore[no-untyped-def]
    """One table from per-model tables of the same questions: actors side by side, their per-answer metadata
    (pred/logits/output columns) and run records joined."""
    from dataclasses import replace

    from routerlab.data.table import ACTOR_NUMERIC_FIELDS, Actors, RoutingTable

    base = tables[0]
    if len(tables) == 1:
        return base
    extra = dict(base.queries.extra)
    for t in tables[1:]:
        assert list(t.queries.ids) == list(base.queries.ids)
        extra.update({k: v for k, v in t.queries.extra.items() if k.split(".")[0] in ("pred", "logits", "output")})
    actors = Actors.create([a for t in tables for a in t.actor_names],
                           **{f: np.concatenate([getattr(t.actors, f) for t in tables]) for f in ACTOR_NUMERIC_FIELDS},
                           extra={k: np.concatenate([t.actors.extra[k] for t in tables]) for k in ("spec", "mode")})
    runs = {a: r for t in tables for a, r in t.meta["collect"]["actors"].items()}
    mats = {m: np.concatenate([getattr(t, m) for t in tables], axis=1)
            for m in ("score", "tokens_in", "tokens_out", "latency_s")}
    return RoutingTable(queries=replace(base.queries, extra=extra), actors=actors, name=base.name,
                        meta={**base.meta, "collect": {**base.meta["collect"], "actors": runs}}, **mats)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=DEFAULT_MODELS, help=f"actor specs (default {DEFAULT_MODELS})")
    ap.add_argument("--extra", action="append", default=[], help="another local model, NAME=local:PATH (repeatable)")
    ap.add_argument("--source", choices=("llmrouter", "mmlu-pro"), default="llmrouter")
    ap.add_argument("--n", type=int, default=1000, help="questions (a seeded stratified sample)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--reference", type=int, default=50, help="questions of the unbatched-vs-batched reference")
    ap.add_argument("--probes", type=int, default=8, help="short greedy replies that time TTFT/ITL")
    ap.add_argument("--cache-dir", type=Path, default=None, help="call cache (default: the user's llm cache)")
    ap.add_argument("-o", "--output", type=Path, default=None, help="write the collected table here")
    args = ap.parse_args()

    from routerlab.llm.base import load_backend, parse_actor_list
    from routerlab.llm.collect import collect
    from routerlab.llm.questions import load_questions

    actors = parse_actor_list(",".join([args.models, *args.extra]))
    t0 = time.perf_counter()
    questions = load_questions(source_table(args.source), limit=args.n, seed=args.seed, kinds=["mc"])
    print(f"questions: {len(questions)} multiple-choice of {questions.n_available} ({args.source}, seed {args.seed}),"
          f" read in {time.perf_counter() - t0:.1f} s; per dataset {questions.counts()}", flush=True)
    tables = []
    for name, spec in actors:
        t0 = time.perf_counter()
        backend = load_backend(spec, cache_dir=args.cache_dir)
        load_s = time.perf_counter() - t0
        print(f"\n== {name} ({spec.describe()}): loaded in {load_s:.1f} s", flush=True)
        try:
            ref = reference(backend, list(questions)[: args.reference], args.batch_size) if args.reference else None
            table = collect(questions, [(name, backend)], mode="logits", batch_size=args.batch_size,
                            logits_batch_size=args.batch_size,
                            timing_probes=args.probes, name=f"local-{args.source}",
                            provenance={"source": args.source, "seed": args.seed, "limit": args.n})
        finally:
            backend.close()
        tables.append(table)
        run = table.meta["collect"]["actors"][name]
        score = table.score[:, 0]
        k, n = int(np.nansum(score)), int(np.count_nonzero(~np.isnan(score)))
        lo, hi = wilson(k, n)
        lat = table.latency_s[:, 0] if table.latency_s is not None else np.array([math.nan])
        print(f"accuracy {k / n:.3f} ({k}/{n}), 95% CI [{lo:.3f}, {hi:.3f}]")
        for ds in sorted(set(table.queries.dataset.tolist())):
            rows = table.queries.dataset == ds
            print(f"  {ds:22s} {float(np.nanmean(score[rows])):.3f}  (n={int(rows.sum())})")
        fresh = run["fresh_calls"]
        print(f"this run: {fresh} fresh calls, {run['cached_calls']} from the cache, {run['wall_s']:.1f} s"
              + (f" -> {fresh / run['wall_s']:.2f} questions/s fresh" if fresh and run["wall_s"] > 0 else ""))
        print(f"measured latency per question (as first measured, cache included): median "
              f"{float(np.nanmedian(lat)):.3f} s, mean {float(np.nanmean(lat)):.3f} s "
              f"-> {1 / float(np.nanmean(lat)):.2f} questions/s")
        print(f"TTFT {table.actors.ttft_ms[0]:.0f} ms, ITL {table.actors.itl_ms[0]:.1f} ms "
              f"(medians of {run['timing_probes']} greedy replies of <= 16 tokens)")
        if ref is not None:
            print(f"reference on {ref['n']} questions: unbatched {ref['unbatched_s']:.1f} s, batched "
                  f"({args.batch_size}) {ref['batched_s']:.1f} s -> {ref['speedup']:.2f}x; max |logit diff| "
                  f"{ref['max_logit_diff']:.2e}, same answer {ref['same_answer']}/{ref['n']}", flush=True)
    if args.output is not None and tables:
        merged = merge_actors(tables)
        merged.save(args.output)
        print(f"\nwrote {args.output}: {merged.n_queries} questions x {merged.n_actors} models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
