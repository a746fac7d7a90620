"""The routing table: queries x actors -> score, tokens, latency, cost (SPEC 1).

Everything in routerlab reads this one data model. Matrices are dense float32 with NaN for an
unobserved cell; string columns use ``""`` for "unknown" so that they sort and compare safely.

A query's metadata columns (``Queries.extra``) are *hidden* from routers unless declared *visible*
(``Queries.visible``; default-deny): a router sees a query's id, text, dataset, split and visible columns
only, as a deployed router would (README "What a router sees"). Hidden columns (gold answers, the oracle's
pick, a generator's latent difficulty) stay in the table for reports.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from routerlab.errors import DataError, UsageError
from routerlab.metrics._arrays import column_blocks

if TYPE_CHECKING:
    from routerlab.data.episodes import Episodes

MATRIX_FIELDS: tuple[str, ...] = ("score", "tokens_in", "tokens_out", "latency_s", "cost_usd")
"""The per-cell matrices a table can hold; only ``score`` is required."""

ACTOR_NUMERIC_FIELDS: tuple[str, ...] = ("params_b", "ttft_ms", "itl_ms", "input_price", "output_price")
"""Numeric actor attributes: parameters in billions, time to first token and inter-token latency in
milliseconds, and USD prices per 1M input / output tokens. NaN = unknown."""

Matrix = npt.NDArray[np.float32]


def _str_array(values: Iterable[Any] | None, n: int, what: str) -> npt.NDArray[np.object_]:
    if values is None:
        return np.full(n, "", dtype=object)
    out = np.array(["" if v is None else str(v) for v in values], dtype=object)
    if out.shape != (n,):
        raise DataError(f"{what} has {out.shape[0]} values, expected {n}")
    return out


def _float_array(values: Iterable[Any] | None, n: int, what: str) -> npt.NDArray[np.float64]:
    if values is None:
        return np.full(n, np.nan)
    out = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    if out.shape != (n,):
        raise DataError(f"{what} has {out.shape[0]} values, expected {n}")
    return out


def _extra_columns(extra: Mapping[str, Any] | None, n: int, what: str) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for key, col in (extra or {}).items():
        if isinstance(col, list | tuple):  # a list of lists stays one object per query, not a 2-D array
            arr = np.empty(len(col), dtype=object)
            arr[:] = list(col)
        else:
            arr = np.asarray(col)
        if arr.dtype.kind in "US":
            arr = arr.astype(object)
        if arr.shape != (n,):
            raise DataError(f"{what} metadata column {key!r} has shape {arr.shape}, expected ({n},)")
        out[str(key)] = arr
    return out


class HiddenColumnError(UsageError, KeyError):
    """A router read a query metadata column that is hidden from routers. A KeyError too, so ``in`` and
    ``.get`` on the columns treat a hidden column as absent."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class QueryColumns(Mapping[str, np.ndarray]):
    """The metadata columns of queries as a router sees them: the visible ones only. Reading a hidden one by
    name raises :class:`HiddenColumnError`, which says it is hidden and how to declare it visible."""

    __slots__ = ("_columns", "_hidden")

    def __init__(self, columns: Mapping[str, np.ndarray], hidden: Iterable[str]) -> None:
        self._columns = dict(columns)
        self._hidden = frozenset(hidden) - set(self._columns)

    @property
    def hidden(self) -> frozenset[str]:
        """The names of the hidden columns (their values are not here)."""
        return self._hidden

    def take(self, index: npt.NDArray[np.intp]) -> QueryColumns:
        return QueryColumns({k: v[index] for k, v in self._columns.items()}, self._hidden)

    def __getitem__(self, key: str) -> np.ndarray:
        if key in self._columns:
            return self._columns[key]
        if key in self._hidden:
            shown = ", ".join(sorted(self._columns)) or "none"
            raise HiddenColumnError(
                f"query column {key!r} is hidden from routers: a router sees a query's id, text, dataset, split and "
                f"visible columns only (visible here: {shown}); if a deployed router would know {key!r}, declare it "
                f"visible (routerlab import ... --visible {key}, or table.with_visible([{key!r}]))")
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)


def _column_names(columns: str | Iterable[str]) -> list[str]:
    """Column names from an iterable or one comma-separated string (``"task,cluster"``)."""
    if isinstance(columns, str):
        return [c.strip() for c in columns.split(",") if c.strip()]
    return [str(c) for c in columns]


