"""How many test queries a comparison of two routers needs, registered as the protocol ``power`` (docs/power.md).

Both routers are fitted on the training split and scored on the evaluable test queries by the full protocol's own
machinery (:func:`~routerlab.protocols.full.make_bench`, :func:`~routerlab.protocols.full.run_routers`: the same
split, features, fitting and per-query scores as deployed that ``evaluate`` uses); their paired per-query
differences then go to :func:`routerlab.metrics.power.paired_power`, which gives the observed mean difference with
its 95% paired bootstrap interval, the sd of the differences, the test queries needed to detect ``delta`` at the
requested power (two-sided paired test at level ``alpha``), and the power at the current size, for ``delta`` and
for the observed difference. Researchers ask this when a leaderboard gap sits inside its interval.

Two routers are compared: the two given (``routers = [A, B]``, A - B), or, with ``versus = B``, every given router
with B, one comparison each, so that an experiment file's router list works as for any protocol (a cell's numbers
then depend on its router and ``versus`` only). Records are one per compared router (A), metric and the whole
test set (slice ``''``); the artifact ``differences`` holds each comparison's per-query differences A - B (an
array under A's label), for a check of one's own (benchmarks/power_check.py simulates the test on them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from routerlab.data.provenance import Provenance
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.metrics.power import PowerAnalysis, paired_power
from routerlab.protocols.base import (
    ENCODER_HELP,
    NBOOT,
    NBOOT_HELP,
    SPLIT_HELP,
    Interval,
    MetricRecord,
    Protocol,
    ProtocolSettings,
    Result,
    RunContext,
    SettingError,
    check_encoder,
    check_split,
    register_protocol,
    setting,
)
from routerlab.protocols.full import (
    EvaluationSettings,
    RouterLike,
    RouterResult,
    applicable_routers,
    make_bench,
    router_label,
    run_routers,
    shared_features,
)

DELTA_HELP = "the difference in mu_o the comparison should detect, in score points (e.g. 0.02); it has no default"
ALPHA_HELP = "level of the planned two-sided paired test, in (0, 1)"
POWER_HELP = "the probability of detecting delta the test should have, in (0, 1) and above alpha"
VERSUS_HELP = ("compare every router with this one (none = exactly two routers A,B are given and A - B is "
               "compared)")

DELTA_MISSING = "must be given: the difference in mu_o to detect, e.g. 0.02"
"""Why a run without ``delta`` stops (it has no default: the difference worth detecting is the user's question)."""

RECORDED = ("mu_o_difference", "sd_difference", "n_needed", "power_at_n", "n_needed_observed", "power_observed")
"""The metrics of each comparison's records, in the order the command prints them."""


@dataclass(frozen=True)
class PowerSettings(ProtocolSettings):
    """The split and encoder the routers are fitted and scored with, the resamples of the observed difference's
    interval, and the planned test: the difference ``delta`` to detect, its level ``alpha`` and its ``power``."""

    delta: float | None = setting(None, DELTA_HELP, Interval(float, 0, 1, closed="right"))
    alpha: float = setting(0.05, ALPHA_HELP, Interval(float, 0, 1, closed="neither"))
    power: float = setting(0.8, POWER_HELP, Interval(float, 0, 1, closed="neither"))
    versus: str | None = setting(None, VERSUS_HELP)
    split: str = setting("given", SPLIT_HELP, check=check_split)
    encoder: str = setting("tfidf", ENCODER_HELP, check=check_encoder)
    n_boot: int = setting(1000, NBOOT_HELP, NBOOT)

    def validate(self) -> None:
        if self.power <= self.alpha:
            raise SettingError("power", f"must be above alpha ({self.alpha:g}): a two-sided test at level alpha has "
                                        f"at least that power at any size, got {self.power:g}")


@dataclass
class PowerComparison:
    """One comparison: router ``router`` (A) against ``versus`` (B), each one's mu_o, and the analysis of A - B."""

    router: str
    versus: str
    mu_o: float
    mu_o_versus: float
    analysis: PowerAnalysis

    def to_dict(self) -> dict[str, Any]:
        return {"router": self.router, "versus": self.versus, "mu_o": {self.router: self.mu_o,
                                                                       self.versus: self.mu_o_versus},
                **self.analysis.to_dict()}


@dataclass
class PowerStudy:
    """What a ``power`` run produced: the run record, the comparisons, each fitted router's evaluation on the same
    test queries (``results``, as ``evaluate`` reports them) and the test queries left out as incomplete."""

    provenance: Provenance
    comparisons: list[PowerComparison]
    results: list[RouterResult]
    excluded_test_queries: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**self.provenance.to_dict(), "excluded_test_queries": self.excluded_test_queries,
                "comparisons": [c.to_dict() for c in self.comparisons],
                **({"notes": list(self.notes)} if self.notes else {})}


