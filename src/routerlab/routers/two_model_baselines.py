"""The baselines of two-model routing (SPEC 6; routerxbench-probedirichlet.txt sec. 5.1 "Baselines").

Each scores "the small model will do" (higher keeps the query on the small model, see
:mod:`routerlab.routers.two_model`):

- logit-based, from the small model's option-letter logits (``option_logits``, NaN beyond a question's
  options): ``max-logit`` (MaxLogits), ``entropy`` (Entropy, Su et al. 2025), ``margin`` (ConfidenceMargin,
  Ramirez et al. 2024);
- verbal: ``self-ask`` (SelfAsk: logit Yes - No after the model's own answer, P(True), Kadavath et al. 2022);
- consistency: ``semantic-entropy`` (SemanticEntropy, Kuhn et al. 2023, discrete variant: the entropy of the
  answer clusters of k sampled answers; in multiple choice a cluster is an option letter);
- embedding-based: ``embedding-mlp`` (EmbeddingMLP: the zoo's query vectors and a one-hidden-layer classifier
  trained on the router-ability label).

The signal routers learn nothing from training (they read the small model); like every two-model router they
refuse a table without exactly two actors. See docs/confidence-routers.md for the choices made where the
paper is silent.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from routerlab._spec import Constraint, Interval, Options
from routerlab.data.table import RoutingTable
from routerlab.errors import DataError, UsageError
from routerlab.features.base import Features
from routerlab.routers.base import register
from routerlab.routers.two_model import TwoModelRouter, small_good_enough_labels

FloatVector = npt.NDArray[np.float64]
FloatMatrix = npt.NDArray[np.float64]


# ----------------------------------------------------------------------------- reading the signals
def _first_bad_row(bad: npt.ArrayLike) -> int:
    """The index of the first True of a per-row mask (for error messages)."""
    return int(np.flatnonzero(np.asarray(bad))[0])


def option_logits(features: Features, router: str) -> tuple[FloatMatrix, npt.NDArray[np.bool_]]:
    """The small model's option-letter logits as float64 (n, K) and the mask of each question's options (not
    NaN). A row without any option logit, or an infinite logit, is a DataError naming the query."""
    logits = np.asarray(features.signal("option_logits", router), dtype=np.float64)
    if logits.ndim != 2:
        raise DataError(f"option_logits has shape {logits.shape}, expected (queries, options)",
                        field="option_logits")
    present = ~np.isnan(logits)
    if np.isinf(logits).any():
        row = _first_bad_row(np.isinf(logits).any(axis=1))
        raise DataError(f"query {features.queries.ids[row]!r} has an infinite option logit",
                        row=row + 1, field="option_logits")
    empty = ~present.any(axis=1)
    if empty.any():
        row = _first_bad_row(empty)
        raise DataError(f"query {features.queries.ids[row]!r} has no option logits (all NaN); "
                        f"{int(empty.sum())} such queries", row=row + 1, field="option_logits")
    return logits, present


def option_log_probabilities(logits: FloatMatrix, present: npt.NDArray[np.bool_]) -> FloatMatrix:
    """Log-softmax of each row over its question's options only; -inf outside them (numerically stable)."""
    masked = np.where(present, logits, -np.inf)
    top = masked.max(axis=1, keepdims=True)
    shifted = masked - top
    log_z = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return np.asarray(shifted - log_z, dtype=np.float64)


def option_entropy(logits: FloatMatrix, present: npt.NDArray[np.bool_]) -> FloatVector:
    """Shannon entropy (nats) of the softmax over each question's options."""
    logp = option_log_probabilities(logits, present)
    p = np.exp(logp)  # 0 outside the options
    return np.asarray(-np.where(present, p * np.where(present, logp, 0.0), 0.0).sum(axis=1), dtype=np.float64)


LONE_LOGIT_MARGIN = 1e6
"""The logit margin of a one-option question: larger than any real logit gap, finite for the metrics."""


