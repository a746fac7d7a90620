"""Whether the compiled (numba) kernels for 0/1 HSE can be used (SPEC 2).

numba is a core dependency, but it is imported the first time a kernel is wanted, never when
routerlab is imported. Where it cannot import (a platform without its wheels, a broken llvmlite) the
NumPy/BLAS routes give the same numbers, slower; this is said once, at debug level, on the
``routerlab.society`` logger.

A new process pays numba's start-up on its first kernel: its import, the one-time set-up of its CPU
target and the load of the kernels from numba's disk cache (about 0.45 CPU-s, nearly all of it numba's
own start-up: each kernel loads in 3-7 ms). So societies of fewer than SMALL_N actors never load numba.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Literal, get_args

from routerlab.errors import UsageError

GramRoute = Literal["auto", "popcount", "blas"]
GRAM_ROUTES: tuple[str, ...] = get_args(GramRoute)

SMALL_N = 128  # below this many actors "auto" keeps the NumPy routes: numba's start-up would cost more
log = logging.getLogger("routerlab.society")
_state: dict[str, ModuleType | None] = {}


def kernels() -> ModuleType | None:
    """The compiled-kernel module :mod:`routerlab.society._popcount`, or None where numba does not import."""
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
