"""Synthetic specialist societies from a labelled partition of the items (SPEC 2; paper app. 10.3).

One binary expert per group: it scores 1 on every item of its group and 0 elsewhere, a specialist
with perfect but narrowly scoped expertise. A partition by subject gives the paper's SA society, one
by reasoning depth its RD society, and the union of the two its RD+SA pool. Experts of one
partition are mutually orthogonal, so their HSE is log2(number of groups) under cosine distance.

Items whose label is missing (``""`` or ``None``, routerlab's "unknown") belong to no group, so every
expert scores 0 on them; this choice is routerlab's, the paper labelling every item.

:func:`synth_table` turns such a society into a routing table over a real table's queries, so routers run
on it: a :class:`SocietyMap` (TOML; :func:`load_society_map`, built-in maps in ``maps/``) assigns each
dataset or category a subject-area cluster and a reasoning-depth tier, with the reasoning for borderline
cases written down as the paper does (docs/synth.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from routerlab._words import plural, verb
from routerlab.errors import DataError, UsageError
from routerlab.society.behaviour import Society

if TYPE_CHECKING:
    from routerlab.data.table import RoutingTable


def specialist_society(labels: npt.ArrayLike, *, prefix: str = "") -> Society:
    """One expert per distinct label (sorted), scoring 1 on its group's items and 0 elsewhere."""
    lab = np.asarray(labels, dtype=object).ravel()
    if lab.size == 0:
        raise DataError("a specialist society needs at least one item")
    text = np.array(["" if v is None else str(v) for v in lab.tolist()], dtype=object)
    groups = sorted({str(v) for v in text.tolist()} - {""})
    if not groups:
        raise DataError("every item label is missing; a specialist society needs labelled items")
    B = np.zeros((len(groups), lab.size), dtype=np.float32)
    for g, name in enumerate(groups):
        B[g, text == name] = 1.0
    notes = []
    unlabelled = int(np.count_nonzero(text == ""))
    if unlabelled:
        notes.append(f"{plural(unlabelled, 'item')} {verb(unlabelled, 'has', 'have')} no label; every expert scores "
                     f"0 on {verb(unlabelled, 'it', 'them')}")
    return Society(B, [f"{prefix}{g}" for g in groups], notes)


def item_labels(table: RoutingTable, by: str, split: str | None = "train") -> npt.NDArray[np.object_]:
    """The label of each item of ``table``'s behaviour matrix: ``dataset`` or a query metadata column.

    Uses the same rows as :func:`routerlab.society.behaviour.from_table` (``split``, or all rows of a
    table without split labels).
    """
    if by == "dataset":
        col: Any = table.queries.dataset
    elif by in table.queries.extra:
        col = table.queries.extra[by]
    else:
        known = ["dataset", *sorted(table.queries.extra)]
        raise UsageError(f"no query column {by!r} to partition the items by; columns are {known}")
    arr: npt.NDArray[np.object_] = np.asarray(col, dtype=object)
    if split is None:
        return arr
    labels = table.queries.split.astype(str)
    mask = labels == split
    if mask.any():
        return np.asarray(arr[mask], dtype=object)
    if split == "train" and not np.any(labels != ""):
        return arr
    raise UsageError(f"no query has split {split!r}; splits are {sorted(set(labels.tolist()))}")


def table_specialists(table: RoutingTable, by: str, split: str | None = "train") -> Society:
    """The specialist society of a table's items partitioned by ``by`` (``dataset`` or a query column)."""
    return specialist_society(item_labels(table, by, split), prefix=f"{by}=")


def union_society(*societies: Society) -> Society:
    """All actors of several societies over the same items (the paper's RD+SA pool)."""
    if not societies:
        raise UsageError("union_society needs at least one society")
    L = societies[0].n_items
    if any(s.n_items != L for s in societies):
        raise DataError(f"societies to unite must share the items; sizes {[s.n_items for s in societies]}")
    names: list[str] = []
    for s in societies:
        for name in s.names:
            new, i = name, 2
            while new in names:
                new, i = f"{name}#{i}", i + 1
            names.append(new)
    B = np.concatenate([np.asarray(s.matrix, dtype=np.float32) for s in societies], axis=0)
    return Society(B, names, [n for s in societies for n in s.notes])


