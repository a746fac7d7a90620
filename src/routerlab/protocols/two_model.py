"""Two-model routing with in-domain and out-of-domain evaluation (SPEC 6, routerxbench-probedirichlet.txt
sec. 3-5, its Tables 1-2 layout), registered as the protocol ``two-model``.

A routing table is cut to two actors, the small model first. In-domain datasets are split (``split``) and every
router trains on their train part; each router's two-model score s(q) ("the small model will do") is then read
on the test part of every in-domain dataset and on every query of every out-of-domain dataset, and each
dataset gets the call-rate curve and its metrics (AUROC, LPM, MPM, HCR, AUC, APGR, Perf_S, Perf_L), each with a
95% percentile bootstrap interval over that dataset's queries (SPEC 7). Every curve metric, of the data and of
each resample, comes from :mod:`routerlab.metrics.curves`; this module only splits, trains, resamples and
collects. The resamples of a dataset are drawn once and shared by every router, so two routers' intervals come
from the same resampled queries (paired), and the replicate curves are computed for all resamples at once.

Queries where either model's score is unobserved are dropped (and counted): no curve can score them.

The protocol's records (:func:`two_model_records`) are one per router, metric and slice: ``dataset=NAME`` for
each evaluated dataset, ``domain=id`` and ``domain=ood`` for the means over the in-domain and out-of-domain
datasets; the run has no pooled whole-test number, so no record has the slice ``''``. Beside them, the
artifacts ``curves`` (each router's Phi per dataset) and ``per_query`` (:class:`TwoModelScores`: every
evaluated query's s(q) per router, from which any call rate's per-query decisions follow).

The curve metrics describe a router's *ranking* of the test queries: every call rate is read off that ranking.
A decision at one call rate is another thing: with a development part (``dev``, issue 23) a seeded share of the
in-domain training queries is held out, each router's threshold for the target ``call_rate`` is fixed on its s(q)
there (:func:`routerlab.metrics.operating_points.threshold_for_rate`) and applied unchanged to every evaluated
query (:func:`~routerlab.metrics.operating_points.escalate`); each router's ``operating_point`` reports the
realized call rate next to the target and Phi there, per dataset and pooled over each domain's queries (records
``call_rate`` and ``phi_at_call_rate``). Bounds (they read the outcomes of what they route) get none.

For RouterXBench's replication (docs/two-model.md): the share of the evaluated queries both models fail (record
``both_fail``, under every router: they route the same queries), each router's Youden-J threshold for "the large
model is needed" fixed on the development part or else on the training queries and applied to test (records
``youden_accuracy``, ``youden_j``), a hidden-state probe's layer weights (``layer_weight``, slice ``layer=L``), and
with ``train_sizes`` every router retrained on nested seeded shares of the training queries (every metric with the
slices ``train_size=F,dataset=NAME`` / ``train_size=F,domain=id|ood``).
"""

from __future__ import annotations

import dataclasses
import math
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

import numpy as np
import numpy.typing as npt

from routerlab._spec import Interval
from routerlab._words import plural, verb
from routerlab.data.provenance import Provenance
from routerlab.data.splits import Split, make_split, with_dev
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.features.registry import Encoder
from routerlab.metrics import curves as C
from routerlab.metrics.bootstrap import enough_queries, percentile_interval, resample_indices, warn_few_queries
from routerlab.metrics.operating_points import escalate, threshold_for_rate
from routerlab.progress import task, track
from routerlab.protocols.base import (
    ENCODER_HELP,
    NBOOT,
    NBOOT_HELP,
    MetricRecord,
    Protocol,
    ProtocolSettings,
    Result,
    RunContext,
    SettingError,
    check_dev,
    check_encoder,
    check_split,
    register_protocol,
    setting,
)
from routerlab.protocols.full import RouterLike, applicable_routers, featurize, interval, router_label
from routerlab.routers.base import DevPart, Router
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
    # with a development part: the threshold for the target call rate fixed on it and what it does on test
    operating_point: dict[str, Any] | None = None
    # with a development part, for a router that trains by epochs (the probes, mlp, barp): the epoch it kept there
    early_stopping: dict[str, Any] | None = None
    # the Youden-J threshold fixed on the development part (or the training queries) and its routing on test
    youden: dict[str, Any] | None = None
    # a hidden-state probe's inference layer weights (index = layer; ProbeDirichlet's normalised concentration)
    layer_weights: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"router": self.spec, "datasets": self.datasets, "id_mean": self.id_mean,
                               "ood_mean": self.ood_mean, "fit_seconds": round(self.fit_seconds, 4)}
        if self.versus is not None:
            out["versus"] = self.versus
        if self.operating_point is not None:
            out["operating_point"] = self.operating_point
        if self.early_stopping is not None:
            out["early_stopping"] = self.early_stopping
        if self.youden is not None:
            out["youden"] = self.youden
        if self.layer_weights is not None:
            out["layer_weights"] = self.layer_weights
        return out


