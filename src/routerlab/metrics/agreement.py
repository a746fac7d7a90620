"""Agreement between raters (a judge and reference labels, or several judges): Cohen's kappa, precision / recall /
F1 / accuracy, Fleiss' kappa and Krippendorff's alpha, each with a bootstrap interval over items.

Every measure here is a function of sums over items of per-item features (a one-hot of the pair of labels, the
category counts of an item, an item's coincidences), so a bootstrap replicate is a weighted sum: the replicate's
count of each item times the features (:func:`_resample_counts`), vectorised over replicates with
:func:`routerlab.metrics.bootstrap.bootstrap_statistic` (percentile interval, none below ``MIN_QUERIES`` items).

Degenerate data never raise: a value that is undefined (both raters give one and the same class only, so chance
agreement is 1; no item rated twice; no predicted positive) is NaN, and :class:`Agreement` says why in ``note``.
Labels are numbers; NaN marks a missing rating (Krippendorff's alpha takes them; the others refuse them).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from routerlab.metrics._arrays import FloatArray, IntArray
from routerlab.metrics.bootstrap import MIN_QUERIES, bootstrap_statistic

__all__ = [
    "Agreement",
    "category_counts",
    "cohen_kappa",
    "cohen_kappa_ci",
    "fleiss_kappa",
    "fleiss_kappa_ci",
    "krippendorff_alpha",
    "krippendorff_alpha_ci",
    "precision_recall_f1",
    "precision_recall_f1_ci",
]

Level = Literal["nominal", "ordinal", "interval"]


class Agreement(NamedTuple):
    """One agreement figure over ``n`` items with its percentile bootstrap interval (NaN below
    :data:`~routerlab.metrics.bootstrap.MIN_QUERIES` items) and, where the value or interval is missing, why."""

    value: float
    lo: float
    hi: float
    n: int
    note: str = ""


# --------------------------------------------------------------------------------------------------- helpers
def _labels(x: npt.ArrayLike, what: str) -> FloatArray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{what} must be 1-d (one label per item), got shape {a.shape}")
    if np.isnan(a).any():
        raise ValueError(f"{what} contain NaN: drop the unrated items first")
    return a


def _pair(a: npt.ArrayLike, b: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    x, y = _labels(a, "labels of rater 1"), _labels(b, "labels of rater 2")
    if x.shape != y.shape:
        raise ValueError(f"the two raters label different numbers of items: {x.size} and {y.size}")
    return x, y


def _resample_counts(idx: IntArray, n: int) -> FloatArray:
    """(rows, n) index matrix -> (rows, n) counts of each item in each replicate."""
    rows = idx.shape[0]
    offsets = (np.arange(rows, dtype=np.intp) * n)[:, None]
    return np.bincount((idx + offsets).ravel(), minlength=rows * n).reshape(rows, n).astype(np.float64)


def _div(num: FloatArray, den: FloatArray) -> FloatArray:
    """num / den, NaN where den is 0 (an undefined ratio), without a warning."""
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def _estimate(features: FloatArray, stat: Callable[[FloatArray], FloatArray], n_boot: int, alpha: float,
              seed: int, note: Callable[[FloatArray], str]) -> Agreement:
    """The statistic of the summed features and its bootstrap interval over items (rows of ``features``)."""
    n = features.shape[0]
    if n == 0:
        return Agreement(math.nan, math.nan, math.nan, 0, "no items")
    total = features.sum(axis=0, keepdims=True)
    value = float(stat(total)[0])
    why = note(total[0]) if math.isnan(value) else ""
    if n < MIN_QUERIES:
        why = "; ".join(s for s in (why, f"n={n} < {MIN_QUERIES}: no interval") if s)
        return Agreement(value, math.nan, math.nan, n, why)
    if math.isnan(value):
        return Agreement(value, math.nan, math.nan, n, why)
    est = bootstrap_statistic(lambda idx: stat(_resample_counts(idx, n) @ features), n, n_boot, alpha, seed)
    return Agreement(value, est.lo, est.hi, n, why)


# ------------------------------------------------------------------------------------------ Cohen's kappa
def _pair_features(x: FloatArray, y: FloatArray) -> tuple[FloatArray, int]:
    """One-hot of each item's (label 1, label 2) pair over the categories both raters used: (n, c*c)."""
    cats, codes = np.unique(np.concatenate([x, y]), return_inverse=True)
    c = max(len(cats), 1)
    pair = codes[: x.size] * c + codes[x.size:]
    return np.eye(c * c)[pair], c


