"""Audit section: off-policy estimates from logs (SPEC 1 logged observability, SPEC 4-5 metrics, SPEC 7 intervals;
docs/off-policy.md). Shown when the audit is given ``--logs LOGS``.

A few routers (never the bounds, which read every actor's outcome) are trained on the audit's training queries
that are not logged and estimated on the logged queries with IPS, SNIPS and DR, each with its 95% bootstrap
interval; where the table holds the logged queries' full outcomes, each estimate stands beside the truth.

Choices: a log of the audit's training queries (``routerlab log``'s default ``--part train``) would leave no
query to train on; then the routers train on every query of the table that is not logged (said in the text), so
any ``routerlab log`` output is usable as it is. Routers: the audit's ``routers`` option without the bounds (at
most ``MAX_ROUTERS``), else best-single, knn and linear; ``--quick`` keeps two and fewer resamples.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from routerlab.data.table import RoutingTable
from routerlab.errors import DataError, UsageError
from routerlab.metrics.bootstrap import MIN_QUERIES, unavailable
from routerlab.metrics.catalog import label
from routerlab.reports.audit import AuditContext, audit_section, left_out, skipped_sentence, too_few_queries
from routerlab.reports.blocks import Block, Decisions, Finding, Paragraph, Section, Table
from routerlab.routers.base import get_router

NAME = "offpolicy"
TITLE = "Off-policy estimates from logs"
ESTIMATES_ID = "offpolicy-estimates"
WEIGHTS_ID = "offpolicy-weights"
DEFAULT_ROUTERS = ("best-single", "knn", "linear")
MAX_ROUTERS = {False: 4, True: 2}
N_BOOT = {False: 1000, True: 200}
ESTIMATORS = ("ips", "snips", "dr")
SKIP_TEXT = ("Skipped: no logs were given. Pass `--logs LOGS` (a log file, one row per query with the logged actor, "
             "its score and the logging policy's propensity; docs/logs.md) to estimate routers from logs alone; "
             "`routerlab log TABLE --part test -o logs.csv` simulates one from this table.")


def _skipped() -> Section:
    return Section(TITLE, [Paragraph(SKIP_TEXT)], {"measured": False, "reason": "no logs given (--logs LOGS)"},
                   [], [], name=NAME)


def _is_bound(spec: str) -> bool:
    try:
        return bool(get_router(spec).uses_test_labels)
    except UsageError:
        return False  # a bad spec is reported by applicability below


def pick_routers(ctx: AuditContext, train: RoutingTable) -> tuple[list[str], dict[str, str]]:
    """The routers to estimate: the audit's ``routers`` option (bounds left out) or the defaults, those that can
    train on ``train``, at most MAX_ROUTERS; and why the others were left out."""
    given = ctx.options.get("routers")
    if isinstance(given, str):  # "knn,linear" as a command line writes it
        given = [s.strip() for s in given.split(",") if s.strip()]
    specs = [str(s) for s in (given if given else DEFAULT_ROUTERS)]
    if ctx.quick and not given:
        specs = specs[:MAX_ROUTERS[True]]
    kept: list[str] = []
    skipped: dict[str, str] = {}
    for spec in specs:
        if _is_bound(spec):
            skipped[spec] = "a bound reads every actor's outcome, which a log does not hold"
            continue
        if len(kept) >= MAX_ROUTERS[ctx.quick]:
            skipped[spec] = f"the section estimates at most {MAX_ROUTERS[ctx.quick]} routers"
            continue
        try:
            get_router(spec, seed=ctx.seed).check_applicable(train)
        except UsageError as exc:
            skipped[spec] = str(exc).rstrip(".")
            continue
        kept.append(spec)
    return kept, skipped


def read_audit_logs(path: Path, table: RoutingTable) -> Any:
    """The log file read against the table's actors; any problem is one error naming the file."""
    from routerlab.data.logs import read_logs

    if not path.is_file():
        raise UsageError(f"--logs {path}: no such log file (write one with `routerlab log TABLE -o {path.name}`)")
    try:
        return read_logs(path, table)
    except DataError as exc:
        if exc.file is not None:
            raise
        raise DataError(f"does not match table {table.name!r}: {exc.detail}", file=path) from exc
    except UsageError as exc:
        raise UsageError(f"--logs {path}: does not match table {table.name!r}: {exc}") from exc


