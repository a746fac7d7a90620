"""Partial observability (SPEC 1 observability, SPEC 5 Cold-start / Voyager; routerworld.txt 3.3): routers that
learn only the outcome of the actor a policy chose.

**Cold-start** (:func:`cold_start`): one log of the training split is drawn by a logging policy (default uniform
random, seeded), each training query carrying the outcome of one actor and its propensity; every router is
trained on that same log (so the comparison between routers stays paired) and evaluated on the full (hidden)
test split exactly as the full protocol evaluates it: the same metrics with bootstrap intervals, selection
shares, collapse flag, Oracle(Best-of-N) and paired comparison.

**Voyager** (:func:`voyager`): the training split is cut into T contiguous chunks (its given order or a seeded
permutation). Chunk 1 is logged by the uniform policy (the same draws for every router). For each router, at
round t = 1..T: train on the logged feedback of chunks 1..t, evaluate on the test split, then (t < T) route chunk
t+1 as the router is deployed (:meth:`routerlab.routers.base.Router.act`: an exploring router samples its
selection distribution and logs the drawn actor's probability; any other takes its argmax, propensity 1) and
reveal only the chosen cells. Each router's stream is its own: its choices decide what it learns next.

Choices where SPEC is silent (documented in docs/partial-observability.md):

- A router is refitted from scratch each round on everything logged so far (the paper's "trained on
  C_1..C_t"); nothing carries over between rounds but the log.
- Every round is evaluated with the run's full ``n_boot`` (a bootstrap over a few hundred test queries costs
  about 10 ms per router), so every round's intervals mean the same.
- A router's act draws come from a generator seeded by the run's seed, the round and the router's label, so a
  router's curve does not depend on which other routers share the run.
- The bounds (oracle, oracle-p) read the outcomes of whatever they route: the test split when evaluated, the
  next chunk when they act in the stream; random and oracle-p act by drawing from their distribution.
- V_B's best single actor is picked on the full training split, as in the full protocol: a metric reads the
  hidden full table (SPEC 1), so V_B means the same under every protocol.
- With a development part (``dev``, routerworld.txt 3.3: "checkpoint selection on a held-out development set";
  :func:`select_checkpoint`): the development queries leave the stream; a router's checkpoints are its fits of
  rounds 1..t, and at round t the one with the highest mu_o on the development queries (ties: the later round) is
  deployed: scored on the test split and routing chunk t+1. Bounds (``uses_test_labels``) are not selected.
"""

from __future__ import annotations

import copy
import dataclasses
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from routerlab.data.feedback import Feedback
from routerlab.data.provenance import Provenance
from routerlab.data.splits import Split, make_split, with_dev
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.features.registry import Encoder
from routerlab.metrics.selection import expected_per_query
from routerlab.progress import task, track
from routerlab.protocols.base import (
    Interval,
    MetricRecord,
    Options,
    Protocol,
    Result,
    RunContext,
    check_dev,
    register_protocol,
    setting,
)
from routerlab.protocols.full import (
    BY_HELP,
    BY_OPTIONS,
    Bench,
    Evaluation,
    EvaluationSettings,
    RouterLike,
    RouterResult,
    _class_path,
    applicable_routers,
    breakdown_summary,
    check_by,
    compare_and_bound,
    complete_rows,
    evaluation_result,
    featurize,
    fit_router,
    make_bench,
    resolve_compare_to,
    router_label,
    run_routers,
    score_router,
    shared_features,
    split_dataset_counts,
)
from routerlab.protocols.policies import LoggingPolicy, parse_policy
from routerlab.routers.base import Router

PROTOCOLS = ("full", "cold-start", "voyager")
"""The evaluation protocols (``routerlab evaluate --protocol``)."""

ORDERS = ("given", "shuffle")
"""How Voyager orders the training split before cutting it into chunks."""

CORRECT = 0.5
"""A logged outcome counts as correct when its score is >= 0.5 (SPEC 5)."""

