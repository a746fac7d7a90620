"""Bandit routers (issue 9, SPEC 1 observability, routerworld.txt sec. 3.3, 5.4 and appendix G.1): ``barp``
(REINFORCE policy, Wei et al. 2025), ``linucb`` (disjoint LinUCB, Li et al. 2010), ``thompson`` (linear Thompson
sampling, Agrawal & Goyal 2013) and ``eps-greedy`` (a ridge reward model acting epsilon-greedily).

What they share:

- **Context.** The frozen query vectors, centred on the training mean and divided by one global standard
  deviation (relative feature scales kept), projected onto their top ``dim`` principal directions when wider
  (fitted on the training vectors only: exact eigendecomposition up to 1,024 inputs, seeded randomised SVD
  above), plus a constant 1 (a per-actor intercept). ``dim=0`` keeps every input dimension.
- **Reward** of actor a on query q: ``score[q, a] - weight * penalty[q, a]`` with ``by`` = ``none`` (the score
  alone), ``latency`` or ``cost``. The penalty is the training cell's latency (cost) where observed, else the
  actor's expected one (mean training value, else TTFT/ITL or prices, as ``cheapest``/``fastest`` use),
  divided by the largest expected value of any actor, so the most expensive (slowest) actor's mean penalty is 1
  and ``weight`` reads "score units given up to avoid it" (as ``utility.lambda_sweep``). A table that gives no
  latency (cost) for any actor makes ``by=latency`` (``cost``) a UsageError before training.
- **Feedback.** Under full feedback every observed training cell is one reward observation; under logged
  feedback (cold start, Voyager) only the logged cell of each query is, with its propensity
  (``self.propensity``). They learn from logs natively (``logged_recipe = "native"``).
- **Distribution.** ``route().distribution`` is the router's real action distribution and ``explores`` is True,
  so ``act()`` samples it: a bandit can serve as a logging policy, and its logged propensities are exact.

Everything is vectorised over queries: per-actor statistics are a handful of matrix products (one per
distinct observation pattern) and one batched inverse, scores are matrix products, Thompson's posterior draws
are taken once per fit and applied to all queries at once, and BaRP trains on minibatches.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any, ClassVar, ParamSpec, TypeVar

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from routerlab._spec import Constraint, Interval, Options
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.routers._common import FloatMatrix, expected_actor_cost, expected_actor_latency, one_hot
from routerlab.routers._early_stopping import EarlyStopping
from routerlab.routers._masked_mlp import backward, hidden_layers
from routerlab.routers.base import DevPart, Router, register

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
T = TypeVar("T")
P = ParamSpec("P")

# Input widths up to which the principal directions come from an exact eigendecomposition of the covariance;
# above it a seeded randomised SVD (the covariance of 5,000 inputs would cost n * 25M multiply-adds).
_EXACT_PCA_MAX_DIM = 1024
# Queries per block when Thompson's posterior draws are applied: keeps (block, m, draws) floats near 64 MB.
_DRAW_BLOCK_ELEMENTS = 1 << 23

# Options every bandit has: the context (``dim``; BaRP overrides the default) and the reward (``by``, ``weight``).
# dim=32 for the linear bandits: on llmrouter (tf-idf 256-d, uniform logs, 3 seeds) the ridge's test mu_o was
# 0.540 / 0.542 / 0.555 / 0.541 / 0.518 / 0.505 at dim 8 / 16 / 32 / 64 / 128 / 256 (docs/bandits.md).
_SHARED_DEFAULTS: dict[str, Any] = {"dim": 32, "by": "none", "weight": 0.5}
_SHARED_CONSTRAINTS: dict[str, Constraint] = {
    "dim": Interval(int, 0, 65_536),
    "by": Options({"none", "latency", "cost"}),
    "weight": Interval(float, 0, None),
}


def one_blas_thread(method: Callable[P, T]) -> Callable[P, T]:
    """Run ``method`` with one BLAS thread. The bandits' matrices are small (thousands x tens), threads gain
    nothing there, and on a loaded machine OpenBLAS threads spinning for cores are ruinous: one 600 x 600
    eigendecomposition took 9 s instead of 0.1 s, and LinUCB's scoring ran slower than a per-query loop
    (measured on the 2-core test machine). Costs ~0.4 ms a call."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        with threadpool_limits(limits=1, user_api="blas"):
            return method(*args, **kwargs)

    return wrapper


