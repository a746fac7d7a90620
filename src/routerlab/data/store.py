"""Save and load a routing table as a directory of Parquet files plus a JSON manifest.

Layout of ``DIR``::

    manifest.json      format version, sizes, content hash, file sizes, name, meta, routerlab version,
                       and ``visible_columns``: the query metadata columns routers may read (the rest are hidden)
    queries.parquet    id, text, dataset, split, then metadata columns as ``x.<name>``
    actors.parquet     name, params_b, ttft_ms, itl_ms, input_price, output_price, ``x.<name>``
    <matrix>.parquet   one float32 column ``value``: the (n, m) matrix flattened row-major
    steps.parquet      only when cells hold agentic episodes: one row per step, in long format
                       (:data:`routerlab.data.episodes.STEP_COLUMNS` and ``tool``); covered by the content hash

Why this shape, at RouterEval scale (36,000 x 8,500 = 306M cells, 1.2 GB of float32):

- A flat column is one contiguous buffer: writing is a zero-copy view, reading fills a preallocated
  array row group by row group on several threads, so the peak is the matrix plus a few 16 MiB
  row groups (reading a whole Arrow table then converting would double it).
- Matrices with few distinct values (0/1 scores, NaN, rounded grades) are dictionary-encoded: two
  bits per cell, a 0/1 score matrix of 1.2 GB is ~75 MB on disk and decodes faster than plain
  floats. Continuous matrices (latency, cost) use byte-stream-split instead. Both with LZ4, the
  fastest codec to decode in our measurements (benchmarks/bench_store.py).
- The content hash is computed on a helper thread while the Parquet files are written, and checked on
  every load: each matrix row group is hashed as soon as it is decoded, while the next ones decode, so a
  swapped or edited file is caught for little more than the cost of reading.

Visibility is a declaration, not data: it is not part of the content hash. A table saved before it was
recorded (no ``visible_columns`` in the manifest) gets the declaration of its format's importer
(:mod:`routerlab.data.visibility`); a table of no known format keeps every metadata column hidden.

The directory is written beside the target and renamed into place, so a crash never leaves a
half-written table, and an existing table is replaced only once the new one is complete. Its files and
directory get the modes the user's umask gives (not tempfile's 0600/0700).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from routerlab._atomic import atomic_write, replace_directory, write_text
from routerlab._version import __version__
from routerlab.data.episodes import NUMERIC_STEP_COLUMNS, STEP_COLUMNS, Episodes
from routerlab.data.table import (
    ACTOR_NUMERIC_FIELDS,
    MATRIX_FIELDS,
    Actors,
    Hasher,
    Queries,
    RoutingTable,
    hash_labels,
    hash_matrix_header,
)
from routerlab.data.visibility import declared_visible
from routerlab.errors import DataError, UsageError

FORMAT = "routerlab-table"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
ROW_GROUP = 1 << 22
"""Values per matrix row group (16 MiB of float32): small enough to decode in parallel with little
memory on top of the matrix, large enough that per-group overhead does not show."""
DICTIONARY_MAX_DISTINCT = 1 << 12
"""Up to this many distinct values in a sample, a matrix is dictionary-encoded (0/1 scores: 2 bits a cell)."""
COMPRESSIONS = ("lz4", "zstd", "snappy", "none")
STEPS_FILE = "steps.parquet"
"""The steps of a table's agentic episodes, when it has any."""


def _threads() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


# ---------------------------------------------------------------------------------------- columns


def _to_arrow_column(values: np.ndarray) -> pa.Array:
    if values.dtype != object:
        return pa.array(values)
    try:
        return pa.array(values.tolist())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else json.dumps(v, default=str) for v in values.tolist()])


def _frame(base: dict[str, np.ndarray], extra: dict[str, np.ndarray] | Any) -> pa.Table:
    cols = {k: _to_arrow_column(v) for k, v in base.items()}
    cols.update({f"x.{k}": _to_arrow_column(np.asarray(v)) for k, v in extra.items()})
    return pa.table(cols)


