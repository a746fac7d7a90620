"""How the ``agentic`` protocol's result reads: its tables as rows of text cells, shared by ``routerlab agentic``
(fixed-width text) and the audit's agentic section (report blocks), so the two never show different numbers."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from routerlab.metrics.bootstrap import Estimate

if TYPE_CHECKING:
    from routerlab.protocols.agentic import AgenticAnalysis, Spread

Rows = tuple[list[str], list[list[str]]]
"""A table: its header and its rows of cell texts."""

METRIC_LABELS = {"acc_at_1": "Acc@1", "acc_at_1_l": "Acc@1-L", "dcg": "DCG", "l_dcg": "L-DCG"}


def fmt(e: Estimate, digits: int = 2) -> str:
    """``value [lo, hi]``, ``value [n/a]`` without an interval, ``-`` without a value."""
    if not math.isfinite(e.value):
        return "-"
    if not (math.isfinite(e.lo) and math.isfinite(e.hi)):
        return f"{e.value:.{digits}f} [n/a]"
    return f"{e.value:.{digits}f} [{e.lo:.{digits}f}, {e.hi:.{digits}f}]"


def steps_rows(a: AgenticAnalysis) -> Rows:
    """Steps per episode by actor: median and mean of model, tool and all steps, each with its interval."""
    head = ["actor", "episodes", "model steps median", "model steps mean", "tool steps median", "tool steps mean",
            "all steps median", "all steps mean"]
    rows = [[s.actor, str(s.episodes), *(fmt(getattr(s, stat)[kind], 1 if stat == "median" else 2)
                                         for kind in ("model", "tool", "all") for stat in ("median", "mean"))]
            for s in a.steps]
    return head, rows


def outcome_rows(a: AgenticAnalysis) -> Rows:
    """Per actor: accuracy, median episode latency and the share that reached the step limit."""
    limit = f"reached the limit ({a.step_limit} model calls)" if a.step_limit is not None else "reached the limit"
    head = ["actor", "episodes", "accuracy", "median episode latency (s)", limit]
    rows = [[s.actor, str(s.episodes), fmt(s.accuracy, 3), fmt(s.latency_median, 2)
             + ("" if s.latency_known == s.episodes else f" ({s.episodes - s.latency_known} unknown)"),
             "-" if s.limit_share is None else f"{s.limit_share:.1%}"] for s in a.steps]
    return head, rows


def planning_rows(a: AgenticAnalysis) -> Rows:
    """Planning steps (model calls) against episode latency: Spearman's rho and seconds per extra step."""
    head = ["actor", "episodes", "Spearman rho [95% CI]", "seconds per model step [95% CI]", "intercept (s)"]
    rows = []
    for p in a.planning:
        if p.reason:
            rows.append([p.actor, str(p.episodes), "-", "-", f"- ({p.reason})"])
            continue
        rows.append([p.actor, str(p.episodes), fmt(p.spearman, 3), fmt(p.slope_s, 3), f"{p.intercept_s:.3f}"])
    return head, rows


def bucket_rows(a: AgenticAnalysis) -> Rows:
    """Accuracy by bucket of model steps: one row per actor, one column per bucket present (``acc (episodes)``)."""
    from routerlab.protocols.agentic import bucket_labels

    labels = [b for b in bucket_labels(a.bucket_edges) if any(x.bucket == b for x in a.buckets)]
    actors = list(dict.fromkeys(b.actor for b in a.buckets))
    cell = {(b.actor, b.bucket): b for b in a.buckets}
    rows = []
    for actor in actors:
        row = [actor]
        for label in labels:
            b = cell.get((actor, label))
            row.append("-" if b is None else f"{b.accuracy.value:.2f} ({b.episodes})")
        rows.append(row)
    return ["actor \\ model steps", *labels], rows


def compression_rows(a: AgenticAnalysis) -> Rows:
    """Per metric: the variance across the compared routers on each table (points squared) and their ratio."""
    c = a.compression
    head = ["metric", "agentic variance (pp²)", "single-turn variance (pp²)", "ratio agentic / single-turn"]
    rows = []
    for metric, e in c.agentic.variance.items():
        single = c.single_turn.variance.get(metric) if c.single_turn is not None else None
        ratio = c.ratio.get(metric)
        rows.append([METRIC_LABELS.get(metric, metric), fmt(e, 2),
                     "-" if single is None else fmt(single, 2), "-" if ratio is None else fmt(ratio, 3)])
    return head, rows


def spread_lines(side: Spread) -> list[str]:
    """Who a side compares and who it leaves out, with why."""
    kept = ", ".join(side.routers) or "none"
    out = [f"{side.setting} ({side.n_queries} test queries): compared {kept}"]
    if side.excluded:
        out.append("  left out: " + "; ".join(f"{k} ({v})" for k, v in side.excluded.items()))
    return out


def text_table(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return [line(head), *(line(r) for r in rows)]


def agentic_text(a: AgenticAnalysis) -> str:
    """The command's text: the routers on the episodes (and on the single-turn table), then the step analyses and
    the compression, then the notes."""
    from routerlab.reports.evaluation import leaderboard_text

    lines = [f"routers on {a.episodes} episodes (Acc@1-L, DCG and L-DCG rank actors by episode latency)",
             leaderboard_text(a.evaluation), ""]
    if a.single_turn is not None:
        lines += ["the same routers on the single-turn table (same actors)", leaderboard_text(a.single_turn), ""]
    lines += ["steps per episode, every episode of the table (median and mean [95% CI over episodes])",
              *text_table(*steps_rows(a)), ""]
    lines += ["outcomes per actor", *text_table(*outcome_rows(a)), ""]
    lines += ["planning steps (model calls) against episode latency", *text_table(*planning_rows(a)), ""]
    lines += ["success by planning steps: accuracy (episodes) per bucket of model calls",
              *text_table(*bucket_rows(a)), ""]
    c = a.compression
    lines += [f"performance compression: variance of each metric across the non-collapsed learned routers "
              f"(collapsed = one actor takes >= {c.collapse:.0%} of the test queries), in percentage points squared",
              *text_table(*compression_rows(a))]
    for side in (c.agentic, c.single_turn):
        if side is not None:
            lines += spread_lines(side)
    lines += [f"note: {n}" for n in a.notes]
    return "\n".join(lines)