# ---------------------------------------------------------------------------- context and reward
class Context:
    """The bandits' view of the frozen query vectors (module docstring): ``transform(X)`` is (n, k + 1) float64,
    centred, globally scaled, projected onto the top-k principal directions of the training vectors when the
    input is wider than ``dim`` (``dim=0``: never), with a trailing constant 1."""

    def __init__(self, dim: int, seed: int) -> None:
        self.dim = int(dim)
        self.seed = int(seed)
        self.mean: F64 = np.zeros(0)
        self.scale = 1.0
        self.basis: F64 | None = None  # (d, k), or None: no projection

    def fit(self, X: npt.ArrayLike) -> Context:
        x = np.asarray(X, dtype=np.float32)  # float32 until projected: a 5,600 x 5,000 input stays 112 MB
        n, d = x.shape
        self.mean = x.mean(axis=0, dtype=np.float64) if n else np.zeros(d)
        xc = x - self.mean.astype(np.float32)
        std = float(xc.std(dtype=np.float64)) if xc.size else 0.0
        self.scale = std if std > 1e-12 else 1.0
        xc /= np.float32(self.scale)
        k = min(self.dim, d, n)
        self.basis = None
        if self.dim and k < d:
            if d <= _EXACT_PCA_MAX_DIM:
                from scipy.linalg import eigh

                xc64 = xc.astype(np.float64)
                _, vectors = eigh(xc64.T @ xc64, subset_by_index=[d - k, d - 1])  # the top k, ascending
                self.basis = np.ascontiguousarray(vectors[:, ::-1])
            else:
                from sklearn.utils.extmath import randomized_svd

                _, _, vt = randomized_svd(xc, k, n_iter=2, random_state=self.seed)
                self.basis = np.ascontiguousarray(vt.T, dtype=np.float64)
        return self

    def transform(self, X: npt.ArrayLike) -> F64:
        x = np.asarray(X)
        if self.basis is None:
            z = (x.astype(np.float64) - self.mean) / self.scale
        else:  # project first (X (n, d) @ basis (d, k)), then centre and scale the k columns
            z = (x.astype(np.float32) @ self.basis.astype(np.float32)).astype(np.float64)
            z = (z - self.mean @ self.basis) / self.scale
        return np.hstack([z, np.ones((z.shape[0], 1))])


def check_reward(router: Router, train: RoutingTable) -> None:
    """``by=latency`` (``cost``) needs some latency (cost) for at least one actor: a UsageError otherwise."""
    by = router.params["by"]
    if by == "none":
        return
    values = (expected_actor_latency if by == "latency" else expected_actor_cost)(train)[0]
    if values.size == 0 or np.isnan(values).all():
        what = "latency or TTFT/ITL" if by == "latency" else "cost or prices"
        raise UsageError(f"router {router.name!r}: by={by} needs {what}, which the training table does not give "
                         "for any actor")


def rewards(train: RoutingTable, by: str, weight: float, reference: RoutingTable | None = None) -> F64:
    """(n, m) reward of every training cell, NaN where the score is unobserved: the score minus ``weight`` times
    the normalised latency or cost penalty (module docstring). ``reference`` (default ``train`` itself) is the table
    whose expected latency or cost fills unknown cells and sets the scale: the training table, when ``train`` is a
    development part scored on the training scale."""
    score = np.asarray(train.score, dtype=np.float64)
    if by == "none" or weight == 0.0:
        return score
    ref = train if reference is None else reference
    if by == "latency":
        expected, cells = expected_actor_latency(ref)[0], train.latency_s
    else:
        expected, cells = expected_actor_cost(ref)[0], train.cost_usd
    top = float(np.nanmax(expected))
    expected = np.where(np.isnan(expected), top, expected)
    pen = np.broadcast_to(expected, score.shape)
    if cells is not None:
        pen = np.where(np.isnan(cells), pen, np.asarray(cells, dtype=np.float64))
    return np.asarray(score - weight * pen / (top if top > 0 else 1.0))


