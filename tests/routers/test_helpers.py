"""The vectorised helpers against brute force and scikit-learn; utility decisions; the CLI listing."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from sklearn.linear_model import Ridge

from routerlab.cli import main
from routerlab.routers import Router, routers
from routerlab.routers import _common as common
from routerlab.routers.linear import masked_ridge
from routerlab.routers.utility import expected_penalty, lambda_sweep, utility_choice
from tests.routers.conftest import Data


@pytest.mark.parametrize("n_base", [40, 3000])  # 3000: the grouped top-k path
@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_nearest_matches_brute_force_across_blocks(metric: str, n_base: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "_BLOCK_ELEMENTS", 7 * n_base)  # blocks of 7 query rows
    rng = np.random.default_rng(0)
    q, b = rng.normal(size=(30, 5)), rng.normal(size=(n_base, 5))
    idx, sim = common.nearest(q, b, 4, metric)  # type: ignore[arg-type]
    if metric == "cosine":
        qn = q / np.linalg.norm(q, axis=1, keepdims=True)
        bn = b / np.linalg.norm(b, axis=1, keepdims=True)
        full = qn @ bn.T
    else:
        full = -((q[:, None, :] - b[None, :, :]) ** 2).sum(axis=2)
    expected = np.argsort(-full, axis=1, kind="stable")[:, :4]
    np.testing.assert_array_equal(idx, expected)
    np.testing.assert_allclose(sim, np.take_along_axis(full, expected, axis=1), rtol=1e-4, atol=1e-4)
    self_idx, _ = common.nearest(b, b, 3, metric, exclude_self=True)  # type: ignore[arg-type]
    assert not (self_idx == np.arange(n_base)[:, None]).any()


def test_masked_ridge_matches_sklearn_on_observed_rows() -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 6))
    Y = rng.random((60, 3))
    mask = rng.random((60, 3)) > 0.3
    mask[:, 2] = rng.random(60) > 0.8  # mostly unobserved: the other Gram branch
    W, b = masked_ridge(X, Y, mask, alpha=2.0)
    for j in range(3):
        ref = Ridge(alpha=2.0).fit(X[mask[:, j]], Y[mask[:, j], j])
        np.testing.assert_allclose(W[:, j], ref.coef_, atol=1e-8)
        np.testing.assert_allclose(X[mask[:, j]] @ W[:, j] + b[j], ref.predict(X[mask[:, j]]), atol=1e-8)


def test_knn_mean_is_nan_aware() -> None:
    score = np.array([[1.0, np.nan], [0.0, 1.0], [np.nan, np.nan]])
    W = common.neighbour_matrix(np.array([[0, 1], [2, 2]]), 1.0, 3)
    out = common.propagate(W, score, prior=np.array([0.25, 0.75]))
    np.testing.assert_allclose(out, [[0.5, 1.0], [0.25, 0.75]])


def test_utility_sweep(data: Data, fitted: Callable[[str], Router]) -> None:
    router = fitted("knn")
    pen = expected_penalty(data.train, "cost")
    assert pen.max() == pytest.approx(1.0) and (pen > 0).all()
    sweep = lambda_sweep(router, data.ftest, [0.0, 0.05, 0.2, 1.0, 1e6], by="cost", train=data.train)
    np.testing.assert_array_equal(sweep.choices[0], router.choose(data.ftest))
    assert (sweep.choices[-1] == np.argmin(pen)).all()
    chosen_pen = pen[sweep.choices]  # (lambdas, n): never more expensive as lambda grows
    assert (np.diff(chosen_pen, axis=0) <= 1e-12).all()
    lat = lambda_sweep(router, data.ftest, [1e6], by="latency")  # from TTFT/ITL attributes only
    a = data.test.actors
    assert (lat.choices[0] == np.argmin(a.ttft_ms + 255 * a.itl_ms)).all()
    np.testing.assert_array_equal(utility_choice(np.eye(3), np.zeros(3), 1.0), [0, 1, 2])


def test_cli_lists_every_router(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["routers"]) == 0
    out = capsys.readouterr().out
    for name, cls in routers().items():
        assert any(line.startswith(name + " ") and cls.summary in line for line in out.splitlines()), name
