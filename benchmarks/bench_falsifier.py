"""The falsifier of rho's invariance check on a real local society (SPEC 3; hse-paper-review.json; issue: the control
level): do meaning-CHANGING edits change the optimal actor more often than meaning-preserving ones?

Run:
  python benchmarks/bench_falsifier.py --measure 8                       # time each actor on 8 questions first
  python benchmarks/bench_falsifier.py --n 300 -o runs/falsifier         # the experiment (every call cached)

The pipeline, every stage timed and every LLM call through the on-disk call cache (a rerun asks nothing again; a
larger ``--n`` asks only the new questions, its sample contains the smaller one):

1. **Questions.** ``--n`` short multiple-choice questions (under 300 characters) of LLMRouter's ARC-Challenge,
   CommonsenseQA and OpenBookQA, taken round-robin over the three from a seeded order of each
   (``bench_robustness_select``'s rule), read from ../shared/data.
2. **Originals.** Every actor (``--actors``, default SmolLM2-135M and Qwen2.5-Coder-1.5B, one thread each) answers
   every question by option-letter logits: the routing table.
3. **Split.** A seeded random split stratified by dataset, ``--test-share`` of the questions tested.
4. **Variants.** ``--p`` variants per test question at the offline meaning-preserving levels (character, word,
   syntax) and at the control level (meaning-changing: a number changed, the question negated, its key entity
   swapped), seed ``--seed``.
5. **Outcomes.** Every actor answers every variant (the original's options and gold answer, as
   ``routerlab collect --variants`` asks them).
6. **Robustness.** ``--routers`` train on the training part and route the test questions and their variants:
   rho, kappa_rho and the invariance check per level, and the falsifier (the control level's changed share against
   every meaning-preserving level's, with 95% bootstrap intervals and paired differences).

``--measure K`` only times each actor on K questions, calling the model past the call cache (every call fresh), and
prints the number of calls the full run would make and its estimated time; nothing but the models' one-time
conversion (under the cache directory) is written.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

LEVELS = ["character", "word", "syntax", "control"]
DEFAULT_ACTORS = "smol=local:smollm2-135m,threads=1+qwen=local:qwen2.5-coder-1.5b,threads=1"


def pick_rows(table: Any, n: int, seed: int) -> np.ndarray:
    """``n`` short multiple-choice questions of ARC, CommonsenseQA and OpenBookQA, round-robin over the three
    from a seeded order of each (a smaller ``n`` is a prefix of a larger one)."""
    from bench_robustness_select import MAX_CHARS, SHORT_DATASETS

    rng = np.random.default_rng(seed)
    text_len = np.array([len(str(x)) for x in table.queries.text])
    orders = [rng.permutation(np.flatnonzero((table.queries.dataset == ds) & (text_len < MAX_CHARS)))
              for ds in SHORT_DATASETS]
    interleaved = [int(o[i]) for i in range(max(o.size for o in orders)) for o in orders if i < o.size]
    if n > len(interleaved):
        raise SystemExit(f"--n {n}: only {len(interleaved)} short questions")
    return np.sort(np.asarray(interleaved[:n], dtype=np.intp))


def parse_actors(text: str) -> list[tuple[str, Any]]:
    from routerlab.llm.base import parse_backend_spec

    out = []
    for part in text.split("+"):
        name, _, spec = part.partition("=")
        out.append((name, parse_backend_spec(spec)))
    return out


def load_all(actors: list[tuple[str, Any]], cache_dir: Path | None) -> tuple[list[tuple[str, Any]], dict[str, float]]:
    from routerlab.llm import load_backend

    loaded, seconds = [], {}
    for name, spec in actors:
        t0 = time.perf_counter()
        loaded.append((name, load_backend(spec, cache_dir=cache_dir)))
        seconds[name] = time.perf_counter() - t0
        print(f"loaded {name} ({spec.describe()}) in {seconds[name]:.1f} s", flush=True)
    return loaded, seconds


def questions_and_split(args: argparse.Namespace) -> tuple[Any, Any]:
    """(the questions as a QuestionSet, the source sub-table they come from)."""
    from bench_collect import source_table
    from routerlab.llm.questions import load_questions

    source = source_table("llmrouter")
    sub = source.select_queries(pick_rows(source, args.n, args.seed))
    qs = load_questions(sub, kinds=["mc"])
    print(f"questions: {len(qs)} short multiple-choice ({qs.counts()}), skipped {dict(qs.skipped)}", flush=True)
    return qs, sub


def count_variants(qs: Any, args: argparse.Namespace) -> tuple[int, int, dict[str, Any]]:
    """(test questions, variants the run would ask, perturb stats): the split and the offline variants need no
    model, so the size of the full run is known before any call."""
    from routerlab.data.splits import random_split
    from routerlab.data.table import RoutingTable
    from routerlab.perturb import perturb

    ids = [q.id for q in qs]
    shell = RoutingTable.from_arrays(np.zeros((len(ids), 1), dtype=np.float32), actors=["x"], query_ids=ids,
                                     text=[q.text for q in qs], dataset=[q.dataset for q in qs])
    sp = random_split(shell, args.test_share, args.seed)
    test = [int(i) for i in np.sort(sp.test)]
    ps = perturb([ids[i] for i in test], [qs[i].text for i in test], LEVELS, args.p, seed=args.seed)
    return len(test), len(ps), dict(ps.stats)


def measure(args: argparse.Namespace) -> None:
    from routerlab.llm.collect import prompt_messages

    qs, _ = questions_and_split(args)
    n_test, n_var, stats = count_variants(qs, args)
    calls = len(qs) + n_var
    print(f"the full run: {len(qs)} questions ({n_test} tested) + {n_var} variants ({stats}) = {calls} calls per "
          "actor", flush=True)
    sample = list(qs)[: args.measure]
    total = 0.0
    for name, spec in parse_actors(args.actors):  # one model in memory at a time
        loaded, _ = load_all([(name, spec)], args.cache_dir)
        backend = loaded[0][1]
        inner = getattr(backend, "inner", backend)  # the model itself, past the call cache: every call is fresh
        times = []
        for q in sample:
            t0 = time.perf_counter()
            inner.choice_scores(prompt_messages(q), tuple(q.letters))
            times.append(time.perf_counter() - t0)
        backend.close()
        per_q = float(np.median(times))
        est = calls * per_q
        total += est
        print(f"{name}: {len(times)} questions, median {per_q:.2f} s/question (min {min(times):.2f}, max "
              f"{max(times):.2f}); the full run's {calls} calls: about {est / 60:.1f} min", flush=True)
    print(f"estimated full run (actors one after the other; loading and the protocol excluded): about "
          f"{total / 60:.1f} min")


def run(args: argparse.Namespace) -> None:
    from routerlab.data.splits import random_split
    from routerlab.llm.collect import collect
    from routerlab.llm.questions import variant_questions
    from routerlab.perturb import perturb, write_variants
    from routerlab.protocols.robustness import robustness
    from routerlab.reports.files import json_safe, write_json
    from routerlab.reports.robustness_report import robustness_text

    stages: dict[str, float] = {}
    out = Path(args.output) if args.output else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    qs, _ = questions_and_split(args)
    loaded, load_s = load_all(parse_actors(args.actors), args.cache_dir)
    stages.update({f"load {k}": v for k, v in load_s.items()})
    try:
        t0 = time.perf_counter()
        table = collect(list(qs), loaded, mode="logits", timing_probes=0, name="falsifier",
                        provenance={"source": "llmrouter short mc", "n": args.n, "seed": args.seed})
        stages["answer the originals"] = time.perf_counter() - t0
        sp = random_split(table, args.test_share, args.seed)
        test = table.select_queries(np.sort(sp.test))
        t0 = time.perf_counter()
        ps = perturb([str(q) for q in test.queries.ids], [str(t) for t in test.queries.text], LEVELS, args.p,
                     seed=args.seed)
        stages["perturb"] = time.perf_counter() - t0
        print(f"split: {sp.train.size} train, {sp.test.size} test; variants {len(ps)}: {json.dumps(ps.stats)}",
              flush=True)
        t0 = time.perf_counter()
        outcomes = collect(variant_questions(qs, ps, source="variants"), loaded, mode="logits", timing_probes=0,
                           name="falsifier-variants",
                           query_meta={"variant_of": [v.query_id for v in ps.variants],
                                       "level": [v.level for v in ps.variants],
                                       "variant": [v.variant for v in ps.variants]})
        stages["answer the variants"] = time.perf_counter() - t0
    finally:
        for _, backend in loaded:
            backend.close()
    print("accuracy on the originals: " + ", ".join(
        f"{a} {float(np.nanmean(table.score[:, j])):.3f}" for j, a in enumerate(table.actor_names))
        + "; on the variants: " + ", ".join(
        f"{a} {float(np.nanmean(outcomes.score[:, j])):.3f}" for j, a in enumerate(outcomes.actor_names)))
    t0 = time.perf_counter()
    rob = robustness(table, args.routers.split(","), ps, split=sp, seed=args.seed, n_boot=args.n_boot,
                     outcomes=outcomes)
    stages["robustness protocol"] = time.perf_counter() - t0
    print(robustness_text(rob))
    for r in rob.results:
        k = r.kappa
        if k is not None:
            print(f"  {r.spec:<12} kappa_rho by level " + "  ".join(
                f"{lv} {v:.3f}" if not math.isnan(v) else f"{lv} -" for lv, v in k.by_level.items()))
    for stage, seconds in stages.items():
        print(f"time: {stage}: {seconds:.0f} s")
    if out is not None:
        table.save(out / "originals")
        outcomes.save(out / "variants-outcomes")
        write_variants(out / "variants.jsonl", ps.variants)
        write_json(out / "robustness.json", {**json_safe(rob.to_dict()), "stages_s": stages})
        print(f"wrote {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="questions (half train, half test by default)")
    ap.add_argument("--test-share", type=float, default=0.5, help="share of the questions tested")
    ap.add_argument("--p", type=int, default=1, help="variants per test question per level")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--routers", default="random,best-single,knn,linear")
    ap.add_argument("--actors", default=DEFAULT_ACTORS, help="NAME=KIND:MODEL[,opts] joined by '+'")
    ap.add_argument("--cache-dir", type=Path, default=None, help="call cache (default: the user's llm cache)")
    ap.add_argument("--measure", type=int, default=0, help="only time each actor on this many questions")
    ap.add_argument("-o", "--output", default=None, help="a directory for the tables, variants and JSON")
    args = ap.parse_args()
    (measure if args.measure else run)(args)


if __name__ == "__main__":
    main()
