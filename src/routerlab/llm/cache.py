"""On-disk cache of LLM calls, keyed by content: a rerun costs nothing and an interrupted run resumes.

A key is the sha256 of a canonical JSON of (backend kind, model_id, operation, messages, decoding settings
or option letters). Each record is one small JSON file ``<dir>/<key[:2]>/<key>.json``, written once,
atomically (temp file + ``os.replace``), so concurrent writers and a killed run never leave a half-written
record; a file that cannot be read or does not hold its own key is a miss (and is recomputed), never a crash.
Nothing secret is ever part of a key or a record: specs name API keys by their environment variable only.

Default directory: ``$ROUTERLAB_CACHE_DIR/llm`` when that variable is set, else ``~/.cache/routerlab/llm``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from routerlab._atomic import write_text
from routerlab._paths import cache_dir
from routerlab.llm.base import (
    GREEDY,
    Backend,
    ChoiceScores,
    Completion,
    Decoding,
    Message,
    check_letters,
)

FORMAT = 1


class CacheWarning(UserWarning):
    """A cache record could not be used or written; the call is made again."""


def default_cache_dir() -> Path:
    """``$ROUTERLAB_CACHE_DIR/llm`` if the variable is set, else ``~/.cache/routerlab/llm``."""
    return cache_dir("llm")


def call_key(kind: str, model_id: str, op: str, messages: Sequence[Message], params: Mapping[str, Any]) -> str:
    """sha256 (hex) of the canonical JSON of one call."""
    payload = {"format": FORMAT, "kind": kind, "model_id": model_id, "op": op,
               "messages": [[m.role, m.content] for m in messages], "params": dict(params)}
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CallCache:
    """JSON records by key in a sharded directory (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.dir = Path(directory).expanduser() if directory is not None else default_cache_dir()
        self.calls = self.dir / "calls"
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def path(self, key: str) -> Path:
        return self.calls / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The record stored under ``key``, or None (missing, unreadable or not this key's)."""
        path = self.path(key)
        try:
            with open(path, encoding="utf-8") as fh:
                doc = json.load(fh)
            if not isinstance(doc, dict) or doc.get("key") != key or not isinstance(doc.get("record"), dict):
                raise ValueError("not a record of this key")
            record: dict[str, Any] = doc["record"]
        except FileNotFoundError:
            self._count(hit=False)
            return None
        except (OSError, ValueError) as exc:
            warnings.warn(f"llm call cache: {path} is unreadable ({exc}); the call is made again",
                          CacheWarning, stacklevel=2)
            with contextlib.suppress(OSError):
                path.unlink()
            self._count(hit=False)
            return None
        self._count(hit=True)
        return record

    def put(self, key: str, record: Mapping[str, Any]) -> None:
        """Store ``record`` under ``key`` atomically; a failure to write is a warning, not an error."""
        try:
            text = json.dumps({"key": key, "record": dict(record)}, ensure_ascii=False, allow_nan=False)
            write_text(self.path(key), text)
        except (OSError, ValueError) as exc:  # ValueError: a NaN/inf number JSON cannot hold
            warnings.warn(f"llm call cache {self.dir}: record {key[:12]} could not be written ({exc})",
                          CacheWarning, stacklevel=2)

    def _count(self, *, hit: bool) -> None:
        with self._lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1

    def __repr__(self) -> str:
        return f"CallCache({str(self.dir)!r}, hits={self.hits}, misses={self.misses})"


class CachedBackend(Backend):
    """A backend whose :meth:`complete` and :meth:`choice_scores` (and their batched forms) go through a
    :class:`CallCache`: a hit returns the stored answer with ``cached=True`` and the latency first measured.

    Streaming is not cached (serve streams live), nor is sampling without a seed (each call is meant to be
    a fresh draw). Everything else is forwarded to the wrapped backend,
    which stays reachable as ``inner``.
    """

    def __init__(self, inner: Backend, cache: CallCache) -> None:
        super().__init__(inner.spec, cache_dir=inner.cache_dir)
        self.inner = inner
        self.cache = cache
        self.kind = inner.kind or inner.spec.kind  # type: ignore[misc]
        self.name = inner.name
        self.model_id = inner.model_id
        self.supports_choice_scores = inner.supports_choice_scores  # type: ignore[misc]

    def _key(self, op: str, messages: Sequence[Message], params: Mapping[str, Any]) -> str:
        return call_key(self.kind, self.model_id, op, messages, params)

    def complete(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Completion:
        return self.complete_batch([messages], decoding)[0]

    def complete_batch(self, batch: Sequence[Sequence[Message]], decoding: Decoding = GREEDY) -> list[Completion]:
        if not decoding.greedy and decoding.seed is None:  # an unseeded draw is meant to differ each time
            return self.inner.complete_batch(batch, decoding)
        keys = [self._key("complete", m, decoding.as_dict()) for m in batch]
        return self._through_cache(keys, _completion_or_none,
                                   lambda rows: self.inner.complete_batch([batch[i] for i in rows], decoding))

    def choice_scores(self, messages: Sequence[Message], letters: Sequence[str]) -> ChoiceScores:
        return self.choice_scores_batch([messages], letters)[0]

    def choice_scores_batch(self, batch: Sequence[Sequence[Message]], letters: Sequence[str]) -> list[ChoiceScores]:
        letters = check_letters(letters)
        if not self.inner.supports_choice_scores:
            return self.inner.choice_scores_batch(batch, letters)  # raises its own clear error
        keys = [self._key("choice_scores", m, {"letters": list(letters)}) for m in batch]
        return self._through_cache(keys, lambda rec: _scores_or_none(rec, letters),
                                   lambda rows: self.inner.choice_scores_batch([batch[i] for i in rows], letters))

    def _through_cache(self, keys: list[str], decode: Callable[[Mapping[str, Any]], _R | None],
                       compute: Callable[[list[int]], list[_R]]) -> list[_R]:
        """One result per key: from the cache where a readable record is there, else computed in one batch for the
        missing positions (``compute`` gets their indices) and stored: every cached operation's lookup."""
        out: list[_R | None] = []
        for key in keys:
            rec = self.cache.get(key)
            out.append(None if rec is None else decode(rec))
        missing = [i for i, r in enumerate(out) if r is None]
        if missing:
            for i, result in zip(missing, compute(missing), strict=True):
                self.cache.put(keys[i], result.to_record())
                out[i] = result
        return [r for r in out if r is not None]

    def stream(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Iterator[str]:
        return self.inner.stream(messages, decoding)

    def count_tokens(self, text: str) -> int | None:
        return self.inner.count_tokens(text)

    def context_window(self) -> int | None:
        return self.inner.context_window()

    def prompt_tokens(self, messages: Sequence[Message], *, limit: int | None = None) -> int | None:
        return self.inner.prompt_tokens(messages, limit=limit)

    def complete_cancellable(self, messages: Sequence[Message], decoding: Decoding,
                             cancel: threading.Event) -> Completion:
        """A cache hit as :meth:`complete`; a miss runs cancellably and is stored only when not cancelled."""
        if not decoding.greedy and decoding.seed is None:
            return self.inner.complete_cancellable(messages, decoding, cancel)
        key = self._key("complete", messages, decoding.as_dict())
        rec = self.cache.get(key)
        hit = None if rec is None else _completion_or_none(rec)
        if hit is not None:
            return hit
        result = self.inner.complete_cancellable(messages, decoding, cancel)
        if not cancel.is_set():  # a cut-short answer is not the answer to cache
            self.cache.put(key, result.to_record())
        return result

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:  # extra methods of the wrapped backend (e.g. local's tokenizer)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"CachedBackend({self.inner!r}, {self.cache!r})"



class _Record(Protocol):
    def to_record(self) -> dict[str, Any]: ...


_R = TypeVar("_R", bound=_Record)

def _completion_or_none(rec: Mapping[str, Any]) -> Completion | None:
    try:
        return Completion.from_record(rec, cached=True)
    except (KeyError, TypeError, ValueError):
        return None


def _scores_or_none(rec: Mapping[str, Any], letters: tuple[str, ...]) -> ChoiceScores | None:
    try:
        sc = ChoiceScores.from_record(rec, cached=True)
    except (KeyError, TypeError, ValueError):
        return None
    return sc if sc.letters == letters and len(sc.logits) == len(letters) else None
