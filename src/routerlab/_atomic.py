"""Atomic files and directories whose modes follow the user's umask.

A crash (or Ctrl-C) never leaves a half-written file or directory at the target path, and what is
published gets the permissions a plain ``open()``/``mkdir()`` would give it (``tempfile`` would give
0600/0700, which hides reports and tables from a group that shares them).

Only the standard library and :mod:`routerlab.errors` are imported: every writer may use this module.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from routerlab.errors import DataError

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's umask, read without changing it for good.

    On Linux it is read from ``/proc/self/status``; elsewhere it is set and restored at once under a
    lock (``os.umask`` has no read-only form).
    """
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _file_mode() -> int:
    return 0o666 & ~current_umask()


def _dir_mode() -> int:
    return 0o777 & ~current_umask()


def atomic_write(path: Path, write: Callable[[str], None]) -> None:
    """Write via ``write(tmp_path)`` to a temp file beside ``path``, then ``os.replace`` it onto ``path``.

    The file's mode follows the user's umask (``0666 & ~umask``), like a plain ``open()`` would; the temp
    file is removed on any exception, KeyboardInterrupt included. Missing parent directories are created.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, _file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _conflicts(src: Path, dst: Path) -> list[str]:
    """Produced entries under ``src`` whose counterpart under ``dst`` is of the other kind (file vs dir)."""
    bad = []
    for entry in src.iterdir():
        there = dst / entry.name
        if not there.exists() and not there.is_symlink():
            continue
        if entry.is_dir() and not entry.is_symlink():
            if there.is_dir() and not there.is_symlink():
                bad.extend(_conflicts(entry, there))
            else:
                bad.append(str(there))
        elif there.is_dir() and not there.is_symlink():
            bad.append(str(there))
    return bad


def _merge(src: Path, dst: Path) -> None:
    """Move every entry of ``src`` into existing directory ``dst``; same-named files are replaced."""
    for entry in sorted(src.iterdir()):
        there = dst / entry.name
        if entry.is_dir() and not entry.is_symlink() and there.is_dir() and not there.is_symlink():
            _merge(entry, there)
        else:
            os.replace(entry, there)


@contextmanager
def atomic_directory(target: Path) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``target`` (mode ``0777 & ~umask``) and publish it on exit.

    On normal exit: if ``target`` does not exist the temp directory is renamed to it; if it is an existing
    directory, each produced file or subdirectory is moved into it with ``os.replace`` (files the run did
    not produce are left alone: a user's files are never deleted), then the temp directory is removed.
    On any exception (KeyboardInterrupt included) the temp directory is removed and ``target`` is left
    exactly as it was. A ``target`` that is a file, or a produced file where ``target`` holds a directory
    of that name (or the reverse), is a :class:`~routerlab.errors.DataError`.
    """
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise DataError("exists and is a file, not a directory; refusing to overwrite it", file=target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        os.chmod(tmp, _dir_mode())
        yield tmp
        if not target.exists():
            try:
                os.rename(tmp, target)
                return
            except OSError:
                if not target.is_dir():  # something else appeared there meanwhile
                    raise
        if not target.is_dir():
            raise DataError("exists and is a file, not a directory; refusing to overwrite it", file=target)
        bad = _conflicts(tmp, target)
        if bad:
            raise DataError(f"cannot publish: {bad[0]} is a directory where a file was written, or the reverse",
                            file=target)
        _merge(tmp, target)
        shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
