"""Leaderboards, files and plots of an evaluation run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from routerlab.metrics import catalog
from routerlab.metrics.bootstrap import MIN_QUERIES, unavailable
from routerlab.protocols.full import Evaluation, RouterResult
from routerlab.reports.blocks import Table
from routerlab.reports.files import save_figure, write_json, write_parquet

__all__ = ["by_dataset_text", "groups_text", "leaderboard_table", "leaderboard_text", "write_evaluation",
           "write_json"]

def _fmt(v: float | None, key: str) -> str:
    return catalog.format_value(key, v)


def metric_columns(ev: Evaluation) -> list[str]:
    """The metrics the leaderboard shows for this run, in column order (those every router lacks are left out). Of
    the greedy twins only ``mu_o (greedy)`` is a column (when an exploring router ran); the others are in the JSON."""
    present = set().union(*(r.metrics for r in ev.results)) if ev.results else set()
    return [m.name for m in catalog.metrics_for("full") if m.name in present
            and (not m.name.endswith("_greedy") or m.name == "mu_o_greedy")]


_columns = metric_columns


def ranked(ev: Evaluation) -> list[RouterResult]:
    """The routers in leaderboard order: best mu_o first, ties in run order. Tables and figures share it."""
    return sorted(ev.results, key=lambda r: -r.metrics.get("mu_o", float("-inf")))


def evaluated_queries(ev: Evaluation) -> int:
    """How many test queries the run's metrics and intervals are computed over."""
    return int(ev.split.get("n_test", 0) or 0)


def leaderboard_rows(ev: Evaluation) -> list[list[str]]:
    cols = _columns(ev)
    rows = []
    n = evaluated_queries(ev)
    for r in ranked(ev):
        lo, hi = r.ci.get("mu_o", (float("nan"), float("nan")))
        ci = f"[{lo:.3f}, {hi:.3f}]" if n >= MIN_QUERIES else unavailable(n)
        row = [r.spec, f"{r.metrics['mu_o']:.4f} {ci}"]
        row += [_fmt(r.metrics.get(c), c) for c in cols if c != "mu_o"]
        row.append("yes" if r.collapsed else "")
        rows.append(row)
    bon = ["oracle best-of-N", _fmt(ev.oracle_best_of_n.get("mu_o"), "mu_o")]
    bon += [_fmt(ev.oracle_best_of_n.get(c), c) for c in cols if c != "mu_o"] + [""]
    rows.append(bon)
    return rows


def _header(ev: Evaluation) -> list[str]:
    return ["router", "mu_o [95% CI]", *[c for c in _columns(ev) if c != "mu_o"], "collapsed"]


def leaderboard_text(ev: Evaluation) -> str:
    """A fixed-width leaderboard sorted by mu_o, with the run's provenance on top."""
    head = _header(ev)
    rows = leaderboard_rows(ev)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True))

    sp = ev.split
    dev = f" / {sp['n_dev']} dev" if sp.get("n_dev") else ""
    top = (f"{ev.data['name']} (hash {ev.data['content_hash'][:12]}), split {sp['kind']} "
           f"{sp['n_train']} train{dev} / {sp['n_test']} test, encoder {ev.encoder}, seed {ev.seed}")
    if ev.excluded_test_queries:
        top += f"; {ev.excluded_test_queries} test queries with unobserved cells left out"
    top += _views(ev)
    legend = f"legend  {catalog.legend(_columns(ev))} (see routerlab metrics)"
    names = catalog.legend_line(_columns(ev))  # what each abbreviated column is, from the catalog
    return "\n".join([top, line(head), *(line(r) for r in rows), legend, *names, *_extras(ev)])


def _views(ev: Evaluation) -> str:
    """What the header says of the answerable-only view and of V_R's reference, when the run has them."""
    out = ""
    ans = ev.extra.get("answerable_only")
    if ans:
        out += (f"; answerable only: {ans['unanswerable']} test queries without a correct actor (score >= "
                f"{ans['threshold']:g}) left out")
    ref = ev.extra.get("reference")
    if ref:
        actor = f"actor {ref.get('actor')}, mean {ref['perf']:.4f} on these queries"
        out += f"; V_R reference: {actor if 'actor' in ref else format(ref['perf'], 'g')}"
    return out


