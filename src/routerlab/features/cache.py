"""On-disk vector cache, one entry per text: a new table that shares texts with an old one reuses them.

Layout: ``<root>/<encoder>/<fingerprint[:32]>/`` holds shards of at most ``SHARD_ROWS`` vectors,
each a pair ``<id>.vecs.npy`` (k, d) float32 and ``<id>.keys.npy`` (k,) 32-byte keys, where a key is
sha256(encoder fingerprint, text) and the fingerprint covers encoder name, version, options and,
for fitted encoders, the fit set. The index is the union of the ``.keys.npy`` files. Every file is
written once, atomically (:func:`routerlab._atomic.atomic_write`), and never changed, so concurrent runs cannot
corrupt each other. A shard's id is the sha256 of its keys and vectors and is checked on read: a
damaged shard gives a :class:`CacheWarning` and its texts are re-encoded, never wrong vectors.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from routerlab._atomic import atomic_write
from routerlab._paths import cache_dir

SHARD_ROWS = 4096
KEY_BYTES = 32

Vectors = npt.NDArray[np.float32]


class CacheWarning(UserWarning):
    """A cache file could not be used (damaged, partly written); its vectors are recomputed."""


def default_cache_dir() -> Path:
    """``$ROUTERLAB_CACHE_DIR/features`` if the variable is set, else ``~/.cache/routerlab/features``
    (:func:`routerlab._paths.cache_dir`, the rule every routerlab cache follows)."""
    return cache_dir("features")


def _shard_id(keys: npt.NDArray[np.bytes_], vecs: Vectors) -> str:
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(keys).tobytes())
    h.update(str(vecs.shape).encode())
    h.update(np.ascontiguousarray(vecs).tobytes())
    return h.hexdigest()[:32]


def _atomic_save(path: Path, array: np.ndarray) -> None:
    def save(tmp: str) -> None:
        with open(tmp, "wb") as fh:  # a handle: np.save would add ".npy" to a temp name without it
            np.save(fh, array, allow_pickle=False)

    atomic_write(path, save)


class VectorCache:
    """The cached vectors of one encoder configuration (one fingerprint)."""

    def __init__(self, root: str | os.PathLike[str], encoder: str, fingerprint: str) -> None:
        self.fingerprint = fingerprint
        self.dir = Path(root).expanduser() / encoder / fingerprint[:32]
        self._salt = fingerprint.encode() + b"\0"

    def keys(self, texts: Sequence[str]) -> npt.NDArray[np.bytes_]:
        """One 32-byte key per text: sha256(fingerprint, text)."""
        out = np.empty(len(texts), dtype=f"S{KEY_BYTES}")
        for i, t in enumerate(texts):
            out[i] = hashlib.sha256(self._salt + t.encode("utf-8")).digest()
        return out

    # -- reading -------------------------------------------------------------------------
    def _index(self) -> dict[bytes, tuple[str, int]]:
        index: dict[bytes, tuple[str, int]] = {}
        if not self.dir.is_dir():
            return index
        for path in sorted(self.dir.glob("*.keys.npy")):
            shard = path.name[: -len(".keys.npy")]
            try:
                keys = np.load(path, allow_pickle=False)
                if keys.ndim != 1 or keys.dtype != np.dtype(f"S{KEY_BYTES}"):
                    raise ValueError(f"keys of dtype {keys.dtype} and shape {keys.shape}")
            except (OSError, ValueError, EOFError) as exc:
                self._discard(shard, f"unreadable index file {path.name} ({exc})")
                continue
            for row, key in enumerate(keys.tolist()):
                index.setdefault(key, (shard, row))
        return index

    def _load_shard(self, shard: str) -> Vectors | None:
        try:
            keys = np.load(self.dir / f"{shard}.keys.npy", allow_pickle=False)
            vecs = np.load(self.dir / f"{shard}.vecs.npy", allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            self._discard(shard, f"unreadable shard ({exc})")
            return None
        if vecs.dtype != np.float32 or vecs.ndim != 2 or vecs.shape[0] != keys.shape[0]:
            self._discard(shard, f"vectors of dtype {vecs.dtype} and shape {vecs.shape} for {keys.shape[0]} keys")
            return None
        if _shard_id(keys, vecs) != shard:
            self._discard(shard, "checksum mismatch")
            return None
        return np.asarray(vecs)

    def _discard(self, shard: str, why: str) -> None:
        warnings.warn(f"feature cache {self.dir / shard}: {why}; its vectors will be recomputed",
                      CacheWarning, stacklevel=4)
        for suffix in (".keys.npy", ".vecs.npy"):
            with contextlib.suppress(OSError):
                (self.dir / f"{shard}{suffix}").unlink()

    def get(self, keys: npt.NDArray[np.bytes_]) -> tuple[npt.NDArray[np.bool_], Vectors | None]:
        """(found mask, vectors with the found rows filled) for ``keys``; vectors is None when none is found."""
        index = self._index()
        found = np.zeros(len(keys), dtype=bool)
        where: dict[str, list[tuple[int, int]]] = {}
        for i, key in enumerate(keys.tolist()):
            hit = index.get(key)
            if hit is not None:
                where.setdefault(hit[0], []).append((i, hit[1]))
        out: Vectors | None = None
        for shard, pairs in where.items():
            vecs = self._load_shard(shard)
            if vecs is None:
                continue
            if out is None:
                out = np.zeros((len(keys), vecs.shape[1]), dtype=np.float32)
            elif vecs.shape[1] != out.shape[1]:
                self._discard(shard, f"dimension {vecs.shape[1]} differs from {out.shape[1]}")
                continue
            rows = np.array(pairs, dtype=np.intp)
            out[rows[:, 0]] = vecs[rows[:, 1]]
            found[rows[:, 0]] = True
        return found, out

    # -- writing -------------------------------------------------------------------------
    def put(self, keys: npt.NDArray[np.bytes_], vectors: Vectors) -> None:
        """Store vectors under their keys, in new shards (existing files are never modified)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if len(keys) != vectors.shape[0]:
            raise ValueError(f"{len(keys)} keys for {vectors.shape[0]} vectors")
        if not len(keys):
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        for start in range(0, len(keys), SHARD_ROWS):
            k = np.ascontiguousarray(keys[start : start + SHARD_ROWS])
            v = vectors[start : start + SHARD_ROWS]
            shard = _shard_id(k, v)
            _atomic_save(self.dir / f"{shard}.vecs.npy", v)
            _atomic_save(self.dir / f"{shard}.keys.npy", k)  # written last: the shard counts once this exists

    def fetch(self, texts: Sequence[str], compute: Callable[[list[str]], Vectors]) -> tuple[Vectors, int]:
        """Vectors for ``texts`` from the cache, computing and storing the missing ones in one call.

        Returns (vectors, number computed). A failure to write the cache is a warning, not an error.
        """
        keys = self.keys(texts)
        found, cached = self.get(keys)
        missing = np.flatnonzero(~found)
        if missing.size == 0 and cached is not None:
            return cached, 0
        fresh = compute([texts[i] for i in missing.tolist()])
        if cached is not None and fresh.shape[1] != cached.shape[1]:
            warnings.warn(f"feature cache {self.dir}: cached dimension {cached.shape[1]} differs from the "
                          f"encoder's {fresh.shape[1]}; recomputing without the cache", CacheWarning, stacklevel=2)
            return compute(list(texts)), len(texts)
        out = cached if cached is not None else np.zeros((len(texts), fresh.shape[1]), dtype=np.float32)
        out[missing] = fresh
        try:
            self.put(keys[missing], fresh)
        except OSError as exc:
            warnings.warn(f"feature cache {self.dir} could not be written ({exc})", CacheWarning, stacklevel=2)
        return out, int(missing.size)