@dataclass
class TwoModelScores:
    """The evaluated queries of a two-model run, in its order (in-domain test parts and out-of-domain datasets,
    by table row): their ids and datasets, both models' scores, and each router's s(q) ("the small model will
    do"; the lowest are escalated first). Every per-query decision of the run follows from these."""

    ids: list[str]
    datasets: list[str]
    small: FloatArray
    large: FloatArray
    scores: dict[str, FloatArray]

    def escalated(self, spec: str, rate: float) -> npt.NDArray[np.int64]:
        """Router ``spec``'s choice per query at call rate ``rate``, 1 = the large model: the round(rate * n)
        queries with the lowest s(q) (ties in query order), one threshold over every evaluated query."""
        n = len(self.ids)
        choice = np.zeros(n, dtype=np.int64)
        choice[np.argsort(self.scores[spec], kind="stable")[:round(rate * n)]] = 1
        return choice

    def at_call_rate(self, rate: float, n_boot: int, seed: int
                     ) -> tuple[dict[str, npt.NDArray[np.int64]], dict[str, FloatArray], dict[str, dict[str, Any]]]:
        """Every router's choices (:meth:`escalated`), the scores of the answers they give, and per router Phi at
        ``rate`` (their mean) with its 95% bootstrap interval (``n_boot`` resamples of the queries, ``seed``), the
        share of the large model's mean score it keeps and the share of the queries sent to the large model."""
        from routerlab.metrics.bootstrap import bootstrap_ci

        n = len(self.ids)
        perf_l = float(self.large.mean())
        choices: dict[str, npt.NDArray[np.int64]] = {}
        got: dict[str, FloatArray] = {}
        stats: dict[str, dict[str, Any]] = {}
        for spec in self.scores:
            choice = self.escalated(spec, rate)
            answered = np.where(choice == 1, self.large, self.small)
            est = bootstrap_ci(answered, n_boot=n_boot, seed=seed)
            choices[spec], got[spec] = choice, answered
            stats[spec] = {"phi": est.value, "ci": [est.lo, est.hi], "share_of_large": est.value / perf_l
                           if perf_l > 0 else math.nan, "perf_large": perf_l, "perf_small": float(self.small.mean()),
                           "call_rate": round(rate * n) / n if n else math.nan}
        return choices, got, stats


@dataclass
class TwoModelResult:
    """Everything one two-model run produced, with what is needed to reproduce it (SPEC 6-7). ``per_query``
    (not part of the record) holds every evaluated query's scores."""

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
    per_query: TwoModelScores | None = None
    # the share of the evaluated queries both models fail (appendix D.2), per dataset and the ID / OOD means
    both_fail: dict[str, Any] | None = None
    # with train_sizes: each router's metrics when trained on nested seeded shares of the training queries
    train_sizes: list[dict[str, Any]] | None = None

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
            **({"both_fail": self.both_fail} if self.both_fail is not None else {}),
            **({"train_sizes": self.train_sizes} if self.train_sizes is not None else {}),
        }


