"""Audit section: a leaderboard of the standard routers under full observability (SPEC 4-5), the best router's
paired gain over always calling the best single actor (SPEC 7), every router's paired gain over best-per-dataset
(the best training actor of each query's dataset: how much of a gain knowing the dataset alone gives), the
oracle's headroom, and every router's per-query choices for the report's Parquet files.

Helpers the other router sections share live here too: which routers a (quick) audit runs, its bootstrap size,
the features of a table without query text, and the per-query decisions of an evaluation."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from routerlab._words import plural
from routerlab.data.table import RoutingTable
from routerlab.features.base import Features
from routerlab.metrics.bootstrap import MIN_QUERIES, paired_bootstrap, unavailable
from routerlab.protocols.base import run_protocol
from routerlab.protocols.full import Evaluation, featurize
from routerlab.reports.audit import AuditContext, audit_section, display_name, left_out, too_few_queries
from routerlab.reports.blocks import Decisions, Figure, Finding, Paragraph, Section, Table
from routerlab.reports.evaluation import evaluated_queries, leaderboard_table, metric_columns, plot_evaluation

DEFAULT_ROUTERS = ("oracle", "random", "best-single", "smallest", "cheapest", "fastest", "knn", "linear", "mlp",
                   "cluster", "avenger", "mf", "hybrid")
QUICK_ROUTERS = ("oracle", "random", "best-single", "knn", "linear")
"""A quick audit's routers (``--quick``): the three bounds and the two cheapest learned routers."""
FIXED = {"best-single", "largest", "smallest", "cheapest", "fastest"}
BOUNDS = {"oracle", "oracle-p", "random"}
TABLE_ID = "leaderboard-table"
FIGURE_ID = "leaderboard-figure"
SELECTION_ID = "selection-figure"
BY_DATASET_ID = "by-dataset-figure"
PER_DATASET = "best-per-dataset"
PER_DATASET_ID = "per-dataset-table"
NO_TEXT_ENCODER = "dataset-onehot"


def router_specs(ctx: AuditContext) -> list[str]:
    """The routers a router section runs: the ``routers`` option, else the default set (the quick set in a
    quick run)."""
    if "routers" in ctx.options:
        return [str(r) for r in ctx.options["routers"]]
    return list(QUICK_ROUTERS if ctx.quick else DEFAULT_ROUTERS)


def evaluation_settings(ctx: AuditContext) -> dict[str, Any]:
    """The settings of the audit's full and cold-start runs: its split, encoder and resamples; a router that
    cannot fit the table is listed as skipped, not an error."""
    return {"split": ctx.split_spec, "encoder": str(ctx.options.get("encoder", "tfidf")), "n_boot": n_boot(ctx),
            "skip_inapplicable": True}


def n_boot(ctx: AuditContext) -> int:
    """Bootstrap resamples of a router section: 1,000 (SPEC 7), 200 in a quick run."""
    return 200 if ctx.quick else 1000


def has_text(table: RoutingTable) -> bool:
    """Whether any query of ``table`` has text an encoder could read."""
    return any(str(t).strip() for t in table.queries.text.tolist())


def audit_features(train: RoutingTable, test: RoutingTable, encoder: str) -> tuple[tuple[Features, Features], str]:
    """(train, test) features and the encoder's name: ``encoder`` on the query texts, or, for a table without
    text (a score-only table such as RouterEval's), a one-hot of each query's dataset label, so the learned
    routers still run (they learn one choice per dataset)."""
    if has_text(train):
        return featurize(train, test, encoder), encoder
    labels = sorted({str(d) for d in train.queries.dataset.tolist()} | {str(d) for d in test.queries.dataset.tolist()})
    where = {d: i for i, d in enumerate(labels)}

    def onehot(t: RoutingTable) -> np.ndarray:
        X = np.zeros((t.n_queries, len(labels)), dtype=np.float32)
        X[np.arange(t.n_queries), [where[str(d)] for d in t.queries.dataset.tolist()]] = 1.0
        return X

    return (Features(onehot(train), train, NO_TEXT_ENCODER), Features(onehot(test), test, NO_TEXT_ENCODER)), \
        NO_TEXT_ENCODER


