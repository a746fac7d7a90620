"""``encode(table, "tfidf")``: the table's query texts -> :class:`Features`, through the on-disk cache.

Each distinct text is encoded once; vectors already in the cache (same encoder, version, options,
fit set and text) are read, never recomputed. Fitted encoders are fitted only when some text is
missing from the cache, and then on the training texts alone (see :func:`encode`).
"""

from __future__ import annotations

import os
import warnings
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from routerlab.data.splits import Split
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.features.cache import VectorCache, default_cache_dir
from routerlab.features.registry import Encoder, fit_set_hash, get_encoder, text_list
from routerlab.progress import task

FitOn = RoutingTable | Split | Iterable[str] | npt.NDArray[Any]



@dataclass(frozen=True)
class EncodeStats:
    """What one :func:`encode_with_stats` call did: ``texts`` queries, ``unique`` distinct texts,
    ``computed`` of them encoded (the rest came from the cache)."""

    texts: int
    unique: int
    computed: int


class FitCache:
    """Fitted encoders by fingerprint (encoder, options, fit set), owned by the caller.

    Pass one to several :func:`encode` calls that use the same encoder spec on the same training
    texts (train and test tables encoded separately, say) so the encoder is fitted once among
    them; without one, each call that must compute vectors fits its own. Bounded (least recently
    used out): a fitted encoder may hold a vocabulary or a model.
    """

    def __init__(self, max_size: int = 4) -> None:
        self.max_size = max_size
        self._fitted: OrderedDict[str, Encoder] = OrderedDict()

    def __contains__(self, fingerprint: object) -> bool:
        return fingerprint in self._fitted

    def __len__(self) -> int:
        return len(self._fitted)

    def get(self, fingerprint: str) -> Encoder | None:
        enc = self._fitted.get(fingerprint)
        if enc is not None:
            self._fitted.move_to_end(fingerprint)
        return enc

    def put(self, fingerprint: str, enc: Encoder) -> None:
        self._fitted[fingerprint] = enc
        while len(self._fitted) > self.max_size:
            self._fitted.popitem(last=False)


def encode(
    table: RoutingTable,
    encoder: str | Encoder = "tfidf",
    cache_dir: str | os.PathLike[str] | None = None,
    fit_on: FitOn | None = None,
    *,
    cache: bool = True,
    fits: FitCache | None = None,
    **options: Any,
) -> Features:
    """Vectors for every query of ``table``; :func:`encode_with_stats` without the counts."""
    return encode_with_stats(table, encoder, cache_dir, fit_on, cache=cache, fits=fits, **options)[0]


def encode_with_stats(
    table: RoutingTable,
    encoder: str | Encoder = "tfidf",
    cache_dir: str | os.PathLike[str] | None = None,
    fit_on: FitOn | None = None,
    *,
    cache: bool = True,
    fits: FitCache | None = None,
    **options: Any,
) -> tuple[Features, EncodeStats]:
    """Vectors for every query of ``table``, in table order, by ``encoder`` (a spec such as
    ``tfidf:dim=128``, or an :class:`Encoder`) with extra ``options``.

    Fitted encoders (tfidf) learn only from ``fit_on``: a training table, a :class:`Split` or
    positions / boolean mask of ``table`` (its ``train`` rows), or a list of texts. Left as None, it
    is the rows of ``table`` whose split is ``train``; a table with no split column is fitted on all
    its texts, with a warning; a table with splits but no ``train`` rows is an error, since fitting
    on test texts would put them in a space of their own. Encode the whole table once and take the
    train / test rows from the result (``Features.take``), so both halves share one space.

    ``cache_dir`` defaults to ``$ROUTERLAB_CACHE_DIR/features`` or ``~/.cache/routerlab/features``;
    ``cache=False`` bypasses it. ``fits`` (a :class:`FitCache` the caller keeps) lets several
    calls share one fit. Returns the features and what this call computed (:class:`EncodeStats`).
    """
    enc = get_encoder(encoder, **options)
    if not enc.cacheable:
        X = enc.encode_table(table)
        n = table.n_queries
        return Features(X, table, enc.spec), EncodeStats(texts=n, unique=n, computed=n)

    texts = text_list(table.queries.text)
    positions: dict[str, int] = {}
    inverse = np.fromiter((positions.setdefault(t, len(positions)) for t in texts), dtype=np.intp, count=len(texts))
    unique = list(positions)

    fit_texts: list[str] | None = None
    fit_hash = enc.fit_hash
    if enc.needs_fit:
        if fit_on is not None:
            fit_texts = _fit_texts(table, fit_on)
            fit_hash = fit_set_hash(fit_texts)
            if enc.fit_hash is not None and enc.fit_hash != fit_hash:
                raise UsageError(f"encoder {enc.spec!r} is already fitted on other texts; pass an unfitted "
                                 "encoder (or its spec) to fit it on fit_on, or leave fit_on out")
        elif not enc.is_fitted:
            fit_texts = _default_fit_texts(table, enc.name)
            fit_hash = fit_set_hash(fit_texts)
    fingerprint = enc.fingerprint(fit_hash)

    def compute(items: list[str]) -> npt.NDArray[np.float32]:
        fitting = (enc.needs_fit and fit_texts is not None and enc.fit_hash != fit_hash
                   and (fits is None or fingerprint not in fits))
        doing = f"fitting {enc.spec} on {len(fit_texts or [])} training texts, " if fitting else f"{enc.spec}: "
        with task(f"features: {doing}encoding {len(items)} texts"):
            ready = _fitted(enc, fingerprint, fit_texts, fit_hash, fits)
            return ready.transform(items)

    if cache:
        store = VectorCache(default_cache_dir() if cache_dir is None else Path(cache_dir), enc.name, fingerprint)
        U, computed = store.fetch(unique, compute)
    else:
        U, computed = compute(unique), len(unique)
    X = U[inverse] if len(texts) else np.zeros((0, U.shape[1] if U.ndim == 2 else 0), dtype=np.float32)
    return Features(X, table, enc.spec), EncodeStats(texts=len(texts), unique=len(unique), computed=computed)


