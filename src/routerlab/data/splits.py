"""Train/test splits: the given column, a seeded random split by query, or whole datasets held out; and a
development part taken from the training side (:func:`with_dev`) where a choice is made.

A :class:`Split` is plain data (positions plus how they were made) so that every result can record
exactly which queries it was trained, developed and tested on (SPEC 7).
"""

from __future__ import annotations

import hashlib
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from routerlab.errors import UsageError

if TYPE_CHECKING:
    from routerlab.data.table import RoutingTable

TEST_NAMES = ("test", "validation", "val", "dev")


def _no_rows() -> npt.NDArray[np.intp]:
    return np.zeros(0, dtype=np.intp)


@dataclass(frozen=True)
class Split:
    """Positions of the train and test queries, and the recipe that made them; ``dev`` holds the positions of a
    development part taken out of the training side (:func:`with_dev`), empty when there is none. ``train`` never
    contains ``dev``: routers fit on ``train``, choices (thresholds, lambdas, checkpoints, epochs) are made on
    ``dev``, and ``test`` only scores them."""

    train: npt.NDArray[np.intp]
    test: npt.NDArray[np.intp]
    kind: str
    seed: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    dev: npt.NDArray[np.intp] = field(default_factory=_no_rows)

    @property
    def has_dev(self) -> bool:
        return bool(self.dev.size)

    def describe(self) -> dict[str, Any]:
        """The split as a run record states it: kind, seed, sizes, its recipe's parameters and, with a development
        part, ``dev_fraction``, ``dev_seed`` and ``n_dev``."""
        return {"kind": self.kind, "seed": self.seed, "n_train": int(self.train.size),
                "n_test": int(self.test.size), **self.params}

    def apply(self, table: RoutingTable) -> tuple[RoutingTable, RoutingTable]:
        """(train, test) tables of ``table``. While a part made by an earlier call is alive, applying the same
        positions to the same table returns that part, not a new copy: at RouterEval scale a split's parts
        are 1.1 GiB, and an audit's sections, the protocols they call and their features all apply the
        audit's split (tables are never changed in place, so sharing them is safe)."""
        return _part(table, self.train), _part(table, self.test)

    def apply_dev(self, table: RoutingTable) -> RoutingTable:
        """The development part of ``table`` (a UsageError when the split has none)."""
        if not self.has_dev:
            raise UsageError("this split has no development part; make one with --dev F (dev = F in a file)")
        return _part(table, self.dev)

    def without_dev(self) -> Split:
        """The split with its development part given back to training (the same train/test split a run without
        ``--dev`` makes)."""
        if not self.has_dev:
            return self
        params = {k: v for k, v in self.params.items() if k not in _DEV_KEYS}
        return Split(np.sort(np.concatenate([self.train, self.dev])).astype(np.intp), self.test, self.kind,
                     self.seed, params)


_PARTS: weakref.WeakKeyDictionary[RoutingTable, dict[tuple[int, bytes], weakref.ref[RoutingTable]]] = (
    weakref.WeakKeyDictionary())
"""Per table, weak references to the parts :meth:`Split.apply` made of it, by their positions: reused while
someone still holds them, never kept alive by this cache."""


def _part(table: RoutingTable, rows: npt.NDArray[np.intp]) -> RoutingTable:
    """``table.select_queries(rows)``, or the live part an earlier call made of the same positions."""
    if np.asarray(rows).dtype == bool:  # a mask, not positions: selected as given
        return table.select_queries(rows)
    positions = np.ascontiguousarray(rows, dtype=np.intp)
    key = (positions.size, hashlib.blake2b(positions.data, digest_size=16).digest())
    known = _PARTS.setdefault(table, {})
    for k in [k for k, ref in known.items() if ref() is None]:  # parts nobody holds any more
        del known[k]
    ref = known.get(key)
    part = None if ref is None else ref()
    if part is None:
        start = int(positions[0]) if positions.size else 0
        if (table in _PINNED and positions.size > 1 and start >= 0
                and bool((np.diff(positions) == 1).all())):  # a row range of a table in split order: views
            part = table.query_range(start, start + positions.size)
        else:
            part = table.select_queries(positions)
        known[key] = weakref.ref(part)
    return part


def given_split(table: RoutingTable, test_split: str | None = None) -> Split:
    """Use the table's split column: ``train`` rows train; ``test_split`` (default: the first of
    test/validation/val/dev present) rows test."""
    split = table.queries.split.astype(str)
    present = set(split.tolist())
    if "train" not in present:
        raise UsageError(f"the table has no 'train' split (splits: {sorted(present)}); use a random split")
    if test_split is None:
        test_split = next((s for s in TEST_NAMES if s in present), None)
        if test_split is None:
            raise UsageError(f"the table has no test split (splits: {sorted(present)}); use a random split")
    elif test_split not in present:
        raise UsageError(f"the table has no {test_split!r} split (splits: {sorted(present)})")
    return Split(np.flatnonzero(split == "train"), np.flatnonzero(split == test_split), "given",
                 params={"test_split": test_split})


