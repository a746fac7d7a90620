"""The content hash is checked on every load, computed fast, and equal to RoutingTable.content_hash."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from routerlab.cli import main
from routerlab.data.store import MANIFEST, load, save
from routerlab.data.table import Actors, Queries, RoutingTable
from routerlab.datasets import demo
from routerlab.errors import DataError
from tests.data.test_store import sample_table


def odd_table() -> RoutingTable:
    """Strings Arrow cannot take as plain text (None, numbers, bytes, empty) in object columns."""
    n = 7
    queries = Queries.create(
        [f"q{i}" for i in range(n)],
        text=["", "ünï", "a\x00b", "x" * 300, "", "\U0001f600", "z"],
        extra={
            "mixed": np.array([None, 1, "one", 2.5, b"raw", "", "ok"], dtype=object),
            "none": np.array([None] * n, dtype=object),
            "num": np.arange(n, dtype=np.int64),
        },
    )
    actors = Actors.create(["a", "b"], extra={"vendor": np.array(["v", None], dtype=object)})
    score = np.tile(np.array([[0.0, 1.0]], dtype=np.float32), (n, 1))
    return RoutingTable(queries=queries, actors=actors, score=score)


@pytest.mark.parametrize("make", [sample_table, odd_table, lambda: demo(200, seed=3),
                                  lambda: sample_table(n=0, m=2)], ids=["sample", "odd", "demo", "empty"])
def test_streamed_hash_equals_the_tables_own(make: object, tmp_path: Path) -> None:
    """The hash load computes while decoding row groups is the loaded table's own content hash, and the
    saved table's when its metadata survives Parquet unchanged (all but the 'odd' table)."""
    table = make()  # type: ignore[operator]
    back = load(save(table, tmp_path / "streamed"))  # verify=True: hashed while reading
    recomputed = RoutingTable(queries=back.queries, actors=back.actors, **back.matrices()).content_hash
    assert back.__dict__["content_hash"] == recomputed
    if "mixed" not in table.queries.extra:
        assert back.__dict__["content_hash"] == table.content_hash


def _streamed_hash(table: RoutingTable, tmp_path: Path) -> str:
    back = load(save(table, tmp_path / "streamed"))  # verify=True: hashed while reading
    streamed: str = back.__dict__["content_hash"]
    return streamed


def test_hash_value_is_pinned(tmp_path: Path) -> None:
    """Hashes recorded in earlier results stay valid: the definition has not changed."""
    t = RoutingTable.from_arrays(np.array([[1.0, 0.0], [np.nan, 0.5]]), actors=["a", "b"], query_ids=["x", "y"],
                                 text=["hello", "wörld"])
    pinned = "3ee1d8ec11962871694986e6101e9cb178ce3c85c7b9122c08ac65cff0fe8262"
    assert t.content_hash == pinned
    assert _streamed_hash(t, tmp_path) == pinned


def test_load_verifies_and_keeps_the_hash(tmp_path: Path) -> None:
    table = sample_table()
    back = load(save(table, tmp_path / "t"))
    assert back.content_hash == table.content_hash
    assert back.__dict__["content_hash"] == table.content_hash  # computed while reading, cached


def test_lossy_metadata_still_loads(tmp_path: Path) -> None:
    """A column mixing numbers and strings is stored as JSON text: the manifest records the hash of what
    loading gives back, so verification passes (and a second round trip is stable)."""
    table = odd_table()
    back = load(save(table, tmp_path / "t"))
    assert back.queries.extra["mixed"].tolist()[:3] == [None, "1", "\"one\""]
    assert back.content_hash == json.loads((tmp_path / "t" / MANIFEST).read_text())["content_hash"]
    assert back.content_hash == RoutingTable(queries=back.queries, actors=back.actors, score=back.score).content_hash
    assert load(save(back, tmp_path / "u")).content_hash == back.content_hash


def _swap_same_size(tmp_path: Path) -> Path:
    """Save a table, then put another table's score file of exactly the same size in its place."""
    a = sample_table(n=64, m=5, seed=4)
    flipped = np.where(np.isnan(a.score), np.nan, 1.0 - a.score).astype(np.float32)  # same layout, other values
    b = replace(a, score=flipped)
    save(a, tmp_path / "t")
    save(b, tmp_path / "u")
    sa, sb = (tmp_path / "t" / "score.parquet"), (tmp_path / "u" / "score.parquet")
    assert sa.stat().st_size == sb.stat().st_size and sa.read_bytes() != sb.read_bytes()
    shutil.copyfile(sb, sa)
    return tmp_path / "t"


def test_swapped_same_size_score_file_is_caught(tmp_path: Path) -> None:
    path = _swap_same_size(tmp_path)
    with pytest.raises(DataError) as err:
        load(path)
    msg = str(err.value)
    assert msg.startswith(str(path) + ":") and "does not match" in msg and "\n" not in msg
    assert load(path, verify=False).content_hash == json.loads((path / MANIFEST).read_text())["content_hash"]


def test_cli_refuses_a_tampered_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _swap_same_size(tmp_path)
    assert main(["info", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and "content hash" in err and "does not match" in err
