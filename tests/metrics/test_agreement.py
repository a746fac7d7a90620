"""Agreement measures: small cases computed by hand, sklearn's Cohen's kappa, the classic worked examples (Fleiss
1971 as on Wikipedia: 0.210; Krippendorff's reliability data with missing values: nominal 0.743, ordinal 0.815,
interval 0.849), degenerate data (NaN with a reason, never a crash) and the bootstrap (a replicate is the measure
of its resample; no interval below 30 items)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from routerlab.metrics.agreement import (
    _alpha_of,
    _coincidence_features,
    _fleiss_features,
    _fleiss_of,
    _kappa_of,
    _pair_features,
    _prf_features,
    _prf_of,
    _resample_counts,
    category_counts,
    cohen_kappa,
    cohen_kappa_ci,
    fleiss_kappa,
    fleiss_kappa_ci,
    krippendorff_alpha,
    krippendorff_alpha_ci,
    precision_recall_f1,
    precision_recall_f1_ci,
)

NA = math.nan
# Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 observers x 12 units, with missing values
KRIPPENDORFF = np.array([
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NA, NA, NA],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NA, 3],
    [NA, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NA],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NA],
]).T
# Fleiss (1971) as Wikipedia gives it: 10 subjects, 14 raters, 5 categories (counts per subject)
FLEISS = np.array([[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
                   [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]])


def test_cohen_by_hand_and_against_sklearn() -> None:
    # p_o = 3/4; shares of 1: 1/2 and 1/4 -> p_e = 1/2 * 1/4 + 1/2 * 3/4 = 1/2 -> kappa = (3/4 - 1/2) / (1/2)
    assert cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0]) == pytest.approx(0.5)
    assert cohen_kappa([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0)
    rng = np.random.default_rng(3)
    for _ in range(5):
        a = rng.integers(0, 3, 80)
        b = np.where(rng.random(80) < 0.5, a, rng.integers(0, 4, 80))
        assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b))


def test_precision_recall_f1_by_hand() -> None:
    # tp 2, fp 1, fn 1, tn 1
    got = precision_recall_f1([1, 1, 1, 0, 0], [1, 1, 0, 1, 0])
    assert got == pytest.approx({"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "accuracy": 3 / 5})
    got = precision_recall_f1([1, 0, 0, 0], [1, 1, 1, 0])
    assert got == pytest.approx({"precision": 1.0, "recall": 1 / 3, "f1": 0.5, "accuracy": 0.5})
    with pytest.raises(ValueError, match="must be 0 or 1"):
        precision_recall_f1([2, 0], [1, 0])


def test_fleiss_worked_example_and_by_hand() -> None:
    assert fleiss_kappa(FLEISS) == pytest.approx(0.20993, abs=5e-6)
    assert fleiss_kappa([[2, 0], [0, 2]]) == pytest.approx(1.0)
    # P_i = 0 for both items (split 1-1), p = (1/2, 1/2), p_e = 1/2 -> (0 - 1/2) / (1/2)
    assert fleiss_kappa([[1, 1], [1, 1]]) == pytest.approx(-1.0)
    ratings = [[0, 0, 1], [1, 1, 1], [0, 1, 0]]
    assert category_counts(ratings).tolist() == [[2, 1], [0, 3], [2, 1]]
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([[2, 0], [1, 0]])


def test_krippendorff_worked_example_with_missing_values() -> None:
    assert krippendorff_alpha(KRIPPENDORFF, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(KRIPPENDORFF, "ordinal") == pytest.approx(0.815, abs=5e-4)
    assert krippendorff_alpha(KRIPPENDORFF, "interval") == pytest.approx(0.849, abs=5e-4)


def test_krippendorff_by_hand() -> None:
    # units (1,1), (2,2), (1,2): o_11 = 2, o_22 = 2, o_12 = o_21 = 1; n_1 = n_2 = 3, n = 6
    # alpha = 1 - (n - 1) * (o_12 + o_21) / (2 n_1 n_2) = 1 - 5 * 2 / 18 = 4/9
    data = np.array([[1, 1], [2, 2], [1, 2]], dtype=float)
    assert krippendorff_alpha(data) == pytest.approx(4 / 9)
    # a unit with one rating is not pairable and changes nothing
    assert krippendorff_alpha(np.vstack([data, [[2, NA]]])) == pytest.approx(4 / 9)
    # interval on two values is nominal scaled: the same here
    assert krippendorff_alpha(data, "interval") == pytest.approx(4 / 9)
    with pytest.raises(ValueError, match="level must be"):
        krippendorff_alpha(data, "ratio")  # type: ignore[arg-type]


def test_degenerate_data_gives_nan_with_a_reason() -> None:
    assert math.isnan(cohen_kappa([1, 1, 1], [1, 1, 1]))
    assert cohen_kappa([1, 1, 1, 1], [1, 0, 1, 0]) == 0.0  # one rater constant: no better than chance
    est = cohen_kappa_ci([1] * 40, [1] * 40)
    assert math.isnan(est.value) and math.isnan(est.lo) and "one and the same label" in est.note
    assert math.isnan(cohen_kappa([], []))
    prf = precision_recall_f1_ci([0] * 40, [1, 0] * 20)
    assert math.isnan(prf["precision"].value) and "no item is predicted positive" in prf["precision"].note
    assert prf["recall"].value == 0.0 and prf["accuracy"].value == 0.5
    assert math.isnan(fleiss_kappa([[3, 0], [3, 0]]))
    assert "one category" in fleiss_kappa_ci([[3, 0]] * 40).note
    assert math.isnan(krippendorff_alpha(np.ones((5, 2))))
    assert "single value" in krippendorff_alpha_ci(np.ones((40, 2))).note
    lonely = np.array([[1, NA], [NA, 2]] * 20, dtype=float)
    assert "no item has two ratings" in krippendorff_alpha_ci(lonely).note
    assert math.isnan(krippendorff_alpha(np.full((3, 2), NA)))
    with pytest.raises(ValueError, match="NaN"):
        cohen_kappa([1, NA], [1, 0])


def test_a_bootstrap_replicate_is_the_measure_of_its_resample() -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(0, 2, 50).astype(float)
    b = np.where(rng.random(50) < 0.7, a, 1 - a)
    c = np.where(rng.random(50) < 0.6, a, 1 - a)
    idx = rng.integers(0, 50, size=(3, 50))
    counts = _resample_counts(idx, 50)
    feats, k = _pair_features(a, b)
    prf = _prf_features(a, b)
    three = np.stack([a, b, c], axis=1)
    fl, m = _fleiss_features(category_counts(three))
    three[::7, 1] = NA  # missing ratings
    co, values = _coincidence_features(three)
    for row, ix in zip(counts, idx, strict=True):
        assert _kappa_of(k)(row[None] @ feats)[0] == pytest.approx(cohen_kappa(a[ix], b[ix]))
        assert _prf_of(2)(row[None] @ prf)[0] == pytest.approx(precision_recall_f1(a[ix], b[ix])["f1"])
        assert _fleiss_of(m)(row[None] @ fl)[0] == pytest.approx(
            fleiss_kappa(category_counts(np.stack([a, b, c], axis=1)[ix])))
        assert _alpha_of(values, "ordinal")(row[None] @ co)[0] == pytest.approx(
            krippendorff_alpha(three[ix], "ordinal"))


def test_intervals_cover_the_value_are_seeded_and_need_30_items() -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2, 120)
    b = np.where(rng.random(120) < 0.8, a, 1 - a)
    est = cohen_kappa_ci(a, b, n_boot=500, seed=4)
    assert est.lo < est.value < est.hi and est.n == 120 and est.note == ""
    assert cohen_kappa_ci(a, b, n_boot=500, seed=4) == est
    assert cohen_kappa_ci(a, b, n_boot=500, seed=5) != est
    small = cohen_kappa_ci(a[:29], b[:29])
    assert math.isfinite(small.value) and math.isnan(small.lo) and small.note == "n=29 < 30: no interval"
    alpha = krippendorff_alpha_ci(np.stack([a, b], axis=1).astype(float), n_boot=500)
    assert alpha.lo < alpha.value < alpha.hi
    fl = fleiss_kappa_ci(category_counts(np.stack([a, b], axis=1)), n_boot=500)
    assert fl.lo < fl.value < fl.hi