def _extras(ev: Evaluation) -> list[str]:
    """Lines for paired comparisons, sweeps, skipped routers and notes."""
    out = []
    n = evaluated_queries(ev)
    for r in ev.results:
        if r.paired:
            p = r.paired
            test = (f"[{p['ci'][0]:+.4f}, {p['ci'][1]:+.4f}], p = {p['p_value']:.3f}" if n >= MIN_QUERIES
                    else f"interval and p {unavailable(n)}")
            out.append(f"paired  {r.spec} - {p['versus']}: {p['mu_o_difference']:+.4f} {test}")
    for r in ev.results:
        if r.sweep:
            out.append(f"sweep   {r.spec}: AIQ {r.sweep['aiq']:.4f} over {len(r.sweep['lambdas'])} lambdas "
                       f"({r.sweep['by']}), {len(r.sweep['pareto'])} Pareto points")
    out += [early_stopping_line(r.spec, r.early_stopping) for r in ev.results if r.early_stopping]
    out += [f"skipped {k}: {v}" for k, v in ev.extra.get("skipped", {}).items()]
    out += [f"note    {n}" for n in ev.extra.get("notes", [])]
    return out


def has_breakdown(ev: Evaluation) -> bool:
    """Whether the run was broken down by dataset (``by="dataset"``) and some router carries the breakdown."""
    return "breakdown" in ev.extra and any(r.by_dataset for r in ev.results)


def _mu_ci(mu: float, ci: tuple[float, float] | list[float] | None, n: int) -> str:
    """``0.7123 [0.650, 0.770]``, or the value with ``n/a (n=9 < 30)`` below MIN_QUERIES, ``(no interval)`` when the
    interval is undefined."""
    if n < MIN_QUERIES:
        return f"{mu:.4f} {unavailable(n)}"
    lo, hi = ci if ci is not None else (float("nan"), float("nan"))
    if lo is None or hi is None or lo != lo or hi != hi:
        return f"{mu:.4f} (no interval)"
    return f"{mu:.4f} [{lo:.3f}, {hi:.3f}]"


def by_dataset_text(ev: Evaluation) -> str:
    """The breakdown by dataset under the leaderboard: per dataset (its evaluated test queries ``n``) every router in
    leaderboard order with mu_o and its 95% CI and the leaderboard's other columns, a line saying the counts add up
    to the evaluated test queries (and how many were left out), and the legend. Empty when the run has none."""
    if not has_breakdown(ev):
        return ""
    summary = ev.extra["breakdown"]
    datasets: dict[str, dict[str, int]] = summary["datasets"]
    cols = [c for c in _columns(ev) if c != "mu_o"]
    left = any(d["excluded"] for d in datasets.values())
    head = ["dataset", "n", *(["left out"] if left else []), "router", "mu_o [95% CI]", *cols]
    rows: list[list[str]] = []
    for name, counts in datasets.items():
        first = True
        for r in ranked(ev):
            d = (r.by_dataset or {}).get(name)
            if d is None:
                continue
            lead = [name, str(d["n"]), *([str(counts["excluded"])] if left else [])] if first else \
                ["", "", *([""] if left else [])]
            rows.append([*lead, r.spec, _mu_ci(d["metrics"]["mu_o"], d["ci"].get("mu_o"), int(d["n"])),
                         *[_fmt(d["metrics"].get(c), c) for c in cols]])
            first = False
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    n, excluded = int(summary["n_evaluated"]), int(summary["excluded_test_queries"])
    top = (f"by dataset: {n} evaluated test queries in {len(datasets)} datasets; the counts n add up to the "
           f"{n} every metric above was computed on")
    if excluded:
        top += f" ({excluded} test queries with an unobserved cell left out: 'left out' per dataset)"
    more = [f"n = the dataset's evaluated test queries; below {MIN_QUERIES} a dataset's value is shown, its interval "
            "is not (n/a)"]
    legend = f"legend  {catalog.legend(['mu_o', *cols])} (see routerlab metrics)"
    return "\n".join([top, line(head), *(line(r) for r in rows), legend,
                      *catalog.legend_line(["mu_o", *cols], *more)])


def early_stopping_line(spec: str, es: dict[str, Any]) -> str:
    """One line saying which epoch a router kept on the development part, and why (its best development value)."""
    best = es.get("best_value")
    value = "n/a" if best is None else f"{best:.4f}"
    how = (f"stopped after {es['epochs_run']} of {es['max_epochs']} epochs (patience {es['patience']})"
           if es.get("stopped_early") else f"ran all {es['epochs_run']} epochs")
    return (f"stopped {spec}: epoch {es['best_epoch']} kept, best {es['metric']} {value} ({es['direction']}) on "
            f"{es['n_dev']} dev queries; {how}")