def decisions(protocol: str, ev: Evaluation, test: RoutingTable) -> Decisions:
    """Every router's per-query choice in ``ev`` and the score that choice obtained on ``test`` (the audit's
    evaluated test table), with each router's score as deployed (the mean of those is its mu_o)."""
    return routed_decisions(protocol, ev.test_ids, ev.actor_names, ev.results, test)


def routed_decisions(protocol: str, test_ids: Any, actor_names: Sequence[str], results: Sequence[Any],
                     test: RoutingTable) -> Decisions:
    """Per-query decisions of ``results`` (each with ``spec`` and a ``choice`` per query of ``test_ids``, an index
    into ``actor_names``, which are ``test``'s actors in order), with the score each choice obtained on ``test``.

    For a router that samples its distribution when deployed (``policy == "distribution"``, an exploring router),
    the choice is its argmax (greedy pick) and the file's ``deployed_score`` its expected score on the query under
    that distribution (``deployed_score``), whose mean is its mu_o; the policy is written beside each row."""
    ids = [str(q) for q in np.asarray(test_ids).tolist()]
    pos = {str(q): i for i, q in enumerate(test.queries.ids.tolist())}
    rows = np.array([pos[q] for q in ids], dtype=np.intp)
    n = np.arange(rows.size)
    policies = {r.spec: str(getattr(r, "policy", "argmax")) for r in results}
    deployed = {r.spec: np.asarray(r.deployed_score, dtype=np.float64) for r in results
                if getattr(r, "deployed_score", None) is not None}
    return Decisions(protocol, ids, list(actor_names),
                     {r.spec: np.asarray(r.choice, dtype=np.int64) for r in results},
                     {r.spec: test.score[rows[n], r.choice].astype(np.float64) for r in results},  # one cell a query
                     policies, deployed)


def _routers_run(ev: Evaluation) -> str:
    """The routers a "none beats best-single" claim is about: ``of the 3 run``, those run besides best-single and
    the bounds (a claim about them, not about routers in general)."""
    return f"of the {sum(1 for r in ev.results if r.router not in BOUNDS and r.router != 'best-single')} run"


def gain_finding(ev: Evaluation) -> tuple[Finding | None, dict[str, Any]]:
    """The best non-oracle router against always calling the best single actor, in points of mu_o (x100), with
    the paired bootstrap interval (SPEC 7); None when best-single is not in the run, or when the verdict would
    rest on an interval over fewer than MIN_QUERIES test queries (the data then says ``"skipped"``: what)."""
    single = next((r for r in ev.results if r.router == "best-single"), None)
    fair = [r for r in ev.results if r.router not in BOUNDS]
    if single is None or not fair:
        return None, {}
    best = max(fair, key=lambda r: r.metrics["mu_o"])
    actor = max(single.selection, key=lambda a: single.selection[a])
    run = _routers_run(ev)  # the claims below are about these routers, not routers in general
    if best.spec == single.spec or best.paired is None:
        values: dict[str, float | int | str] = {"router": single.spec, "gain_points": 0.0,
                                                "best_single_actor": actor, "best_single_mu_o": single.metrics["mu_o"]}
        return Finding(f"No router {run} beats always calling the best single actor `{actor}` (mu_o "
                       f"{single.metrics['mu_o']:.3f}).", TABLE_ID, values), dict(values)
    diff, (lo, hi) = best.paired["mu_o_difference"], best.paired["ci"]
    pts, plo, phi = 100 * diff, 100 * lo, 100 * hi
    values = {"router": best.spec, "gain_points": pts, "best_single_actor": actor, "mu_o": best.metrics["mu_o"],
              "best_single_mu_o": single.metrics["mu_o"]}
    data: dict[str, Any] = {**values, "gain_points_ci": [plo, phi]}
    n = evaluated_queries(ev)
    if n < MIN_QUERIES:
        data["skipped"] = f"whether `{best.spec}` beats always calling the best single actor `{actor}`"
        return None, data
    if math.isnan(lo) or math.isnan(hi):
        text = (f"`{best.spec}` scores {pts:+.1f} points of mu_o against always calling `{actor}`, but the paired "
                "interval is undefined.")
        return Finding(text, TABLE_ID, values), data
    interval = f"95% CI [{plo:+.1f}, {phi:+.1f}]"
    if lo > 0:
        text = f"`{best.spec}` gains {pts:.1f} points of mu_o over always calling the best single actor `{actor}` "
        text += f"({interval})."
    elif hi < 0:
        text = (f"Every router {run} scores below always calling the best single actor `{actor}`: the best, "
                f"`{best.spec}`, ")
        text += f"by {-pts:.1f} points ({interval})."
    else:
        text = (f"No router {run} clearly beats always calling the best single actor `{actor}`: the best, "
                f"`{best.spec}`, is {pts:+.1f} points of mu_o away ({interval}, which includes 0).")
    return Finding(text, TABLE_ID, values, (plo, phi)), data


