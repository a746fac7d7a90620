"""Audit section: two-model routing (SPEC 6; routerxbench-probedirichlet.txt sec. 3, Tables 1-2), shown when the
audit names a small/large pair (``--small A --large B``) or the table designates one (``meta["two_model"]``, set by
``routerlab join --small A --large B``).

The protocol ``two-model`` (:class:`routerlab.protocols.two_model.TwoModel`, the run ``routerlab two-model``
makes) runs on the audit's own split: its training queries train the routers and its evaluated test queries are
scored, those where either model's score is unknown left out, so this section and the others see the same test
queries. The section hands the protocol those queries with their split column set to the audit's split and the
setting ``split = "given:test"``. Every dataset with a test query is in-domain (an audit names no out-of-domain
datasets). Routers: the oracle bound, random, best-single and the learned knn and linear (those that can train on
the split); 200 bootstrap resamples (50 with ``--quick``). Every sentence is computed from the run. Without a pair
the section says in one line why it is skipped.

Per-query decisions at the call rate ``CALL_RATE`` (the top of the default LPM band): each router escalates to the
large model the share ``CALL_RATE`` of the test queries it trusts least (lowest s(q), ties in query order), one
threshold over all test queries read off their own ranking (a description of the ranking at that rate: a threshold
fixed before the test is what ``routerlab two-model --dev F --call-rate X`` reports); they come from the run's
per-query scores (its ``per_query`` artifact), so the routers are fitted once.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from routerlab.data.join import two_model_pair
from routerlab.data.splits import Split
from routerlab.data.table import RoutingTable
from routerlab.errors import DataError, UsageError
from routerlab.metrics.bootstrap import MIN_QUERIES, unavailable
from routerlab.metrics.sources import cite
from routerlab.reports.audit import AuditContext, audit_section, left_out, skipped_sentence, too_few_queries
from routerlab.reports.blocks import Block, Decisions, Figure, Finding, Paragraph, Section, Table
from routerlab.reports.two_model_report import (
    cell_values,
    column_sizes,
    is_bound,
    n_per_dataset,
    plot_call_rate_curves,
    table_blocks,
)
from routerlab.routers.base import get_router

if TYPE_CHECKING:
    from routerlab.protocols.two_model import TwoModelScores

ROUTERS = ("oracle", "random", "best-single", "knn", "linear")
N_BOOT = 200
N_BOOT_QUICK = 50
CALL_RATE = 0.30
"""The call rate of the per-query decisions and of the call-rate finding (the top of the default LPM band)."""
NAME = "two-model"
MAX_PLOTS = {False: 8, True: 1}
"""Call-rate figures drawn at most (the datasets with the most test queries), full and ``--quick``."""
PLOT_PREFIX = "two_model_call_rate_"
TITLE = "Two-model routing (small model unless escalated)"


def _skipped(reason: str) -> Section:
    return Section(TITLE, [Paragraph(f"Skipped: {reason}.")], {"measured": False, "reason": reason}, [], [],
                   name=NAME)


def audit_pair(table: RoutingTable, options: dict[str, Any]) -> tuple[str, str] | None:
    """The (small, large) pair: the audit's ``small``/``large`` options when given (both, distinct actors of the
    table: a UsageError naming the bad one otherwise), else the table's designation (None when it has none; a
    DataError when it names a missing actor)."""
    small, large = options.get("small"), options.get("large")
    if small is None and large is None:
        return two_model_pair(table)
    if small is None or large is None:
        given, missing = ("--small", "--large") if small is not None else ("--large", "--small")
        raise UsageError(f"{given} needs {missing} too: the two-model section compares a small and a large model")
    for option, name in (("--small", small), ("--large", large)):
        if str(name) not in table.actor_names:
            raise UsageError(f"{option} {name!r} is not an actor of table {table.name!r} (actors: "
                             f"{', '.join(table.actor_names)})")
    if small == large:
        raise UsageError(f"--small and --large both name {small!r}; name two different actors")
    return str(small), str(large)


def pair_split(table: RoutingTable, split: Split, small: str, large: str) -> tuple[RoutingTable, Split, int]:
    """The table cut to the queries where both models' scores are known, of the datasets with such a test query
    (the protocol's in-domain datasets: each needs a test part), and the audit's split mapped onto it (positions
    renumbered; queries the split leaves out stay out); with the number of training queries left out because
    their dataset has no such test query."""
    both = np.asarray(~np.isnan(table.score[:, table.actor_index([small, large])]).any(axis=1), dtype=bool)
    dataset = table.queries.dataset.astype(str)
    tested = np.unique(dataset[split.test[both[split.test]]])
    kept = both & np.isin(dataset, tested)
    new_pos = np.cumsum(kept) - 1

    def keep(rows: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
        return np.asarray(new_pos[rows[kept[rows]]], dtype=np.intp)

    untested = int((both[split.train] & ~kept[split.train]).sum())
    mapped = Split(keep(split.train), keep(split.test), split.kind, split.seed, dict(split.params))
    return table.select_queries(kept), mapped, untested


TEST_LABEL = "test"


def split_as_given(sub: RoutingTable, split: Split) -> RoutingTable:
    """``sub``'s queries of ``split`` (train and test; those it leaves out dropped), in table order, with the split
    column saying which side each is on: the protocol's split ``given:test`` of it is ``split``. (The audit's
    splits list their positions in table order, so the training queries keep their order too.)"""
    rows = np.sort(np.concatenate([split.train, split.test]))
    labels = np.empty(sub.n_queries, dtype=object)
    labels[split.train] = "train"
    labels[split.test] = TEST_LABEL
    return sub.select_queries(rows).with_split(labels[rows])


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
    learned = [r for r in result["results"] if not is_bound(str(r["router"]))
               and not math.isnan(cell_values(r, "ID avg", "auroc")[0])]  # a NaN AUROC ranks nothing
    ranked = sorted(learned, key=lambda r: -_or(cell_values(r, "ID avg", "auroc")[0], -1.0))
    if ranked:
        best = ranked[0]
        v, lo, hi = cell_values(best, "ID avg", "auroc")
        n = column_sizes(result).get("ID avg", MIN_QUERIES)
        if n < MIN_QUERIES:  # no interval: no verdict on chance either
            ci, verdict = unavailable(n), "no verdict on chance without one"
        elif math.isnan(lo) or math.isnan(hi):
            ci, verdict = "(interval undefined)", "no verdict on chance without one"
        else:
            ci = f"[{lo:.3f}, {hi:.3f}]"
            verdict = ("above chance (its whole interval is above 0.5)" if lo > 0.5 else
                       "not distinguishable from chance (its interval reaches 0.5)" if lo <= 0.5 <= hi else
                       "below chance")
        lpm, hcr = cell_values(best, "ID avg", "lpm")[0], cell_values(best, "ID avg", "hcr")[0]
        out.append(f"Best router by AUROC (mean over datasets): `{best['router']}`, {v:.3f} {ci}, "
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


def call_rate_decisions(per_query: TwoModelScores, small: str, large: str, *, seed: int, rate: float = CALL_RATE,
                        n_boot: int = N_BOOT) -> tuple[Decisions, dict[str, dict[str, Any]]]:
    """Each router's per-query decision at call rate ``rate`` (module docstring) on the test queries the protocol
    scored (its ``per_query`` artifact), and per router the mean score of its answers there (Phi at ``rate``) with
    its bootstrap interval, the share of the large model's score it keeps and the share of the test queries sent
    to the large model."""
    choices, scores, stats = per_query.at_call_rate(rate, n_boot, seed)
    return Decisions(f"two-model call rate {rate:g}", per_query.ids, [small, large], dict(choices),
                     dict(scores)), stats


def finding_objects(result: dict[str, Any], stats: dict[str, dict[str, Any]], rate: float = CALL_RATE
                    ) -> tuple[list[Finding], list[dict[str, str]]]:
    """The opening findings: the best router by AUROC with its interval, and the learned router that keeps the
    most of the large model's score at call rate ``rate``; and those left out (an interval over too few queries,
    or a share of a large model that scores 0)."""
    out: list[Finding] = []
    skipped: list[dict[str, str]] = []
    n_id = column_sizes(result).get("ID avg", MIN_QUERIES)
    n_all = sum(n_per_dataset(result).values())
    learned = [r for r in result["results"] if not is_bound(str(r["router"]))]
    ranked = sorted(learned, key=lambda r: -_or(cell_values(r, "ID avg", "auroc")[0], -1.0))
    if ranked:
        best = ranked[0]
        v, lo, hi = cell_values(best, "ID avg", "auroc")
        if not math.isnan(_or(v, math.nan)):
            head = (f"Between `{result['small']}` and `{result['large']}`, `{best['router']}` tells best when the "
                    f"small model will do: AUROC {v:.3f}")
            if n_id < MIN_QUERIES or math.isnan(_or(lo, math.nan)) or math.isnan(_or(hi, math.nan)):
                out.append(Finding(f"{head}.", f"{NAME}-auroc", {"auroc": v}))  # no interval, so no verdict
                if n_id < MIN_QUERIES:
                    skipped.append(left_out(f"whether `{best['router']}`'s AUROC is above chance",
                                            too_few_queries(n_id, "evaluated queries in the smallest dataset")))
            else:
                where = ("above chance" if lo > 0.5 else "not distinguishable from chance" if lo <= 0.5 <= hi
                         else "below chance")
                out.append(Finding(f"{head} [{lo:.3f}, {hi:.3f}], {where}.", f"{NAME}-auroc", {"auroc": v}, (lo, hi)))
    routed = {k: v for k, v in stats.items() if not is_bound(k) and k != "random"}
    if routed:
        spec, st = max(routed.items(), key=lambda kv: kv[1]["phi"])
        lo, hi = st["ci"]
        ci = "" if n_all < MIN_QUERIES or math.isnan(lo) or math.isnan(hi) else f" [{lo:.3f}, {hi:.3f}]"
        if st["phi"] > st["perf_large"]:  # routing can beat both models: each is better on some queries
            text = (f"Calling the large model on only {st['call_rate']:.0%} of the queries, `{spec}` scores "
                    f"{st['phi']:.3f}{ci}, above the large model alone ({st['perf_large']:.3f}; "
                    f"the small model alone {st['perf_small']:.3f}).")
        elif not st["perf_large"] > 0:  # a share of nothing: never written
            skipped.append(left_out(f"the share of the large model's score `{spec}` keeps",
                                    f"the large model scores {st['perf_large']:.3f} on these test queries: there is "
                                    "no score to take a share of"))
            return out, skipped
        else:
            text = (f"`{spec}` reaches {st['share_of_large']:.0%} of the large model's score ({st['phi']:.3f}"
                    f"{ci} against {st['perf_large']:.3f}; the small model alone "
                    f"{st['perf_small']:.3f}) calling it on {st['call_rate']:.0%} of the queries.")
        out.append(Finding(
            text, f"{NAME}-call-rate",
            {"phi": st["phi"], "perf_large": st["perf_large"], "perf_small": st["perf_small"],
             "share_of_large": st["share_of_large"], "call_rate": st["call_rate"]},
            None if not ci else (lo, hi)))
    return out, skipped


def _label_tables(blocks: list[Block], metrics: tuple[str, ...]) -> list[Block]:
    """The protocol's metric tables with the anchor, glossary terms and sortable headers the report uses."""
    out: list[Block] = []
    k = 0
    for b in blocks:
        if isinstance(b, Table) and k < len(metrics):
            m = metrics[k]
            b = dataclasses.replace(b, terms=[None, *[m] * (len(b.header) - 1)], sortable=True, id=f"{NAME}-{m}")
            k += 1
        out.append(b)
    return out


