"""Model-level scaling curve (routereval.txt section 3, SPEC 4), and the registered ``scaling`` protocol.

For each pool size m, draw ``samples`` random m-subsets of the actors and report, over the subsets,
the mean and spread of mu_o for r_o(p) at each p, and of the best single actor (chosen on train,
scored on test). mu_o of r_o(p) is taken in expectation, ``p * oracle + (1 - p) * uniform``, which
is what a single draw estimates without its sampling noise (choice documented in the README).

The pool sizes ``m`` are integers, ``all`` (the table's actor count), ``N|all`` (N, or all when fewer) or a range
``A..B`` / ``A..all``, resolved against the table when the run starts (:func:`resolve_pool_sizes`): one experiment
file draws the curve up to the size of whatever pool it is given.

The protocol's records: router ``oracle-p`` with slice ``m=M,p=P`` and ``best-single`` with slice ``m=M``, each
with ``mu_o`` = the mean over the random pools, and the spread over pools as ``mu_o_std``, ``mu_o_q05`` and
``mu_o_q95`` (the curve's 5-95% band). None has a confidence interval: the band is how much the pools differ,
not the uncertainty of the mean, so it is not written into ``ci_low`` / ``ci_high``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from routerlab.data.provenance import Provenance
from routerlab.data.splits import Split, make_split
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.metrics.bounds import actor_means
from routerlab.protocols.base import (
    SPLIT_HELP,
    Interval,
    MetricRecord,
    Protocol,
    ProtocolSettings,
    Result,
    RunContext,
    SettingError,
    _check_rule,
    _scalar,
    check_split,
    register_protocol,
    setting,
    value_kind,
)

DEFAULT_P = (0.0, 0.25, 0.5, 0.75, 1.0)
MAX_SAMPLES = 100_000
ALL = "all"
_CAPPED = re.compile(r"([+-]?\d+)\s*\|\s*all")
POOL_SIZE = Interval(int, 1, None)


class PoolSizes(tuple[int | str, ...]):
    """The pool sizes of an ``m`` setting (a tuple): integers >= 1, ``all`` and ``A..all`` (:func:`check_pool_size_spec`
    reads them; the settings layer hands it the raw value, a list, a tuple or comma-separated text)."""


DEFAULT_M = PoolSizes((2, 3, 5))
POOL_SIZES_HELP = ("pool sizes m: integers (each at most the table's actors), 'all' (every actor), 'N|all' (N, "
                   "or every actor when there are fewer) or a range like '2..5' or '2..all', resolved against the "
                   "table when the run starts")


@dataclass
class ScalingCurve:
    """Per m: mean/std/quantiles of mu_o for each p and for the best single actor."""

    m: list[int]
    p: list[float]
    oracle_p: dict[float, dict[str, list[float]]]
    best_single: dict[str, list[float]]
    reference: float | None
    samples: int
    seed: int
    split: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "m": self.m, "p": self.p, "samples": self.samples, "seed": self.seed, "split": self.split,
            "reference": self.reference,
            "oracle_p": {str(p): v for p, v in self.oracle_p.items()},
            "best_single": self.best_single,
        }


def _summary(values: npt.NDArray[np.float64]) -> dict[str, float]:
    return {"mean": float(values.mean()), "std": float(values.std(ddof=0)),
            "q05": float(np.quantile(values, 0.05)), "q95": float(np.quantile(values, 0.95))}


def scaling_curve(
    table: RoutingTable,
    split: Split,
    m_values: list[int],
    p_values: tuple[float, ...] | list[float] = DEFAULT_P,
    samples: int = 100,
    seed: int = 0,
    reference: float | None = None,
) -> ScalingCurve:
    """The scaling curve on the test split; subsets are seeded and shared across p (SPEC 4)."""
    train, test = split.apply(table)
    n_actors = table.n_actors
    bad = [m for m in m_values if not 1 <= m <= n_actors]
    if bad:
        raise UsageError(f"pool sizes {bad} are outside 1..{n_actors} actors")
    if not m_values or not list(p_values):
        raise UsageError("the scaling curve needs at least one pool size m and one probability p")
    bad_p = [p for p in p_values if not 0.0 <= p <= 1.0]  # NaN fails the comparison too
    if bad_p:
        raise UsageError(f"probabilities p {bad_p} are outside [0, 1]")
    if samples < 1:
        raise UsageError(f"samples must be >= 1, got {samples}")
    score = test.score  # float32; each pool's block is widened to float64 (the same numbers) where it is summed
    complete = ~np.isnan(score).any(axis=1)
    if not complete.any():
        raise UsageError("no test query has every actor observed; the scaling curve needs complete rows")
    if not complete.all():
        score = score[complete]
    train_means = actor_means(train.score)
    rng = np.random.default_rng(seed)
    stats: dict[float, dict[str, list[float]]] = {p: {"mean": [], "std": [], "q05": [], "q95": []} for p in p_values}
    best: dict[str, list[float]] = {"mean": [], "std": [], "q05": [], "q95": []}
    for m in m_values:
        subsets = np.array([rng.choice(n_actors, size=m, replace=False) for _ in range(samples)])
        oracle = np.empty(samples)
        uniform = np.empty(samples)
        for j, cols in enumerate(subsets):  # one (n, m) block at a time keeps memory at O(n m)
            block = score[:, cols].astype(np.float64)
            oracle[j] = block.max(axis=1).mean()
            uniform[j] = block.mean()
        for p in p_values:
            for key, v in _summary(p * oracle + (1 - p) * uniform).items():
                stats[p][key].append(v)
        tm = np.where(np.isnan(train_means), -np.inf, train_means)[subsets]  # (samples, m)
        pick = subsets[np.arange(samples), tm.argmax(axis=1)]
        for key, v in _summary(score[:, pick].astype(np.float64).mean(axis=0)).items():
            best[key].append(v)
    return ScalingCurve(list(m_values), [float(p) for p in p_values], stats, best, reference, samples, seed,
                        split.describe())


# -- the registered protocol ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalingSettings(ProtocolSettings):
    """The ``routerlab scaling`` options that change what is computed (SPEC 4)."""

    m: PoolSizes = setting(DEFAULT_M, POOL_SIZES_HELP, check=lambda v: check_pool_size_spec(v))  # noqa: RUF009
    p: tuple[float, ...] = setting(DEFAULT_P, "oracle probabilities p of r_o(p), each in [0, 1]",
                                   Interval(float, 0, 1))
    samples: int = setting(100, "random actor subsets per pool size", Interval(int, 1, MAX_SAMPLES))
    split: str = setting("given", SPLIT_HELP, check=check_split)


def check_pool_size_spec(value: Any) -> PoolSizes:
    """The ``m`` setting's check, given the raw value (a list, a tuple, one value or comma-separated text): each
    item an integer >= 1 (with the messages of a plain integer list), ``all``, ``N|all``, a range ``A..B``
    (expanded here to A, A+1, ..., B) or ``A..all`` (the symbolic forms are kept, resolved against the table at run
    time by :func:`resolve_pool_sizes`)."""
    items: list[Any]
    if isinstance(value, str):
        items = [v for v in (p.strip() for p in value.split(",")) if v]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        items = [value]
    if not items:
        raise UsageError("needs at least one value")
    out: list[int | str] = []
    for i, item in enumerate(items, start=1):
        try:
            out += _pool_size_item(item)
        except UsageError as exc:
            raise UsageError(f"item {i}: {exc}") from None
    dup = next((v for j, v in enumerate(out) if v in out[:j]), None)
    if dup is not None:
        raise UsageError(f"lists {dup!r} twice")
    return PoolSizes(out)


def _pool_size_item(item: Any) -> list[int | str]:
    if isinstance(item, str):
        text = item.strip().lower()
        if text == ALL:
            return [ALL]
        capped = _CAPPED.fullmatch(text)
        if capped:
            number = int(capped.group(1))
            _check_rule(number, POOL_SIZE)
            return [f"{number}|{ALL}"]
        if ".." in text:
            start_text, _, end_text = text.partition("..")
            start = _range_end(start_text, item)
            if end_text.strip() == ALL:
                return [f"{start}..{ALL}"]
            end = _range_end(end_text, item)
            if end < start:
                raise UsageError(f"the range {item.strip()!r} is empty (it ends below its start)")
            return list(range(start, end + 1))
        if not text.lstrip("+-").isdigit():
            raise UsageError(f"must be an integer, 'all', 'N|all' or a range like '2..all', got "
                             f"{value_kind(item)}")
    number = _scalar(item, int)
    _check_rule(number, POOL_SIZE)
    return [number]


def _range_end(text: str, item: str) -> int:
    try:
        number = int(text.strip())
    except ValueError:
        raise UsageError(f"a range is A..B or A..all with integers A, B >= 1, got {item.strip()!r}") from None
    _check_rule(number, POOL_SIZE)
    return number


def resolve_pool_sizes(m_values: Sequence[int | str], n_actors: int, pool: str = "",
                       key: str = "m") -> tuple[list[int], list[str]]:
    """The pool sizes of an ``m`` setting on a pool of ``n_actors``, with notes: ``all`` is ``n_actors``, ``A..all``
    is A..``n_actors`` (nothing, with a note, when A is larger), ``N|all`` is N or ``n_actors`` when that is
    smaller (with a note). Explicit integers are kept as given (the caller's
    :func:`check_pool_sizes` refuses those above the pool, as before); a size named twice after resolving (``10``
    and ``all`` on 10 actors) is kept once, at its first place. None left: a :class:`SettingError` on ``key``."""
    pool = pool or f"the table's {n_actors} actors"
    out: list[int] = []
    notes: list[str] = []
    for v in m_values:
        if isinstance(v, int):
            sizes = [v]
        elif v == ALL:
            sizes = [n_actors]
        elif v.endswith(f"|{ALL}"):
            cap = int(v.split("|")[0])
            sizes = [min(cap, n_actors)]
            if cap > n_actors:
                notes.append(f"{key} = {v}: {pool} are fewer than {cap}, so {n_actors} (all of them)")
        else:
            start = int(v.split("..")[0])
            sizes = list(range(start, n_actors + 1))
            if not sizes:
                notes.append(f"{key} = {v}: no pool size on {pool}, left out")
        out += [s for s in sizes if s not in out]
    if not out:
        raise SettingError(key, f"no pool size left on {pool} ({', '.join(map(str, m_values))})")
    return out, notes


def check_pool_sizes(m_values: Sequence[int | str], n_actors: int, key: str = "m") -> None:
    """Explicit pool sizes above the table's actors: a :class:`SettingError` on ``key`` (the CLI names the option);
    ``all`` and ``A..all`` never are (:func:`resolve_pool_sizes`)."""
    bad = [m for m in m_values if isinstance(m, int) and m > n_actors]
    if bad:
        what = f"pool size {bad[0]} is" if len(bad) == 1 else f"pool sizes {', '.join(map(str, bad))} are"
        raise SettingError(key, f"{what} larger than the table's {n_actors} actors")


def scaling_records(curve: ScalingCurve) -> list[MetricRecord]:
    """The records of a scaling curve (see the module docstring): mean, std and 5-95% band per (m, p)."""
    out: list[MetricRecord] = []
    stats = (("mu_o", "mean"), ("mu_o_std", "std"), ("mu_o_q05", "q05"), ("mu_o_q95", "q95"))
    for i, m in enumerate(curve.m):
        for p in curve.p:
            out += [MetricRecord.of("oracle-p", metric, curve.oracle_p[p][key][i], slice=f"m={m},p={p:g}")
                    for metric, key in stats]
        out += [MetricRecord.of("best-single", metric, curve.best_single[key][i], slice=f"m={m}")
                for metric, key in stats]
    return out


def scaling_result(table: RoutingTable, settings: ScalingSettings, seed: int = 0, split: Split | None = None
                   ) -> Result:
    """The ``scaling`` protocol's run; ``split`` replaces the split ``settings.split`` makes (the audit passes its
    own, whose test side is cut to the queries every actor answered, which a split spec cannot say)."""
    s = settings
    check_pool_sizes(s.m, table.n_actors)
    m_values, notes = resolve_pool_sizes(s.m, table.n_actors)
    sp = split if split is not None else make_split(table, s.split, seed)
    curve = scaling_curve(table, sp, m_values, list(s.p), s.samples, seed)
    run = Provenance.of(table, sp, seed=seed, routers=["oracle-p", "best-single"])
    return Result(ScalingProtocol.name, run, s, scaling_records(curve), native=curve, n_train=int(sp.train.size),
                  n_test=int(sp.test.size), notes=notes)


@register_protocol("scaling")
class ScalingProtocol(Protocol):
    summary = "mu_o of r_o(p) and of the best single actor against pool size, over seeded random pools"
    spec = "SPEC 4"
    Settings = ScalingSettings
    uses_routers = False

    def run(self, table: RoutingTable, settings: Any, seed: int = 0, routers: Sequence[Any] = (),
            context: RunContext | None = None) -> Result:
        return scaling_result(table, settings, seed)