_SHUFFLE_TAG = 0x53485546  # "SHUF": Voyager's seeded order
_ACT_TAG = 0x564F5941  # "VOYA": a router's act draws in the stream


# -- logging -------------------------------------------------------------------------------------------------
def uniform_log(part: RoutingTable, seed: int) -> Feedback:
    """The uniform logging policy on ``part`` (:class:`routerlab.protocols.policies.Uniform`: every actor whose
    outcome the table holds equally likely, propensity 1/m on a complete table), seeded: Voyager's chunk 1."""
    return parse_policy("uniform").log(part, seed=seed)


def log_summary(feedback: Feedback) -> dict[str, Any]:
    """What a log holds: queries logged, those whose logged cell has a known outcome (``n_observed``), the share of
    those that are correct (SPEC 5: score >= 0.5), and each actor's share of the logged queries."""
    table = feedback.table
    observed = ~np.isnan(table.score)
    rows = observed.any(axis=1)
    n_obs = int(rows.sum())
    out: dict[str, Any] = {"n_logged": int(table.n_queries), "n_observed": n_obs}
    if n_obs:
        values = table.score[observed]  # one cell per observed row
        out["correct_share"] = float((values >= CORRECT).mean())
        counts = observed.sum(axis=0)
        out["actor_shares"] = {a: float(c / n_obs) for a, c in zip(table.actor_names, counts, strict=True) if c}
    return out


# -- cold start ----------------------------------------------------------------------------------------------
def cold_start(
    table: RoutingTable,
    router_specs: Sequence[RouterLike],
    *,
    logging: str | LoggingPolicy = "uniform",
    split: str | Split = "given",
    encoder: str | Encoder = "tfidf",
    seed: int = 0,
    n_boot: int = 1000,
    cache_dir: str | None = None,
    features: tuple[Features, Features] | None = None,
    skip_inapplicable: bool = False,
    compare_to: str | None = "auto",
    sweep: str | None = None,
    lambdas: npt.ArrayLike | None = None,
    by: str = "none",
) -> Evaluation:
    """Cold-start (SPEC 5, routerworld.txt 3.3): train every router on ONE seeded log of the training split drawn
    by the ``logging`` policy, evaluate it on the full test split as :func:`routerlab.protocols.full.evaluate`
    does (same metrics, intervals, selection shares, collapse flag, Oracle(Best-of-N), paired comparison).

    The arguments mean what they mean for ``evaluate``; a router that cannot learn from logged feedback is an
    error, or with ``skip_inapplicable`` listed under ``skipped`` with its reason. The result's extra fields
    say ``protocol: "cold-start"`` and describe the log (``logging``: policy, queries logged, share correct).
    A sweep reads each actor's expected cost or latency from the logged cells only (what the router saw).
    ``by="dataset"`` breaks every metric down by dataset, as for ``evaluate``.
    """
    _, from_objects, reference = _check_run(router_specs, compare_to)
    check_by(by)
    policy = parse_policy(logging)
    if sweep is not None and sweep not in {"cost", "latency"}:
        raise UsageError(f"sweep must be 'cost' or 'latency', got {sweep!r}")
    sp = split if isinstance(split, Split) else make_split(table, split, seed)
    train, test = sp.apply(table)
    record = Provenance.of(table, sp, seed=seed)
    del table  # as in evaluate: the split's parts are all the run reads
    split_counts = split_dataset_counts(test, by)
    # the log is kept as its draws (actor, propensity per training query); its (queries x actors) table is made
    # for a check or a router's fit and let go after, so it is not held while routers score
    if policy.router is None:  # no features needed to log: check the routers before encoding
        with task("cold-start: logging the training split"):
            actor, propensity = policy.draw(train, seed=seed)
        feedback = Feedback.logged(train, actor, propensity)
        chosen, skipped = applicable_routers(router_specs, feedback, seed, skip_inapplicable)
        summary = log_summary(feedback)
        del feedback
        bench = make_bench(sp, train, test, encoder=encoder, cache_dir=cache_dir, features=features)
    else:  # the policy's router routes the training queries: encode first
        bench = make_bench(sp, train, test, encoder=encoder, cache_dir=cache_dir, features=features)
        with task("cold-start: logging the training split"):
            actor, propensity = policy.draw(train, bench.ftrain, train=train, ftrain=bench.ftrain, seed=seed)
        feedback = Feedback.logged(train, actor, propensity)
        chosen, skipped = applicable_routers(router_specs, feedback, seed, skip_inapplicable)
        summary = log_summary(feedback)
        del feedback
    results, fair = run_routers(chosen, lambda: Feedback.logged(train, actor, propensity), bench, "cold-start",
                                skipped=skipped, skip_inapplicable=skip_inapplicable, from_objects=from_objects,
                                seed=seed, n_boot=n_boot, sweep=sweep, lambdas=lambdas, by=by)
    with task("cold-start: paired bootstrap and Oracle best-of-N"):
        bon = compare_and_bound(results, fair, bench, reference, seed=seed, n_boot=n_boot)
    extra: dict[str, Any] = {"protocol": "cold-start", "logging": {**policy.describe(), **summary}}
    breakdown, notes = breakdown_summary(split_counts, bench)
    return _evaluation(record, bench, seed, results, bon, {**extra, **breakdown}, skipped, notes)