def random_split(table: RoutingTable, test_fraction: float = 0.2, seed: int = 0,
                 stratify_by_dataset: bool = True) -> Split:
    """Seeded random split by query; stratified by dataset so every domain is in both halves."""
    if not 0.0 < test_fraction < 1.0:
        raise UsageError(f"test fraction must be in (0, 1), got {test_fraction}")
    rng = np.random.default_rng(seed)
    groups = table.queries.dataset.astype(str) if stratify_by_dataset else np.zeros(table.n_queries, dtype=str)
    test_parts = []
    for g in np.unique(groups):
        rows = np.flatnonzero(groups == g)
        k = round(test_fraction * rows.size)
        test_parts.append(rng.permutation(rows)[:k])
    test = np.sort(np.concatenate(test_parts)) if test_parts else np.array([], dtype=np.intp)
    train = np.setdiff1d(np.arange(table.n_queries), test)
    if train.size == 0 or test.size == 0:
        raise UsageError(f"a random split of {table.n_queries} queries leaves an empty side")
    return Split(train.astype(np.intp), test.astype(np.intp), "random", seed,
                 {"test_fraction": test_fraction, "stratified": stratify_by_dataset})


def ood_split(table: RoutingTable, test_datasets: list[str]) -> Split:
    """Out-of-domain: the listed datasets are the test side, every other dataset trains."""
    ds = table.queries.dataset.astype(str)
    missing = set(test_datasets) - set(ds.tolist())
    if missing:
        raise UsageError(f"unknown datasets {sorted(missing)}; the table has {sorted(set(ds.tolist()))}")
    test_mask = np.isin(ds, test_datasets)
    if test_mask.all():
        raise UsageError("holding out every dataset leaves nothing to train on")
    return Split(np.flatnonzero(~test_mask), np.flatnonzero(test_mask), "ood", None,
                 {"test_datasets": sorted(test_datasets)})


_DEV_KEYS = ("dev_fraction", "dev_seed", "n_dev")
DEV_STREAM = 0x64657621
"""Mixed into the seed of the development draw, so it is independent of a random split drawn with the same seed."""


def check_dev_fraction(fraction: Any) -> float:
    """A development fraction: a finite number in (0, 1) (the share of the training side held out)."""
    try:
        value = float(fraction)
    except (TypeError, ValueError):
        raise UsageError(f"the dev fraction must be a number in (0, 1), got {fraction!r}") from None
    if isinstance(fraction, bool) or not 0.0 < value < 1.0:  # NaN fails the comparison too
        raise UsageError(f"the dev fraction must be in (0, 1), got {fraction!r}")
    return value


def with_dev(table: RoutingTable, split: Split, fraction: float, seed: int = 0) -> Split:
    """``split`` with a seeded ``fraction`` of its training side moved to a development part, stratified by dataset
    (each dataset of the training side gives ``round(fraction * its size)`` queries, so every training domain is
    developed on in its share). The test side is untouched. The record gains ``dev_fraction``, ``dev_seed`` and
    ``n_dev``; an empty development or training part is a UsageError."""
    fraction = check_dev_fraction(fraction)
    if split.has_dev:
        raise UsageError("this split already has a development part")
    rng = np.random.default_rng([int(seed), DEV_STREAM])
    train = np.asarray(split.train, dtype=np.intp)
    groups = table.queries.dataset.astype(str)[train]
    picked = []
    for g in np.unique(groups):
        rows = train[groups == g]
        picked.append(rng.permutation(rows)[:round(fraction * rows.size)])
    dev = np.sort(np.concatenate(picked)).astype(np.intp) if picked else _no_rows()
    rest = np.setdiff1d(train, dev).astype(np.intp)
    if dev.size == 0 or rest.size == 0:
        raise UsageError(f"a dev fraction of {fraction:g} of {train.size} training queries leaves "
                         f"{'no development' if dev.size == 0 else 'no training'} queries; "
                         "choose a fraction that leaves both sides some")
    keep = np.isin(split.train, dev, invert=True)  # the training side in its own order, less the dev rows
    params = {**split.params, "dev_fraction": fraction, "dev_seed": int(seed), "n_dev": int(dev.size)}
    return Split(np.asarray(split.train, dtype=np.intp)[keep], split.test, split.kind, split.seed, params, dev)


def _split_parts(spec: str) -> tuple[str, Any]:
    """A split spec's kind and argument, its form checked: ``("given", NAME | None)``, ``("random", fraction)``
    or ``("ood", [datasets])``; any other form is a UsageError."""
    kind, _, arg = spec.partition(":")
    if kind == "given":
        return kind, arg or None
    if kind == "random":
        try:
            return kind, float(arg) if arg else 0.2
        except ValueError:
            raise UsageError(f"bad split {spec!r}: 'random:F' needs a fraction, e.g. random:0.2") from None
    if kind == "ood":
        names = [s for s in arg.split(",") if s]
        if not names:
            raise UsageError("bad split 'ood': name the held-out datasets, e.g. ood:gsm8k,mbpp")
        return kind, names
    raise UsageError(f"unknown split {spec!r}; use given, random[:F] or ood:DS1,DS2")


