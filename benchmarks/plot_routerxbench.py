"""The RouterXBench replication's two figures from a two-model result (docs/replications.md).

    python benchmarks/plot_routerxbench.py RESULTS.json -o docs/figures/replications

RESULTS.json is the JSON of ``routerlab two-model ... --train-sizes ... --json`` (or its ``-o DIR/results.json``):
it writes ``routerxbench-train-size.png`` (Fig. 4: in-domain and out-of-domain AUROC of each router that learns
from the outcomes against the share of training queries, with 95% intervals) and ``routerxbench-layers.png``
(Fig. 7: ProbeDirichlet's inference layer weights, uniform marked).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

BOUNDS = {"oracle", "random", "best-single"}


def train_size_figure(result: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = result["train_sizes"]
    # routers that learn from the outcomes (their numbers move with the training size); the training-free ones
    # (self-ask, entropy, ...) and the bounds are flat lines and are left out
    routers = [r for r in sizes[-1]["results"] if r not in BOUNDS
               and len({e["results"][r]["id_mean"]["auroc"] for e in sizes if r in e["results"]}) > 1]
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), sharey=True)
    for ax, domain, title in ((axes[0], "id_mean", "in-domain"), (axes[1], "ood_mean", "out-of-domain")):
        for spec in routers:
            pts = [(e["train_size"], e["results"][spec][domain]) for e in sizes if spec in e["results"]
                   and e["results"][spec][domain] is not None]
            if not pts:
                continue
            x = [p[0] for p in pts]
            y = [p[1]["auroc"] for p in pts]
            lo = [p[1]["auroc_ci"][0] for p in pts]
            hi = [p[1]["auroc_ci"][1] for p in pts]
            line = ax.plot(x, y, marker="o", ms=3, lw=1.2, label=spec)[0]
            if all(v is not None for v in lo + hi):
                ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.08)
        ax.axhline(0.5, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_xticks([e["train_size"] for e in sizes], [f"{e['train_size']:g}\n({e['n_train']})" for e in sizes])
        ax.set_title(f"AUROC, {title}", fontsize=9)
        ax.set_xlabel("share of training queries (n)", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0].set_ylabel("AUROC (95% CI)", fontsize=8)
    axes[1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    path = out / "routerxbench-train-size.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def layer_figure(result: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    probes = [(r["router"], r["layer_weights"]) for r in result["results"] if r.get("layer_weights")
              and r["router"].startswith("probe-dirichlet")]
    fig, ax = plt.subplots(figsize=(6, 2.8))
    for spec, weights in probes:
        read = [(i, w) for i, w in enumerate(weights) if w > 0]
        ax.plot([i for i, _ in read], [w for _, w in read], marker="o", ms=3, lw=1.2, label=spec)
        ax.axhline(1 / len(read), color="grey", lw=0.8, ls=":")
    ax.set_xlabel("layer (0 = embedding output)", fontsize=8)
    ax.set_ylabel("weight alpha_l / sum(alpha)", fontsize=8)
    ax.set_title(f"ProbeDirichlet layer importance ({result['small']}; dotted: uniform)", fontsize=9)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / "routerxbench-layers.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("-o", "--out", type=Path, default=Path("docs/figures/replications"))
    args = ap.parse_args()
    result = json.loads(args.results.read_text())
    args.out.mkdir(parents=True, exist_ok=True)
    if result.get("train_sizes"):
        print(train_size_figure(result, args.out))
    print(layer_figure(result, args.out))


if __name__ == "__main__":
    main()
