"""Long format, writer: :func:`write_long`, a table back to long rows, block by block, plus its side-file."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from routerlab._atomic import atomic_write
from routerlab.data.longformat.actors import _actors_table, actors_path_for
from routerlab.data.longformat.columns import LONG_COLUMNS, PROPENSITY
from routerlab.data.longformat.sources import _kind
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError


def _json_lines(tbl: pa.Table) -> bytes:
    out = []
    for rec in tbl.to_pylist():
        clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in rec.items()}
        out.append(json.dumps(clean, ensure_ascii=False, default=str))
    return ("\n".join(out) + ("\n" if out else "")).encode("utf-8")


def _write_small(tbl: pa.Table, path: Path, kind: str) -> None:
    if kind == "parquet":
        pq.write_table(tbl, str(path), compression="zstd")
    elif kind in ("csv", "tsv"):
        with pa.output_stream(str(path), compression="detect") as out:
            pcsv.write_csv(tbl, out, pcsv.WriteOptions(delimiter="\t" if kind == "tsv" else ","))
    else:
        with pa.output_stream(str(path), compression="detect") as out:
            out.write(_json_lines(tbl))


def _json_strings(values: Sequence[Any] | np.ndarray) -> pa.Array:
    return pa.array([json.dumps(str(v), ensure_ascii=False) for v in values], type=pa.string())


@dataclass(frozen=True)
class _Plan:
    """What every block of one :func:`write_long` call shares: the table, its matrices, the block size."""

    table: RoutingTable
    mats: dict[str, npt.NDArray[np.floating[Any]]]  # the table's matrices, then any extra cell columns
    names: pa.Array  # actor names as an Arrow string array
    step: int  # queries per block
    repeat_text: bool  # query text on every row, not only on a query's first

    def starts(self, *, at_least_one: bool) -> range:
        """First query of each block (``at_least_one``: one block even for a table without queries)."""
        n = self.table.n_queries
        return range(0, max(n, 1) if at_least_one else n, self.step)

    def end(self, q0: int) -> int:
        return min(q0 + self.step, self.table.n_queries)


def _block(
    plan: _Plan, q0: int, q1: int
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.bool_],
           dict[str, npt.NDArray[np.floating[Any]]]]:
    """Rows of queries ``q0:q1``: every cell with any value, and one empty row for a query with none."""
    table, mats, repeat_text = plan.table, plan.mats, plan.repeat_text
    obs = np.zeros((q1 - q0, table.n_actors), dtype=bool)
    for mat in mats.values():
        obs |= ~np.isnan(mat[q0:q1])
    empty = ~obs.any(axis=1)
    obs[empty, 0] = True
    qi, ai = np.nonzero(obs)
    first = np.ones(qi.size, dtype=bool)
    if not repeat_text:
        first[1:] = qi[1:] != qi[:-1]
    values = {f: mat[q0:q1][qi, ai] for f, mat in mats.items()}
    return qi, ai, first, values


def write_long(
    table: RoutingTable,
    path: str | Path,
    *,
    actors_path: str | Path | None = None,
    block_cells: int = 1 << 20,
    repeat_text: bool = False,
    cell_columns: Mapping[str, npt.ArrayLike] | None = None,
) -> tuple[Path, Path]:
    """Write ``table`` in the long format (CSV, TSV, JSON lines or Parquet by extension), block by block.

    Rows are the cells where any matrix has a value, query by query; a query with no such cell gets
    one row with empty values so that it survives the round trip. The query text is written on each
    query's first row only (``repeat_text=True`` repeats it); dataset and split are on every row.
    Actor attributes go to the side-file ``actors_path`` (default ``<stem>.actors.<ext>``). Reading
    both back with :func:`read_long` gives a table with the same content hash. Not carried: query
    metadata columns (``Queries.extra``), and, for a table with no queries written as JSON lines (no
    header line), which optional matrices it had.

    ``cell_columns`` adds numeric columns after the table's, each an (n, m) matrix read at the written cells
    (NaN = empty), e.g. a log's ``propensity`` (:func:`routerlab.data.logs.write_logs`); a value outside the
    table's cells makes a row too. Their names must not be those of the table's columns.
    """
    out = Path(path)
    kind = _kind(out)
    side = Path(actors_path) if actors_path is not None else actors_path_for(out)
    if table.n_actors == 0 and table.n_queries > 0:
        raise UsageError("a table without actors has no cells to write in the long format")
    out.parent.mkdir(parents=True, exist_ok=True)
    mats: dict[str, npt.NDArray[np.floating[Any]]] = dict(table.matrices())
    shape = (table.n_queries, table.n_actors)
    for key, values in (cell_columns or {}).items():
        if key in LONG_COLUMNS and key != PROPENSITY:
            raise UsageError(f"extra column {key!r} would overwrite the long format's own column of that name")
        arr = np.asarray(values, dtype=np.float64)
        if arr.shape != shape:
            raise UsageError(f"extra column {key!r} has shape {arr.shape}, expected {shape} (queries x actors)")
        mats[key] = arr
    names = pa.array(table.actor_names, type=pa.string())
    step = max(1, int(block_cells) // max(1, table.n_actors))
    plan = _Plan(table=table, mats=mats, names=names, step=step, repeat_text=repeat_text)

    def write_cells(tmp: str) -> None:  # the temp names keep the suffixes: compression is chosen by extension
        if kind == "parquet":
            _write_long_parquet(plan, Path(tmp))
        elif kind in ("csv", "tsv"):
            _write_long_csv(plan, Path(tmp), delimiter="\t" if kind == "tsv" else ",")
        else:
            _write_long_jsonl(plan, Path(tmp))
        # the side-file is published just before the cells file: a failure while writing either leaves both
        # targets as they were
        atomic_write(side, lambda t: _write_small(_actors_table(table), Path(t), _kind(side)), keep_suffix=True)

    atomic_write(out, write_cells, keep_suffix=True)
    return out, side


def _long_batch(plan: _Plan, q0: int, *, dictionary: bool) -> pa.Table:
    """The block of long rows starting at query ``q0`` as an Arrow table; dictionary columns for Parquet,
    plain ones for CSV."""
    table, names, q1 = plan.table, plan.names, plan.end(q0)
    qi, ai, first, values = _block(plan, q0, q1)
    qidx = pa.array(qi.astype(np.int32))
    q = table.queries

    def per_query(col: np.ndarray, mask: npt.NDArray[np.bool_] | None = None) -> pa.Array:
        d = pa.array([str(x) for x in col[q0:q1]], type=pa.string())
        idx = qidx if mask is None else pa.array(qi.astype(np.int32), mask=~mask)
        arr = pa.DictionaryArray.from_arrays(idx, d)
        return arr if dictionary else arr.dictionary.take(arr.indices)

    aidx = pa.array(ai.astype(np.int32))
    cols: dict[str, pa.Array] = {
        "query_id": per_query(q.ids),
        "actor": pa.DictionaryArray.from_arrays(aidx, names) if dictionary else names.take(aidx),
        "text": per_query(q.text, first),
        "dataset": per_query(q.dataset),
        "split": per_query(q.split),
    }
    for f, v in values.items():  # the table's matrices in MATRIX_FIELDS order, then the extra columns
        cols[f] = pa.array(v, from_pandas=True)  # NaN -> null
    return pa.table(cols)


def _write_long_parquet(plan: _Plan, out: Path) -> None:
    writer: pq.ParquetWriter | None = None
    try:
        for q0 in plan.starts(at_least_one=True):
            tbl = _long_batch(plan, q0, dictionary=True)
            if writer is None:
                writer = pq.ParquetWriter(str(out), tbl.schema, compression="zstd", compression_level=1)
            writer.write_table(tbl, row_group_size=max(tbl.num_rows, 1))
    finally:
        if writer is not None:
            writer.close()


def _write_long_csv(plan: _Plan, out: Path, *, delimiter: str) -> None:
    with pa.output_stream(str(out), compression="detect") as sink:
        writer: pcsv.CSVWriter | None = None
        try:
            for q0 in plan.starts(at_least_one=True):
                tbl = _long_batch(plan, q0, dictionary=False)
                if writer is None:
                    writer = pcsv.CSVWriter(sink, tbl.schema, write_options=pcsv.WriteOptions(delimiter=delimiter))
                writer.write_table(tbl)
        finally:
            if writer is not None:
                writer.close()


def _write_long_jsonl(plan: _Plan, out: Path) -> None:
    """JSON lines assembled by Arrow string kernels: no Python loop per row."""
    table = plan.table
    q = table.queries
    actor_json = _json_strings(table.actor_names)
    with pa.output_stream(str(out), compression="detect") as sink:
        for q0 in plan.starts(at_least_one=False):
            q1 = plan.end(q0)
            qi, ai, first, values = _block(plan, q0, q1)
            qidx = pa.array(qi.astype(np.int32))
            parts: list[pa.Array | str] = ['{"query_id":', _json_strings(q.ids[q0:q1]).take(qidx),
                                           ',"actor":', actor_json.take(pa.array(ai.astype(np.int32)))]
            text = pa.array([",\"text\":" + json.dumps(str(t), ensure_ascii=False) if t else ""
                             for t in q.text[q0:q1]], type=pa.string())
            parts.append(text.take(pa.array(qi.astype(np.int32), mask=~first)).fill_null(""))
            for col in ("dataset", "split"):
                vals = getattr(q, col)[q0:q1]
                enc = pa.array([f',"{col}":' + json.dumps(str(t), ensure_ascii=False) if t else "" for t in vals],
                               type=pa.string())
                parts.append(enc.take(qidx))
            for f, v in values.items():
                num = pc.cast(pa.array(v, from_pandas=True), pa.string()).fill_null("null")
                parts += [f',{json.dumps(f)}:', num]
            parts.append("}\n")
            lines = pc.binary_join_element_wise(*parts, "")
            offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset : lines.offset + len(lines) + 1]
            data = lines.buffers()[2]
            if data is not None and offsets.size:
                sink.write(memoryview(data)[int(offsets[0]) : int(offsets[-1])])
