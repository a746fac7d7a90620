"""Per-actor worker pools: each actor's backend calls run on that actor's own threads, behind its own bounded
queue, so a slow or hanging actor uses up its own capacity and never another's.

A :class:`ActorPool` owns ``workers`` threads and a queue of at most ``queue_size`` waiting jobs. Submitting to a
full queue raises :class:`QueueFull` at once (the server answers 429 with ``Retry-After``) instead of waiting.
A :class:`Job` runs ``fn(job)`` on a worker; its result or exception is handed to the event loop through an
``asyncio`` future (``loop.call_soon_threadsafe``), so a worker never waits for the event loop and the event
loop never waits for a worker. A job carries a ``cancel`` event that the server sets when the client goes away,
the deadline passes or the server stops: a job still queued is then skipped, and a running one is expected to
stop between tokens (the backends check the event); its worker is free again only when the backend has
really returned.

Streams use the same workers: the producer job pushes each delta to the event loop the same way and never blocks
on the reader, so a paused reader holds no thread and no slot a thread it waits on needs (no deadlock at any
client count).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from routerlab.errors import RouterlabError

T = TypeVar("T")

QUEUED, RUNNING, DONE, ABORTED = "queued", "running", "done", "aborted"


class QueueFull(RouterlabError):
    """The actor's queue is full (HTTP 429); ``retry_after`` is the suggested wait in whole seconds."""

    def __init__(self, actor: str, queued: int, retry_after: int) -> None:
        super().__init__(f"actor {actor!r} is busy: {queued} requests are waiting for it; retry in "
                         f"{retry_after} s")
        self.actor = actor
        self.retry_after = retry_after


class PoolClosed(RouterlabError):
    """The server is shutting down and takes no new work (HTTP 503)."""


class Job(Generic[T]):
    """One unit of work for an actor's pool: ``fn(job)`` run on a worker, its outcome in :attr:`future`.

    State moves queued -> running -> done, or to aborted from either (``abort``); the first of "done" (the
    worker's :meth:`finish`) and "aborted" (the server's :meth:`abort`) wins, so a request that just met its
    deadline is either answered or aborted, never both.
    """

    def __init__(self, fn: Callable[[Job[T]], T], loop: asyncio.AbstractEventLoop) -> None:
        self.fn = fn
        self.loop = loop
        self.future: asyncio.Future[T] = loop.create_future()
        self.cancel = threading.Event()
        self.started_at: float | None = None
        self.aborted_at: float | None = None
        self.state = QUEUED
        self._lock = threading.Lock()
        self._claimed = False

    def begin(self) -> bool:
        """Called by the worker: False when the job was aborted while it waited (it is skipped)."""
        with self._lock:
            if self.state != QUEUED:
                return False
            self.state = RUNNING
            self.started_at = time.perf_counter()
            return True

    def finish(self) -> bool:
        """Called by ``fn`` when its answer is complete: True when it counts (not aborted first)."""
        with self._lock:
            if self.state == ABORTED:
                return False
            self.state = DONE
            return True

    def abort(self) -> str:
        """Cancel the job (client gone, deadline, shutdown); returns the state it was in (``done``: too late,
        the answer stands; ``queued``: it never ran; ``running``: the backend is told to stop)."""
        with self._lock:
            before = self.state
            if before in (QUEUED, RUNNING):
                self.state = ABORTED
                self.aborted_at = time.perf_counter()
                self.cancel.set()
            return before

    def claim(self) -> bool:
        """True for the first caller only: who settles an aborted job's row (or frees its query id)."""
        with self._lock:
            first, self._claimed = not self._claimed, True
            return first

    def call_in_loop(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the event loop, never blocking; nothing happens when the loop has closed."""
        with contextlib.suppress(RuntimeError):  # the loop closed: the server is gone, nobody waits
            self.loop.call_soon_threadsafe(fn, *args)

    def _settle(self, result: T | None, error: BaseException | None) -> None:
        def settle() -> None:
            if self.future.done():
                return
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(result)  # type: ignore[arg-type]

        self.call_in_loop(settle)


class ActorPool:
    """``workers`` threads and a bounded queue for one actor (see the module docstring)."""

    def __init__(self, actor: str, workers: int, queue_size: int) -> None:
        if workers < 1 or queue_size < 0:
            raise ValueError(f"an actor pool needs workers >= 1 and queue_size >= 0, got {workers}, {queue_size}")
        self.actor = actor
        self.workers = workers
        self.queue_size = queue_size
        self._pending: deque[Job[Any]] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._running: set[Job[Any]] = set()
        self._idle = 0
        self._mean_s = 1.0  # running mean of job durations, for Retry-After
        self._threads: list[threading.Thread] = []  # started on demand, up to ``workers``

    def submit(self, job: Job[Any]) -> None:
        """Queue ``job``; :class:`QueueFull` when ``queue_size`` jobs already wait (none are dropped)."""
        with self._cond:
            if self._closed:
                raise PoolClosed("the server is shutting down")
            if any(j.state == ABORTED for j in self._pending):
                self._pending = deque(j for j in self._pending if j.state != ABORTED)
            idle = self.workers - len(self._running)
            if len(self._pending) >= self.queue_size + max(0, idle):
                raise QueueFull(self.actor, len(self._pending), self.retry_after())
            self._pending.append(job)
            if self._idle < len(self._pending) and len(self._threads) < self.workers:
                thread = threading.Thread(target=self._work, daemon=True,
                                          name=f"routerlab-actor-{self.actor}-{len(self._threads)}")
                self._threads.append(thread)
                thread.start()
            self._cond.notify()

    def retry_after(self) -> int:
        """Seconds a refused client should wait: the queue's expected drain time, 1..60."""
        waiting = len(self._pending) + 1
        return int(min(60, max(1, math.ceil(self._mean_s * waiting / self.workers))))

    @property
    def busy(self) -> int:
        """Jobs running now."""
        return len(self._running)

    @property
    def queued(self) -> int:
        """Jobs waiting (aborted ones not counted)."""
        return sum(1 for j in self._pending if j.state != ABORTED)

    def stuck(self) -> bool:
        """Whether every worker is held by a call that was told to stop and has not returned (a backend that hangs
        and ignores cancellation): a queued job cannot start until one returns."""
        with self._cond:
            return len(self._running) >= self.workers and all(j.state == ABORTED for j in self._running)

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._idle += 1
                    try:
                        self._cond.wait()
                    finally:
                        self._idle -= 1
                if not self._pending:  # closed and drained
                    return
                job = self._pending.popleft()
                if not job.begin():
                    continue
                self._running.add(job)
            t0 = time.perf_counter()
            result: Any = None
            error: BaseException | None = None
            try:
                result = job.fn(job)
            except BaseException as exc:  # handed to the waiting request, never printed here
                error = exc
            finally:
                with self._cond:
                    self._running.discard(job)
                    self._mean_s = 0.8 * self._mean_s + 0.2 * (time.perf_counter() - t0)
            job._settle(result, error)

    def close(self) -> None:
        """Take no more jobs and abort every queued and running one (their backends stop between tokens)."""
        with self._cond:
            self._closed = True
            jobs = [*self._pending, *self._running]
            self._cond.notify_all()
        for job in jobs:
            job.abort()

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds in all for the workers to end; False when one is still inside a backend
        (a hanging one: its thread is a daemon and ends with the process)."""
        end = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, end - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)
