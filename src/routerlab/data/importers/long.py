"""The ``long`` format: one row per (query, actor) cell in CSV, JSON lines or Parquet; see
:mod:`routerlab.data.longformat` for the columns, the renaming presets and the streaming design."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from routerlab.data.importers import importer
from routerlab.data.longformat import read_long
from routerlab.data.table import RoutingTable


@importer("long")
def read_long_format(
    paths: list[Path],
    *,
    actors: str | Path | None = None,
    columns: Mapping[str, str] | None = None,
    rename: str | Mapping[str, str] | None = None,
    on_duplicate: str = "error",
    qualify_ids: bool = False,
    batch_rows: int = 1 << 20,
    name: str | None = None,
    progress: bool | None = None,
    visible: str | Sequence[str] | None = None,
    hidden: str | Sequence[str] | None = None,
) -> RoutingTable:
    """Generic long rows (query_id, actor, score, ...) in CSV/JSONL/Parquet, streamed; EmbedLLM, RouterEval.

    Options are those of :func:`routerlab.data.longformat.read_long`: ``actors=`` side-file,
    ``columns={canonical: file_column}`` or ``rename="file_col=canonical,..."``,
    ``on_duplicate="error"|"last"|"mean"``, ``qualify_ids``, ``batch_rows``, ``name``, ``progress``, and
    ``visible="col,..."`` / ``hidden="col,..."``: per-query file columns kept as query metadata, visible to
    routers or hidden from them (every other column is ignored, so nothing unnamed reaches a router).
    """
    return read_long(paths, actors=actors, columns=columns, rename=rename, on_duplicate=on_duplicate,
                     qualify_ids=qualify_ids, batch_rows=batch_rows, name=name, progress=progress,
                     visible=visible, hidden=hidden)
