"""routerlab: tells LLM-router builders whether their routing is accurate, cheap, fast, robust and
meaningful, on real data.

The public entry points are the routing table and its readers::

    table = routerlab.read("routerdc", "train.json", "test.json")
    table.save("tables/llmrouter")
    table = routerlab.load("tables/llmrouter")
"""

from __future__ import annotations

from typing import Any

from routerlab._version import __version__
from routerlab.data.importers import read
from routerlab.data.join import join
from routerlab.data.store import load
from routerlab.data.table import Actors, Queries, RoutingTable, concat

__all__ = ["Actors", "Queries", "RoutingTable", "__version__", "concat", "join", "load", "read"]

_LAZY_SUBMODULES = frozenset({"datasets", "metrics", "routers", "society", "features", "reports", "protocols", "cli"})


def __getattr__(name: str) -> Any:
    """``routerlab.datasets``, ``routerlab.metrics``, ... after a plain ``import routerlab``, imported on first use
    so that ``import routerlab`` stays light (no torch, no plotting)."""
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
