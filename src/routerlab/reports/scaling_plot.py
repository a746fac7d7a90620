"""The scaling curve as a figure (routereval section 3, SPEC 4): one line per p, the best single actor dashed."""

from __future__ import annotations

from pathlib import Path

from routerlab.protocols.scaling import ScalingCurve
from routerlab.reports.files import save_figure


def plot_scaling(curve: ScalingCurve, path: Path, title: str = "") -> Path:
    """PNG of mu_o against pool size: one line per p with a 5-95% band, the best single actor dashed; the
    legend sits beside the axes so it never hides a line. Written atomically; returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.6, 4.2))
    cmap = plt.get_cmap("viridis")
    for i, p in enumerate(curve.p):
        s = curve.oracle_p[p]
        color = cmap(i / max(len(curve.p) - 1, 1))
        ax.plot(curve.m, s["mean"], marker="o", color=color, label=f"r_o(p={p:g})")
        ax.fill_between(curve.m, s["q05"], s["q95"], color=color, alpha=0.15)
    ax.plot(curve.m, curve.best_single["mean"], "k--", marker="s", label="best single (train)")
    if curve.reference is not None:
        ax.axhline(curve.reference, color="red", lw=1, label="reference")
    ax.set_xlabel("number of candidate actors m")
    ax.set_ylabel("mu_o on test")
    import textwrap

    # wrapped: a long table name must not push the title past the figure's left edge
    ax.set_title(textwrap.fill(title or f"Scaling curve ({curve.samples} subsets per m)", 60), fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)  # beside the data
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return path
