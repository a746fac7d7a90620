"""The serving hot paths compute the very numbers of the old computation, bit for bit, on the demo table:
tf-idf's own transform against sklearn's (``TfidfVectorizer.transform`` + ``TruncatedSVD.transform``), and the
nearest-neighbour routers (training rows prepared once at fit, the propagation over the neighbours' rows only)
against the per-call preparation over the whole training matrix."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.features import get_encoder
from routerlab.features.base import Features
from routerlab.features.tfidf import TfidfEncoder
from routerlab.llm.base import Backend, load_backend, parse_actor_list
from routerlab.routers import get_router
from routerlab.routers._common import nearest, neighbour_matrix, search_base
from routerlab.serve.routing import RoutingService

EDGE_TEXTS = ["", "   \n\t", "zyzzyva quokka", "Café naïve résumé ÉCOLE", "2 2 2 2 + 2 = ?", "a", "x" * 5000]


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return demo(3000, seed=0)


def _pool(table: RoutingTable) -> dict[str, Backend]:
    import tests.serve._backends  # noqa: F401  (registers test-echo)

    specs = parse_actor_list(",".join(f"{a}=test-echo:{a}" for a in table.actor_names))
    return {name: load_backend(spec, cache=False) for name, spec in specs}


def _texts(table: RoutingTable) -> list[str]:
    return [str(t) for t in table.queries.text]


def _sklearn_transform(enc: TfidfEncoder, texts: list[str]) -> npt.NDArray[np.float32]:
    enc._fast = False
    try:
        return enc.transform(texts)
    finally:
        enc._fast = True


@pytest.mark.parametrize("options", ["tfidf", "tfidf:dim=64"])
def test_tfidf_fast_transform_is_sklearns_bit_for_bit(table: RoutingTable, options: str) -> None:
    enc = get_encoder(options)
    assert isinstance(enc, TfidfEncoder)
    texts = _texts(table)
    train = table.queries.split == "train"
    enc.fit([t for t, tr in zip(texts, train, strict=True) if tr])
    every = texts + EDGE_TEXTS
    fast = enc.transform(every)
    np.testing.assert_array_equal(fast, _sklearn_transform(enc, every))
    # one text at a time, as the server encodes a request
    for text in texts[:200:7] + EDGE_TEXTS:
        np.testing.assert_array_equal(enc.transform([text]), _sklearn_transform(enc, [text]))
    # the sparse tf-idf rows themselves
    ours, theirs = enc._tfidf_rows(every[:300]), enc._vectorizer.transform(every[:300])
    np.testing.assert_array_equal(ours.toarray(), theirs.toarray())


def test_tfidf_fast_transform_without_svd() -> None:
    """A vocabulary no larger than dim: the tf-idf rows are the space (no SVD), on the fast path too."""
    enc = get_encoder("tfidf:dim=50")
    assert isinstance(enc, TfidfEncoder)
    enc.fit(["alpha", "beta", "gamma", "alpha beta", "gamma gamma", "beta", "alpha"])
    assert enc._svd is None
    texts = ["alpha beta gamma", "beta beta", "delta", "", "Alpha, BETA!", *EDGE_TEXTS]
    np.testing.assert_array_equal(enc.transform(texts), _sklearn_transform(enc, texts))


def _old_knn_scores(router: object, features: Features) -> npt.NDArray[np.float64]:
    """KNNRouter._scores as it was: the training rows prepared on every call, the propagation over every
    training row."""
    params = router.params  # type: ignore[attr-defined]
    X, score, prior = router._X, router._score, router._prior  # type: ignore[attr-defined]
    idx, sim = nearest(features.X, X, params["k"], params["metric"])
    if params["weighted"]:
        w = sim + 1.0 + 1e-9 if params["metric"] == "cosine" else 1.0 / (1.0 + np.sqrt(-np.minimum(sim, 0)))
    else:
        w = np.ones_like(sim)
    W = neighbour_matrix(idx, w, X.shape[0])
    s = np.asarray(score, dtype=np.float64)
    obs = ~np.isnan(s)
    out = np.broadcast_to(prior, (W.shape[0], s.shape[1])).copy()
    num, den = np.asarray(W @ np.where(obs, s, 0.0)), np.asarray(W @ obs.astype(np.float64))
    np.divide(num, den, out=out, where=den > 1e-12)
    out += 1e-6 * prior[None, :]
    return out


@pytest.mark.parametrize("spec", ["knn:k=10", "knn:k=5,weighted=true", "prknn", "knn:k=10,metric=euclidean",
                                  "knn:k=3,metric=euclidean,weighted=true"])
def test_knn_fast_scores_are_the_old_ones(table: RoutingTable, spec: str) -> None:
    pool = _pool(table)
    service = RoutingService.train(spec, table, pool)
    router = service.router
    test_texts = [str(t) for t in table.queries.text[table.queries.split == "test"]]
    # one request at a time, as served
    for text in test_texts[:150] + EDGE_TEXTS:
        f = service._features(text)
        np.testing.assert_array_equal(router.scores(f), _old_knn_scores(router, f))
    # and all test queries in one batch (the propagation then reads the whole matrix, as before)
    f = service._features(test_texts[0])
    batch = Features.of(service.encoder.transform(test_texts), table.queries.take(
        np.flatnonzero(table.queries.split == "test")), f.actors, f.encoder)
    np.testing.assert_array_equal(router.scores(batch), _old_knn_scores(router, batch))


def test_search_base_is_what_nearest_prepares() -> None:
    rng = np.random.default_rng(3)
    base, query = rng.normal(size=(300, 17)).astype(np.float32), rng.normal(size=(9, 17)).astype(np.float32)
    for metric in ("cosine", "euclidean"):
        a = nearest(query, base, 4, metric)  # type: ignore[arg-type]
        b = nearest(query, search_base(base, metric), 4, metric)  # type: ignore[arg-type]
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
    with pytest.raises(ValueError, match="prepared for cosine"):
        nearest(query, search_base(base, "cosine"), 4, "euclidean")


def test_served_features_are_the_tables_features(table: RoutingTable) -> None:
    """The request's Features (built without Queries.create) route exactly as the encoded table's row."""
    pool = _pool(table)
    service = RoutingService.train("knn:k=10", table, pool)
    ref = get_router("knn:k=10")
    assert ref.name == service.router.name
    for i in np.flatnonzero(table.queries.split == "test")[:40]:
        text = str(table.queries.text[i])
        f = service._features(text)
        assert f.queries.text.tolist() == [text] and f.queries.ids.tolist() == ["request"]
        np.testing.assert_array_equal(f.X, service.encoder.transform([text]))
        p = service.policy(text)
        assert p[int(service.router.route(f).choice[0])] == 1.0


def test_cheap_plans_run_on_the_event_loop_and_others_on_a_thread(table: RoutingTable,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan goes on a thread until one has been timed; then on the event loop while the mean CPU time of plans
    stays below the limit, the prompt is short and the router calls no LLM."""
    from routerlab.llm.base import Decoding, Message
    from routerlab.serve.app import INLINE_PLAN_CPU_S, INLINE_PROMPT_CHARS, ServingState

    svc = RoutingService.train("knn:k=10", table, _pool(table))
    state = ServingState(svc, request_timeout=5.0, workers=None, queue_size=4)
    short = [Message("user", "What is 17 * 23?")]
    assert not state.plan_inline(short)  # nothing timed yet
    plan = state.plan(short, Decoding())
    assert plan.decision.mode == "routed" and state.plan_cpu_s is not None
    assert state.plan_cpu_s < INLINE_PLAN_CPU_S, state.plan_cpu_s  # knn on tf-idf: about a millisecond
    assert state.plan_inline(short)
    assert not state.plan_inline([Message("user", "x" * (INLINE_PROMPT_CHARS + 1))])
    state.plan_cpu_s = 2 * INLINE_PLAN_CPU_S  # plans became expensive
    assert not state.plan_inline(short)
    state.plan_cpu_s = 0.0
    monkeypatch.setattr(type(svc.router), "needs_backend", True)  # one that asks an LLM waits: never inline
    assert not state.plan_inline(short)
    svc.close()