def make_split(table: RoutingTable, spec: str = "given", seed: int = 0, dev: float | None = None) -> Split:
    """Parse a split spec: ``given``, ``given:val``, ``random``, ``random:0.3`` or ``ood:DS1,DS2``; with ``dev``, a
    seeded fraction of the training side becomes the development part (:func:`with_dev`, drawn with ``seed``).

    On a table made by :func:`in_split_order`, the spec (and seed and dev fraction) it was ordered for gives the
    same queries as on the original table, at their new positions."""
    kind, arg = _split_parts(spec)
    fraction = None if dev is None else check_dev_fraction(dev)
    pinned = _PINNED.get(table, {}).get(_pin_key(kind, arg, seed, fraction))
    if pinned is not None:
        return Split(pinned.train.copy(), pinned.test.copy(), pinned.kind, pinned.seed, dict(pinned.params),
                     pinned.dev.copy())
    if kind == "given":
        split = given_split(table, arg)
    elif kind == "random":
        split = random_split(table, arg, seed)
    else:
        split = ood_split(table, arg)
    return split if fraction is None else with_dev(table, split, fraction, seed)


def check_split_spec(spec: str) -> None:
    """Check a split spec's form (``given[:NAME]``, ``random[:F]`` with F in (0, 1), ``ood:DS1,DS2``) before any
    table is read; whether the named splits or datasets exist is checked by :func:`make_split`."""
    kind, arg = _split_parts(spec)
    if kind == "random" and not 0.0 < arg < 1.0:
        raise UsageError(f"bad split {spec!r}: the test fraction must be in (0, 1)")


_PINNED: weakref.WeakKeyDictionary[RoutingTable, dict[tuple[str, str, int, float | None], Split]] = (
    weakref.WeakKeyDictionary())
"""Per table made by :func:`in_split_order`, the split it was ordered for, by (kind, argument, seed, dev fraction)."""


def _pin_key(kind: str, arg: Any, seed: int | None, dev: float | None = None) -> tuple[str, str, int, float | None]:
    """Only a random split or a development part depends on the seed."""
    return kind, repr(arg), int(seed or 0) if kind == "random" or dev is not None else 0, dev


def split_spec(split: Split) -> str:
    """The spec that makes ``split`` again from its table and seed: ``given:NAME``, ``random:F`` or ``ood:A,B``."""
    if split.kind == "given":
        return f"given:{split.params['test_split']}"
    if split.kind == "random":
        return f"random:{split.params['test_fraction']!r}"
    if split.kind == "ood":
        return "ood:" + ",".join(split.params["test_datasets"])
    raise UsageError(f"a {split.kind!r} split has no spec")


def in_split_order(table: RoutingTable, split: Split) -> tuple[RoutingTable, Split]:
    """``table`` stored in ``split``'s order (train rows, then test rows, then development rows, then any others,
    each as the split lists them) and ``split`` at its new positions, row ranges.

    Its parts (:meth:`Split.apply`) are then views of its matrices, not copies: a caller holding a RouterEval-scale
    table and both parts of its split holds the 1.1 GiB matrix once instead of twice. The parts hold the same
    queries in the same order as ``split.apply(table)``; the table keeps ``table``'s content hash (the same data,
    addressed by query id), and ``make_split`` with the split's spec (:func:`split_spec`) and seed returns the
    moved split. Drop
    every reference to ``table`` afterwards, or nothing is saved."""
    n = table.n_queries
    rest = np.setdiff1d(np.arange(n), np.concatenate([split.train, split.test, split.dev]))
    order = np.concatenate([split.train, split.test, split.dev, rest]).astype(np.intp)
    if np.array_equal(order, np.arange(n)):  # already in this order (e.g. made by this function): no copy
        ordered = table
    else:
        ordered = table.select_queries(order)
        ordered.__dict__["content_hash"] = table.content_hash  # cached_property slot: the same data, reordered
    n_train, n_test, n_dev = split.train.size, split.test.size, split.dev.size
    moved = Split(np.arange(n_train, dtype=np.intp), np.arange(n_train, n_train + n_test, dtype=np.intp),
                  split.kind, split.seed, dict(split.params),
                  np.arange(n_train + n_test, n_train + n_test + n_dev, dtype=np.intp))
    kind, arg = _split_parts(split_spec(split))
    fraction = split.params.get("dev_fraction") if split.has_dev else None
    seed = split.params["dev_seed"] if split.has_dev else split.seed
    _PINNED.setdefault(ordered, {})[_pin_key(kind, arg, seed, fraction)] = moved
    return ordered, moved