# -- voyager -------------------------------------------------------------------------------------------------
def voyager(
    table: RoutingTable,
    router_specs: Sequence[RouterLike],
    *,
    rounds: int = 5,
    order: str = "given",
    split: str | Split = "given",
    encoder: str | Encoder = "tfidf",
    seed: int = 0,
    n_boot: int = 1000,
    cache_dir: str | None = None,
    features: tuple[Features, Features] | None = None,
    skip_inapplicable: bool = False,
    compare_to: str | None = "auto",
    dev: float | None = None,
    dev_features: Features | None = None,
) -> Evaluation:
    """Voyager (SPEC 5, routerworld.txt 3.3 and 5.4): ``rounds`` = T contiguous chunks of the training split, in
    its given order or a seeded permutation (``order="shuffle"``); chunk 1 logged uniformly (seeded, the same for
    every router); each router, at round t, is trained on its log of chunks 1..t, evaluated on the test split, and
    (t < T) routes chunk t+1 by :meth:`Router.act`, only the chosen cells being revealed to it.

    ``results`` is the last round; ``extra["rounds"]`` holds every round as ``{"round": t, "n_train": ...,
    "results": [...], "oracle_best_of_n": {...}}``, each router's result with ``feedback`` (what it had logged:
    queries, share correct, share of its own choices correct, mean propensity). T must be in 2..number of training
    queries. A router that cannot be fitted in some round is an error, or with ``skip_inapplicable`` left out of
    every round and listed under ``skipped``.

    With a development part (``dev`` = a fraction of the training side, or a ``split`` that has one,
    :func:`routerlab.data.splits.with_dev`), the development queries leave the stream and the checkpoint deployed at
    each round is selected on them (:func:`select_checkpoint`); each round's result then carries ``checkpoint``
    (the round whose fit is deployed, its and every candidate's mu_o on the development queries) and
    ``extra["voyager"]["dev"]`` describes the part. ``dev_features`` are the development queries' vectors when
    ``features`` are given (both from one encoder); without ``features`` the encoder is fitted on the whole training
    side (development texts included, never their outcomes), so the vectors are those of the run without ``dev``.
    """
    _, from_objects, reference = _check_run(router_specs, compare_to)
    if isinstance(rounds, bool) or not isinstance(rounds, int | np.integer) or rounds < 2:
        raise UsageError(f"--rounds {rounds!r}: Voyager needs at least 2 rounds (chunk 1 logged uniformly, then "
                         "routed chunks)")
    if order not in ORDERS:
        raise UsageError(f"--order {order!r}: must be one of {', '.join(ORDERS)}")
    sp = split if isinstance(split, Split) else make_split(table, split, seed, dev=dev)
    if dev is not None and not sp.has_dev:
        sp = with_dev(table, sp, dev, seed)
    train, test = sp.apply(table)
    devpart = sp.apply_dev(table) if sp.has_dev else None
    if devpart is not None:
        features, dev_features = _dev_side_features(table, sp, test, features, dev_features, encoder, cache_dir)
    record = Provenance.of(table, sp, seed=seed)
    del table  # as in evaluate: the split's parts are all the run reads
    if rounds > train.n_queries:
        raise UsageError(f"--rounds {rounds}: more rounds than the {train.n_queries} training queries (each round "
                         "needs a chunk of at least one query)")
    chunks = chunk_positions(train.n_queries, int(rounds), order, seed)
    first = uniform_log(train.select_queries(chunks[0]), seed)
    # checked on round 1's feedback, the smallest any round trains on
    chosen, skipped = applicable_routers(router_specs, first, seed, skip_inapplicable)
    bench = make_bench(sp, train, test, encoder=encoder, cache_dir=cache_dir, features=features)
    judge = None if devpart is None else DevJudge.of(devpart, dev_features)
    books = {spec: LogBook.start(train, chunks[0], first) for spec, _ in chosen}
    per_router: dict[str, list[RouterResult]] = {spec: [] for spec, _ in chosen}
    best: dict[str, Checkpoint] = {}
    active = list(chosen)
    for t in track(range(1, int(rounds) + 1), "voyager: round", unit="round", label=str):  # "voyager: round 3 (3/5)"
        seen = np.concatenate(chunks[:t])
        still = []
        for spec, router in active:
            book = books[spec]
            try:
                fit_seconds = fit_router(router, book.feedback(seen), bench.ftrain.take(seen), bench)
            except UsageError as exc:
                if not skip_inapplicable:
                    raise
                skipped[spec] = f"round {t}: {exc}" if t > 1 else str(exc)
                continue
            deployed = router
            if judge is not None:
                best[spec] = select_checkpoint(best.get(spec), router, t, judge, keep=t < rounds)
                deployed = best[spec].router
            result = score_router(spec, deployed, bench, fit_seconds=fit_seconds, seed=seed, n_boot=n_boot,
                                  router_class=_class_path(router) if spec in from_objects else None)
            result.feedback = book.summary(seen, chunks[0].size)
            if judge is not None:
                result = StageResult.of(result, best[spec].describe())
            per_router[spec].append(result)
            if t < rounds:
                book.act(deployed, train, bench, chunks[t], _act_rng(seed, t, spec))
            still.append((spec, router))
        active = still
    done = [spec for spec, _ in active]  # routers fitted in every round
    if not done:
        raise UsageError(f"no router could be fitted on the logged feedback: {skipped}")
    fair = [not router.uses_test_labels for _, router in active]
    history: list[dict[str, Any]] = []
    bon: dict[str, float] = {}
    with task("voyager: paired bootstrap and Oracle best-of-N per round"):
        for t in range(1, int(rounds) + 1):
            results = [per_router[spec][t - 1] for spec in done]
            bon = compare_and_bound(results, fair, bench, reference, seed=seed, n_boot=n_boot)
            history.append({"round": t, "n_train": int(sum(c.size for c in chunks[:t])),
                            "results": [r.to_dict() for r in results], "oracle_best_of_n": bon})
    final = [per_router[spec][-1] for spec in done]
    extra: dict[str, Any] = {
        "protocol": "voyager",
        "voyager": {"n_rounds": int(rounds), "order": order, "chunk_sizes": [int(c.size) for c in chunks],
                    "first_chunk_logging": {**parse_policy("uniform").describe(), **log_summary(first)},
                    **({"dev": judge.describe()} if judge is not None else {})},
        "rounds": history,
    }
    return _evaluation(record, bench, seed, final, bon, extra, skipped)  # bon: the last round's


