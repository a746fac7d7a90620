"""Figures of society diversity (SPEC 2): the HSE-vs-size curve and the dendrogram with H(h).

matplotlib is imported inside the functions, with the Agg backend, so that importing this module
costs nothing and never needs a display.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from routerlab.reports.files import save_figure
from routerlab.society import Coreset, Diversity, RandomCurve


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_coreset_curve(cs: Coreset, path: str | Path, random_curve: RandomCurve | None = None,
                       title: str | None = None) -> Path:
    """HSE of the greedy subsets by size, the full society's HSE with its 90/95% marks, and (if
    given) the mean and 10-90% band of random subsets of the same size."""
    plt = _pyplot()
    out = Path(path)
    sizes = [p.size for p in cs.curve]
    values = [p.hse for p in cs.curve]
    fig, ax = plt.subplots(figsize=(9.0, 4.0), dpi=110, layout="constrained")
    if random_curve is not None:
        ax.fill_between(random_curve.sizes, random_curve.low, random_curve.high, color="0.85",
                        label=f"random subsets, 10-90% ({random_curve.n_draws} draws)")
        ax.plot(random_curve.sizes, random_curve.mean, color="0.45", lw=1.2, ls="--",
                label="random subsets, mean")
    label = "greedy max-HSE" if cs.alpha == 1.0 else f"greedy, alpha={cs.alpha:g} (HSE + accuracy)"
    ax.plot(sizes, values, marker="o", ms=3, color="C0", label=label)
    ax.axhline(cs.full_hse, color="k", lw=0.8, label=f"all {len(cs.names)} actors: {cs.full_hse:.3f}")
    for frac, size, style in ((0.9, cs.size_90, ":"), (0.95, cs.size_95, "-.")):
        ax.axhline(frac * cs.full_hse, color="0.3", lw=0.6, ls=style)
        if size is not None:
            ax.axvline(size, color="C3", lw=0.8, ls=style, label=f"{frac:.0%} reached at {size}")
    ax.set_xlabel("society size (actors)")
    ax.set_ylabel(f"HSE ({cs.metric}, {cs.linkage} linkage)")
    ax.set_title(title or "Diminishing returns of diversity")
    ax.set_xlim(left=1)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)  # beside the data
    save_figure(fig, out, dpi=fig.dpi)
    plt.close(fig)
    return out


def plot_dendrogram(div: Diversity, path: str | Path, title: str | None = None, max_leaves: int = 40) -> Path:
    """The dendrogram (heights = taxonomic levels h) above the step curve H(h) on the same h axis;
    the area under H(h) is the HSE."""
    plt = _pyplot()
    from scipy.cluster.hierarchy import dendrogram

    out = Path(path)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.0, 6.4), dpi=110, sharex=True,
                                      gridspec_kw={"height_ratios": [2.2, 1]})
    n = div.n_actors
    levels = div.curve.levels
    if n >= 2:
        truncate: dict[str, Any] = {"truncate_mode": "lastp", "p": max_leaves} if n > max_leaves else {}
        dendrogram(div.linkage_matrix, ax=top, orientation="right", labels=div.names if not truncate else None,
                   color_threshold=0, above_threshold_color="C0", leaf_font_size=7, **truncate)
        for h in np.unique(levels[1:]):
            top.axvline(h, color="0.8", lw=0.5, zorder=0)
    top.set_title(title or f"{n} actors: HSE {div.hse:.3f} (normalised {div.hse_normalized:.3f})")
    top.tick_params(axis="x", labelbottom=True)
    h_end = float(levels[-1]) if n >= 2 else 1.0
    xs = np.append(levels, max(h_end * 1.05, 1e-9))
    ys = np.append(div.curve.entropy, 0.0)
    bottom.step(xs, ys, where="post", color="C1")
    bottom.fill_between(xs, ys, step="post", color="C1", alpha=0.25)
    bottom.set_title(f"H(h): entropy of the cluster sizes at level h; shaded area = HSE = {div.hse:.3f}",
                     fontsize=8)
    bottom.set_xlabel(f"taxonomic level h ({div.metric} distance, {div.linkage} linkage)")
    bottom.set_ylabel("H(h), bits")
    bottom.set_ylim(bottom=0)
    fig.tight_layout()
    save_figure(fig, out, dpi=fig.dpi)
    plt.close(fig)
    return out