def _top_two(values: FloatMatrix, present: npt.NDArray[np.bool_]) -> tuple[FloatVector, FloatVector]:
    """The largest and second-largest value of each row among its options (the second is -inf for a
    one-option row)."""
    masked = np.where(present, values, -np.inf)
    if masked.shape[1] < 2:
        return masked[:, 0], np.full(masked.shape[0], -np.inf)
    part = np.partition(masked, masked.shape[1] - 2, axis=1)
    return part[:, -1], part[:, -2]


def _signal_vector(features: Features, name: str, router: str) -> FloatVector:
    """A per-query scalar signal as float64 (n,); a NaN or infinite value is a DataError naming the query."""
    values = np.asarray(features.signal(name, router), dtype=np.float64)
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1:
        raise DataError(f"{name} has shape {values.shape}, expected (queries,)", field=name)
    bad = ~np.isfinite(values)
    if bad.any():
        row = _first_bad_row(bad)
        raise DataError(f"query {features.queries.ids[row]!r} has no finite {name} ({values[row]}); "
                        f"{int(bad.sum())} such queries", row=row + 1, field=name)
    return values


def sample_codes(features: Features, router: str) -> npt.NDArray[np.int64]:
    """The k sampled answers per query as integer cluster codes (n, k); -1 = no answer. Non-integral codes or
    codes below -1 are a DataError naming the query."""
    raw = np.asarray(features.signal("samples", router))
    if raw.ndim != 2:
        raise DataError(f"samples has shape {raw.shape}, expected (queries, k)", field="samples")
    if raw.shape[1] == 0:
        raise DataError("samples holds no sampled answers (k = 0): extract with --samples K, K >= 1",
                        field="samples")
    if raw.dtype.kind not in "iuf":
        raise DataError(f"samples must be integer answer-cluster codes, got dtype {raw.dtype}", field="samples")
    as_float = raw.astype(np.float64)
    bad = ~np.isfinite(as_float) | (as_float != np.round(as_float)) | (as_float < -1)
    if bad.any():
        row = _first_bad_row(bad.any(axis=1))
        raise DataError(f"query {features.queries.ids[row]!r} has a sample code that is not an integer >= -1",
                        row=row + 1, field="samples")
    return as_float.astype(np.int64)


def cluster_entropy(codes: npt.ArrayLike) -> tuple[FloatVector, npt.NDArray[np.bool_]]:
    """Entropy (nats) of the answer-cluster frequencies of each row of ``codes`` (n, k), ignoring -1 (no
    answer), and the mask of rows with at least one answer (their entropy is 0 here; the router decides).

    A sample j in a cluster of c_j of the row's N answers contributes -(1/N) log(c_j / N), so the sum over the
    row is -sum_clusters (c/N) log(c/N): no loop over clusters, whatever the codes are."""
    c = np.asarray(codes, dtype=np.int64)
    valid = c >= 0
    same = (c[:, :, None] == c[:, None, :]) & valid[:, None, :]  # (n, k, k): sample j's cluster members
    cluster_size = same.sum(axis=2)  # c_j for each valid sample j
    answered = valid.sum(axis=1)
    has_answer = answered > 0
    n_answers = np.maximum(answered, 1)[:, None]
    share = np.where(valid, cluster_size / n_answers, 1.0)
    entropy = -(np.where(valid, np.log(share), 0.0).sum(axis=1) / n_answers[:, 0])
    return np.asarray(entropy + 0.0, dtype=np.float64), np.asarray(has_answer)


# ----------------------------------------------------------------------------- the logit routers
@register
class MaxLogitRouter(TwoModelRouter):
    """MaxLogits (routerxbench-probedirichlet.txt sec. 5.1, SPEC 6): the small model's confidence in its own
    answer, the largest option-letter logit. The paper names the baseline MaxLogits and its released code
    scores sigmoid(max logit), a monotone map of the raw max logit, so the default is ``on=logit``;
    ``on=probability`` takes the maximum softmax probability over the question's options instead (Hendrycks
    and Gimpel's MSP), which is invariant to a shift of all logits."""

    name = "max-logit"
    reads_signals = ("option_logits",)
    summary = "MaxLogits: the small model's largest option-letter logit (or max softmax probability)"
    defaults: ClassVar[dict[str, Any]] = {"on": "logit"}
    constraints: ClassVar[dict[str, Constraint]] = {"on": Options({"logit", "probability"})}

    def _small_score(self, features: Features) -> FloatVector:
        logits, present = option_logits(features, self.name)
        if self.params["on"] == "probability":
            return np.asarray(np.exp(option_log_probabilities(logits, present).max(axis=1)), dtype=np.float64)
        return np.asarray(np.where(present, logits, -np.inf).max(axis=1), dtype=np.float64)