# -- checkpoint selection on the development part -------------------------------------------------------------
DEV_METRIC = "mu_o"
"""What a Voyager checkpoint is selected by on the development queries: the mean score of the answers it routes
to (SPEC 4's mu_o, an exploring router's expected one), the quality every protocol reports first."""


@dataclass
class DevJudge:
    """The development queries a Voyager run selects checkpoints on: those with every actor's score known (as the
    test split's evaluable queries), their scores and vectors, and how many were left out."""

    score: npt.NDArray[np.float64]
    features: Features
    n_dev: int
    excluded: int

    @classmethod
    def of(cls, part: RoutingTable, features: Features | None) -> DevJudge:
        if features is None or features.n != part.n_queries:
            raise UsageError("the development queries need their vectors (dev_features, one per development query)")
        keep = complete_rows(part)
        if not keep.any():
            raise UsageError(f"none of the {part.n_queries} development queries has every actor's score known: no "
                             "checkpoint can be selected on them; choose a larger dev fraction")
        rows = np.flatnonzero(keep)
        return cls(part.score[rows].astype(np.float64), features.take(rows), int(part.n_queries),
                   int(part.n_queries - rows.size))

    def value(self, router: Router) -> float:
        """A fitted router's mu_o on the development queries, as it would be deployed: at its argmax choice, or its
        expected score under its acting distribution when it explores (as :func:`score_router` scores it)."""
        choice, _, acting = router.decisions(self.features)
        if router.explores:
            return float(expected_per_query(self.score, acting, "score").mean())
        return float(self.score[np.arange(self.score.shape[0]), choice].mean())

    def describe(self) -> dict[str, Any]:
        return {"n_dev": self.n_dev, "n_evaluated": int(self.score.shape[0]), "excluded": self.excluded,
                "metric": DEV_METRIC, "ties": "later round"}


