"""routerlab: tells LLM-router builders whether their routing is accurate, cheap, fast, robust and
meaningful, on real data.

The public entry points are the routing table and its readers::

    table = routerlab.read("routerdc", "train.json", "test.json")
    table.save("tables/llmrouter")
    table = routerlab.load("tables/llmrouter")
"""

from __future__ import annotations

__version__ = "0.1.0"

from routerlab.data.importers import read
from routerlab.data.store import load
from routerlab.data.table import Actors, Queries, RoutingTable, concat

__all__ = ["Actors", "Queries", "RoutingTable", "__version__", "concat", "load", "read"]