def per_dataset_gains(table: RoutingTable, ctx: AuditContext, ev: Evaluation
                      ) -> tuple[list[Table | Paragraph], list[Finding], dict[str, Any]]:
    """Every router's paired gain over ``best-per-dataset`` (OpenRouterBench's Max Expert: per query, the best
    training actor of its dataset) in points of mu_o with its paired bootstrap 95% interval (SPEC 7; none below
    MIN_QUERIES evaluated queries): the part of a router's gain that knowing the dataset alone does not give.
    best-per-dataset is taken from the run when it is one of its routers, else run alone on the same split (the
    full protocol, so on the same evaluated test queries). Returns the table and sentence, a finding on the best
    router, and the data (every number the table shows)."""
    base = next((r for r in ev.results if r.router == PER_DATASET), None)
    if base is None:
        settings = {**evaluation_settings(ctx), "compare_to": "none"}
        alone = run_protocol("full", table, settings, ctx.seed, [PER_DATASET], ctx.run_context).native
        if not alone.results or list(map(str, alone.test_ids)) != list(map(str, ev.test_ids)):
            return [], [], {}  # it could not run here, or on other queries: no comparison to make
        base = alone.results[0]
    pos = {str(q): i for i, q in enumerate(ctx.test.queries.ids.tolist())}
    score = ctx.test.score[np.array([pos[str(q)] for q in ev.test_ids.tolist()], dtype=np.intp)]
    reference = base.query_scores(score)
    n = int(reference.size)
    rows: list[list[str]] = []
    gains: dict[str, dict[str, Any]] = {}
    for r in ev.results:
        if r.spec == base.spec:
            continue
        cmp = paired_bootstrap(r.query_scores(score), reference, n_boot=n_boot(ctx), seed=ctx.seed)
        lo, hi = (100 * cmp.lo, 100 * cmp.hi) if n >= MIN_QUERIES else (math.nan, math.nan)
        gains[r.spec] = {"gain_points": 100 * cmp.diff, "gain_points_ci": [lo, hi],
                         "p_value": cmp.p_value if n >= MIN_QUERIES else math.nan, "mu_o": r.metrics["mu_o"]}
        ci = unavailable(n) if n < MIN_QUERIES else ("undefined" if math.isnan(lo) or math.isnan(hi)
                                                    else f"[{lo:+.1f}, {hi:+.1f}]")
        p = "" if n < MIN_QUERIES or math.isnan(cmp.p_value) else f"{cmp.p_value:.3f}"
        rows.append([r.spec, f"{r.metrics['mu_o']:.4f}", f"{100 * cmp.diff:+.1f}", ci, p])
    rows.sort(key=lambda row: -gains[row[0]]["gain_points"])
    data: dict[str, Any] = {"router": base.spec, "mu_o": base.metrics["mu_o"], "n_test": n, "routers": gains}
    if not gains:
        return [], [], data
    blocks: list[Table | Paragraph] = [
        Paragraph(f"Gain over `{base.spec}` (always the best training actor of each query's dataset, mu_o "
                  f"{base.metrics['mu_o']:.4f}; a dataset training never saw gets the best single actor): what a "
                  "router adds beyond knowing the dataset alone, in points of mu_o with the paired 95% interval."),
        Table(["router", "mu_o", "gain (points)", "95% CI", "p"], rows,
              terms=[None, "mu_o", "best-per-dataset", "95% CI", "p_value"], id=PER_DATASET_ID)]
    findings: list[Finding] = []
    fair = [s for s in gains if next(r for r in ev.results if r.spec == s).router not in BOUNDS]
    if fair and n >= MIN_QUERIES:
        best = max(fair, key=lambda s: gains[s]["mu_o"])
        g = gains[best]
        lo, hi = g["gain_points_ci"]
        values: dict[str, float | int | str] = {"router": best, "gain_points": g["gain_points"],
                                                "best_per_dataset_mu_o": base.metrics["mu_o"]}
        if math.isnan(lo) or math.isnan(hi):
            text = (f"`{best}` is {g['gain_points']:+.1f} points of mu_o from `{base.spec}`, but the paired interval "
                    "is undefined.")
            findings.append(Finding(text, PER_DATASET_ID, values))
        else:
            verdict = ("gains more than knowing each query's dataset gives" if lo > 0 else
                       "scores below always calling each dataset's best training actor" if hi < 0 else
                       "does not clearly beat always calling each dataset's best training actor")
            findings.append(Finding(f"The best router here, `{best}`, {verdict}: {g['gain_points']:+.1f} points of "
                                    f"mu_o against `{base.spec}` (95% CI [{lo:+.1f}, {hi:+.1f}]).", PER_DATASET_ID,
                                    values, (lo, hi)))
    return blocks, findings, data


