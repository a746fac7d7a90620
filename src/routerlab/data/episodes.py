"""Agentic episodes: a cell of a routing table may hold an ordered list of steps instead of one completion.

RouterWorld's agentic setting routes a whole task to one model, which then plans, calls tools and answers over
several steps. A step is a model call (``kind="model"``: tokens in and out, TTFT, ITL, latency), a tool call
(``"tool"``: the tool's time in ``env_s``) or an environment step (``"env"``: the environment's time in ``env_s``),
with an optional step score. The cell's values are *derived* from its steps (:meth:`RoutingTable.with_episodes`):

- score: the final outcome, which is the score of the episode's **last** step (earlier step scores are optional);
- latency: the sum of ``latency_s + env_s`` over the steps (RouterWorld, equation 5: model time plus environment
  time); a model step without a measured latency gets ``TTFT + (tokens_out - 1) * ITL`` from the step's own TTFT/ITL
  or else its actor's, as for a single completion;
- tokens in and out: the sums over the model steps; cost: from those totals and the actor's prices.

Routers, metrics and protocols read only those derived matrices, so every existing analysis runs on an episode
table unchanged; step-level analyses read :attr:`RoutingTable.episodes`. Storage is long format, one row per step
(``steps.parquet`` in a table directory), the columns of :data:`STEP_COLUMNS` plus ``tool``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from routerlab.data.table import Actors, Hasher, Queries, RoutingTable, hash_column
from routerlab.errors import DataError

STEP_KINDS: tuple[str, ...] = ("model", "tool", "env")
"""A model call, a tool call, an environment step (e.g. a page rendering, an API the task talks to)."""

STEP_COLUMNS: tuple[str, ...] = ("query_id", "actor", "step", "kind", "tokens_in", "tokens_out", "ttft_s", "itl_s",
                                 "latency_s", "env_s", "score")
"""The long format's columns, one row per step; ``tool`` (the tool a tool step called) is optional."""

NUMERIC_STEP_COLUMNS: tuple[str, ...] = ("tokens_in", "tokens_out", "ttft_s", "itl_s", "latency_s", "env_s", "score")
TIME_COLUMNS: tuple[str, ...] = ("ttft_s", "itl_s", "latency_s", "env_s")

FloatArray = npt.NDArray[np.float64]
StrArray = npt.NDArray[np.object_]


def _strings(values: Iterable[Any] | None, n: int, name: str, source: str | Path | None,
             *, required: bool) -> StrArray:
    if values is None:
        if required:
            raise DataError(f"the steps have no {name} column", file=source, field=name)
        return np.full(n, "", dtype=object)
    out = np.array(["" if v is None else str(v) for v in values], dtype=object)
    if out.shape != (n,):
        raise DataError(f"{name} has {out.shape[0]} values, expected {n}", file=source, field=name)
    if required:
        empty = np.flatnonzero(np.array([not s.strip() for s in out.tolist()], dtype=bool))
        if empty.size:
            raise DataError(f"{name} is empty", file=source, row=int(empty[0]) + 1, field=name)
    return out


def _numbers(values: Iterable[Any] | None, n: int, name: str, source: str | Path | None) -> FloatArray:
    """A float64 column (NaN = unknown); a value that is not a number is one error naming its row."""
    if values is None:
        return np.full(n, np.nan)
    items = list(values)
    if len(items) != n:
        raise DataError(f"{name} has {len(items)} values, expected {n}", file=source, field=name)
    try:
        out = np.array([np.nan if v is None or (isinstance(v, str) and not v.strip()) else v for v in items],
                       dtype=np.float64)
    except (TypeError, ValueError):
        for i, v in enumerate(items):
            if v is None or isinstance(v, bool):
                if isinstance(v, bool):
                    raise DataError(f"expected a number, got {v!r}", file=source, row=i + 1, field=name) from None
                continue
            try:
                float(v)
            except (TypeError, ValueError):
                raise DataError(f"expected a number, got {v!r}", file=source, row=i + 1, field=name) from None
        raise
    if out.shape != (n,):
        raise DataError(f"{name} must hold one number per step", file=source, field=name)
    return out