@dataclass(frozen=True, eq=False)
class Queries:
    """The rows of a routing table: unique ids, text, dataset (domain), split and free metadata.

    ``visible`` names the metadata columns a router may read (a deployed router would know them: a task or
    cluster label, the question's options); every other column of ``extra`` is hidden from routers."""

    ids: npt.NDArray[np.object_]
    text: npt.NDArray[np.object_]
    dataset: npt.NDArray[np.object_]
    split: npt.NDArray[np.object_]
    extra: Mapping[str, np.ndarray] = field(default_factory=dict)
    visible: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        vis = frozenset(_column_names(self.visible))
        unknown = sorted(vis - set(self.extra))
        if unknown:
            raise DataError(f"visible column(s) {unknown} are not query metadata columns "
                            f"(the columns are {sorted(self.extra) or 'none'})", field="visible")
        object.__setattr__(self, "visible", vis)

    @classmethod
    def create(
        cls,
        ids: Iterable[Any],
        text: Iterable[Any] | None = None,
        dataset: Iterable[Any] | None = None,
        split: Iterable[Any] | None = None,
        extra: Mapping[str, Any] | None = None,
        visible: Iterable[str] = (),
    ) -> Queries:
        """Queries from columns; ``visible`` names the ``extra`` columns routers may read (the rest are hidden)."""
        id_arr = np.array([str(i) for i in ids], dtype=object)
        n = id_arr.shape[0]
        q = cls(
            ids=id_arr,
            text=_str_array(text, n, "query text"),
            dataset=_str_array(dataset, n, "query dataset"),
            split=_str_array(split, n, "query split"),
            extra=_extra_columns(extra, n, "query"),
            visible=frozenset(str(c) for c in visible),
        )
        q.check_unique()
        return q

    @property
    def hidden(self) -> tuple[str, ...]:
        """The metadata columns routers never see (every column not declared visible), sorted."""
        return tuple(sorted(k for k in self.extra if k not in self.visible))

    def visible_only(self) -> Queries:
        """These queries as a router sees them: id, text, dataset, split and the visible columns only; ``extra``
        becomes a :class:`QueryColumns`, which names a hidden column when a router asks for it."""
        if not self.hidden:
            return self
        columns = QueryColumns({k: v for k, v in self.extra.items() if k in self.visible}, self.hidden)
        return Queries(self.ids, self.text, self.dataset, self.split, columns, self.visible)

    def with_visible(self, columns: str | Iterable[str]) -> Queries:
        """These queries with ``columns`` (names, or one comma-separated string) declared visible too."""
        return replace(self, visible=self.visible | self._known(columns))

    def with_hidden(self, columns: str | Iterable[str]) -> Queries:
        """These queries with ``columns`` hidden from routers (taken back out of the visible ones)."""
        return replace(self, visible=self.visible - self._known(columns))

    def _known(self, columns: str | Iterable[str]) -> frozenset[str]:
        names = _column_names(columns)
        unknown = [c for c in names if c not in self.extra]
        if unknown:
            raise UsageError(f"no query column {unknown[0]!r}; the table's query metadata columns are "
                             f"{', '.join(sorted(self.extra)) or 'none'} (id, text, dataset and split are "
                             "always visible)")
        return frozenset(names)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def check_unique(self) -> None:
        uniq, counts = np.unique(self.ids.astype(str), return_counts=True)
        if uniq.shape[0] != len(self):
            dup = uniq[counts > 1]
            raise DataError(
                f"query ids must be unique; {dup.shape[0]} ids repeat (first: {dup[0]!r})", field="query_id"
            )

    def take(self, index: npt.NDArray[np.intp]) -> Queries:
        return Queries(
            ids=self.ids[index],
            text=self.text[index],
            dataset=self.dataset[index],
            split=self.split[index],
            extra=(self.extra.take(index) if isinstance(self.extra, QueryColumns)
                   else {k: v[index] for k, v in self.extra.items()}),
            visible=self.visible,
        )