@register
class EntropyRouter(TwoModelRouter):
    """Entropy (routerxbench-probedirichlet.txt sec. 5.1, SPEC 6; Su et al. 2025): minus the Shannon entropy
    (nats) of the softmax over the question's options; a peaked distribution keeps the query on the small
    model. ``normalize=true`` divides by log K (K = the question's options; 0 for one option), so questions
    with different option counts share one scale (the released code normalises by log of the logit count)."""

    name = "entropy"
    reads_signals = ("option_logits",)
    summary = "Entropy: minus the entropy of the small model's softmax over the options"
    defaults: ClassVar[dict[str, Any]] = {"normalize": False}
    constraints: ClassVar[dict[str, Constraint]] = {"normalize": Options({True, False})}

    def _small_score(self, features: Features) -> FloatVector:
        logits, present = option_logits(features, self.name)
        entropy = option_entropy(logits, present)
        if self.params["normalize"]:
            log_k = np.log(present.sum(axis=1))
            entropy = np.divide(entropy, log_k, out=np.zeros_like(entropy), where=log_k > 0)
        return np.asarray(-entropy + 0.0, dtype=np.float64)


@register
class MarginRouter(TwoModelRouter):
    """ConfidenceMargin (routerxbench-probedirichlet.txt sec. 5.1, SPEC 6; Ramirez et al. 2024): the top-1
    minus the top-2 softmax probability over the question's options (default ``on=probability``, the paper's
    name and Ramirez et al.'s normalised margin). ``on=logit`` takes the top-1 minus top-2 logit, the log-ratio
    of the two probabilities (the released code's "logits margin"). A question with one option (MMLU-Pro has a
    few) leaves nothing to doubt: its margin is 1 (probability) or ``LONE_LOGIT_MARGIN`` (logit), above any
    real margin, so it stays on the small model."""

    name = "margin"
    reads_signals = ("option_logits",)
    summary = "ConfidenceMargin: top-1 minus top-2 option probability of the small model"
    defaults: ClassVar[dict[str, Any]] = {"on": "probability"}
    constraints: ClassVar[dict[str, Constraint]] = {"on": Options({"logit", "probability"})}

    def _small_score(self, features: Features) -> FloatVector:
        logits, present = option_logits(features, self.name)
        values = (np.exp(option_log_probabilities(logits, present)) if self.params["on"] == "probability"
                  else logits)
        first, second = _top_two(values, present)
        lone = present.sum(axis=1) < 2  # one option: nothing to doubt, the most confident of any query
        margin = np.where(lone, 0.0, first - np.where(lone, 0.0, second))
        if lone.any():
            margin[lone] = 1.0 if self.params["on"] == "probability" else LONE_LOGIT_MARGIN
        return np.asarray(margin, dtype=np.float64)


# ----------------------------------------------------------------------------- verbal and consistency
@register
class SelfAskRouter(TwoModelRouter):
    """SelfAsk (routerxbench-probedirichlet.txt sec. 5.1, SPEC 6; P(True), Kadavath et al. 2022): after its own
    answer the small model is asked whether that answer is correct; the score is its logit(Yes) - logit(No),
    passed through as it is."""

    name = "self-ask"
    reads_signals = ("self_ask",)
    summary = "SelfAsk: the small model's logit(Yes) - logit(No) on 'is your answer correct?'"

    def _small_score(self, features: Features) -> FloatVector:
        return _signal_vector(features, "self_ask", self.name)