def _split_extra(
    tbl: pa.Table, base: list[str], file: Path
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    missing = [c for c in base if c not in tbl.column_names]
    if missing:
        raise DataError(f"missing columns {missing}", file=file, field=missing[0])
    core = {c: tbl.column(c).to_numpy(zero_copy_only=False) for c in base}
    extra = {}
    for c in tbl.column_names:
        if c.startswith("x."):
            arr = tbl.column(c).to_numpy(zero_copy_only=False)
            extra[c[2:]] = arr.astype(object) if arr.dtype.kind in "US" else arr
    return core, extra


def _few_distinct(flat: npt.NDArray[np.float32], sample: int = 1 << 20) -> bool:
    """Whether a strided sample of the matrix holds few distinct values (then dictionary encoding pays)."""
    if flat.size == 0:
        return True
    part = flat[:: max(1, flat.size // sample)]
    return int(np.unique(part.view(np.uint32)).size) <= DICTIONARY_MAX_DISTINCT


def write_matrix(mat: npt.NDArray[np.float32], file: Path, *, compression: str = "lz4") -> None:
    """Write one (n, m) matrix as a flat float32 column ``value`` (row-major), in 16 MiB row groups."""
    flat = np.ascontiguousarray(mat, dtype=np.float32).reshape(-1)
    few = _few_distinct(flat)
    atomic_write(file, lambda tmp: pq.write_table(
        pa.table({"value": pa.array(flat)}),  # a zero-copy view of the numpy buffer
        tmp,
        compression=compression,
        row_group_size=ROW_GROUP,
        use_dictionary=few,
        use_byte_stream_split=not few,
        write_statistics=False,
    ))


# ---------------------------------------------------------------------------------------- save


def save(table: RoutingTable, path: str | Path, *, compression: str = "lz4") -> Path:
    """Write ``table`` to directory ``path`` atomically; an existing table there is replaced.

    ``compression`` applies to the matrices (``lz4``, ``zstd``, ``snappy`` or ``none``); the small
    query and actor files always use zstd. A directory that is not a routerlab table is never touched.
    """
    if compression not in COMPRESSIONS:
        raise UsageError(f"compression must be one of {COMPRESSIONS}, got {compression!r}")
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise DataError("exists and is a file, not a table directory; refusing to overwrite it", file=target)
    if target.exists() and not (target / MANIFEST).exists() and any(target.iterdir()):
        raise DataError("exists and is not a routerlab table directory; refusing to overwrite it", file=target)
    with replace_directory(target) as tmp:  # the whole table directory at once: an old table is replaced
        q, a = table.queries, table.actors
        jobs: list[Callable[[], object]] = [
            lambda: table.content_hash,  # hashing overlaps with writing; cached on the table
            lambda: atomic_write(tmp / "queries.parquet", lambda t: pq.write_table(
                _frame({"id": q.ids, "text": q.text, "dataset": q.dataset, "split": q.split}, q.extra),
                t,
                compression="zstd",
            )),
            lambda: atomic_write(tmp / "actors.parquet", lambda t: pq.write_table(
                _frame({"name": a.names, **{k: getattr(a, k) for k in ACTOR_NUMERIC_FIELDS}}, a.extra),
                t,
                compression="zstd",
            )),
        ]
        for key, mat in table.matrices().items():
            jobs.append(_matrix_job(mat, tmp / f"{key}.parquet", compression))
        if table.episodes is not None:
            jobs.append(_steps_job(table.episodes, tmp / STEPS_FILE))
        _run_all(jobs)
        stored_hash = _stored_hash(table, tmp)
        files = sorted(p.name for p in tmp.iterdir())
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "routerlab_version": __version__,
            "name": table.name,
            "n_queries": table.n_queries,
            "n_actors": table.n_actors,
            "matrices": sorted(table.matrices()),
            "matrix_layout": "one float32 column 'value', the (n_queries, n_actors) matrix flattened row-major",
            "content_hash": stored_hash,
            "visible_columns": sorted(q.visible),
            **({} if table.episodes is None else
               {"episodes": {"file": STEPS_FILE, "cells": table.episodes.n_cells, "steps": len(table.episodes)}}),
            "files": {name: (tmp / name).stat().st_size for name in files},
            "meta": table.meta,
        }
        write_text(tmp / MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")
    return target


def _label_digest(queries: Queries, actors: Actors) -> str:
    h = hashlib.sha256()
    hash_labels(h, queries, actors)
    return h.hexdigest()


def _stored_hash(table: RoutingTable, tmp: Path) -> str:
    """The content hash of the table as :func:`load` will read it back from ``tmp``.

    That is ``table.content_hash`` unless a metadata column does not survive Parquet unchanged (a column
    mixing numbers and strings is stored as JSON text; integers with gaps come back as floats): then it
    is the hash of the read-back columns with the table's matrices, so that loading verifies.
    """
    n, m = table.n_queries, table.n_actors
    queries, actors = _read_labels(tmp, {"n_queries": n, "n_actors": m})
    if _label_digest(queries, actors) == _label_digest(table.queries, table.actors):
        return table.content_hash
    mats: dict[str, Any] = dict(table.matrices())
    return RoutingTable(queries=queries, actors=actors, episodes=table.episodes, **mats).content_hash


def _matrix_job(mat: npt.NDArray[np.float32], file: Path, compression: str) -> Callable[[], None]:
    return lambda: write_matrix(mat, file, compression=compression)


def _steps_job(episodes: Episodes, file: Path) -> Callable[[], None]:
    return lambda: write_steps(episodes, file)


def write_steps(episodes: Episodes, file: Path) -> None:
    """Write episodes in long format, one row per step (the columns of ``STEP_COLUMNS`` and ``tool``)."""
    cols: dict[str, pa.Array] = {
        "query_id": pa.array(episodes.query_id.tolist(), pa.string()),
        "actor": pa.array(episodes.actor.tolist(), pa.string()),
        "step": pa.array(episodes.step, pa.int64()),
        "kind": pa.array(episodes.kind.tolist(), pa.string()),
    }
    cols.update({k: pa.array(getattr(episodes, k), pa.float64()) for k in NUMERIC_STEP_COLUMNS})
    cols["tool"] = pa.array(episodes.tool.tolist(), pa.string())
    atomic_write(file, lambda tmp: pq.write_table(pa.table(cols), tmp, compression="zstd"))


def read_steps(file: Path) -> Episodes:
    """Episodes from a steps file written by :func:`write_steps` (every value checked as on import)."""
    try:
        tbl = pq.read_table(str(file))
    except (OSError, pa.ArrowInvalid) as exc:
        raise DataError(f"cannot read: {exc}", file=file) from None
    missing = [c for c in STEP_COLUMNS if c not in tbl.column_names]
    if missing:
        raise DataError(f"missing columns {missing}", file=file, field=missing[0])
    col = {c: tbl.column(c).to_numpy(zero_copy_only=False) for c in tbl.column_names}
    return Episodes.create(col["query_id"], col["actor"], col["step"], col["kind"],
                           **{k: col[k] for k in NUMERIC_STEP_COLUMNS}, tool=col.get("tool"), source=file)


def _run_all(jobs: list[Callable[[], object]]) -> None:
    """Run the jobs on a few threads (Arrow and hashlib release the GIL); the first error is raised."""
    with ThreadPoolExecutor(max_workers=min(_threads(), len(jobs))) as pool:
        futures: list[Future[object]] = [pool.submit(job) for job in jobs]
        for f in futures:
            f.result()


# ---------------------------------------------------------------------------------------- load


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest of table directory ``path``, checked for format and version."""
    target = Path(path)
    mfile = target / MANIFEST
    if not target.exists():
        raise DataError("no such table directory", file=target)
    if not mfile.exists():
        raise DataError(f"not a routerlab table directory (no {MANIFEST}); import data with 'routerlab import'",
                        file=target)
    try:
        manifest = json.loads(mfile.read_text())
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON: {exc.msg}", file=mfile, row=exc.lineno) from None
    except UnicodeDecodeError:
        raise DataError("not UTF-8 text", file=mfile) from None
    if not isinstance(manifest, dict):
        raise DataError(f"expected a JSON object, got {type(manifest).__name__}", file=mfile)
    if manifest.get("format") != FORMAT:
        raise DataError(f"format is {manifest.get('format')!r}, expected {FORMAT!r}", file=mfile, field="format")
    try:
        version = int(manifest.get("format_version", 0))
        n, m = int(manifest["n_queries"]), int(manifest["n_actors"])
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"missing or malformed size/version ({exc})", file=mfile) from None
    if version > FORMAT_VERSION:
        raise DataError(
            f"written by a newer routerlab (format {manifest['format_version']}); upgrade routerlab",
            file=mfile,
            field="format_version",
        )
    if n < 0 or m < 0:
        raise DataError(f"negative size {n} x {m}", file=mfile, field="n_queries")
    return manifest


def _check_size(file: Path, manifest: dict[str, Any]) -> None:
    expected = (manifest.get("files") or {}).get(file.name)
    if not file.exists():
        raise DataError("missing file of the table", file=file)
    if expected is not None and file.stat().st_size != int(expected):
        raise DataError(f"is {file.stat().st_size} bytes but was saved as {expected}; the file was changed or "
                        "truncated after saving", file=file)


def _read_small(file: Path, manifest: dict[str, Any]) -> pa.Table:
    _check_size(file, manifest)
    try:
        return pq.read_table(str(file))
    except (OSError, pa.ArrowInvalid) as exc:
        raise DataError(f"cannot read: {exc}", file=file) from None


def read_matrix(
    file: Path, n: int, m: int, *, threads: int | None = None, hasher: Hasher | None = None
) -> npt.NDArray[np.float32]:
    """Read a matrix written by :func:`write_matrix` into a new (n, m) float32 array.

    Row groups are decoded on ``threads`` threads straight into their slice of one preallocated
    array; any unreadable, short or mistyped file is a :class:`DataError` naming it. With ``hasher``,
    the matrix's bytes are fed to it in order, each row group as soon as it is decoded (while the
    threads decode later ones), so verifying a table costs little more than reading it.
    """
    local = threading.local()

    def open_file() -> pq.ParquetFile:
        pf: pq.ParquetFile | None = getattr(local, "pf", None)
        if pf is None:
            pf = local.pf = pq.ParquetFile(str(file))
        return pf

    try:
        pf0 = pq.ParquetFile(str(file))
    except FileNotFoundError:
        raise DataError("missing matrix file", file=file) from None
    except (OSError, pa.ArrowInvalid) as exc:
        raise DataError(f"cannot read matrix: {exc}", file=file) from None
    md = pf0.metadata
    schema = pf0.schema_arrow
    if schema.names != ["value"] or not pa.types.is_floating(schema.field("value").type):
        raise DataError(f"expected one float column 'value', found {schema}", file=file)
    if md.num_rows != n * m:
        raise DataError(f"holds {md.num_rows} values, expected {n} x {m} = {n * m}", file=file)
    out = np.empty(n * m, dtype=np.float32)
    starts = np.concatenate([[0], np.cumsum([md.row_group(i).num_rows for i in range(md.num_row_groups)])])

    def read_group(i: int) -> None:
        col = open_file().read_row_group(i, columns=["value"], use_threads=False).column(0)
        pos = int(starts[i])
        for chunk in col.chunks:
            if chunk.null_count:
                raise DataError("holds nulls; unobserved cells are stored as NaN", file=file)
            vals = chunk.to_numpy(zero_copy_only=False)
            out[pos : pos + vals.size] = vals
            pos += vals.size
        if pos != int(starts[i + 1]):
            raise DataError(f"row group {i} decodes to {pos - int(starts[i])} values", file=file)

    def hash_group(i: int) -> None:
        if hasher is not None:
            hasher.update(out[int(starts[i]) : int(starts[i + 1])].data)

    workers = max(1, min(threads or _threads(), md.num_row_groups))
    try:
        if workers == 1:
            for i in range(md.num_row_groups):
                read_group(i)
                hash_group(i)
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                for i, f in enumerate([pool.submit(read_group, i) for i in range(md.num_row_groups)]):
                    f.result()
                    hash_group(i)  # hashlib releases the GIL: hashing overlaps the decoding of later groups
    except (OSError, pa.ArrowInvalid) as exc:
        raise DataError(f"cannot read matrix: {exc}", file=file) from None
    return out.reshape(n, m)


def _read_labels(target: Path, manifest: dict[str, Any]) -> tuple[Queries, Actors]:
    """The queries and actors of table directory ``target``, checked against the manifest's sizes."""
    n, m = int(manifest["n_queries"]), int(manifest["n_actors"])
    qfile, afile = target / "queries.parquet", target / "actors.parquet"
    qcore, qextra = _split_extra(_read_small(qfile, manifest), ["id", "text", "dataset", "split"], qfile)
    acore, aextra = _split_extra(_read_small(afile, manifest), ["name", *ACTOR_NUMERIC_FIELDS], afile)
    queries = Queries(
        ids=qcore["id"].astype(object),
        text=qcore["text"].astype(object),
        dataset=qcore["dataset"].astype(object),
        split=qcore["split"].astype(object),
        extra=qextra,
        visible=_visible_columns(manifest, qextra, target),
    )
    actors = Actors(
        names=acore["name"].astype(object),
        params_b=acore["params_b"].astype(np.float64),
        ttft_ms=acore["ttft_ms"].astype(np.float64),
        itl_ms=acore["itl_ms"].astype(np.float64),
        input_price=acore["input_price"].astype(np.float64),
        output_price=acore["output_price"].astype(np.float64),
        extra=aextra,
    )
    if len(queries) != n:
        raise DataError(f"holds {len(queries)} queries but the manifest says {n}", file=qfile)
    if len(actors) != m:
        raise DataError(f"holds {len(actors)} actors but the manifest says {m}", file=afile)
    return queries, actors


def _visible_columns(manifest: dict[str, Any], extra: dict[str, np.ndarray], target: Path) -> frozenset[str]:
    """The manifest's ``visible_columns`` (each must be a query metadata column), or, for a table saved before
    visibility was recorded, its format's declaration (module docstring)."""
    listed = manifest.get("visible_columns")
    if listed is None:
        meta = manifest.get("meta")
        fmt = meta.get("format") if isinstance(meta, dict) else None
        return declared_visible(fmt if isinstance(fmt, str) else None, extra)
    mfile = target / MANIFEST
    if not isinstance(listed, list) or not all(isinstance(c, str) for c in listed):
        raise DataError(f"visible_columns must be a list of column names, got {listed!r}", file=mfile,
                        field="visible_columns")
    unknown = sorted(set(listed) - set(extra))
    if unknown:
        raise DataError(f"visible_columns names {unknown}, which are not query metadata columns of the table "
                        f"({sorted(extra) or 'none'})", file=mfile, field="visible_columns")
    return frozenset(listed)


def load(path: str | Path, *, verify: bool = True) -> RoutingTable:
    """Read a table written by :func:`save`, checking its content hash against the manifest.

    The hash exists to catch a changed or swapped file (a results file records it), so it is checked
    by default; the matrices are hashed while their row groups are decoded, which costs little on top
    of reading. ``verify=False`` trusts the manifest's hash instead (for benchmarks and tools that
    just re-read a table they wrote).
    """
    target = Path(path)
    manifest = read_manifest(target)
    n, m = int(manifest["n_queries"]), int(manifest["n_actors"])
    queries, actors = _read_labels(target, manifest)
    keys = manifest.get("matrices", ["score"])
    if not isinstance(keys, list) or "score" not in keys:
        raise DataError("lists no score matrix", file=target / MANIFEST, field="matrices")
    for key in keys:
        if key not in MATRIX_FIELDS:
            raise DataError(f"unknown matrix {key!r}", file=target / MANIFEST, field="matrices")
    expected = manifest.get("content_hash")
    hasher = hashlib.sha256() if verify and expected else None
    if hasher is not None:
        hash_labels(hasher, queries, actors)
    mats = {}
    for key in MATRIX_FIELDS:  # the hash's order, not the manifest's (sorted) one
        if key not in keys:
            continue
        file = target / f"{key}.parquet"
        _check_size(file, manifest)
        if hasher is not None:
            hash_matrix_header(hasher, key, (n, m))
        mats[key] = read_matrix(file, n, m, hasher=hasher)
    episodes = None
    if manifest.get("episodes") is not None or STEPS_FILE in (manifest.get("files") or {}):
        steps_file = target / STEPS_FILE
        _check_size(steps_file, manifest)
        episodes = read_steps(steps_file)
        if hasher is not None:
            episodes.hash_into(hasher)
        rows, cols = episodes.locate(queries.ids, actors.names)
        bad = np.flatnonzero((rows < 0) | (cols < 0))
        if bad.size:
            raise DataError(f"step {int(episodes.step[bad[0]])} of query {episodes.query_id[bad[0]]!r} and actor "
                            f"{episodes.actor[bad[0]]!r} names a cell the table does not hold", file=steps_file)
    try:
        table = RoutingTable(queries=queries, actors=actors, name=str(manifest.get("name", target.name)),
                             meta=dict(manifest.get("meta", {})), episodes=episodes, **mats)
    except DataError as exc:
        raise DataError(exc.detail, file=target, row=exc.row, field=exc.field) from None
    if hasher is not None:
        # the table holds exactly what was hashed unless it derived a matrix on construction
        actual = hasher.hexdigest() if list(table.matrices()) == list(mats) else table.content_hash
        if actual != expected:
            raise DataError(f"content hash {actual[:12]} does not match the manifest's {str(expected)[:12]}; "
                            "a file of the table was changed or swapped after saving", file=target)
        table.__dict__["content_hash"] = actual  # cached_property slot
    elif expected:
        table.__dict__["content_hash"] = expected  # trust the manifest
    return table
