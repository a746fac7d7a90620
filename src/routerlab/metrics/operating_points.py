"""Operating points chosen on one set of queries and applied unchanged to another (issue 23's development part).

A two-model router ranks queries by s(q), "the small model will do"; the lowest are sent to the large model.
Reading a call rate off the *test* queries' own ranking (what a call-rate curve does) is a description, not a
decision: a deployed router must fix its threshold before it sees the traffic. :func:`threshold_for_rate` fixes
it on development queries and :func:`escalate` applies it to any others.

Ties: a router with few distinct scores (kNN votes, a rounded probability) puts whole blocks of queries on one
value, so a bare threshold could only reach the call rates between blocks. The threshold therefore carries
``tie_share``, the share of the queries *at* the threshold value that go to the large model, decided per query
by a seeded coin: a policy a deployed router can run, and one that reaches the target rate on the development
queries exactly (in expectation over the coin). SPEC is silent on this; RouteLLM calibrates a bare threshold
(its ``calibrate_threshold`` takes a quantile of scores on a calibration set), which is this rule with the coin
left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from routerlab.errors import UsageError
from routerlab.metrics._arrays import BoolArray, FloatArray


@dataclass(frozen=True)
class Threshold:
    """Send a query to the large model when ``s(q) < value``, and when ``s(q) == value`` with probability
    ``tie_share``. ``rate`` is the call rate it was fitted for, ``n_fit`` the number of queries it was fitted on."""

    value: float
    tie_share: float
    rate: float
    n_fit: int

    def to_dict(self) -> dict[str, float | int | None]:
        """JSON-ready: ``value`` as a number (``inf`` written as None, which means "every query")."""
        return {"threshold": self.value if math.isfinite(self.value) else None, "tie_share": self.tie_share,
                "target_rate": self.rate, "n_fit": self.n_fit}


def _scores(scores: npt.ArrayLike, what: str) -> FloatArray:
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1:
        raise UsageError(f"{what}: expected one score per query, got shape {s.shape}")
    bad = np.flatnonzero(~np.isfinite(s))
    if bad.size:
        raise UsageError(f"{what}: the router's s(q) is not a finite number for query {int(bad[0])} "
                         f"({bad.size} such queries)")
    return s


def threshold_for_rate(dev_scores: npt.ArrayLike, rate: float) -> Threshold:
    """The threshold that sends the share ``rate`` of ``dev_scores`` (one s(q) per development query) to the large
    model: the lowest ``rate * n`` scores, the last tied block in part (``tie_share``)."""
    if isinstance(rate, bool) or not 0.0 <= float(rate) <= 1.0:  # NaN fails too
        raise UsageError(f"the call rate must be in [0, 1], got {rate!r}")
    s = np.sort(_scores(dev_scores, "development queries"))
    n = s.size
    if n == 0:
        raise UsageError("no development queries to choose a threshold on")
    k = float(rate) * n  # how many queries the large model should get
    if k >= n:
        return Threshold(math.inf, 1.0, float(rate), n)
    value = float(s[math.floor(k)])  # the lowest score not wholly escalated
    below = int(np.searchsorted(s, value, side="left"))
    at = int(np.searchsorted(s, value, side="right")) - below
    share = min(1.0, max(0.0, (k - below) / at))
    return Threshold(value, share, float(rate), n)


def escalate(scores: npt.ArrayLike, threshold: Threshold, seed: int = 0) -> BoolArray:
    """Which queries ``threshold`` sends to the large model (True), the coin at tied scores seeded by ``seed``."""
    s = _scores(scores, "queries")
    below = s < threshold.value
    if threshold.tie_share <= 0.0:
        return np.asarray(below)
    tied = s == threshold.value
    coin = np.random.default_rng(seed).random(s.size) < threshold.tie_share
    return np.asarray(below | (tied & coin))


@dataclass(frozen=True)
class YoudenPoint:
    """The threshold that maximises Youden's J = TPR - FPR for "the large model is needed" on the queries it was
    fitted on: a query goes to the large model when ``s(q) < value`` (``-inf``: none, ``inf``: every one). ``j``,
    ``tpr``, ``fpr`` and ``call_rate`` are its values on those ``n_fit`` queries (NaN when they hold one label)."""

    value: float
    j: float
    tpr: float
    fpr: float
    call_rate: float
    n_fit: int

    def to_dict(self) -> dict[str, float | int | str | None]:
        """JSON-ready: a non-finite threshold written as None, ``sends`` saying which ("none", "all", "below")."""
        sends = "below" if math.isfinite(self.value) else "none" if self.value < 0 else "all"
        return {"threshold": self.value if math.isfinite(self.value) else None, "sends": sends,
                "j_fit": self.j, "tpr_fit": self.tpr, "fpr_fit": self.fpr, "call_rate_fit": self.call_rate,
                "n_fit": self.n_fit}


def _needed(large_needed: npt.ArrayLike, n: int) -> BoolArray:
    y = np.asarray(large_needed)
    if y.shape != (n,):
        raise UsageError(f"large_needed must have one label per query ({n}), got shape {y.shape}")
    return np.asarray(y.astype(bool))


def youden_j(escalated: npt.ArrayLike, large_needed: npt.ArrayLike) -> float:
    """Youden's J of routing decisions (True = sent to the large model) for the label "the large model is needed":
    TPR - FPR, the share of needing queries sent minus the share of the others sent; NaN with one label only."""
    sent = np.asarray(escalated, dtype=bool)
    y = _needed(large_needed, sent.size)
    pos, neg = int(y.sum()), int((~y).sum())
    if pos == 0 or neg == 0:
        return float("nan")
    return float(sent[y].sum() / pos - sent[~y].sum() / neg)


def routing_accuracy(escalated: npt.ArrayLike, large_needed: npt.ArrayLike) -> float:
    """The share of queries routed right: sent to the large model exactly when it is needed; NaN for no query."""
    sent = np.asarray(escalated, dtype=bool)
    y = _needed(large_needed, sent.size)
    return float((sent == y).mean()) if y.size else float("nan")


def youden_threshold(fit_scores: npt.ArrayLike, large_needed: npt.ArrayLike) -> YoudenPoint:
    """The threshold on s(q) that maximises Youden's J on the fit queries (development or training queries, never
    the test ones). Candidates: escalate none, escalate every query below each distinct score but the lowest (the
    threshold halfway between it and the next lower one, so it carries to new queries), escalate all. Among equal
    J the candidate with the lowest call rate wins (keep the small model when the data cannot tell)."""
    s = _scores(fit_scores, "fit queries")
    n = s.size
    if n == 0:
        raise UsageError("no queries to choose a Youden threshold on")
    y = _needed(large_needed, n)
    pos, neg = int(y.sum()), int((~y).sum())
    values = np.unique(s)
    cuts = np.concatenate([[-math.inf], (values[:-1] + values[1:]) / 2.0, [math.inf]])
    order = np.argsort(s, kind="stable")
    ends = np.searchsorted(s[order], values, side="right")  # queries below each cut: 0, ends[0], ..., n
    sent = np.concatenate([[0], ends])
    tp = np.concatenate([[0], np.cumsum(y[order])])[sent]
    fp = sent - tp
    if pos == 0 or neg == 0:
        return YoudenPoint(-math.inf, math.nan, math.nan, math.nan, 0.0, n)
    tpr, fpr = tp / pos, fp / neg
    j = tpr - fpr
    best = int(np.argmax(j))  # the first maximum: the lowest call rate
    return YoudenPoint(float(cuts[best]), float(j[best]), float(tpr[best]), float(fpr[best]), float(sent[best] / n),
                       n)


def youden_escalate(scores: npt.ArrayLike, point: YoudenPoint) -> BoolArray:
    """Which queries a Youden threshold sends to the large model (True): those with ``s(q) < point.value``."""
    return np.asarray(_scores(scores, "queries") < point.value)


PACE_BAND = 0.02
"""The pacing band: a paced threshold keeps the running call rate within ``rate +- (band + 1/(2t))`` after every
query t, so the realized rate over n queries is within ``band + 1/(2n)`` of the target (0.03 from 50 queries on)."""
PACE_SLACK = 0.5
"""The count's slack beyond ``band * t``: half a query, the least that lets one decision per query always keep the
count inside (the band's width ``2 (band t + slack)`` must be at least 1)."""


def paced_bound(band: float, n: int) -> float:
    """The most a paced threshold's realized call rate over ``n`` queries can differ from its target."""
    return band + PACE_SLACK / n


def paced_escalate(scores: npt.ArrayLike, threshold: Threshold, seed: int = 0, band: float = PACE_BAND
                   ) -> BoolArray:
    """:func:`escalate` with a rate controller, for queries in the order they arrive.

    A threshold fixed on development queries meets its call rate on new traffic only up to sampling noise (sd
    ``sqrt(p (1 - p) (1/n_dev + 1/n_new))``, and more when the traffic drifts: what RouteLLM's users report in its
    issue #36). Pacing bounds the gap: each query gets the threshold's own decision unless that would take the count
    of escalated queries so far, c_t, out of ``rate * t +- (band * t + 1/2)``; then the decision is the one that keeps
    it inside. Only the router's own past decisions are read (no outcome, no later query), so a deployed router can
    run it as it is; with ``band >= 1`` it is :func:`escalate`."""
    if isinstance(band, bool) or not float(band) >= 0.0:  # NaN fails too
        raise UsageError(f"the pacing band must be a number >= 0, got {band!r}")
    natural = escalate(scores, threshold, seed)
    out = np.empty_like(natural)
    rate, count = threshold.rate, 0
    for t, wanted in enumerate(natural.tolist(), start=1):
        slack = band * t + PACE_SLACK
        if count + wanted < rate * t - slack:
            wanted = True
        elif count + wanted > rate * t + slack:
            wanted = False
        out[t - 1] = wanted
        count += wanted
    return out


__all__ = ["PACE_BAND", "PACE_SLACK", "Threshold", "YoudenPoint", "escalate", "paced_bound", "paced_escalate",
           "routing_accuracy", "threshold_for_rate", "youden_escalate", "youden_j", "youden_threshold"]
