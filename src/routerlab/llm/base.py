"""The backend contract: one loaded model that answers chat messages, and the actor specs that name one.

An *actor spec* reads ``NAME=KIND:MODEL[,key=value...]``:

- ``qwen=local:qwen2.5-coder-1.5b`` — a built-in model (see :mod:`routerlab.llm.models`),
- ``mine=local:/models/x.gguf,dtype=float32`` — a local directory or GGUF file,
- ``gpt=openai:gpt-4o-mini@https://api.example.com/v1,key_env=EXAMPLE_KEY`` — an OpenAI-compatible endpoint.

A comma list names several actors; a part that does not start a new ``NAME=KIND:`` continues the options
of the one before (``a=local:smollm2-135m,b=openai:m@http://h/v1,key_env=K,concurrency=4``).
Options every kind accepts: ``input_price`` and ``output_price`` (USD per 1M tokens, for the table's cost)
and ``params_b`` (the model's size in billions of parameters, recorded on the actor).

Backend kinds are found by name in a registry; the built-in ones (``local``, ``openai``) live in modules
imported only when a spec of that kind is used, so ``import routerlab.llm`` loads neither torch,
transformers nor openai. Plugins register under the entry-point group ``routerlab.backends``.

Every backend's calls go through an on-disk cache (:mod:`routerlab.llm.cache`) when loaded with
:func:`load_backend`: a rerun costs nothing and an interrupted run resumes.
"""

from __future__ import annotations

import importlib
import math
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from routerlab._registry import Registry
from routerlab._spec import check_option_type, coerce
from routerlab.errors import UsageError

__all__ = [
    "COMMON_OPTIONS",
    "GREEDY",
    "Backend",
    "BackendSpec",
    "ChoiceScores",
    "Completion",
    "Decoding",
    "Message",
    "backend_class",
    "backend_kinds",
    "load_backend",
    "messages_from",
    "parse_actor_list",
    "parse_actor_spec",
    "register_backend",
]

ROLES = frozenset({"system", "user", "assistant", "tool", "developer"})


# ----------------------------------------------------------------------------------------- values
@dataclass(frozen=True)
class Message:
    """One chat message (``role`` is system, user, assistant, tool or developer)."""

    role: str
    content: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise UsageError(f"message role {self.role!r} is not one of {', '.join(sorted(ROLES))}")
        if not isinstance(self.content, str):
            raise UsageError(f"message content must be text, got {type(self.content).__name__}")


def messages_from(value: str | Message | Sequence[Message | Mapping[str, Any]]) -> tuple[Message, ...]:
    """Messages from a bare prompt (one user message), a Message, or a list of Messages / role-content dicts."""
    if isinstance(value, str):
        return (Message("user", value),)
    if isinstance(value, Message):
        return (value,)
    out = []
    for m in value:
        if isinstance(m, Message):
            out.append(m)
        elif isinstance(m, Mapping) and "role" in m and "content" in m:
            out.append(Message(str(m["role"]), m["content"]))
        else:
            raise UsageError(f"a message must be a Message or a dict with role and content, got {m!r}")
    if not out:
        raise UsageError("no messages to send: a call needs at least one message")
    return tuple(out)