# ------------------------------------------------------------------------------------- settings and checks
def check_band(band: Any) -> tuple[float, float]:
    """A band (lo, hi) from ``LO,HI`` text or a pair of numbers: both finite, in [0, 1], lo <= hi (lo = hi is
    one point); a UsageError saying why otherwise (the caller names the band)."""
    if isinstance(band, str):
        values: list[Any] = [x.strip() for x in band.split(",")]
    elif isinstance(band, list | tuple):
        values = list(band)
    else:
        raise UsageError(f"must be two numbers LO,HI in [0, 1], got {band!r}")
    if len(values) != 2:
        shown = repr(band) if isinstance(band, str) else f"{len(values)} numbers"
        raise UsageError(f"needs two numbers LO,HI in [0, 1], got {shown}")
    try:
        if any(isinstance(v, bool) for v in values):
            raise TypeError
        lo, hi = float(values[0]), float(values[1])
    except (TypeError, ValueError):
        raise UsageError(f"must be two numbers in [0, 1], got {band!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and 0.0 <= lo <= 1.0 and 0.0 <= hi <= 1.0):
        raise UsageError(f"must be two numbers in [0, 1], got {lo:g},{hi:g}")
    if lo > hi:
        raise UsageError(f"must have LO <= HI, got {lo:g},{hi:g}")
    return lo, hi


def check_convention(convention: str) -> str:
    """One of :data:`CONVENTIONS` (RouteLLM's is refused with the reason)."""
    if convention not in CONVENTIONS:
        extra = (" (RouteLLM's 11 threshold points have no call-rate grid for LPM, MPM and HCR)"
                 if convention in get_args(C.Convention) else "")
        raise UsageError(f"must be one of {', '.join(CONVENTIONS)}, got {convention!r}{extra}")
    return convention


def check_two_model_split(spec: str) -> str:
    """A split of the in-domain queries (given[:NAME], random[:F]); ``ood:`` is refused: out-of-domain datasets
    are named with ood_datasets (--ood)."""
    if spec.partition(":")[0] == "ood":
        raise UsageError("'ood:...' does not apply here: name out-of-domain datasets with ood_datasets "
                         "(--ood D1,D2); the split divides the in-domain queries (given, random[:F])")
    return check_split(spec)


def check_features(path: str) -> str:
    """The signals' path: an extract directory or a file (.npz) that exists."""
    if not (Path(path).is_dir() or Path(path).is_file()):
        raise UsageError(f"no such directory or file: {path}")
    return path


def _checked(name: str, check: Any, value: Any) -> Any:
    """``value`` through a setting's own check, its error naming ``name`` as a setting's does."""
    try:
        return check(value)
    except SettingError:
        raise
    except UsageError as exc:
        raise SettingError(name, str(exc)) from None


PAIR_HELP = "(default: the pair the table designates, set by routerlab join --small A --large B)"
DEFAULT_CALL_RATE = 0.30
"""The target call rate of the operating point fixed on the development part when none is named (the top of the
default LPM band, the audit's call rate)."""


def check_call_rate(rate: Any) -> float:
    """A target call rate: a number in [0, 1]."""
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0.0 <= float(rate) <= 1.0:
        raise UsageError(f"must be a number in [0, 1], got {rate!r}")
    return float(rate)
BAND_TYPE = "pair of float"


def check_train_sizes(sizes: tuple[float, ...] | None) -> tuple[float, ...] | None:
    """Training-size shares (each in (0, 1] by the rule) in increasing order: the nested subsets grow."""
    if sizes is not None and list(sizes) != sorted(sizes):
        raise UsageError(f"must be in increasing order (nested subsets grow), got {','.join(f'{v:g}' for v in sizes)}")
    return sizes


@dataclass(frozen=True)
class TwoModelSettings(ProtocolSettings):
    """The settings of ``routerlab two-model`` that change its numbers (the routers and seed are the run's)."""

    small: str | None = setting(None, f"the small model: the actor that answers by default {PAIR_HELP}")
    large: str | None = setting(None, f"the large model: the actor a query is escalated to {PAIR_HELP}")
    features: str | None = setting(
        None, "the small model's signals: a routerlab extract directory or an .npz of arrays (ids + hidden / "
              "option_logits / self_ask / samples), joined by query id", check=check_features, path=True)
    id_datasets: tuple[str, ...] | None = setting(
        None, "in-domain datasets (default: every dataset not named out-of-domain)", option="--id")
    ood_datasets: tuple[str, ...] | None = setting(
        None, "out-of-domain datasets: evaluated whole, never trained on (default: none)", option="--ood")
    split: str = setting("random:0.2", "split of the in-domain queries: random[:F] (seeded, stratified by "
                                       "dataset) or given[:NAME]", check=check_two_model_split)
    encoder: str = setting("tfidf", ENCODER_HELP, check=check_encoder)
    n_boot: int = setting(1000, NBOOT_HELP, NBOOT, option="--boot")
    convention: str = setting("routerlab", "curve convention: routerlab (exact tie expectation) or routerxbench "
                                           "(its released code)", check=check_convention)
    # the bands are typed Any for the base, which refuses a repeated value in a list setting (LO = HI is a valid
    # one-point band): check_band parses and checks them, and they hold a (float, float) tuple
    lpm_band: Any = setting((0.25, 0.30), "LPM call-rate band LO,HI in [0, 1]",  # noqa: RUF009
                            check=check_band)
    rp_band: Any = setting((0.85, 0.95), "HCR relative-performance band R1,R2 in [0, 1] (tau_i = "  # noqa: RUF009
                                         "Perf_S + R_i (Perf_L - Perf_S))", check=check_band)
    compare_to: str | None = setting(
        None, "a router of the run: every other router gets its paired differences from it (each metric's "
              "difference with a 95% interval from the same resamples); none = off")
    dev: float | None = setting(
        None, "hold out a seeded fraction F of the in-domain training queries (stratified by dataset) as a "
              "development part, on which each router's threshold for call_rate is fixed; none = no development "
              "part", check=check_dev)
    call_rate: float | None = setting(
        None, f"with dev: the target share of queries sent to the large model (default {DEFAULT_CALL_RATE:g}); its "
              "threshold is fixed on the development part and applied unchanged to the test queries",
        check=lambda v: None if v is None else check_call_rate(v))
    train_sizes: tuple[float, ...] | None = setting(
        None, "training-size scaling (Fig. 4): shares F of the in-domain training queries (nested seeded subsets, "
              "stratified by dataset); every router is trained again on each and scored on the same test queries; "
              "none = off", Interval(float, 0, 1, closed="right"), check=check_train_sizes)

    def validate(self) -> None:
        if (self.small is None) != (self.large is None):
            given, missing = ("small", "large") if self.small is not None else ("large", "small")
            raise SettingError(missing, f"must be given with {given}: the pair is a small and a large actor")
        if self.small is not None and self.small == self.large:
            raise SettingError("large", f"the small and the large model are both {self.small!r}; name two "
                                        "different actors")
        both = [d for d in self.id_datasets or () if d in (self.ood_datasets or ())]
        if both:
            raise SettingError("ood_datasets", f"dataset {both[0]!r} is named both in-domain and out-of-domain")
        if self.call_rate is not None and self.dev is None:
            raise SettingError("call_rate", "needs dev (--dev F): the threshold for a call rate is fixed on a "
                                            "development part, never on the test queries it is scored on")

    @classmethod
    def describe(cls) -> list[dict[str, Any]]:
        return [{**d, "type": BAND_TYPE} if d["name"] in ("lpm_band", "rp_band") else d for d in super().describe()]


def resolve_pair(table: RoutingTable, small: str | None, large: str | None) -> tuple[str, str]:
    """The (small, large) pair: the one given, else the one ``table`` designates (``routerlab join --small A
    --large B``); a UsageError saying how to name one when there is neither."""
    from routerlab.data.join import two_model_pair

    if small is not None and large is not None:
        return small, large
    pair = two_model_pair(table)
    if pair is None:
        raise UsageError(f"name the small and the large model (small and large, --small A --large B): table "
                         f"{table.name!r} designates no pair (routerlab join TABLE... --small A --large B -o DIR "
                         "designates one)")
    return pair


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
    cache_dir: str | None = None,
    dev: float | None = None,
    call_rate: float | None = None,
    train_sizes: Sequence[float] | None = None,
) -> TwoModelResult:
    """Train ``routers`` on the in-domain train part and score each in-domain test part and each out-of-domain
    dataset (module docstring; SPEC 6). ``signals`` (an extract directory or an ``.npz``) adds the small
    model's per-query signals to the features, for the routers that read them; a router that needs a signal
    the features lack is an error before any router is trained. ``encoder`` defaults to evaluate's (tfidf),
    fitted on the training texts. ``compare_to`` (a router label of the run) adds to every other router its
    paired differences from that router (``versus``): each metric's difference with an interval from the same
    resamples, per dataset and for the ID / OOD means. ``cache_dir`` caches the encoded texts (as evaluate's).
    The arguments go through the same checks as :class:`TwoModelSettings` (the protocol's door, which also takes
    the pair a table designates); here ``n_boot`` may be any count >= 1. Same inputs and seed give the same
    numbers; the result's ``per_query`` holds every evaluated query's s(q) per router. ``dev`` (or a ``split``
    with a development part) holds out that share of the in-domain training queries, on which each router's
    threshold for ``call_rate`` (default 0.30) is fixed (module docstring); without it nothing changes."""
    convention = _checked("convention", check_convention, convention)
    lpm_band, rp_band = _checked("lpm_band", check_band, lpm_band), _checked("rp_band", check_band, rp_band)
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
    if signals is not None:  # another model's hidden states are an error where the table says which it is
        from routerlab.features.signals import check_signals_model

        check_signals_model(signals, table, small)
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
    if dev is not None and not sp.has_dev:
        sp = with_dev(pair.select_queries(id_rows), sp, _checked("dev", check_dev, dev), seed)
    if call_rate is not None and not sp.has_dev:
        raise UsageError("call_rate needs dev (--dev F): the threshold for a call rate is fixed on a development "
                         "part, never on the test queries it is scored on")
    rate = DEFAULT_CALL_RATE if call_rate is None else _checked("call_rate", check_call_rate, call_rate)
    dev_rows = id_rows[sp.dev]
    train_rows = id_rows[sp.train]
    eval_rows = np.sort(np.concatenate([id_rows[sp.test], np.flatnonzero(np.isin(datasets, ood_names))]))
    train, evaluation = pair.select_queries(train_rows), pair.select_queries(eval_rows)
    eval_sets = evaluation.queries.dataset.astype(str)
    empty = [d for d in id_names if not (eval_sets == d).any()]
    if empty:
        raise UsageError(f"in-domain dataset {empty[0]!r} has no test query under split {_split_name(split)!r}; "
                         "use a larger test fraction or fewer datasets")

    chosen, _ = applicable_routers(list(routers), train, seed)  # every router checked before any is trained
    n_eval = eval_rows.size
    fdev: Features | None = None
    if dev_rows.size:  # the development queries encoded beside the evaluated ones (the encoder fitted on train)
        eval_rows = np.concatenate([eval_rows, dev_rows])
    ftrain, feval = featurize(train, pair.select_queries(eval_rows) if dev_rows.size else evaluation,
                              encoder or "tfidf", cache_dir)
    summary = None
    if signals is not None:
        ftrain, feval, summary = _attach_signals(Path(signals), pair, train_rows, eval_rows, ftrain, feval)
    if dev_rows.size:
        fdev, feval = feval.take(np.arange(n_eval, eval_rows.size)), feval.take(np.arange(n_eval))
        eval_rows = eval_rows[:n_eval]
    _check_signals(chosen, ftrain)

    # routers that train by epochs (the probes, mlp, barp) stop on the development part (its signals attached too)
    dev_part = None if fdev is None else DevPart(pair.select_queries(dev_rows), fdev)
    fitted = _fit_and_score(chosen, train, ftrain, feval, fdev, dev_part, evaluation, youden=True)
    scores, dev_scores, seconds, stopped = fitted.scores, fitted.dev_scores, fitted.seconds, fitted.stopped

    result = TwoModelResult(
        provenance=Provenance.of(table, sp, seed=seed, encoder=ftrain.encoder, routers=labels,
                                 split_extra={"n_evaluated": int(evaluation.n_queries)}),
        small=small, large=large, convention=convention, lpm_band=lpm_band, rp_band=rp_band, n_boot=int(n_boot),
        id_datasets=id_names, ood_datasets=ood_names, dropped=dropped, signals=summary,
        per_query=TwoModelScores([str(q) for q in evaluation.queries.ids.tolist()], eval_sets.tolist(),
                                 evaluation.score[:, 0].astype(np.float64), evaluation.score[:, 1].astype(np.float64),
                                 scores),
    )
    with task("two-model: curves and bootstrap intervals"):
        cells = _score_datasets(scores, evaluation, [*id_names, *ood_names], convention, lpm_band, rp_band,
                                int(n_boot), int(seed))
    result.both_fail = both_fail_cells(evaluation, id_names, ood_names, int(n_boot), int(seed))
    fit_on = "dev" if fdev is not None else "train"
    fit_table = pair.select_queries(dev_rows) if fdev is not None else train
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
            operating_point=(operating_point(spec, dev_scores[spec], scores[spec], evaluation, id_names, ood_names,
                                             rate, int(n_boot), int(seed)) if spec in dev_scores else None),
            early_stopping=stopped.get(spec),
            youden=(youden_point(fitted.fit_scores[spec], fit_table, fit_on, scores[spec], evaluation, id_names,
                                 ood_names, int(n_boot), int(seed)) if spec in fitted.fit_scores else None),
            layer_weights=fitted.layer_weights.get(spec),
        ))
    if train_sizes is not None:
        sizes = _checked("train_sizes", check_train_sizes,
                         tuple(_checked("train_sizes", check_train_share, v) for v in train_sizes))
        result.train_sizes = _train_size_runs(
            list(routers), sizes or (), train, ftrain, feval, fdev, dev_part, evaluation, result, cells, id_names,
            ood_names, convention, lpm_band, rp_band, int(n_boot), int(seed))
    return result