def training_rows(ctx: AuditContext, table: RoutingTable, logged_ids: np.ndarray) -> tuple[str, np.ndarray, str]:
    """The split spec the routers train by (the audit's, whose logged training queries the protocol leaves out;
    when the log covers them all, ``all``: every query of the table that is not logged), the positions of the
    queries they train on, and a sentence saying what was left out."""
    ids = table.queries.ids.astype(str)
    logged = np.isin(ids, logged_ids.astype(str))
    train = ctx.split.train[~logged[ctx.split.train]]
    if train.size:
        left = ctx.split.train.size - train.size
        note = (f"{left} logged queries are also audit training queries and were left out of training. "
                if left else "")
        return ctx.split_spec, train, note
    train = np.flatnonzero(~logged).astype(np.intp)
    if not train.size:
        raise UsageError("every query of the table is logged, so no router has a query to train on; log a part "
                         "(routerlab log TABLE --part test)")
    return ("all", train,
            f"The log covers every audit training query, so the routers train on the {train.size} queries of the "
            "table that are not logged. ")


def rows_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per (router, estimator): mu_o's estimate, interval, the truth and whether the interval holds it."""
    out = []
    for r in result["results"]:
        truth = (r.get("truth") or {}).get("mu_o")
        for est in result["estimators"]:
            e = r["estimates"][est].get("mu_o")
            if e is None:
                continue
            lo, hi = e["ci"]
            inside = None if truth is None or math.isnan(lo) else bool(lo - 1e-12 <= truth <= hi + 1e-12)
            out.append({"router": r["router"], "estimator": est, "value": e["value"], "ci": [lo, hi],
                        "truth": truth, "inside": inside})
    return out


def findings(result: dict[str, Any], rows: list[dict[str, Any]]) -> tuple[list[Finding], list[dict[str, str]]]:
    """Per router, the DR estimate (else the first estimator's) of mu_o with its interval and where the truth lies;
    how many intervals hold the truth; the router with the lowest ESS when it is below 30. With fewer than
    MIN_QUERIES logged queries there are no intervals: no finding rests on one, and the second list says which
    were left out."""
    out: list[Finding] = []
    n = int(result.get("n_logged", 0) or 0)
    few = n < MIN_QUERIES
    for r in result["results"]:
        mine = [x for x in rows if x["router"] == r["router"]]
        if not mine:
            continue
        x = next((y for y in mine if y["estimator"] == "dr"), mine[0])
        lo, hi = x["ci"]
        ci = "" if math.isnan(lo) else f" [{lo:.3f}, {hi:.3f}]"
        text = f"{label(x['estimator'])} estimates `{x['router']}`'s mu_o at {x['value']:.3f}{ci}"
        values: dict[str, float | int | str] = {"estimate": x["value"]}
        if x["truth"] is not None:
            if x["inside"] is None:  # no interval to hold it
                text += f"; the truth is {x['truth']:.3f}"
            else:
                text += f"; the truth {x['truth']:.3f} lies {'inside' if x['inside'] else 'outside'} the interval"
            values["truth"] = x["truth"]
        out.append(Finding(text + ".", ESTIMATES_ID, values, None if math.isnan(lo) else (lo, hi)))
    judged = [x for x in rows if x["inside"] is not None]
    skipped = []
    if few and any(x["truth"] is not None for x in rows):
        skipped.append(left_out("how many off-policy intervals hold the true mu_o",
                                too_few_queries(n, "logged queries")))
    if judged:
        k = sum(1 for x in judged if x["inside"])
        out.append(Finding(f"{k} of {len(judged)} off-policy 95% intervals (routers x IPS/SNIPS/DR) contain the true "
                           "mu_o on the logged queries.", ESTIMATES_ID, {"inside": k, "intervals": len(judged)}))
    weakest = min(result["results"], key=lambda r: r["diagnostics"]["ess"], default=None)
    if weakest is not None and weakest["diagnostics"]["ess"] < 30:
        d = weakest["diagnostics"]
        out.append(Finding(f"`{weakest['router']}`'s estimates rest on an effective sample of only {d['ess']:.1f} "
                           f"logged queries ({d['n_agree']} of {d['n']} logged the actor it would choose): do not "
                           "trust them.", WEIGHTS_ID, {"ess": d["ess"], "n_agree": d["n_agree"], "n": d["n"]}))
    return out, skipped


