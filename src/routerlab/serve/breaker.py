"""A circuit breaker per actor: an actor whose backend keeps failing is refused at once for a while, instead of
every request waiting its turn for the same failure.

Per-actor workers (:mod:`routerlab.serve.pool`) keep a hanging actor from taking another actor's capacity, but its
own requests still queue behind calls that each take the backend's whole timeout and retries: with 4 workers, a
2 s timeout and one retry, the 100th queued request would wait about 100 s to fail. The breaker bounds that:

- **closed** (normal): calls go through; ``trip_after`` consecutive failures open it: errors the backend raised,
  and deadlines that passed while the call ran or while it waited behind workers all stuck in calls told to stop
  (a backend that hangs without ever raising); not requests cancelled by their client or by a shutdown;
- **open**: every call is refused at once (:class:`ActorUnavailable`, HTTP 503 with ``Retry-After``) for
  ``cooldown_s`` seconds; calls already queued for the actor fail as soon as a worker takes them;
- **half-open** after the cooldown: one trial call goes through while the others are still refused; its success
  closes the breaker, its failure opens it again for twice the previous cooldown (at most
  :data:`MAX_COOLDOWN_S`).

A success in the closed state resets the count. ``trip_after=0`` turns the breaker off.
"""

from __future__ import annotations

import math
import threading
import time

from routerlab.errors import RouterlabError

MAX_COOLDOWN_S = 300.0
"""The longest an actor stays refused after repeated failed trials."""

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half-open"


class ActorUnavailable(RouterlabError):
    """The actor's breaker is open: its backend failed ``failures`` times in a row (HTTP 503, ``Retry-After``)."""

    def __init__(self, actor: str, failures: int, retry_after: int) -> None:
        super().__init__(f"actor {actor!r} is unavailable: its backend failed {failures} times in a row; retry in "
                         f"{retry_after} s")
        self.actor = actor
        self.retry_after = retry_after


class CircuitBreaker:
    """The breaker of one actor (see the module docstring). Thread-safe."""

    def __init__(self, actor: str, trip_after: int = 5, cooldown_s: float = 10.0) -> None:
        if trip_after < 0 or not (math.isfinite(cooldown_s) and cooldown_s > 0):
            raise ValueError(f"a breaker needs trip_after >= 0 and a finite cooldown > 0, got {trip_after}, "
                             f"{cooldown_s}")
        self.actor = actor
        self.trip_after = trip_after
        self.cooldown_s = float(cooldown_s)
        self.state = CLOSED
        self.failures = 0
        self.trips = 0
        self._cooldown = self.cooldown_s
        self._open_until = 0.0
        self._trial_running = False
        self._lock = threading.Lock()

    def before_call(self) -> None:
        """Called before a backend call: :class:`ActorUnavailable` when the actor is refused now."""
        if self.trip_after == 0:
            return
        with self._lock:
            if self.state == CLOSED:
                return
            now = time.monotonic()
            if self.state == OPEN and now >= self._open_until:
                self.state = HALF_OPEN
            if self.state == HALF_OPEN and not self._trial_running:
                self._trial_running = True  # this call is the trial
                return
            wait = max(1, math.ceil(self._open_until - now)) if self.state == OPEN else 1
            raise ActorUnavailable(self.actor, self.failures, wait)

    def check(self) -> None:
        """:class:`ActorUnavailable` while the breaker is open and cooling down; changes nothing (the server asks
        before queueing a request, so that one is refused at once even when every worker is stuck)."""
        if self.trip_after == 0:
            return
        with self._lock:
            now = time.monotonic()
            if self.state == OPEN and now < self._open_until:
                raise ActorUnavailable(self.actor, self.failures, max(1, math.ceil(self._open_until - now)))

    def success(self) -> None:
        """The call answered: the count restarts and a half-open breaker closes."""
        with self._lock:
            self.failures = 0
            self._trial_running = False
            if self.state != CLOSED:
                self.state = CLOSED
                self._cooldown = self.cooldown_s

    def failure(self) -> None:
        """The backend failed the call: count it; open the breaker at ``trip_after`` in a row, or again after a
        failed trial or a failure once the cooldown has passed (for twice the previous cooldown)."""
        if self.trip_after == 0:
            return
        with self._lock:
            self.failures += 1
            if self.state == HALF_OPEN or (self.state == OPEN and time.monotonic() >= self._open_until):
                self._trial_running = False
                self._cooldown = min(MAX_COOLDOWN_S, self._cooldown * 2)
                self._open()
            elif self.state == CLOSED and self.failures >= self.trip_after:
                self._open()

    def cancelled(self) -> None:
        """The call was cancelled (client, deadline, shutdown): it says nothing about the backend; a trial that
        was cancelled lets the next call try."""
        with self._lock:
            self._trial_running = False

    def _open(self) -> None:
        self.state = OPEN
        self.trips += 1
        self._open_until = time.monotonic() + self._cooldown

    def describe(self) -> dict[str, object]:
        """State, consecutive failures and trips, for ``/v1/models``."""
        with self._lock:
            return {"state": self.state, "failures": self.failures, "trips": self.trips}
