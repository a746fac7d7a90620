"""Routing robustness on real data (SPEC 3; hse paper sec. 5): the two experiments of the robustness issue.

Run:
  .venv/bin/python benchmarks/bench_robustness.py real TABLE_DIR [--p 5] [--routers ...]
  .venv/bin/python benchmarks/bench_robustness.py local COLLECTED_TABLE [--n 60] [--p 2] [--ask 4]

``real``: a real table (e.g. LLMRouter's, made by ``routerlab import routerdc ...``) at the offline levels
(character, word, syntax): rho by level with 95% intervals for random, best-single, knn, linear and mlp, and the
anchors (a fixed router gives exactly 1, uniform random 1/N within sampling error). Also times perturbation and the
protocol against a naive reference in the same run: every variant routed by its own scoring call instead of one
batch (knn, the first 100 test queries).

``local``: a real local society, the table written by ``benchmarks/bench_collect.py`` (SmolLM2-135M and
Qwen2.5-Coder-1.5B answering LLMRouter's multiple-choice questions by option-letter logits). ``--n`` short test
questions (``bench_robustness_select.local_split``) are perturbed at all five levels: offline levels locally,
paraphrase and rambling written by Qwen (``--ask`` rewrites per call, the paper asks 10). Both actors are re-run on
every variant (``collect`` on the variants, the invariance check for real), and knn, the ``prompted`` router (Qwen,
option-letter log-probabilities, few-shot exemplars of the training part; plain and with ``calibrate=true``) and
random are compared. Every LLM call
goes through the on-disk call cache, so a rerun (or a larger ``--n``, whose sample contains the smaller one) asks
only what is new. Prints each stage's wall time.
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

from routerlab.reports.files import write_json

sys.path.insert(0, str(Path(__file__).resolve().parent))

OFFLINE = ["character", "word", "syntax"]


def fmt(value: float | None, ci: list[float] | tuple[float, float] | None = None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if ci is None or ci[0] is None:
        return f"{value:.3f}"
    return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def print_results(record: dict[str, Any], levels: list[str]) -> None:
    """One line per router: accuracy, rho, rho per level (with intervals), and the invariance where tested."""
    for r in record["results"]:
        by = r["rho_by_level"]
        byci = r.get("rho_by_level_ci", {})
        print(f"  {r['router']:<28} acc {fmt(r['accuracy'], r['accuracy_ci'])}  rho {fmt(r['rho'], r['rho_ci'])}"
              f"  selection {json.dumps({a: round(v, 3) for a, v in r['selection'].items()})}"
              + ("  COLLAPSED" if r["collapsed"] else ""))
        print("      " + "  ".join(f"{lv} {fmt(by.get(lv), byci.get(lv))}" for lv in levels if lv in by))
        if r.get("perturbed_accuracy") is not None:
            print(f"      perturbed accuracy {fmt(r['perturbed_accuracy'], r['perturbed_accuracy_ci'])}")
        inv = r.get("invariance", {})
        if inv.get("tested"):
            for lv, v in inv.get("by_level", {}).items():
                changed = fmt(v["changed_share"], v.get("changed_share_ci"))
                print(f"      invariance {lv:<10} known {v['n_known']:>4}  changed {changed}"
                      f" (argmax {fmt(v.get('changed_share_argmax'))})  rho all {fmt(v['rho_all'])}  "
                      f"rho invariant {fmt(v['rho_invariant'], v.get('rho_invariant_ci'))}")
        if r.get("diagnostics"):
            print(f"      diagnostics {json.dumps(r['diagnostics'])[:300]}")


def run_real(args: argparse.Namespace) -> None:
    import routerlab
    from routerlab.data.splits import make_split
    from routerlab.features import get_encoder
    from routerlab.features.base import Features
    from routerlab.perturb import perturb
    from routerlab.protocols.robustness import robustness
    from routerlab.routers.base import get_router

    table = routerlab.load(args.table)
    sp = make_split(table, "given", 0)
    train, test = sp.apply(table)
    print(f"table {table.name}: {table.n_queries} queries x {table.n_actors} actors; test {test.n_queries}; "
          f"levels {OFFLINE}, p = {args.p}, seed {args.seed}")
    t0 = time.perf_counter()
    ps = perturb([str(q) for q in test.queries.ids], [str(t) for t in test.queries.text], OFFLINE, args.p,
                 seed=args.seed)
    t_perturb = time.perf_counter() - t0
    print(f"perturb: {len(ps)} variants of {test.n_queries} queries in {t_perturb:.1f} s "
          f"({len(ps) / t_perturb:.0f} variants/s); stats {json.dumps(ps.stats)}")
    routers = args.routers.split(",")
    t0 = time.perf_counter()
    result = robustness(table, routers, ps, split="given", seed=args.seed, n_boot=args.n_boot)
    print(f"robustness protocol ({len(routers)} routers, fit + route originals and variants + bootstrap): "
          f"{time.perf_counter() - t0:.1f} s")
    record = result.to_dict()
    print_results(record, OFFLINE)
    n_actors = table.n_actors
    for r in record["results"]:
        if r["router"] == "random":
            lo, hi = r["rho_ci"]
            print(f"  anchor: uniform random rho {r['rho']:.4f}, 1/N = {1 / n_actors:.4f}, "
                  f"inside its 95% interval: {lo <= 1 / n_actors <= hi}")
        if r["router"] == "best-single":
            print(f"  anchor: best-single rho = {r['rho']!r} (must be exactly 1)")

    # Reference: the batched scoring pass against one scoring call per variant (knn, first 100 test queries).
    enc = get_encoder("tfidf").fit([str(t) for t in train.queries.text])
    knn = get_router("knn").fit(train, Features(enc.transform([str(t) for t in train.queries.text]), train, "tfidf"))
    keep = {str(q) for q in test.queries.ids[:100]}
    sub = [v for v in ps.variants if v.query_id in keep]
    texts = [v.text for v in sub]
    q = test.queries.take(np.zeros(len(sub), dtype=np.intp))
    t0 = time.perf_counter()
    batched = knn.choose(Features.of(enc.transform(texts), q, test.actors, "tfidf"))
    t_batch = time.perf_counter() - t0
    one = q.take(np.zeros(1, dtype=np.intp))
    t0 = time.perf_counter()
    single = np.array([int(knn.choose(Features.of(enc.transform([t]), one, test.actors, "tfidf"))[0])
                       for t in texts])
    t_single = time.perf_counter() - t0
    print(f"reference: {len(sub)} variants routed by knn in one batch {t_batch:.3f} s vs one call each "
          f"{t_single:.3f} s ({t_single / max(t_batch, 1e-9):.1f}x); same choices: {bool((batched == single).all())}")
    if args.out:
        write_json(Path(args.out), record)


def run_local(args: argparse.Namespace) -> None:
    import routerlab
    from bench_robustness_select import local_split
    from routerlab.llm import load_backend
    from routerlab.llm.base import parse_backend_spec
    from routerlab.llm.collect import collect
    from routerlab.llm.questions import load_questions, variant_questions
    from routerlab.perturb import LEVELS, perturb, write_variants
    from routerlab.protocols.robustness import robustness

    stages: dict[str, float] = {}
    table = routerlab.load(args.table)
    train_rows, test_rows = local_split(table, args.n, seed=args.seed)
    split = np.full(table.n_queries, "held-out", dtype=object)  # the pool beyond the first n: neither side
    split[train_rows] = "train"
    split[test_rows] = "test"
    table = table.with_split(split)
    test = table.select_split("test")
    print(f"local society {table.actor_names} on {table.name}: {train_rows.size} train, {test_rows.size} test "
          f"questions; accuracy on test: " + ", ".join(
              f"{a} {float(np.nanmean(test.score[:, j])):.3f}" for j, a in enumerate(table.actor_names)))
    t0 = time.perf_counter()
    gen = load_backend(parse_backend_spec(args.generator))
    stages["load generator"] = time.perf_counter() - t0
    ids = [str(q) for q in test.queries.ids]
    texts = [str(t) for t in test.queries.text]
    t0 = time.perf_counter()
    ps = perturb(ids, texts, list(LEVELS), args.p, seed=args.seed, backend=gen,
                 options={"paraphrase": {"ask": args.ask}, "rambling": {"ask": args.ask}})
    stages["perturb (5 levels)"] = time.perf_counter() - t0
    print(f"variants: {len(ps)}; stats {json.dumps(ps.stats)}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        write_variants(Path(args.out) / "variants.jsonl", ps.variants)

    # Outcomes of the variants: both actors re-run on every variant (the original options and gold answer).
    questions = load_questions(table)
    vq = variant_questions(questions, ps, source="variants")
    actors: list[tuple[str, Any]] = []
    for spec_text in args.actors.split("+"):
        name, _, rest = spec_text.partition("=")
        actors.append((name, gen if rest == args.generator else load_backend(parse_backend_spec(rest))))
    t0 = time.perf_counter()
    outcomes = collect(vq, actors, mode="logits", logits_batch_size=1, timing_probes=0, name="variants",
                       query_meta={"variant_of": [v.query_id for v in ps.variants],
                                   "level": [v.level for v in ps.variants],
                                   "variant": [v.variant for v in ps.variants]})
    stages["collect outcomes of variants"] = time.perf_counter() - t0
    print("actor accuracy on variants: " + ", ".join(
        f"{a} {float(np.nanmean(outcomes.score[:, j])):.3f}" for j, a in enumerate(outcomes.actor_names)))

    routers = ["random", "best-single", "knn", "knn:k=10", "prompted:mode=logits",
               "prompted:mode=logits,calibrate=true"]
    t0 = time.perf_counter()
    result = robustness(table, routers, ps, split="given", seed=args.seed, n_boot=args.n_boot, outcomes=outcomes,
                        backend=gen)
    stages["robustness protocol (incl. prompted router calls)"] = time.perf_counter() - t0
    record = result.to_dict()
    print_results(record, list(LEVELS))
    for stage, seconds in stages.items():
        print(f"  time: {stage}: {seconds:.0f} s")
    if args.out:
        write_json(Path(args.out) / "robustness.json", record)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=["real", "local"])
    ap.add_argument("table", type=Path)
    ap.add_argument("--p", type=int, default=None, help="variants per level (real: 5, local: 2)")
    ap.add_argument("--n", type=int, default=60, help="local: test questions")
    ap.add_argument("--ask", type=int, default=4, help="local: rewrites asked per LLM call (the paper: 10)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--routers", default="random,best-single,knn,linear,mlp")
    ap.add_argument("--generator", default="local:qwen2.5-coder-1.5b,threads=1")
    ap.add_argument("--actors", default="smol=local:smollm2-135m,threads=1+qwen=local:qwen2.5-coder-1.5b,threads=1",
                    help="local: NAME=SPEC joined by '+', named as in the table")
    ap.add_argument("--out", default=None, help="real: a JSON file; local: a directory")
    args = ap.parse_args()
    if args.p is None:
        args.p = 5 if args.part == "real" else 2
    (run_real if args.part == "real" else run_local)(args)


if __name__ == "__main__":
    main()
