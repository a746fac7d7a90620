"""Voyager round curves (SPEC 5, routerworld.txt 5.4 and its Figure 5): one line per router over the rounds, as
data (CSV and JSON), as a fixed-width table and as a PNG.

Two panels: Acc@1 and L-DCG when the test split has latency for every cell; without latency, mu_o and Acc@1
(L-DCG needs latency, SPEC 5, and is then absent from every round, as in the full protocol).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from routerlab.metrics.catalog import label, legend_line
from routerlab.protocols.full import Evaluation
from routerlab.reports.files import save_figure, write_json, write_text

CURVE_FIELDS = ("mu_o", "acc_at_1", "acc_at_1_l", "dcg", "l_dcg")
"""The metrics the curve data carries for every round and router (those the run computed)."""


def _rounds(ev: Evaluation) -> list[dict[str, Any]]:
    rounds: list[dict[str, Any]] | None = ev.extra.get("rounds")
    if not rounds:
        raise ValueError("this evaluation has no Voyager rounds (run the voyager protocol)")
    return rounds


def panels(ev: Evaluation) -> tuple[str, str]:
    """The two metrics the curves show: (Acc@1, L-DCG) with latency, else (mu_o, Acc@1)."""
    first = _rounds(ev)[0]["results"][0]["metrics"]
    return ("acc_at_1", "l_dcg") if "l_dcg" in first else ("mu_o", "acc_at_1")


def curve_rows(ev: Evaluation) -> list[dict[str, Any]]:
    """One row per (round, router): round, training queries logged, router, the SPEC 5 metrics present, the
    collapse flag and the share of the router's logged outcomes (and of its own choices) that were correct."""
    rows = []
    for rd in _rounds(ev):
        for r in rd["results"]:
            fb = r.get("feedback", {})
            row: dict[str, Any] = {"round": rd["round"], "n_train": rd["n_train"], "router": r["spec"]}
            row.update({k: r["metrics"][k] for k in CURVE_FIELDS if k in r["metrics"]})
            row["collapsed"] = bool(r["collapsed"])
            row["correct_share"] = fb.get("correct_share")
            row["own_correct_share"] = fb.get("own_correct_share")
            if r.get("checkpoint") is not None:  # with a development part: the deployed fit and its value there
                row["checkpoint_round"] = r["checkpoint"]["round"]
                row["dev_mu_o"] = r["checkpoint"]["dev_mu_o"]
            rows.append(row)
    return rows


def curves(ev: Evaluation) -> dict[str, dict[str, list[float]]]:
    """metric -> router -> its value per round (rounds in order)."""
    out: dict[str, dict[str, list[float]]] = {}
    for row in curve_rows(ev):
        for k in CURVE_FIELDS:
            if k in row:
                out.setdefault(k, {}).setdefault(row["router"], []).append(float(row[k]))
    return out


def rounds_text(ev: Evaluation) -> str:
    """A router x round table of the second panel's metric (L-DCG, or Acc@1 without latency), with a collapse
    mark (*) on the rounds where the router sends >= 99% of test queries to one actor."""
    key = panels(ev)[1]
    rounds = _rounds(ev)
    head = ["router", *[f"r{rd['round']}" for rd in rounds]]
    table: dict[str, list[str]] = {}
    for rd in rounds:
        for r in rd["results"]:
            table.setdefault(r["spec"], []).append(f"{r['metrics'][key]:.4f}" + ("*" if r["collapsed"] else " "))
    body = [[spec, *cells] for spec, cells in table.items()]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip() for cells in [head, *body]]
    sizes = ", ".join(str(rd["n_train"]) for rd in rounds)
    return "\n".join([f"Voyager {label(key)} per round (training queries logged: {sizes}; * = collapsed)",
                      *lines, *checkpoint_lines(ev),
                      *legend_line([label(key)], f"r1..r{len(rounds)} = rounds 1 to {len(rounds)}")])


def checkpoint_lines(ev: Evaluation) -> list[str]:
    """With a development part: per router and round, the round whose fit was deployed (selected by mu_o on the
    development queries; a bound is never selected); nothing without one."""
    rounds = _rounds(ev)
    table: dict[str, list[str]] = {}
    for rd in rounds:
        for r in rd["results"]:
            ck = r.get("checkpoint")
            if ck is None:
                return []
            table.setdefault(r["spec"], []).append(f"r{ck['round']}")
    dev = ev.extra.get("voyager", {}).get("dev", {})
    head = ["router", *[f"r{rd['round']}" for rd in rounds]]
    body = [[spec, *cells] for spec, cells in table.items()]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip() for cells in [head, *body]]
    return [f"Checkpoint deployed per round (rN = the fit of round N), selected by mu_o on "
            f"{dev.get('n_evaluated', '?')} development queries; a bound is never selected:", *lines]


def write_curves(ev: Evaluation, out_dir: Path) -> list[str]:
    """voyager_curves.csv (one row per round and router) and voyager_curves.json (metric -> router -> values per
    round, with the rounds' sizes), written atomically; returns the file names."""
    rows = curve_rows(ev)
    fields = list(dict.fromkeys(k for row in rows for k in row))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in fields})
    write_text(out_dir / "voyager_curves.csv", buf.getvalue())
    rounds = _rounds(ev)
    write_json(out_dir / "voyager_curves.json", {
        "rounds": [rd["round"] for rd in rounds], "n_train": [rd["n_train"] for rd in rounds],
        "order": ev.extra.get("voyager", {}).get("order"), "curves": curves(ev)})
    return ["voyager_curves.csv", "voyager_curves.json"]


def plot_voyager(ev: Evaluation, path: Path, title: str = "") -> Path:
    """PNG of the round curves: two panels (Acc@1 and L-DCG, or mu_o and Acc@1 without latency), one line per
    router, a hollow marker where the router is collapsed that round; the legend beside the axes. Written
    atomically; returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rounds = _rounds(ev)
    xs = [rd["round"] for rd in rounds]
    data = curves(ev)
    flags: dict[str, list[bool]] = {}
    for rd in rounds:
        for r in rd["results"]:
            flags.setdefault(r["spec"], []).append(bool(r["collapsed"]))
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.2), layout="constrained")
    cmap = plt.get_cmap("tab20")
    for ax, key in zip(axes, panels(ev), strict=True):
        for i, (spec, ys) in enumerate(data[key].items()):
            color = cmap(i % 20)
            ax.plot(xs, ys, marker="o", color=color, label=spec)
            hollow = [(x, y) for x, y, c in zip(xs, ys, flags[spec], strict=True) if c]
            if hollow:
                ax.scatter(*zip(*hollow, strict=True), s=70, facecolors="white", edgecolors=color, zorder=3)
        ax.set_xticks(xs)
        ax.set_xlabel("Voyager round (trained on chunks 1..t)")
        ax.set_ylabel(f"{label(key)} on test")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                   title="hollow = collapsed", title_fontsize=7)
    fig.suptitle(title or f"Voyager round curves: {ev.data['name']}", fontsize=10)
    save_figure(fig, path)
    plt.close(fig)
    return path
