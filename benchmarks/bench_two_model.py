"""The two-model experiment (issue 12, SPEC 6): a real small model, its own signals, and every two-model router.

    python benchmarks/bench_two_model.py  # Qwen2.5-Coder-1.5B vs gemini-1.5-pro-002, 3,200 questions
    python benchmarks/bench_two_model.py --n 60 --small local:smollm2-135m,threads=1 --boot 200   # a quick look

1. Questions: a seeded sample of MMLU-Pro (../shared/data), stratified by category, among the questions the large
   model answered; taken in stratified order, so an interrupted extraction still left a stratified prefix.
2. ``extract``: the small model's per-layer mean-pooled hidden states, option logits, self-ask and sampled answers
   (resumes from ``--signals``; the call cache it fills makes step 3 free).
3. ``collect --mode logits``: the small model's answers graded against the gold letter (its score column).
4. ``join`` by question id with the large model's MMLU-Pro column (never by position).
5. ``run_two_model``: train on the in-domain categories' train part (``--split``), evaluate on each in-domain
   category's test part and on every question of the out-of-domain categories; AUROC, LPM, MPM, HCR, AUC, APGR with
   95% bootstrap intervals; the routerxbench Tables 1-2 layout is printed and written with the curves to ``-o``.
Also printed: extraction speed (questions/s of the fresh rows, from the signals manifest) and the Dirichlet probe's
learned layer weights on the same training split.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
ID_DEFAULT = "biology,business,chemistry,computer science,economics,engineering,health,math,physics"
OOD_DEFAULT = "history,law,other,philosophy,psychology"
ROUTERS_DEFAULT = ("oracle,random,best-single,max-logit,entropy,margin,self-ask,semantic-entropy,knn,embedding-mlp,"
                   "probe-final,probe-mean,probe-dirichlet,probe-mean:lr=0.001,probe-dirichlet:lr=0.001")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3200, help="questions (a stratified prefix)")
    ap.add_argument("--small", default="local:qwen2.5-coder-1.5b,threads=2", help="the small model (local spec)")
    ap.add_argument("--small-name", default=None, help="its actor name (default: the model name)")
    ap.add_argument("--large", default="gemini-1.5-pro-002", help="the large model: an MMLU-Pro actor")
    ap.add_argument("--signals", type=Path, default=Path("two-model-signals"), help="extract directory (resumes)")
    ap.add_argument("--id", default=ID_DEFAULT)
    ap.add_argument("--ood", default=OOD_DEFAULT)
    ap.add_argument("--split", default="random:0.3")
    ap.add_argument("--routers", default=ROUTERS_DEFAULT)
    ap.add_argument("--encoder", default="minilm", help="query encoder of the zoo routers and embedding-mlp")
    ap.add_argument("--boot", type=int, default=1000)
    ap.add_argument("--compare-to", default="max-logit", help="reference router of the paired differences")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--samples", type=int, default=10, help="sampled answers per question (semantic entropy)")
    ap.add_argument("-o", "--out", type=Path, default=None)
    args = ap.parse_args()

    import routerlab
    from routerlab.data.join import join
    from routerlab.llm.base import load_backend, parse_backend_spec
    from routerlab.llm.cache import CallCache
    from routerlab.llm.collect import collect
    from routerlab.llm.extract import ExtractSettings, extract
    from routerlab.llm.questions import questions_from_table, stratified_order
    from routerlab.protocols.two_model import run_two_model
    from routerlab.reports.two_model_report import markdown_tables, plot_call_rate_curves

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mmlu = routerlab.read("mmlu-pro", DATA / "mmlu-pro-outputs" / "eval_results")
    if args.large not in mmlu.actor_names:
        print(f"--large must be one of {', '.join(mmlu.actor_names)}", file=sys.stderr)
        return 2
    observed = ~np.isnan(mmlu.score[:, mmlu.actor_names.index(args.large)])
    pool = [q for q, ok in zip(questions_from_table(mmlu, {}), observed, strict=True) if ok]
    order = stratified_order([q.dataset for q in pool], args.seed)[: args.n]
    questions = [pool[i] for i in order.tolist()]

    spec = parse_backend_spec(args.small)
    small_name = args.small_name or spec.model
    backend = load_backend(spec)
    t0 = time.perf_counter()
    report = extract(backend, questions, args.signals, ExtractSettings(samples=args.samples, seed=args.seed),
                     call_cache=CallCache())
    print(f"extract: {report.rows} rows ({report.fresh} fresh, {report.reused} reused) in "
          f"{time.perf_counter() - t0:.1f} s; layers {report.layers}, dim {report.dim}")
    manifest = json.loads((args.signals / "manifest.json").read_text())
    fresh = sum(r["fresh"] for r in manifest["runs"])
    secs = sum(r["seconds"] for r in manifest["runs"] if r["fresh"])
    if fresh:
        print(f"extraction speed over all runs into {args.signals}: {fresh} fresh rows in {secs:.0f} s of compute = "
              f"{fresh / secs:.3f} questions/s (this CPU, load from other jobs included)")

    small_table = collect(questions, [(small_name, backend)], mode="logits", timing_probes=0, progress=False,
                          name="small")
    table = join([small_table, mmlu.select_actors([args.large])], name="two-model", small=small_name,
                 large=args.large)
    print(f"joined by question id: {table.n_queries} questions; small accuracy "
          f"{np.nanmean(table.score[:, 0]):.3f}, large accuracy {np.nanmean(table.score[:, 1]):.3f}")

    ids = [d for d in args.id.split(",") if d]
    ood = [d for d in args.ood.split(",") if d]
    routers = [r for r in args.routers.split(",") if r]
    t1 = time.perf_counter()
    result = run_two_model(table, small_name, args.large, routers, signals=args.signals, id_datasets=ids,
                           ood_datasets=ood, split=args.split, seed=args.seed, encoder=args.encoder,
                           n_boot=args.boot, compare_to=args.compare_to or None)
    doc = result.to_dict()
    print(f"protocol: {time.perf_counter() - t1:.1f} s for {len(routers)} routers")
    print(markdown_tables(doc, metrics=("auroc", "lpm", "hcr", "mpm", "apgr")))
    print(summary(doc))
    if args.compare_to:
        print(paired_summary(doc))
    weights = layer_weights(table, small_name, args, ids)
    if weights is not None:
        print("probe-dirichlet inference layer weights (layer 0 = embeddings):",
              " ".join(f"{w:.3f}" for w in weights))
        doc["probe_dirichlet_layer_weights"] = [float(w) for w in weights]
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(doc, indent=1, allow_nan=True))
        (args.out / "tables.md").write_text(markdown_tables(doc, metrics=("auroc", "lpm", "hcr", "mpm", "apgr"))
                                            + "\n\n" + summary(doc) + "\n\n" + paired_summary(doc) + "\n")
        for path in plot_call_rate_curves(doc, args.out):
            print(f"wrote {path}")
    return 0


def summary(doc: dict[str, Any]) -> str:
    """One line per router: the ID and OOD means of AUROC, LPM and HCR with their intervals, and its fit time."""
    def cell(part: dict[str, Any] | None, metric: str) -> str:
        if not part or part.get(metric) is None:
            return "-"
        ci = part.get(f"{metric}_ci")
        return f"{part[metric]:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")

    head = "| router | AUROC ID | AUROC OOD | LPM ID | LPM OOD | HCR ID | HCR OOD | fit s |"
    lines = [head, "|" + "---|" * 8]
    for r in doc["results"]:
        i, o = r["id_mean"], r["ood_mean"]
        lines.append(f"| {r['router']} | {cell(i, 'auroc')} | {cell(o, 'auroc')} | {cell(i, 'lpm')} | "
                     f"{cell(o, 'lpm')} | {cell(i, 'hcr')} | {cell(o, 'hcr')} | {r.get('fit_seconds', 0):.1f} |")
    return "\n".join(lines)


def paired_summary(doc: dict[str, Any]) -> str:
    """One line per router: its paired AUROC / LPM / HCR difference from the reference, ID and OOD means."""
    def cell(part: dict[str, Any] | None, metric: str) -> str:
        if not part or part.get(f"{metric}_diff") is None:
            return "-"
        lo, hi = part[f"{metric}_diff_ci"]
        return f"{part[f'{metric}_diff']:+.3f} [{lo:+.3f}, {hi:+.3f}]"

    rows = [r for r in doc["results"] if r.get("versus")]
    if not rows:
        return ""
    lines = [f"paired differences from {rows[0]['versus']['reference']} (same resamples):",
             "| router | AUROC ID | AUROC OOD | LPM ID | LPM OOD | HCR ID | HCR OOD |", "|" + "---|" * 7]
    for r in rows:
        v = r["versus"]
        lines.append(f"| {r['router']} | " + " | ".join(cell(v[part], m) for m in ("auroc", "lpm", "hcr")
                                                       for part in ("id_mean", "ood_mean")) + " |")
    return "\n".join(lines)


def layer_weights(table: Any, small_name: str, args: argparse.Namespace, ids: list[str]) -> np.ndarray | None:
    """The Dirichlet probe's inference weights, fitted on the protocol's training split (same split and seed)."""
    import routerlab
    from routerlab.features.base import Features
    from routerlab.features.signals import load_signals
    from routerlab.routers import get_router

    if "probe-dirichlet" not in args.routers.split(","):
        return None
    in_domain = table.select_datasets(ids)
    train, _ = routerlab.data.make_split(in_domain, args.split, seed=args.seed).apply(in_domain)
    ids_train = [str(q) for q in train.queries.ids.tolist()]
    sig = load_signals(args.signals, ids_train, [str(t) for t in train.queries.text.tolist()])
    feats = Features.of(np.zeros((train.n_queries, 1)), train.queries, train.actors, "none").with_signals(sig)
    router = get_router("probe-dirichlet", seed=args.seed).fit(train, feats)
    fn = getattr(router, "layer_weights", None)
    return None if fn is None else np.asarray(fn() if callable(fn) else fn)


if __name__ == "__main__":
    raise SystemExit(main())