def check_train_share(value: Any) -> float:
    """One training-size share: a number in (0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 < float(value) <= 1.0:
        raise UsageError(f"each share must be a number in (0, 1], got {value!r}")
    return float(value)


@dataclass
class _Fitted:
    """What fitting a run's routers gave: s(q) on the evaluated queries (``scores``), on the development ones
    (``dev_scores``, not for bounds), on the queries a Youden threshold is fitted on (``fit_scores``: the
    development part if there is one, else the training queries; not for bounds), fit seconds, the epochs kept,
    and the probes' layer weights."""

    scores: dict[str, FloatArray] = field(default_factory=dict)
    dev_scores: dict[str, FloatArray] = field(default_factory=dict)
    fit_scores: dict[str, FloatArray] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    stopped: dict[str, dict[str, Any]] = field(default_factory=dict)
    layer_weights: dict[str, list[float]] = field(default_factory=dict)


def _fit_and_score(chosen: Sequence[tuple[str, Router]], train: RoutingTable, ftrain: Features, feval: Features,
                   fdev: Features | None, dev_part: DevPart | None, evaluation: RoutingTable, *, youden: bool,
                   label: str = "two-model: router") -> _Fitted:
    """Fit every router on ``train`` (stopping on ``dev_part`` where it trains by epochs), reveal the evaluated
    outcomes to the bounds only, and read each router's s(q) (:class:`_Fitted`). With ``youden`` and no
    development part, non-bounds also score their own training queries, where their Youden threshold is fixed."""
    out = _Fitted()
    for spec, router in track(chosen, label, unit="router", label=lambda item: item[0]):
        t0 = time.perf_counter()
        if dev_part is not None and router.uses_dev:
            router.fit(train, ftrain, dev=dev_part)
            if router.early_stopping is not None:
                out.stopped[spec] = router.early_stopping
        else:
            router.fit(train, ftrain)
        if router.uses_test_labels:  # a bound: the only routers handed the test outcomes
            router.reveal(evaluation)
        elif fdev is not None:  # a bound reads the outcomes of what it routes: no threshold fixed on dev for it
            out.dev_scores[spec] = _two_model_scores(router, fdev)
            if youden:
                out.fit_scores[spec] = out.dev_scores[spec]
        out.scores[spec] = _two_model_scores(router, feval)
        out.seconds[spec] = time.perf_counter() - t0
        if youden and fdev is None and not router.uses_test_labels:  # after the evaluated queries: their s(q) stay
            out.fit_scores[spec] = _two_model_scores(router, ftrain)  # as without it, even for a router that draws
        weights = getattr(router, "layer_weights", None)
        if callable(weights):
            out.layer_weights[spec] = [float(w) for w in weights()]
    return out


