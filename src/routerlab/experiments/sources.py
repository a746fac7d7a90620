"""Where an experiment's tables come from: the embedded demo, a routerlab table directory, upstream files imported
on load (``format = ...``, cached on disk by the bytes they hold), or a table derived from an earlier one of the
same file (``from = ...`` with ``synth``, ``coreset`` or ``actors``); any of them cut to a seeded sample
(``n_queries``). The README's "Experiments as files" documents the keys; ``docs/replications.md`` uses them all.

The import cache (``$ROUTERLAB_CACHE_DIR/tables/<key>``, :func:`routerlab._paths.cache_dir`) is keyed by the
sha256 of the format, its options, the routerlab version and every source file's path (relative to the entry) and
bytes, so an edited file or a new routerlab re-imports, and a rerun of a replication reads the saved table.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from routerlab.errors import RouterlabError, UsageError


@dataclass(frozen=True)
class Derivation:
    """How a derived table is made from its base (``from``): one of a synthetic society (``synth`` with an
    optional ``map``), the greedy max-HSE coreset of ``coreset`` actors chosen on the base's training side, or
    the named ``actors``."""

    base: str
    synth: str | None = None
    society_map: str | None = None
    coreset: int | None = None
    actors: tuple[str, ...] = ()


@dataclass(frozen=True)
class Source:
    """A table's source: ``kind`` is ``demo`` (its options are the :class:`TableSpec`'s), ``dir`` (a routerlab
    table directory), ``import`` (upstream ``paths`` read with ``format``, its importer ``options`` and ``visible``
    columns) or ``derived``."""

    kind: str
    paths: tuple[Path, ...] = ()
    format: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    visible: tuple[str, ...] = ()
    derivation: Derivation | None = None


def default_cache_dir() -> Path:
    """Where imported tables are cached: ``$ROUTERLAB_CACHE_DIR/tables`` (or ``~/.cache/routerlab/tables``)."""
    from routerlab._paths import cache_dir

    return cache_dir("tables")


def is_table_dir(path: Path) -> bool:
    """Whether ``path`` is a routerlab table directory (it holds a manifest)."""
    from routerlab.data.store import MANIFEST

    return path.is_dir() and (path / MANIFEST).is_file()


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file())


def import_key(source: Source) -> str:
    """The import cache key of an ``import`` source (see the module docstring)."""
    from routerlab._version import __version__

    h = hashlib.sha256()
    head = {"format": source.format, "options": source.options, "visible": list(source.visible),
            "version": __version__}
    h.update(json.dumps(head, sort_keys=True, default=str).encode())
    for root in source.paths:
        for f in _files(root):
            h.update(str(f.relative_to(root) if f != root else f.name).encode())
            h.update(b"\x00")
            with f.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            h.update(b"\x00")
    return h.hexdigest()


def load_import(source: Source) -> Any:
    """Upstream files read with their format, from the import cache when it holds them (written after a fresh
    import, atomically; a cache that cannot be written only costs the next run another import)."""
    from routerlab.data.importers import read
    from routerlab.data.store import load, save

    assert source.format is not None
    target = default_cache_dir() / import_key(source)
    if is_table_dir(target):
        try:
            return load(target)
        except RouterlabError:
            pass  # a damaged cache entry: import again and replace it
    options = dict(source.options)
    if source.visible:
        options["visible"] = ",".join(source.visible)
    table = read(source.format, *source.paths, **options)
    with contextlib.suppress(OSError, RouterlabError):
        save(table, target)
    return table


def sample_queries(table: Any, n: int, seed: int) -> Any:
    """A seeded sample of ``n`` of ``table``'s queries, stratified by dataset (a longer sample holds a shorter
    one), in the table's order; the whole table when it has ``n`` queries or fewer."""
    import numpy as np

    from routerlab.llm.questions import stratified_order

    if table.n_queries <= n:
        return table
    rows = np.sort(stratified_order([str(d) for d in table.queries.dataset], seed)[:n])
    return table.select_queries(rows)


def derive(base: Any, d: Derivation, split: str, seed: int) -> Any:
    """The derived table ``d`` of ``base`` (see :class:`Derivation`); ``split`` and ``seed`` give the training
    side a coreset is chosen on."""
    if d.synth is not None:
        from routerlab.society.synthetic import default_society_map, load_society_map, synth_table

        smap = load_society_map(d.society_map) if d.society_map is not None else default_society_map(base)
        return synth_table(base, d.synth, smap)
    if d.coreset is not None:
        from routerlab.protocols.society import SocietySettings, run_society

        if not 1 <= d.coreset <= base.n_actors:
            raise UsageError(f"coreset = {d.coreset}: the table {d.base!r} has {base.n_actors} actors")
        train_side = "train" if split == "given" else split
        report = run_society(base, SocietySettings(coreset=d.coreset, split=train_side), seed)
        assert report.coreset is not None
        return base.select_actors(report.coreset.selected_names)
    unknown = [a for a in d.actors if a not in base.actor_names]
    if unknown:
        raise UsageError(f"actors: {', '.join(map(repr, unknown))} not in table {d.base!r} (its actors: "
                         f"{', '.join(base.actor_names)})")
    return base.select_actors(list(d.actors))