@audit_section("leaderboard", order=30, depends=("quick", "routers", "encoder"))
def leaderboard_section(table: RoutingTable, ctx: AuditContext) -> Section:
    specs = router_specs(ctx)
    # a router x dataset heatmap of mu_o when the test split holds several datasets (the protocol's breakdown)
    several = len({str(d) for d in ctx.test.queries.dataset.tolist()} - {""}) > 1
    settings = {**evaluation_settings(ctx), **({"by": "dataset"} if several else {})}
    ev = run_protocol("full", table, settings, ctx.seed, specs, ctx.run_context).native
    encoder = ev.encoder
    ctx.shared["full_evaluation"] = ev  # the partial-observability and robustness sections compare with it
    files = plot_evaluation(ev, ctx.out_dir, display_name(table))
    captions = {"leaderboard.png": ("mu_o of every router with its 95% bootstrap interval", FIGURE_ID),
                "selection.png": ("Share of test queries each router sends to each actor", SELECTION_ID),
                "by_dataset.png": ("mu_o of every router on each dataset's test queries (* = fewer than "
                                   f"{MIN_QUERIES} queries: no interval)", BY_DATASET_ID)}
    figures = [Figure(f, *captions.get(f, ("", f.rsplit(".", 1)[0] + "-figure"))) for f in files]
    best = max((r for r in ev.results if r.router not in {"oracle", "oracle-p"}), key=lambda r: r.metrics["mu_o"])
    oracle = next((r for r in ev.results if r.router == "oracle"), None)
    single = next((r for r in ev.results if r.router == "best-single"), None)
    n_test = int(ev.split["n_test"])
    sentences = [f"Every router is trained on the {ctx.split.train.size} training queries and scored on the same "
                 f"{n_test} evaluated test queries as the bounds above.",
                 f"The best learned or fixed router here is `{best.spec}` with mu_o {best.metrics['mu_o']:.4f}."]
    if ctx.quick:
        sentences.insert(0, f"A quick run: {plural(len(specs), 'router')} and {n_boot(ctx)} bootstrap resamples.")
    if encoder == NO_TEXT_ENCODER:
        sentences.append("The table has no query text, so the learned routers see only each query's dataset "
                         "(one-hot): they can learn one choice per dataset, not per query.")
    headline = f"best router {best.spec}: mu_o {best.metrics['mu_o']:.4f}"
    if single is not None and best.spec != single.spec and best.paired is not None:
        diff, (lo, hi) = best.paired["mu_o_difference"], best.paired["ci"]
        if n_test < MIN_QUERIES:
            verdict, interval = "differs from", f"(no interval: {unavailable(n_test)})"
        elif math.isnan(lo) or math.isnan(hi):
            verdict, interval = "cannot be compared with", "(the paired interval is undefined)"
        else:
            verdict = "beats" if lo > 0 else "does not clearly beat"
            interval = f"[{lo:+.4f}, {hi:+.4f}]"
        sentences.append(f"It {verdict} always calling the best single actor ({single.metrics['mu_o']:.4f}): "
                         f"paired difference {diff:+.4f} {interval} over the same test queries "
                         f"(optimistic: it was picked as the best of {len(ev.results)} routers on this split).")
        headline += (f", {verdict} best-single ({single.metrics['mu_o']:.4f}) by {diff:+.4f} {interval}")
    elif single is not None and best.spec == single.spec:
        sentences.append(f"No router {_routers_run(ev)} beats always calling the best single actor.")
        headline += " (the best single actor itself)"
    findings: list[Finding] = []
    gain, gain_data = gain_finding(ev)
    if gain is not None:
        findings.append(gain)
    skipped = [left_out(gain_data.pop("skipped"), too_few_queries(n_test))] if "skipped" in gain_data else []
    headroom: dict[str, Any] = {}
    if oracle is not None:
        gap = oracle.metrics["mu_o"] - best.metrics["mu_o"]
        sentences.append(f"The oracle is {gap:.4f} higher: that is what better routing could still win.")
        headline += f"; oracle {oracle.metrics['mu_o']:.4f}"
        headroom = {"router": best.spec, "oracle_mu_o": oracle.metrics["mu_o"], "gap_points": 100 * gap}
        room: dict[str, float | int | str] = dict(headroom)
        findings.append(Finding(f"A perfect router (the oracle, mu_o {oracle.metrics['mu_o']:.3f}) would score "
                                f"{100 * gap:.1f} points above `{best.spec}`: what better routing could still win.",
                                TABLE_ID, room))
    collapsed = [r for r in ev.results if r.collapsed and r.router not in FIXED | BOUNDS]
    if collapsed:
        sentences.append(f"Collapsed (one actor takes >= 99% of queries): {', '.join(r.spec for r in collapsed)}.")
        onto = {r.spec: max(r.selection, key=lambda a: r.selection[a]) for r in collapsed}
        findings.append(Finding(
            f"{len(collapsed)} learned {'router sends' if len(collapsed) == 1 else 'routers send'} at least 99% of "
            "the queries to one actor: " + ", ".join(f"`{k}` to `{v}`" for k, v in onto.items()) + ".",
            SELECTION_ID, {"n_collapsed": len(collapsed)}))
    if "breakdown" in ev.extra:
        bd = ev.extra["breakdown"]
        sentences.append(f"The heatmap breaks mu_o down by the {len(bd['datasets'])} datasets of the test split; "
                         f"their counts add up to the {bd['n_evaluated']} evaluated test queries, and the "
                         "count-weighted mean of a router's per-dataset mu_o is its mu_o above.")
    per_dataset_blocks, per_dataset_findings, per_dataset = per_dataset_gains(table, ctx, ev)
    findings += per_dataset_findings
    for spec, why in ev.extra.get("skipped", {}).items():
        sentences.append(f"Skipped `{spec}`: {why}.")
    for note in ev.extra.get("notes", []):
        sentences.append(f"Note: {note}.")
    data = {**ev.to_dict(), "headline": headline, "quick": ctx.quick, "n_boot": n_boot(ctx),
            "gain_over_best_single": gain_data, "gain_over_best_per_dataset": per_dataset,
            "oracle_headroom": headroom,
            "n_collapsed": len(collapsed), "skipped_findings": skipped}
    terms = ["full observability", "mu_o", "95% CI", "mu_o_difference",
             *[c for c in metric_columns(ev) if c != "mu_o"], "collapsed", "oracle best-of-N", "best-per-dataset",
             "p_value"]
    return Section("Leaderboard (full observability)",
                   [leaderboard_table(ev, TABLE_ID), Paragraph(" ".join(sentences)), *per_dataset_blocks], data,
                   figures, terms,
                   name="leaderboard", findings=findings, decisions=[decisions("full", ev, ctx.test)])