def nested_train_subsets(datasets: Sequence[str] | npt.NDArray[Any], shares: Sequence[float], seed: int
                         ) -> list[npt.NDArray[np.intp]]:
    """For each share F (increasing), the rows of a seeded subset of the training queries holding round(F * n_d)
    (at least 1) of each dataset's n_d rows, sorted: one seeded order per dataset, each subset its first rows, so
    every subset holds the smaller ones (nested)."""
    names = np.asarray(datasets).astype(str)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), zlib.crc32(b"train sizes")]))
    orders = {d: rng.permutation(np.flatnonzero(names == d)) for d in dict.fromkeys(names.tolist())}
    out = []
    for share in shares:
        rows = [order[:max(1, round(float(share) * order.size))] for order in orders.values()]
        out.append(np.sort(np.concatenate(rows)).astype(np.intp) if rows else np.zeros(0, dtype=np.intp))
    return out


def _train_size_runs(specs: Sequence[RouterLike], sizes: Sequence[float], train: RoutingTable, ftrain: Features,
                     feval: Features, fdev: Features | None, dev_part: DevPart | None, evaluation: RoutingTable,
                     main: TwoModelResult, main_cells: Mapping[str, Mapping[str, _Cell]], id_names: Sequence[str],
                     ood_names: Sequence[str], convention: str, lpm_band: tuple[float, float],
                     rp_band: tuple[float, float], n_boot: int, seed: int) -> list[dict[str, Any]]:
    """Fig. 4's training-size scaling: per share, every router trained again on the nested subset of the training
    queries and scored like the main run (same evaluated queries, same resamples); share 1 is the main run. A
    router that cannot train on a subset (e.g. one label only) is left out of that share, with the reason."""
    subsets = nested_train_subsets(train.queries.dataset.astype(str), sizes, seed)
    out: list[dict[str, Any]] = []
    for share, rows in zip(sizes, subsets, strict=True):
        entry: dict[str, Any] = {"train_size": float(share), "n_train": int(rows.size), "results": {},
                                 "skipped": {}}
        if rows.size == train.n_queries:
            cells: Mapping[str, Mapping[str, _Cell]] = main_cells
        else:
            sub = train.select_queries(rows)
            chosen, skipped = applicable_routers(list(specs), sub, seed, skip_inapplicable=True)
            entry["skipped"].update(skipped)
            fitted = _Fitted()
            for spec, router in chosen:
                try:
                    one = _fit_and_score([(spec, router)], sub, ftrain.take(rows), feval, fdev, dev_part, evaluation,
                                         youden=False, label=f"two-model: train size {share:g}")
                except UsageError as exc:
                    entry["skipped"][spec] = str(exc)
                    continue
                fitted.scores.update(one.scores)
            cells = _score_datasets(fitted.scores, evaluation, [*id_names, *ood_names], convention, lpm_band,
                                    rp_band, n_boot, seed) if fitted.scores else {}
        for spec, per in cells.items():
            entry["results"][spec] = {
                "datasets": {d: per[d].cell for d in per},
                "id_mean": _mean_cell([per[d] for d in id_names]),
                "ood_mean": _mean_cell([per[d] for d in ood_names]) if ood_names else None}
        out.append(entry)
    return out


