"""TF-IDF: fitted on training texts only, deterministic, unit-norm vectors of the promised shape."""

from __future__ import annotations

import numpy as np
import pytest

from routerlab.data.splits import given_split
from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.features import encode, get_encoder
from routerlab.features.tfidf import TfidfEncoder
from tests.features.conftest import TEST_TEXTS, TRAIN_TEXTS, make_table

N_TRAIN = len(TRAIN_TEXTS)


def test_a_word_only_in_test_does_not_change_train_vectors(split_table: RoutingTable) -> None:
    before = encode(split_table, "tfidf", cache=False).X
    texts = [*TRAIN_TEXTS, TEST_TEXTS[0] + " zyzzyva quokka", *TEST_TEXTS[1:]]
    changed = make_table(texts, split=split_table.queries.split.tolist())
    after = encode(changed, "tfidf", cache=False).X
    np.testing.assert_array_equal(after[:N_TRAIN], before[:N_TRAIN])
    # the unseen words are simply ignored, so the test vector does not move either
    np.testing.assert_array_equal(after[N_TRAIN], before[N_TRAIN])
    # ...whereas fitting on every text (test included) would have moved the training vectors
    leaky = encode(changed, "tfidf", cache=False, fit_on=texts).X
    assert leaky.shape != before.shape or not np.allclose(leaky[:N_TRAIN], before[:N_TRAIN])


def test_fit_then_transform_is_deterministic() -> None:
    a = get_encoder("tfidf:dim=4").fit(TRAIN_TEXTS)
    b = get_encoder("tfidf:dim=4").fit(TRAIN_TEXTS)
    np.testing.assert_array_equal(a.transform(TEST_TEXTS), b.transform(TEST_TEXTS))
    np.testing.assert_array_equal(a.transform(TEST_TEXTS), a.transform(TEST_TEXTS))
    assert a.fit_hash == b.fit_hash


def test_shapes_and_unit_norm_on_demo_texts() -> None:
    table = demo(n_queries=300)
    X = encode(table, "tfidf:dim=64", cache=False).X
    assert X.shape == (300, 64) and X.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, atol=1e-5)


def test_dim_is_capped_by_the_vocabulary_and_the_fit_set() -> None:
    small_vocab = TfidfEncoder().fit(["red", "green", "blue", "red", "green", "blue"])  # 3 terms, 6 texts
    X = small_vocab.transform(["red", "nothing known"])
    assert small_vocab.dim == 3 and X.shape == (2, 3)
    assert np.linalg.norm(X[0]) == pytest.approx(1.0, abs=1e-6)
    assert not X[1].any()  # no known word: the zero vector, not NaN
    few_texts = TfidfEncoder().fit(["red apple", "green apple"])  # 5 terms but rank 2
    assert few_texts.dim == 2 and few_texts.transform(["apple"]).shape == (1, 2)


def test_fit_on_forms_agree(split_table: RoutingTable) -> None:
    split = given_split(split_table)
    train_rows = np.arange(N_TRAIN)
    mask = np.arange(split_table.n_queries) < N_TRAIN
    reference = encode(split_table, "tfidf", cache=False).X  # default: the 'train' split rows
    for fit_on in (split, train_rows, mask, split_table.select_split("train"), TRAIN_TEXTS):
        np.testing.assert_array_equal(encode(split_table, "tfidf", cache=False, fit_on=fit_on).X, reference)


def test_default_fit_without_a_split_column_warns() -> None:
    with pytest.warns(UserWarning, match="fitted on all"):
        encode(make_table(TRAIN_TEXTS), "tfidf", cache=False)


def test_a_table_with_splits_but_no_train_rows_is_refused() -> None:
    with pytest.raises(UsageError, match="no 'train' rows"):
        encode(make_table(TEST_TEXTS, split=["test"] * 3), "tfidf", cache=False)


def test_options_and_misuse() -> None:
    assert get_encoder("tfidf:dim=32").options["dim"] == 32
    assert get_encoder("tfidf:dim=32").spec == "tfidf:dim=32"
    with pytest.raises(UsageError, match="no option"):
        get_encoder("tfidf:dims=3")
    with pytest.raises(UsageError, match="positive integer"):
        get_encoder("tfidf:dim=0")
    with pytest.raises(UsageError, match="before fit"):
        TfidfEncoder().transform(["a"])
    with pytest.raises(UsageError, match="no words"):
        TfidfEncoder().fit(["", "  ", "!!"])
    fitted = TfidfEncoder().fit(TRAIN_TEXTS)
    with pytest.raises(UsageError, match="already fitted"):
        encode(make_table(TEST_TEXTS), fitted, fit_on=TEST_TEXTS, cache=False)
