"""Where routerlab keeps its caches, one rule for all: ``$ROUTERLAB_CACHE_DIR/<kind>`` when that variable is
set, else ``~/.cache/routerlab/<kind>``.

Kinds: ``llm`` (the LLM call cache, and the local backend's converted GGUF models and hash memos under it,
:mod:`routerlab.llm.cache`), ``audit`` (the audit's section cache, :mod:`routerlab.reports.audit_cache`),
``features`` (the text-vector cache, :mod:`routerlab.features.cache`) and ``tables`` (upstream files an experiment
imports on load, :mod:`routerlab.experiments.sources`). An explicit directory (``--cache-dir``, a
``cache_dir=`` argument) replaces the default of the one cache it is given to. Nothing else reads the variable.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "ROUTERLAB_CACHE_DIR"
KINDS = ("llm", "audit", "features", "tables")


def cache_dir(kind: str) -> Path:
    """The default cache directory of ``kind`` (one of :data:`KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown cache kind {kind!r}; routerlab's caches are {', '.join(KINDS)}")
    env = os.environ.get(ENV_VAR)
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "routerlab") / kind