@dataclass
class Checkpoint:
    """The checkpoint a router deploys: the fit of round ``round`` (``router``, a copy when the live router is
    refitted later), its ``value`` on the development queries, and every candidate's value so far (round order);
    ``None`` values for a bound, which is never selected."""

    round: int
    value: float | None
    router: Router
    candidates: list[float | None]

    def describe(self) -> dict[str, Any]:
        return {"round": self.round, f"dev_{DEV_METRIC}": self.value,
                f"dev_{DEV_METRIC}_by_round": list(self.candidates)}


def select_checkpoint(best: Checkpoint | None, router: Router, t: int, judge: DevJudge, *, keep: bool
                      ) -> Checkpoint:
    """Round t's checkpoint: the router just fitted on chunks 1..t, or ``best``, the one selected so far, whichever
    has the higher mu_o on the development queries (the newer on a tie: trained on more). The selection over rounds
    1..t is kept as one running best, so a run holds at most one extra copy per router. ``keep``: the live router
    will be refitted, so a winning fit is stored as a copy. A bound (``uses_test_labels``) reads the outcomes of
    what it routes: it is never selected, its current fit is deployed."""
    if router.uses_test_labels:
        return Checkpoint(t, None, router, [*(best.candidates if best else []), None])
    value = judge.value(router)
    candidates = [*(best.candidates if best else []), value]
    if best is None or best.value is None or value >= best.value:
        return Checkpoint(t, value, copy.deepcopy(router) if keep else router, candidates)
    return Checkpoint(best.round, best.value, best.router, candidates)


@dataclass
class StageResult(RouterResult):
    """A Voyager round's result with a development part: the router's result plus ``checkpoint``, the round whose
    fit was deployed and the values it was selected by (:meth:`Checkpoint.describe`)."""

    checkpoint: dict[str, Any] | None = None

    @classmethod
    def of(cls, result: RouterResult, checkpoint: dict[str, Any]) -> StageResult:
        fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(RouterResult)}
        return cls(**fields, checkpoint=checkpoint)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.checkpoint is not None:
            out["checkpoint"] = self.checkpoint
        return out