def _kappa_of(c: int) -> Callable[[FloatArray], FloatArray]:
    def stat(sums: FloatArray) -> FloatArray:
        conf = sums.reshape(-1, c, c)
        n = conf.sum(axis=(1, 2))
        po = _div(np.trace(conf, axis1=1, axis2=2), n)
        pe = _div((conf.sum(axis=2) * conf.sum(axis=1)).sum(axis=1), n * n)
        return _div(po - pe, 1.0 - pe)
    return stat


def cohen_kappa(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Cohen's kappa of two raters' labels of the same items: (p_o - p_e) / (1 - p_e), p_o the share of
    agreement and p_e the agreement expected from each rater's own label shares. NaN when p_e is 1 (both raters
    give one and the same label to every item: chance explains all agreement)."""
    x, y = _pair(a, b)
    if not x.size:
        return math.nan
    feats, c = _pair_features(x, y)
    return float(_kappa_of(c)(feats.sum(axis=0, keepdims=True))[0])


def cohen_kappa_ci(a: npt.ArrayLike, b: npt.ArrayLike, n_boot: int = 1000, alpha: float = 0.05,
                   seed: int = 0) -> Agreement:
    """:func:`cohen_kappa` with its bootstrap interval over items."""
    x, y = _pair(a, b)
    if not x.size:
        return Agreement(math.nan, math.nan, math.nan, 0, "no items")
    feats, c = _pair_features(x, y)
    return _estimate(feats, _kappa_of(c), n_boot, alpha, seed,
                     lambda s: "both raters give one and the same label to every item: kappa is undefined")


# ----------------------------------------------------------------------------------- precision / recall / F1
PRF_NAMES = ("precision", "recall", "f1", "accuracy")


def _binary(x: FloatArray, what: str) -> FloatArray:
    bad = ~np.isin(x, (0.0, 1.0))
    if bad.any():
        raise ValueError(f"{what} must be 0 or 1, got {x[bad][0]!r}")
    return x


def _prf_features(pred: npt.ArrayLike, ref: npt.ArrayLike) -> FloatArray:
    p, r = _pair(pred, ref)
    p, r = _binary(p, "predicted labels"), _binary(r, "reference labels")
    return np.stack([p * r, p * (1 - r), (1 - p) * r, (1 - p) * (1 - r)], axis=1)  # tp, fp, fn, tn


def _prf_of(which: int) -> Callable[[FloatArray], FloatArray]:
    def stat(sums: FloatArray) -> FloatArray:
        tp, fp, fn, tn = sums[:, 0], sums[:, 1], sums[:, 2], sums[:, 3]
        values = (_div(tp, tp + fp), _div(tp, tp + fn), _div(2 * tp, 2 * tp + fp + fn),
                  _div(tp + tn, tp + fp + fn + tn))
        return values[which]
    return stat


_PRF_NOTES = ("no item is predicted positive: precision is undefined",
              "no item is positive in the reference: recall is undefined",
              "no item is positive in either: F1 is undefined", "no items")


def precision_recall_f1(pred: npt.ArrayLike, ref: npt.ArrayLike) -> dict[str, float]:
    """Precision, recall, F1 and accuracy of 0/1 predictions against 0/1 reference labels (1 is the positive
    class); a ratio with a zero denominator is NaN."""
    sums = _prf_features(pred, ref).sum(axis=0, keepdims=True)
    return {name: float(_prf_of(i)(sums)[0]) for i, name in enumerate(PRF_NAMES)}


def precision_recall_f1_ci(pred: npt.ArrayLike, ref: npt.ArrayLike, n_boot: int = 1000, alpha: float = 0.05,
                           seed: int = 0) -> dict[str, Agreement]:
    """:func:`precision_recall_f1`, each with its bootstrap interval over items (the same resamples)."""
    feats = _prf_features(pred, ref)
    return {name: _estimate(feats, _prf_of(i), n_boot, alpha, seed, _note(_PRF_NOTES[i]))
            for i, name in enumerate(PRF_NAMES)}


def _note(text: str) -> Callable[[FloatArray], str]:
    return lambda sums: text


# ------------------------------------------------------------------------------------------ Fleiss' kappa
def category_counts(ratings: npt.ArrayLike) -> FloatArray:
    """(n items, k raters) labels -> (n, c) counts of each category per item (categories sorted; NaN, a missing
    rating, counts nowhere)."""
    r = np.asarray(ratings, dtype=np.float64)
    if r.ndim != 2:
        raise ValueError(f"ratings must be (items, raters), got shape {r.shape}")
    cats = np.unique(r[~np.isnan(r)])
    return np.stack([(r == c).sum(axis=1) for c in cats], axis=1).astype(np.float64) if cats.size else \
        np.zeros((r.shape[0], 0))


def _fleiss_features(counts: npt.ArrayLike) -> tuple[FloatArray, int]:
    n_ij = np.asarray(counts, dtype=np.float64)
    if n_ij.ndim != 2 or (n_ij < 0).any() or np.isnan(n_ij).any():
        raise ValueError("Fleiss' kappa takes an (items, categories) table of counts >= 0")
    per_item = n_ij.sum(axis=1)
    m = int(per_item[0]) if per_item.size else 0
    if per_item.size and (not np.all(per_item == m) or m < 2):
        raise ValueError("Fleiss' kappa needs the same number (>= 2) of ratings of every item; got "
                         f"{int(per_item.min())} to {int(per_item.max())}")
    return np.concatenate([n_ij, (n_ij ** 2).sum(axis=1, keepdims=True)], axis=1), m


def _fleiss_of(m: int) -> Callable[[FloatArray], FloatArray]:
    def stat(sums: FloatArray) -> FloatArray:
        cat, sq = sums[:, :-1], sums[:, -1]
        items = cat.sum(axis=1) / m
        p_j = _div(cat, (items * m)[:, None])
        p_bar = _div(sq - items * m, items * m * (m - 1))
        p_e = (p_j ** 2).sum(axis=1)
        return _div(p_bar - p_e, 1.0 - p_e)
    return stat


def fleiss_kappa(counts: npt.ArrayLike) -> float:
    """Fleiss' kappa of an (items, categories) table of how many raters put each item in each category, every
    item rated by the same number m >= 2 of raters (:func:`category_counts` builds it from an (items, raters)
    matrix). NaN when every rating falls in one category."""
    feats, m = _fleiss_features(counts)
    if not feats.shape[0]:
        return math.nan
    return float(_fleiss_of(m)(feats.sum(axis=0, keepdims=True))[0])


def fleiss_kappa_ci(counts: npt.ArrayLike, n_boot: int = 1000, alpha: float = 0.05, seed: int = 0) -> Agreement:
    """:func:`fleiss_kappa` with its bootstrap interval over items."""
    feats, m = _fleiss_features(counts)
    return _estimate(feats, _fleiss_of(m), n_boot, alpha, seed,
                     lambda s: "every rating falls in one category: kappa is undefined")


# --------------------------------------------------------------------------------------- Krippendorff's alpha
def _coincidence_features(ratings: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Per item (unit), its contribution to the coincidence matrix, flattened: (n, c*c), and the sorted values.
    A unit with m >= 2 ratings adds, for every ordered pair of its ratings from different raters, 1/(m - 1);
    a unit with fewer adds nothing (it is not pairable)."""
    r = np.asarray(ratings, dtype=np.float64)
    if r.ndim != 2:
        raise ValueError(f"ratings must be (items, raters), got shape {r.shape}")
    values = np.unique(r[~np.isnan(r)])
    c = values.size
    counts = np.stack([(r == v).sum(axis=1) for v in values], axis=1).astype(np.float64) if c else \
        np.zeros((r.shape[0], 0))
    m = counts.sum(axis=1)
    pairs = counts[:, :, None] * counts[:, None, :] - counts[:, :, None] * np.eye(c)[None]  # n_c n_k - [c=k] n_c
    weight = _div(np.ones_like(m), m - 1)
    weight[m < 2] = 0.0
    return (pairs * weight[:, None, None]).reshape(r.shape[0], c * c), values


