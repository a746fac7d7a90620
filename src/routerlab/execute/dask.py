"""Dask distributed: :class:`DaskExecutor` runs tasks on a Dask cluster, the multi-machine backend.

Given a scheduler address it joins that cluster (``dask scheduler`` on one host, ``dask worker ADDRESS``
on each machine); given none it starts a one-machine ``LocalCluster`` of process workers whose every
socket listens on 127.0.0.1 only. Either way the same code runs: ``shared`` is scattered to every worker
once per run (``broadcast=True``), and each task is ``client.submit(fn, shared_future, item)``. Dask is
imported here only, and this module only when a Dask executor is asked for (the ``distributed`` extra).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from routerlab.errors import UsageError
from routerlab.execute.base import check_count
from routerlab.execute.local import name_task

T = TypeVar("T")
R = TypeVar("R")

INSTALL_HINT = "pip install 'routerlab[distributed]'"
_UNSET: Any = object()


def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError as exc:
        raise UsageError(f"the dask backend needs Dask distributed, which is not installed: {INSTALL_HINT}") from exc
    return distributed


class DaskExecutor:
    """Tasks on a Dask cluster (module docstring); results as they finish.

    ``scheduler``: ``tcp://HOST:PORT`` of a running scheduler; ``None`` starts a ``LocalCluster`` of
    ``workers`` single-threaded process workers (default one per CPU) bound to 127.0.0.1, which
    :meth:`close` shuts down again. Task functions must be importable by the workers (module-level).
    """

    name = "dask"

    def __init__(self, *, scheduler: str | None = None, workers: int | None = None, timeout_s: float = 30.0) -> None:
        distributed = _import_distributed()
        check_count(workers, "dask executor: workers", allow_none=True)
        self._cluster: Any = None
        self._shared_obj: Any = _UNSET
        self._shared_future: Any = None
        if scheduler is None:
            self._cluster = distributed.LocalCluster(
                host="127.0.0.1",
                n_workers=workers or (os.cpu_count() or 1),
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.ERROR,
                # Dask caps OpenMP/BLAS threads in its workers; numba (the society fast path) too.
                env={"NUMBA_NUM_THREADS": "1"},
            )
            try:
                self.client: Any = distributed.Client(self._cluster, timeout=timeout_s)
            except BaseException:
                self._cluster.close()
                raise
        else:
            try:
                self.client = distributed.Client(scheduler, timeout=timeout_s)
            except (OSError, TimeoutError) as exc:
                raise UsageError(f"--scheduler: cannot reach a Dask scheduler at {scheduler} ({exc})") from exc
        self.workers: int = self._count_threads(workers)

    def _count_threads(self, asked: int | None) -> int:
        info = self.client.scheduler_info()
        threads = sum(int(w.get("nthreads", 1)) for w in info.get("workers", {}).values())
        return max(threads, asked or 0, 1)

    @property
    def scheduler_address(self) -> str:
        """Where the scheduler listens (``tcp://127.0.0.1:PORT`` for the cluster this executor started)."""
        return str(self.client.scheduler.address)

    def _scatter(self, shared: Any) -> Any:
        if shared is None:
            return None
        if self._shared_obj is shared and self._shared_future is not None:
            return self._shared_future
        self._release_shared()
        # A one-element list, so a dict or list is shipped as one object; hash=False skips tokenizing a
        # large table; broadcast=True puts a copy on every worker now, not one fetch per task later.
        [future] = self.client.scatter([shared], broadcast=True, hash=False)
        self._shared_obj, self._shared_future = shared, future
        return future

    def _release_shared(self) -> None:
        if self._shared_future is not None:
            self._shared_future.release()
        self._shared_obj, self._shared_future = _UNSET, None

    def run(self, fn: Callable[[Any, T], R], items: Sequence[T], *, shared: Any = None) -> Iterator[tuple[int, R]]:
        """Yield ``(index, fn(shared, items[index]))`` as tasks finish (module docstring)."""
        distributed = _import_distributed()
        items = list(items)
        if not items:
            return
        shared_future = self._scatter(shared)
        futures = [self.client.submit(fn, shared_future, item, pure=False) for item in items]
        index_of = {future.key: i for i, future in enumerate(futures)}
        finished = False
        try:
            for future in distributed.as_completed(futures):
                index = index_of[future.key]
                if future.status == "error":
                    exc = future.exception()
                    raise name_task(exc, index, items[index], self.name).with_traceback(future.traceback())
                result = future.result()
                futures[index] = None  # drop the driver's reference so the cluster can free the result
                future.release()
                yield index, result
            finished = True
        finally:
            if not finished:
                self.client.cancel([f for f in futures if f is not None])

    def close(self) -> None:
        """Close the client, and the LocalCluster if this executor started one (idempotent)."""
        client, self.client = getattr(self, "client", None), None
        cluster, self._cluster = self._cluster, None
        self._shared_obj, self._shared_future = _UNSET, None
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()

    def __enter__(self) -> DaskExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
