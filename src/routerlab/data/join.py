"""Joining routing tables by question: several tables' actors side by side on the same queries (SPEC 1, 6).

The two-model case needs this: the small model's outcomes come from ``routerlab collect`` on some questions, the
large model's from a table in ../shared/data, and the two must be matched **by query id, never by position**.
:func:`join` aligns every table on the first one's ids, refuses a query id whose text differs between tables
and an actor name that occurs in two tables, and records what it did (sources with their content hashes, ids
dropped per table) in ``meta["join"]``; ``small=`` / ``large=`` designate the two-model pair
(``meta["two_model"]``) that ``routerlab two-model`` and the audit read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, cast, get_args

import numpy as np
import numpy.typing as npt

from routerlab.data.episodes import Episodes
from routerlab.data.table import (
    ACTOR_NUMERIC_FIELDS,
    MATRIX_FIELDS,
    Actors,
    Matrix,
    Queries,
    RoutingTable,
    _concat_actor_extra,
)
from routerlab.errors import DataError, UsageError

How = Literal["inner", "left"]
"""``inner``: the query ids present in every table; ``left``: every id of the first table (cells of a later
table that lacks the id are NaN, unobserved)."""


def _label(t: RoutingTable, i: int) -> str:
    """How an error names a table: its position among the joined ones and its name."""
    return f"table {i + 1} ({t.name!r})"


def _kept_ids(tables: Sequence[RoutingTable], how: How) -> npt.NDArray[np.object_]:
    """The joined table's query ids, in the first table's order."""
    first = tables[0].queries.ids
    if how == "left":
        return first
    keep = np.ones(first.shape[0], dtype=bool)
    for t in tables[1:]:
        keep &= np.isin(first.astype(str), t.queries.ids.astype(str))
    return first[keep]


def _positions(t: RoutingTable, ids: npt.NDArray[np.object_]) -> npt.NDArray[np.intp]:
    """Row of each id of ``ids`` in ``t`` (-1 where ``t`` lacks it)."""
    index = {str(q): i for i, q in enumerate(t.queries.ids.tolist())}
    return np.fromiter((index.get(str(q), -1) for q in ids.tolist()), dtype=np.intp, count=ids.shape[0])


def _stripped(values: npt.NDArray[Any]) -> npt.NDArray[np.object_]:
    return np.array([str(v).strip() for v in values.tolist()], dtype=object)


def _joined_text(tables: Sequence[RoutingTable], rows: list[npt.NDArray[np.intp]]) -> npt.NDArray[np.object_]:
    """The query text of the joined rows: the first table's where it knows it, else the first later table's.

    Two known texts of one id must agree once surrounding white space is stripped; ``""`` is the data model's
    "unknown" and conflicts with nothing. A disagreement is a DataError naming the id and both tables.
    """
    n = rows[0].shape[0]
    text = np.full(n, "", dtype=object)
    reference = np.full(n, "", dtype=object)  # stripped text seen so far, and which table gave it
    source = np.full(n, -1, dtype=np.intp)
    for i, (t, pos) in enumerate(zip(tables, rows, strict=True)):
        present = pos >= 0
        raw = np.full(n, "", dtype=object)
        raw[present] = t.queries.text[pos[present]]
        mine = _stripped(raw)
        known_here, known_before = mine != "", reference != ""
        clash = np.flatnonzero(known_here & known_before & (mine != reference))
        if clash.size:
            k = int(clash[0])
            other = int(source[k])
            qid = tables[0].queries.ids[rows[0][k]] if rows[0][k] >= 0 else t.queries.ids[pos[k]]
            raise DataError(
                f"query id {str(qid)!r} has different text in {_label(tables[other], other)} "
                f"({_short(str(reference[k]))}) and {_label(t, i)} ({_short(str(mine[k]))}); a join matches "
                "queries by id, so the same id must be the same question", field="text")
        fill = known_here & ~known_before
        text[fill] = raw[fill]
        reference[fill] = mine[fill]
        source[fill] = i
    return text


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _check_actors(tables: Sequence[RoutingTable]) -> list[str]:
    """The joined actor names in table order; a name in two tables is a DataError naming both."""
    owner: dict[str, int] = {}
    for i, t in enumerate(tables):
        for a in t.actor_names:
            if a in owner:
                j = owner[a]
                raise DataError(
                    f"actor {a!r} is in {_label(tables[j], j)} and in {_label(t, i)}; a join puts different "
                    "actors side by side (select or rename one first)", field="actor")
            owner[a] = i
    return list(owner)


def _joined_actors(tables: Sequence[RoutingTable], names: list[str]) -> Actors:
    col = {a: j for j, a in enumerate(names)}
    attrs = {k: np.concatenate([getattr(t.actors, k) for t in tables]) for k in ACTOR_NUMERIC_FIELDS}
    return Actors.create(names, **attrs, extra=_concat_actor_extra(tables, names, col))


def _aligned(col: npt.NDArray[Any], pos: npt.NDArray[np.intp]) -> npt.NDArray[Any]:
    """``col`` at rows ``pos``; missing rows (-1) are NaN in a float column, None otherwise."""
    if (pos >= 0).all():
        return col[pos]
    if col.dtype.kind == "f":
        out: npt.NDArray[Any] = np.full(pos.shape[0], np.nan, dtype=col.dtype)
    else:
        out = np.full(pos.shape[0], None, dtype=object)
    out[pos >= 0] = col[pos[pos >= 0]]
    return out


def _joined_extra(
    tables: Sequence[RoutingTable], rows: list[npt.NDArray[np.intp]]
) -> tuple[dict[str, np.ndarray], set[str]]:
    """The first table's query metadata columns, then a later table's columns the earlier ones lack; and which
    of them are visible to routers (as the table each column came from declares)."""
    extra: dict[str, np.ndarray] = {}
    visible: set[str] = set()
    for t, pos in zip(tables, rows, strict=True):
        for key, col in t.queries.extra.items():
            if key not in extra:
                extra[key] = _aligned(np.asarray(col), pos)
                if key in t.queries.visible:
                    visible.add(key)
    return extra, visible


def _joined_matrices(
    tables: Sequence[RoutingTable], rows: list[npt.NDArray[np.intp]], m: int
) -> dict[str, Matrix | None]:
    """Every matrix any table holds, (kept queries, all actors); cells a table cannot supply are NaN."""
    n = rows[0].shape[0]
    out: dict[str, Matrix | None] = {}
    for key in MATRIX_FIELDS:
        if key != "score" and all(getattr(t, key) is None for t in tables):
            out[key] = None
            continue
        mat = np.full((n, m), np.nan, dtype=np.float32)
        start = 0
        for t, pos in zip(tables, rows, strict=True):
            src = getattr(t, key)
            present = pos >= 0
            if src is not None:
                mat[np.flatnonzero(present), start:start + t.n_actors] = src[pos[present]]
            start += t.n_actors
        out[key] = mat
    return out


def _check_pair(names: list[str], small: str | None, large: str | None) -> dict[str, str] | None:
    """The validated two-model designation, or None when neither is given."""
    if small is None and large is None:
        return None
    if small is None or large is None:
        raise UsageError("a two-model pair needs both small and large (--small A --large B)")
    for role, actor in (("small", small), ("large", large)):
        if actor not in names:
            raise UsageError(f"{role} model {actor!r} is not an actor of the joined table; actors are {names}")
    if small == large:
        raise UsageError(f"the small and the large model must differ; both are {small!r}")
    return {"small": small, "large": large}


def join(
    tables: Sequence[RoutingTable],
    name: str | None = None,
    how: str = "inner",
    *,
    small: str | None = None,
    large: str | None = None,
) -> RoutingTable:
    """The tables' actors side by side on the same questions, matched by query id (module docstring).

    Rows follow the first table's order (``how="inner"``: the ids in every table; ``"left"``: all of the first
    table's). Query text must agree per id (stripped; ``""`` = unknown); actor names must be distinct across
    tables. Dataset, split and query metadata come from the first table; a later table's metadata columns
    are added when the earlier ones lack them, each visible to routers when the table it came from says so.
    ``meta["join"]`` records how, the sources (name, content hash, queries, actors, ids dropped) and the kept
    count; ``small``/``large`` set ``meta["two_model"]``.
    """
    tables = list(tables)
    if not tables:
        raise UsageError("join needs at least one table")
    if how not in get_args(How):
        raise UsageError(f"join: how must be one of {', '.join(map(repr, get_args(How)))}, got {how!r}")
    names = _check_actors(tables)
    pair = _check_pair(names, small, large)
    ids = _kept_ids(tables, cast(How, how))
    if ids.shape[0] == 0:
        raise DataError(f"no query id is in every table ({', '.join(_label(t, i) for i, t in enumerate(tables))}); "
                        "a join matches queries by id, so the tables must share some")
    rows = [_positions(t, ids) for t in tables]
    text = _joined_text(tables, rows)
    first = tables[0]
    extra, visible = _joined_extra(tables, rows)
    queries = Queries.create(ids, text=text, dataset=first.queries.dataset[rows[0]],
                             split=first.queries.split[rows[0]], extra=extra, visible=visible)
    sources = []
    for t, pos in zip(tables, rows, strict=True):
        matched = int(np.count_nonzero(pos >= 0))
        sources.append({"name": t.name, "source": t.meta.get("source", t.name), "content_hash": t.content_hash,
                        "n_queries": t.n_queries, "actors": t.actor_names, "matched": matched,
                        "dropped": t.n_queries - matched})
    meta: dict[str, Any] = {
        "source": [t.meta.get("source", t.name) for t in tables],
        "derived": sorted({d for t in tables for d in t.meta.get("derived", [])}),
        "join": {"how": how, "key": "query_id", "n_queries": int(ids.shape[0]), "sources": sources},
    }
    if pair is not None:
        meta["two_model"] = pair
    steps = [t.episodes for t in tables if t.episodes is not None]  # actors differ, so cells never clash
    return RoutingTable(queries=queries, actors=_joined_actors(tables, names),
                        name=name or "+".join(t.name for t in tables), meta=meta,
                        episodes=Episodes.concat(steps) if steps else None,  # the joined queries' cells only
                        **_joined_matrices(tables, rows, len(names)))  # type: ignore[arg-type]


def two_model_pair(table: RoutingTable) -> tuple[str, str] | None:
    """The (small, large) pair ``table`` designates in ``meta["two_model"]``, or None when it designates none.

    A designation naming an actor the table does not have (edited by hand, or actors selected away since) is
    a DataError naming the actor."""
    pair = table.meta.get("two_model")
    if not pair:
        return None
    if not isinstance(pair, dict) or not isinstance(pair.get("small"), str) or not isinstance(pair.get("large"), str):
        raise DataError(f"meta two_model must be {{'small': ACTOR, 'large': ACTOR}}, got {pair!r}", field="two_model")
    for role in ("small", "large"):
        if pair[role] not in table.actor_names:
            raise DataError(f"the designated {role} model {pair[role]!r} is not an actor of table {table.name!r} "
                            f"(actors: {table.actor_names})", field="two_model")
    return str(pair["small"]), str(pair["large"])
