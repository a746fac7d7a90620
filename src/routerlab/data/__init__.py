"""The data layer: the routing table, splits, the Parquet store, importers and the demo benchmark."""

from routerlab.data.join import join
from routerlab.data.splits import Split, make_split
from routerlab.data.table import Actors, Queries, RoutingTable, concat

__all__ = ["Actors", "Queries", "RoutingTable", "Split", "concat", "join", "make_split"]