def _fmt(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


@audit_section(NAME, order=37, depends=("quick", "logs", "routers", "encoder"))
def offpolicy_section(table: RoutingTable, ctx: AuditContext) -> Section:
    given = ctx.options.get("logs")
    if not given:
        return _skipped()
    from routerlab.protocols.base import run_protocol
    from routerlab.protocols.ope import OPESettings, leak_warning

    path = Path(str(given))
    logs = read_audit_logs(path, table)
    split, train_rows, note = training_rows(ctx, table, logs.table.queries.ids)
    chosen, skipped = pick_routers(ctx, table.select_queries(train_rows))
    terms = ["ips", "snips", "dr", "mu_o", "95% CI", "truth", "ess", "propensity"]
    skipped_text = "".join(f" Router `{k}` left out: {v}." for k, v in skipped.items())
    if not chosen:
        reason = "no router can be estimated" + (f":{skipped_text}" if skipped_text else "")
        return Section(TITLE, [Paragraph(f"Not measured: {reason}")], {"measured": False, "reason": reason,
                                                                        "skipped_routers": skipped}, [], terms,
                       name=NAME)
    n_boot = N_BOOT[ctx.quick]
    with warnings.catch_warnings():  # the record keeps them (result.warnings); the report states them once
        warnings.simplefilter("ignore")
        settings = OPESettings(logs=(str(path),), estimators=ESTIMATORS, split=split, n_boot=n_boot,
                               encoder=str(ctx.options.get("encoder", "tfidf")))
        res = run_protocol("ope", table, settings, ctx.seed, chosen, ctx.run_context).native
    result = res.to_dict()
    rows = rows_of(result)
    policy = f" by policy `{logs.policy}`" if logs.policy else ""
    intro = (f"{res.n_logged} logged queries from `{path.name}`{policy}; {', '.join(f'`{c}`' for c in chosen)} "
             f"trained on {result['training']['n_train']} queries with full feedback and estimated on the logged "
             f"queries with IPS, SNIPS and DR (ridge reward model, cross-fitted); 95% intervals from {n_boot} "
             f"bootstrap resamples of the logged queries. {note}".strip())
    truth_text = (" The truth is each router's actual mu_o on the logged queries, read from the table's full "
                  "outcomes." if any(r["truth"] is not None for r in rows) else
                  f" The truth is unknown: {res.truth_note or 'the table lacks the logged queries full outcomes'}.")
    head = ["router", "estimator", "mu_o estimate [95% CI]", "truth", "truth inside"]
    body = [[x["router"], label(x["estimator"]),
             f"{x['value']:.3f}" + (f" {unavailable(res.n_logged)}" if res.n_logged < MIN_QUERIES else
                                    "" if math.isnan(x["ci"][0]) else f" [{x['ci'][0]:.3f}, {x['ci'][1]:.3f}]"),
             _fmt(x["truth"]), "-" if x["inside"] is None else ("yes" if x["inside"] else "no")] for x in rows]
    estimates = Table(head, body, [None, None, "mu_o", "truth", "95% CI"], sortable=True, id=ESTIMATES_ID)
    whead = ["router", "policy", *[label(k) for k in ("n_agree", "ess", "max_weight", "min_propensity")]]
    wbody = [[r["router"], r["policy"], f"{r['diagnostics']['n_agree']} of {r['diagnostics']['n']}",
              f"{r['diagnostics']['ess']:.1f}", f"{r['diagnostics']['max_weight']:.2f}",
              f"{r['diagnostics']['min_propensity']:.4f}"] for r in result["results"]]
    weights = Table(whead, wbody, [None, None, None, "ess", None, "propensity"], sortable=True, id=WEIGHTS_ID)
    found, left = findings(result, rows)
    blocks: list[Block] = [Paragraph(intro + truth_text), estimates, weights,
                           Paragraph(" ".join([*(f.text for f in found), *([skipped_sentence(left)] if left else [])]))]
    said = leak_warning(int(res.training["left_out_logged_queries"]))  # the note above says it
    extra = [*(f"Warning: {w}." for w in dict.fromkeys(res.warnings) if w != said),
             *([skipped_text.strip()] if skipped else [])]
    others = [k for k in result["metrics"] if k != "mu_o"]
    if others:
        extra.append(f"Also estimated (in results.json): {', '.join(others)}.")
    if result["unavailable"]:
        extra.append("Not estimable from this log: " + "; ".join(f"{k} ({v})" for k, v in result["unavailable"].items())
                     + ".")
    if extra:
        blocks.append(Paragraph(" ".join(extra)))
    covered = [x for x in rows if x["inside"] is not None]
    headline = (f"off-policy: {sum(1 for x in covered if x['inside'])} of {len(covered)} intervals hold the truth "
                f"({res.n_logged} logged queries)" if covered else f"off-policy: {res.n_logged} logged queries")
    data = {"measured": True, "logs": str(path), "routers": chosen, "skipped_routers": skipped, "rows": rows,
            "findings": [f.text for f in found], "skipped_findings": left, "headline": headline, "ope": result}
    return Section(TITLE, blocks, data, [], terms, name=NAME, findings=found,
                   decisions=[logged_decisions(res, logs, table)])


def logged_decisions(res: Any, logs: Any, table: RoutingTable) -> Decisions:
    """Each router's choice on each logged query, with the score it obtained where that is known: from the
    table's full outcomes when it holds the logged queries, else the logged score when the router chose the
    logged actor (NaN otherwise: what another actor would have scored is exactly what a log does not say). For an
    exploring router the choice is its argmax and the deployed score its expected score under the distribution it
    samples (from the table's full outcomes; unknown without them)."""
    ids = np.asarray(res.query_ids, dtype=str)
    where = {q: i for i, q in enumerate(table.queries.ids.astype(str))}
    rows = np.array([where.get(q, -1) for q in ids], dtype=np.intp)
    action = np.asarray(logs.actor, dtype=np.intp)
    logged_score = logs.table.score[np.arange(ids.size), action].astype(np.float64)
    choices: dict[str, Any] = {}
    scores: dict[str, Any] = {}
    policies: dict[str, str] = {}
    deployed: dict[str, Any] = {}
    for r in res.results:
        if r.choice is None:
            continue
        choice = np.asarray(r.choice, dtype=np.intp)
        known = np.where(choice == action, logged_score, np.nan)
        if (rows >= 0).all():
            known = table.score[rows, choice].astype(np.float64)
        choices[r.spec], scores[r.spec] = choice, known
        if r.policy == "distribution":  # an exploring router: the rows hold its argmax; its expected score beside
            policies[r.spec] = "distribution"
            deployed[r.spec] = (np.full(ids.size, np.nan) if r.deployed_score is None
                                else np.asarray(r.deployed_score, dtype=np.float64))
    return Decisions("off-policy", [str(q) for q in ids], list(table.actor_names), choices, scores, policies,
                     deployed)
