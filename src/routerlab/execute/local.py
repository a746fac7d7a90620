"""Local worker processes: :class:`LocalProcessExecutor` runs tasks in a pool of ``workers`` processes on
this machine, and :class:`SharedArrays` hands huge numpy arrays to them without copying.

``shared`` is pickled once in the driver and unpickled once per worker by the pool's initializer, so a
routing table crosses the process boundary ``workers`` times per pool, never once per task. A matrix too
large even for that (RouterEval's 8,500 x 36,000 scores are 1.2 GB as float32) goes in a
:class:`SharedArrays`: it is written once to a temporary ``.npy`` file and every worker maps that file
read-only (``np.load(mmap_mode="r")``), so all processes share one copy in the page cache.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from routerlab._atomic import atomic_write
from routerlab.errors import RouterlabError, UsageError
from routerlab.execute.base import check_count

T = TypeVar("T")
R = TypeVar("R")

_UNSET: Any = object()
_WORKER_SHARED: Any = _UNSET
"""The ``shared`` object of the pool this worker process belongs to (set once by :func:`_init_worker`)."""

_MAPPED: dict[str, np.ndarray] = {}
"""Per process: ``.npy`` path -> its read-only memory map, so a worker opens each shared file once."""


THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
"""Environment variables that cap a worker's math-library threads (what Dask's nanny sets for its workers)."""

_THREAD_LIMITER: Any = None


def limit_threads(threads: int) -> None:
    """Cap this process's BLAS/OpenMP/numba threads at ``threads``, so ``workers`` processes on as many
    cores do not oversubscribe them: environment variables for libraries not loaded yet (numba reads
    its own at import), threadpoolctl (when installed) for the BLAS numpy has already loaded."""
    global _THREAD_LIMITER
    for key in THREAD_VARIABLES:
        os.environ[key] = str(threads)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return
    _THREAD_LIMITER = threadpool_limits(limits=threads)


def _init_worker(payload: bytes, threads: int | None) -> None:
    """Pool initializer: cap the worker's threads, then unpickle the run's ``shared`` object once."""
    global _WORKER_SHARED
    if threads is not None:
        limit_threads(threads)
    _WORKER_SHARED = pickle.loads(payload)


def _call(fn: Callable[[Any, Any], Any], item: Any) -> Any:
    """Worker side of one task: ``fn(shared, item)`` with this worker's ``shared``."""
    if _WORKER_SHARED is _UNSET:  # pragma: no cover - the initializer always runs first
        raise RuntimeError("routerlab.execute: worker started without its shared object")
    return fn(_WORKER_SHARED, item)


def name_task(exc: BaseException, index: int, item: Any, executor: str) -> BaseException:
    """Mark ``exc`` (raised by task ``index``) with the task it came from, keeping its type.

    A user error (:class:`RouterlabError`, printed by the CLI as one line) gets ``task N: `` in front of
    its message; every exception gets a note naming the executor, the index and the item, which Python
    prints with the traceback.
    """
    shown = repr(item)
    if len(shown) > 120:
        shown = shown[:117] + "..."
    if isinstance(exc, RouterlabError) and exc.args and isinstance(exc.args[0], str):
        exc.args = (f"task {index}: {exc.args[0]}", *exc.args[1:])
    if isinstance(exc, Exception):
        exc.add_note(f"routerlab.execute: raised by task {index} (item {shown}) on the {executor} executor")
    return exc