@dataclass(frozen=True)
class Decoding:
    """How to decode: greedy (``temperature=0``, the default, deterministic) or sampled with a seed.

    ``stop`` strings end the answer (the stop string itself is not returned); ``seed`` makes sampling
    repeatable where the backend supports it and is part of the cache key.
    """

    max_tokens: int = 256
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise UsageError(f"decoding: max_tokens must be an integer >= 1, got {self.max_tokens!r}")
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
            raise UsageError(f"decoding: temperature must be a finite number >= 0, got {t!r}")
        p = self.top_p
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not (0 < p <= 1):
            raise UsageError(f"decoding: top_p must lie in (0, 1], got {p!r}")
        stop: object = self.stop
        if isinstance(stop, str) or not all(isinstance(s, str) and s for s in self.stop):
            raise UsageError(f"decoding: stop must be a tuple of non-empty strings, got {self.stop!r}")
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "temperature", float(t))
        object.__setattr__(self, "top_p", float(p))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form (the cache key uses it)."""
        return {"max_tokens": self.max_tokens, "temperature": self.temperature, "stop": list(self.stop),
                "top_p": self.top_p, "seed": self.seed}


@dataclass(frozen=True)
class Completion:
    """One answer. ``latency_s`` is the wall time of the call (as first measured, also on a cache hit);
    ``ttft_s`` the time to the first generated token and ``itl_s`` the mean time between later tokens
    (None where the backend cannot tell, e.g. a non-streamed call or a one-token answer)."""

    text: str
    tokens_in: int
    tokens_out: int
    latency_s: float
    ttft_s: float | None
    itl_s: float | None
    cached: bool = False
    finish_reason: str = "stop"

    def to_record(self) -> dict[str, Any]:
        return {"text": self.text, "tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                "latency_s": self.latency_s, "ttft_s": self.ttft_s, "itl_s": self.itl_s,
                "finish_reason": self.finish_reason}

    @classmethod
    def from_record(cls, rec: Mapping[str, Any], *, cached: bool = True) -> Completion:
        ttft, itl = rec.get("ttft_s"), rec.get("itl_s")
        return cls(text=str(rec["text"]), tokens_in=int(rec["tokens_in"]), tokens_out=int(rec["tokens_out"]),
                   latency_s=float(rec["latency_s"]), ttft_s=None if ttft is None else float(ttft),
                   itl_s=None if itl is None else float(itl), cached=cached,
                   finish_reason=str(rec.get("finish_reason", "stop")))


@dataclass(frozen=True)
class ChoiceScores:
    """The next-token logits of each option letter after the prompt (one forward pass, no generation)."""

    letters: tuple[str, ...]
    logits: tuple[float, ...]
    latency_s: float
    tokens_in: int
    cached: bool = False

    @property
    def choice(self) -> str:
        """The letter with the highest logit (the first one on a tie)."""
        best = max(range(len(self.logits)), key=lambda i: (self.logits[i], -i))
        return self.letters[best]

    def probabilities(self) -> tuple[float, ...]:
        """Softmax of the logits over the letters only."""
        top = max(self.logits)
        ex = [math.exp(v - top) for v in self.logits]
        total = sum(ex)
        return tuple(e / total for e in ex)

    def to_record(self) -> dict[str, Any]:
        return {"letters": list(self.letters), "logits": list(self.logits), "latency_s": self.latency_s,
                "tokens_in": self.tokens_in}

    @classmethod
    def from_record(cls, rec: Mapping[str, Any], *, cached: bool = True) -> ChoiceScores:
        return cls(letters=tuple(str(x) for x in rec["letters"]), logits=tuple(float(x) for x in rec["logits"]),
                   latency_s=float(rec["latency_s"]), tokens_in=int(rec["tokens_in"]), cached=cached)


GREEDY = Decoding()
"""The default decoding (greedy, 256 tokens), a module-level value for argument defaults."""


def check_letters(letters: Sequence[str]) -> tuple[str, ...]:
    """Option letters must be distinct, non-empty and without spaces."""
    out = tuple(letters)
    if not out or len(set(out)) != len(out) or not all(isinstance(s, str) and s.strip() == s and s for s in out):
        raise UsageError(f"option letters must be distinct non-empty strings without spaces, got {list(out)!r}")
    return out


# -------------------------------------------------------------------------------------- the spec
COMMON_OPTIONS: Mapping[str, Any] = {"input_price": 0.0, "output_price": 0.0, "params_b": 0.0}


@dataclass(frozen=True)
class BackendSpec:
    """Which backend kind runs which model with which options (option values already coerced).

    Options never hold secrets: an API key is named by the environment variable that holds it
    (``key_env``), so a spec can be written to logs, caches and reports as is.
    """

    kind: str
    model: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """``kind:model[,key=value...]`` with the options sorted (no secrets are ever in a spec)."""
        opts = ",".join(f"{k}={_fmt(v)}" for k, v in sorted(self.options.items()))
        return f"{self.kind}:{self.model}" + (f",{opts}" if opts else "")

    def option(self, key: str, default: Any = None) -> Any:
        return self.options.get(key, default)

    @property
    def input_price(self) -> float:
        """USD per 1M input tokens (0 when not given)."""
        return float(self.options.get("input_price", 0.0))

    @property
    def output_price(self) -> float:
        """USD per 1M output tokens (0 when not given)."""
        return float(self.options.get("output_price", 0.0))

    @property
    def params_b(self) -> float | None:
        """The model's size in billions of parameters, when given."""
        v = self.options.get("params_b")
        return None if v is None else float(v)

    def backend_options(self) -> dict[str, Any]:
        """The options meant for the backend itself (without prices and size)."""
        return {k: v for k, v in self.options.items() if k not in COMMON_OPTIONS}

    def __hash__(self) -> int:
        return hash(self.describe())


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, tuple):
        return "/".join(_fmt(x) for x in v)
    return str(v)


_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
_START_RE = re.compile(r"^\s*([^=,:\s][^=,:]*)=([A-Za-z][\w\-]*):(?!//)")