def _first(mask: npt.NDArray[np.bool_]) -> int | None:
    hit = np.flatnonzero(mask)
    return int(hit[0]) if hit.size else None


@dataclass(frozen=True, eq=False)
class EpisodeSummary:
    """Per-cell totals of episodes, one entry per cell holding an episode (in the episodes' cell order)."""

    query_id: StrArray
    actor: StrArray
    n_steps: npt.NDArray[np.int64]
    n_model: npt.NDArray[np.int64]
    n_tool: npt.NDArray[np.int64]
    n_env: npt.NDArray[np.int64]
    tokens_in: FloatArray
    tokens_out: FloatArray
    model_s: FloatArray
    """Sum of the model steps' latency_s."""
    env_s: FloatArray
    """Sum of the tool and environment steps' env_s."""
    latency_s: FloatArray
    """Episode latency: the sum of latency_s + env_s over the steps (NaN when a step's time is unknown)."""
    score: FloatArray
    """The final outcome: the last step's score."""

    def __len__(self) -> int:
        return int(self.query_id.shape[0])


@dataclass(frozen=True, eq=False)
class Episodes:
    """Steps of the cells that hold an episode, in long format, ordered by cell (first appearance) then step.

    Build with :meth:`create` or :meth:`from_records`, which check every value: one :class:`DataError` names the
    file, row and field of the first bad one."""

    query_id: StrArray
    actor: StrArray
    step: npt.NDArray[np.int64]
    kind: StrArray
    tokens_in: FloatArray
    tokens_out: FloatArray
    ttft_s: FloatArray
    itl_s: FloatArray
    latency_s: FloatArray
    env_s: FloatArray
    score: FloatArray
    tool: StrArray

    # ------------------------------------------------------------------ construction
    @classmethod
    def create(
        cls,
        query_id: Iterable[Any],
        actor: Iterable[Any],
        step: Iterable[Any],
        kind: Iterable[Any],
        *,
        tokens_in: Iterable[Any] | None = None,
        tokens_out: Iterable[Any] | None = None,
        ttft_s: Iterable[Any] | None = None,
        itl_s: Iterable[Any] | None = None,
        latency_s: Iterable[Any] | None = None,
        env_s: Iterable[Any] | None = None,
        score: Iterable[Any] | None = None,
        tool: Iterable[Any] | None = None,
        source: str | Path | None = None,
    ) -> Episodes:
        """Steps from columns (row ``i`` of every column is one step; rows in any order). ``source`` names the
        file they came from in error messages, whose rows are counted from 1 in the given order.

        Absent values: a model step's ``env_s`` and a tool or environment step's ``latency_s`` and tokens are 0;
        any other absent number is unknown (NaN), and an unknown time makes the episode's latency unknown."""
        qid = np.array([str(v) if v is not None else "" for v in query_id], dtype=object)
        n = qid.shape[0]
        qid = _strings(qid, n, "query_id", source, required=True)
        act = _strings(actor, n, "actor", source, required=True)
        kinds = _strings(kind, n, "kind", source, required=True)
        bad = _first(~np.isin(kinds.astype(str), STEP_KINDS))
        if bad is not None:
            raise DataError(f"unknown step kind {kinds[bad]!r}; a step is one of {', '.join(STEP_KINDS)}",
                            file=source, row=bad + 1, field="kind")
        raw_step = _numbers(step, n, "step", source)
        bad = _first(~np.isfinite(raw_step) | (raw_step < 0) | (raw_step != np.floor(raw_step)))
        if bad is not None:
            raise DataError(f"a step number is an integer >= 0, got {float(raw_step[bad])!r}", file=source, row=bad + 1,
                            field="step")
        cols = {name: _numbers(vals, n, name, source) for name, vals in (
            ("tokens_in", tokens_in), ("tokens_out", tokens_out), ("ttft_s", ttft_s), ("itl_s", itl_s),
            ("latency_s", latency_s), ("env_s", env_s), ("score", score))}
        is_model = kinds == "model"
        for name in ("tokens_in", "tokens_out", *TIME_COLUMNS):
            col = cols[name]
            with np.errstate(invalid="ignore"):
                bad = _first(np.isinf(col) | (col < 0))
            if bad is not None:
                raise DataError(f"must be finite and >= 0, got {float(col[bad])!r}", file=source, row=bad + 1,
                                field=name)
        with np.errstate(invalid="ignore"):
            bad = _first((cols["score"] < 0) | (cols["score"] > 1) | np.isinf(cols["score"]))
        if bad is not None:
            raise DataError(f"a score lies in [0, 1], got {float(cols['score'][bad])!r}", file=source, row=bad + 1,
                            field="score")
        env = cols["env_s"]
        env[is_model & np.isnan(env)] = 0.0
        bad = _first(is_model & (env != 0))
        if bad is not None:
            raise DataError(f"a model step's time is its latency_s; its env_s must be 0, got {float(env[bad])!r}",
                            file=source, row=bad + 1, field="env_s")
        for name in ("latency_s", "tokens_in", "tokens_out", "ttft_s", "itl_s"):
            col = cols[name]
            if name in ("latency_s", "tokens_in", "tokens_out"):
                col[~is_model & np.isnan(col)] = 0.0
            bad = _first(~is_model & ~np.isnan(col) & (col != 0))
            if bad is not None:
                what = "its time is env_s" if name != "tokens_in" and name != "tokens_out" else \
                    "its output enters the next model call's tokens_in"
                raise DataError(f"a {kinds[bad]} step has no {name} ({what}); got {float(col[bad])!r}", file=source,
                                row=bad + 1, field=name)
        tools = _strings(tool, n, "tool", source, required=False)
        # order: cells by first appearance, steps ascending; a repeated step number in a cell is an error
        cell_code = _cell_codes(qid, act)
        order = np.lexsort((raw_step, cell_code))
        steps = raw_step.astype(np.int64)
        sc, ss = cell_code[order], steps[order]
        dup = np.flatnonzero((sc[1:] == sc[:-1]) & (ss[1:] == ss[:-1]))
        if dup.size:
            rows = sorted((int(order[dup[0]]), int(order[dup[0] + 1])))
            raise DataError(f"step {ss[dup[0] + 1]} of the episode of query {qid[rows[1]]!r} and actor "
                            f"{act[rows[1]]!r} is given twice (also row {rows[0] + 1})", file=source,
                            row=rows[1] + 1, field="step")
        last = np.ones(n, dtype=bool)
        last[:-1] = sc[1:] != sc[:-1]
        missing = np.flatnonzero(last & np.isnan(cols["score"][order]))
        if missing.size:
            r = int(order[missing[0]])
            raise DataError(f"the last step of the episode of query {qid[r]!r} and actor {act[r]!r} has no score; "
                            "the last step's score is the episode's final outcome", file=source, row=r + 1,
                            field="score")
        return cls(query_id=qid[order], actor=act[order], step=steps[order], kind=kinds[order],
                   tokens_in=cols["tokens_in"][order], tokens_out=cols["tokens_out"][order],
                   ttft_s=cols["ttft_s"][order], itl_s=cols["itl_s"][order], latency_s=cols["latency_s"][order],
                   env_s=cols["env_s"][order], score=cols["score"][order], tool=tools[order])

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]], *, source: str | Path | None = None) -> Episodes:
        """Steps from dicts keyed by the column names (a missing key is an absent value, see :meth:`create`)."""
        rows = list(records)
        for i, rec in enumerate(rows):
            if not isinstance(rec, Mapping):
                raise DataError(f"a step is a mapping of column names to values, got {type(rec).__name__}",
                                file=source, row=i + 1)
            unknown = sorted(set(rec) - set(STEP_COLUMNS) - {"tool"})
            if unknown:
                raise DataError(f"unknown step column {unknown[0]!r}; the columns are "
                                f"{', '.join(STEP_COLUMNS)} and tool", file=source, row=i + 1, field=unknown[0])

        def col(name: str) -> list[Any] | None:
            if not any(name in r for r in rows):
                return None
            return [r.get(name) for r in rows]

        def required(name: str) -> list[Any]:
            return [r.get(name) for r in rows]

        return cls.create(required("query_id"), required("actor"), required("step"), required("kind"),
                          tokens_in=col("tokens_in"), tokens_out=col("tokens_out"), ttft_s=col("ttft_s"),
                          itl_s=col("itl_s"), latency_s=col("latency_s"), env_s=col("env_s"), score=col("score"),
                          tool=col("tool"), source=source)

    @classmethod
    def concat(cls, parts: Sequence[Episodes]) -> Episodes:
        """The steps of several tables' episodes together (their cells must differ)."""
        names = ("query_id", "actor", "step", "kind", *NUMERIC_STEP_COLUMNS, "tool")
        joined = {k: np.concatenate([getattr(p, k) for p in parts]) for k in names}
        return cls.create(joined["query_id"], joined["actor"], joined["step"], joined["kind"],
                          tokens_in=joined["tokens_in"], tokens_out=joined["tokens_out"], ttft_s=joined["ttft_s"],
                          itl_s=joined["itl_s"], latency_s=joined["latency_s"], env_s=joined["env_s"],
                          score=joined["score"], tool=joined["tool"])

    # ------------------------------------------------------------------ views
    def __len__(self) -> int:
        return int(self.step.shape[0])

    def _starts(self) -> npt.NDArray[np.intp]:
        """Positions where a cell's steps begin (cells are contiguous)."""
        n = len(self)
        if n == 0:
            return np.zeros(0, dtype=np.intp)
        new = np.ones(n, dtype=bool)
        new[1:] = (self.query_id[1:] != self.query_id[:-1]) | (self.actor[1:] != self.actor[:-1])
        return np.flatnonzero(new)

    def cells(self) -> list[tuple[str, str]]:
        """The (query_id, actor) cells holding an episode, in order."""
        s = self._starts()
        return list(zip(self.query_id[s].tolist(), self.actor[s].tolist(), strict=True))

    @property
    def n_cells(self) -> int:
        return int(self._starts().shape[0])

    def records(self) -> list[dict[str, Any]]:
        """One dict per step with every column (NaN for unknown numbers)."""
        out = []
        for i in range(len(self)):
            rec: dict[str, Any] = {"query_id": str(self.query_id[i]), "actor": str(self.actor[i]),
                                   "step": int(self.step[i]), "kind": str(self.kind[i])}
            rec.update({k: float(getattr(self, k)[i]) for k in NUMERIC_STEP_COLUMNS})
            rec["tool"] = str(self.tool[i])
            out.append(rec)
        return out

    def take(self, mask: npt.NDArray[np.bool_]) -> Episodes:
        """The steps where ``mask`` holds (whole cells only, order kept)."""
        return Episodes(query_id=self.query_id[mask], actor=self.actor[mask], step=self.step[mask],
                        kind=self.kind[mask], tokens_in=self.tokens_in[mask], tokens_out=self.tokens_out[mask],
                        ttft_s=self.ttft_s[mask], itl_s=self.itl_s[mask], latency_s=self.latency_s[mask],
                        env_s=self.env_s[mask], score=self.score[mask], tool=self.tool[mask])

    def summary(self) -> EpisodeSummary:
        """Per-cell totals: step counts by kind, token sums, model and environment time, episode latency
        (sum of latency_s + env_s) and the final score (the last step's)."""
        s = self._starts()
        if s.size == 0:
            zi, zf = np.zeros(0, dtype=np.int64), np.zeros(0)
            return EpisodeSummary(np.zeros(0, dtype=object), np.zeros(0, dtype=object), zi, zi, zi, zi,
                                  zf, zf, zf, zf, zf, zf)
        ends = np.append(s[1:], len(self))

        def total(col: FloatArray) -> FloatArray:
            return np.add.reduceat(col, s)

        def count(kind: str) -> npt.NDArray[np.int64]:
            return np.add.reduceat((self.kind == kind).astype(np.int64), s)

        model_s, env_s = total(self.latency_s), total(self.env_s)
        return EpisodeSummary(
            query_id=self.query_id[s], actor=self.actor[s], n_steps=(ends - s).astype(np.int64),
            n_model=count("model"), n_tool=count("tool"), n_env=count("env"),
            tokens_in=total(self.tokens_in), tokens_out=total(self.tokens_out), model_s=model_s, env_s=env_s,
            latency_s=total(self.latency_s + self.env_s), score=self.score[ends - 1])

    def hash_into(self, h: Hasher) -> None:
        """Feed every column to a content hash (after a table's matrices)."""
        h.update(b"steps")
        for name in ("query_id", "actor", "step", "kind", *NUMERIC_STEP_COLUMNS, "tool"):
            hash_column(h, "s." + name, getattr(self, name))

    # ------------------------------------------------------------------ against a table
    def locate(self, query_ids: Sequence[Any] | npt.NDArray[Any], actor_names: Sequence[Any] | npt.NDArray[Any]
               ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        """Each step's row and column in a table with these query ids and actor names (-1 where absent)."""
        rows = {str(q): i for i, q in enumerate(np.asarray(query_ids, dtype=object).tolist())}
        cols = {str(a): j for j, a in enumerate(np.asarray(actor_names, dtype=object).tolist())}
        r = np.fromiter((rows.get(q, -1) for q in self.query_id.tolist()), dtype=np.intp, count=len(self))
        c = np.fromiter((cols.get(a, -1) for a in self.actor.tolist()), dtype=np.intp, count=len(self))
        return r, c


def _cell_codes(qid: StrArray, act: StrArray) -> npt.NDArray[np.int64]:
    """An integer per step numbering its (query, actor) cell by first appearance."""
    seen: dict[tuple[str, str], int] = {}
    return np.fromiter((seen.setdefault((q, a), len(seen)) for q, a in zip(qid.tolist(), act.tolist(),
                                                                              strict=True)),
                       dtype=np.int64, count=qid.shape[0])


def fill_model_latency(episodes: Episodes, actor_names: Sequence[str], ttft_ms: FloatArray, itl_ms: FloatArray
                       ) -> tuple[Episodes, int]:
    """Model steps without a measured latency get ``TTFT + (tokens_out - 1) * ITL`` (RouterWorld, equations 1 and
    5): the step's own TTFT/ITL where both are known, else its actor's (milliseconds in the table). Returns the
    steps and how many were filled."""
    lat = episodes.latency_s.copy()
    need = (episodes.kind == "model") & np.isnan(lat) & ~np.isnan(episodes.tokens_out)
    if not need.any():
        return episodes, 0
    tail = np.maximum(episodes.tokens_out - 1.0, 0.0)
    own = episodes.ttft_s + tail * episodes.itl_s
    col = {str(a): j for j, a in enumerate(actor_names)}
    j = np.fromiter((col.get(a, -1) for a in episodes.actor.tolist()), dtype=np.intp, count=len(episodes))
    known = j >= 0
    actor_ttft = np.where(known, ttft_ms[np.clip(j, 0, None)] if ttft_ms.size else np.nan, np.nan) / 1000.0
    actor_itl = np.where(known, itl_ms[np.clip(j, 0, None)] if itl_ms.size else np.nan, np.nan) / 1000.0
    theirs = actor_ttft + tail * actor_itl
    filled = np.where(np.isnan(own), theirs, own)
    use = need & ~np.isnan(filled)
    lat[use] = filled[use]
    return replace(episodes, latency_s=lat), int(use.sum())


def episode_table(episodes: Episodes, *, queries: Queries | None = None, actors: Actors | None = None,
                  name: str = "episodes", meta: Mapping[str, Any] | None = None) -> RoutingTable:
    """A routing table built from episodes: queries and actors default to the ids and names in the steps (first
    appearance); pass :class:`Queries` / :class:`Actors` for text, datasets, splits, metadata, prices and TTFT/ITL.
    Cells without an episode are unobserved (NaN)."""
    if queries is None:
        queries = Queries.create(list(dict.fromkeys(episodes.query_id.tolist())))
    if actors is None:
        actors = Actors.create(list(dict.fromkeys(episodes.actor.tolist())))
    score = np.full((len(queries), len(actors)), np.nan, dtype=np.float32)
    table = RoutingTable(queries=queries, actors=actors, score=score, name=name, meta=dict(meta or {}))
    return table.with_episodes(episodes)
