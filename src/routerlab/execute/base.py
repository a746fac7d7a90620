"""The executor contract: ``run(fn, items, shared=...)`` calls ``fn(shared, item)`` for every item and
yields ``(index, result)`` pairs as tasks finish (in any order), so a caller can store each result the
moment it exists and a crash loses only the tasks in flight.

``shared`` is the large read-only input every task needs (a routing table, say). An executor ships it to
each worker once — never once per task: in-process it is passed by reference, local worker processes
receive it once each at start-up, a Dask cluster gets it scattered (broadcast) once. Results must not depend
on which executor ran them: tasks are seeded by their item, never by worker or order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from routerlab.errors import UsageError

T = TypeVar("T")
R = TypeVar("R")

TaskFn = Callable[[Any, Any], Any]
"""``fn(shared, item) -> result``: a module-level function (picklable by reference) for process and Dask
executors."""


def check_count(value: object, what: str, *, allow_none: bool = False) -> None:
    """Refuse ``value`` unless it is a whole number >= 1 (or None when ``allow_none``): one UsageError line
    naming ``what`` (``--workers``, ``local executor: workers``...). A bool is not a count."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{what}: must be a whole number >= 1, got {value!r}")


@runtime_checkable
class Executor(Protocol):
    """Runs tasks; see the module docstring. ``name`` is what results record (``serial``, ``local``,
    ``dask``); ``workers`` how many tasks run at once."""

    name: str
    workers: int

    def run(self, fn: Callable[[Any, T], R], items: Sequence[T], *, shared: Any = None) -> Iterator[tuple[int, R]]:
        """Yield ``(index into items, fn(shared, items[index]))`` as each task finishes."""
        ...

    def close(self) -> None:
        """Release workers (idempotent)."""
        ...


class SerialExecutor:
    """Every task in this process, in order: the reference the other executors must agree with."""

    name = "serial"
    workers = 1

    def run(self, fn: Callable[[Any, T], R], items: Sequence[T], *, shared: Any = None) -> Iterator[tuple[int, R]]:
        for i, item in enumerate(items):
            yield i, fn(shared, item)

    def close(self) -> None:
        return None

    def __enter__(self) -> SerialExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
