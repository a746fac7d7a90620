"""Hidden-state probes of the small model: ``probe-dirichlet``, ``probe-mean``, ``probe-final`` (SPEC 6).

Source: routerxbench-probedirichlet.txt sec. 4 (eq. 12-15) and appendix C, Algorithm 1. Each probe reads the signal
``hidden`` (n, layers, dim): z_l = the small model's hidden state after layer l, mean-pooled over the prompt tokens
(eq. 12; layer 0 = the embedding output), fuses the layers into F = sum_l w_l z_l and scores the query with a linear
head, s = v . F + b: a logit of "the small model is good enough", trained with binary cross-entropy on
:func:`~routerlab.routers.two_model.small_good_enough_labels`, so ``softmax([s, 0])`` is P(small good enough).

- ``probe-dirichlet``: concentration alpha = exp(b0) * softmax(theta), b0 and theta learned with the head; while
  training each example draws w ~ Dirichlet(alpha) (reparameterised); at inference w = alpha / sum(alpha) (eq. 15).
- ``probe-mean``: w uniform over the layers (the paper's Mean ablation, "beta_l = c").
- ``probe-final``: the last layer only.

Where the paper is silent (b0's start, batch size, standardisation, which layers) see docs/probes.md. torch is
optional (extras ``nn``/``llm``/``embed``): it is imported when a probe fits; scoring is numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from routerlab._spec import Constraint, Interval, Options
from routerlab._threads import torch_threads
from routerlab.data.table import RoutingTable
from routerlab.errors import DataError, UsageError
from routerlab.features.base import Features
from routerlab.routers._early_stopping import EarlyStopping
from routerlab.routers.base import DevPart, register
from routerlab.routers.two_model import TwoModelRouter, small_good_enough_labels

if TYPE_CHECKING:
    import torch

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]

INSTALL_HINT = "pip install torch==2.13.0"
CHUNK_ROWS = 256  # rows cast to float32 at a time (256 x 29 x 1536 floats = 46 MB)

PROBE_DEFAULTS: dict[str, Any] = {
    "epochs": 50, "lr": 1e-4, "batch_size": 32, "weight_decay": 0.0, "standardize": False, "patience": 5,
}
PROBE_CONSTRAINTS: dict[str, Constraint] = {
    "epochs": Interval(int, 1, None),
    "patience": Interval(int, 1, None),
    "lr": Interval(float, 0, None, closed="neither"),
    "batch_size": Interval(int, 1, None),
    "weight_decay": Interval(float, 0, None),
    "standardize": Options({True, False}),
}
LAYERS = Options({"blocks", "all"})


def _import_torch(router: str) -> Any:
    """torch, or one UsageError line saying how to install it (torch is an optional dependency)."""
    try:
        import torch
    except ImportError:
        raise UsageError(f"router {router!r} trains with torch, which is not installed: {INSTALL_HINT}") from None
    return torch


def hidden_signal(features: Features, router: str) -> npt.NDArray[Any]:
    """The ``hidden`` signal of ``features`` checked to be (n, layers, dim) floats: a DataError otherwise."""
    hidden = np.asarray(features.signal("hidden", router))
    if hidden.ndim != 3 or hidden.shape[1] < 1 or hidden.shape[2] < 1:
        raise DataError(f"signal 'hidden' has shape {hidden.shape}, expected (queries, layers, dim)")
    if not np.issubdtype(hidden.dtype, np.floating):
        raise DataError(f"signal 'hidden' holds {hidden.dtype} values, expected floats")
    return hidden


def _rows(hidden: npt.NDArray[Any], rows: slice | npt.NDArray[np.intp], first: int,
          torch: Any = None) -> F32:
    """Rows of ``hidden`` from layer ``first`` on as a float32 array (one chunk or batch at a time); with ``torch``
    given, torch casts (several times faster than numpy on float16)."""
    part = hidden[rows, first:]
    if torch is None or part.dtype != np.float16:
        return np.asarray(part, dtype=np.float32)
    return np.asarray(torch.from_numpy(part).float().contiguous().numpy())


def layer_statistics(hidden: npt.NDArray[Any], first: int, ids: npt.NDArray[np.object_],
                     torch: Any = None) -> tuple[F32, F32]:
    """Per-feature mean and standard deviation (layers from ``first`` on, dim) over the rows of ``hidden`` in one
    pass of float32 chunks, merged in float64 (Chan et al.'s pairwise update): no float32 copy of the whole array.
    A standard deviation of 0 (a constant feature) becomes 1. A non-finite value is a DataError naming its query."""
    shape = (hidden.shape[1] - first) * hidden.shape[2]
    mean, squares, count = np.zeros(shape), np.zeros(shape), 0
    for start in range(0, hidden.shape[0], CHUNK_ROWS):
        x = _rows(hidden, slice(start, start + CHUNK_ROWS), first, torch).reshape(-1, shape)
        k = x.shape[0]
        chunk_mean = x.sum(axis=0) / np.float32(k)
        if not np.isfinite(chunk_mean).all():  # a NaN or an inf anywhere in a column shows in its sum
            row = start + int(np.argwhere(~np.isfinite(x))[0, 0])
            raise DataError(f"signal 'hidden' is not finite (query {ids[row]!r})", row=row + 1, field="hidden")
        centred = x - chunk_mean
        chunk_squares = np.einsum("ij,ij->j", centred, centred)
        delta = chunk_mean.astype(np.float64) - mean
        total = count + k
        mean += delta * (k / total)
        squares += chunk_squares + delta * delta * (count * k / total)
        count = total
    std = np.sqrt(squares / count)
    std[~(std > 1e-6 * np.maximum(np.abs(mean), 1.0))] = 1.0
    out = (hidden.shape[1] - first, hidden.shape[2])
    return mean.astype(np.float32).reshape(out), std.astype(np.float32).reshape(out)


class HiddenStateProbe(TwoModelRouter):
    """A linear head on a weighted sum of the small model's per-layer hidden states (module docstring). Subclasses
    say which layers (``_first_layer``) and how they are weighted (``_train``).

    Early stopping (only when ``fit`` is given a development part, whose queries need both models' outcomes): after
    each epoch the probe scores the development queries with its inference weights and measures its training loss
    there (``dev_bce``: binary cross-entropy of s against "the small model is good enough"; the probe's score is
    read at every threshold, so its loss, not one threshold's routing, is what it is for); it keeps the epoch of
    the lowest loss and stops after ``patience`` (5) epochs without improvement. Without one it trains all
    ``epochs``, as before."""

    summary = "two-model probe on the small model's hidden states (base)"
    uses_dev = True
    reads_signals = ("hidden",)
    defaults: ClassVar[dict[str, Any]] = dict(PROBE_DEFAULTS)
    constraints: ClassVar[dict[str, Constraint]] = dict(PROBE_CONSTRAINTS)

    head_weight: F32  # v (dim,)
    head_bias: float  # b
    feature_mean: F32  # (used layers, dim); zeros without standardize
    feature_scale: F32  # (used layers, dim); ones without standardize
    _weights: F64  # inference layer weights over the used layers
    _first: int  # the first used layer
    _shape: tuple[int, int]  # (layers, dim) of the training signal
    _dev: DevPart | None = None  # the development part while a fit with one runs
    _dev_labels: F64  # its "small good enough" labels (0/1)
    _stopping: tuple[EarlyStopping, dict[str, Any]]  # the running fit's curve and best parameters
    _state_names: ClassVar[tuple[str, ...]] = ("head_weight", "head_bias", "_weights")  # what an epoch's fit is

    def _first_layer(self, n_layers: int) -> int:
        """The first layer the probe reads (it reads every layer from there to the last)."""
        if self.params.get("layers", "all") == "all":
            return 0
        if n_layers < 2:
            raise UsageError(f"router {self.name!r}: layers=blocks skips layer 0 (the embedding output), and the "
                             f"signal 'hidden' has only {n_layers} layer; use layers=all")
        return 1

    def _fit(self, train: RoutingTable, features: Features) -> None:
        torch = _import_torch(self.name)
        labels = small_good_enough_labels(train)
        good = int(labels.sum())
        if good in (0, labels.size):
            which = "good enough" if good else "not good enough"
            raise UsageError(f"router {self.name!r}: the small model is {which} on all {labels.size} training "
                             "queries, so there is nothing to learn; train on queries with both outcomes")
        hidden = hidden_signal(features, self.name)
        self._shape = (int(hidden.shape[1]), int(hidden.shape[2]))
        self._first = self._first_layer(self._shape[0])
        # one pass that also refuses a non-finite value, naming its query, whether or not it standardises
        self.feature_mean, self.feature_scale = layer_statistics(hidden, self._first, features.queries.ids, torch)
        if not self.params["standardize"]:
            self.feature_mean = np.zeros_like(self.feature_mean)
            self.feature_scale = np.ones_like(self.feature_scale)
        # one thread: per-step tensors are small, and threads only contend on a shared machine
        with torch_threads(1), torch.random.fork_rng(devices=[]):  # the caller's global torch RNG is left as it was
            torch.manual_seed(self.seed % 2**63)
            generator = torch.Generator().manual_seed(self.seed % 2**63)
            self._train(torch, hidden, labels, generator)
        if not (np.isfinite(self.head_weight).all() and np.isfinite(self.head_bias)
                and np.isfinite(self._weights).all()):
            raise UsageError(f"router {self.name!r}: training diverged (non-finite parameters); lower lr "
                             f"(now {self.params['lr']}) or set standardize=true")

    def _fit_dev(self, train: RoutingTable, features: Features, dev: DevPart) -> None:
        labels = small_good_enough_labels(dev.table)
        hidden_signal(dev.features, self.name)  # the development queries carry the signal (one line if not)
        self._dev, self._dev_labels = dev, labels.astype(np.float64)
        try:
            self._fit(train, features)
        finally:
            self._dev = None

    def _epoch_hook(self, capture: Callable[[], None]) -> Callable[[int], bool] | None:
        """With a development part, what :func:`_descend` calls before training and after each epoch: ``capture``
        writes the current tensors into the probe's inference parameters, the development loss is measured, the
        best epoch's parameters kept (:meth:`_finish_training` restores them); True = patience has run out."""
        dev = self._dev
        if dev is None:
            return None
        stopper = EarlyStopping("dev_bce", higher_is_better=False, patience=int(self.params["patience"]))
        y = self._dev_labels
        kept: dict[str, Any] = {}

        def hook(epoch: int) -> bool:
            capture()
            state = {k: np.copy(getattr(self, k)) for k in self._state_names}
            finite = all(np.isfinite(v).all() for v in state.values())
            s = self._small_score(dev.features) if finite else None
            loss = float(np.mean(np.logaddexp(0.0, s) - y * s)) if s is not None else float("nan")
            improved, stop = stopper.update(loss)
            if improved:
                kept.clear()
                kept.update(state)
            return stop

        self._stopping = (stopper, kept)
        return hook

    def _finish_training(self) -> None:
        """After a fit with a development part: the best epoch's parameters back, and the record of the choice."""
        if self._dev is None:
            return
        stopper, kept = self._stopping
        for k, v in kept.items():
            setattr(self, k, v.item() if v.ndim == 0 else v)
        self.early_stopping = stopper.describe(int(self._dev_labels.shape[0]), int(self.params["epochs"]))

    def _train(self, torch: Any, hidden: npt.NDArray[Any], labels: npt.NDArray[np.bool_],
               generator: torch.Generator) -> None:
        """Fixed layer weights (``_fixed_weights``): fuse each row once, chunk by chunk, then fit the head."""
        self._weights = self._fixed_weights(self._shape[0] - self._first)
        fused = self._fuse(hidden, torch)
        x = torch.from_numpy(fused)
        head, bias = _new_head(torch, fused.shape[1])
        optimizer = self._optimizer(torch, head, bias, [])
        _descend(torch, self.params, labels, generator, optimizer, lambda rows: x[rows] @ head + bias,
                 self._epoch_hook(lambda: self._keep_head(head, bias)))
        self._keep_head(head, bias)
        self._finish_training()

    def _fixed_weights(self, used: int) -> F64:
        """The fixed inference (and training) weights over the ``used`` layers; probes that learn them override
        ``_train`` instead."""
        raise NotImplementedError(f"{type(self).__name__} sets no layer weights")

    def _fuse(self, hidden: npt.NDArray[Any], torch: Any) -> F32:
        """(n, dim) float32: sum_l w_l (z_l - mean_l) / scale_l over the used layers, chunk by chunk."""
        w = self._weights.astype(np.float32)
        out = np.empty((hidden.shape[0], self._shape[1]), dtype=np.float32)
        for start in range(0, hidden.shape[0], CHUNK_ROWS):
            x = _rows(hidden, slice(start, start + CHUNK_ROWS), self._first, torch)
            out[start:start + CHUNK_ROWS] = np.einsum("bld,l->bd", (x - self.feature_mean) / self.feature_scale, w)
        return out

    def _optimizer(self, torch: Any, head: torch.Tensor, bias: torch.Tensor, others: list[torch.Tensor]) -> Any:
        """Adam (the authors' optimiser) at ``lr``; ``weight_decay`` is an L2 penalty on the head's weights only."""
        groups = [{"params": [head], "weight_decay": float(self.params["weight_decay"])},
                  {"params": [bias, *others], "weight_decay": 0.0}]
        return torch.optim.Adam(groups, lr=float(self.params["lr"]))

    def _keep_head(self, head: torch.Tensor, bias: torch.Tensor) -> None:
        self.head_weight = head.detach().numpy().astype(np.float32)
        self.head_bias = float(bias.detach().numpy()[0])

    def layer_weights(self) -> F64:
        """The inference layer weights over every layer of the signal (index = layer, 0 = embedding output; 0 for
        layers the probe does not read); they sum to 1."""
        if not self._fitted:
            raise UsageError(f"router {self.name!r} has no layer weights before fit()")
        out = np.zeros(self._shape[0], dtype=np.float64)
        out[self._first:] = self._weights
        return out

    def _small_score(self, features: Features) -> F64:
        """s = v . sum_l w_l (z_l - mean_l) / scale_l + b, folded into one (layers, dim) weight for a matrix-vector
        product per chunk."""
        hidden = hidden_signal(features, self.name)
        if tuple(hidden.shape[1:]) != self._shape:
            raise UsageError(f"router {self.name!r} was trained on hidden states of {self._shape[0]} layers x "
                             f"{self._shape[1]} dims, asked to score {hidden.shape[1]} x {hidden.shape[2]}: "
                             "extract both with the same small model")
        folded = (self._weights[:, None] * self.head_weight[None, :] / self.feature_scale).astype(np.float32)
        offset = self.head_bias - float((folded.astype(np.float64) * self.feature_mean).sum())
        flat = folded.reshape(-1)
        out = np.empty(hidden.shape[0], dtype=np.float64)
        for start in range(0, hidden.shape[0], CHUNK_ROWS):
            x = _rows(hidden, slice(start, start + CHUNK_ROWS), self._first)
            out[start:start + CHUNK_ROWS] = x.reshape(x.shape[0], -1) @ flat
        bad = ~np.isfinite(out)
        if bad.any():  # a NaN or an inf in a layer the probe reads
            row = int(np.flatnonzero(bad)[0])
            raise DataError(f"signal 'hidden' is not finite (query {features.queries.ids[row]!r})", row=row + 1,
                            field="hidden")
        return out + offset

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        if self._fitted:
            out["layer_weights"] = [round(float(w), 6) for w in self.layer_weights()]
        return out


def _new_head(torch: Any, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The linear head's weight and bias, drawn as torch.nn.Linear draws them: U(-1/sqrt(dim), 1/sqrt(dim))."""
    bound = 1.0 / float(np.sqrt(dim))
    head = ((torch.rand(dim) * 2 - 1) * bound).requires_grad_()
    bias = ((torch.rand(1) * 2 - 1) * bound).requires_grad_()
    return head, bias


def _descend(torch: Any, params: dict[str, Any], labels: npt.NDArray[np.bool_], generator: torch.Generator,
             optimizer: Any, logits: Callable[[torch.Tensor], torch.Tensor],
             on_epoch: Callable[[int], bool] | None = None) -> None:
    """``epochs`` passes of mini-batch BCE-with-logits descent over the rows, shuffled by ``generator``;
    ``on_epoch(k)`` (before training, k = 0, and after each epoch k) returning True stops there. It draws from
    no torch generator, so the epochs run are those of a descent without it."""
    n = labels.shape[0]
    y = torch.from_numpy(labels.astype(np.float32))
    size = int(params["batch_size"])
    if on_epoch is not None and on_epoch(0):
        return
    for epoch in range(1, int(params["epochs"]) + 1):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, size):
            rows = order[start:start + size].sort().values  # a batch is read in row order (memory locality)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits(rows), y[rows])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if on_epoch is not None and on_epoch(epoch):
            return


@register
class ProbeDirichlet(HiddenStateProbe):
    """ProbeDirichlet (SPEC 6; Algorithm 1): layer weights w ~ Dirichlet(exp(b0) softmax(theta)) per training
    example, their mean alpha / sum(alpha) at inference (eq. 15), a linear head on sum_l w_l z_l. b0 and theta are
    learned with the head; b0 starts at option ``b0`` (1.0) and theta at 0 (alpha uniform)."""

    name = "probe-dirichlet"
    summary = "two-model: linear probe on Dirichlet-weighted hidden-state layers of the small model (ProbeDirichlet)"
    defaults: ClassVar[dict[str, Any]] = {**PROBE_DEFAULTS, "layers": "blocks", "b0": 1.0}
    constraints: ClassVar[dict[str, Constraint]] = {**PROBE_CONSTRAINTS, "layers": LAYERS,
                                                    "b0": Interval(float, -20, 20)}

    log_concentration: float  # the learned b0: sum(alpha) = exp(b0)
    _theta: F64
    _state_names: ClassVar[tuple[str, ...]] = ("head_weight", "head_bias", "_weights", "log_concentration", "_theta")

    def _train(self, torch: Any, hidden: npt.NDArray[Any], labels: npt.NDArray[np.bool_],
               generator: torch.Generator) -> None:
        """Algorithm 1 while training: each batch is cast to float32 on its own; the standardisation is folded into
        the head (v . (z - m) / s = (v / s) . z - (v / s) . m), so a batch is read twice per step and never copied."""
        used, dim = self._shape[0] - self._first, self._shape[1]
        mean, scale = torch.from_numpy(self.feature_mean), torch.from_numpy(self.feature_scale)
        head, bias = _new_head(torch, dim)
        theta = torch.zeros(used, requires_grad=True)
        b0 = torch.tensor(float(self.params["b0"]), requires_grad=True)
        optimizer = self._optimizer(torch, head, bias, [theta, b0])
        first = self._first

        def logits(rows: torch.Tensor) -> torch.Tensor:
            x = torch.from_numpy(hidden[rows.numpy(), first:]).float()  # (B, used, dim); torch casts float16 fast
            per_dim = head / scale  # (used, dim)
            per_layer = torch.einsum("bld,ld->bl", x, per_dim) - (per_dim * mean).sum(dim=1)
            alpha = torch.exp(b0) * torch.softmax(theta, dim=0)
            w = torch.distributions.Dirichlet(alpha.expand(x.shape[0], used)).rsample()
            return (w * per_layer).sum(dim=1) + bias

        def capture() -> None:  # the inference parameters of the tensors as they stand (eq. 15's mean weights)
            self._keep_head(head, bias)
            self.log_concentration = float(b0.detach())
            self._theta = theta.detach().numpy().astype(np.float64)
            alpha = self.concentration()
            self._weights = alpha / alpha.sum()

        _descend(torch, self.params, labels, generator, optimizer, logits, self._epoch_hook(capture))
        capture()
        self._finish_training()

    def concentration(self) -> F64:
        """alpha = exp(b0) softmax(theta) over the used layers (from layer 0 with layers=all, else from layer 1)."""
        t = self._theta - self._theta.max()
        return np.asarray(np.exp(self.log_concentration) * np.exp(t) / np.exp(t).sum(), dtype=np.float64)


@register
class ProbeMean(HiddenStateProbe):
    """ProbeMean (SPEC 6; the paper's Mean ablation): the same head on the uniform mean of the layers."""

    name = "probe-mean"
    summary = "two-model: linear probe on the mean of the small model's hidden-state layers (ProbeMean)"
    defaults: ClassVar[dict[str, Any]] = {**PROBE_DEFAULTS, "layers": "blocks"}
    constraints: ClassVar[dict[str, Constraint]] = {**PROBE_CONSTRAINTS, "layers": LAYERS}

    def _fixed_weights(self, used: int) -> F64:
        return np.full(used, 1.0 / used)


@register
class ProbeFinal(HiddenStateProbe):
    """The final-layer probe (SPEC 6; the paper's Final ablation): the same head on the last layer only."""

    name = "probe-final"
    summary = "two-model: linear probe on the small model's last hidden-state layer"

    def _first_layer(self, n_layers: int) -> int:
        return n_layers - 1

    def _fixed_weights(self, used: int) -> F64:
        return np.ones(used)