@register
class SemanticEntropyRouter(TwoModelRouter):
    """SemanticEntropy (routerxbench-probedirichlet.txt sec. 5.1, SPEC 6; Kuhn et al. 2023, discrete variant):
    minus the entropy of the answer-cluster frequencies of the k sampled answers (codes; -1 = no answer,
    ignored). In multiple choice a cluster is an option letter. A query none of whose samples gave an answer
    gets entropy log k (k = samples per query), the largest any query can have, so it is escalated first: the
    rule depends on the query alone, never on the other queries scored with it."""

    name = "semantic-entropy"
    reads_signals = ("samples",)
    summary = "SemanticEntropy: minus the entropy of the clusters of the small model's sampled answers"

    def _small_score(self, features: Features) -> FloatVector:
        codes = sample_codes(features, self.name)
        entropy, answered = cluster_entropy(codes)
        entropy = np.where(answered, entropy, np.log(codes.shape[1]))
        return np.asarray(-entropy + 0.0, dtype=np.float64)


# ----------------------------------------------------------------------------- embedding-based
@register
class EmbeddingMLPRouter(TwoModelRouter):
    """EmbeddingMLP (routerxbench-probedirichlet.txt sec. 5.1, SPEC 6; Feng et al. 2025): the zoo's query
    vectors (``features.X``, whichever encoder the run uses) and a one-hidden-layer ReLU classifier
    (scikit-learn's MLPClassifier, Adam, no early stopping, random_state = the router seed) trained on the
    router-ability label "the small model is good enough"; the score is its logit of that label. A training set
    with one label only is a UsageError (nothing to learn; a constant score would pass for a router)."""

    name = "embedding-mlp"
    summary = "EmbeddingMLP: query-encoder vectors + one-hidden-layer MLP on 'small is good enough'"
    defaults: ClassVar[dict[str, Any]] = {"hidden": 64, "alpha": 1e-4, "max_iter": 200}
    constraints: ClassVar[dict[str, Constraint]] = {
        "hidden": Interval(int, 1, 65536),
        "alpha": Interval(float, 0, None),
        "max_iter": Interval(int, 1, None),
    }

    _weights: list[npt.NDArray[np.float64]]
    _biases: list[npt.NDArray[np.float64]]
    _dim: int

    def _check_table(self, train: RoutingTable) -> None:
        super()._check_table(train)
        labels = small_good_enough_labels(train)
        good = int(labels.sum())
        if good in (0, labels.size):
            which = "good enough" if good else "not good enough"
            raise UsageError(f"router {self.name!r} learns 'the small model is good enough' but the small model "
                             f"is {which} on all {labels.size} training queries: there is nothing to learn")

    def _fit(self, train: RoutingTable, features: Features) -> None:
        from sklearn.exceptions import ConvergenceWarning  # imported here: sklearn is slow to import
        from sklearn.neural_network import MLPClassifier

        labels = small_good_enough_labels(train)
        model = MLPClassifier(hidden_layer_sizes=(int(self.params["hidden"]),), activation="relu",
                              alpha=float(self.params["alpha"]), max_iter=int(self.params["max_iter"]),
                              early_stopping=False, random_state=self.seed)
        with warnings.catch_warnings():  # max_iter is the training length asked for, not a failure
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(features.X, labels.astype(np.int64))
        # classes_ is [0, 1]: the single output unit is the logit of label 1 (good enough)
        self._weights = [np.asarray(w, dtype=np.float64) for w in model.coefs_]
        self._biases = [np.asarray(b, dtype=np.float64) for b in model.intercepts_]
        self._dim = int(features.X.shape[1])
        self.n_iter_ = int(model.n_iter_)

    def _small_score(self, features: Features) -> FloatVector:
        if features.X.shape[1] != self._dim:
            raise UsageError(f"router {self.name!r} was trained on {self._dim}-dimensional query vectors, asked "
                             f"to score {features.X.shape[1]}-dimensional ones (another encoder?)")
        hidden = np.maximum(features.X.astype(np.float64) @ self._weights[0] + self._biases[0], 0.0)
        return np.asarray((hidden @ self._weights[1] + self._biases[1])[:, 0], dtype=np.float64)