def parse_actor_spec(text: str) -> tuple[str, BackendSpec]:
    """``NAME=KIND:MODEL[,key=value...]`` -> (name, spec); every malformed spec is one UsageError line."""
    raw = text.strip()
    name, eq, rest = raw.partition("=")
    name = name.strip()
    if not eq or not name or ":" in name:
        raise UsageError(f"actor spec {raw!r}: write NAME=KIND:MODEL (e.g. small=local:smollm2-135m)")
    if not _NAME_RE.match(name):
        raise UsageError(f"actor spec {raw!r}: name {name!r} may hold only letters, digits, '_', '-' and '.'")
    kind, colon, body = rest.partition(":")
    kind = kind.strip()
    if not colon or not kind:
        raise UsageError(f"actor spec {raw!r}: write NAME=KIND:MODEL; known kinds: {', '.join(backend_kinds())}")
    if kind not in backend_kinds():
        known = ", ".join(backend_kinds())
        raise UsageError(f"actor spec {raw!r}: unknown backend kind {kind!r}; known kinds: {known}")
    model, *parts = body.split(",")
    model = model.strip()
    if not model:
        raise UsageError(f"actor spec {raw!r}: the model is empty; write NAME={kind}:MODEL")
    options: dict[str, Any] = {}
    allowed = dict(COMMON_OPTIONS)
    allowed.update(_kind_options(kind))
    for part in parts:
        if not part.strip():
            continue
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            raise UsageError(f"actor spec {raw!r}: bad option {part.strip()!r}; write key=value")
        if key not in allowed:
            raise UsageError(f"actor spec {raw!r}: unknown option {key!r} for kind {kind}; "
                             f"known: {', '.join(sorted(allowed))}")
        if key in options:
            raise UsageError(f"actor spec {raw!r}: option {key!r} given twice")
        default = allowed[key]
        val = value if isinstance(default, str) else coerce(value)
        check_option_type(f"actor spec {raw!r}", key, val, default)
        if key in COMMON_OPTIONS and (isinstance(val, bool) or not math.isfinite(float(val)) or float(val) < 0):
            raise UsageError(f"actor spec {raw!r}: option {key} must be a finite number >= 0, got {value!r}")
        options[key] = val
    return name, BackendSpec(kind, model, options)


def parse_backend_spec(text: str, *, option: str = "--backend") -> BackendSpec:
    """``KIND:MODEL[,key=value...]`` (an actor spec without ``NAME=``; ``;`` may stand for ``,`` where the spec sits
    inside a router spec, ``prompted:backend=local:smollm2-135m;threads=1``) -> spec; bad input is one UsageError."""
    raw = text.strip().replace(";", ",")
    if not raw or raw.startswith("="):
        raise UsageError(f"{option} {text!r}: write KIND:MODEL[,key=value...] (e.g. local:smollm2-135m)")
    try:
        return parse_actor_spec(f"backend={raw}")[1]
    except UsageError as exc:
        raise UsageError(str(exc).replace("actor spec 'backend=", f"{option} '").replace(
            "write NAME=KIND:MODEL", "write KIND:MODEL").replace("write NAME=", "write ")) from None


def parse_actor_list(text: str) -> list[tuple[str, BackendSpec]]:
    """A comma list of actor specs; a part that does not start ``NAME=KIND:`` continues the previous one's
    options. Actor names must be distinct."""
    chunks: list[str] = []
    for part in text.split(","):
        if _START_RE.match(part) or not chunks:
            chunks.append(part)
        else:
            chunks[-1] += "," + part
    out: list[tuple[str, BackendSpec]] = []
    seen: set[str] = set()
    for chunk in chunks:
        if not chunk.strip():
            raise UsageError(f"--actors {text!r}: an empty actor spec; write NAME=KIND:MODEL,NAME=KIND:MODEL")
        name, spec = parse_actor_spec(chunk)
        if name in seen:
            raise UsageError(f"--actors {text!r}: actor name {name!r} given twice")
        seen.add(name)
        out.append((name, spec))
    return out


