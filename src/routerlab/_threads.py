"""torch's intra-op thread count, changed for a block without racing other threads.

``torch.set_num_threads`` is process-wide. Three places run torch on a chosen count (the local LLM backend's
``threads=`` option, the MiniLM encoder's ``threads`` option, the probe routers' one-thread training); under
``routerlab serve`` such blocks run in several threads at once, and a plain save/set/restore in each lets one
thread restore the count while another still relies on its own (or leaves the wrong count behind for good).

:func:`torch_threads` counts the blocks that hold a count: blocks asking for the same count run together,
a block asking for another waits until they have all left, and the count the process had before is restored
when the last one leaves. A block nested in one of the same thread runs on the outer block's count. Torch work
outside any block runs on whatever count is current (the setting is process-wide; nothing can scope it to a
thread).

:func:`auto_threads` picks a count for a torch user that was given none (a ``local`` backend without
``threads=``): the cores this process may run on that other processes leave free (:func:`free_cores`), shared
among the torch users of this process that can run at the same time (:func:`hold_torch_user`). On a shared
2-core machine torch's own default (one thread per core) made SmolLM2 fall from 9.8 to 0.2 questions/s while
other jobs held the cores: spinning threads that wait for a core cost far more than a thread fewer.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

_cond = threading.Condition()
_held: dict[str, Any] = {"count": 0, "threads": 0, "before": 0}  # blocks inside, their count, the count before
_local = threading.local()


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block with torch on ``n`` intra-op threads (``n <= 0``: leave the count as it is)."""
    depth: int = getattr(_local, "depth", 0)
    if n <= 0 or depth:  # nothing to set, or nested: the outer block's count stands
        _local.depth = depth + (n > 0)
        try:
            yield
        finally:
            _local.depth = depth
        return
    import torch

    with _cond:
        while _held["count"] and _held["threads"] != n:
            _cond.wait()
        if not _held["count"]:
            _held["before"] = torch.get_num_threads()
            if _held["before"] != n:
                torch.set_num_threads(n)
            _held["threads"] = n
        _held["count"] += 1
    _local.depth = 1
    try:
        yield
    finally:
        _local.depth = 0
        with _cond:
            _held["count"] -= 1
            if not _held["count"]:
                if torch.get_num_threads() != _held["before"]:
                    torch.set_num_threads(_held["before"])
                _cond.notify_all()


# ------------------------------------------------------------------------------------- picking a count
_users: Counter[Hashable] = Counter()  # torch users of this process that may run at the same time, by key
_users_lock = threading.Lock()
SAMPLE_S = 0.3
"""How long :func:`measure_free_cores` watches the cores (seconds)."""


def allowed_cores() -> list[int]:
    """The CPUs this process may run on (``os.sched_getaffinity``; every CPU where it is not available)."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    if getaffinity is not None:
        try:
            return sorted(getaffinity(0))
        except OSError:
            pass
    return list(range(os.cpu_count() or 1))


def free_cores(allowed: int, busy_elsewhere: float) -> int:
    """Of ``allowed`` cores, how many other processes leave free when they keep ``busy_elsewhere`` cores busy
    (rounded to the nearest core); at least 1."""
    return max(1, min(allowed, math.floor(allowed - max(0.0, busy_elsewhere) + 0.5)))


def cpu_ticks(stat_text: str, cpus: list[int]) -> tuple[int, int] | None:
    """(idle, total) clock ticks of ``cpus`` in a ``/proc/stat`` text (idle counts iowait); None when a CPU's
    line is missing or malformed."""
    lines = {}
    for line in stat_text.splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit():
            lines[int(name[3:])] = rest.split()
    idle = total = 0
    for cpu in cpus:
        fields = lines.get(cpu)
        if fields is None or len(fields) < 5 or not all(f.isdigit() for f in fields[:8]):
            return None
        values = [int(f) for f in fields[:8]]  # user nice system idle iowait irq softirq steal
        idle += values[3] + values[4]
        total += sum(values)
    return idle, total


def _read_stat() -> str | None:
    try:
        with open("/proc/stat", encoding="ascii") as f:
            return f.read()
    except OSError:
        return None


def _own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def measure_free_cores(sample_s: float = SAMPLE_S, *, read_stat: Callable[[], str | None] = _read_stat,
                       own_cpu: Callable[[], float] = _own_cpu_seconds, clock: Callable[[], float] = time.monotonic,
                       sleep: Callable[[float], None] = time.sleep,
                       loadavg: Callable[[], tuple[float, float, float]] | None = None,
                       cpus: list[int] | None = None) -> int:
    """The cores this process may use that other processes leave free now: the allowed CPUs' busy time over
    ``sample_s`` seconds (``/proc/stat``) less this process's own; where ``/proc/stat`` cannot be read, the
    1-minute load average scaled to the allowed share of the machine's cores. At least 1. (The readers, the
    clock and ``cpus``, default :func:`allowed_cores`, are arguments for the tests.)"""
    cpus = allowed_cores() if cpus is None else cpus
    first, own0, t0 = read_stat(), own_cpu(), clock()
    before = None if first is None else cpu_ticks(first, cpus)
    if before is not None:
        sleep(sample_s)
        second, own1, t1 = read_stat(), own_cpu(), clock()
        after = None if second is None else cpu_ticks(second, cpus)
        if after is not None and after[1] > before[1] and t1 > t0:
            busy = len(cpus) * (1.0 - (after[0] - before[0]) / (after[1] - before[1]))
            return free_cores(len(cpus), busy - (own1 - own0) / (t1 - t0))
    get_load = loadavg or getattr(os, "getloadavg", None)
    try:
        load = get_load()[0] if get_load is not None else 0.0
    except OSError:
        load = 0.0
    return free_cores(len(cpus), load * len(cpus) / max(len(cpus), os.cpu_count() or 1))


def hold_torch_user(key: Hashable) -> Callable[[], None]:
    """Count a torch user of this process for :func:`auto_threads` until the returned function is called
    (once; later calls do nothing). Users of one ``key`` never run at once (e.g. the backends that share one
    model and its lock) and count as one."""
    with _users_lock:
        _users[key] += 1
    released = threading.Event()

    def release() -> None:
        with _users_lock:
            if released.is_set():
                return
            released.set()
            _users[key] -= 1
            if _users[key] <= 0:
                del _users[key]

    return release


def torch_users() -> int:
    """How many torch users of this process may run at the same time (distinct keys held)."""
    with _users_lock:
        return len(_users)


def auto_threads(users: int | None = None, free: int | None = None) -> int:
    """A torch thread count for one user that was given none: the free cores (:func:`measure_free_cores`)
    divided among the ``users`` that may run at once (default: those held, at least 1); at least 1."""
    n_users = max(1, torch_users() if users is None else users)
    return max(1, (measure_free_cores() if free is None else free) // n_users)
