"""Whether the compiled (numba) kernels for 0/1 HSE can be used (SPEC 2).

numba is a core dependency, but it is imported the first time a kernel is wanted, never when
routerlab is imported. Where it cannot import (a platform without its wheels, a broken llvmlite) the
NumPy/BLAS routes give the same numbers, slower; this is said once, at debug level, on the
``routerlab.society`` logger.

A new process pays numba's start-up on its first kernel: its import, the one-time set-up of its CPU
target and the load of the kernels from numba's disk cache (about 0.3 CPU-s, nearly all of it numba's
own start-up, not the kernels). :func:`prefetch` starts that in a background thread where the caller
has other work to do first (a table's scores transposed to the behaviour matrix).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

from routerlab.errors import UsageError

GramRoute = Literal["auto", "popcount", "blas"]
GRAM_ROUTES: tuple[str, ...] = get_args(GramRoute)

SMALL_N = 128  # below this many actors "auto" keeps the NumPy routes: numba's start-up would cost more
log = logging.getLogger("routerlab.society")
_state: dict[str, ModuleType | None] = {}
_prefetched: set[str] = set()  # dtypes whose kernels a background thread has been started to load
_prefetch_threads: list[threading.Thread] = []
_prefetch_lock = threading.Lock()


def _join_prefetch() -> None:
    """Wait for running prefetch threads: kernels never run in two threads at once (numba's workqueue
    threading layer, its fallback where OpenMP and TBB are missing, aborts the process on concurrent use)."""
    with _prefetch_lock:
        running = [t for t in _prefetch_threads if t is not threading.current_thread()]
        _prefetch_threads[:] = [t for t in _prefetch_threads if t.is_alive()]
    for thread in running:
        thread.join()


def kernels() -> ModuleType | None:
    """The compiled-kernel module :mod:`routerlab.society._popcount`, or None where numba does not import."""
    if _prefetch_threads:
        _join_prefetch()
    if "mod" not in _state:
        try:
            from routerlab.society import _popcount
        except ImportError as exc:  # numba (or its llvmlite) is not installed or does not load
            log.debug("numba is not available (%s): 0/1 HSE uses the float32 BLAS Gram and the NumPy Prim "
                      "(the same numbers, slower); numba is a dependency of routerlab: reinstall it", exc)
            _state["mod"] = None
        else:
            _state["mod"] = _popcount
    return _state["mod"]


def available() -> bool:
    """True when numba imports, so the popcount Gram and the compiled Prim can run."""
    return kernels() is not None


def _warm(dtype: str) -> None:
    try:  # the module directly, not kernels(): this thread never writes _state (see disabled())
        from routerlab.society import _popcount
    except ImportError:
        return  # the caller's own kernels() call says so
    try:
        _popcount.warm_up(np.dtype(dtype))
    except Exception as exc:  # pragma: no cover - an error here resurfaces in the caller's own call
        log.debug("prefetching the numba kernels failed: %s", exc)


def prefetch(dtype: npt.DTypeLike) -> threading.Thread | None:
    """Start loading numba and the kernels for a behaviour matrix of ``dtype`` in a background thread.

    Returns the thread, or None when there is nothing to do (numba known missing or disabled, or this
    dtype already started). The kernels give the same results whether or not this ran; it only moves
    numba's start-up (and, with an empty disk cache, its compilation) off the caller's critical path.
    :func:`kernels` waits for it, so no kernel runs while it does.
    """
    if "mod" in _state and _state["mod"] is None:
        return None
    key = np.dtype(dtype).str
    with _prefetch_lock:
        if key in _prefetched:
            return None
        _prefetched.add(key)
        thread = threading.Thread(target=_warm, args=(key,), name="routerlab-numba-prefetch", daemon=True)
        thread.start()  # under the lock: _join_prefetch never sees a thread not yet started
        _prefetch_threads.append(thread)
    return thread


def check_gram(gram: str) -> str:
    if gram not in GRAM_ROUTES:
        raise UsageError(f"unknown Gram route {gram!r}; use one of {', '.join(GRAM_ROUTES)}")
    return gram


def use_popcount(gram: str, binary: bool, n: int = SMALL_N) -> bool:
    """Whether the popcount Gram serves ``n`` actors whose scores are (``binary``) or are not all 0/1."""
    check_gram(gram)
    if gram == "blas":
        return False
    if gram == "popcount":
        if not binary:
            raise UsageError("gram='popcount' needs 0/1 scores; graded scores use the float64 route "
                             "(gram='auto' or 'blas')")
        if not available():
            raise UsageError("gram='popcount' needs numba, which does not import here: reinstall routerlab "
                             "(numba is a dependency) or use gram='auto'")
        return True
    return binary and n >= SMALL_N and available()


@contextmanager
def disabled() -> Iterator[None]:
    """Run the block as if numba were missing: the BLAS Gram and NumPy Prim (benchmarks, tests)."""
    had, saved = "mod" in _state, _state.get("mod")
    _state["mod"] = None
    try:
        yield
    finally:
        if had:
            _state["mod"] = saved
        else:
            _state.pop("mod", None)