@audit_section(NAME, order=38, depends=("quick", "small", "large", "encoder"))
def two_model_section(table: RoutingTable, ctx: AuditContext) -> Section:
    try:
        pair = audit_pair(table, ctx.options)
    except DataError as exc:
        return _skipped(f"the table's two-model designation is not usable: {exc.detail}")
    if pair is None:
        return _skipped("no small/large pair: pass `--small A --large B` to the audit, or designate one in the "
                        "table with `routerlab join TABLE... --small A --large B -o DIR`")
    small, large = pair
    from routerlab.protocols.base import get_protocol
    from routerlab.protocols.two_model import TwoModelSettings

    n_boot = N_BOOT_QUICK if ctx.quick else N_BOOT
    encoder = str(ctx.options.get("encoder", "tfidf"))
    sub, split, untested = pair_split(table, ctx.split, small, large)
    datasets = sorted(set(sub.queries.dataset[split.test].astype(str).tolist()))
    chosen, skipped = _applicable(sub, split, small, large, ctx.seed)
    skipped_text = "".join(f" Router `{k}` skipped: {v}." for k, v in skipped.items())
    if untested:
        skipped_text += (f" {untested} training queries of datasets without a test query are left out (every "
                         "dataset here is in-domain, and an in-domain dataset is scored on its own test part).")
    try:
        if not chosen or not datasets:
            raise UsageError("no router can train on the split" if datasets else "no test query has both scores")
        settings = TwoModelSettings(small=small, large=large, id_datasets=tuple(datasets), split=f"given:{TEST_LABEL}",
                                    encoder=encoder, n_boot=n_boot)
        run = get_protocol("two-model").run(split_as_given(sub, split), settings, ctx.seed, chosen, ctx.run_context)
        decisions, stats = call_rate_decisions(run.artifacts["per_query"], small, large, seed=ctx.seed,
                                               n_boot=n_boot)
    except UsageError as exc:  # e.g. too few training queries: reported, never fatal to the audit
        reason = f"not measured: {str(exc).rstrip('.')}"
        return Section(TITLE, [Paragraph(f"`{small}` (small) and `{large}` (large): {reason}.{skipped_text}")],
                       {"measured": False, "small": small, "large": large, "reason": reason,
                        "skipped_routers": skipped}, [], [], name=NAME)
    result = run.native.to_dict()
    n_train = int(split.train.size)
    n_test = sum(int(d["n"]) for d in result["results"][0]["datasets"].values())
    source = "The audit names" if ctx.options.get("small") is not None else "The table designates"
    intro = (f"{source} `{small}` as the small model and `{large}` as the large one ({cite('6')}): each "
             f"query stays on the small model unless the router escalates it. {', '.join(f'`{c}`' for c in chosen)} "
             f"train on the audit's {n_train} training queries with both scores known and are scored on its "
             f"{n_test} test queries, every dataset in-domain; intervals from {n_boot} bootstrap resamples.")
    sentences = findings(result)
    found, left = finding_objects(result, stats)
    sizes = {d: int(v["n"]) for d, v in result["results"][0]["datasets"].items()}
    drawn = sorted(sizes, key=lambda d: (-sizes[d], d))[:MAX_PLOTS[ctx.quick]]
    names = [d for d in [*result["id_datasets"], *result["ood_datasets"]] if d in drawn]
    plots = plot_call_rate_curves({**result, "id_datasets": names, "ood_datasets": []}, ctx.out_dir,
                                  prefix=PLOT_PREFIX)
    if len(names) < len(sizes):
        skipped_text += (f" Call-rate curves drawn for the {len(names)} dataset{'s' if len(names) > 1 else ''} "
                         f"with the most test queries ({', '.join(f'`{d}`' for d in names)}) of {len(sizes)}.")
    metrics = ("auroc", "lpm", "hcr")
    rate_head = ["router", f"Phi({CALL_RATE:g}) [95% CI]", "share of Perf_L", "sent to the large model"]
    few = unavailable(n_test) if n_test < MIN_QUERIES else ""
    rate_rows = [[spec, f"{st['phi']:.3f} " + (few or f"[{st['ci'][0]:.3f}, {st['ci'][1]:.3f}]"),
                  f"{st['share_of_large']:.1%}" if st["perf_large"] > 0 else "-",
                  f"{st['call_rate']:.1%}"] for spec, st in stats.items()]
    rate_table = Table(rate_head, rate_rows, [None, "call-rate curve", "call-rate curve", None], sortable=True,
                       id=f"{NAME}-call-rate")
    blocks: list[Block] = [Paragraph(intro), *_label_tables(table_blocks(result, metrics), metrics),
                           Paragraph(f"At call rate {CALL_RATE:g} (each router sends the {CALL_RATE:.0%} of the test "
                                     "queries it trusts least to the large model, one threshold over all of them):"),
                           rate_table, Paragraph(" ".join([*sentences, *([skipped_sentence(left)] if left else [])])
                                                 + skipped_text)]
    best = sentences[0] if sentences and sentences[0].startswith("Best") else ""
    headline = f"two-model {small} -> {large}: {best}".rstrip()
    data = {"measured": True, "small": small, "large": large, "routers": chosen, "skipped_routers": skipped,
            "datasets": datasets, "findings": sentences, "headline": headline, "two_model": result,
            "n_boot": n_boot, "quick": ctx.quick, "left_out_train_queries": untested,
            "call_rate": {"rate": CALL_RATE, "routers": stats}, "opening_findings": [f.text for f in found],
            "skipped_findings": left}
    terms = ["call-rate curve", "auroc", "lpm", "hcr", "95% CI"]
    figures = [Figure(p.name, f"Call-rate curves: {d}", id=f"{NAME}-curves-{i}")
               for i, (p, d) in enumerate(zip(plots, names, strict=True))]
    return Section(TITLE, blocks, data, figures, terms, name=NAME, findings=found, decisions=[decisions])