def _dev_side_features(table: RoutingTable, sp: Split, test: RoutingTable,
                       features: tuple[Features, Features] | None, dev_features: Features | None,
                       encoder: str | Encoder, cache_dir: str | None) -> tuple[tuple[Features, Features], Features]:
    """(train, test) vectors and the development vectors of a split with a development part: as given, or encoded
    with the encoder fitted on the whole training side (training and development texts, never outcomes), which is
    the encoder of the same run without a development part."""
    if features is not None:
        if dev_features is None:
            raise UsageError("features were given without dev_features: pass the development queries' vectors too")
        return features, dev_features
    side = sp.without_dev().train  # the training side as the run without a development part encodes it
    fside, ftest = featurize(table.select_queries(side), test, encoder, cache_dir)
    return (fside.take(_positions_in(side, sp.train)), ftest), fside.take(_positions_in(side, sp.dev))


def _positions_in(side: npt.NDArray[np.intp], rows: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """Where each of ``rows`` (table positions) sits in ``side`` (table positions holding every one of them)."""
    order = np.argsort(side, kind="stable")
    return np.asarray(order[np.searchsorted(side, rows, sorter=order)], dtype=np.intp)


def checkpoint_records(ev: Evaluation) -> list[MetricRecord]:
    """Per router and round (slice ``round=N``, and the last round unsliced as its results are): the round whose fit
    was deployed (``checkpoint_round``) and its mu_o on the development queries (``dev_mu_o``); none without a
    development part."""
    out: list[MetricRecord] = []
    rounds = ev.extra.get("rounds", [])
    for i, rnd in enumerate(rounds):
        for where in [f"round={rnd['round']}", *([""] if i == len(rounds) - 1 else [])]:
            for r in rnd["results"]:
                ck = r.get("checkpoint")
                if ck is None:
                    continue
                out.append(MetricRecord.of(r["spec"], "checkpoint_round", ck["round"], None, where))
                if ck[f"dev_{DEV_METRIC}"] is not None:  # a bound is not selected: it has no development value
                    out.append(MetricRecord.of(r["spec"], f"dev_{DEV_METRIC}", ck[f"dev_{DEV_METRIC}"], None, where))
    return out


def chunk_positions(n: int, rounds: int, order: str, seed: int) -> list[npt.NDArray[np.intp]]:
    """Voyager's T chunks of n training positions: contiguous pieces (sizes differing by at most one, the larger
    first) of the given order, or of a seeded permutation for ``order="shuffle"``."""
    idx = np.arange(n, dtype=np.intp)
    if order == "shuffle":
        idx = np.random.default_rng([seed, _SHUFFLE_TAG]).permutation(n).astype(np.intp)
    return [np.asarray(c, dtype=np.intp) for c in np.array_split(idx, rounds)]


def _act_rng(seed: int, t: int, spec: str) -> np.random.Generator:
    """The generator of one router's act draws at round t: from the run's seed, the round and the router's label
    (crc32, stable across processes), so a router's stream does not depend on the other routers of the run."""
    return np.random.default_rng([seed, _ACT_TAG, t, zlib.crc32(spec.encode())])


@dataclass
class LogBook:
    """One router's Voyager log over the training split: the logged actor and propensity of every training
    position routed so far (``logged``), from which the feedback of any set of positions is built. Keeping
    one array per field instead of concatenating Feedback tables per round keeps every round's feedback one
    vectorised mask."""

    actor: npt.NDArray[np.intp]
    propensity: npt.NDArray[np.float64]
    logged: npt.NDArray[np.bool_]
    train: RoutingTable

    @classmethod
    def start(cls, train: RoutingTable, rows: npt.NDArray[np.intp], first: Feedback) -> LogBook:
        """A log holding chunk 1 (positions ``rows`` of ``train``), logged as ``first``."""
        n = train.n_queries
        book = cls(np.zeros(n, dtype=np.intp), np.ones(n), np.zeros(n, dtype=bool), train)
        assert first.propensity is not None
        book.record(rows, logged_actors(first), first.propensity)
        return book

    def record(self, rows: npt.NDArray[np.intp], actor: npt.ArrayLike, propensity: npt.ArrayLike) -> None:
        if self.logged[rows].any():
            raise RuntimeError("a training query is logged twice in one Voyager stream")
        self.actor[rows] = np.asarray(actor, dtype=np.intp)
        self.propensity[rows] = np.asarray(propensity, dtype=np.float64)
        self.logged[rows] = True

    def feedback(self, rows: npt.NDArray[np.intp]) -> Feedback:
        """Logged feedback of the training positions ``rows`` (all logged), in that order."""
        if not self.logged[rows].all():
            raise RuntimeError("Voyager asked for feedback of a training query it has not logged")
        return Feedback.logged(self.train.select_queries(rows), self.actor[rows], self.propensity[rows])

    def act(self, router: Router, train: RoutingTable, bench: Bench, rows: npt.NDArray[np.intp],
            rng: np.random.Generator) -> None:
        """Let the fitted ``router`` route the training positions ``rows`` as deployed and log its choices."""
        if router.uses_test_labels:  # a bound reads the outcomes of what it routes (here: the chunk's)
            router.reveal(train.select_queries(rows))
        actor, propensity = router.act(bench.ftrain.take(rows), rng)
        self.record(rows, actor, propensity)

    def summary(self, rows: npt.NDArray[np.intp], n_first: int) -> dict[str, Any]:
        """What the router had learned from at this round: the log of ``rows`` (its first ``n_first`` = chunk 1,
        the uniform part), the share correct, the share correct of its own choices (after chunk 1) and their
        mean propensity (1 for a greedy router)."""
        score = self.train.score[rows, self.actor[rows]]
        known = ~np.isnan(score)
        out: dict[str, Any] = {"n_logged": int(rows.size), "n_observed": int(known.sum())}
        if known.any():
            out["correct_share"] = float((score[known] >= CORRECT).mean())
        own, own_known = score[n_first:], known[n_first:]
        if own_known.any():
            out["own_correct_share"] = float((own[own_known] >= CORRECT).mean())
        if rows.size > n_first:
            out["own_mean_propensity"] = float(self.propensity[rows[n_first:]].mean())
        return out


def logged_actors(feedback: Feedback) -> npt.NDArray[np.intp]:
    """The logged actor of every row of a logged feedback, read from whichever matrix kept its cell (score, tokens,
    latency or cost). A row where the table knows nothing of the drawn cell gets actor 0: its feedback row is all
    unobserved whichever actor it names, so nothing a router sees depends on it."""
    table = feedback.table
    seen = np.zeros(table.score.shape, dtype=bool)
    for mat in table.matrices().values():
        seen |= ~np.isnan(mat)
    return np.asarray(seen.argmax(axis=1), dtype=np.intp)


# -- shared --------------------------------------------------------------------------------------------------
def _check_run(router_specs: Sequence[RouterLike], compare_to: str | None
               ) -> tuple[list[str], set[str], str | None]:
    """(labels, labels of Router instances, the resolved compare_to): the checks every protocol makes first."""
    if not router_specs:
        raise UsageError("name at least one router, e.g. --routers oracle,knn,best-single")
    labels = [router_label(r) for r in router_specs]
    from_objects = {router_label(r) for r in router_specs if not isinstance(r, str)}
    return labels, from_objects, resolve_compare_to(compare_to, labels)


def _evaluation(record: Provenance, bench: Bench, seed: int, results: list[RouterResult], bon: dict[str, float],
                extra: dict[str, Any], skipped: dict[str, str], more_notes: Sequence[str] = ()) -> Evaluation:
    notes = {"notes": bench.notes + list(more_notes)} if bench.notes or more_notes else {}
    return Evaluation(
        provenance=bench.provenance(record, seed), results=results, oracle_best_of_n=bon,
        test_ids=bench.test.queries.ids, actor_names=bench.test.actor_names, excluded_test_queries=bench.excluded,
        extra={**notes, **({"skipped": skipped} if skipped else {}), **extra},
    )


# -- the registered protocols --------------------------------------------------------------------------------
def _check_logging(spec: str) -> str:
    parse_policy(spec)
    return spec


LOGGING_HELP = "the logging policy that draws the training log: uniform, eps-greedy:ROUTER:EPS, softmax:ROUTER:T or " \
               "router:ROUTER"


@dataclass(frozen=True)
class ColdStartSettings(EvaluationSettings):
    logging: str = setting("uniform", LOGGING_HELP, check=_check_logging)
    sweep: str | None = setting(None, "also sweep lambda in score - lambda * penalty: cost or latency",
                                Options({"cost", "latency"}))
    by: str = setting("none", BY_HELP, Options(set(BY_OPTIONS)))


VOYAGER_DEV_HELP = ("hold out a seeded fraction F of the training side (stratified by dataset) as a development "
                    "part, left out of the stream; each round deploys the checkpoint (the fit of a round so far) "
                    "with the highest mu_o on it; none = the last fit, no development part")


@dataclass(frozen=True)
class VoyagerSettings(EvaluationSettings):
    rounds: int = setting(5, "number of rounds T = chunks of the training split (>= 2)", Interval(int, 2, None))
    order: str = setting("given", "chunk the training split in its given order or a seeded shuffle",
                         Options(set(ORDERS)))
    dev: float | None = setting(None, VOYAGER_DEV_HELP, check=check_dev)


@register_protocol("cold-start")
class ColdStart(Protocol):
    summary = "train on one logged outcome per training query (a logging policy's choice), evaluate on the full test"
    spec = "SPEC 1, 5"
    Settings = ColdStartSettings

    def run(self, table: RoutingTable, settings: Any, seed: int = 0, routers: Sequence[Any] = (),
            context: RunContext | None = None) -> Result:
        s: ColdStartSettings = settings
        sp, features = shared_features(table, s, seed, context)
        held = [table]
        del table  # handed over, not kept: cold_start lets the whole table go once it is split
        ev = cold_start(held.pop(), list(routers), logging=s.logging, split=sp, encoder=s.encoder, seed=seed,
                        n_boot=s.n_boot, features=features, skip_inapplicable=s.skip_inapplicable,
                        compare_to=s.compare_to, sweep=s.sweep, cache_dir=context.cache_dir if context else None,
                        by=s.by)
        return evaluation_result(self.name, ev, s)


@register_protocol("voyager")
class Voyager(Protocol):
    summary = "rounds of routing the next chunk of the training split, learning only the chosen outcomes"
    spec = "SPEC 5"
    Settings = VoyagerSettings

    def run(self, table: RoutingTable, settings: Any, seed: int = 0, routers: Sequence[Any] = (),
            context: RunContext | None = None) -> Result:
        s: VoyagerSettings = settings
        # the split and shared vectors without the development part: voyager cuts its own out of them below, so
        # its vectors are those of a run without one
        sp, features = shared_features(table, dataclasses.replace(s, dev=None), seed, context)
        dev_features = None
        if s.dev is not None:
            sp, features, dev_features = _with_dev_features(table, sp, features, s.dev, seed)
        held = [table]
        del table  # handed over, not kept: voyager lets the whole table go once it is split
        ev = voyager(held.pop(), list(routers), rounds=s.rounds, order=s.order, split=sp, encoder=s.encoder, seed=seed,
                     n_boot=s.n_boot, features=features, skip_inapplicable=s.skip_inapplicable,
                     compare_to=s.compare_to, cache_dir=context.cache_dir if context else None,
                     dev_features=dev_features)
        result = evaluation_result(self.name, ev, s)
        result.records += checkpoint_records(ev)
        return result


def _with_dev_features(table: RoutingTable, base: Split, features: tuple[Features, Features] | None, fraction: float,
                       seed: int) -> tuple[Split, tuple[Features, Features] | None, Features | None]:
    """The run's split with a development part drawn from its training side (:func:`with_dev`), and, when a caller
    shared the features of the split without it, those vectors cut into training and development rows (so the
    vectors are the same with and without ``dev``; None: :func:`voyager` encodes them the same way)."""
    sp = with_dev(table, base, fraction, seed)
    if features is None:
        return sp, None, None
    ftrain, ftest = features
    return sp, (ftrain.take(_positions_in(base.train, sp.train)), ftest), ftrain.take(_positions_in(base.train, sp.dev))
