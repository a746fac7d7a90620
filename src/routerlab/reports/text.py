"""Plain-text renderings of table summaries for the terminal and Markdown reports."""

from __future__ import annotations

from typing import Any


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k or '(none)'} {v}" for k, v in d.items()) or "-"


def info_text(info: dict[str, Any]) -> str:
    """The human-readable form of ``routerlab info``."""
    q = info.get("quality", {})
    lines = [
        f"table        {info['name']}  (hash {info['content_hash'][:12]})",
        f"size         {info['n_queries']} queries x {info['n_actors']} actors, "
        f"{info['observed_fraction']:.2%} of score cells observed",
        f"datasets     {_counts(info['datasets'])}",
        f"splits       {_counts(info['splits'])}",
        f"columns      tokens {'yes' if info['has_tokens'] else 'no'}, latency "
        f"{'yes' if info['has_latency'] else 'no'}, cost {'yes' if info['has_cost'] else 'no'}",
        f"duplicates   {info['duplicate_texts']} queries repeat an earlier text"
        + (f" ({q['repeated_texts_with_different_scores']} repeated texts carry different scores)" if q else ""),
        f"leaks        {info['train_test_overlap']} held-out queries also occur in train"
        + (f" ({_counts(q['train_test_overlap_by_dataset'])})" if q.get("train_test_overlap") else ""),
    ]
    for d in info.get("derived", []):
        lines.append(f"derived      {d}")
    lines.append("actors       mean score (observed cells)")
    for a, v in info["mean_score"].items():
        lines.append(f"  {a:40s} {'-' if v is None else f'{v:.3f}'}")
    return "\n".join(lines)