def leaderboard_table(ev: Evaluation, id: str = "") -> Table:
    """The leaderboard as a sortable report table block (headings with units, each linked to its glossary
    entry), best router first; ``id`` is its anchor in the report."""
    keys = _header(ev)
    head = [keys[0], keys[1], *[catalog.header(k) for k in keys[2:-1]], keys[-1]]
    terms: list[str | None] = [None, "mu_o", *keys[2:]]  # the glossary keys: metric names and "collapsed"
    return Table(head, leaderboard_rows(ev), terms=terms, sortable=True, id=id)


def write_evaluation(ev: Evaluation, out_dir: Path, name: str | None = None) -> list[str]:
    """Write evaluation.json, choices.parquet (one row per test query, one column per router: the actor it picks,
    its argmax; for an exploring router, which draws from its distribution when deployed, that is its greedy
    pick, as the file's metadata ``routerlab.policies`` says per router) and plots; returns the names of the
    files written."""
    import pyarrow as pa

    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "evaluation.json", ev.to_dict())
    cols: dict[str, Any] = {"query_id": pa.array(ev.test_ids.tolist())}
    names = np.asarray(ev.actor_names, dtype=object)
    for r in ev.results:
        cols[r.spec] = pa.array(names[r.choice].tolist())
    policies = {r.spec: ("argmax" if r.policy == "argmax" else "argmax (greedy) pick of a router that samples its "
                         "distribution when deployed; its metrics are expectations under that distribution")
                for r in ev.results}
    table = pa.table(cols).replace_schema_metadata({"routerlab.policies": json.dumps(policies)})
    write_parquet(out_dir / "choices.parquet", table)
    return ["evaluation.json", "choices.parquet", *plot_evaluation(ev, out_dir, name)]


