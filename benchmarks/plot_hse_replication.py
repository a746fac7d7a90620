"""The HSE replication's figures (docs/replications.md), read from the results stores of its experiment files:

  python benchmarks/plot_hse_replication.py --store hse-results -o docs/figures/replications
  (or --store A --store B: hse.toml's store first, then hse-prompted.toml's)

- ``hse-curves.png`` (the paper's Fig. 3): HSE along the greedy max-HSE coreset against society size, normalised as
  the paper's axis (HSE / log2 N of the subset) and as a share of the full society's HSE (what size_90 / size_95
  read), for every table with a curve;
- ``hse-rho-societies.png`` (Fig. 4): accuracy, perturbed accuracy (original's outcome) and rho with 95% intervals
  per router across MMLU-Pro's societies ordered by HSE;
- ``hse-rho-levels.png`` (Fig. 6): rho per perturbation level per router and table.

Every run of hse.toml, hse-prompted.toml and hse-invariance.toml may share one store; the figures read the numbers
as stored (the first seed).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

CURVE_TABLES = ["mmlu-pro", "llmrouter", "routerbench", "mmlu-pro-rd", "mmlu-pro-sa", "mmlu-pro-rdsa"]
SOCIETIES = ["mmlu-pro", "mmlu-pro-max", "mmlu-pro-rd", "mmlu-pro-rdsa", "mmlu-pro-sa"]
LABELS = {"mmlu-pro": "MMLU-Pro pool", "mmlu-pro-max": "max-HSE subset", "mmlu-pro-rd": "RD", "mmlu-pro-sa": "SA",
          "mmlu-pro-rdsa": "RD+SA", "llmrouter": "LLMRouter pool", "routerbench": "RouterBench pool",
          "routerbench-max": "RouterBench max-HSE", "llmrouter-max": "LLMRouter max-HSE"}


def rows(store: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    from routerlab.experiments.store import query

    return query(store, sql, params)[1]


def curves(stores: list[Path], ax_norm: Any, ax_share: Any) -> None:
    store = stores[0]
    for table in CURVE_TABLES:
        full = rows(store, "SELECT value FROM results WHERE table_name = ? AND router = 'pool' AND metric = 'hse' "
                           "AND protocol = 'society' AND seed = 0", [table])
        got = rows(store, "SELECT slice, metric, value FROM results WHERE table_name = ? AND router = 'coreset' AND "
                          "metric IN ('hse', 'hse_normalized') AND protocol = 'society' AND seed = 0", [table])
        if not got or not full:
            continue
        by: dict[str, dict[int, float]] = {"hse": {}, "hse_normalized": {}}
        for where, metric, value in got:
            by[metric][int(where.split("=")[1])] = float(value)
        sizes = sorted(k for k in by["hse"] if k >= 2)
        style = "--" if table.startswith("mmlu-pro-") else "-"
        ax_norm.plot(sizes, [by["hse_normalized"][k] for k in sizes], style, marker="o", ms=3, label=LABELS[table])
        ax_share.plot(sizes, [by["hse"][k] / float(full[0][0]) for k in sizes], style, marker="o", ms=3,
                      label=LABELS[table])
    ax_share.axhline(0.9, color="grey", lw=0.8, ls=":")
    ax_share.axhline(0.95, color="grey", lw=0.8, ls=":")
    ax_norm.set(xlabel="society size (greedy max-HSE order)", ylabel="HSE / log2 N", title="normalised HSE",
                ylim=(0, 1.05))
    ax_share.set(xlabel="society size (greedy max-HSE order)", ylabel="HSE / HSE of the full society",
                 title="share of the full society's HSE", ylim=(0, 1.05))
    ax_share.legend(fontsize=7, loc="lower right")


def metric_rows(stores: list[Path], metric: str, where: str = "") -> dict[tuple[str, str], tuple[float, float, float]]:
    """(table, router) -> (value, ci_low, ci_high) of a robustness metric: the KNN routers as hse.toml measured
    them (300 test queries), the prompted router as hse-prompted.toml did (30)."""
    out = {}
    nan = math.nan
    for store in stores:
        for experiment, table, router, value, lo, hi in rows(
                store, "SELECT experiment, table_name, router, value, ci_low, ci_high FROM results WHERE metric = ? "
                       "AND slice = ? AND protocol = 'robustness' AND seed = 0", [metric, where]):
            if (experiment == "hse-prompted") != router.startswith("prompted"):
                continue
            out[(table, router)] = (float(value) if value is not None else nan,
                                    float(lo) if lo is not None else nan, float(hi) if hi is not None else nan)
    return out


def short(router: str) -> str:
    if not router.startswith("prompted"):
        return router
    return "prompted k=1 (n=30)" if "k=1" in router.split(":", 1)[1].split(",") else "prompted k=4 (n=30)"


def societies(store: list[Path], ax_acc: Any, ax_rho: Any) -> None:
    acc, pacc, rho = (metric_rows(store, m) for m in ("accuracy", "perturbed_accuracy_orig", "rho"))
    routers = sorted({r for (_, r) in rho}, key=lambda r: (r.startswith("prompted"), r))
    x = list(range(len(SOCIETIES)))
    for i, router in enumerate(routers):
        color = f"C{i}"
        shift = (i - (len(routers) - 1) / 2) * 0.08
        for data, ax, style in ((acc, ax_acc, "-"), (pacc, ax_acc, "--"), (rho, ax_rho, "-")):
            pts = [(j + shift, data[(t, router)]) for j, t in enumerate(SOCIETIES) if (t, router) in data]
            if not pts:
                continue
            xs = [p for p, _ in pts]
            vals = [v[0] for _, v in pts]
            err = [[v[0] - v[1] if not math.isnan(v[1]) else 0 for _, v in pts],
                   [v[2] - v[0] if not math.isnan(v[2]) else 0 for _, v in pts]]
            label = short(router) + (" perturbed" if style == "--" else "")
            ax.errorbar(xs, vals, yerr=err, fmt=style, marker="o", ms=3, color=color, capsize=2, lw=1, label=label)
    hse = {t: v for t, v in rows(store[0], "SELECT table_name, value FROM results WHERE protocol = 'society' AND "
                                           "router = 'pool' AND metric = 'hse' AND slice = '' AND seed = 0")}
    ticks = [LABELS[t] + (f"\nHSE {hse[t]:.2f}" if t in hse else "") for t in SOCIETIES]
    for ax in (ax_acc, ax_rho):
        ax.set_xticks(x, ticks, fontsize=7)
        ax.set_ylim(0, 1.05)
    ax_acc.set(ylabel="accuracy (solid), perturbed (dashed)", title="accuracy across societies")
    ax_rho.set(ylabel="rho [95% CI]", title="rho across societies (the paper's Fig. 4 order)")
    ax_acc.legend(fontsize=6, loc="lower left")


def levels(store: list[Path], ax: Any) -> None:
    tables = ["mmlu-pro", "mmlu-pro-sa", "routerbench", "routerbench-max"]
    names = ["character", "word", "syntax"]
    data = {lv: metric_rows(store, "rho", f"level={lv}") for lv in names}
    combos = sorted({k for d in data.values() for k in d if k[0] in tables},
                    key=lambda k: (tables.index(k[0]), k[1].startswith("prompted"), k[1]))
    for combo in combos:
        vals = [data[lv].get(combo, (math.nan,))[0] for lv in names]
        style = "--" if combo[1].startswith("prompted") else "-"
        ax.plot(names, vals, style, marker="o", ms=3, label=f"{LABELS[combo[0]]}: {short(combo[1])}")
    ax.set(ylabel="rho", title="rho by perturbation level", ylim=(0, 1.05))
    ax.legend(fontsize=5, ncol=2, loc="lower left")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True, action="append",
                    help="a results store of hse.toml (the first: its HSE curves) or hse-prompted.toml; repeatable")
    ap.add_argument("-o", "--output", type=Path, default=Path("docs/figures/replications"))
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    args.output.mkdir(parents=True, exist_ok=True)
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.4))
    curves(args.store, a, b)
    fig.tight_layout()
    fig.savefig(args.output / "hse-curves.png", dpi=90)
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    societies(args.store, a, b)
    fig.tight_layout()
    fig.savefig(args.output / "hse-rho-societies.png", dpi=90)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    levels(args.store, ax)
    fig.tight_layout()
    fig.savefig(args.output / "hse-rho-levels.png", dpi=90)
    print(f"wrote {args.output}/hse-curves.png, hse-rho-societies.png, hse-rho-levels.png")


if __name__ == "__main__":
    main()
