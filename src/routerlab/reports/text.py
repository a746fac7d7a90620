"""Plain-text renderings of table summaries for the terminal and Markdown reports."""

from __future__ import annotations

from typing import Any

from routerlab._words import plural, verb
from routerlab.metrics.sources import resolve


def _observed_cells(info: dict[str, Any]) -> tuple[int, int]:
    """(observed, total) score cells of a ``describe()`` record: the exact count when it carries one."""
    total = int(info["n_queries"]) * int(info["n_actors"])
    if "unobserved_cells" in info:
        return total - int(info["unobserved_cells"]), total
    return round(float(info["observed_fraction"]) * total), total


def _leak_line(info: dict[str, Any], q: dict[str, Any]) -> str:
    """The leak count, or why there is none: with no ``train`` labels the column cannot be checked (an
    evaluation's own split is checked where it is made, e.g. by the audit)."""
    if "train" not in info.get("splits", {}):
        return "leaks        not checked: no 'train' split labels (the audit checks the split it evaluates)"
    n = int(info["train_test_overlap"])
    return (f"leaks        {plural(n, 'held-out query', 'held-out queries')} also {verb(n, 'occurs', 'occur')} in train"
            + (f" ({_counts(q['train_test_overlap_by_dataset'])})" if q.get("train_test_overlap") else ""))


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k or '(none)'} {v}" for k, v in d.items()) or "-"


def observed_share(observed: int, total: int, noun: str = "") -> str:
    """``99.99% of <noun> observed (12 unobserved)``: never rounds to 100% or 0% when that is not exact.

    The percentage gets as many decimals as it needs to differ from 100 and 0, and a partly observed
    table always gives its count of unobserved cells.
    """
    of = f" of {noun}" if noun else ""
    missing = total - observed
    if total <= 0:
        return f"no {noun or 'cells'}"
    if missing == 0:
        return f"100%{of} observed"
    if observed == 0:
        return f"0%{of} observed (all {total:,} unobserved)"
    pct = 100.0 * observed / total
    for decimals in range(1, 12):
        text = f"{pct:.{decimals}f}"
        if float(text) not in (0.0, 100.0):
            break
    return f"{text}%{of} observed ({missing:,} unobserved)"


def info_text(info: dict[str, Any]) -> str:
    """The human-readable form of ``routerlab info``."""
    q = info.get("quality", {})
    lines = [
        f"table        {info['name']}  (hash {info['content_hash'][:12]})",
        f"size         {plural(info['n_queries'], 'query')} x {plural(info['n_actors'], 'actor')}, "
        + observed_share(*_observed_cells(info), "score cells"),
        f"datasets     {_counts(info['datasets'])}",
        f"splits       {_counts(info['splits'])}",
        f"columns      tokens {'yes' if info['has_tokens'] else 'no'}, latency "
        f"{'yes' if info['has_latency'] else 'no'}, cost {'yes' if info['has_cost'] else 'no'}",
        f"duplicates   {plural(info['duplicate_texts'], 'query')} "
        f"{verb(info['duplicate_texts'], 'repeats', 'repeat')} an earlier text"
        + (f" ({q['repeated_texts_with_different_scores']} repeated texts carry different scores)" if q else ""),
        _leak_line(info, q),
    ]
    cols = info.get("query_columns")
    if cols is not None:
        lines.append(f"visible      {', '.join(cols['visible']) or 'none'}  (query columns routers may read beside "
                     "id, text, dataset and split)")
        lines.append(f"hidden       {', '.join(cols['hidden']) or 'none'}  (kept for reports; never reach a router)")
    ep = info.get("episodes")
    if ep is not None:  # only a table whose cells hold agentic episodes
        kinds = ", ".join(f"{k} {v}" for k, v in ep["steps_by_kind"].items())
        lines.append(f"episodes     {ep['cells']} of {plural(info['n_queries'] * info['n_actors'], 'cell')} "
                     f"{verb(ep['cells'], 'holds', 'hold')} an episode: {plural(ep['steps'], 'step')} ({kinds})")
        lines.append("             median steps per episode: " + ", ".join(
            f"{a} {v:g}" for a, v in ep["median_steps_per_actor"].items()))
    for d in info.get("derived", []):  # a table saved before citations named papers says [SPEC 1]
        lines.append(f"derived      {resolve(d)}")
    lines.append("actors       mean score (observed cells)")
    for a, v in info["mean_score"].items():
        lines.append(f"  {a:40s} {'-' if v is None else f'{v:.3f}'}")
    return "\n".join(lines)