# ---------------------------------------------------------------------------- per-actor ridge
def ridge_statistics(Z: F64, R: F64, l2: float) -> tuple[F64, F64, float]:
    """Per-actor ridge statistics of rewards ``R`` (n, m; NaN = unobserved) on the design ``Z`` (n, k):
    ``A[a] = l2 I + Z_a^T Z_a`` and ``b[a] = Z_a^T (r_a - mu)`` over actor a's observed rows, with ``mu`` the
    mean observed reward (so an actor with no observation predicts ``mu``). Actors that share an observation
    pattern (full feedback) share one Gram matrix, built from whichever is fewer, their observed or their
    unobserved rows; under logged feedback the rows split between the actors, so the Grams cost one pass.
    Returns (A (m, k, k), b (m, k), mu)."""
    obs = ~np.isnan(R)
    n, k = Z.shape
    m = R.shape[1]
    mu = float(R[obs].mean()) if obs.any() else 0.0
    b = (Z.T @ np.where(obs, R - mu, 0.0)).T
    A = np.empty((m, k, k))
    ridge = l2 * np.eye(k)
    groups: dict[bytes, list[int]] = {}  # actors by observation pattern (np.unique(axis=0) is slow on long rows)
    for a, key in enumerate(np.packbits(obs, axis=0).T):
        groups.setdefault(key.tobytes(), []).append(a)
    full_gram: F64 | None = None
    for actors in groups.values():
        pattern = obs[:, actors[0]]
        n_obs = int(pattern.sum())
        if 2 * n_obs > n:
            if full_gram is None:
                full_gram = Z.T @ Z
            miss = Z[~pattern]
            gram = full_gram - miss.T @ miss
        else:
            rows = Z[pattern]
            gram = rows.T @ rows
        A[actors] = gram + ridge
    return A, np.asarray(b), mu


def _symmetric_inverse(A: F64) -> F64:
    """The inverses of the per-actor ridge matrices, symmetrised. A vanishing ``l2`` (say 1e-75) on a rank-deficient
    design leaves a matrix singular in floating point: its pseudo-inverse (the minimum-norm ridge solution) is used
    then, instead of numpy's LinAlgError escaping the router."""
    try:
        inv = np.linalg.inv(A)
    except np.linalg.LinAlgError:
        inv = np.linalg.pinv(A, hermitian=True)
    return np.asarray(0.5 * (inv + np.swapaxes(inv, 1, 2)))


def _argmax_mask(scores: FloatMatrix) -> F64:
    """Uniform over each row's exact maxima."""
    top = (scores == scores.max(axis=1, keepdims=True)).astype(np.float64)
    return np.asarray(top / top.sum(axis=1, keepdims=True))


class _LinearBandit(Router):
    """A per-actor ridge reward model on the bandit context (``ridge_statistics``): theta_a = A_a^-1 b_a."""

    explores = True
    logged_recipe: ClassVar[str] = "native"

    _context: Context
    _theta: F64  # (m, k)
    _inv: F64  # (m, k, k)
    _mu: float

    def _check_table(self, train: RoutingTable) -> None:
        check_reward(self, train)

    @one_blas_thread
    def _fit(self, train: RoutingTable, features: Features) -> None:
        p = self.params
        self._context = Context(p["dim"], self.seed).fit(features.X)
        Z = self._context.transform(features.X)
        A, b, self._mu = ridge_statistics(Z, rewards(train, p["by"], float(p["weight"])), float(p["l2"]))
        self._inv = _symmetric_inverse(A)
        self._theta = np.einsum("aij,aj->ai", self._inv, b)
        self._after_fit()

    def _after_fit(self) -> None:
        return None

    @one_blas_thread
    def predict(self, features: Features) -> F64:
        """(n, m) posterior-mean / ridge reward of every actor."""
        return self._predict(self._context.transform(features.X))

    @one_blas_thread
    def uncertainty(self, features: Features) -> F64:
        """(n, m) ``sqrt(z^T A_a^-1 z)``: the width of actor a's confidence ellipsoid at each query."""
        return self._uncertainty(self._context.transform(features.X))

    def _predict(self, Z: F64) -> F64:
        return np.asarray(Z @ self._theta.T + self._mu)

    def _uncertainty(self, Z: F64) -> F64:
        out = np.empty((Z.shape[0], self._inv.shape[0]))
        for a, inv in enumerate(self._inv):  # one (n, k) x (k, k) product per actor
            out[:, a] = np.einsum("ij,ij->i", Z @ inv, Z)
        return np.asarray(np.sqrt(np.maximum(out, 0.0)))


