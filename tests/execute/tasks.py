"""Module-level task functions for the executor tests (worker processes import them by reference)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from routerlab.errors import DataError

_ARRIVALS = 0
"""How many times a :class:`Counted` object was unpickled in this process."""


class Counted:
    """A shared payload that counts, per process, how often it arrives by pickle."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def __getstate__(self) -> dict[str, Any]:
        return {"values": self.values}

    def __setstate__(self, state: dict[str, Any]) -> None:
        global _ARRIVALS
        _ARRIVALS += 1
        self.values = state["values"]


def where_am_i(shared: Counted, item: int) -> tuple[int, int, float]:
    """(worker pid, arrivals of the shared payload in this worker, a value computed from it)."""
    return os.getpid(), _ARRIVALS, float(shared.values[item % len(shared.values)])


def square(shared: Any, item: int) -> int:
    return item * item


def fail_on(shared: Any, item: int) -> int:
    if item == 3:
        raise ValueError(f"item {item} is bad")
    if item == 5:
        raise DataError("no such column", file="t.csv", field="score")
    return item


def mapped_sum(shared: Any, item: str) -> tuple[float, bool]:
    array = shared[item]
    return float(np.asarray(array, dtype=np.float64).sum()), isinstance(array, np.memmap)


def scaling_cell(shared: tuple[Any, Any], item: tuple[int, int]) -> dict[str, Any]:
    """One sweep cell: the scaling curve at pool size m with its own seed (results depend on the item only)."""
    from routerlab.protocols.scaling import scaling_curve

    table, split = shared
    m, seed = item
    return scaling_curve(table, split, [m], samples=12, seed=seed).to_dict()


def groups_cell(shared: tuple[Any, Any], item: tuple[int, int]) -> list[dict[str, Any]]:
    """One sweep cell: the SPEC 4 candidate groups of size m drawn with the item's seed."""
    from routerlab.protocols.groups import candidate_groups

    table, split = shared
    m, seed = item
    train, _ = split.apply(table)
    return [g.to_dict() for g in candidate_groups(train, [m], draws=40, seed=seed)]


def slow_square(shared: Any, item: int) -> int:
    import time

    time.sleep(0.2)
    return item * item


def thread_caps(shared: Any, item: int) -> tuple[str | None, str | None, int]:
    """(NUMBA_NUM_THREADS, OMP_NUM_THREADS, the largest BLAS/OpenMP pool numpy would use) in this worker."""
    from threadpoolctl import threadpool_info

    return (os.environ.get("NUMBA_NUM_THREADS"), os.environ.get("OMP_NUM_THREADS"),
            max((int(p["num_threads"]) for p in threadpool_info()), default=1))


def report_then_sleep(shared: str, item: int) -> int:
    """Write this worker's pid into the folder ``shared``, then sleep long (a task Ctrl-C must cut short)."""
    import time
    from pathlib import Path

    (Path(shared) / f"{os.getpid()}.pid").write_text(str(item))
    time.sleep(60)
    return item
