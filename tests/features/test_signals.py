"""``load_signals`` (SPEC 6 signals): an extract directory written here by hand in the on-disk format of
``routerlab extract`` (so the format itself is pinned), and precomputed ``.npz`` arrays. Rows are joined by
query id, never by position; every problem is a DataError naming the file and the field."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab.errors import DataError
from routerlab.features.signals import load_signals, read_manifest

LAYERS, DIM = 3, 4


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def row(qid: str, text: str, logits: list[float], self_ask: float | None = 0.5,
        samples: list[str] | None = None) -> dict[str, Any]:
    return {"key": f"key-{qid}-{sha(text)}", "id": qid, "text_sha": sha(text), "dataset": "d", "gold": "A",
            "letters": "ABCD"[:len(logits)], "option_logits": logits, "choice": "A", "self_ask": self_ask,
            "samples": samples or [], "tokens": 10, "seconds": 0.1}


def write_shard(root: Path, name: str, rows: list[dict[str, Any]], hidden: np.ndarray, *, npz: bool = True) -> None:
    shards = root / "shards"
    shards.mkdir(parents=True, exist_ok=True)
    if npz:
        keys = np.asarray([r.get("key", "?") for r in rows])
        np.savez(shards / f"{name}.npz", keys=keys, hidden=hidden.astype(np.float16))
    (shards / f"{name}.json").write_text(json.dumps({"version": 1, "rows": rows}))


def filled(*values: float) -> np.ndarray:
    """One (layers, dim) block per value, every entry that value: a row is recognisable after the join."""
    return np.stack([np.full((LAYERS, DIM), v) for v in values])


@pytest.fixture()
def signals_dir(tmp_path: Path) -> Path:
    root = tmp_path / "sig"
    root.mkdir()
    (root / "manifest.json").write_text(json.dumps({"format": "routerlab-signals", "version": 1, "layers": LAYERS,
                                                    "dim": DIM, "rows": 3}))
    write_shard(root, "s1", [row("a", "alpha?", [1.0, 2.0, 3.0], 0.25, ["B", "B", "A", "x"]),
                             row("b", "beta?", [4.0, 3.0, 2.0, 1.0], -1.5, ["C"])], filled(0.5, 1.5))
    write_shard(root, "s2", [row("c", "gamma?", [0.0, -1.0], 2.0, ["A", "", "A"])], filled(2.5))
    return root


def test_directory_rows_join_by_id_in_any_order(signals_dir: Path) -> None:
    got = load_signals(signals_dir, ["c", "a", "b"], texts=["gamma?", "alpha?", "beta?"])
    assert set(got) == {"hidden", "option_logits", "self_ask", "samples"}
    assert got["hidden"].dtype == np.float16 and got["hidden"].shape == (3, LAYERS, DIM)
    assert got["hidden"][:, 1, 2].tolist() == [2.5, 0.5, 1.5]
    nan = np.nan
    np.testing.assert_array_equal(got["option_logits"], np.array(
        [[0, -1, nan, nan], [1, 2, 3, nan], [4, 3, 2, 1]], dtype=np.float32))
    assert got["self_ask"].dtype == np.float32 and got["self_ask"].tolist() == [2.0, 0.25, -1.5]
    # codes in order of first appearance per row; "" and missing samples are -1
    assert got["samples"].dtype == np.int32
    assert got["samples"].tolist() == [[0, -1, 0, -1], [0, 0, 1, 2], [0, -1, -1, -1]]
    assert read_manifest(signals_dir)["layers"] == LAYERS


def test_directory_text_mismatch_and_missing_id_are_errors(signals_dir: Path) -> None:
    with pytest.raises(DataError, match=r"row 2, field 'text_sha': query 'a': its signals were extracted from a "
                                        r"different question text"):
        load_signals(signals_dir, ["c", "a"], texts=["gamma?", "alpha, edited?"])
    with pytest.raises(DataError, match=r"no extracted signals for query 'zz' \(1 of 2 queries lack them\)") as info:
        load_signals(signals_dir, ["a", "zz"])
    assert info.value.file == str(signals_dir) and info.value.row == 2


def test_directory_picks_the_row_matching_the_text(signals_dir: Path) -> None:
    """A question whose text changed is extracted again under the same id: the row of the table's text wins."""
    write_shard(signals_dir, "s3", [row("a", "alpha, edited?", [9.0, 8.0, 7.0], 3.0)], filled(7.0))
    old = load_signals(signals_dir, ["a"], texts=["alpha?"])
    new = load_signals(signals_dir, ["a"], texts=["alpha, edited?"])
    assert old["hidden"][0, 0, 0] == 0.5 and old["option_logits"][0].tolist() == [1.0, 2.0, 3.0]
    assert new["hidden"][0, 0, 0] == 7.0 and new["option_logits"][0].tolist() == [9.0, 8.0, 7.0]
    assert new["self_ask"].tolist() == [3.0]


def test_directory_ignores_a_shard_without_its_arrays(signals_dir: Path) -> None:
    """extract writes the .npz before the .json; a .json alone (a killed write) is not a row."""
    write_shard(signals_dir, "s4", [row("d", "delta?", [1.0, 0.0])], filled(4.0), npz=False)
    with pytest.raises(DataError, match="no extracted signals for query 'd'"):
        load_signals(signals_dir, ["a", "d"])


