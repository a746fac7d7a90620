"""How well ``routerlab choose`` keeps its promises over many seeds (issue 23; docs/choose.md).

Run: ``python benchmarks/bench_choose.py [--seeds 20] [--tables routerbench,mmlu-pro,...] [--json]``.

For each case (a table, a constraint and, for a call rate, a weak/strong pair) the script runs the ``choose``
protocol with seeds 0..S-1 (a seeded random 80/20 split, a development part of the training side, routers
knn, linear and best-single) and prints, over the seeds:

- call rate: the realized call rate's distance from the target (mean, max; the share within 0.03, goal: all) and
  the sd a perfect fixed threshold would have, sqrt(p (1 - p) (1/n_dev + 1/n_test));
- cost / latency budgets: the share of seeds whose realized mean cost (latency) on test is within the budget;
- every case: the share of seeds whose realized mu_o lies in the 95% prediction interval (goal: >= 90%), its
  mean width, and the mean of (realized - predicted) (the bias left after the selection correction).

The tables are read from ../shared/data (or $ROUTERLAB_SHARED_DATA).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

SHARED = Path(os.environ.get("ROUTERLAB_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
ROUTERS = ["knn", "linear", "best-single"]
TOL = 0.03


def load(name: str) -> Any:
    from routerlab import read
    from routerlab.datasets import demo

    if name == "demo":
        return demo()
    base = SHARED / "llmrouter" / "data"
    sources: dict[str, tuple[str, list[Path]]] = {
        "llmrouter": ("routerdc", [base / "dcrouter_preprocessed" / "train.json",
                                   base / "dcrouter_preprocessed" / "test.json",
                                   base / "example_data" / "query_data" / "default_query_train.jsonl",
                                   base / "example_data" / "query_data" / "default_query_test.jsonl",
                                   base / "example_data" / "llm_candidates" / "default_llm.json"]),
        "routerbench": ("routerbench", [SHARED / "routerbench-routerdc" / "datasets" / "routerbench_zs"]),
        "routeprofile": ("routeprofile", [SHARED / "routeprofile" / "route_data" / "routing_test_data.json"]),
        "mmlu-pro": ("mmlu-pro", [SHARED / "mmlu-pro-outputs" / "eval_results"]),
    }
    fmt, paths = sources[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read(fmt, *paths)


CASES: list[tuple[str, dict[str, Any]]] = [
    # (table, settings); the pairs: a clearly weaker small model and a stronger large one of each table. Cheap
    # tables first, so that a slow machine still prints them early.
    ("routeprofile", {"call_rate": 0.3, "small": "llama-3.2-3b-instruct", "large": "llama-3.3-70b-instruct"}),
    ("routeprofile", {"max_cost": 0.0001}),
    ("routerbench", {"call_rate": 0.3, "small": "mistralai/mistral-7b-chat", "large": "gpt-4-1106-preview"}),
    ("routerbench", {"max_cost": 0.001}),
    ("routerbench", {"min_quality": 0.8}),
    ("demo", {"max_latency": 3.0}),
    ("llmrouter", {"call_rate": 0.3, "small": "qwen2.5-7b-instruct", "large": "llama-3.1-nemotron-51b-instruct"}),
    ("mmlu-pro", {"call_rate": 0.3, "small": "Meta-Llama-3_1-8B-Instruct", "large": "Meta-Llama-3_1-70B-Instruct"}),
    ("mmlu-pro", {"call_rate": 0.3, "small": "Mistral-7B-Instruct-v0.2", "large": "gemini-1.5-pro-002",
                  "dev": 0.5}),
]


def run_case(table: Any, settings: dict[str, Any], seeds: int) -> dict[str, Any]:
    from routerlab.protocols.base import run_protocol
    from routerlab.protocols.choose import ChooseWarning

    rows = []
    for seed in range(seeds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ChooseWarning)
            r = run_protocol("choose", table, {"split": "random:0.2", **settings}, seed=seed, routers=ROUTERS).native
        if r.choice is None:
            rows.append({"seed": seed, "choice": None})
            continue
        p, z = r.predicted, r.realized
        row = {"seed": seed, "router": r.choice["router"], "n_dev": r.n_dev, "n_test": r.n_test,
               "predicted": p["quality"], "ci": p["quality_ci"], "realized": z["quality"], "inside": r.inside}
        if "call_rate" in settings:
            row["gap"] = z["call_rate"] - settings["call_rate"]
            row["gap_unpaced"] = z["call_rate_unpaced"] - settings["call_rate"]
            row["sd"] = r.call_rate_noise["sd"] if r.call_rate_noise else math.nan
        for key, measure in (("max_cost", "cost"), ("max_latency", "latency")):
            if key in settings:
                row["within_budget"] = bool(z[measure] <= settings[key])
                row["over_by"] = z[measure] - settings[key]
        rows.append(row)
    ok = [x for x in rows if x.get("choice", True) is not None]
    out: dict[str, Any] = {"seeds": seeds, "chosen": len(ok), "rows": rows}
    if ok:
        covered = [x["inside"] for x in ok if x["inside"] is not None]
        out["coverage"] = float(np.mean(covered)) if covered else math.nan
        out["mean_width"] = float(np.mean([x["ci"][1] - x["ci"][0] for x in ok if x["ci"] is not None]))
        out["mean_error"] = float(np.mean([x["realized"] - x["predicted"] for x in ok]))
        out["n_dev"], out["n_test"] = ok[0]["n_dev"], ok[0]["n_test"]
        out["routers_chosen"] = {r: sum(x["router"] == r for x in ok) for r in dict.fromkeys(x["router"] for x in ok)}
        if "call_rate" in settings:
            gaps = np.abs([x["gap"] for x in ok])
            bare = np.abs([x["gap_unpaced"] for x in ok])
            out.update(gap_mean=float(gaps.mean()), gap_max=float(gaps.max()),
                       within=float(np.mean(gaps <= TOL + 1e-12)), sd=float(np.mean([x["sd"] for x in ok])),
                       bare_gap_mean=float(bare.mean()), bare_gap_max=float(bare.max()),
                       bare_within=float(np.mean(bare <= TOL + 1e-12)))
        if any("within_budget" in x for x in ok):
            out["within_budget"] = float(np.mean([x["within_budget"] for x in ok]))
            out["over_max"] = float(max(x["over_by"] for x in ok))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--tables", default="", help="only the cases of these tables (comma-separated)")
    parser.add_argument("--kinds", default="", help="only the cases of these constraints (comma-separated: "
                                                    "call_rate, max_cost, max_latency, min_quality)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("ROUTERLAB_PROGRESS", "0")
    wanted = [t for t in args.tables.split(",") if t]
    tables: dict[str, Any] = {}
    results = []
    for name, settings in CASES:
        if wanted and name not in wanted:
            continue
        kinds = [k for k in args.kinds.split(",") if k]
        if kinds and not any(k in settings for k in kinds):
            continue
        if name not in tables:
            tables[name] = load(name)
        t0 = time.perf_counter()
        res = run_case(tables[name], settings, args.seeds)
        res.update(table=name, settings=settings, seconds=round(time.perf_counter() - t0, 1))
        results.append(res)
        if not args.json:
            print(line(res), flush=True)
    if args.json:
        json.dump(results, sys.stdout, indent=1, default=float)
        print()
    return 0


def line(res: dict[str, Any]) -> str:
    s = res["settings"]
    what = ", ".join(f"{k}={v}" for k, v in s.items())
    text = (f"{res['table']:<12} {what}: {res['chosen']}/{res['seeds']} chose; n_dev {res.get('n_dev')} n_test "
            f"{res.get('n_test')}; coverage {res.get('coverage', math.nan):.2f}, width "
            f"{res.get('mean_width', math.nan):.3f}, realized-predicted {res.get('mean_error', math.nan):+.4f}")
    if "gap_mean" in res:
        text += (f"; |call-rate gap| paced: mean {res['gap_mean']:.4f} max {res['gap_max']:.4f}, within {TOL}: "
                 f"{res['within']:.2f}; bare threshold: mean {res['bare_gap_mean']:.4f} max "
                 f"{res['bare_gap_max']:.4f}, within {TOL}: {res['bare_within']:.2f} (perfect-threshold sd "
                 f"{res['sd']:.4f})")
    if "within_budget" in res:
        text += f"; realized within budget {res['within_budget']:.2f} (worst over by {res['over_max']:.3g})"
    return text + f"; chosen {res.get('routers_chosen')}; {res['seconds']} s"


if __name__ == "__main__":
    sys.exit(main())