# ------------------------------------------------------------------------------------ the backend
class Backend(ABC):
    """One loaded model. Calls are thread-safe (a backend may serialise them internally).

    ``name`` is the spec as text (``spec.describe()``), ``model_id`` the content identity the call cache
    keys on (a checksum of the weights, the endpoint and model name, ...), and ``kind`` the registry name.
    ``cache_dir`` is the llm cache root (None: the default), for backends that keep files there (a local
    GGUF converted once). Subclasses declare ``options`` (name -> default; the default's type is the option's type) and
    implement :meth:`complete`; the rest has working defaults.
    """

    kind: ClassVar[str] = ""
    options: ClassVar[Mapping[str, Any]] = {}
    supports_choice_scores: ClassVar[bool] = False

    def __init__(self, spec: BackendSpec, *, cache_dir: Path | None = None) -> None:
        self.spec = spec
        self.cache_dir = cache_dir
        self.name = spec.describe()
        self.model_id = f"{spec.kind}:{spec.model}"

    @abstractmethod
    def complete(self, messages: Sequence[Message], decoding: Decoding = Decoding()) -> Completion:
        """Answer one chat; measure latency (and TTFT/ITL where possible)."""

    def complete_batch(self, batch: Sequence[Sequence[Message]], decoding: Decoding = Decoding()) -> list[Completion]:
        """Answer several chats (default: one after the other; a local backend batches them)."""
        return [self.complete(m, decoding) for m in batch]

    def stream(self, messages: Sequence[Message], decoding: Decoding = Decoding()) -> Iterator[str]:
        """Text deltas of one answer, in order (default: the whole answer as one chunk)."""
        yield self.complete(messages, decoding).text

    def choice_scores(self, messages: Sequence[Message], letters: Sequence[str]) -> ChoiceScores:
        """The next-token logits of each option letter after the chat (local backends only)."""
        raise UsageError(f"backend {self.name}: option-letter scores need a local model "
                         f"(kind {self.kind or self.spec.kind} cannot give logits)")

    def choice_scores_batch(self, batch: Sequence[Sequence[Message]], letters: Sequence[str]) -> list[ChoiceScores]:
        """:meth:`choice_scores` for several chats (default: one after the other)."""
        return [self.choice_scores(m, letters) for m in batch]

    def count_tokens(self, text: str) -> int | None:
        """Tokens of ``text`` by the model's tokenizer, when the backend has one."""
        return None

    def context_window(self) -> int | None:
        """The most tokens the model reads and writes in one call (prompt + answer), or None where unknown
        (then a server does not check prompts against it)."""
        return None

    def prompt_tokens(self, messages: Sequence[Message], *, limit: int | None = None) -> int | None:
        """Tokens of the prompt the model reads for ``messages`` (chat template included), or None where the
        backend cannot count. With ``limit``, counting may stop early once the prompt is known to hold more
        than ``limit`` tokens, and any number above ``limit`` is returned: a very long prompt costs a bounded
        amount of work to refuse."""
        return None

    def complete_cancellable(self, messages: Sequence[Message], decoding: Decoding,
                             cancel: threading.Event) -> Completion:
        """:meth:`complete`, stopping between tokens once ``cancel`` is set (the answer so far is returned);
        the default cannot stop early and answers whole."""
        return self.complete(messages, decoding)

    def close(self) -> None:  # noqa: B027 - an optional hook, not an abstract method
        """Release what the backend holds (connections, threads); the default holds nothing."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


# ----------------------------------------------------------------------------------- the registry
B = TypeVar("B", bound=type[Backend])

_BUILTIN_MODULES: dict[str, str] = {"local": "routerlab.llm.local", "openai": "routerlab.llm.openai_backend"}
_REGISTRY: Registry[type[Backend]] = Registry("backend kind", group="routerlab.backends")
_IMPORT_LOCK = threading.Lock()


def register_backend(kind: str) -> Callable[[B], B]:
    """Class decorator: ``@register_backend("local") class LocalBackend(Backend)``."""

    def decorate(cls: B) -> B:
        cls.kind = kind
        _REGISTRY.add(kind, cls)
        return cls

    return decorate


def backend_kinds() -> list[str]:
    """Every known backend kind (built-in ones without importing their modules, and plugins)."""
    return sorted(set(_BUILTIN_MODULES) | set(_REGISTRY.names()))


def backend_class(kind: str) -> type[Backend]:
    """The class of one kind, importing its built-in module the first time."""
    if kind in _BUILTIN_MODULES and _REGISTRY.get(kind, None) is None:
        with _IMPORT_LOCK:
            try:
                importlib.import_module(_BUILTIN_MODULES[kind])
            except ModuleNotFoundError as exc:
                raise UsageError(f"backend kind {kind!r} is not available here ({exc}); "
                                 "install the llm extra: pip install -e '.[llm]'") from exc
    cls = _REGISTRY.get(kind, None)
    if cls is None:
        raise UsageError(f"unknown backend kind {kind!r}; known kinds: {', '.join(backend_kinds())}")
    return cls


def _kind_options(kind: str) -> Mapping[str, Any]:
    return backend_class(kind).options


def load_backend(spec: BackendSpec, *, cache_dir: Path | None = None, cache: bool = True) -> Backend:
    """The backend of ``spec``, loaded; with ``cache`` (the default) every call goes through the on-disk
    call cache under ``cache_dir`` (default: :func:`routerlab.llm.cache.default_cache_dir`)."""
    cls = backend_class(spec.kind)
    backend = cls(spec, cache_dir=cache_dir)
    if not cache:
        return backend
    from routerlab.llm.cache import CachedBackend, CallCache

    return CachedBackend(backend, CallCache(cache_dir))