def orthogonal_society(n: int, items_per_actor: int = 1) -> Society:
    """``n`` mutually orthogonal binary actors (each succeeds on its own items only): HSE = log2 n."""
    if n < 1 or items_per_actor < 1:
        raise UsageError("orthogonal_society needs n >= 1 and items_per_actor >= 1")
    return specialist_society(np.repeat([f"g{i:04d}" for i in range(n)], items_per_actor))


# --------------------------------------------------------------------------- societies as routing tables

SOCIETIES = ("sa", "rd", "rd+sa")
"""The synthetic societies of :func:`synth_table`: subject-area, reasoning-depth and their union (paper sec. 6)."""

PAPER_TIERS: dict[str, str] = {
    "R1": "Direct Lookup",
    "R2": "Concept Application",
    "R3": "Multi-Step Reasoning",
    "R4": "Formal Symbolic Reasoning",
    "R5": "Adversarial & Expert-Level",
}
"""The HSE paper's five reasoning-depth tiers (appendix 10.3), from surface recall to adversarial expert reasoning;
a map may declare its own in a ``[tiers]`` table."""

FORMAT_MAPS: dict[str, str] = {"mmlu-pro": "mmlu-pro", "routerdc": "llmrouter", "routeprofile": "llmrouter",
                               "routerbench": "routerbench"}
"""The built-in map tried first for a table imported from each format (:func:`default_society_map`)."""

_MAP_KEYS = {"name", "description", "by", "tiers", "assign"}
_ENTRY_KEYS = {"cluster", "tier", "reason"}
_SHOWN = 5  # unmapped values an error names before "and N more"


@dataclass(frozen=True, eq=False)
class SocietyMap:
    """Which subject-area cluster and reasoning-depth tier each dataset (or value of a query column) belongs to.

    ``by`` names the query column the map keys on (``dataset`` or a metadata column such as ``category``);
    ``clusters`` and ``tiers`` map each key to its cluster and tier id; ``tier_names`` gives each tier id its
    name, in tier order; ``reasons`` holds the written reasoning of the borderline entries. ``source`` is where
    the map was read from and ``sha256`` the hash of its bytes, recorded in a synthetic table's provenance.
    """

    name: str
    by: str
    clusters: Mapping[str, str]
    tiers: Mapping[str, str]
    tier_names: Mapping[str, str]
    reasons: Mapping[str, str]
    source: str
    sha256: str
    description: str = ""

    @property
    def keys(self) -> list[str]:
        """The values of ``by`` this map assigns, in the file's order."""
        return list(self.clusters)

    @property
    def where(self) -> str:
        """How an error names this map: ``map 'mmlu-pro' (FILE)``."""
        return f"map {self.name!r} ({self.source})"

    def unmapped(self, labels: npt.ArrayLike) -> list[str]:
        """The distinct labels (``""`` for a missing one) that this map does not assign, sorted."""
        seen = {"" if v is None else str(v) for v in np.asarray(labels, dtype=object).ravel().tolist()}
        return sorted(seen - set(self.clusters))

    def to_dict(self) -> dict[str, Any]:
        """The provenance record of this map: name, source, hash and what it keys on."""
        return {"name": self.name, "source": self.source, "sha256": self.sha256, "by": self.by}


def builtin_maps() -> list[str]:
    """The names of the society maps routerlab ships (``src/routerlab/society/maps/*.toml``)."""
    from importlib import resources

    folder = resources.files("routerlab.society") / "maps"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_society_map(spec: str | Path) -> SocietyMap:
    """A society map: a built-in name (:func:`builtin_maps`: ``mmlu-pro``, ``llmrouter``, ...) or a TOML file's path.

    A ``Path``, a string ending in ``.toml`` or naming an existing file is read as a file; anything else is a
    built-in name. A bad file is one :class:`DataError` naming it; an unknown name one :class:`UsageError`.
    """
    from importlib import resources

    text = str(spec)
    if isinstance(spec, Path) or text.endswith(".toml") or Path(text).is_file():
        path = Path(text)
        if not path.is_file():
            what = "is not a file" if path.exists() else "no such file"
            raise UsageError(f"society map {text}: {what} (a built-in map is one of {', '.join(builtin_maps())})")
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise DataError(f"cannot read the society map: {exc.strerror or exc}", file=path) from None
        return parse_society_map(raw, str(path), default_name=path.stem)
    names = builtin_maps()
    if text not in names:
        raise UsageError(f"unknown society map {text!r}; the built-in maps are {', '.join(names)}, or give the "
                         "path of a .toml file")
    resource = resources.files("routerlab.society") / "maps" / f"{text}.toml"
    return parse_society_map(resource.read_bytes(), f"built-in routerlab/society/maps/{text}.toml", default_name=text)


