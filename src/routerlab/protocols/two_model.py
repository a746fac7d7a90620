"""Two-model routing with in-domain and out-of-domain evaluation (SPEC 6, routerxbench-probedirichlet.txt
sec. 3-5, its Tables 1-2 layout).

A routing table is cut to two actors, the small model first. In-domain datasets are split (``split``) and every
router trains on their train part; each router's two-model score s(q) ("the small model will do") is then read
on the test part of every in-domain dataset and on every query of every out-of-domain dataset, and each
dataset gets the call-rate curve and its metrics (AUROC, LPM, MPM, HCR, AUC, APGR, Perf_S, Perf_L), each with a
95% percentile bootstrap interval over that dataset's queries (SPEC 7). Every curve metric, of the data and of
each resample, comes from :mod:`routerlab.metrics.curves`; this module only splits, trains, resamples and
collects. The resamples of a dataset are drawn once and shared by every router, so two routers' intervals come
from the same resampled queries (paired), and the replicate curves are computed for all resamples at once.

Queries where either model's score is unobserved are dropped (and counted): no curve can score them.
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

import numpy as np
import numpy.typing as npt

from routerlab.data.provenance import Provenance
from routerlab.data.splits import Split, make_split
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.features.registry import Encoder
from routerlab.metrics import curves as C
from routerlab.metrics.bootstrap import percentile_interval, resample_indices
from routerlab.progress import task, track
from routerlab.protocols.full import RouterLike, applicable_routers, featurize, interval, router_label
from routerlab.routers.base import Router
from routerlab.routers.two_model import TwoModelRouter, two_model_score

FloatArray = npt.NDArray[np.float64]

BOOT_METRICS = C.RESAMPLED
"""The metrics that carry a bootstrap interval (``<metric>_ci``)."""
METRICS = C.TWO_MODEL_METRICS
CONVENTIONS = ("routerlab", "routerxbench")
"""The curve conventions the protocol offers: RouteLLM's 11 threshold points have no call-rate grid to read
LPM, MPM and HCR on (:mod:`routerlab.metrics.curves`)."""
DROPPED_UNOBSERVED = "small_or_large_unobserved"


# --------------------------------------------------------------------------------------------- results
@dataclass
class TwoModelRouterResult:
    """One router's metrics per dataset (``datasets``), their in- and out-of-domain means, and its curves."""

    spec: str
    datasets: dict[str, dict[str, Any]]
    id_mean: dict[str, Any]
    ood_mean: dict[str, Any] | None
    curves: dict[str, dict[str, list[float]]]
    fit_seconds: float = 0.0
    versus: dict[str, Any] | None = None  # paired differences against the run's reference router (compare_to)

    def to_dict(self) -> dict[str, Any]:
        out = {"router": self.spec, "datasets": self.datasets, "id_mean": self.id_mean, "ood_mean": self.ood_mean,
               "fit_seconds": round(self.fit_seconds, 4)}
        if self.versus is not None:
            out["versus"] = self.versus
        return out


@dataclass
class TwoModelResult:
    """Everything one two-model run produced, with what is needed to reproduce it (SPEC 6-7)."""

    provenance: Provenance
    small: str
    large: str
    convention: str
    lpm_band: tuple[float, float]
    rp_band: tuple[float, float]
    n_boot: int
    id_datasets: list[str]
    ood_datasets: list[str]
    dropped: dict[str, int]
    signals: dict[str, Any] | None
    results: list[TwoModelRouterResult] = field(default_factory=list)

    def result(self, spec: str) -> TwoModelRouterResult:
        """The result of the router labelled ``spec``."""
        for r in self.results:
            if r.spec == spec:
                return r
        raise KeyError(spec)

    def to_dict(self) -> dict[str, Any]:
        """The two-model result record (docs/two-model.md); NaN stays NaN here, JSON writers make it null."""
        return {
            **self.provenance.to_dict(),
            "small": self.small, "large": self.large, "convention": self.convention,
            "bands": {"lpm": list(self.lpm_band), "rp": list(self.rp_band)}, "n_boot": self.n_boot,
            "id_datasets": list(self.id_datasets), "ood_datasets": list(self.ood_datasets),
            "dropped": dict(self.dropped), "signals": self.signals,
            "results": [r.to_dict() for r in self.results],
            "curves": {r.spec: r.curves for r in self.results},
        }


