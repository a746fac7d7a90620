"""Audit section: two-model routing (SPEC 6; routerxbench-probedirichlet.txt sec. 3, Tables 1-2), shown when the
table designates a small/large pair (``meta["two_model"]``, set by ``routerlab join --small A --large B``).

The protocol (:func:`routerlab.protocols.two_model.run_two_model`) runs on the audit's own split: its training
queries train the routers and its evaluated test queries are scored, those where either model's score is unknown
left out, so this section and the others see the same test queries. Every dataset with a test query is in-domain
(an audit names no out-of-domain datasets). Routers: the oracle bound, random, best-single and the learned knn and
linear (those that can train on the split); 200 bootstrap resamples. Every sentence is computed from the run.
A table without a pair gets one line saying why the section is skipped.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from routerlab.data.join import two_model_pair
from routerlab.data.splits import Split
from routerlab.data.table import RoutingTable
from routerlab.errors import DataError, UsageError
from routerlab.reports.audit import GLOSSARY, AuditContext, audit_section
from routerlab.reports.blocks import Block, Figure, Paragraph, Section
from routerlab.reports.two_model_report import cell_values, is_bound, plot_call_rate_curves, table_blocks
from routerlab.routers.base import get_router

ROUTERS = ("oracle", "random", "best-single", "knn", "linear")
N_BOOT = 200
PLOT_PREFIX = "two_model_call_rate_"
TITLE = "Two-model routing (small model unless escalated)"

GLOSSARY.setdefault("call-rate curve", ("call-rate curve", "Phi(x): mean score of the answers when the share x of "
                                        "the queries the router trusts least goes to the large model; Phi(0) = "
                                        "Perf_S (small model alone), Phi(1) = Perf_L (SPEC 6)"))
GLOSSARY.setdefault("auroc", ("AUROC", "router ability: area under the ROC curve of the router's score for the "
                              "label 'the small model is good enough'; 0.5 = chance, 1 = perfect (SPEC 6)"))
GLOSSARY.setdefault("lpm", ("LPM", "low-band performance mean: mean of Phi over the call rates of the low band "
                            "(default [0.25, 0.30]) (SPEC 6)"))
GLOSSARY.setdefault("hcr", ("HCR", "high-band call rate: 1 - mean call rate over the points where Phi reaches "
                            "relative performance [0.85, 0.95] of the gap from Perf_S to Perf_L; higher = the "
                            "target is reached calling the large model less (SPEC 6)"))


def _skipped(reason: str) -> Section:
    return Section(TITLE, [Paragraph(f"Skipped: {reason}.")], {"measured": False, "reason": reason}, [], [])


def pair_split(table: RoutingTable, split: Split, small: str, large: str) -> tuple[RoutingTable, Split]:
    """The table cut to the queries where both models' scores are known, and the audit's split mapped onto it
    (positions renumbered; queries the split leaves out stay out)."""
    both = np.asarray(~np.isnan(table.score[:, table.actor_index([small, large])]).any(axis=1), dtype=bool)
    new_pos = np.cumsum(both) - 1

    def keep(rows: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
        return np.asarray(new_pos[rows[both[rows]]], dtype=np.intp)

    return table.select_queries(both), Split(keep(split.train), keep(split.test), split.kind, split.seed,
                                             dict(split.params))


def _applicable(pair: RoutingTable, split: Split, small: str, large: str, seed: int
                ) -> tuple[list[str], dict[str, str]]:
    """The section's routers that can train on the pair's training queries, and why the others cannot."""
    train = pair.select_actors([small, large]).select_queries(split.train)
    kept, skipped = [], {}
    for spec in ROUTERS:
        try:
            get_router(spec, seed=seed).check_applicable(train)
        except UsageError as exc:
            skipped[spec] = str(exc).rstrip(".")
            continue
        kept.append(spec)
    return kept, skipped


def findings(result: dict[str, Any]) -> list[str]:
    """Sentences from the run: the best non-oracle router by in-domain mean AUROC (and whether its interval
    clears chance), its LPM and HCR, the oracle's AUROC, and the two models alone."""
    out = []
    learned = [r for r in result["results"] if not is_bound(str(r["router"]))]
    ranked = sorted(learned, key=lambda r: -_or(cell_values(r, "ID avg", "auroc")[0], -1.0))
    if ranked:
        best = ranked[0]
        v, lo, hi = cell_values(best, "ID avg", "auroc")
        verdict = ("above chance (its whole interval is above 0.5)" if lo > 0.5 else
                   "not distinguishable from chance (its interval reaches 0.5)" if lo <= 0.5 <= hi else
                   "below chance")
        lpm, hcr = cell_values(best, "ID avg", "lpm")[0], cell_values(best, "ID avg", "hcr")[0]
        out.append(f"Best router by AUROC (mean over datasets): `{best['router']}`, {v:.3f} [{lo:.3f}, {hi:.3f}], "
                   f"{verdict}; its LPM {lpm:.3f} and HCR {hcr:.3f}.")
    oracle = next((r for r in result["results"] if is_bound(str(r["router"]))), None)
    if oracle is not None:
        auroc, lpm = cell_values(oracle, "ID avg", "auroc")[0], cell_values(oracle, "ID avg", "lpm")[0]
        out.append(f"The oracle bound (it reads the test outcomes) has AUROC {auroc:.3f} and LPM {lpm:.3f}: the "
                   "ceiling for these two models.")
    first = result["results"][0]["datasets"] if result["results"] else {}
    if first:
        perf_s = float(np.mean([_or(d.get("perf_small"), math.nan) for d in first.values()]))
        perf_l = float(np.mean([_or(d.get("perf_large"), math.nan) for d in first.values()]))
        out.append(f"Alone, the small model `{result['small']}` scores {perf_s:.3f} and the large model "
                   f"`{result['large']}` {perf_l:.3f} (mean over datasets of Perf_S = Phi(0), Perf_L = Phi(1)).")
    return out