def both_fail_cells(evaluation: RoutingTable, id_names: Sequence[str], ood_names: Sequence[str], n_boot: int,
                    seed: int) -> dict[str, Any]:
    """The share of the evaluated queries both models fail (:func:`routerlab.metrics.curves.both_fail`), per
    dataset with a 95% bootstrap interval over its queries, and its mean over the in-domain and out-of-domain
    datasets (interval from the replicate-wise means), as the other metrics' ID / OOD averages."""
    from routerlab.metrics.bootstrap import bootstrap_means

    datasets = evaluation.queries.dataset.astype(str)
    fail = C.both_fail(evaluation.score[:, 0], evaluation.score[:, 1])
    cells: dict[str, dict[str, Any]] = {}
    reps: dict[str, FloatArray] = {}
    for name in [*id_names, *ood_names]:
        v = fail[datasets == name].astype(np.float64)
        value = float(v.mean())
        reps[name] = (bootstrap_means(v, n_boot, _dataset_seed(seed, f"both fail {name}"))
                      if enough_queries(v.size, warn=False) else np.full(n_boot, np.nan))
        cells[name] = {"n": int(v.size), "both_fail": value,
                       "both_fail_ci": list(interval(value, *percentile_interval(reps[name])))}

    def mean(names: Sequence[str]) -> dict[str, Any]:
        value = float(np.mean([cells[d]["both_fail"] for d in names]))
        means = np.mean(np.stack([reps[d] for d in names]), axis=0)
        return {"n": int(sum(cells[d]["n"] for d in names)), "both_fail": value,
                "both_fail_ci": list(interval(value, *percentile_interval(means)))}

    return {"fail_below": C.FAIL_BELOW, "datasets": cells, "id_mean": mean(id_names),
            "ood_mean": mean(ood_names) if ood_names else None}


def youden_point(fit_s: FloatArray, fit_table: RoutingTable, fit_on: str, eval_s: FloatArray,
                 evaluation: RoutingTable, id_names: Sequence[str], ood_names: Sequence[str], n_boot: int, seed: int
                 ) -> dict[str, Any]:
    """A router's Youden-J threshold for "the large model is needed" (not :func:`C.small_good_enough`) fixed on
    its s(q) over ``fit_table`` (``fit_on``: the development part, else the training queries) and applied
    unchanged to the evaluated queries: per dataset and pooled over each domain's queries, J (TPR - FPR), the
    routing accuracy (share sent to the large model exactly when it is needed, with a 95% bootstrap interval) and
    the call rate there."""
    from routerlab.metrics.bootstrap import bootstrap_ci
    from routerlab.metrics.operating_points import routing_accuracy, youden_escalate, youden_j, youden_threshold

    def needed(table: RoutingTable) -> npt.NDArray[np.bool_]:
        return ~C.small_good_enough(table.score[:, 0], table.score[:, 1])

    point = youden_threshold(fit_s, needed(fit_table))
    sent = youden_escalate(eval_s, point)
    y = needed(evaluation)
    datasets = evaluation.queries.dataset.astype(str)

    def cell(mask: npt.NDArray[np.bool_], name: str) -> dict[str, Any]:
        right = (sent[mask] == y[mask]).astype(np.float64)
        value = routing_accuracy(sent[mask], y[mask])
        ci = (math.nan, math.nan)
        if enough_queries(right.size, warn=False):  # the run warns once about its datasets with too few queries
            est = bootstrap_ci(right, n_boot=n_boot, seed=_dataset_seed(seed, f"youden {name}"))
            ci = interval(value, est.lo, est.hi)
        return {"n": int(mask.sum()), "youden_accuracy": value, "youden_accuracy_ci": list(ci),
                "youden_j": youden_j(sent[mask], y[mask]), "call_rate": float(sent[mask].mean())}

    domains = {"id": cell(np.isin(datasets, id_names), "domain=id")}
    if ood_names:
        domains["ood"] = cell(np.isin(datasets, ood_names), "domain=ood")
    return {"fit_on": fit_on, **point.to_dict(), "domains": domains,
            "datasets": {d: cell(datasets == d, d) for d in [*id_names, *ood_names]}}