def test_directory_without_self_ask_or_samples(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    (root / "manifest.json").write_text("{}")
    write_shard(root, "s", [row("a", "q?", [0.5, 1.5], None), row("b", "r?", [2.5, 0.5], None)], filled(1, 2))
    got = load_signals(root, ["b", "a"])
    assert set(got) == {"hidden", "option_logits"} and got["option_logits"].tolist() == [[2.5, 0.5], [0.5, 1.5]]


def test_directory_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"no manifest\.json"):
        load_signals(tmp_path, ["a"])
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(DataError, match="holds no extracted rows"):
        load_signals(tmp_path, ["a"])
    write_shard(tmp_path, "bad", [{"id": "a"}], filled(1))
    with pytest.raises(DataError, match=r"bad\.json, row 1: a row without its 'id' or 'option_logits'"):
        load_signals(tmp_path, ["a"])
    with pytest.raises(DataError, match=r"no such signals directory or \.npz file"):
        load_signals(tmp_path / "nope.npz", ["a"])


# ------------------------------------------------------------------------------------------ .npz
def save(path: Path, **arrays: Any) -> Path:
    np.savez(path, **arrays)
    return path


def test_npz_joins_by_id_and_codes_string_samples(tmp_path: Path) -> None:
    hidden = np.arange(3 * 2 * 2, dtype=np.float32).reshape(3, 2, 2)
    path = save(tmp_path / "pre.npz", ids=np.array(["x", "y", "z"]), hidden=hidden,
                option_logits=np.array([[1, 2, np.nan], [3, 1, 2], [0, 5, np.nan]], dtype=np.float64),
                self_ask=np.array([0.1, 0.2, 0.3]),
                samples=np.array([["A", "B", "A"], ["C", "C", "C"], ["", "D", "E"]]))
    got = load_signals(path, ["z", "x"])
    assert got["hidden"].dtype == np.float16 and got["hidden"].tolist() == hidden[[2, 0]].tolist()
    assert got["option_logits"].dtype == np.float32
    np.testing.assert_array_equal(got["option_logits"], [[0, 5, np.nan], [1, 2, np.nan]])
    np.testing.assert_allclose(got["self_ask"], [0.3, 0.1])
    assert got["samples"].tolist() == [[-1, 0, 1], [0, 1, 0]]
    # integer codes pass through as they are
    codes = save(tmp_path / "codes.npz", ids=np.array([7, 8]), samples=np.array([[0, 1], [-1, 0]]))
    assert load_signals(codes, ["8", "7"])["samples"].tolist() == [[-1, 0], [0, 1]]


@pytest.mark.parametrize(("arrays", "message", "field"), [
    ({"hidden": np.zeros((2, 3))}, r"'hidden' has shape \(2, 3\); expected \(n, layers, dim\)", "hidden"),
    ({"option_logits": np.zeros(2)}, r"'option_logits' has shape \(2,\); expected \(n, K\)", "option_logits"),
    ({"self_ask": np.zeros((3,))}, r"its first axis must be the 2 ids", "self_ask"),
    ({"samples": np.zeros(2, dtype=np.int64)}, r"expected \(n, k\)", "samples"),
    ({"samples": np.array([[0.5], [1.0]])}, r"integer answer-cluster codes", "samples"),
    ({"hidden": np.array([[[1.0]], [[np.nan]]])}, r"'hidden' is not finite for query 'b'", "hidden"),
    ({"self_ask": np.array([np.inf, 0.0])}, r"'self_ask' is not finite for query 'a'", "self_ask"),
    ({"option_logits": np.array([[np.nan, np.nan], [1.0, 2.0]])}, r"'option_logits' is not finite for query 'a'",
     "option_logits"),
])
def test_npz_bad_arrays_name_file_and_field(tmp_path: Path, arrays: dict[str, np.ndarray], message: str,
                                            field: str) -> None:
    path = save(tmp_path / "bad.npz", ids=np.array(["a", "b"]), **arrays)
    with pytest.raises(DataError, match=message) as info:
        load_signals(path, ["a", "b"])
    assert info.value.file == str(path) and info.value.field == field


def test_npz_missing_ids_and_unreadable_files(tmp_path: Path) -> None:
    path = save(tmp_path / "p.npz", ids=np.array(["a", "b"]), self_ask=np.zeros(2))
    with pytest.raises(DataError, match=r"field 'ids': no row for query 'c' \(2 of 3 queries missing\)"):
        load_signals(path, ["a", "c", "d"])
    cases: dict[str, Callable[[Path], Any]] = {
        "noids.npz": lambda p: save(p, self_ask=np.zeros(2)),
        "repeat.npz": lambda p: save(p, ids=np.array(["a", "a"]), self_ask=np.zeros(2)),
        "nosignal.npz": lambda p: save(p, ids=np.array(["a", "b"]), other=np.zeros(2)),
        "object.npz": lambda p: save(p, ids=np.array(["a", "b"]), samples=np.array([["A"], [None]], dtype=object)),
        "plain.npz": lambda p: p.write_bytes(b"not an archive at all"),
        "array.npz": lambda p: np.save(open(p, "wb"), np.zeros(3)),  # noqa: SIM115 - an .npy under an .npz name
    }
    messages = {"noids.npz": "need an 'ids' array", "repeat.npz": "'ids' repeats a query id",
                "nosignal.npz": "no signal arrays", "object.npz": "field 'samples': unreadable array",
                "plain.npz": "unreadable .npz", "array.npz": "not an .npz archive"}
    for name, make in cases.items():
        make(tmp_path / name)
        with pytest.raises(DataError, match=messages[name]) as info:
            load_signals(tmp_path / name, ["a", "b"])
        assert info.value.file == str(tmp_path / name), name
    (tmp_path / "x.csv").write_text("a")
    with pytest.raises(DataError, match=r"an \.npz of arrays"):
        load_signals(tmp_path / "x.csv", ["a"])