def _alpha_of(values: FloatArray, level: Level) -> Callable[[FloatArray], FloatArray]:
    c = values.size

    def stat(sums: FloatArray) -> FloatArray:
        o = sums.reshape(-1, c, c)
        n_c = o.sum(axis=2)
        n = n_c.sum(axis=1)
        if level == "nominal":
            delta = np.broadcast_to(1.0 - np.eye(c), o.shape)
        elif level == "interval":
            delta = np.broadcast_to((values[:, None] - values[None, :]) ** 2, o.shape)
        else:  # ordinal: the squared count of values between c and k, the ends counted by half
            cum = np.cumsum(n_c, axis=1)
            lo_i, hi_i = np.minimum.outer(np.arange(c), np.arange(c)), np.maximum.outer(np.arange(c), np.arange(c))
            between = cum[:, hi_i] - cum[:, lo_i] + n_c[:, lo_i]
            delta = (between - (n_c[:, :, None] + n_c[:, None, :]) / 2.0) ** 2
        observed = (o * delta).sum(axis=(1, 2))
        expected = _div((n_c[:, :, None] * n_c[:, None, :] * delta).sum(axis=(1, 2)), n - 1)
        return 1.0 - _div(observed, expected)

    return stat


def _check_level(level: str) -> Level:
    if level not in ("nominal", "ordinal", "interval"):
        raise ValueError(f"level must be nominal, ordinal or interval, got {level!r}")
    return level  # type: ignore[return-value]


