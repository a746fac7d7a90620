"""Where routerlab keeps its caches: ``$ROUTERLAB_CACHE_DIR/<kind>`` when that variable is set, else
``~/.cache/routerlab/<kind>`` (the LLM call cache and the audit cache; the feature cache predates this and
uses ``$ROUTERLAB_CACHE_DIR`` itself, see :func:`routerlab.features.cache.default_cache_dir`)."""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "ROUTERLAB_CACHE_DIR"


def cache_dir(kind: str) -> Path:
    """The default cache directory of ``kind`` (``llm``, ``audit``)."""
    env = os.environ.get(ENV_VAR)
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "routerlab") / kind
