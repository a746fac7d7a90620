"""The ``society`` protocol (SPEC 2): how diverse is the pool, and which few actors carry that diversity.

One run computes what ``routerlab society`` prints and the audit's diversity section renders: the pool's HSE
(normalised, with its maximum), the greedy max-HSE coreset with its curve and 90%/95% sizes when a coreset size
is asked for, and the HSE of the perfect-specialist society of each item partition (``by``) and of their union.
The figures' extra curves (the greedy curve of a run without a coreset, the random-subsets baseline) are
computed on demand by :class:`SocietyReport`, from the distances the run already holds, so a run that draws no
figure pays nothing for them.

Records (router = the actor set they describe):

- ``pool``: ``hse``, ``hse_normalized``, ``max_hse``, ``n_actors``, ``n_items``; with a coreset also
  ``oracle_accuracy`` (mean over items of the best score in the pool, the coreset curve's reference);
- ``coreset``: ``size_90`` and ``size_95`` (None when the greedy stopped before reaching them), and per point of
  the greedy curve ``hse``, ``hse_normalized``, ``oracle_accuracy`` and, for ``alpha < 1``, ``objective`` with
  slice ``size=S``;
- ``specialists``: ``hse``, ``hse_normalized``, ``n_actors`` with slice ``by=COLUMN`` (``by=A+B`` for the union).

None of them has a confidence interval: HSE is a property of the behaviour matrix, not an estimate.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from routerlab.data.provenance import Provenance
from routerlab.data.splits import Split, make_split
from routerlab.data.table import RoutingTable
from routerlab.progress import task
from routerlab.protocols.base import (
    Interval,
    MetricRecord,
    Options,
    Protocol,
    ProtocolSettings,
    Result,
    RunContext,
    SettingError,
    check_split,
    register_protocol,
    setting,
)
from routerlab.society.coresets import Coreset, RandomCurve, greedy_coreset, random_subsets_curve
from routerlab.society.distances import METRICS
from routerlab.society.entropy import LINKAGES, Diversity, diversity, diversity_from_distances, prepare
from routerlab.society.synthetic import table_specialists, union_society

CURVE_MAX = 100
"""The greedy curve runs to every actor, or to this many on larger pools (the ``curve_max`` default)."""
NAN_RULES = ("drop", "zero", "raise")


SPEC_KINDS = ("given", "random", "ood")


def is_split_spec(value: str) -> bool:
    """Whether a society ``split`` names a split spec (whose training side gives the behaviour vectors) rather
    than a split label: an experiment hands every protocol its table's split spec."""
    return value.partition(":")[0] in SPEC_KINDS


def _check_rows(value: str) -> str:
    if is_split_spec(value):
        check_split(value)
    return value


@dataclass(frozen=True)
class SocietySettings(ProtocolSettings):
    """The ``routerlab society`` options that change what is computed (SPEC 2)."""

    metric: str = setting("cosine", "distance between behaviour vectors: cosine, correlation, euclidean or "
                          "manhattan", Options(set(METRICS)))
    linkage: str = setting("single", "dendrogram linkage: single, complete or average", Options(set(LINKAGES)))
    coreset: int | None = setting(None, "greedy max-HSE coreset of K actors, with the curve and the 90/95% sizes; "
                                  "none = no coreset", Interval(int, 1, None))
    alpha: float = setting(1.0, "joint criterion alpha * normHSE + (1 - alpha) * oracle accuracy (with coreset), "
                           "in [0, 1]", Interval(float, 0, 1))
    by: tuple[str, ...] | None = setting(None, "also the specialist society of these item partitions (dataset or "
                                         "query columns); with several, their union too")
    split: str = setting("train", "queries whose scores are the behaviour vectors: a split label (train, test, "
                         "...), the training side of a split spec (given, random[:F], ood:DS1,DS2) or 'all'",
                         check=_check_rows)
    nan: str = setting("drop", "unobserved cells: drop (the item), zero, or raise", Options(set(NAN_RULES)))
    curve_max: int = setting(CURVE_MAX, "the greedy curve runs to every actor, or to this many on larger pools",
                             Interval(int, 1, None))

    def validate(self) -> None:
        if self.alpha != 1.0 and self.coreset is None:
            raise SettingError("alpha", "applies only with a coreset (a coreset size K)")


@dataclass
class SocietyReport:
    """What one society run found (``Result.native``): the pool's :class:`Diversity` (which holds the
    distances), the coreset when one was asked for, the specialist societies, and the run record.
    :meth:`to_dict` is the JSON record ``routerlab society --json`` prints."""

    settings: SocietySettings
    provenance: Provenance
    diversity: Diversity
    coreset: Coreset | None = None
    specialists: list[dict[str, Any]] = field(default_factory=list)
    specialists_union: dict[str, Any] | None = None
    pool_oracle_accuracy: float | None = None
    _figure_curve: Coreset | None = field(default=None, repr=False)

    @property
    def notes(self) -> list[str]:
        return list(self.diversity.notes)

    def to_dict(self) -> dict[str, Any]:
        """The run record, the diversity (with its taxonomic curve), then ``coreset``, ``specialists`` and
        ``specialists_union`` where computed."""
        out: dict[str, Any] = {**self.provenance.to_dict(), **self.diversity.to_dict()}
        if self.coreset is not None:
            out["coreset"] = self.coreset.to_dict()
        if self.specialists:
            out["specialists"] = [dict(s) for s in self.specialists]
        if self.specialists_union is not None:
            out["specialists_union"] = dict(self.specialists_union)
        return out

    def figure_curve(self) -> Coreset | None:
        """The greedy curve a figure shows: the coreset's, or (a run without one, two actors or more) the greedy
        max-HSE order from the farthest pair up to ``curve_max`` actors, computed once on first use."""
        if self.coreset is not None:
            return self.coreset
        div = self.diversity
        if self._figure_curve is None and div.n_actors >= 2:
            self._figure_curve = greedy_coreset(
                div.distances, min(div.n_actors, 2), div.linkage, names=div.names, full_hse=div.hse,
                stop_fraction=None, max_size=min(div.n_actors, self.settings.curve_max))
        return self._figure_curve

    def random_baseline(self, n_draws: int, seed: int) -> RandomCurve | None:
        """HSE of ``n_draws`` seeded random subsets at every size of :meth:`figure_curve` (the greedy's baseline
        in the curve figure); None without a curve."""
        curve = self.figure_curve()
        if curve is None:
            return None
        return random_subsets_curve(self.diversity.distances, range(1, len(curve.curve) + 1), self.diversity.linkage,
                                    n_draws=n_draws, seed=seed)


