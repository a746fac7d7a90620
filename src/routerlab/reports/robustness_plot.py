"""Plots of a robustness run (SPEC 3): rho per perturbation level for every router, between its anchors (1 for a
fixed router, 1/N for a uniform random one), and accuracy against rho (does a router buy accuracy with
instability?). matplotlib is imported inside the functions, with the Agg backend; files are written atomically."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from routerlab.protocols.robustness import Robustness
from routerlab.reports.files import save_figure


def _err(value: float, ci: tuple[float, float] | list[float] | None) -> tuple[float, float]:
    """(below, above) whisker lengths of an interval; 0 where it is undefined."""
    if ci is None or value != value:
        return 0.0, 0.0
    lo, hi = float(ci[0]), float(ci[1])
    if math.isnan(lo) or math.isnan(hi):
        return 0.0, 0.0
    return max(value - lo, 0.0), max(hi - value, 0.0)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_rho_by_level(result: Robustness, path: Path, title: str = "") -> Path:
    """PNG of rho per level (levels in run order, SPEC 3's increasing semantic distance), one series per router
    with 95% bootstrap whiskers, a dashed line at 1/N labelled "uniform random" and a dotted one at 1 (a fixed
    router). Returns ``path``."""
    plt = _pyplot()
    levels = list(result.levels)
    n_r = max(len(result.results), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(levels) + 4.0), 4.2), layout="constrained")
    cmap = plt.get_cmap("tab10")
    width = 0.6 / n_r
    for i, r in enumerate(result.results):
        xs = [k - 0.3 + width * (i + 0.5) for k in range(len(levels))]
        ys = [r.rho_by_level.get(lv, math.nan) for lv in levels]
        errs = [_err(y, r.rho_by_level_ci.get(lv)) for y, lv in zip(ys, levels, strict=True)]
        ax.errorbar(xs, ys, yerr=[[e[0] for e in errs], [e[1] for e in errs]], fmt="o", capsize=3,
                    color=cmap(i % 10), label=r.spec)
    ax.axhline(result.uniform_rho, color="grey", linestyle="--", linewidth=1)
    ax.text(len(levels) - 0.5, result.uniform_rho, f" uniform random (1/N = {result.uniform_rho:.3f})",
            va="bottom", ha="right", fontsize=7, color="grey")
    ax.axhline(1.0, color="grey", linestyle=":", linewidth=1)
    ax.set_xticks(range(len(levels)), levels)
    ax.set_xlim(-0.5, len(levels) - 0.5)
    ax.set_ylim(min(0.0, result.uniform_rho - 0.05), 1.05)
    ax.set_xlabel("perturbation level")
    ax.set_ylabel("rho: share of variants routed like the original (95% CI)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    ax.set_title(title or f"Routing robustness per level: {result.data['name']}", fontsize=10)
    save_figure(fig, path)
    plt.close(fig)
    return path


def plot_accuracy_vs_rho(result: Robustness, path: Path, title: str = "") -> Path:
    """PNG with one point per router: rho (x) against accuracy on the original test queries (y), both with 95%
    bootstrap whiskers, and the 1/N line. Returns ``path``."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.2, 4.6), layout="constrained")
    cmap = plt.get_cmap("tab10")
    for i, r in enumerate(result.results):
        xe, ye = _err(r.rho, r.rho_ci), _err(r.accuracy, r.accuracy_ci)
        ax.errorbar([r.rho], [r.accuracy], xerr=[[xe[0]], [xe[1]]], yerr=[[ye[0]], [ye[1]]], fmt="o", capsize=3,
                    color=cmap(i % 10), label=r.spec)
        if r.rho == r.rho:
            ax.annotate(r.spec, (r.rho, r.accuracy), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.axvline(result.uniform_rho, color="grey", linestyle="--", linewidth=1, label="uniform random (1/N)")
    ax.set_xlim(min(0.0, result.uniform_rho - 0.05), 1.15)  # room for the labels of rho = 1 routers
    ax.set_xlabel("rho over all levels (95% CI)")
    ax.set_ylabel("accuracy on the original test queries (95% CI)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    ax.set_title(title or f"Accuracy against routing robustness: {result.data['name']}", fontsize=10)
    save_figure(fig, path)
    plt.close(fig)
    return path