@dataclass(frozen=True, eq=False)
class Actors:
    """The columns of a routing table: models or agents with size, latency profile and prices."""

    names: npt.NDArray[np.object_]
    params_b: npt.NDArray[np.float64]
    ttft_ms: npt.NDArray[np.float64]
    itl_ms: npt.NDArray[np.float64]
    input_price: npt.NDArray[np.float64]
    output_price: npt.NDArray[np.float64]
    extra: Mapping[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        names: Iterable[Any],
        params_b: Iterable[Any] | None = None,
        ttft_ms: Iterable[Any] | None = None,
        itl_ms: Iterable[Any] | None = None,
        input_price: Iterable[Any] | None = None,
        output_price: Iterable[Any] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Actors:
        name_arr = np.array([str(a) for a in names], dtype=object)
        m = name_arr.shape[0]
        values, counts = np.unique(name_arr.astype(str), return_counts=True)
        if values.shape[0] != m:
            dup = next(a for a in name_arr if counts[np.searchsorted(values, a)] > 1)
            raise DataError(f"actor names must be unique; {dup!r} repeats", field="actor")
        a = cls(
            names=name_arr,
            params_b=_float_array(params_b, m, "actor params_b"),
            ttft_ms=_float_array(ttft_ms, m, "actor ttft_ms"),
            itl_ms=_float_array(itl_ms, m, "actor itl_ms"),
            input_price=_float_array(input_price, m, "actor input_price"),
            output_price=_float_array(output_price, m, "actor output_price"),
            extra=_extra_columns(extra, m, "actor"),
        )
        for name in ACTOR_NUMERIC_FIELDS:
            col = getattr(a, name)
            bad = np.flatnonzero(col < 0)
            if bad.size:
                raise DataError(f"must be >= 0, got {col[bad[0]]} for actor {name_arr[bad[0]]!r}", field=name)
        return a

    def __len__(self) -> int:
        return int(self.names.shape[0])

    def take(self, index: npt.NDArray[np.intp]) -> Actors:
        return Actors(
            names=self.names[index],
            params_b=self.params_b[index],
            ttft_ms=self.ttft_ms[index],
            itl_ms=self.itl_ms[index],
            input_price=self.input_price[index],
            output_price=self.output_price[index],
            extra={k: v[index] for k, v in self.extra.items()},
        )


def _as_matrix(value: Any, shape: tuple[int, int], name: str) -> Matrix | None:
    if value is None:
        return None
    arr = np.asarray(value, dtype=np.float32)
    if arr.shape != shape:
        raise DataError(f"matrix {name} has shape {arr.shape}, expected {shape} (queries x actors)")
    return arr


@dataclass(frozen=True, eq=False)
class RoutingTable:
    """Queries x actors with per-cell score (required) and optional tokens, latency and cost.

    ``score`` is in [0, 1] (0/1 correctness or graded quality); NaN = not observed. When latency is
    absent it is derived from ``tokens_out`` and the actors' TTFT/ITL (SPEC 1, routerworld eq. 1);
    when cost is absent it is derived from tokens and prices. ``meta`` records the source and
    every derivation, so a reader of a result knows where each number came from.
    """

    queries: Queries
    actors: Actors
    score: Matrix
    tokens_in: Matrix | None = None
    tokens_out: Matrix | None = None
    latency_s: Matrix | None = None
    cost_usd: Matrix | None = None
    name: str = "table"
    meta: Mapping[str, Any] = field(default_factory=dict)
    episodes: Episodes | None = None
    """The steps of the cells that hold an agentic episode (:mod:`routerlab.data.episodes`); None for a table of
    single completions. The matrices hold the episodes' derived values (:meth:`with_episodes`)."""

    def __post_init__(self) -> None:
        shape = (len(self.queries), len(self.actors))
        for key in MATRIX_FIELDS:
            object.__setattr__(self, key, _as_matrix(getattr(self, key), shape, key))
        if self.episodes is not None:
            object.__setattr__(self, "episodes", self._own_episodes(self.episodes))
        meta = dict(self.meta)
        derived = list(meta.get("derived", []))
        self._validate()
        if self.latency_s is None and self.tokens_out is not None:
            lat = derive_latency(self.tokens_out, self.actors.ttft_ms, self.actors.itl_ms)
            if lat is not None:
                object.__setattr__(self, "latency_s", lat)
                derived.append("latency_s = (TTFT + (tokens_out - 1) * ITL) / 1000  [RouterWorld, equation 1]")
        if self.cost_usd is None and self.tokens_out is not None:
            cost = derive_cost(self.tokens_in, self.tokens_out, self.actors.input_price, self.actors.output_price)
            if cost is not None:
                object.__setattr__(self, "cost_usd", cost)
                derived.append(
                    "cost_usd = (tokens_in * input_price + tokens_out * output_price) / 1e6"
                    if self.tokens_in is not None
                    else "cost_usd = tokens_out * output_price / 1e6 (input tokens unknown: a lower bound)"
                )
        if derived:
            meta["derived"] = sorted(set(derived))
        object.__setattr__(self, "meta", meta)

    def _own_episodes(self, episodes: Episodes) -> Episodes | None:
        """The episodes of this table's cells: a selection of queries or actors keeps the episodes of the cells it
        keeps (steps of other cells are dropped); None when no cell holds one."""
        rows, cols = episodes.locate(self.queries.ids, self.actors.names)
        keep = (rows >= 0) & (cols >= 0)
        if keep.all():
            return episodes
        return episodes.take(keep) if keep.any() else None

    @property
    def episode_mask(self) -> npt.NDArray[np.bool_]:
        """Boolean (n, m) mask of the cells holding an episode (all False without episodes)."""
        mask = np.zeros((self.n_queries, self.n_actors), dtype=bool)
        if self.episodes is not None:
            rows, cols = self.episodes.locate(self.queries.ids, self.actors.names)
            mask[rows, cols] = True
        return mask

    def with_episodes(self, episodes: Episodes) -> RoutingTable:
        """This table with ``episodes`` in its cells: each such cell's score is the episode's last step's score, its
        latency the sum of latency_s + env_s over the steps (RouterWorld, equation 5; a model step without a
        measured latency gets TTFT + (tokens_out - 1) * ITL), its tokens the sums and its cost from them and the
        actor's prices. Other cells keep their values; a step of a query or actor not in the table is an error."""
        from routerlab.data.episodes import Episodes as EpisodesCls
        from routerlab.data.episodes import fill_model_latency

        if self.episodes is not None:
            episodes = EpisodesCls.concat([self.episodes.take(~np.isin(
                _cell_keys(self.episodes.query_id, self.episodes.actor),
                _cell_keys(episodes.query_id, episodes.actor))), episodes])
        rows, cols = episodes.locate(self.queries.ids, self.actors.names)
        for idx, what, field_name in ((rows, "query", "query_id"), (cols, "actor", "actor")):
            bad = np.flatnonzero(idx < 0)
            if bad.size:
                value = getattr(episodes, field_name)[bad[0]]
                known = ", ".join(self.actor_names) if what == "actor" else f"{self.n_queries} queries"
                raise DataError(f"step {int(episodes.step[bad[0]])} names {what} {value!r}, which the table does not "
                                f"hold ({known})", field=field_name)
        episodes, filled = fill_model_latency(episodes, self.actor_names, self.actors.ttft_ms, self.actors.itl_ms)
        summ = episodes.summary()
        r, c = episodes.locate(self.queries.ids, self.actors.names)
        starts = np.flatnonzero(np.r_[True, (r[1:] != r[:-1]) | (c[1:] != c[:-1])]) if len(episodes) else r[:0]
        r, c = r[starts], c[starts]
        shape = (self.n_queries, self.n_actors)

        def put(current: Matrix | None, values: npt.NDArray[np.float64]) -> Matrix:
            out = np.full(shape, np.nan, dtype=np.float32) if current is None else np.array(current, copy=True)
            out[r, c] = values
            return out

        ip, op = self.actors.input_price[c], self.actors.output_price[c]
        cost = (summ.tokens_in * ip + summ.tokens_out * op) / 1e6  # NaN where a price or a token count is unknown
        meta = dict(self.meta)
        derived = set(meta.get("derived", []))
        derived.add("episode cells: score = the last step's score; latency_s = sum over the steps of latency_s + "
                    "env_s [RouterWorld, equation 5]; tokens = sums over the steps; cost_usd from the token sums and "
                    "prices")
        if filled:
            derived.add(f"episode steps: {filled} model steps' latency_s = TTFT + (tokens_out - 1) * ITL "
                        "[RouterWorld, equation 1]")
        meta["derived"] = sorted(derived)
        return replace(self, score=put(self.score, summ.score), tokens_in=put(self.tokens_in, summ.tokens_in),
                       tokens_out=put(self.tokens_out, summ.tokens_out), latency_s=put(self.latency_s, summ.latency_s),
                       cost_usd=put(self.cost_usd, cost), meta=meta, episodes=episodes)

    def _validate(self) -> None:
        """Range checks by reductions (no full-size temporaries); the cell is located only on failure."""
        score = self.score
        assert score is not None
        if score.size:
            lo, hi = float(np.fmin.reduce(score, axis=None)), float(np.fmax.reduce(score, axis=None))
            if lo < 0 or hi > 1:  # fmin/fmax skip NaN; +-inf shows up here as out of range
                with np.errstate(invalid="ignore"):
                    qi, ai = np.argwhere((score < 0) | (score > 1))[0]
                raise DataError(
                    f"score {score[qi, ai]} is outside [0, 1] (query {self.queries.ids[qi]!r}, "
                    f"actor {self.actors.names[ai]!r})",
                    row=int(qi) + 1,
                    field="score",
                )
        for key in MATRIX_FIELDS[1:]:
            mat = getattr(self, key)
            if mat is None or not mat.size:
                continue
            lo, hi = float(np.fmin.reduce(mat, axis=None)), float(np.fmax.reduce(mat, axis=None))
            if lo < 0 or np.isinf(lo) or np.isinf(hi):
                with np.errstate(invalid="ignore"):
                    qi, ai = np.argwhere((mat < 0) | np.isinf(mat))[0]
                raise DataError(
                    f"{key} must be finite and >= 0, got {mat[qi, ai]} (query {self.queries.ids[qi]!r}, "
                    f"actor {self.actors.names[ai]!r})",
                    row=int(qi) + 1,
                    field=key,
                )

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(
        cls,
        score: npt.ArrayLike,
        *,
        actors: Sequence[str] | Actors,
        query_ids: Sequence[Any] | None = None,
        text: Sequence[Any] | None = None,
        dataset: Sequence[Any] | None = None,
        split: Sequence[Any] | None = None,
        name: str = "table",
        **matrices: Any,
    ) -> RoutingTable:
        """Build a table from a score matrix and optional columns; ids default to ``q0, q1, ...``."""
        s = np.asarray(score, dtype=np.float32)
        if s.ndim != 2:
            raise DataError(f"score must be a 2-D queries x actors matrix, got {s.ndim}-D")
        unknown = set(matrices) - set(MATRIX_FIELDS[1:])
        if unknown:
            raise UsageError(f"unknown matrices {sorted(unknown)}; expected some of {MATRIX_FIELDS[1:]}")
        ids = query_ids if query_ids is not None else [f"q{i}" for i in range(s.shape[0])]
        queries = Queries.create(ids, text=text, dataset=dataset, split=split)
        acts = actors if isinstance(actors, Actors) else Actors.create(actors)
        return cls(queries=queries, actors=acts, score=s, name=name, **matrices)

    def save(self, path: str | Path, **options: Any) -> Path:
        """Write this table to directory ``path`` (see :mod:`routerlab.data.store`)."""
        from routerlab.data.store import save

        return save(self, path, **options)

    # ------------------------------------------------------------------ shape and views
    @property
    def n_queries(self) -> int:
        return len(self.queries)

    @property
    def n_actors(self) -> int:
        return len(self.actors)

    @property
    def actor_names(self) -> list[str]:
        return [str(a) for a in self.actors.names]

    @property
    def observed(self) -> npt.NDArray[np.bool_]:
        """Boolean (n, m) mask of observed score cells."""
        mask = np.isnan(self.score)
        return np.logical_not(mask, out=mask)  # in place: one (n, m) mask, not two

    def matrices(self) -> dict[str, Matrix]:
        """The matrices this table holds, by name (absent ones left out)."""
        return {k: getattr(self, k) for k in MATRIX_FIELDS if getattr(self, k) is not None}

    def actor_index(self, names: Iterable[str | int]) -> npt.NDArray[np.intp]:
        lookup = {str(a): i for i, a in enumerate(self.actors.names)}
        out = []
        for a in names:
            if isinstance(a, int | np.integer):
                if not 0 <= int(a) < self.n_actors:
                    raise UsageError(f"actor index {a} out of range 0..{self.n_actors - 1}")
                out.append(int(a))
            elif a in lookup:
                out.append(lookup[a])
            else:
                raise UsageError(f"unknown actor {a!r}; actors are {self.actor_names}")
        return np.array(out, dtype=np.intp)

    # ------------------------------------------------------------------ selection
    def select_actors(self, actors: Iterable[str | int]) -> RoutingTable:
        """A table with only these actors, in the given order."""
        idx = self.actor_index(actors)
        if len(set(idx.tolist())) != idx.shape[0]:
            raise UsageError("an actor is selected twice")
        mats = {k: v[:, idx] for k, v in self.matrices().items()}
        return replace(self, actors=self.actors.take(idx), **mats)  # type: ignore[arg-type]

    def select_queries(self, rows: npt.ArrayLike) -> RoutingTable:
        """A table with only these queries: a boolean mask of length n or integer positions."""
        sel = np.asarray(rows)
        if sel.dtype == bool:
            if sel.shape != (self.n_queries,):
                raise UsageError(f"query mask has shape {sel.shape}, expected ({self.n_queries},)")
            idx = np.flatnonzero(sel)
        else:
            idx = sel.astype(np.intp).ravel()
            if idx.size and (idx.min() < -self.n_queries or idx.max() >= self.n_queries):
                raise UsageError(f"query index out of range 0..{self.n_queries - 1}")
        mats = {k: v[idx] for k, v in self.matrices().items()}
        return replace(self, queries=self.queries.take(idx), **mats)  # type: ignore[arg-type]

    def query_range(self, start: int, stop: int) -> RoutingTable:
        """Queries ``start`` to ``stop - 1`` as read-only *views* of this table's matrices, not copies: they keep
        the whole of this table's matrices alive (the parts of a table stored in split order,
        :func:`routerlab.data.splits.in_split_order`). Anything else should use :meth:`select_queries`."""
        if not 0 <= start <= stop <= self.n_queries:
            raise UsageError(f"query range {start}..{stop} is not within 0..{self.n_queries}")
        rows = slice(start, stop)
        mats = {k: _read_only(v[rows]) for k, v in self.matrices().items()}
        return replace(self, queries=self.queries.take(np.arange(start, stop)), **mats)  # type: ignore[arg-type]

    def select_datasets(self, datasets: Iterable[str]) -> RoutingTable:
        wanted = list(datasets)
        missing = set(wanted) - set(self.queries.dataset.tolist())
        if missing:
            raise UsageError(f"unknown datasets {sorted(missing)}; the table has {sorted(self.dataset_counts())}")
        return self.select_queries(np.isin(self.queries.dataset.astype(str), wanted))

    def select_split(self, split: str) -> RoutingTable:
        mask = self.queries.split == split
        if not mask.any():
            raise UsageError(f"no query has split {split!r}; splits are {sorted(self.split_counts())}")
        return self.select_queries(mask)

    def with_split(self, split: Iterable[Any]) -> RoutingTable:
        """The same table with the split column replaced (e.g. by a seeded random split)."""
        q = self.queries
        return replace(self, queries=Queries(q.ids, q.text, q.dataset, _str_array(split, len(q), "split"), q.extra,
                                             q.visible))

    # ------------------------------------------------------------------ what routers see
    def with_visible(self, columns: str | Iterable[str]) -> RoutingTable:
        """This table with query metadata ``columns`` declared visible to routers (names, or ``"a,b"``); an
        unknown name is a UsageError listing the table's columns. Data and content hash are unchanged."""
        return self._with_queries(self.queries.with_visible(columns))

    def with_hidden(self, columns: str | Iterable[str]) -> RoutingTable:
        """This table with query metadata ``columns`` hidden from routers again."""
        return self._with_queries(self.queries.with_hidden(columns))

    def visible_only(self) -> RoutingTable:
        """This table as a router may read it: hidden query metadata columns dropped (the table itself when it
        has none). What :meth:`routerlab.routers.base.Router.fit` trains on."""
        if not self.queries.hidden:
            return self
        return replace(self, queries=self.queries.visible_only())  # other data: its own content hash

    def _with_queries(self, queries: Queries) -> RoutingTable:
        """The same table with another visibility declaration (not data: the content hash carries over)."""
        out = replace(self, queries=queries)
        if "content_hash" in self.__dict__:
            out.__dict__["content_hash"] = self.__dict__["content_hash"]
        return out

    # ------------------------------------------------------------------ summaries
    def dataset_counts(self) -> dict[str, int]:
        values, counts = np.unique(self.queries.dataset.astype(str), return_counts=True)
        return {str(v): int(c) for v, c in zip(values, counts, strict=True)}

    def split_counts(self) -> dict[str, int]:
        values, counts = np.unique(self.queries.split.astype(str), return_counts=True)
        return {str(v): int(c) for v, c in zip(values, counts, strict=True)}

    @property
    def observed_fraction(self) -> float:
        if self.score.size == 0:
            return 0.0
        return float(np.count_nonzero(~np.isnan(self.score)) / self.score.size)

    @cached_property
    def content_hash(self) -> str:
        """SHA-256 over every value of the table (ids, text, columns, matrices, actor attributes).

        Two tables with the same hash hold the same data; ``name`` and ``meta`` do not count.
        """
        h = hashlib.sha256()
        hash_labels(h, self.queries, self.actors)
        for key, mat in self.matrices().items():
            hash_matrix_header(h, key, mat.shape)
            h.update(np.ascontiguousarray(mat).data)  # same bytes as .tobytes(), without a 1.2 GB copy
        if self.episodes is not None:  # a table without episodes hashes as before they existed
            self.episodes.hash_into(h)
        return h.hexdigest()

    def describe(self) -> dict[str, Any]:
        """What ``routerlab info --json`` prints: sizes, labels, coverage and data-quality counts."""
        from routerlab.data.quality import duplicate_texts, train_test_overlap

        return {
            "name": self.name,
            "n_queries": self.n_queries,
            "n_actors": self.n_actors,
            "actors": self.actor_names,
            "datasets": self.dataset_counts(),
            "splits": self.split_counts(),
            "query_columns": {"visible": sorted(self.queries.visible), "hidden": list(self.queries.hidden)},
            "observed_fraction": self.observed_fraction,
            "has_tokens": self.tokens_out is not None,
            "has_latency": self.latency_s is not None,
            "has_cost": self.cost_usd is not None,
            "duplicate_texts": duplicate_texts(self),
            "train_test_overlap": train_test_overlap(self),
            "mean_score": {
                a: (None if np.isnan(v) else round(float(v), 6))
                for a, v in zip(self.actor_names, column_means(self.score), strict=True)
            },
            "derived": list(self.meta.get("derived", [])),
            "content_hash": self.content_hash,
            **({} if self.episodes is None else {"episodes": _describe_episodes(self.episodes)}),
        }


def _cell_keys(query_id: npt.NDArray[np.object_], actor: npt.NDArray[np.object_]) -> npt.NDArray[np.object_]:
    return np.array([f"{q}\x00{a}" for q, a in zip(query_id.tolist(), actor.tolist(), strict=True)], dtype=object)


def _describe_episodes(episodes: Episodes) -> dict[str, Any]:
    """What ``describe`` says of a table's episodes: cells, steps, steps by kind, median steps per actor."""
    from routerlab.data.episodes import STEP_KINDS

    summ = episodes.summary()
    per_actor = {str(a): float(np.median(summ.n_steps[summ.actor == a])) for a in dict.fromkeys(summ.actor.tolist())}
    return {"cells": len(summ), "steps": len(episodes),
            "steps_by_kind": {k: int(np.count_nonzero(episodes.kind == k)) for k in STEP_KINDS},
            "median_steps_per_actor": per_actor}


def _read_only(view: Matrix) -> Matrix:
    """``view`` flagged read-only: writing into a part must never change the table it is a view of."""
    view.flags.writeable = False
    return view


def column_means(values: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Mean of the observed (non-NaN) cells of each column of a 2-d array, in float64; NaN for a
    column with none. The one NaN-aware column mean (table summaries, router priors) lives here,
    the lowest layer that needs it. Computed a block of columns at a time (each converted to float64
    on its own), so a 28,799 x 8,500 training matrix needs no 1.8 GiB float64 copy."""
    v = np.asarray(values)
    out = np.full(v.shape[1], np.nan)
    for cols in column_blocks(v.shape[0], v.shape[1]):
        block = np.asarray(v[:, cols], dtype=np.float64)
        obs = ~np.isnan(block)
        counts = obs.sum(axis=0)
        sums = np.where(obs, block, 0.0).sum(axis=0)
        np.divide(sums, counts, out=out[cols], where=counts > 0)
    return out


def derive_latency(
    tokens_out: Matrix, ttft_ms: npt.NDArray[np.float64], itl_ms: npt.NDArray[np.float64]
) -> Matrix | None:
    """latency_s = (TTFT_a + (tokens_out - 1) * ITL_a) / 1000 (SPEC 1); None when no actor has both."""
    known = ~np.isnan(ttft_ms) & ~np.isnan(itl_ms)
    if not known.any():
        return None
    steps = np.maximum(tokens_out - 1.0, 0.0)
    lat = (ttft_ms[None, :] + steps * itl_ms[None, :]) / 1000.0
    return np.where(known[None, :], lat, np.nan).astype(np.float32)


def derive_cost(
    tokens_in: Matrix | None,
    tokens_out: Matrix,
    input_price: npt.NDArray[np.float64],
    output_price: npt.NDArray[np.float64],
) -> Matrix | None:
    """cost_usd from tokens and per-1M-token prices; None when no actor has an output price."""
    known = ~np.isnan(output_price)
    if tokens_in is not None:
        known &= ~np.isnan(input_price)
    if not known.any():
        return None
    cost = tokens_out.astype(np.float64) * output_price[None, :]
    if tokens_in is not None:
        cost = cost + tokens_in.astype(np.float64) * input_price[None, :]
    return np.where(known[None, :], cost / 1e6, np.nan).astype(np.float32)


def _unknown(value: Any) -> bool:
    """True for the "unknown" value of a metadata column: None, or NaN in a numeric column."""
    return value is None or (isinstance(value, float | np.floating) and bool(np.isnan(value)))


def _concat_actor_extra(
    tables: Sequence[RoutingTable], names: list[str], col: Mapping[str, int]
) -> dict[str, np.ndarray]:
    """The union of the tables' actor metadata columns over the union of actors.

    A column stays float (missing = NaN) when every table holding it has a float column, and
    becomes object (missing = None) otherwise. Like the numeric attributes, a value comes from
    the first table that knows it; a different known value in a later table is an error.
    """
    keys = sorted({k for t in tables for k in t.actors.extra})
    out: dict[str, np.ndarray] = {}
    for key in keys:
        numeric = all(t.actors.extra[key].dtype.kind == "f" for t in tables if key in t.actors.extra)
        merged: list[Any] = [None] * len(names)
        for t in tables:
            if key not in t.actors.extra:
                continue
            for a, v in zip(t.actor_names, t.actors.extra[key], strict=True):
                cur = merged[col[a]]
                if _unknown(cur):
                    merged[col[a]] = v
                elif not _unknown(v) and cur != v:
                    raise DataError(f"actor {a!r} has {key}={cur!r} in one table and {v!r} in another", field=key)
        if numeric:
            out[key] = np.array([np.nan if v is None else v for v in merged], dtype=np.float64)
        else:
            arr = np.empty(len(names), dtype=object)
            arr[:] = merged
            out[key] = arr
    return out


def concat(tables: Sequence[RoutingTable], name: str | None = None) -> RoutingTable:
    """Stack tables by query; actors are the union in order of first appearance (missing cells NaN).

    Query ids must not repeat across tables. An actor's attributes, metadata (``actors.extra``)
    included, come from the first table that knows them; a different known value in a later
    table is an error, not a silent choice. A query metadata column is visible to routers when
    every table holding it declares it visible (default-deny: hidden anywhere, hidden in the result).
    """
    if not tables:
        raise UsageError("concat needs at least one table")
    names: list[str] = []
    for t in tables:
        names.extend(a for a in t.actor_names if a not in names)
    col = {a: j for j, a in enumerate(names)}
    m = len(names)
    attrs = {k: np.full(m, np.nan) for k in ACTOR_NUMERIC_FIELDS}
    for t in tables:
        for k in ACTOR_NUMERIC_FIELDS:
            vals = getattr(t.actors, k)
            for a, v in zip(t.actor_names, vals, strict=True):
                cur = attrs[k][col[a]]
                if np.isnan(cur):
                    attrs[k][col[a]] = v
                elif not np.isnan(v) and not np.isclose(cur, v):
                    raise DataError(f"actor {a!r} has {k}={cur} in one table and {v} in another", field=k)
    actors = Actors.create(
        names,
        params_b=attrs["params_b"],
        ttft_ms=attrs["ttft_ms"],
        itl_ms=attrs["itl_ms"],
        input_price=attrs["input_price"],
        output_price=attrs["output_price"],
        extra=_concat_actor_extra(tables, names, col),
    )
    mats: dict[str, Matrix | None] = {}
    for key in MATRIX_FIELDS:
        if key != "score" and all(getattr(t, key) is None for t in tables):
            mats[key] = None
            continue
        parts = []
        for t in tables:
            block = np.full((t.n_queries, m), np.nan, dtype=np.float32)
            src = getattr(t, key)
            if src is not None:
                block[:, [col[a] for a in t.actor_names]] = src
            parts.append(block)
        mats[key] = np.concatenate(parts, axis=0)
    extra_keys = sorted({k for t in tables for k in t.queries.extra})
    extra = {}
    for k in extra_keys:
        cols = [t.queries.extra.get(k, np.full(t.n_queries, None, dtype=object)) for t in tables]
        extra[k] = np.concatenate([np.asarray(c, dtype=object) for c in cols])
    visible = [k for k in extra_keys if all(k in t.queries.visible for t in tables if k in t.queries.extra)]
    queries = Queries.create(
        np.concatenate([t.queries.ids for t in tables]),
        text=np.concatenate([t.queries.text for t in tables]),
        dataset=np.concatenate([t.queries.dataset for t in tables]),
        split=np.concatenate([t.queries.split for t in tables]),
        extra=extra,
        visible=visible,
    )
    derived = sorted({d for t in tables for d in t.meta.get("derived", [])})
    meta = {"source": [t.meta.get("source", t.name) for t in tables], "derived": derived}
    with_steps = [t.episodes for t in tables if t.episodes is not None]
    episodes = None
    if with_steps:
        from routerlab.data.episodes import Episodes as EpisodesCls

        episodes = with_steps[0] if len(with_steps) == 1 else EpisodesCls.concat(with_steps)
    return RoutingTable(
        queries=queries,
        actors=actors,
        name=name or "+".join(t.name for t in tables),
        meta=meta,
        episodes=episodes,
        **mats,  # type: ignore[arg-type]
    )


# ---------------------------------------------------------------------------------------- content hash
class Hasher(Protocol):
    """What the content hash feeds: ``hashlib.sha256()`` (the store hashes row groups while reading)."""

    def update(self, data: bytes | memoryview, /) -> None: ...

    def hexdigest(self) -> str: ...


def _hash_strings(h: Hasher, col: npt.NDArray[Any]) -> None:
    """Feed ``len(b)`` as 8 little-endian bytes, then ``b``, for ``b = str(s).encode()`` of each entry.

    A plain loop: building one buffer with Arrow and NumPy measured no faster (1M strings of 220 bytes:
    loop 0.84 s, Arrow join 0.90 s, NumPy scatter 1.32 s), because turning Python strings into any buffer
    costs as much as hashing them; at RouterEval scale the text columns take well under 0.1 s.
    """
    update = h.update
    for v in col.tolist():
        b = str(v).encode("utf-8")
        update(len(b).to_bytes(8, "little"))
        update(b)


def hash_column(h: Hasher, key: str, col: npt.NDArray[Any]) -> None:
    """Feed one named column to a content hash: strings by length and UTF-8 bytes, numbers by their bytes."""
    h.update(key.encode())
    if col.dtype == object:
        _hash_strings(h, col)
    else:
        h.update(np.ascontiguousarray(col).tobytes())


def hash_labels(h: Hasher, queries: Queries, actors: Actors) -> None:
    """The part of :attr:`RoutingTable.content_hash` before the matrices: query and actor columns."""
    for key in ("ids", "text", "dataset", "split"):
        hash_column(h, "q." + key, getattr(queries, key))
    for key in sorted(queries.extra):
        hash_column(h, "qx." + key, queries.extra[key])
    hash_column(h, "a.names", actors.names)
    for key in ACTOR_NUMERIC_FIELDS:
        hash_column(h, "a." + key, getattr(actors, key))
    for key in sorted(actors.extra):
        hash_column(h, "ax." + key, actors.extra[key])


def hash_matrix_header(h: Hasher, key: str, shape: tuple[int, ...]) -> None:
    """What precedes a matrix's bytes in the content hash: its name and its shape."""
    h.update(key.encode())
    h.update(np.asarray(shape, dtype=np.int64).tobytes())
