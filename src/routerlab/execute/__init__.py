"""Executors: run many independent tasks (sweep cells, audit pieces) in this process, in local worker
processes, or on a Dask cluster, behind one small interface (:class:`routerlab.execute.base.Executor`).

This package is plumbing: it imports nothing else of routerlab but :mod:`routerlab.errors`, so every
layer may use it. Dask is imported only when a Dask executor is made (the ``distributed`` extra).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from routerlab.errors import UsageError
from routerlab.execute.base import Executor, SerialExecutor, TaskFn, check_count
from routerlab.execute.local import LocalProcessExecutor, SharedArrays, name_task

if TYPE_CHECKING:
    from routerlab.execute.dask import DaskExecutor

__all__ = [
    "BACKENDS",
    "DaskExecutor",
    "Executor",
    "LocalProcessExecutor",
    "SerialExecutor",
    "SharedArrays",
    "TaskFn",
    "check_scheduler_address",
    "make_executor",
    "name_task",
]

BACKENDS = ("serial", "local", "dask")
"""What ``--backend`` accepts."""

_ADDRESS = re.compile(r"^(tcp|tls)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


def check_scheduler_address(address: str) -> str:
    """Return a Dask scheduler address of the form ``tcp://HOST:PORT`` (or ``tls://``) unchanged, or raise
    a one-line :class:`UsageError` saying what is wrong with it."""
    match = _ADDRESS.match(address.strip()) if isinstance(address, str) else None
    if match is None or not 1 <= int(match.group(3)) <= 65535:
        raise UsageError(f"--scheduler: {address!r} is not a Dask scheduler address like tcp://HOST:PORT")
    return address.strip()


def make_executor(backend: str, *, workers: int | None = None, scheduler: str | None = None) -> Executor:
    """The executor for ``backend``: ``serial`` (this process), ``local`` (``workers`` processes, default
    one per CPU) or ``dask`` (the cluster at ``scheduler``, or a new one-machine cluster of ``workers``
    processes listening on 127.0.0.1 only). Call ``close()`` (or use ``with``) when done."""
    if backend not in BACKENDS:
        raise UsageError(f"--backend: unknown executor {backend!r}; choose one of {', '.join(BACKENDS)}")
    check_count(workers, "--workers", allow_none=True)
    if scheduler is not None and backend != "dask":
        raise UsageError(f"--scheduler: only the dask backend connects to a scheduler, not {backend!r}")
    if backend == "serial":
        return SerialExecutor()
    if backend == "local":
        return LocalProcessExecutor(workers)
    if scheduler is not None:
        scheduler = check_scheduler_address(scheduler)
    from routerlab.execute.dask import DaskExecutor

    return DaskExecutor(scheduler=scheduler, workers=workers)


def __getattr__(name: str) -> object:
    """``routerlab.execute.DaskExecutor`` without importing Dask until it is asked for."""
    if name == "DaskExecutor":
        from routerlab.execute.dask import DaskExecutor

        return DaskExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