def operating_point(spec: str, dev_s: FloatArray, eval_s: FloatArray, evaluation: RoutingTable,
                    id_names: Sequence[str], ood_names: Sequence[str], rate: float, n_boot: int, seed: int
                    ) -> dict[str, Any]:
    """Router ``spec``'s threshold for call rate ``rate`` fixed on its development s(q) (``dev_s``) and applied
    unchanged to the evaluated queries (``eval_s``, one seeded coin per router for tied scores): the threshold, the
    call rate it realizes on the development queries, and per dataset and pooled over each domain's queries
    (``id``: the in-domain test queries; ``ood``) the realized call rate, Phi there (the mean score of the answers,
    with a 95% bootstrap interval) and its share of Perf_L."""
    from routerlab.metrics.bootstrap import bootstrap_ci

    threshold = threshold_for_rate(dev_s, rate)
    coin = _dataset_seed(seed, f"operating point {spec}")
    sent = escalate(eval_s, threshold, seed=coin)
    datasets = evaluation.queries.dataset.astype(str)
    small = evaluation.score[:, 0].astype(np.float64)
    large = evaluation.score[:, 1].astype(np.float64)
    answered = np.where(sent, large, small)

    def cell(mask: npt.NDArray[np.bool_], name: str) -> dict[str, Any]:
        n = int(mask.sum())
        est = bootstrap_ci(answered[mask], n_boot=n_boot, seed=_dataset_seed(seed, name))
        perf_l = float(large[mask].mean())
        return {"n": n, "call_rate": float(sent[mask].mean()), "phi_at_call_rate": est.value,
                "phi_at_call_rate_ci": list(interval(est.value, est.lo, est.hi)),
                "share_of_large": est.value / perf_l if perf_l > 0 else math.nan,
                "perf_small": float(small[mask].mean()), "perf_large": perf_l}

    domains = {"id": cell(np.isin(datasets, id_names), "domain=id")}
    if ood_names:
        domains["ood"] = cell(np.isin(datasets, ood_names), "domain=ood")
    dev_rate = float(escalate(dev_s, threshold, seed=_dataset_seed(seed, f"operating point {spec} on dev")).mean())
    return {**threshold.to_dict(), "dev_call_rate": dev_rate, "domains": domains,
            "datasets": {d: cell(datasets == d, d) for d in [*id_names, *ood_names]}}


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
    """The in-domain split (:func:`check_two_model_split`: ``ood:`` is refused, out-of-domain datasets are named
    with ood_datasets)."""
    return make_split(id_table, _checked("split", check_two_model_split, spec), seed)


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
    sizes = {name: int(np.count_nonzero(datasets == name)) for name in names}
    few = {name: k for name, k in sizes.items() if not enough_queries(k, warn=False)}
    if len(few) == 1:  # one warning for the datasets whose intervals (and those of their means) are left out
        name, k = next(iter(few.items()))
        warn_few_queries(f"only {k} evaluated quer{'y' if k == 1 else 'ies'} in dataset {name}")
    elif few:
        low, high = min(few.values()), max(few.values())
        if low == high:
            warn_few_queries(f"only {low} evaluated quer{'y' if low == 1 else 'ies'} in each of the datasets "
                             + ", ".join(few))
        else:
            listed = ", ".join(f"{d} ({k})" for d, k in few.items())
            warn_few_queries(f"only {low} to {high} evaluated queries in datasets {listed}")
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
        enough = name not in few  # else its intervals (and those of the means over datasets it is in) are NaN
        for idx in resample_indices(rows.size, n_boot, _dataset_seed(seed, name)) if enough else ():
            counts = C.resample_counts(idx, rows.size, exact) if kind == "routerlab" else None
            for spec, s_all in scores.items():
                values = C.resampled_two_model_metrics(s_all[rows], small, large, idx, kind, lpm_band, rp_band,
                                                       counts=counts)
                for m in BOOT_METRICS:
                    reps[spec][m].append(values[m])
        for spec in scores:
            curve, point = points[spec]
            joined = {m: np.concatenate(reps[spec][m]) if enough else np.full(n_boot, np.nan) for m in BOOT_METRICS}
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


