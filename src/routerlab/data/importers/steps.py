"""The ``steps`` format: multi-step episodes (agentic routing), one row per step in CSV, JSON lines or Parquet;
see :mod:`routerlab.data.longformat.steps` for the columns and the checks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from routerlab.data.importers import importer
from routerlab.data.longformat.steps import read_steps
from routerlab.data.table import RoutingTable


@importer("steps")
def read_steps_format(
    paths: list[Path],
    *,
    queries: str | Path | None = None,
    actors: str | Path | None = None,
    visible: str | Sequence[str] | None = None,
    name: str | None = None,
    batch_rows: int = 1 << 16,
) -> RoutingTable:
    """Agentic episodes, one row per step (query_id, actor, step, kind, times, score) in CSV/JSONL/Parquet.

    Options: ``queries=`` a queries file (query_id or id, text, dataset, split, metadata; or an input named
    ``*.queries.<ext>``), ``actors=`` an actors file as the long format reads it (or ``*.actors.<ext>``),
    ``visible="col,..."``: the queries file's metadata columns routers may read (the rest stay hidden),
    ``name``, ``batch_rows``. Each cell's score is its last step's, its latency the sum of ``latency_s + env_s``
    over its steps, its tokens the sums and its cost from the actors' prices.
    """
    return read_steps(paths, queries=queries, actors=actors, visible=visible, name=name, batch_rows=batch_rows)