@register
class LinUCB(_LinearBandit):
    """Disjoint LinUCB (Li et al. 2010): per-actor ridge regression of the reward on the context, score =
    ``theta_a^T z + mu + alpha * sqrt(z^T A_a^-1 z)`` (the upper confidence bound). Its action distribution is its
    greedy choice, uniform over exact ties: it explores through the bonus only, which is largest for actors
    seen least near the query. Options ``alpha`` (bonus width, default 0.1: in a five-round Voyager run on llmrouter the
    last round's test mu_o was 0.536 / 0.526 / 0.514 / 0.477 at alpha 0.1 / 0.25 / 0.5 / 1, since a wide bonus
    keeps routing test queries to little-seen actors; from uniform logs of the whole train split alpha hardly
    matters), ``l2`` (ridge, default 1), and
    the shared ``dim``/``by``/``weight``. Logged feedback: the ridge is fitted on the logged cells unweighted,
    as LinUCB does on its own online log (a well-specified ridge is unbiased under any logging that depends on
    the context only); the propensities are not needed."""

    name = "linucb"
    summary = "disjoint LinUCB: per-actor ridge reward + alpha * confidence width; greedy on the UCB"
    defaults: ClassVar[dict[str, Any]] = {"alpha": 0.1, "l2": 1.0, **_SHARED_DEFAULTS}
    constraints: ClassVar[dict[str, Constraint]] = {
        "alpha": Interval(float, 0, None), "l2": Interval(float, 0, None, closed="neither"), **_SHARED_CONSTRAINTS,
    }

    @one_blas_thread
    def _scores(self, features: Features) -> npt.ArrayLike:
        Z = self._context.transform(features.X)
        alpha = float(self.params["alpha"])
        return self._predict(Z) + alpha * self._uncertainty(Z) if alpha else self._predict(Z)

    @one_blas_thread
    def _distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        return _argmax_mask(scores)


@register
class EpsGreedy(_LinearBandit):
    """Epsilon-greedy on a per-actor ridge reward model: with probability 1 - eps the actor of highest predicted
    reward (the first on ties), else a uniform one, so its distribution is ``(1 - eps) + eps / m`` on the argmax
    and ``eps / m`` elsewhere. Scores are the ridge predictions. Options ``eps`` (default 0.1), ``l2`` (1) and the
    shared ``dim``/``by``/``weight``; logged feedback as ``linucb``."""

    name = "eps-greedy"
    summary = "epsilon-greedy on a per-actor ridge reward model"
    defaults: ClassVar[dict[str, Any]] = {"eps": 0.1, "l2": 1.0, **_SHARED_DEFAULTS}
    constraints: ClassVar[dict[str, Constraint]] = {
        "eps": Interval(float, 0, 1), "l2": Interval(float, 0, None, closed="neither"), **_SHARED_CONSTRAINTS,
    }

    @one_blas_thread
    def _scores(self, features: Features) -> npt.ArrayLike:
        return self.predict(features)

    @one_blas_thread
    def _distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        eps = float(self.params["eps"])
        m = scores.shape[1]
        return np.asarray((1.0 - eps) * one_hot(scores.argmax(axis=1), m) + eps / m)


