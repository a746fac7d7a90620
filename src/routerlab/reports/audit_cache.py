"""The audit's section cache: a rerun after a crash or a changed option recomputes only what changed.

One file per section result, ``<dir>/<section>.<base key>.pkl``, written atomically (pickle of a
:class:`CachedSection`). The *base key* is the sha256 of what every section reads: the table's content
hash, the split (train and test positions), the seed, the routerlab version, the section's name and
module source, and the values of the options it registered in ``depends``. What a section *actually*
read is recorded while it runs and checked before its entry is reused: every option it looked at (with
the content of a ``logs`` file, not just its name) and every ``ctx.shared`` entry, by the key of the
section that produced it. So an undeclared option read, or a leaderboard recomputed with other routers,
can never hand a stale result to the partial-observability section that reads it.

At most :data:`KEEP` entries per section are kept, the least recently used removed first. An entry that
cannot be read (damaged, truncated, from another Python) is ignored and recomputed; a
cache directory that cannot be written costs only the reuse. Timings of computed sections are kept in
``timings.json`` beside the entries, keyed by section, table shape bucket and ``--quick``, for the
progress line's estimates.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import math
import os
import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from routerlab._atomic import atomic_write
from routerlab._paths import cache_dir
from routerlab._version import __version__

FORMAT = 1  # bump when CachedSection changes shape: older entries are then simply not found
TIMINGS = "timings.json"
KEEP = 8
"""Entries kept per section (option variants, tables, seeds); older ones are removed when a new one is stored."""
MISSING = "<missing>"  # what an option a section read but was not given counts as


def default_audit_cache_dir() -> Path:
    """``$ROUTERLAB_CACHE_DIR/audit`` if that variable is set, else ``~/.cache/routerlab/audit`` (the
    LLM call cache's convention, :func:`routerlab._paths.cache_dir`)."""
    return cache_dir("audit")


def _sha(*parts: Any) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(json.dumps(part, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()


def option_fingerprint(key: str, value: Any) -> str:
    """What an option's value contributes to a key: its JSON text, and for ``logs`` (a file path) also the
    file's size and content hash, so an edited logs file is not mistaken for the old one."""
    text = json.dumps(value, sort_keys=True, default=str)
    if key == "logs" and isinstance(value, str | Path) and str(value):
        path = Path(value)
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            digest = "unreadable"
        text += f"|{digest}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def split_hash(train_ids: np.ndarray, test_ids: np.ndarray) -> str:
    """sha256 of the split's train and test query ids, in order (ids, not positions: the same split of a table
    stored in another row order has the same hash)."""
    h = hashlib.sha256()
    for part in (train_ids, test_ids):
        h.update(f"{len(part)}\n".encode())
        h.update("\n".join(map(str, part)).encode())
        h.update(b"\0")
    return h.hexdigest()


def source_hash(fn: Any) -> str:
    """sha256 of the file that defines ``fn`` (a section's module): an edited section is recomputed even
    when the version string did not change (a development install)."""
    try:
        path = inspect.getsourcefile(fn)
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else ""
    except (OSError, TypeError):
        return ""


def base_key(*, table_hash: str, split: str, seed: int, name: str, source: str,
             depends: dict[str, str]) -> str:
    """The key every lookup starts from (see the module docstring)."""
    return _sha(FORMAT, __version__, table_hash, split, seed, name, source, sorted(depends.items()))


class Tracked(dict[str, Any]):
    """A dict that records which keys were read (``reads``), every way a section may read one; reading all
    of it (iteration, ``items()``, a copy) marks every key as read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads: set[str] = set()
        self.read_all = False

    def __getitem__(self, key: str) -> Any:
        self.reads.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.reads.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.reads.add(str(key))
        return super().__contains__(key)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self.reads.add(key)
        return super().setdefault(key, default)

    def pop(self, key: str, *default: Any) -> Any:
        self.reads.add(key)
        return super().pop(key, *default)

    def __iter__(self) -> Iterator[str]:
        self.read_all = True
        return super().__iter__()

    def keys(self) -> Any:
        self.read_all = True
        return super().keys()

    def items(self) -> Any:
        self.read_all = True
        return super().items()

    def values(self) -> Any:
        self.read_all = True
        return super().values()

    def copy(self) -> dict[str, Any]:
        self.read_all = True
        return dict(super().items())

    def read_keys(self) -> set[str]:
        """Every key read since the last :meth:`reset` (all present keys when it was read whole)."""
        return self.reads | (set(super().keys()) if self.read_all else set())

    def reset(self) -> None:
        self.reads = set()
        self.read_all = False


@dataclass
class CachedSection:
    """One section's result and everything needed to reuse it: the Section object, the ``ctx.shared``
    entries it wrote, the files it wrote into the report directory (relative path -> bytes), what it read
    (option fingerprints; shared keys -> producing section's key, None = absent) and how long it took."""

    section: Any
    shared: dict[str, Any]
    files: dict[str, bytes]
    option_reads: dict[str, str]
    shared_reads: dict[str, str | None]
    seconds: float
    base: str = ""

    def effective_key(self) -> str:
        """The key later sections see for what this one wrote: its base key and what it read."""
        return _sha(self.base, sorted(self.option_reads.items()), sorted(self.shared_reads.items()))


class SectionCache:
    """The audit's cache in ``root`` (None = disabled): :meth:`load` a still-valid entry, :meth:`store` a
    new one, and the timing history for estimates."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self.problems: list[str] = []  # entries ignored or writes that failed, for the progress lines
        self._timings: dict[str, float] | None = None

    @property
    def enabled(self) -> bool:
        return self.root is not None

    def _path(self, name: str, base: str) -> Path:
        assert self.root is not None
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
        return self.root / f"{safe}.{base[:40]}.pkl"

    def has(self, name: str, base: str) -> bool:
        """Whether an entry file exists (not whether it is valid): for the time-left estimate."""
        return self.root is not None and self._path(name, base).is_file()

    def load(self, name: str, base: str, options: dict[str, Any],
             producers: dict[str, str]) -> CachedSection | None:
        """The entry for ``base`` if it exists, can be read, and everything it read is unchanged: the same
        option values and, for every shared entry it read, the same producing section's key."""
        if self.root is None:
            return None
        path = self._path(name, base)
        if not path.is_file():
            return None
        try:
            with open(path, "rb") as fh:
                entry = pickle.load(fh)
            if not isinstance(entry, CachedSection) or entry.base != base:
                raise ValueError("not an audit cache entry")
        except Exception as exc:  # damaged or foreign file: recompute, never fail the audit
            self.problems.append(f"ignored unreadable cache entry {path.name} ({type(exc).__name__})")
            return None
        for key, fp in entry.option_reads.items():
            if option_fingerprint(key, options.get(key, MISSING)) != fp:
                return None
        for key, producer in entry.shared_reads.items():
            if producers.get(key) != producer:
                return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: kept by the pruning
        return entry

    def store(self, name: str, entry: CachedSection) -> None:
        """Write ``entry`` atomically; a failure (full disk, read-only directory) is noted, not raised."""
        if self.root is None:
            return
        path = self._path(name, entry.base)
        try:
            data = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
            _write(path, data)
        except Exception as exc:  # an unpicklable result or an unwritable directory: no reuse, no failure
            self.problems.append(f"could not cache section {name} ({type(exc).__name__}: {exc})")
            return
        self._prune(path)

    def _prune(self, kept: Path) -> None:
        """Keep the :data:`KEEP` most recently used entries of a section (a hit refreshes an entry's time)."""
        prefix = kept.name.rsplit(".", 2)[0]
        entries = []
        for p in kept.parent.glob(f"{prefix}.*.pkl"):
            with contextlib.suppress(OSError):
                entries.append((p.stat().st_mtime_ns, p))
        for _, p in sorted(entries, reverse=True)[KEEP:]:
            if p != kept:
                with contextlib.suppress(OSError):
                    p.unlink()

    # -- timings, for the progress line's estimates -------------------------------------------------

    def _load_timings(self) -> dict[str, float]:
        if self._timings is None:
            self._timings = {}
            if self.root is not None:
                try:
                    raw = json.loads((self.root / TIMINGS).read_text(encoding="utf-8"))
                    self._timings = {str(k): float(v) for k, v in raw.items() if isinstance(v, int | float)}
                except (OSError, ValueError, AttributeError):
                    pass
        return self._timings

    def last_seconds(self, timing_key: str) -> float | None:
        """How long the section took the last time it was computed on a table of this shape bucket."""
        return self._load_timings().get(timing_key)

    def record_seconds(self, timing_key: str, seconds: float) -> None:
        """Remember a computed section's time (written at once, atomically; failures ignored)."""
        timings = self._load_timings()
        timings[timing_key] = round(float(seconds), 3)
        if self.root is None:
            return
        text = json.dumps(timings, sort_keys=True, indent=1) + "\n"
        with contextlib.suppress(OSError):
            _write(self.root / TIMINGS, text.encode())


def _write(path: Path, data: bytes) -> None:
    def go(tmp: str) -> None:
        Path(tmp).write_bytes(data)

    atomic_write(path, go)


def timing_key(name: str, n_queries: int, n_actors: int, quick: bool, given: Sequence[str] = ()) -> str:
    """A section's timing slot: its name, the table's shape in powers of two, ``--quick`` and which of the
    options it declared are ``given`` (their names, not values)."""
    bucket = f"{round(math.log2(max(n_queries, 1)))}x{round(math.log2(max(n_actors, 1)))}"
    return f"{name}|{bucket}|{'quick' if quick else 'full'}|{','.join(sorted(given))}"


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` (relative path -> size, mtime in ns): to find what a section wrote."""
    out = {}
    for p in root.rglob("*"):
        if p.is_file():
            st = p.stat()
            out[p.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out


def written_files(root: Path, before: dict[str, tuple[int, int]]) -> dict[str, bytes]:
    """The bytes of every file under ``root`` that is new or changed since ``before``."""
    after = snapshot(root)
    return {rel: (root / rel).read_bytes() for rel, stamp in sorted(after.items()) if before.get(rel) != stamp}