# --------------------------------------------------------------------------------------------- checks
def check_band(band: Sequence[float], what: str) -> tuple[float, float]:
    """A band (lo, hi): two finite numbers in [0, 1], lo <= hi; a UsageError naming ``what`` otherwise."""
    values = tuple(band)
    if len(values) != 2:
        raise UsageError(f"{what} needs two numbers LO,HI, got {len(values)}")
    try:
        lo, hi = float(values[0]), float(values[1])
    except (TypeError, ValueError):
        raise UsageError(f"{what} must be two numbers in [0, 1], got {values!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and 0.0 <= lo <= 1.0 and 0.0 <= hi <= 1.0):
        raise UsageError(f"{what} must be two numbers in [0, 1], got {lo:g},{hi:g}")
    if lo > hi:
        raise UsageError(f"{what} must have LO <= HI, got {lo:g},{hi:g}")
    return lo, hi


def check_convention(convention: str) -> str:
    if convention not in CONVENTIONS:
        extra = (" (RouteLLM's 11 threshold points have no call-rate grid for LPM, MPM and HCR)"
                 if convention in get_args(C.Convention) else "")
        raise UsageError(f"convention must be one of {', '.join(CONVENTIONS)}, got {convention!r}{extra}")
    return convention


def pair_table(table: RoutingTable, small: str, large: str) -> RoutingTable:
    """``table`` cut to the actors ``small`` and ``large``, in that order (a UsageError listing the actors)."""
    names = table.actor_names
    for role, actor in (("small", small), ("large", large)):
        if actor not in names:
            raise UsageError(f"unknown {role} actor {actor!r}; the table's actors are {', '.join(names)}")
    if small == large:
        raise UsageError(f"the small and the large model are both {small!r}; name two different actors")
    return table.select_actors([small, large])


def resolve_domains(datasets: Sequence[str], id_datasets: Sequence[str] | None, ood_datasets: Sequence[str]
                    ) -> tuple[list[str], list[str]]:
    """(in-domain, out-of-domain) dataset names, each in the order given (``id_datasets`` None: every dataset not
    named out-of-domain, in the table's order). A name given twice, in both lists, or not in the table is a
    UsageError."""
    present = list(dict.fromkeys(datasets))
    ood = list(ood_datasets)
    ids = [d for d in present if d not in ood] if id_datasets is None else list(id_datasets)
    for what, names in (("in-domain", ids), ("out-of-domain", ood)):
        unknown = [d for d in names if d not in present]
        if unknown:
            raise UsageError(f"unknown {what} dataset {unknown[0]!r}; the table has {', '.join(present)}")
        if len(set(names)) != len(names):
            raise UsageError(f"{what} dataset {next(d for d in names if names.count(d) > 1)!r} is named twice")
    both = [d for d in ids if d in ood]
    if both:
        raise UsageError(f"dataset {both[0]!r} is named both in-domain and out-of-domain")
    if not ids:
        raise UsageError("no in-domain dataset is left to train on; name some with id_datasets (--id)")
    return ids, ood


# --------------------------------------------------------------------------------------------- protocol
def run_two_model(
    table: RoutingTable,
    small: str,
    large: str,
    routers: Sequence[RouterLike],
    *,
    signals: str | Path | None = None,
    id_datasets: Sequence[str] | None = None,
    ood_datasets: Sequence[str] = (),
    split: str | Split = "random:0.2",
    seed: int = 0,
    encoder: str | Encoder | None = None,
    n_boot: int = 1000,
    convention: str = "routerlab",
    lpm_band: tuple[float, float] = (0.25, 0.30),
    rp_band: tuple[float, float] = (0.85, 0.95),
    compare_to: str | None = None,
) -> TwoModelResult:
    """Train ``routers`` on the in-domain train part and score each in-domain test part and each out-of-domain
    dataset (module docstring; SPEC 6). ``signals`` (an extract directory or an ``.npz``) adds the small
    model's per-query signals to the features, for the routers that read them; a router that needs a signal
    the features lack is an error before any router is trained. ``encoder`` defaults to evaluate's (tfidf),
    fitted on the training texts. ``compare_to`` (a router label of the run) adds to every other router its
    paired differences from that router (``versus``): each metric's difference with an interval from the same
    resamples, per dataset and for the ID / OOD means. Same inputs and seed give the same numbers."""
    convention = check_convention(convention)
    lpm_band, rp_band = check_band(lpm_band, "lpm_band"), check_band(rp_band, "rp_band")
    if int(n_boot) < 1:
        raise UsageError(f"n_boot must be at least 1, got {n_boot}")
    if int(seed) < 0:
        raise UsageError(f"seed must be >= 0, got {seed}")
    if not routers:
        raise UsageError("name at least one router, e.g. oracle,best-single,knn")
    labels = [router_label(r) for r in routers]
    repeated = [x for x in labels if labels.count(x) > 1]
    if repeated:
        raise UsageError(f"router {repeated[0]!r} is named twice; each router of a run needs its own label")
    if compare_to is not None and compare_to not in labels:
        raise UsageError(f"compare_to {compare_to!r} is not a router of this run ({', '.join(labels)})")
    resolve_domains(table.queries.dataset.astype(str).tolist(), id_datasets, ood_datasets)  # names first
    pair = pair_table(table, small, large)
    observed = ~np.isnan(pair.score).any(axis=1)
    dropped = {DROPPED_UNOBSERVED: int((~observed).sum())}
    pair = pair.select_queries(observed)
    datasets = pair.queries.dataset.astype(str)
    gone = [d for d in list(id_datasets or []) + list(ood_datasets) if d not in set(datasets.tolist())]
    if gone:
        raise UsageError(f"dataset {gone[0]!r} has no query where both {small!r} and {large!r} are observed")
    id_names, ood_names = resolve_domains(datasets.tolist(), id_datasets, ood_datasets)

    id_rows = np.flatnonzero(np.isin(datasets, id_names))
    sp = split if isinstance(split, Split) else _split(pair.select_queries(id_rows), split, seed)
    train_rows = id_rows[sp.train]
    eval_rows = np.sort(np.concatenate([id_rows[sp.test], np.flatnonzero(np.isin(datasets, ood_names))]))
    train, evaluation = pair.select_queries(train_rows), pair.select_queries(eval_rows)
    eval_sets = evaluation.queries.dataset.astype(str)
    empty = [d for d in id_names if not (eval_sets == d).any()]
    if empty:
        raise UsageError(f"in-domain dataset {empty[0]!r} has no test query under split {_split_name(split)!r}; "
                         "use a larger test fraction or fewer datasets")

    chosen, _ = applicable_routers(list(routers), train, seed)  # every router checked before any is trained
    ftrain, feval = featurize(train, evaluation, encoder or "tfidf")
    summary = None
    if signals is not None:
        ftrain, feval, summary = _attach_signals(Path(signals), pair, train_rows, eval_rows, ftrain, feval)
    _check_signals(chosen, ftrain)

    scores: dict[str, FloatArray] = {}
    seconds: dict[str, float] = {}
    for spec, router in track(chosen, "two-model: router", unit="router", label=lambda item: item[0]):
        t0 = time.perf_counter()
        router.fit(train, ftrain)
        if router.uses_test_labels:  # a bound: the only routers handed the test outcomes
            router.reveal(evaluation)
        scores[spec] = _two_model_scores(router, feval)
        seconds[spec] = time.perf_counter() - t0

    result = TwoModelResult(
        provenance=Provenance.of(table, sp, seed=seed, encoder=ftrain.encoder, routers=labels,
                                 split_extra={"n_evaluated": int(evaluation.n_queries)}),
        small=small, large=large, convention=convention, lpm_band=lpm_band, rp_band=rp_band, n_boot=int(n_boot),
        id_datasets=id_names, ood_datasets=ood_names, dropped=dropped, signals=summary,
    )
    with task("two-model: curves and bootstrap intervals"):
        cells = _score_datasets(scores, evaluation, [*id_names, *ood_names], convention, lpm_band, rp_band,
                                int(n_boot), int(seed))
    for spec in scores:
        per = cells[spec]
        result.results.append(TwoModelRouterResult(
            spec=spec, datasets={d: per[d].cell for d in per},
            id_mean=_mean_cell([per[d] for d in id_names]),
            ood_mean=_mean_cell([per[d] for d in ood_names]) if ood_names else None,
            curves={d: {"x": per[d].x.tolist(), "phi": per[d].phi.tolist()} for d in per},
            fit_seconds=seconds[spec],
            versus=(_versus(per, cells[compare_to], compare_to, id_names, ood_names)
                    if compare_to is not None and compare_to in cells and spec != compare_to else None),
        ))
    return result


def _versus(per: Mapping[str, _Cell], ref: Mapping[str, _Cell], reference: str, id_names: Sequence[str],
            ood_names: Sequence[str]) -> dict[str, Any]:
    """Paired differences (this router - ``reference``) of every bootstrapped metric: the point difference and a
    95% interval from the replicate differences (the routers share each dataset's resamples), per dataset and
    for the ID / OOD means (replicate-wise means of the differences)."""
    def diff(mine: Sequence[_Cell], theirs: Sequence[_Cell]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for m in BOOT_METRICS:
            value = float(np.mean([a.cell[m] - b.cell[m] for a, b in zip(mine, theirs, strict=True)]))
            reps = np.mean(np.stack([a.replicates[m] - b.replicates[m] for a, b in zip(mine, theirs, strict=True)]),
                           axis=0)
            out[f"{m}_diff"] = value
            out[f"{m}_diff_ci"] = list(interval(value, *percentile_interval(reps)))
        return out

    return {"reference": reference,
            "datasets": {d: diff([per[d]], [ref[d]]) for d in per},
            "id_mean": diff([per[d] for d in id_names], [ref[d] for d in id_names]),
            "ood_mean": diff([per[d] for d in ood_names], [ref[d] for d in ood_names]) if ood_names else None}


def _split_name(split: str | Split) -> str:
    return split if isinstance(split, str) else split.kind


def _split(id_table: RoutingTable, spec: str, seed: int) -> Split:
    """The in-domain split; ``ood:`` is refused here, since out-of-domain datasets are named with --ood."""
    if spec.partition(":")[0] == "ood":
        raise UsageError("split 'ood:...' does not apply here: name out-of-domain datasets with ood_datasets "
                         "(--ood D1,D2); the split divides the in-domain queries (given, random[:F])")
    return make_split(id_table, spec, seed)


def _two_model_scores(router: Router, features: Features) -> FloatArray:
    """s(q) of a fitted router: its own for a two-model router, the oracle's dense rank of (small - large,
    small) from the revealed outcomes, else its small column minus its large one."""
    if router.name == "oracle" and router.uses_test_labels:
        outcomes = router.outcomes(features).score.astype(np.float64)
        return C.oracle_two_model_score(outcomes[:, 0], outcomes[:, 1])
    if isinstance(router, TwoModelRouter):
        return router.small_score(features)
    return two_model_score(router, router.scores(features))


# --------------------------------------------------------------------------------------------- signals
def _attach_signals(path: Path, pair: RoutingTable, train_rows: npt.NDArray[np.intp],
                    eval_rows: npt.NDArray[np.intp], ftrain: Features, feval: Features
                    ) -> tuple[Features, Features, dict[str, Any]]:
    """The features with the small model's signals of their queries (joined by query id) and a summary of
    where they came from, for the result record."""
    from routerlab.features.registry import text_list
    from routerlab.features.signals import load_signals, read_manifest

    rows = np.concatenate([train_rows, eval_rows])
    ids = [str(q) for q in pair.queries.ids[rows].tolist()]
    arrays = load_signals(path, ids, text_list(pair.queries.text[rows]))
    cut = train_rows.size
    ftrain = ftrain.with_signals({k: v[:cut] for k, v in arrays.items()})
    feval = feval.with_signals({k: v[cut:] for k, v in arrays.items()})
    manifest = read_manifest(path)
    summary: dict[str, Any] = {"path": str(path), "kind": "extract" if path.is_dir() else "npz",
                               "arrays": {k: list(v.shape[1:]) for k, v in sorted(arrays.items())}}
    for key in ("model_id", "layers", "dim", "settings"):
        if key in manifest:
            summary[key] = manifest[key]
    return ftrain, feval, summary


def _check_signals(chosen: Sequence[tuple[str, Router]], ftrain: Features) -> None:
    """Before any training: a two-model router whose features lack a signal it reads (``reads_signals``) raises
    that router's own message, saying how to extract it."""
    for _, router in chosen:
        if isinstance(router, TwoModelRouter):
            router.check_signals(ftrain)


# --------------------------------------------------------------------------------------------- metrics
@dataclass
class _Cell:
    """One router on one dataset: the point values (``cell``, JSON-ready), the curve, and the replicates of
    every bootstrapped metric (for the replicate-wise means)."""

    cell: dict[str, Any]
    x: FloatArray
    phi: FloatArray
    replicates: dict[str, FloatArray]


def _dataset_seed(seed: int, name: str) -> int:
    """The resampling seed of one dataset: a function of the run's seed and the dataset's name only, so a
    dataset is resampled the same way whichever other datasets are in the run."""
    state = np.random.SeedSequence([seed, zlib.crc32(name.encode("utf-8"))]).generate_state(1)
    return int(state[0])


def _score_datasets(scores: Mapping[str, FloatArray], evaluation: RoutingTable, names: Sequence[str],
                    convention: str, lpm_band: tuple[float, float], rp_band: tuple[float, float], n_boot: int,
                    seed: int) -> dict[str, dict[str, _Cell]]:
    """Every router's cell on every dataset: point metrics and the resamples' metrics from metrics.curves, the
    resamples drawn once per dataset and shared by all routers (with their multiplicities)."""
    datasets = evaluation.queries.dataset.astype(str)
    out: dict[str, dict[str, _Cell]] = {spec: {} for spec in scores}
    kind: C.AurocConvention = "routerxbench" if convention == "routerxbench" else "routerlab"
    for name in names:
        rows = np.flatnonzero(datasets == name)
        small = evaluation.score[rows, 0].astype(np.float64)
        large = evaluation.score[rows, 1].astype(np.float64)
        reps: dict[str, dict[str, list[FloatArray]]] = {spec: {m: [] for m in BOOT_METRICS} for spec in scores}
        points: dict[str, tuple[C.CallRateCurve, dict[str, float]]] = {}
        for spec, s_all in scores.items():
            s = s_all[rows]
            curve = C.call_rate_curve(s, small, large, convention=kind)
            points[spec] = (curve, C.two_model_metrics(curve, s, small, large, lpm_band, rp_band))
        exact = C.exact_sum_dtype(small, large)
        for idx in resample_indices(rows.size, n_boot, _dataset_seed(seed, name)):
            counts = C.resample_counts(idx, rows.size, exact) if kind == "routerlab" else None
            for spec, s_all in scores.items():
                values = C.resampled_two_model_metrics(s_all[rows], small, large, idx, kind, lpm_band, rp_band,
                                                       counts=counts)
                for m in BOOT_METRICS:
                    reps[spec][m].append(values[m])
        for spec in scores:
            curve, point = points[spec]
            joined = {m: np.concatenate(reps[spec][m]) for m in BOOT_METRICS}
            cell: dict[str, Any] = {"n": int(rows.size)}
            for m in METRICS:
                cell[m] = point[m]
                if m in joined:
                    cell[f"{m}_ci"] = list(interval(point[m], *percentile_interval(joined[m])))
            out[spec][name] = _Cell(cell, curve.x, curve.phi, joined)
    return out


def _mean_cell(cells: Sequence[_Cell]) -> dict[str, Any]:
    """Mean over datasets of each metric (NaN when one dataset's value is NaN); the interval from the
    replicate-wise means (the datasets' resamples are independent)."""
    out: dict[str, Any] = {}
    for m in METRICS:
        value = float(np.mean([c.cell[m] for c in cells]))
        out[m] = value
        if m in BOOT_METRICS:
            means = np.mean(np.stack([c.replicates[m] for c in cells]), axis=0)
            out[f"{m}_ci"] = list(interval(value, *percentile_interval(means)))
    return out