def _or(v: Any, default: float) -> float:
    return default if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


@audit_section("two-model", order=38)
def two_model_section(table: RoutingTable, ctx: AuditContext) -> Section:
    try:
        pair = two_model_pair(table)
    except DataError as exc:
        return _skipped(f"the table's two-model designation is not usable: {exc.detail}")
    if pair is None:
        return _skipped("the table designates no small/large pair (meta two_model); `routerlab join TABLE... "
                        "--small A --large B -o DIR` designates one")
    small, large = pair
    from routerlab.protocols.two_model import run_two_model

    sub, split = pair_split(table, ctx.split, small, large)
    datasets = sorted(set(sub.queries.dataset[split.test].astype(str).tolist()))
    chosen, skipped = _applicable(sub, split, small, large, ctx.seed)
    skipped_text = "".join(f" Router `{k}` skipped: {v}." for k, v in skipped.items())
    try:
        if not chosen or not datasets:
            raise UsageError("no router can train on the split" if datasets else "no test query has both scores")
        res = run_two_model(sub, small, large, chosen, id_datasets=datasets, split=split, seed=ctx.seed,
                            encoder=str(ctx.options.get("encoder", "tfidf")), n_boot=N_BOOT)
    except UsageError as exc:  # e.g. too few training queries: reported, never fatal to the audit
        reason = f"not measured: {str(exc).rstrip('.')}"
        return Section(TITLE, [Paragraph(f"`{small}` (small) and `{large}` (large): {reason}.{skipped_text}")],
                       {"measured": False, "small": small, "large": large, "reason": reason,
                        "skipped_routers": skipped}, [], [])
    result = res.to_dict()
    n_train = int(split.train.size)
    n_test = sum(int(d["n"]) for d in result["results"][0]["datasets"].values())
    intro = (f"The table designates `{small}` as the small model and `{large}` as the large one (SPEC 6): each "
             f"query stays on the small model unless the router escalates it. {', '.join(f'`{c}`' for c in chosen)} "
             f"train on the audit's {n_train} training queries with both scores known and are scored on its "
             f"{n_test} test queries, every dataset in-domain; intervals from {N_BOOT} bootstrap resamples.")
    sentences = findings(result)
    plots = plot_call_rate_curves(result, ctx.out_dir, prefix=PLOT_PREFIX)
    blocks: list[Block] = [Paragraph(intro), *table_blocks(result, ("auroc", "lpm", "hcr")),
                           Paragraph(" ".join(sentences) + skipped_text)]
    best = sentences[0] if sentences and sentences[0].startswith("Best") else ""
    headline = f"two-model {small} -> {large}: {best}".rstrip()
    data = {"measured": True, "small": small, "large": large, "routers": chosen, "skipped_routers": skipped,
            "datasets": datasets, "findings": sentences, "headline": headline, "two_model": result}
    terms = ["call-rate curve", "auroc", "lpm", "hcr", "95% CI"]
    names = [*result["id_datasets"], *result["ood_datasets"]]
    figures = [Figure(p.name, f"Call-rate curves: {d}") for p, d in zip(plots, names, strict=True)]
    return Section(TITLE, blocks, data, figures, terms)