def parse_society_map(raw: bytes, source: str, *, default_name: str = "map") -> SocietyMap:
    """Read a society map from the bytes of its TOML file; every problem is one :class:`DataError` naming ``source``.

    The file holds ``name``, ``description``, ``by`` (the query column it keys on; default ``dataset``), an
    optional ``[tiers]`` table (tier id = name; default the paper's R1..R5) and one ``[assign.KEY]`` table per
    dataset or column value with ``cluster``, ``tier`` and an optional ``reason``.
    """
    import hashlib
    import tomllib

    def bad(message: str, field: str | None = None) -> DataError:
        return DataError(message, file=source, field=field)

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise bad(f"not a valid TOML file: {exc}") from None
    unknown = sorted(set(data) - _MAP_KEYS)
    if unknown:
        raise bad(f"unknown key(s) {unknown}; a society map has {sorted(_MAP_KEYS)}")
    name, by, description = data.get("name", default_name), data.get("by", "dataset"), data.get("description", "")
    for key, value in (("name", name), ("by", by), ("description", description)):
        if not isinstance(value, str) or (key != "description" and not value.strip()):
            raise bad(f"must be a non-empty string, got {value!r}", key)
    tier_table = data.get("tiers", PAPER_TIERS)
    if not isinstance(tier_table, dict) or not tier_table or not all(
            isinstance(v, str) and v.strip() for v in tier_table.values()):
        raise bad("must be a table of tier id = name (e.g. R1 = \"Direct Lookup\")", "tiers")
    assign = data.get("assign")
    if not isinstance(assign, dict) or not assign:
        raise bad("a society map needs an [assign.KEY] table (cluster and tier) for each dataset or value", "assign")
    clusters: dict[str, str] = {}
    tiers: dict[str, str] = {}
    reasons: dict[str, str] = {}
    for key, entry in assign.items():
        where = f"assign.{key}"
        if not isinstance(entry, dict):
            raise bad("must be a table with cluster, tier and an optional reason", where)
        extra = sorted(set(entry) - _ENTRY_KEYS)
        if extra:
            raise bad(f"unknown key(s) {extra}; an entry has cluster, tier and reason", where)
        cluster, tier, reason = entry.get("cluster"), entry.get("tier"), entry.get("reason", "")
        if not isinstance(cluster, str) or not cluster.strip():
            raise bad("needs a cluster (a non-empty string)", where)
        if not isinstance(tier, str) or tier not in tier_table:
            raise bad(f"tier must be one of {', '.join(tier_table)}, got {tier!r}", where)
        if not isinstance(reason, str):
            raise bad(f"reason must be a string, got {reason!r}", where)
        clusters[key], tiers[key] = cluster.strip(), tier
        if reason.strip():
            reasons[key] = " ".join(reason.split())
    return SocietyMap(name=name.strip(), by=by.strip(), clusters=MappingProxyType(clusters),
                      tiers=MappingProxyType(tiers), tier_names=MappingProxyType(dict(tier_table)),
                      reasons=MappingProxyType(reasons), source=source, sha256=hashlib.sha256(raw).hexdigest(),
                      description=description.strip())


def _map_labels(table: RoutingTable, society_map: SocietyMap) -> npt.NDArray[np.object_]:
    """Every query's value of the map's ``by`` column; an unmapped value is one UsageError naming the map."""
    labels = item_labels(table, society_map.by, split=None)
    missing = society_map.unmapped(labels)
    if missing:
        text = np.array(["" if v is None else str(v) for v in labels.tolist()], dtype=object)
        shown = [f"{v!r} ({plural(int(np.count_nonzero(text == v)), 'query', 'queries')})" if v else
                 f"no {society_map.by} ({plural(int(np.count_nonzero(text == v)), 'query', 'queries')})"
                 for v in missing[:_SHOWN]]
        if len(missing) > _SHOWN:
            shown.append(f"and {len(missing) - _SHOWN} more")
        raise UsageError(f"{len(missing)} {society_map.by} value{'s' if len(missing) > 1 else ''} {', '.join(shown)} "
                         f"of table {table.name!r} {verb(len(missing), 'is', 'are')} not in the society "
                         f"{society_map.where}; add [assign.KEY] entries for {verb(len(missing), 'it', 'them')} "
                         "or pass another map")
    return labels


