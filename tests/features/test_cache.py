"""The on-disk cache: per-text keys, no second encoding, and recovery from damaged files."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from routerlab.data.table import RoutingTable
from routerlab.features import CacheWarning, encode, encode_pair
from routerlab.features.cache import VectorCache, default_cache_dir
from routerlab.features.encoding import EncodeStats, FitCache, encode_with_stats
from routerlab.features.tfidf import TfidfEncoder
from tests.features.conftest import TEST_TEXTS, TRAIN_TEXTS, CountingEncoder, make_table


def _encode_clean(table: RoutingTable, enc: CountingEncoder, cache_dir: Path) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        return encode(table, enc, cache_dir=cache_dir).X


def test_second_run_reads_everything_from_the_cache(tmp_path: Path) -> None:
    table = make_table([*TRAIN_TEXTS, TRAIN_TEXTS[0]], ids=[f"q{i}" for i in range(len(TRAIN_TEXTS) + 1)])
    first = CountingEncoder()
    X1 = _encode_clean(table, first, tmp_path)
    assert first.n_encoded == len(TRAIN_TEXTS)  # the repeated text is encoded once
    np.testing.assert_array_equal(X1[0], X1[-1])
    second = CountingEncoder()
    X2 = _encode_clean(table, second, tmp_path)
    _, stats = encode_with_stats(table, CountingEncoder(), cache_dir=tmp_path)
    assert second.calls == [] and stats == EncodeStats(texts=len(TRAIN_TEXTS) + 1, unique=len(TRAIN_TEXTS), computed=0)
    np.testing.assert_array_equal(X1, X2)


def test_a_new_table_reuses_the_texts_it_shares(tmp_path: Path) -> None:
    _encode_clean(make_table(TRAIN_TEXTS), CountingEncoder(), tmp_path)
    enc = CountingEncoder()
    X = _encode_clean(make_table([TRAIN_TEXTS[3], "a brand new query"]), enc, tmp_path)
    assert enc.calls == [["a brand new query"]]
    np.testing.assert_array_equal(X, CountingEncoder().transform([TRAIN_TEXTS[3], "a brand new query"]))


def test_options_and_encoders_do_not_share_entries(tmp_path: Path) -> None:
    table = make_table(TRAIN_TEXTS)
    _encode_clean(table, CountingEncoder(dim=8), tmp_path)
    other = CountingEncoder(dim=4)
    assert _encode_clean(table, other, tmp_path).shape == (len(TRAIN_TEXTS), 4)
    assert other.n_encoded == len(TRAIN_TEXTS)


def test_tfidf_spy_fits_and_transforms_only_on_the_first_run(
    tmp_path: Path, split_table: RoutingTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = {"fit": 0, "transform": 0}
    real_fit, real_transform = TfidfEncoder._fit, TfidfEncoder._transform

    def spy_fit(self: TfidfEncoder, texts: list[str]) -> None:
        calls["fit"] += 1
        real_fit(self, texts)

    def spy_transform(self: TfidfEncoder, texts: list[str]) -> np.ndarray:
        calls["transform"] += 1
        return real_transform(self, texts)

    monkeypatch.setattr(TfidfEncoder, "_fit", spy_fit)
    monkeypatch.setattr(TfidfEncoder, "_transform", spy_transform)
    X1 = encode(split_table, "tfidf", cache_dir=tmp_path).X
    assert calls == {"fit": 1, "transform": 1}
    X2 = encode(split_table, "tfidf", cache_dir=tmp_path).X
    assert calls == {"fit": 1, "transform": 1}
    np.testing.assert_array_equal(X1, X2)
    # another fit set is another cache entry: the same texts are encoded again
    encode(split_table, "tfidf", cache_dir=tmp_path, fit_on=TRAIN_TEXTS[:-1])
    assert calls == {"fit": 2, "transform": 2}


def test_a_caller_owned_fit_cache_shares_one_fit(tmp_path: Path, split_table: RoutingTable,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fits_seen: list[int] = []
    real_fit = TfidfEncoder._fit

    def spy_fit(self: TfidfEncoder, texts: list[str]) -> None:
        fits_seen.append(len(texts))
        real_fit(self, texts)

    monkeypatch.setattr(TfidfEncoder, "_fit", spy_fit)
    train, test = split_table.select_split("train"), split_table.select_split("test")
    fits = FitCache()
    a = encode(test, "tfidf", fit_on=train, cache=False, fits=fits).X
    b = encode(test, "tfidf", fit_on=train, cache=False, fits=fits).X
    assert fits_seen == [len(TRAIN_TEXTS)] and len(fits) == 1
    np.testing.assert_array_equal(a, b)
    encode(test, "tfidf", fit_on=train, cache=False)  # no cache given: this call fits its own
    assert fits_seen == [len(TRAIN_TEXTS)] * 2 and len(fits) == 1


def test_train_and_test_tables_share_one_fit(tmp_path: Path, split_table: RoutingTable) -> None:
    full = encode(split_table, "tfidf", cache_dir=tmp_path).X
    test = split_table.select_split("test")
    train = split_table.select_split("train")
    np.testing.assert_array_equal(encode(test, "tfidf", cache_dir=tmp_path, fit_on=train).X, full[len(TRAIN_TEXTS):])
    for cache_dir in (tmp_path, tmp_path / "fresh"):
        f_train, f_test = encode_pair(train, test, "tfidf", cache_dir=cache_dir)
        np.testing.assert_array_equal(np.vstack([f_train.X, f_test.X]), full)
        assert f_test.queries is test.queries and f_test.actors is test.actors


def _shards(tmp_path: Path) -> list[Path]:
    return sorted(tmp_path.rglob("*.vecs.npy"))


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage_keys", "missing_vectors"])
def test_damaged_cache_warns_and_recomputes(tmp_path: Path, damage: str) -> None:
    table = make_table(TRAIN_TEXTS + TEST_TEXTS)
    reference = _encode_clean(table, CountingEncoder(), tmp_path)
    (vecs,) = _shards(tmp_path)
    keys = vecs.with_name(vecs.name.replace(".vecs.npy", ".keys.npy"))
    raw = bytearray(vecs.read_bytes())
    if damage == "truncate":
        vecs.write_bytes(bytes(raw[: len(raw) // 2]))
    elif damage == "flip":  # still a valid .npy: only the checksum can tell
        raw[-5] ^= 0x40
        vecs.write_bytes(bytes(raw))
    elif damage == "garbage_keys":
        keys.write_bytes(b"not a numpy file")
    else:
        vecs.unlink()
    enc = CountingEncoder()
    with pytest.warns(CacheWarning):
        X = encode(table, enc, cache_dir=tmp_path).X
    np.testing.assert_array_equal(X, reference)
    assert enc.n_encoded == table.n_queries
    again = CountingEncoder()  # the recomputed vectors were stored again: a clean hit now
    np.testing.assert_array_equal(_encode_clean(table, again, tmp_path), reference)
    assert again.calls == []


def test_an_unwritable_cache_is_a_warning(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    with pytest.warns(CacheWarning, match="could not be written"):
        X = encode(make_table(TRAIN_TEXTS), CountingEncoder(), cache_dir=blocker).X
    assert X.shape == (len(TRAIN_TEXTS), 8)


def test_large_writes_are_chunked_and_leave_no_temp_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("routerlab.features.cache.SHARD_ROWS", 4)
    X = _encode_clean(make_table(TRAIN_TEXTS), CountingEncoder(), tmp_path)
    assert len(_shards(tmp_path)) == 3  # 10 texts in shards of 4, 4, 2
    assert not list(tmp_path.rglob("*.tmp"))
    np.testing.assert_array_equal(_encode_clean(make_table(TRAIN_TEXTS), CountingEncoder(), tmp_path), X)


def test_cache_dir_defaults_to_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERLAB_CACHE_DIR", str(tmp_path / "env"))
    assert default_cache_dir() == tmp_path / "env" / "features"  # the one rule: $ROUTERLAB_CACHE_DIR/<kind>
    encode(make_table(TRAIN_TEXTS), CountingEncoder())
    assert _shards(tmp_path / "env" / "features")
    monkeypatch.delenv("ROUTERLAB_CACHE_DIR")
    assert default_cache_dir() == Path.home() / ".cache" / "routerlab" / "features"


def test_keys_depend_on_fingerprint_and_text(tmp_path: Path) -> None:
    a, b = VectorCache(tmp_path, "x", "f1" * 32), VectorCache(tmp_path, "x", "f2" * 32)
    ka, kb = a.keys(["hello", "world"]), b.keys(["hello", "world"])
    assert ka[0] != ka[1] and ka[0] != kb[0] and a.keys(["hello"])[0] == ka[0]
