"""The Parquet store: lossless save/load, a stable content hash, atomic replacement, clear errors."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from routerlab.data import store
from routerlab.data.store import COMPRESSIONS, MANIFEST, load, read_manifest, save
from routerlab.data.table import MATRIX_FIELDS, Actors, Queries, RoutingTable
from routerlab.errors import DataError, UsageError
from tests.data.importer_checks import assert_names, same_cells


def sample_table(n: int = 40, m: int = 6, seed: int = 0) -> RoutingTable:
    rng = np.random.default_rng(seed)
    score = (rng.random((n, m)) < 0.6).astype(np.float32)
    score[rng.random((n, m)) < 0.1] = np.nan
    tokens = rng.integers(1, 900, (n, m)).astype(np.float32)
    tokens[rng.random((n, m)) < 0.1] = np.nan
    latency = rng.lognormal(0, 1, (n, m)).astype(np.float32)  # continuous: the byte-stream-split path
    queries = Queries.create(
        [f"q{i}" for i in range(n)],
        text=[f"text {i}, with \"quotes\"\nand ünïcode" for i in range(n)],
        dataset=["a" if i % 2 else "b" for i in range(n)],
        split=["train" if i % 4 else "test" for i in range(n)],
        extra={
            "difficulty": rng.random(n),
            "n_choices": np.arange(n) % 5,
            "source": np.array([f"src{i % 3}" for i in range(n)], dtype=object),
        },
    )
    actors = Actors.create(
        [f"model-{j}" for j in range(m)],
        params_b=np.arange(m, dtype=float) + 1,
        ttft_ms=np.full(m, 50.0),
        itl_ms=np.where(np.arange(m) % 2, np.nan, 10.0),
        extra={"vendor": np.array([f"v{j % 2}" for j in range(m)], dtype=object)},
    )
    return RoutingTable(queries=queries, actors=actors, score=score, tokens_out=tokens, latency_s=latency,
                        name="sample", meta={"source": "test"})


def assert_same(a: RoutingTable, b: RoutingTable) -> None:
    for key in ("ids", "text", "dataset", "split"):
        assert getattr(a.queries, key).tolist() == getattr(b.queries, key).tolist()
    assert sorted(a.queries.extra) == sorted(b.queries.extra)
    for key, col in a.queries.extra.items():
        assert col.tolist() == b.queries.extra[key].tolist() and col.dtype == b.queries.extra[key].dtype
    assert a.actor_names == b.actor_names
    for key in ("params_b", "ttft_ms", "itl_ms", "input_price", "output_price"):
        np.testing.assert_array_equal(getattr(a.actors, key), getattr(b.actors, key))
    assert {k: v.tolist() for k, v in a.actors.extra.items()} == {k: v.tolist() for k, v in b.actors.extra.items()}
    for key in MATRIX_FIELDS:
        assert same_cells(getattr(a, key), getattr(b, key)), key
        if getattr(a, key) is not None:  # bit for bit, NaN payloads included
            assert getattr(a, key).tobytes() == getattr(b, key).tobytes(), key
    assert a.name == b.name and a.meta == b.meta


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_save_load_is_lossless(tmp_path: Path, compression: str) -> None:
    table = sample_table()
    save(table, tmp_path / "t", compression=compression)
    back = load(tmp_path / "t", verify=True)  # verify re-hashes the loaded data
    assert_same(table, back)
    assert back.content_hash == table.content_hash


def test_many_row_groups_and_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "ROW_GROUP", 37)  # 40 x 6 cells -> 7 row groups, the last one short
    table = sample_table()
    save(table, tmp_path / "t")
    assert pq.ParquetFile(tmp_path / "t" / "score.parquet").metadata.num_row_groups == 7
    for threads in (1, 3):
        np.testing.assert_array_equal(store.read_matrix(tmp_path / "t" / "score.parquet", 40, 6, threads=threads),
                                      table.score)
    assert_same(table, load(tmp_path / "t", verify=True))


def test_encoding_follows_the_values(tmp_path: Path) -> None:
    table = sample_table(n=200, m=30)  # 6,000 distinct latencies: more than a dictionary pays for
    save(table, tmp_path / "t")
    enc = {key: set(pq.ParquetFile(tmp_path / "t" / f"{key}.parquet").metadata.row_group(0).column(0).encodings)
           for key in ("score", "latency_s")}
    assert "RLE_DICTIONARY" in enc["score"]  # 0/1/NaN: a two-bit dictionary code per cell
    assert "BYTE_STREAM_SPLIT" in enc["latency_s"] and "RLE_DICTIONARY" not in enc["latency_s"]
    assert_same(table, load(tmp_path / "t", verify=True))


def test_empty_and_nan_payloads(tmp_path: Path) -> None:
    empty = RoutingTable.from_arrays(np.zeros((0, 3), dtype=np.float32), actors=["a", "b", "c"])
    assert_same(empty, load(save(empty, tmp_path / "e"), verify=True))
    odd = np.array([[np.nan, 1.0]], dtype=np.float32)
    odd.view(np.uint32)[0, 0] = 0xFFC00000  # a negative quiet NaN, as some arithmetic produces
    t = RoutingTable.from_arrays(odd, actors=["a", "b"])
    assert_same(t, load(save(t, tmp_path / "n"), verify=True))


def test_content_hash_is_stable_and_sees_every_change(tmp_path: Path) -> None:
    table = sample_table()
    h = table.content_hash
    assert load(save(table, tmp_path / "t"), verify=True).content_hash == h
    assert read_manifest(tmp_path / "t")["content_hash"] == h
    assert sample_table().content_hash == h  # same data, same hash
    assert replace(table, name="other", meta={}).content_hash == h  # name and meta do not count
    score = table.score.copy()
    score[3, 2] = 1.0 - score[3, 2] if not np.isnan(score[3, 2]) else 0.0
    changed = [
        replace(table, score=score),
        replace(table, score=np.where(np.isnan(table.score), np.float32(0.0), table.score)),
        replace(table, tokens_out=table.tokens_out + np.float32(1.0)),  # type: ignore[operator]
        replace(table, latency_s=None),
        replace(table, queries=replace(table.queries, text=np.array(
            [*table.queries.text[:-1], table.queries.text[-1] + "!"], dtype=object))),
        replace(table, actors=replace(table.actors, params_b=table.actors.params_b * 2)),
        replace(table, queries=replace(table.queries, extra={**table.queries.extra,
                                                             "n_choices": table.queries.extra["n_choices"] + 1})),
    ]
    hashes = [t.content_hash for t in changed]
    assert h not in hashes and len(set(hashes)) == len(hashes)


def test_verify_detects_files_changed_after_saving(tmp_path: Path) -> None:
    table = sample_table()
    save(table, tmp_path / "t")
    other = replace(table, score=np.where(np.isnan(table.score), np.float32(1.0), table.score))
    store.write_matrix(other.score, tmp_path / "t" / "score.parquet")
    manifest = json.loads((tmp_path / "t" / MANIFEST).read_text())
    manifest["files"]["score.parquet"] = (tmp_path / "t" / "score.parquet").stat().st_size
    (tmp_path / "t" / MANIFEST).write_text(json.dumps(manifest))
    assert load(tmp_path / "t", verify=False).content_hash == table.content_hash  # trusted, not recomputed
    with pytest.raises(DataError) as err:
        load(tmp_path / "t")  # verified by default
    assert "does not match" in str(err.value)


def test_replacement_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = sample_table(seed=1), sample_table(n=12, seed=2)
    save(a, tmp_path / "t")
    save(b, tmp_path / "t")
    assert_same(b, load(tmp_path / "t", verify=True))

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(store, "write_matrix", broken)
    with pytest.raises(OSError, match="disk full"):
        save(a, tmp_path / "t")
    assert_same(b, load(tmp_path / "t", verify=True))  # the old table is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]  # no temporary directory left behind


def test_refuses_to_overwrite_what_is_not_a_table(tmp_path: Path) -> None:
    other = tmp_path / "notes"
    other.mkdir()
    (other / "important.txt").write_text("keep me")
    with pytest.raises(DataError) as err:
        save(sample_table(), other)
    assert_names(err.value, other)
    assert (other / "important.txt").read_text() == "keep me"
    (tmp_path / "file").write_text("x")
    with pytest.raises(DataError):
        save(sample_table(), tmp_path / "file")
    (tmp_path / "empty").mkdir()
    save(sample_table(), tmp_path / "empty")  # an empty directory is fine
    with pytest.raises(UsageError):
        save(sample_table(), tmp_path / "z", compression="brotli9")


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    return save(sample_table(), tmp_path / "t")


def test_corrupt_manifest(saved: Path) -> None:
    (saved / MANIFEST).write_text('{"format": "routerlab-table",\n  "n_queries": 4,,\n}')
    with pytest.raises(DataError) as err:
        load(saved)
    assert_names(err.value, saved / MANIFEST, row=2)
    (saved / MANIFEST).write_text('{"format": "routerlab-table", "format_version": 1}')
    with pytest.raises(DataError) as err:
        load(saved)
    assert_names(err.value, saved / MANIFEST)
    (saved / MANIFEST).write_text('{"format": "routerlab-table", "format_version": 99, "n_queries": 1, '
                                  '"n_actors": 1}')
    with pytest.raises(DataError) as err:
        load(saved)
    assert_names(err.value, saved / MANIFEST, field="format_version")
    (saved / MANIFEST).unlink()
    with pytest.raises(DataError) as err:
        load(saved)
    assert_names(err.value, saved)


@pytest.mark.parametrize("name", ["score.parquet", "latency_s.parquet", "queries.parquet", "actors.parquet"])
def test_missing_file(saved: Path, name: str) -> None:
    (saved / name).unlink()
    with pytest.raises(DataError) as err:
        load(saved)
    assert_names(err.value, saved / name)


@pytest.mark.parametrize("name", ["score.parquet", "queries.parquet"])
@pytest.mark.parametrize("known_size", [True, False])
def test_truncated_file(saved: Path, name: str, known_size: bool) -> None:
    data = (saved / name).read_bytes()
    (saved / name).write_bytes(data[: len(data) // 2])
    if not known_size:  # past the size check: the Parquet reader itself must fail cleanly
        manifest = json.loads((saved / MANIFEST).read_text())
        del manifest["files"]
        (saved / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(DataError) as err:
        load(saved)
    assert_names(err.value, saved / name)


def test_matrix_of_the_wrong_shape_or_type(saved: Path) -> None:
    manifest = json.loads((saved / MANIFEST).read_text())
    del manifest["files"]
    (saved / MANIFEST).write_text(json.dumps(manifest))
    pq.write_table(pa.table({"value": pa.array(np.zeros(7, dtype=np.float32))}), saved / "score.parquet")
    with pytest.raises(DataError) as err:
        load(saved)
    assert_names(err.value, saved / "score.parquet")
    assert "expected 40 x 6" in str(err.value)
    pq.write_table(pa.table({"value": pa.array(["x"] * 240)}), saved / "score.parquet")
    with pytest.raises(DataError) as err:
        load(saved)
    assert_names(err.value, saved / "score.parquet")
    pq.write_table(pa.table({"value": pa.array(np.full(240, 3.0, dtype=np.float32))}), saved / "score.parquet")
    with pytest.raises(DataError) as err:  # a score outside [0, 1] is caught by the table's own checks
        load(saved)
    assert err.value.field == "score" and str(saved) in str(err.value)