def default_society_map(table: RoutingTable) -> SocietyMap:
    """The built-in map for ``table``: the one of its import format first (``meta['format']``), else any built-in
    map that assigns every query; none: one UsageError asking for a map."""
    meta = table.meta
    fmt = meta.get("format")
    if fmt == "synth" and isinstance(meta.get("synth"), Mapping):
        fmt = meta["synth"].get("source_format")
    names = builtin_maps()
    first = FORMAT_MAPS.get(fmt) if isinstance(fmt, str) else None
    order = [first] if first in names else []
    order += [n for n in names if n not in order]
    for name in order:
        candidate = load_society_map(name)
        try:
            labels = item_labels(table, candidate.by, split=None)
        except UsageError:
            continue
        if not candidate.unmapped(labels):
            return candidate
    what = f"(format {fmt!r}) " if isinstance(fmt, str) else ""
    raise UsageError(f"no built-in society map assigns every dataset of table {table.name!r} {what}(built-in maps: "
                     f"{', '.join(names)}); write a map file and pass it (--map FILE.toml), see docs/synth.md")


def synth_table(table: RoutingTable, society: str, society_map: SocietyMap) -> RoutingTable:
    """A routing table over ``table``'s queries whose actors are the paper's synthetic specialists.

    ``sa``: one agent per subject-area cluster of the map, scoring 1 on every query of its cluster and 0
    elsewhere; ``rd``: the same per reasoning-depth tier; ``rd+sa``: both (names ``sa:CLUSTER``, ``rd:TIER``).
    Only clusters and tiers that hold a query of ``table`` get an agent. Ids, text, datasets, splits and query
    metadata (with its visibility) are ``table``'s. The agents carry scores only, no tokens, latency or cost:
    the paper's experts are binary performance vectors, and any cost would be invented (cost metrics read as
    unavailable, as on any score-only import). ``meta['synth']`` records the source table and its hash, the
    society and the map with its hash.
    """
    from routerlab.data.table import Actors, RoutingTable

    if society not in SOCIETIES:
        raise UsageError(f"unknown society {society!r}; use one of {', '.join(SOCIETIES)}")
    labels = [str(v) for v in _map_labels(table, society_map).tolist()]
    names: list[str] = []
    kinds: list[str] = []
    expertise: list[str] = []
    columns: list[npt.NDArray[np.bool_]] = []
    if society in ("sa", "rd+sa"):
        cluster_of = np.array([society_map.clusters[v] for v in labels], dtype=object)
        for cluster in sorted(set(cluster_of.tolist())):
            names.append(f"sa:{cluster}")
            kinds.append("sa")
            expertise.append(cluster)
            columns.append(cluster_of == cluster)
    if society in ("rd", "rd+sa"):
        tier_of = np.array([society_map.tiers[v] for v in labels], dtype=object)
        for tier, tier_name in society_map.tier_names.items():
            hit = tier_of == tier
            if hit.any():
                names.append(f"rd:{tier}")
                kinds.append("rd")
                expertise.append(tier_name)
                columns.append(hit)
    score = np.stack(columns, axis=1).astype(np.float32) if columns else np.zeros((table.n_queries, 0), np.float32)
    fmt = table.meta.get("format")
    provenance = {"society": society, "source_table": table.name, "source_hash": table.content_hash,
                  "source_format": fmt if isinstance(fmt, str) else None, "map": society_map.to_dict(),
                  "costs": "none: synthetic specialists carry scores only (no tokens, latency or cost)"}
    actors = Actors.create(names, extra={"society": np.array(kinds, dtype=object),
                                         "expertise": np.array(expertise, dtype=object)})
    return RoutingTable(queries=table.queries, actors=actors, score=score, name=f"{table.name}-{society}",
                        meta={"format": "synth", "synth": provenance})


def society_rows(table: RoutingTable) -> tuple[str | None, str]:
    """Which queries a synthetic society's HSE is read on, as :func:`routerlab.society.hse`'s ``split`` and in words:
    the train split when the table has one, else every query (a table without split labels, or only test)."""
    labels = table.queries.split.astype(str)
    n_train = int(np.count_nonzero(labels == "train"))
    if n_train:
        return "train", f"the {plural(n_train, 'train query', 'train queries')}"
    return None, f"all {plural(table.n_queries, 'query', 'queries')}"
