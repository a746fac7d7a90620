"""The BLAS thread count of a serving process, set on purpose rather than left to the environment.

A server routes one request at a time per worker thread, with small matrix products (a query against the
training rows): a second BLAS thread per product does not finish it sooner but doubles the CPU each request
takes (knn:k=10 on 2 cores: 10.1 ms of CPU per request with OpenBLAS's default, 4.5 ms with one thread), and the
worker threads already use the cores. ``routerlab serve --blas-threads N`` (default 1) applies this at startup,
whatever ``OPENBLAS_NUM_THREADS`` or ``OMP_NUM_THREADS`` say.
"""

from __future__ import annotations

import math

from routerlab.errors import UsageError

DEFAULT_BLAS_THREADS = 1


def check_blas_threads(n: object) -> int:
    """``n`` as a thread count: a UsageError naming ``--blas-threads`` unless it is an integer in 1..1024."""
    if isinstance(n, bool) or not isinstance(n, int | float) or not math.isfinite(n) or int(n) != n \
            or not 1 <= n <= 1024:
        raise UsageError(f"--blas-threads must be an integer in 1..1024, got {n!r}")
    return int(n)


def limit_blas_threads(n: int = DEFAULT_BLAS_THREADS) -> dict[str, int]:
    """Set every BLAS library loaded in this process (numpy's and scipy's OpenBLAS, MKL, ...) to ``n`` threads,
    for the rest of the process; returns each library's thread count before (by its file path). Call it once
    the router is trained, when every library the routing path uses has been loaded."""
    from threadpoolctl import threadpool_limits

    n = check_blas_threads(n)
    before = blas_threads()
    threadpool_limits(limits=n, user_api="blas")
    return before


def blas_threads() -> dict[str, int]:
    """The thread count of each loaded BLAS library, by its file path."""
    from threadpoolctl import threadpool_info

    return {str(info["filepath"]): int(info["num_threads"]) for info in threadpool_info()
            if info.get("user_api") == "blas"}