def comparison_pairs(routers: Sequence[RouterLike], versus: str | None) -> list[tuple[str, str]]:
    """The (A, B) label pairs to compare: the two routers given, or every router but ``versus`` with ``versus``. A
    UsageError for anything else (not two routers, one named twice)."""
    labels = [router_label(r) for r in routers]
    twice = next((x for i, x in enumerate(labels) if x in labels[:i]), None)
    if twice is not None:
        raise UsageError(f"power compares two different routers; {twice!r} is named twice")
    if versus is None:
        if len(labels) != 2:
            shown = f": {', '.join(labels)}" if labels else ""
            raise UsageError(f"power compares exactly two routers A,B (e.g. knn,best-single), got {len(labels)}"
                             f"{shown}; to compare several with one, set versus (--versus ROUTER)")
        return [(labels[0], labels[1])]
    others = [x for x in labels if x != versus]
    if not others:
        raise UsageError(f"power needs a router to compare with versus {versus!r}; name one besides it")
    return [(x, versus) for x in others]


def power_records(study: PowerStudy) -> list[MetricRecord]:
    """Each fitted router's mu_o with its 95% interval (as ``evaluate`` reports it: what an experiment's leaderboard
    reads), then one record per comparison (under router A) and metric of :data:`RECORDED`: the observed
    difference with its 95% interval, the others without."""
    out = [MetricRecord.of(r.spec, "mu_o", r.metrics["mu_o"], r.ci.get("mu_o")) for r in study.results]
    for c in study.comparisons:
        a = c.analysis
        values: dict[str, Any] = {"mu_o_difference": a.mean_difference, "sd_difference": a.sd,
                                  "n_needed": a.n_needed, "power_at_n": a.power_at_n,
                                  "n_needed_observed": a.n_needed_observed, "power_observed": a.power_observed}
        for name in RECORDED:
            out.append(MetricRecord.of(c.router, name, values[name], a.ci if name == "mu_o_difference" else None))
    return out


@register_protocol("power")
class Power(Protocol):
    summary = "test queries a paired comparison of two routers needs to detect a difference delta, and its power now"
    spec = "SPEC 7"
    Settings = PowerSettings

    def run(self, table: RoutingTable, settings: Any, seed: int = 0, routers: Sequence[Any] = (),
            context: RunContext | None = None) -> Result:
        s: PowerSettings = settings
        if s.delta is None:
            raise SettingError("delta", DELTA_MISSING)
        pairs = comparison_pairs(routers, s.versus)
        wanted = list(dict.fromkeys([x for pair in pairs for x in pair]))
        by_label = {router_label(r): r for r in routers}
        specs: list[RouterLike] = [by_label.get(x, x) for x in wanted]  # versus may be outside the routers
        from_objects = {router_label(r) for r in specs if not isinstance(r, str)}
        # the split and its features as the evaluation protocols make them (shared through the run context)
        sp, features = shared_features(table, EvaluationSettings(split=s.split, encoder=s.encoder), seed, context)
        train, test = sp.apply(table)
        record = Provenance.of(table, sp, seed=seed)
        del table
        chosen, skipped = applicable_routers(specs, train, seed)
        bench = make_bench(sp, train, test, encoder=s.encoder, features=features,
                           cache_dir=context.cache_dir if context else None)
        del test
        results, _ = run_routers(chosen, train, bench, "power", skipped=skipped, skip_inapplicable=False,
                                 from_objects=from_objects, seed=seed, n_boot=s.n_boot)
        fitted = {r.spec: r for r in results}
        score = bench.test.score
        per_query = {spec: r.query_scores(score) for spec, r in fitted.items()}
        comparisons, differences = [], {}
        for a, b in pairs:
            differences[a] = per_query[a] - per_query[b]
            analysis = paired_power(per_query[a], per_query[b], s.delta, alpha=s.alpha, power=s.power,
                                    n_boot=s.n_boot, seed=seed)
            comparisons.append(PowerComparison(a, b, float(np.mean(per_query[a])), float(np.mean(per_query[b])),
                                               analysis))
        study = PowerStudy(bench.provenance(record, seed), comparisons, results, bench.excluded, list(bench.notes))
        return Result(self.name, study.provenance, s, power_records(study), native=study,
                      n_train=int(train.n_queries), n_test=int(bench.test.n_queries),
                      artifacts={"differences": differences}, notes=list(bench.notes))


__all__ = ["RECORDED", "Power", "PowerComparison", "PowerSettings", "PowerStudy", "comparison_pairs",
           "power_records"]