def encode_pair(
    train: RoutingTable,
    test: RoutingTable,
    encoder: str | Encoder = "tfidf",
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    cache: bool = True,
    fits: FitCache | None = None,
    **options: Any,
) -> tuple[Features, Features]:
    """(train, test) features from one encoder fitted on the training texts only: the honest pair
    for evaluating a router on ``test``."""
    enc = get_encoder(encoder, **options)
    fit_on = train if enc.needs_fit else None
    return (encode(train, enc, cache_dir, fit_on=fit_on, cache=cache, fits=fits),
            encode(test, enc, cache_dir, fit_on=fit_on, cache=cache, fits=fits))


def _fitted(
    enc: Encoder, fingerprint: str, fit_texts: list[str] | None, fit_hash: str | None, fits: FitCache | None
) -> Encoder:
    """``enc`` fitted on ``fit_texts``; one fitted on the same set and kept in ``fits`` is reused."""
    if not enc.needs_fit or (enc.fit_hash is not None and enc.fit_hash == fit_hash):
        return enc
    known = fits.get(fingerprint) if fits is not None else None
    if known is not None:
        return known
    assert fit_texts is not None
    enc.fit(fit_texts)
    if fits is not None:
        fits.put(fingerprint, enc)
    return enc


def _fit_texts(table: RoutingTable, fit_on: FitOn) -> list[str]:
    if isinstance(fit_on, RoutingTable):
        return text_list(fit_on.queries.text)
    if isinstance(fit_on, Split):
        return text_list(table.queries.text[fit_on.train])
    if isinstance(fit_on, str):
        raise UsageError("fit_on is one string; pass a list of training texts, a training table or a Split")
    arr = np.asarray(fit_on if isinstance(fit_on, np.ndarray) else list(fit_on))
    if arr.dtype == bool:
        if arr.shape != (table.n_queries,):
            raise UsageError(f"fit_on mask has shape {arr.shape}, expected ({table.n_queries},)")
        return text_list(table.queries.text[arr])
    if arr.dtype.kind in "iu":
        if arr.size and (arr.min() < 0 or arr.max() >= table.n_queries):
            raise UsageError(f"fit_on position out of range 0..{table.n_queries - 1}")
        return text_list(table.queries.text[arr.astype(np.intp)])
    return text_list(arr.tolist())


def _default_fit_texts(table: RoutingTable, name: str) -> list[str]:
    split = table.queries.split.astype(str)
    train = split == "train"
    if train.any():
        return text_list(table.queries.text[train])
    if (split == "").all():
        warnings.warn(
            f"encoder {name!r} is fitted on all {table.n_queries} queries of a table without a split column, "
            "test queries included; pass fit_on=<training rows> for a train-only fit",
            UserWarning, stacklevel=3,
        )
        return text_list(table.queries.text)
    raise UsageError(
        f"encoder {name!r} must be fitted on training texts, and this table has no 'train' rows "
        f"(splits: {sorted(set(split.tolist()))}); pass fit_on=<the training table or rows>"
    )