@register
class Thompson(_LinearBandit):
    """Linear Thompson sampling (Agrawal & Goyal 2013): a Gaussian posterior per actor,
    ``theta_a ~ N(A_a^-1 b_a, v^2 A_a^-1)``; the router acts by drawing one theta per actor and taking the actor
    of highest sampled reward. Its distribution is the probability of each actor being that one, estimated from
    ``draws`` posterior samples per actor taken once per fit (seeded) and applied to every query as one matrix
    product, plus one uniform pseudo-draw (weight 1 / (draws + 1)) so no actor has probability 0 (a logged
    propensity is never 0). Scores are the posterior means. Options ``v`` (posterior scale, default 0.5: the
    largest standard deviation of a reward in [0, 1]), ``l2`` (1), ``draws`` (100, at most 100,000: the draws
    are m x k x draws floats) and the shared
    ``dim``/``by``/``weight``; logged feedback as ``linucb``."""

    name = "thompson"
    summary = "linear Thompson sampling: Gaussian posterior per actor, P(sampled reward is the max)"
    defaults: ClassVar[dict[str, Any]] = {"v": 0.5, "l2": 1.0, "draws": 100, **_SHARED_DEFAULTS}
    constraints: ClassVar[dict[str, Constraint]] = {
        "v": Interval(float, 0, None, closed="neither"), "l2": Interval(float, 0, None, closed="neither"),
        "draws": Interval(int, 1, 100_000), **_SHARED_CONSTRAINTS,
    }

    _samples: F64  # (k, draws * m): column s * m + a is draw s of actor a

    def _after_fit(self) -> None:
        m, k, _ = self._inv.shape
        S = int(self.params["draws"])
        rng = np.random.default_rng([self.seed, 0x54484F4D])
        chol = np.linalg.cholesky(self._inv + 1e-12 * np.eye(k))  # (m, k, k), chol @ chol^T = A^-1
        noise = rng.standard_normal((m, k, S))
        theta = self._theta[:, :, None] + float(self.params["v"]) * (chol @ noise)  # (m, k, S)
        self._samples = np.ascontiguousarray(np.transpose(theta, (1, 2, 0)).reshape(k, S * m))

    @one_blas_thread
    def predictive(self, features: Features) -> tuple[F64, F64]:
        """Mean and standard deviation of each actor's sampled reward at each query, (n, m) each: the sampled
        rewards of different actors are independent Gaussians with these moments."""
        return self.predict(features), float(self.params["v"]) * self.uncertainty(features)

    @one_blas_thread
    def _scores(self, features: Features) -> npt.ArrayLike:
        return self.predict(features)

    @one_blas_thread
    def _distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        Z = self._context.transform(features.X)
        m, S = len(self.actor_names), int(self.params["draws"])
        counts = np.zeros((Z.shape[0], m))
        step = max(1, _DRAW_BLOCK_ELEMENTS // (m * S))
        for start in range(0, Z.shape[0], step):
            block = Z[start : start + step]
            winner = (block @ self._samples).reshape(-1, S, m).argmax(axis=2)  # (block, S)
            cell = np.arange(block.shape[0])[:, None] * m + winner
            counts[start : start + step] = np.bincount(cell.ravel(), minlength=block.shape[0] * m).reshape(-1, m)
        return (counts + 1.0 / m) / (S + 1.0)


# ---------------------------------------------------------------------------- BaRP
class _Adam:
    """Adam (Kingma & Ba 2015) over a list of float32 arrays, updated in place."""

    def __init__(self, params: list[F32], lr: float) -> None:
        self.params, self.lr, self.step = params, lr, 0
        self.m1 = [np.zeros_like(p) for p in params]
        self.m2 = [np.zeros_like(p) for p in params]

    def update(self, grads: list[F32]) -> None:
        b1, b2 = 0.9, 0.999
        self.step += 1
        lr_t = self.lr * np.sqrt(1 - b2**self.step) / (1 - b1**self.step)
        for p, g, m1, m2 in zip(self.params, grads, self.m1, self.m2, strict=True):
            m1 *= b1
            m1 += (1 - b1) * g
            m2 *= b2
            m2 += (1 - b2) * g * g
            p -= (lr_t * m1 / (np.sqrt(m2) + 1e-8)).astype(np.float32)


def _softmax32(z: F32) -> F32:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return np.asarray(e / e.sum(axis=1, keepdims=True), dtype=np.float32)


@register
class BaRP(Router):
    """BaRP (Wei et al. 2025; routerworld.txt G.1): a softmax policy ``pi(a|x) = softmax(MLP(z))`` on the frozen
    query context, trained by policy gradient with an entropy bonus ``beta * H(pi(.|x))``.

    - Full feedback: ascend the expected reward ``sum_a pi(a|x) r(x, a)`` over every actor (G.1's "expected
      reward over all models"; an unobserved cell counts at its actor's mean observed reward), whose exact
      gradient in the logits is ``pi_a (r_a - sum_b pi_b r_b)``.
    - Logged feedback: the off-policy REINFORCE gradient on the logged action only,
      ``w (r - baseline) grad log pi(a_i|x_i)`` with importance weight ``w = min(pi(a_i|x_i) / p_i, clip)`` and
      the mean logged reward as baseline (it cuts variance; with w unclipped the gradient stays unbiased for the
      gradient of the policy's value, which is why BaRP keeps improving over Voyager rounds, routerworld.txt 5.4).

    The distribution (and the scores) is pi itself. Training: Adam on minibatches of ``batch_size`` (256, G.1's
    effective batch), one ReLU hidden layer of width ``hidden`` (64, BaRP's 64-dim head; 0 = a linear softmax
    policy) with inverted ``dropout`` (0.2, as G.1), up to ``epochs`` (100, as G.1) with early stopping
    (``patience`` 10, as G.1) on the policy's value on a held-out ``holdout`` share (0.1; 0 = no early stopping)
    of the training queries (expected reward under full feedback, self-normalised IPS under logged), keeping the
    best epoch. Given a development part (``fit(..., dev=...)``), the policy trains on every training query and
    stops on its expected reward on the development queries instead (``holdout`` is then unused; unobserved
    development cells count at their actor's mean development reward), recorded in ``early_stopping``.
    Choices: ``lr`` 3e-3 instead of G.1's 1e-4: on llmrouter both give the same test mu_o within
    noise (full 0.583 vs 0.577; uniform logs 0.564 vs 0.559, 3 logging seeds) but 3e-3 stops early after 15-60
    epochs (0.3-2 s on CPU) where 1e-4 runs all 100; ``dim`` 64 (uniform logs: 0.551 / 0.564 / 0.535 at
    dim 32 / 64 / 128); one policy per preference: BaRP conditions one policy on the preference vector
    ``(w_q, w_c)``, here it is fixed at fit time as ``(1, weight)`` with the penalty named by ``by``. Options
    ``beta`` (0.05, as G.1), ``clip`` (10: pi / p <= m under uniform logging, so uniform logs of up to 10 actors
    are never clipped) and the shared ``by``/``weight``."""

    name = "barp"
    summary = "BaRP: softmax policy trained by REINFORCE with entropy bonus (routerworld G.1)"
    explores = True
    uses_dev = True
    logged_recipe: ClassVar[str] = "native"
    defaults: ClassVar[dict[str, Any]] = {
        "hidden": 64, "epochs": 100, "lr": 3e-3, "batch_size": 256, "beta": 0.05, "dropout": 0.2, "patience": 10,
        "holdout": 0.1, "clip": 10.0, **_SHARED_DEFAULTS, "dim": 64,
    }
    constraints: ClassVar[dict[str, Constraint]] = {
        "hidden": Interval(int, 0, 65_536), "epochs": Interval(int, 1, None),
        "lr": Interval(float, 0, None, closed="neither"), "batch_size": Interval(int, 1, None),
        "beta": Interval(float, 0, None), "dropout": Interval(float, 0, 1, closed="left"),
        "patience": Interval(int, 1, None), "holdout": Interval(float, 0, 0.5, closed="left"),
        "clip": Interval(float, 0, None, closed="neither"), **_SHARED_CONSTRAINTS,
    }

    _context: Context
    weights: list[F32]
    biases: list[F32]
    epochs_run: int  # epochs trained (early stopping may end before ``epochs``)
    best_epoch: int  # the epoch whose parameters were kept (0 = the initial policy)
    _dev: DevPart | None = None  # the development part while a fit with one runs
    _stopper: EarlyStopping  # the last fit's early stopping (its curve)
    _n_val: int  # queries the last fit stopped on (holdout or development)

    def _check_table(self, train: RoutingTable) -> None:
        check_reward(self, train)

    # -- the network -------------------------------------------------------------------
    def _forward(self, z: F32, rng: np.random.Generator | None = None) -> tuple[list[F32], F32]:
        """Hidden activations (after dropout when ``rng`` is given: training) and the logits."""
        acts = [z]
        h = z
        keep = 1.0 - float(self.params["dropout"])
        for W, b in zip(self.weights[:-1], self.biases[:-1], strict=True):
            h = np.maximum(h @ W + b, 0.0)
            if rng is not None and keep < 1.0:
                h = h * ((rng.random(h.shape) < keep) / np.float32(keep)).astype(np.float32)
            acts.append(h)
        return acts, np.asarray(h @ self.weights[-1] + self.biases[-1], dtype=np.float32)

    def _backward(self, acts: list[F32], dz: F32) -> list[F32]:
        return backward(self.weights, acts, dz)

    def _policy(self, z: F32) -> F32:
        return _softmax32(self._forward(z)[1])

    # -- training ----------------------------------------------------------------------
    def _fit_dev(self, train: RoutingTable, features: Features, dev: DevPart) -> None:
        self._dev = dev
        try:
            self._fit(train, features)
        finally:
            self._dev = None

    def _dev_target(self, train: RoutingTable, dev: DevPart) -> tuple[F32, dict[str, npt.NDArray[Any]]]:
        """The development queries as the policy's value reads them: their contexts and full-feedback rewards (on the
        training table's penalty scale; an unobserved cell at its actor's mean development reward); queries with no
        observed cell are left out, and none left is a UsageError."""
        R = rewards(dev.table, self.params["by"], float(self.params["weight"]), reference=train)
        obs = ~np.isnan(R)
        rows = np.flatnonzero(obs.any(axis=1))
        if rows.size == 0:
            raise UsageError(f"router {self.name!r}: no development query has an observed outcome")
        means = np.nanmean(np.where(obs[rows], R[rows], np.nan), axis=0)
        means = np.where(np.isnan(means), float(np.nanmean(R[rows])), means)
        filled = np.where(obs[rows], R[rows], means[None, :]).astype(np.float32)
        Z = self._context.transform(np.asarray(dev.features.X)[rows]).astype(np.float32)
        return Z, {"reward": filled}

    @one_blas_thread
    def _fit(self, train: RoutingTable, features: Features) -> None:
        p = self.params
        m = train.n_actors
        rng = np.random.default_rng([self.seed, 0x42615250])
        self._context = Context(p["dim"], self.seed).fit(features.X)
        Z = self._context.transform(features.X).astype(np.float32)
        R = rewards(train, p["by"], float(p["weight"]))
        obs = ~np.isnan(R)
        sizes = [Z.shape[1], *hidden_layers(p["hidden"]), m]
        self.weights, self.biases = [], []
        for fan_in, fan_out in itertools.pairwise(sizes):
            gain = np.sqrt(2.0 / fan_in) if fan_out != m else np.sqrt(1.0 / fan_in)
            self.weights.append((rng.standard_normal((fan_in, fan_out)) * gain).astype(np.float32))
            self.biases.append(np.zeros(fan_out, dtype=np.float32))
        self.weights[-1] *= np.float32(0.01)  # start near the uniform policy
        self.epochs_run = self.best_epoch = 0
        rows = np.flatnonzero(obs.any(axis=1))
        if rows.size == 0:
            return  # nothing observed: the uniform policy
        if self.feedback_kind == "logged" and self.propensity is not None:
            action = np.asarray(obs[rows].argmax(axis=1), dtype=np.intp)
            reward = R[rows, action]
            target: dict[str, npt.NDArray[Any]] = {
                "action": action, "reward": (reward - reward.mean()).astype(np.float32),
                "raw": reward.astype(np.float32), "propensity": self.propensity[rows].astype(np.float32),
            }
        else:
            means = np.nanmean(np.where(obs[rows], R[rows], np.nan), axis=0)
            means = np.where(np.isnan(means), float(np.nanmean(R[rows])), means)
            filled = np.where(obs[rows], R[rows], means[None, :])
            target = {"reward": filled.astype(np.float32)}
        dev = self._dev
        self._train(Z[rows], target, rng, None if dev is None else self._dev_target(train, dev))
        if dev is not None:
            self.early_stopping = self._stopper.describe(self._n_val, int(p["epochs"]))

    def _split(self, n: int, rng: np.random.Generator) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        n_val = round(float(self.params["holdout"]) * n)
        if n_val < 2 or n - n_val < 2:
            return np.arange(n), np.arange(0)
        perm = rng.permutation(n)
        return np.sort(perm[n_val:]), np.sort(perm[:n_val])

    def _value(self, z: F32, target: dict[str, npt.NDArray[Any]]) -> float:
        """The policy's estimated value on held-out rows: expected reward (full), self-normalised IPS (logged)."""
        pi = self._policy(z)
        if "action" not in target:
            return float((pi * target["reward"]).sum(axis=1).mean())
        w = pi[np.arange(z.shape[0]), target["action"]] / target["propensity"]
        return float((w * target["raw"]).sum() / max(float(w.sum()), 1e-12))

    def _logit_gradient(self, pi: F32, target: dict[str, npt.NDArray[Any]], rows: npt.NDArray[np.intp]) -> F32:
        """Gradient of minus (policy objective + beta * entropy) in the logits, averaged over the batch."""
        B = rows.shape[0]
        if "action" in target:
            a = target["action"][rows]
            w = np.minimum(pi[np.arange(B), a] / target["propensity"][rows], float(self.params["clip"]))
            g = -pi
            g[np.arange(B), a] += 1.0
            g *= (w * target["reward"][rows])[:, None]
        else:
            r = target["reward"][rows]
            g = pi * (r - (pi * r).sum(axis=1, keepdims=True))
        beta = float(self.params["beta"])
        if beta:
            log_pi = np.log(np.maximum(pi, 1e-30))
            entropy = -(pi * log_pi).sum(axis=1, keepdims=True)
            g -= beta * pi * (log_pi + entropy)
        return np.asarray(-g / B, dtype=np.float32)

    def _train(self, Z: F32, target: dict[str, npt.NDArray[Any]], rng: np.random.Generator,
               dev: tuple[F32, dict[str, npt.NDArray[Any]]] | None = None) -> None:
        """Adam epochs with early stopping on the policy's value: on the ``holdout`` rows of the training queries,
        or, with ``dev`` (contexts and target of the development queries), there, training on every query."""
        p = self.params
        if dev is None:
            fit_rows, val_rows = self._split(Z.shape[0], rng)
            z_val, val_target = Z[val_rows], {k: v[val_rows] for k, v in target.items()}
        else:
            fit_rows, (z_val, val_target) = np.arange(Z.shape[0]), dev
        self._n_val = int(z_val.shape[0])
        opt = _Adam([*self.weights, *self.biases], float(p["lr"]))
        n_layers = len(self.weights)
        stopper = EarlyStopping("dev_expected_reward", higher_is_better=True, patience=int(p["patience"]))
        self._stopper = stopper
        if self._n_val:
            stopper.update(self._value(z_val, val_target))
        kept = [w.copy() for w in opt.params]
        batch = int(p["batch_size"])
        for epoch in range(1, int(p["epochs"]) + 1):
            perm = fit_rows[rng.permutation(fit_rows.shape[0])]
            for start in range(0, perm.shape[0], batch):
                rows = perm[start : start + batch]
                acts, logits = self._forward(Z[rows], rng)
                opt.update(self._backward(acts, self._logit_gradient(_softmax32(logits), target, rows)))
            self.epochs_run = epoch
            if not self._n_val:
                continue
            improved, stop = stopper.update(self._value(z_val, val_target))
            if improved:
                self.best_epoch = epoch
                kept = [w.copy() for w in opt.params]
            elif stop:
                break
        if not self._n_val:
            self.best_epoch = self.epochs_run
            return
        self.weights, self.biases = kept[:n_layers], kept[n_layers:]

    # -- routing -----------------------------------------------------------------------
    @one_blas_thread
    def _scores(self, features: Features) -> npt.ArrayLike:
        z = self._context.transform(features.X).astype(np.float32)
        return np.asarray(_softmax32(self._forward(z)[1]), dtype=np.float64)

    @one_blas_thread
    def _distribution(self, features: Features, scores: FloatMatrix) -> npt.ArrayLike:
        return np.asarray(scores / scores.sum(axis=1, keepdims=True))  # pi itself (renormalised after the float64 cast)
