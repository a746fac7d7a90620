"""Precomputed vectors: aligned .npy, id-joined Parquet / .npz, and errors that name file, row and field."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from routerlab.data.table import RoutingTable
from routerlab.errors import DataError, UsageError
from routerlab.features import encode, get_encoder
from tests.features.conftest import make_table

IDS = ["q0", "q1", "q2", "q3"]
VECS = np.arange(12, dtype=np.float32).reshape(4, 3) / 10


@pytest.fixture
def table() -> RoutingTable:
    return make_table(["a", "b", "c", "d"], ids=IDS)


def _parquet(path: Path, ids: list[str], vecs: np.ndarray, as_list: bool) -> Path:
    cols: dict[str, object] = {"query_id": ids}
    if as_list:
        cols["embedding"] = [list(map(float, v)) for v in vecs]
    else:
        cols.update({f"f{j}": vecs[:, j] for j in range(vecs.shape[1])})
    pq.write_table(pa.table(cols), path)
    return path


def test_npy_in_table_order(tmp_path: Path, table: RoutingTable) -> None:
    np.save(tmp_path / "v.npy", VECS)
    f = encode(table, f"precomputed:path={tmp_path / 'v.npy'}")  # a path with "/" stays a path
    np.testing.assert_array_equal(f.X, VECS)
    assert f.encoder.startswith("precomputed:path=")


@pytest.mark.parametrize("as_list", [True, False])
def test_parquet_is_joined_by_query_id(tmp_path: Path, table: RoutingTable, as_list: bool) -> None:
    order = [2, 0, 3, 1]
    extra = np.full((1, 3), 9, dtype=np.float32)  # a vector for a query the table lacks is ignored
    path = _parquet(tmp_path / "v.parquet", [IDS[i] for i in order] + ["other"], np.vstack([VECS[order], extra]),
                    as_list)
    np.testing.assert_array_equal(encode(table, "precomputed", path=path).X, VECS)


def test_npz_is_joined_by_query_id(tmp_path: Path, table: RoutingTable) -> None:
    np.savez(tmp_path / "v.npz", query_id=np.array(IDS[::-1]), vectors=VECS[::-1])
    np.testing.assert_array_equal(encode(table, "precomputed", path=tmp_path / "v.npz").X, VECS)
    np.savez(tmp_path / "cols.npz", query_id=np.array(IDS), x=VECS[:, 0], y=VECS[:, 1])
    np.testing.assert_array_equal(encode(table, "precomputed", path=tmp_path / "cols.npz").X, VECS[:, :2])


def _error(table: RoutingTable, path: Path) -> DataError:
    with pytest.raises(DataError) as info:
        encode(table, "precomputed", path=path)
    assert info.value.file == str(path)
    return info.value


def test_npy_row_count_mismatch(tmp_path: Path, table: RoutingTable) -> None:
    np.save(tmp_path / "v.npy", VECS[:3])
    assert "3 vectors for a table of 4" in str(_error(table, tmp_path / "v.npy"))


def test_npy_nan_names_the_row(tmp_path: Path, table: RoutingTable) -> None:
    bad = VECS.copy()
    bad[2, 1] = np.nan
    np.save(tmp_path / "v.npy", bad)
    err = _error(table, tmp_path / "v.npy")
    assert err.row == 3 and "not finite" in str(err)


def test_missing_query_id_names_it(tmp_path: Path, table: RoutingTable) -> None:
    path = _parquet(tmp_path / "v.parquet", IDS[:3], VECS[:3], as_list=True)
    err = _error(table, path)
    assert err.field == "query_id" and "'q3'" in str(err)


def test_parquet_nan_names_row_and_field(tmp_path: Path, table: RoutingTable) -> None:
    bad = VECS.copy()
    bad[1, 2] = np.nan
    err = _error(table, _parquet(tmp_path / "cols.parquet", IDS, bad, as_list=False))
    assert (err.row, err.field) == (2, "f2")
    err = _error(table, _parquet(tmp_path / "list.parquet", IDS, bad, as_list=True))
    assert (err.row, err.field) == (2, "embedding")


def test_malformed_files(tmp_path: Path, table: RoutingTable) -> None:
    ragged = tmp_path / "ragged.parquet"
    pq.write_table(pa.table({"query_id": IDS, "embedding": [[1.0, 2.0]] * 3 + [[1.0]]}), ragged)
    assert _error(table, ragged).row == 4
    dup = _parquet(tmp_path / "dup.parquet", [*IDS, "q0"], np.vstack([VECS, VECS[:1]]), as_list=True)
    assert _error(table, dup).row == 5
    np.savez(tmp_path / "noid.npz", vectors=VECS)
    assert _error(table, tmp_path / "noid.npz").field == "query_id"
    (tmp_path / "v.npy").write_bytes(b"garbage")
    assert "cannot read" in str(_error(table, tmp_path / "v.npy"))
    (tmp_path / "v.csv").write_text("x")
    assert "unknown vector file type" in str(_error(table, tmp_path / "v.csv"))
    assert "not found" in str(_error(table, tmp_path / "absent.npy"))


def test_usage_errors() -> None:
    with pytest.raises(UsageError, match="needs a file"):
        get_encoder("precomputed")
    with pytest.raises(UsageError, match="query id"):
        get_encoder("precomputed:path=x.npy").transform(["text"])