def plot_evaluation(ev: Evaluation, out_dir: Path, name: str | None = None) -> list[str]:
    """leaderboard.png (mu_o with 95% CIs) and selection.png (share of test queries per actor), both with
    the routers in leaderboard order from the top; a cost- or latency-quality plot when the run swept.
    ``name`` titles the figures (default: the table's name)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    title = name or ev.data["name"]
    res = ranked(ev)
    labels = [r.spec for r in res]
    fig, ax = plt.subplots(figsize=(6.4, 0.35 * len(res) + 1.5))
    mu = np.array([r.metrics["mu_o"] for r in res])
    lo = np.array([r.ci["mu_o"][0] for r in res])
    hi = np.array([r.ci["mu_o"][1] for r in res])
    err = np.nan_to_num(np.vstack([mu - lo, hi - mu]), nan=0.0)  # an undefined interval draws no bar
    ax.barh(labels, mu, xerr=err, color="#4c72b0", capsize=3)
    ax.invert_yaxis()  # best router on top, as in the table
    ax.set_xlabel("mu_o on test (95% bootstrap CI)")
    ax.set_title(f"Leaderboard: {title}", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, out_dir / "leaderboard.png")
    plt.close(fig)

    actors = shown_actors(ev)
    shares = np.array([[r.selection.get(a, 0.0) for a in actors] for r in res])
    fig, ax = plt.subplots(figsize=(0.5 * len(actors) + 3, 0.35 * len(res) + 2))
    im = ax.imshow(shares, aspect="auto", cmap="Blues", vmin=0, vmax=1)  # row 0 (the best router) on top
    ax.set_xticks(range(len(actors)), actors, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(res)), labels, fontsize=8)
    fig.colorbar(im, ax=ax, label="share of test queries")
    ax.set_title(f"Which actor each router picks: {title}", fontsize=10)
    ax.set_xlabel("actor" if len(actors) == len(ev.actor_names)
                  else f"actor (the {len(actors)} most picked of {len(ev.actor_names)}, in table order)")
    fig.tight_layout()
    save_figure(fig, out_dir / "selection.png")
    plt.close(fig)
    figures = ["leaderboard.png", "selection.png"]
    if has_breakdown(ev) and len(ev.extra["breakdown"]["datasets"]) > 1:
        plot_by_dataset(ev, out_dir / BY_DATASET_FIGURE, title)
        figures.append(BY_DATASET_FIGURE)
    swept = [r for r in ev.results if r.sweep]
    if swept:
        by = swept[0].sweep["by"]  # type: ignore[index]
        fig, ax = plt.subplots(figsize=(8.8, 4.2), layout="constrained")
        for r in swept:
            sw = r.sweep or {}
            ax.plot(sw[by], sw["mu_o"], marker=".", label=f"{r.spec} (AIQ {sw['aiq']:.3f})")
        ax.set_xlabel(f"mean {by} per query on test" + (" (USD)" if by == "cost" else " (s)"))
        ax.set_ylabel("mu_o on test")
        ax.set_xscale("log")
        ax.set_title(f"{by.capitalize()}-quality curves (lambda sweep): {title}", fontsize=10)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)  # beside the data
        ax.grid(alpha=0.3)
        save_figure(fig, out_dir / f"{by}_quality.png")
        plt.close(fig)
        figures.append(f"{by}_quality.png")
    return figures


BY_DATASET_FIGURE = "by_dataset.png"
MAX_HEATMAP_DATASETS = 40
"""The router x dataset heatmap shows at most this many datasets: those with the most evaluated test queries."""


def shown_datasets(ev: Evaluation, limit: int = MAX_HEATMAP_DATASETS) -> list[str]:
    """The datasets of the router x dataset heatmap, in name order: every dataset with an evaluated test query, or
    on more of them the ``limit`` largest."""
    counts = {k: int(d["n"]) for k, d in ev.extra["breakdown"]["datasets"].items() if d["n"] > 0}
    keep = set(sorted(counts, key=lambda k: -counts[k])[:limit])
    return [k for k in counts if k in keep]


def plot_by_dataset(ev: Evaluation, path: Path, title: str) -> None:
    """by_dataset.png: mu_o of every router (rows, leaderboard order from the top) on each dataset's test queries
    (columns, with their n), each cell written out when the grid is small enough to read; a dataset below
    MIN_QUERIES queries is marked with an asterisk (its value has no interval)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = ranked(ev)
    names = shown_datasets(ev)
    counts = {k: int(d["n"]) for k, d in ev.extra["breakdown"]["datasets"].items()}
    grid = np.array([[(r.by_dataset or {}).get(k, {}).get("metrics", {}).get("mu_o", np.nan) for k in names]
                     for r in res], dtype=np.float64)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.75 * len(names) + 3), 0.38 * len(res) + 2.2))
    finite = grid[np.isfinite(grid)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    im = ax.imshow(grid, aspect="auto", cmap="viridis", vmin=lo, vmax=hi if hi > lo else lo + 1e-9)
    labels = [f"{k}{'*' if counts[k] < MIN_QUERIES else ''}\n(n={counts[k]})" for k in names]
    ax.set_xticks(range(len(names)), labels, rotation=45 if len(names) > 6 else 0,
                  ha="right" if len(names) > 6 else "center", fontsize=7)
    ax.set_yticks(range(len(res)), [r.spec for r in res], fontsize=8)
    if grid.size <= 400:
        mid = (lo + hi) / 2
        for i in range(grid.shape[0]):
            for j in range(grid.shape[1]):
                if np.isfinite(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=6,
                            color="black" if grid[i, j] > mid else "white")
    fig.colorbar(im, ax=ax, label="mu_o on the dataset's test queries")
    shown = len(names) == sum(1 for d in ev.extra["breakdown"]["datasets"].values() if d["n"] > 0)
    small = any(counts[k] < MIN_QUERIES for k in names)
    xlabel = "dataset" if shown else f"dataset (the {len(names)} largest of {len(counts)})"
    ax.set_xlabel(xlabel + (f"; * = fewer than {MIN_QUERIES} queries, no interval" if small else ""), fontsize=8)
    ax.set_title(f"mu_o by dataset: {title}", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


MAX_HEATMAP_ACTORS = 40
"""The selection heatmap shows at most this many actors: those any router picks most often (a pool of thousands
would draw an unreadable figure, slowly)."""


def shown_actors(ev: Evaluation, limit: int = MAX_HEATMAP_ACTORS) -> list[str]:
    """The actors of the selection heatmap, in table order: all of them, or on a larger pool the ``limit`` with
    the highest share of test queries under any router."""
    if len(ev.actor_names) <= limit:
        return list(ev.actor_names)
    top = {a: max(r.selection.get(a, 0.0) for r in ev.results) for a in ev.actor_names}
    keep = set(sorted(ev.actor_names, key=lambda a: -top[a])[:limit])
    return [a for a in ev.actor_names if a in keep]


def groups_text(record: dict[str, Any]) -> str:
    """One line per (group, router): mu_o and V_B, then the legend of both."""
    lines = []
    for g in record["groups"]:
        lines.append(f"{g['kind']} m={g['m']} (train oracle {g['train_oracle']:.4f}): {', '.join(g['actors'])}")
        for r in g["evaluation"]["results"]:
            m = r["metrics"]
            lines.append(f"    {r['spec']:28s} mu_o {m['mu_o']:.4f}  v_b {m.get('v_b', float('nan')):.4f}")
    lines += catalog.legend_line(["mu_o", "v_b"], "m = actors per group")
    return "\n".join(lines)
