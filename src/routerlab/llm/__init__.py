"""LLM backends: one contract (:class:`Backend`) for a local transformers model and any OpenAI-compatible
endpoint, the actor specs that name them (``NAME=KIND:MODEL,...``) and an on-disk call cache.

Importing this package loads neither torch, transformers nor openai: each backend kind's module is imported
the first time a spec of that kind is loaded (see :mod:`routerlab.llm.base`).
"""

from __future__ import annotations

from routerlab.llm.base import (
    GREEDY,
    Backend,
    BackendSpec,
    ChoiceScores,
    Completion,
    Decoding,
    Message,
    backend_class,
    backend_kinds,
    load_backend,
    messages_from,
    parse_actor_list,
    parse_actor_spec,
    register_backend,
)
from routerlab.llm.cache import CachedBackend, CallCache, default_cache_dir

__all__ = [
    "GREEDY",
    "Backend",
    "BackendSpec",
    "CachedBackend",
    "CallCache",
    "ChoiceScores",
    "Completion",
    "Decoding",
    "Message",
    "backend_class",
    "backend_kinds",
    "default_cache_dir",
    "load_backend",
    "messages_from",
    "parse_actor_list",
    "parse_actor_spec",
    "register_backend",
]
