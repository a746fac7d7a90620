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


def atomic_write(path: str | os.PathLike[str], write: Callable[[str], object], *, keep_suffix: bool = False) -> None:
    """Write via ``write(tmp_path)`` to a temp file beside ``path``, then ``os.replace`` it onto ``path``.

    The file's mode follows the user's umask (``0666 & ~umask``), like a plain ``open()`` would; the temp
    file is removed on any exception, KeyboardInterrupt included. Missing parent directories are created.
    ``keep_suffix``: the temp name ends with ``path``'s suffixes (``.csv.gz``), for writers that choose a
    format or compression by extension.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = ".tmp" + ("".join(path.suffixes) if keep_suffix else "")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, _file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """``path`` holds ``text`` (UTF-8), written atomically."""
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """``path`` holds ``data``, written atomically."""
    atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))


def probe_writable(directory: str | os.PathLike[str]) -> bool:
    """Whether a file can be created (and removed) in ``directory``: actually tries, with an empty probe
    file, since ``os.access`` says yes to everything for root."""
    try:
        fd, name = tempfile.mkstemp(prefix=".routerlab-probe-", dir=directory)
    except OSError:
        return False
    os.close(fd)
    try:
        os.unlink(name)
    except OSError:
        return False
    return True


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


def _temp_beside(target: Path) -> Path:
    """A fresh temporary directory beside the directory ``target`` (mode ``0777 & ~umask``), for
    :func:`atomic_directory` and :func:`replace_directory`; ``target`` being a file is a DataError."""
    if target.exists() and not target.is_dir():
        raise DataError("exists and is a file, not a directory; refusing to overwrite it", file=target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        os.chmod(tmp, _dir_mode())
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp


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
    tmp = _temp_beside(target)
    try:
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


@contextmanager
def replace_directory(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``target`` (mode ``0777 & ~umask``); on normal exit it takes
    ``target``'s place whole: an existing ``target`` is renamed aside, the new one renamed in, the old one
    removed. Unlike :func:`atomic_directory`, nothing of the old directory survives (a table directory is
    rewritten, not merged). On any exception the temporary directory is removed and ``target`` is left
    as it was. The caller decides whether ``target`` may be replaced (a file there is a DataError)."""
    target = Path(target)
    tmp = _temp_beside(target)
    try:
        yield tmp
        if target.exists():
            old = target.with_name(f".{target.name}.old-{os.getpid()}-{threading.get_ident()}")
            os.rename(target, old)
            os.rename(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
