"""Learning while serving (``routerlab serve --learn N``): an exploring router refitted every N feedback events.

An exploring router (``Router.explores``: ``linucb``, ``thompson``, ``eps-greedy``, ``barp``) acts by sampling
its own distribution, so the actors it tries get scored and the next fit knows more. After every ``N`` newly
recorded scores (``POST /v1/feedback``), a background thread fits a fresh router of the same spec on

- the **training side** of the table the server was started with (full feedback: every observed cell), and
- every **served request with feedback** (forced and aborted ones too: a score is a real outcome of that
  actor on that text): one observed cell, the actor that answered, its score; the other actors unobserved,

in one table given as full feedback with those cells NaN: each bandit reads every observed cell as one reward
observation (the linear bandits' per-actor ridge needs no reweighting, since the served actor's choice depends on
the context only; BaRP counts an unobserved cell at its actor's mean). The served texts are encoded by the
encoder the server already uses (fitted once, on the training texts). The fit runs outside the routing lock;
only the swap takes it (:meth:`RoutingService.swap_router`), so requests keep being routed by the previous router
until the new one is whole, and each logged propensity is the one the policy had when it decided. Events that
arrive during a fit are counted, and a fit starts again once N more have arrived. A failed refit is reported
(``last_error``) and the served router stays as it was.

:class:`Learner` is also what ``benchmarks/bench_learn.py`` drives in process.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from routerlab.data.table import MATRIX_FIELDS, Queries, RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features

if TYPE_CHECKING:
    from routerlab.routers.base import Router
    from routerlab.serve.feedback_store import FeedbackStore, ServedFeedback
    from routerlab.serve.routing import RoutingService


def check_learn(every: object, router: Router | None = None) -> int:
    """``--learn N``: an integer >= 1, with an exploring router (a UsageError naming the option otherwise)."""
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise UsageError(f"--learn: must be an integer >= 1 (refit after every N feedback events), got {every!r}")
    if router is not None and not router.explores:
        raise UsageError(f"--learn: router {router.name!r} acts by its argmax and does not explore, so refitting "
                         "it on its own choices would only confirm them; serve an exploring router (linucb, "
                         "thompson, eps-greedy or barp)")
    return every


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Learner:
    """Refits ``router_spec`` every ``every`` feedback events of ``store`` and swaps it into ``service``.

    ``train`` is the training side the service's router was fitted on (its texts encode with the service's
    encoder). :meth:`feedback` is the store's listener (added here); :meth:`wait` blocks until no refit runs
    (tests, benchmarks); ``service.learning`` holds the status ``/v1/models`` shows.
    """

    def __init__(self, service: RoutingService, router_spec: str, train: RoutingTable, store: FeedbackStore | None,
                 every: int, *, seed: int = 0) -> None:
        from routerlab.routers import get_router

        self.every = check_learn(every, get_router(router_spec, seed=seed))
        if train.actor_names != service.actor_names:
            raise UsageError(f"--learn: the training side has actors {train.actor_names}, the server "
                             f"{service.actor_names}")
        self.service = service
        self.router_spec = router_spec
        self.train = train
        self.store = store
        self.seed = seed
        self.refits = 0
        self.events = 0
        self.pending = 0
        self.last_refit: str | None = None
        self.last_refit_s: float | None = None
        self.last_error: str | None = None
        self._train_X: np.ndarray | None = None
        self._extra: list[ServedFeedback] = []  # events given directly (benchmarks without a store)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._running = False
        self._closed = False
        self._publish()
        if store is not None:
            store.add_listener(self.feedback)

    # -- events ------------------------------------------------------------------------------
    def feedback(self, event: ServedFeedback) -> None:
        """One newly recorded score: count it, and start a refit in the background after every N."""
        with self._lock:
            if self.store is None:
                self._extra.append(event)
            self.events += 1
            self.pending += 1
            start = self.pending >= self.every and not self._running and not self._closed
            if start:
                self._running = True
                self.pending = 0
            self._publish()
        if start:
            threading.Thread(target=self._run, name="routerlab-learn", daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                t0 = time.perf_counter()
                router = self.refit()
                self.service.swap_router(router)
                with self._lock:
                    self.refits += 1
                    self.last_refit = _utc_now()
                    self.last_refit_s = time.perf_counter() - t0
                    self.last_error = None
            except Exception as exc:  # the served router stays; the status says why
                with self._lock:
                    self.last_error = (str(exc).splitlines() or [type(exc).__name__])[0][:300]
            with self._lock:
                again = self.pending >= self.every and not self._closed
                if again:
                    self.pending = 0
                else:
                    self._running = False
                self._publish()
                if not again:
                    self._idle.notify_all()
                    return

    # -- the fit -------------------------------------------------------------------------------
    def scored(self) -> list[ServedFeedback]:
        """The served requests with feedback a refit learns from."""
        if self.store is not None:
            return self.store.scored()
        with self._lock:
            return list(self._extra)

    def training_data(self) -> tuple[RoutingTable, Features]:
        """The table (training side + one observed cell per scored served request) and its features."""
        events = [e for e in self.scored() if e.row.actor in self.service.actor_names]
        train, enc, actors = self.train, self.service.encoder, self.service.actors
        if self._train_X is None:
            self._train_X = np.asarray(enc.transform(list(train.queries.text.astype(str))))
        k, n0, m = len(events), train.n_queries, train.n_actors
        at = {a: j for j, a in enumerate(train.actor_names)}
        served_score = np.full((k, m), np.nan, dtype=np.float32)
        for i, e in enumerate(events):
            served_score[i, at[e.row.actor]] = e.entry.score
        mats: dict[str, Any] = {}
        for key in MATRIX_FIELDS:
            mat = getattr(train, key)
            if key == "score":
                mats[key] = np.vstack([np.asarray(mat, dtype=np.float32), served_score])
            elif mat is not None:
                mats[key] = np.vstack([np.asarray(mat, dtype=np.float32), np.full((k, m), np.nan, np.float32)])
        texts = [e.row.text for e in events]
        queries = Queries.create(
            [*train.queries.ids.astype(str), *(f"served:{e.row.query_id}" for e in events)],
            text=[*train.queries.text.astype(str), *texts],
            dataset=[*train.queries.dataset.astype(str), *(e.row.dataset for e in events)],
            split=["train"] * (n0 + k))
        table = RoutingTable(queries=queries, actors=train.actors, name=f"{train.name}+served", **mats)
        X = self._train_X if not k else np.vstack([self._train_X, np.asarray(enc.transform(texts))])
        return table, Features.of(X, queries, actors, enc.spec)

    def refit(self) -> Router:
        """A new router of the served spec fitted on :meth:`training_data` (seeded by the refit's number)."""
        from routerlab.routers import get_router

        table, features = self.training_data()
        router = get_router(self.router_spec, seed=self.seed + self.refits + 1)
        router.fit(table, features)
        return router

    # -- status --------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """Refits done, the last one's time (UTC) and duration, feedback events seen and pending, any error."""
        return {"every": self.every, "refits": self.refits, "last_refit": self.last_refit,
                "last_refit_s": None if self.last_refit_s is None else round(self.last_refit_s, 3),
                "feedback_events": self.events, "pending": self.pending, "refitting": self._running,
                "last_error": self.last_error}

    def _publish(self) -> None:
        self.service.learning = self.status()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no refit runs (True), or ``timeout`` seconds pass (False)."""
        with self._lock:
            return self._idle.wait_for(lambda: not self._running, timeout)

    def close(self) -> None:
        """Start no more refits (one running finishes)."""
        with self._lock:
            self._closed = True