def default_context() -> multiprocessing.context.BaseContext:
    """``forkserver`` where the platform has it (Linux), else ``spawn``: never plain ``fork``, which copies
    the driver's threads and locks into workers."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


class LocalProcessExecutor:
    """Tasks in ``workers`` local processes (see the module docstring); results as they finish.

    Each worker's math libraries are capped at ``threads_per_worker`` threads (``None``: left alone), as
    Dask does for its workers, so the processes share the cores instead of oversubscribing them.

    The pool starts on the first :meth:`run` and is kept for later runs given the *same* ``shared``
    object (a new object means a new pool, whose workers receive it once each). A failing task stops
    the run: tasks not yet started are cancelled and the task's exception is raised in the driver,
    named by :func:`name_task`. Ctrl-C, or a caller that stops iterating, terminates the workers.
    """

    name = "local"

    def __init__(
        self,
        workers: int | None = None,
        *,
        threads_per_worker: int | None = 1,
        mp_context: multiprocessing.context.BaseContext | None = None,
    ) -> None:
        check_count(workers, "local executor: workers", allow_none=True)
        check_count(threads_per_worker, "local executor: threads_per_worker", allow_none=True)
        self.workers: int = (os.cpu_count() or 1) if workers is None else workers
        self.threads_per_worker = threads_per_worker
        self._context = mp_context or default_context()
        self._pool: ProcessPoolExecutor | None = None
        self._pool_shared: Any = _UNSET

    def _pool_for(self, shared: Any) -> ProcessPoolExecutor:
        if self._pool is not None and self._pool_shared is shared:
            return self._pool
        self._shutdown(terminate=False)
        try:
            payload = pickle.dumps(shared, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # any pickling failure is the same user-facing problem
            raise UsageError(
                f"local executor: the shared object ({type(shared).__name__}) cannot be sent to worker "
                f"processes: {exc}"
            ) from exc
        self._pool = ProcessPoolExecutor(
            max_workers=self.workers, mp_context=self._context, initializer=_init_worker,
            initargs=(payload, self.threads_per_worker),
        )
        self._pool_shared = shared
        return self._pool

    def run(self, fn: Callable[[Any, T], R], items: Sequence[T], *, shared: Any = None) -> Iterator[tuple[int, R]]:
        """Yield ``(index, fn(shared, items[index]))`` as tasks finish (module docstring)."""
        items = list(items)
        if not items:
            return
        pool = self._pool_for(shared)
        # Keep at most 2 tasks per worker queued: cheap to cancel on error, and items go out lazily.
        pending: dict[Future[Any], int] = {}
        next_index = 0
        finished = False
        try:
            while next_index < len(items) or pending:
                while next_index < len(items) and len(pending) < 2 * self.workers:
                    pending[pool.submit(_call, fn, items[next_index])] = next_index
                    next_index += 1
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    index = pending.pop(future)
                    exc = future.exception()
                    if exc is not None:
                        raise name_task(exc, index, items[index], self.name) from exc.__cause__
                    yield index, future.result()
            finished = True
        finally:
            if not finished:
                for future in pending:
                    future.cancel()
                # An error, Ctrl-C or an abandoned iterator: do not wait for tasks already running.
                self._shutdown(terminate=True)

    def _shutdown(self, *, terminate: bool) -> None:
        pool, self._pool, self._pool_shared = self._pool, None, _UNSET
        if pool is None:
            return
        # The pool's worker processes (a private attribute, read only to terminate them on Ctrl-C).
        procs = list((getattr(pool, "_processes", None) or {}).values()) if terminate else []
        pool.shutdown(wait=not terminate, cancel_futures=True)
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        for proc in procs:
            proc.join(timeout=5)

    def close(self) -> None:
        """Stop the worker processes (idempotent)."""
        self._shutdown(terminate=False)

    def __enter__(self) -> LocalProcessExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown: nothing left to report to
            self._shutdown(terminate=True)


def _save_npy(path: Path, array: np.ndarray) -> None:
    def save(tmp: str) -> None:
        with open(tmp, "wb") as fh:  # a handle: np.save would add ".npy" to the temp name
            np.save(fh, array, allow_pickle=False)

    atomic_write(path, save)


class SharedArrays(Mapping[str, np.ndarray]):
    """Named numpy arrays that worker processes map from disk instead of receiving a copy.

    ``SharedArrays({"score": big})`` writes each array once to a temporary ``.npy`` file; pickling the
    object sends only the file paths, and ``shared["score"]`` in any process returns a read-only
    ``np.memmap`` (opened once per process). The creating process owns the files and deletes them on
    :meth:`close` (or at exit of a ``with`` block); copies in workers never delete anything. On a Dask
    cluster of several machines ``directory`` must be a filesystem every worker mounts at the same path.
    """

    def __init__(self, arrays: Mapping[str, np.ndarray], *, directory: str | Path | None = None) -> None:
        self._owner = True
        self._dir = Path(tempfile.mkdtemp(prefix="routerlab-shared-", dir=directory))
        self._paths: dict[str, str] = {}
        self._shapes: dict[str, tuple[tuple[int, ...], str]] = {}
        try:
            for i, (key, array) in enumerate(arrays.items()):
                if not isinstance(array, np.ndarray) or array.dtype == object:
                    raise UsageError(f"SharedArrays: {key!r} must be a numeric numpy array, got {type(array).__name__}")
                path = self._dir / f"{i}.npy"
                _save_npy(path, np.ascontiguousarray(array))
                self._paths[key] = str(path)
                self._shapes[key] = (tuple(array.shape), str(array.dtype))
        except BaseException:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise

    def __getstate__(self) -> dict[str, Any]:
        return {"paths": self._paths, "shapes": self._shapes, "dir": str(self._dir)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._owner = False
        self._paths = dict(state["paths"])
        self._shapes = dict(state["shapes"])
        self._dir = Path(state["dir"])

    def __getitem__(self, key: str) -> np.ndarray:
        path = self._paths[key]
        array = _MAPPED.get(path)
        if array is None:
            if not os.path.exists(path):
                raise UsageError(
                    f"SharedArrays: {path} (array {key!r}) is not on this machine; give SharedArrays a "
                    "directory every worker mounts"
                )
            array = np.load(path, mmap_mode="r", allow_pickle=False)
            _MAPPED[path] = array
        return array

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    @property
    def directory(self) -> Path:
        """The folder holding the files (the same path in every process that maps them)."""
        return self._dir

    def shape(self, key: str) -> tuple[int, ...]:
        """The array's shape, without opening its file."""
        return self._shapes[key][0]

    @property
    def nbytes(self) -> int:
        """Bytes on disk across all arrays (what a copy per worker would have cost)."""
        return sum(os.path.getsize(p) for p in self._paths.values())

    def close(self) -> None:
        """Delete the files (only in the process that wrote them; idempotent)."""
        if self._owner:
            for path in self._paths.values():
                _MAPPED.pop(path, None)
            shutil.rmtree(self._dir, ignore_errors=True)
            self._owner = False

    def __enter__(self) -> SharedArrays:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SharedArrays({', '.join(f'{k}={s[0]}:{s[1]}' for k, s in self._shapes.items())})"
