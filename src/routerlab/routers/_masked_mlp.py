"""A small numpy multi-layer perceptron with *masked* losses (private helper of the learned routers).

Why not sklearn's MLPRegressor/MLPClassifier: they cannot leave unobserved target cells out of the
loss, and routers must train on observed cells only. This one trains with mini-batch Adam on
float32, ReLU hidden layers (none = a linear model), deterministic for a seed:

- ``loss="bce"``: one sigmoid output per actor, binary cross-entropy on targets in [0, 1], summed
  over the observed cells only (RouterEval LinearR/MLPR/MLC use BCEWithLogitsLoss);
- ``loss="softmax"``: one softmax over the actors, cross-entropy against a target distribution per
  row; unobserved actors are removed from that row's softmax.

Inputs are centred and divided by one global standard deviation (relative feature scales kept, so
rare TF-IDF terms are not blown up as per-feature z-scores would).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from routerlab._spec import Constraint, Interval
from routerlab.metrics.selection import softmax

F32 = npt.NDArray[np.float32]
Loss = Literal["bce", "softmax"]


def _sigmoid(z: F32) -> F32:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * z)), dtype=np.float32)


def backward(weights: list[F32], acts: list[F32], dz: F32) -> list[F32]:
    """Gradients of a ReLU MLP (weights of every layer, then biases) given its layer inputs ``acts`` and the
    gradient ``dz`` of the loss with respect to its output logits: the backward pass every numpy network of the
    zoo shares."""
    gW: list[F32] = []
    gb: list[F32] = []
    for layer in range(len(weights) - 1, -1, -1):
        gW.append(acts[layer].T @ dz)
        gb.append(dz.sum(axis=0))
        if layer:
            dz = (dz @ weights[layer].T) * (acts[layer] > 0)
    return [*gW[::-1], *gb[::-1]]


class MaskedMLP:
    def __init__(
        self,
        hidden: Sequence[int] = (),
        loss: Loss = "bce",
        epochs: int = 20,
        lr: float = 1e-3,
        batch_size: int = 64,
        weight_decay: float = 1e-4,
        seed: int = 0,
    ) -> None:
        self.hidden = tuple(int(h) for h in hidden)
        self.loss = loss
        self.epochs = int(epochs)
        self.lr = float(lr)
        self.batch_size = int(batch_size)
        self.weight_decay = float(weight_decay)
        self.seed = int(seed)
        self.weights: list[F32] = []
        self.biases: list[F32] = []
        self._mean: F32 = np.zeros(0, dtype=np.float32)
        self._scale = 1.0

    def _prep(self, X: npt.ArrayLike) -> F32:
        return np.asarray((np.asarray(X, dtype=np.float32) - self._mean) / self._scale, dtype=np.float32)

    def fit(self, X: npt.ArrayLike, Y: npt.ArrayLike, mask: npt.ArrayLike | None = None,
            on_epoch: Callable[[int], bool] | None = None) -> MaskedMLP:
        """Train on rows of ``X`` (n, d) against ``Y`` (n, m); ``mask`` (n, m) marks the cells that
        count (all when None). Rows with no counted cell are skipped. ``on_epoch(k)``, when given, is called
        before training (k = 0) and after each epoch k (the network then holds that epoch's parameters); True
        stops training there. It draws nothing from the training stream, so the epochs run are those of a fit
        without it."""
        x = np.asarray(X, dtype=np.float32)
        y = np.asarray(Y, dtype=np.float32)
        msk = np.ones(y.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        keep = msk.any(axis=1)
        x, y, msk = x[keep], np.where(msk[keep], y[keep], 0.0).astype(np.float32), msk[keep]
        self._mean = x.mean(axis=0) if x.shape[0] else np.zeros(x.shape[1], dtype=np.float32)
        std = float((x - self._mean).std()) if x.size else 1.0
        self._scale = std if std > 1e-12 else 1.0
        x = self._prep(x)
        rng = np.random.default_rng([self.seed, 0x4D4C50])
        sizes = [x.shape[1], *self.hidden, y.shape[1]]
        self.weights, self.biases = [], []
        for fan_in, fan_out in itertools.pairwise(sizes):
            gain = np.sqrt(2.0 / fan_in) if fan_out != sizes[-1] else np.sqrt(1.0 / fan_in)
            self.weights.append((rng.standard_normal((fan_in, fan_out)) * gain).astype(np.float32))
            self.biases.append(np.zeros(fan_out, dtype=np.float32))
        if self.loss == "bce":  # start at the observed base rates
            rate = (y * msk).sum(axis=0) / np.maximum(msk.sum(axis=0), 1)
            rate = np.clip(rate, 1e-3, 1 - 1e-3)
            self.biases[-1] = np.log(rate / (1 - rate)).astype(np.float32)
        with threadpool_limits(limits=1, user_api="blas"):
            self._train(x, y, msk, rng, on_epoch)
        return self

    def _train(self, x: F32, y: F32, msk: npt.NDArray[np.bool_], rng: np.random.Generator,
               on_epoch: Callable[[int], bool] | None = None) -> None:
        """Mini-batch AdamW. One BLAS thread: small matrices gain nothing from threads, and on a
        shared machine OpenBLAS threads spinning for cores make each step many times slower."""
        params = [*self.weights, *self.biases]
        m1 = [np.zeros_like(p) for p in params]
        m2 = [np.zeros_like(p) for p in params]
        b1, b2, eps = 0.9, 0.999, 1e-8
        step = 0
        n = x.shape[0]
        if on_epoch is not None and on_epoch(0):
            return
        for epoch in range(1, self.epochs + 1):
            perm = rng.permutation(n)
            for start in range(0, n, self.batch_size):
                rows = perm[start : start + self.batch_size]
                grads = self._grads(x[rows], y[rows], msk[rows])
                step += 1
                lr_t = self.lr * np.sqrt(1 - b2**step) / (1 - b1**step)
                for i, (p, g) in enumerate(zip(params, grads, strict=True)):
                    if i < len(self.weights) and self.weight_decay:
                        p *= np.float32(1.0 - self.lr * self.weight_decay)  # decoupled (AdamW)
                    m1[i] = b1 * m1[i] + (1 - b1) * g
                    m2[i] = b2 * m2[i] + (1 - b2) * g * g
                    p -= (lr_t * m1[i] / (np.sqrt(m2[i]) + eps)).astype(np.float32)
            if on_epoch is not None and on_epoch(epoch):
                return

    def _forward(self, x: F32) -> tuple[list[F32], F32]:
        acts = [x]
        h = x
        for W, b in zip(self.weights[:-1], self.biases[:-1], strict=True):
            h = np.maximum(h @ W + b, 0.0)
            acts.append(h)
        return acts, np.asarray(h @ self.weights[-1] + self.biases[-1], dtype=np.float32)

    def _grads(self, x: F32, y: F32, msk: npt.NDArray[np.bool_]) -> list[F32]:
        acts, z = self._forward(x)
        if self.loss == "bce":
            dz = (_sigmoid(z) - y) * msk / max(int(msk.sum()), 1) * (msk.shape[1])
        else:
            zm = np.where(msk, z, -np.inf)
            zm = zm - zm.max(axis=1, keepdims=True)
            e = np.where(msk, np.exp(zm), 0.0)
            p = e / e.sum(axis=1, keepdims=True)
            dz = (p - y) / x.shape[0]
        return backward(self.weights, acts, dz.astype(np.float32))

    def logits(self, X: npt.ArrayLike, block: int = 8192) -> npt.NDArray[np.float64]:
        x = np.asarray(X, dtype=np.float32)
        out = np.empty((x.shape[0], self.weights[-1].shape[1]), dtype=np.float64)
        for start in range(0, x.shape[0], block):
            out[start : start + block] = self._forward(self._prep(x[start : start + block]))[1]
        return out

    def predict(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Sigmoid outputs (bce) or the softmax over all actors (softmax)."""
        z = self.logits(X)
        if self.loss == "bce":
            return np.asarray(0.5 * (1.0 + np.tanh(0.5 * z)))
        return softmax(z)


# Ranges of the options ``network_from_options`` reads, shared by every router built on MaskedMLP.
# A hidden width of 0 means "no layer"; widths above 65,536 would only exhaust memory.
NETWORK_CONSTRAINTS: dict[str, Constraint] = {
    "hidden": Interval(int, 0, 65_536),
    "epochs": Interval(int, 1, None),
    "lr": Interval(float, 0, None, closed="neither"),
    "batch_size": Interval(int, 1, None),
    "weight_decay": Interval(float, 0, None),
}


def hidden_layers(value: Any) -> tuple[int, ...]:
    """``hidden`` option: an int, a tuple (``1024/512/256/128`` on the command line), 0 or () = none."""
    if value is None:
        return ()
    if isinstance(value, int | np.integer):
        return () if int(value) == 0 else (int(value),)
    if isinstance(value, str):
        return tuple(int(v) for v in value.replace("x", "/").split("/") if v)
    return tuple(int(v) for v in value if int(v) > 0)


def network_from_options(options: Mapping[str, Any], loss: Literal["bce", "softmax"], seed: int) -> MaskedMLP:
    """The MaskedMLP a router's ``hidden``/``epochs``/``lr``/``batch_size``/``weight_decay`` options describe."""
    return MaskedMLP(
        hidden=hidden_layers(options["hidden"]), loss=loss, epochs=options["epochs"], lr=options["lr"],
        batch_size=options["batch_size"], weight_decay=options["weight_decay"], seed=seed,
    )