# ------------------------------------------------------------------------------------------- the protocol
def two_model_records(result: TwoModelResult) -> list[MetricRecord]:
    """The run's metric records, per router: every metric of :data:`METRICS` (with its 95% interval where it has
    one) on each in-domain dataset (slice ``dataset=NAME``), their mean (``domain=id``), each out-of-domain
    dataset and their mean (``domain=ood``); with ``compare_to``, each bootstrapped metric's paired difference
    from the reference router (``<metric>_diff``) on the same slices."""
    out: list[MetricRecord] = []
    for r in result.results:
        for metrics, suffix, cells in ((METRICS, "", r.to_dict()),
                                       (BOOT_METRICS, "_diff", r.versus)):
            if cells is None:
                continue
            parts = [*((f"dataset={d}", cells["datasets"][d]) for d in result.id_datasets),
                     ("domain=id", cells["id_mean"]),
                     *((f"dataset={d}", cells["datasets"][d]) for d in result.ood_datasets),
                     *((("domain=ood", cells["ood_mean"]),) if cells["ood_mean"] is not None else ())]
            for where, cell in parts:
                out += [MetricRecord.of(r.spec, m + suffix, cell[m + suffix], cell.get(f"{m}{suffix}_ci"), where)
                        for m in metrics]
        op = r.operating_point
        if op is not None:  # the decision fixed on the development part, as it fell on the test queries
            parts = [*((f"dataset={d}", op["datasets"][d]) for d in result.id_datasets),
                     ("domain=id", op["domains"]["id"]),
                     *((f"dataset={d}", op["datasets"][d]) for d in result.ood_datasets),
                     *((("domain=ood", op["domains"]["ood"]),) if "ood" in op["domains"] else ())]
            for where, cell in parts:
                out.append(MetricRecord.of(r.spec, "call_rate", cell["call_rate"], None, where))
                out.append(MetricRecord.of(r.spec, "phi_at_call_rate", cell["phi_at_call_rate"],
                                           cell["phi_at_call_rate_ci"], where))
        if r.youden is not None:  # the Youden-J threshold fixed on dev (or train), as it fell on the test queries
            for where, cell in _domain_parts(result, r.youden["datasets"], r.youden["domains"].get("id"),
                                             r.youden["domains"].get("ood")):
                out.append(MetricRecord.of(r.spec, "youden_accuracy", cell["youden_accuracy"],
                                           cell["youden_accuracy_ci"], where))
                out.append(MetricRecord.of(r.spec, "youden_j", cell["youden_j"], None, where))
        if r.layer_weights is not None:
            out += [MetricRecord.of(r.spec, "layer_weight", w, None, f"layer={i}")
                    for i, w in enumerate(r.layer_weights)]
        if result.both_fail is not None:  # every router of the run is scored on the same queries: the same share
            bf = result.both_fail
            out += [MetricRecord.of(r.spec, "both_fail", cell["both_fail"], cell["both_fail_ci"], where)
                    for where, cell in _domain_parts(result, bf["datasets"], bf["id_mean"], bf["ood_mean"])]
    for entry in result.train_sizes or ():
        size = f"train_size={entry['train_size']:g}"
        for spec, cells in entry["results"].items():
            for where, cell in _domain_parts(result, cells["datasets"], cells["id_mean"], cells["ood_mean"]):
                out += [MetricRecord.of(spec, m, cell[m], cell.get(f"{m}_ci"), f"{size},{where}") for m in METRICS]
    return out


def _domain_parts(result: TwoModelResult, datasets: Mapping[str, Any], id_cell: Any, ood_cell: Any
                  ) -> list[tuple[str, Any]]:
    """(slice, cell) in the records' order: each in-domain dataset, ``domain=id``, each out-of-domain dataset,
    ``domain=ood`` (when there is one)."""
    return [*((f"dataset={d}", datasets[d]) for d in result.id_datasets), ("domain=id", id_cell),
            *((f"dataset={d}", datasets[d]) for d in result.ood_datasets),
            *((("domain=ood", ood_cell),) if ood_cell is not None else ())]


def two_model_result(native: TwoModelResult, settings: TwoModelSettings) -> Result:
    """A :class:`TwoModelResult` as the protocol layer's :class:`Result`: its records, the artifacts ``curves``
    and ``per_query``, the training and evaluated sizes, and a note when queries were dropped."""
    split = native.provenance.split if isinstance(native.provenance.split, dict) else {}
    dropped = sum(native.dropped.values())
    notes = ([f"{plural(dropped, 'query')} dropped: {native.small!r} or {native.large!r} has no score on "
              f"{verb(dropped, 'it', 'them')}"]
             if dropped else [])
    return Result(TwoModel.name, native.provenance, settings, two_model_records(native), native=native,
                  n_train=int(split.get("n_train", 0)), n_test=int(split.get("n_evaluated", 0)),
                  artifacts={"curves": {r.spec: r.curves for r in native.results}, "per_query": native.per_query},
                  notes=notes)


@register_protocol("two-model")
class TwoModel(Protocol):
    summary = ("routers between a small and a large model: trained in-domain, the call-rate curve's metrics on "
               "each in-domain and out-of-domain dataset with 95% CIs")
    spec = "SPEC 6, 7"
    Settings = TwoModelSettings

    def run(self, table: RoutingTable, settings: Any, seed: int = 0, routers: Sequence[Any] = (),
            context: RunContext | None = None) -> Result:
        s: TwoModelSettings = settings
        small, large = resolve_pair(table, s.small, s.large)
        if (small, large) != (s.small, s.large):  # the table's pair: the settings record what ran
            s = dataclasses.replace(s, small=small, large=large)
        native = run_two_model(
            table, small, large, list(routers), signals=s.features, id_datasets=s.id_datasets,
            ood_datasets=s.ood_datasets or (), split=s.split, seed=seed, encoder=s.encoder, n_boot=s.n_boot,
            convention=s.convention, lpm_band=s.lpm_band, rp_band=s.rp_band, compare_to=s.compare_to,
            cache_dir=context.cache_dir if context is not None else None, dev=s.dev, call_rate=s.call_rate,
            train_sizes=s.train_sizes)
        return two_model_result(native, s)
