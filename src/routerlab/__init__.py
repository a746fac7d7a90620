"""routerlab: tells LLM-router builders whether their routing is accurate, cheap, fast, robust and
meaningful, on real data.

The public entry points are the routing table and its readers::

    table = routerlab.read("routerdc", "train.json", "test.json")
    table.save("tables/llmrouter")
    table = routerlab.load("tables/llmrouter")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from routerlab._version import __version__

if TYPE_CHECKING:
    from routerlab.data.importers import read
    from routerlab.data.join import join
    from routerlab.data.store import load
    from routerlab.data.table import Actors, Queries, RoutingTable, concat

__all__ = ["Actors", "Queries", "RoutingTable", "__version__", "concat", "join", "load", "read"]

_LAZY_ATTRIBUTES = {"read": "routerlab.data.importers", "join": "routerlab.data.join", "load": "routerlab.data.store",
                    "Actors": "routerlab.data.table", "Queries": "routerlab.data.table",
                    "RoutingTable": "routerlab.data.table", "concat": "routerlab.data.table"}
_LAZY_SUBMODULES = frozenset({"datasets", "metrics", "routers", "society", "features", "reports", "protocols", "cli"})


def __getattr__(name: str) -> Any:
    """The data layer's entry points (``routerlab.read``, ``routerlab.RoutingTable``, ...) and ``routerlab.datasets``,
    ``routerlab.metrics``, ... imported on first use, so that ``import routerlab`` stays light (no numpy, no pyarrow:
    ``routerlab --version`` needs neither)."""
    import importlib

    if name in _LAZY_ATTRIBUTES:
        value = getattr(importlib.import_module(_LAZY_ATTRIBUTES[name]), name)
        globals()[name] = value  # looked up once
        return value
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_LAZY_SUBMODULES})