def krippendorff_alpha(ratings: npt.ArrayLike, level: Level = "nominal") -> float:
    """Krippendorff's alpha of an (items, raters) matrix, NaN for a missing rating: 1 - D_o / D_e, the observed
    disagreement over the disagreement expected from the pooled values, with the ``nominal`` (different or not),
    ``ordinal`` (ranks) or ``interval`` (squared difference) metric. NaN when fewer than two pairable values or
    no disagreement is expected (a single value)."""
    feats, values = _coincidence_features(ratings)
    if not values.size:
        return math.nan
    return float(_alpha_of(values, _check_level(level))(feats.sum(axis=0, keepdims=True))[0])


def krippendorff_alpha_ci(ratings: npt.ArrayLike, level: Level = "nominal", n_boot: int = 1000,
                          alpha: float = 0.05, seed: int = 0) -> Agreement:
    """:func:`krippendorff_alpha` with its bootstrap interval over items (units)."""
    feats, values = _coincidence_features(ratings)
    if not values.size:
        return Agreement(math.nan, math.nan, math.nan, feats.shape[0], "no ratings")
    return _estimate(feats, _alpha_of(values, _check_level(level)), n_boot, alpha, seed, _alpha_note)


def _alpha_note(sums: FloatArray) -> str:
    if sums.sum() < 2:
        return "no item has two ratings: nothing to compare, alpha is undefined"
    return "a single value among the pairable ratings: no disagreement is expected, alpha is undefined"