def run_society(table: RoutingTable, settings: SocietySettings, seed: int = 0) -> SocietyReport:
    """The society pipeline on ``table``: the rows of ``settings.split`` (a split label, or the training side of a
    split spec made with ``seed``), or every row for ``all``."""
    s = settings
    run_table, split = table, None if s.split == "all" else s.split
    described: Split | str = split or "all"
    if is_split_spec(s.split):  # the training side of the spec's split, every row of it
        sp = make_split(table, s.split, seed)
        run_table, split, described = table.select_queries(sp.train), None, sp
    elif split == "train" and not (table.queries.split.astype(str) != "").any():
        described = "all"  # no split labels: the rows used are every query (from_table's warning says so)
    with warnings.catch_warnings(record=True) as caught, task(f"society: {s.metric} distances between the actors"):
        warnings.simplefilter("always")
        soc, dist, dropped = prepare(run_table, s.metric, split=split, nan=s.nan)  # type: ignore[arg-type]
    notes = [str(w.message) for w in caught]
    div = diversity_from_distances(dist, s.linkage, names=soc.names, n_dropped_items=dropped, notes=notes)
    report = SocietyReport(s, Provenance.of(table, described, seed=seed), div)
    if s.coreset is not None:
        if not 1 <= s.coreset <= div.n_actors:
            raise SettingError("coreset", f"must be in 1..{div.n_actors} (the pool's actors), got {s.coreset}")
        report.coreset = greedy_coreset(dist, s.coreset, s.linkage, alpha=s.alpha, behaviour=soc.matrix,
                                        names=soc.names, full_hse=div.hse, stop_fraction=None,
                                        max_size=max(s.coreset, min(div.n_actors, s.curve_max)))
        # the max in the matrix's own dtype is exact; only the per-item maxima become float64
        report.pool_oracle_accuracy = float(np.max(soc.matrix, axis=0).astype(np.float64).mean())
    del soc
    specs = []
    for col in s.by or ():
        spec = table_specialists(run_table, col, split)
        sdiv = diversity(spec, s.metric, s.linkage)
        specs.append(spec)
        report.specialists.append({"by": col, "n_experts": sdiv.n_actors, "experts": sdiv.names, "hse": sdiv.hse,
                                   "hse_normalized": sdiv.hse_normalized, "notes": spec.notes})
    if len(specs) > 1:
        udiv = diversity(union_society(*specs), s.metric, s.linkage)
        report.specialists_union = {"by": list(s.by or ()), "n_experts": udiv.n_actors, "hse": udiv.hse,
                                    "hse_normalized": udiv.hse_normalized}
    return report


def society_records(report: SocietyReport) -> list[MetricRecord]:
    """The records of a society run (see the module docstring)."""
    div = report.diversity
    out = [MetricRecord.of("pool", name, value) for name, value in (
        ("hse", div.hse), ("hse_normalized", div.hse_normalized), ("max_hse", div.max_hse),
        ("n_actors", div.n_actors), ("n_items", div.n_items))]
    cs = report.coreset
    if cs is not None:
        out.append(MetricRecord.of("pool", "oracle_accuracy", report.pool_oracle_accuracy))
        out += [MetricRecord.of("coreset", "size_90", cs.size_90), MetricRecord.of("coreset", "size_95", cs.size_95)]
        for p in cs.curve:
            values = {"hse": p.hse, "hse_normalized": p.hse_normalized, "oracle_accuracy": p.oracle_accuracy,
                      "objective": p.objective if cs.alpha < 1.0 else None}
            out += [MetricRecord.of("coreset", k, v, slice=f"size={p.size}") for k, v in values.items()
                    if v is not None]
    for sp in report.specialists:
        out += [MetricRecord.of("specialists", k, v, slice=f"by={sp['by']}") for k, v in (
            ("hse", sp["hse"]), ("hse_normalized", sp["hse_normalized"]), ("n_actors", sp["n_experts"]))]
    if report.specialists_union is not None:
        u = report.specialists_union
        where = "by=" + "+".join(u["by"])
        out += [MetricRecord.of("specialists", k, v, slice=where) for k, v in (
            ("hse", u["hse"]), ("hse_normalized", u["hse_normalized"]), ("n_actors", u["n_experts"]))]
    return out


@register_protocol("society")
class SocietyProtocol(Protocol):
    summary = "diversity of the pool (HSE), its greedy max-HSE coreset and the specialist societies"
    spec = "SPEC 2"
    Settings = SocietySettings
    uses_routers = False

    def run(self, table: RoutingTable, settings: Any, seed: int = 0, routers: Sequence[Any] = (),
            context: RunContext | None = None) -> Result:
        report = run_society(table, settings, seed)
        return Result(self.name, report.provenance, settings, society_records(report), native=report,
                      notes=report.notes)


__all__ = ["CURVE_MAX", "SocietyProtocol", "SocietyReport", "SocietySettings", "run_society", "society_records"]
