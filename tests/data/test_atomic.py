"""Atomic files and directories: modes follow the umask, failures leave nothing behind."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from routerlab._atomic import atomic_directory, atomic_write, current_umask
from routerlab.data.store import save
from routerlab.errors import DataError
from routerlab.reports.files import write_json, write_text
from tests.data.test_store import sample_table

SetMask = Callable[[int], None]


@pytest.fixture
def umask() -> Iterator[SetMask]:
    """Set the umask for one test and restore it afterwards."""
    old = os.umask(0o022)
    os.umask(old)

    def set_mask(mask: int) -> None:
        os.umask(mask)

    yield set_mask
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_current_umask_reads_without_changing(umask: SetMask) -> None:
    umask(0o027)
    assert current_umask() == 0o027
    assert current_umask() == 0o027
    umask(0o002)
    assert current_umask() == 0o002


@pytest.mark.parametrize(("mask", "file_mode", "dir_mode"), [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700)])
def test_written_files_follow_umask(tmp_path: Path, umask: SetMask, mask: int, file_mode: int, dir_mode: int) -> None:
    umask(mask)
    write_text(tmp_path / "report.md", "hello\n")
    write_json(tmp_path / "r.json", {"a": np.float32(1.5)})
    save(sample_table(n=8, m=3), tmp_path / "table")
    assert mode(tmp_path / "report.md") == file_mode
    assert mode(tmp_path / "r.json") == file_mode
    assert mode(tmp_path / "table") == dir_mode
    for f in (tmp_path / "table").iterdir():
        assert mode(f) == file_mode, f.name
    with atomic_directory(tmp_path / "out") as d:
        (d / "a.txt").write_text("x")
    assert mode(tmp_path / "out") == dir_mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "r.json", "report.md", "table"]  # no temp left


def test_atomic_write_removes_temp_on_interrupt(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("old")

    def boom(tmp: str) -> None:
        Path(tmp).write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(tmp_path / "f.txt", boom)
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]
    assert (tmp_path / "f.txt").read_text() == "old"


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_atomic_directory_failure_leaves_target_untouched(tmp_path: Path, error: type[BaseException]) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(error), atomic_directory(target) as d:
        (d / "keep.txt").write_text("theirs")
        (d / "new.txt").write_text("new")
        raise error
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert [p.name for p in target.iterdir()] == ["keep.txt"]
    assert (target / "keep.txt").read_text() == "mine"
    with pytest.raises(error), atomic_directory(tmp_path / "fresh"):
        raise error
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_atomic_directory_publishes_into_existing_dir(tmp_path: Path) -> None:
    target = tmp_path / "out"
    (target / "sub").mkdir(parents=True)
    (target / "mine.txt").write_text("mine")
    (target / "sub" / "mine2.txt").write_text("mine2")
    (target / "report.md").write_text("old report")
    with atomic_directory(target) as d:
        assert d.parent == tmp_path and d != target
        (d / "report.md").write_text("new report")
        (d / "sub").mkdir()
        (d / "sub" / "plot.png").write_text("png")
    assert (target / "mine.txt").read_text() == "mine"
    assert (target / "sub" / "mine2.txt").read_text() == "mine2"
    assert (target / "sub" / "plot.png").read_text() == "png"
    assert (target / "report.md").read_text() == "new report"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_atomic_directory_refuses_file_target_and_kind_clash(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(DataError, match="is a file"), atomic_directory(tmp_path / "f"):
        pass
    target = tmp_path / "out"
    (target / "x").mkdir(parents=True)
    with pytest.raises(DataError, match="cannot publish"), atomic_directory(target) as d:
        (d / "x").write_text("file where a dir is")
        (d / "y").write_text("y")
    assert sorted(p.name for p in target.iterdir()) == ["x"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f", "out"]


def test_replace_directory_swaps_the_whole_directory(tmp_path: Path, umask: SetMask) -> None:
    from routerlab._atomic import replace_directory

    umask(0o022)
    target = tmp_path / "out"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with replace_directory(target) as tmp:
        (tmp / "new.txt").write_text("new")
        assert (target / "old.txt").exists()  # untouched until the block ends
    assert sorted(p.name for p in target.iterdir()) == ["new.txt"]  # replaced, not merged
    assert mode(target) == 0o755
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temp or old copy left
    with pytest.raises(RuntimeError), replace_directory(target) as tmp:
        (tmp / "half.txt").write_text("x")
        raise RuntimeError("crash")
    assert sorted(p.name for p in target.iterdir()) == ["new.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    (tmp_path / "f").write_text("a file")
    with pytest.raises(DataError, match="is a file"), replace_directory(tmp_path / "f"):
        pass


def test_keep_suffix_and_the_text_and_bytes_helpers(tmp_path: Path) -> None:
    import gzip

    import pyarrow as pa

    from routerlab._atomic import write_bytes
    from routerlab._atomic import write_text as atomic_text

    seen: list[str] = []

    def write(tmp: str) -> None:
        seen.append(tmp)
        with pa.output_stream(tmp, compression="detect") as out:  # gzip chosen by the temp name's suffix
            out.write(b"a,b\n1,2\n")

    atomic_write(tmp_path / "x.csv.gz", write, keep_suffix=True)
    assert seen[0].endswith(".csv.gz") and Path(seen[0]).name.startswith(".x.csv.gz.")
    assert gzip.decompress((tmp_path / "x.csv.gz").read_bytes()) == b"a,b\n1,2\n"
    atomic_text(tmp_path / "sub" / "t.txt", "é\n")
    write_bytes(tmp_path / "b.bin", b"\x00\x01")
    assert (tmp_path / "sub" / "t.txt").read_text(encoding="utf-8") == "é\n"
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.bin", "sub", "x.csv.gz"]


def test_probe_writable(tmp_path: Path) -> None:
    from routerlab._atomic import probe_writable

    assert probe_writable(tmp_path)
    assert list(tmp_path.iterdir()) == []  # the probe file is gone
    assert not probe_writable(tmp_path / "missing")
