"""Long format, rows: the rows of small long files (logs) as columns, each row keeping its file and row number.

:func:`read_long` folds rows into a table's cells and forgets where each came from; a log needs one record per
row (its propensity, its rewards) and errors that name the row (a repeated query, a missing propensity), so
:func:`read_rows` keeps the rows as they are. It reads every file whole into memory: meant for logs (one row
per logged query), not for RouterEval-sized long tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from routerlab.data._files import expand_paths
from routerlab.data.longformat.columns import CELL_FIELDS, STRING_FIELDS, _decode, _strings, column_map
from routerlab.data.longformat.ingest import _check_ids, _numbers, _numbers64
from routerlab.data.longformat.readers import _batches, _prefetch
from routerlab.data.longformat.sources import _COMPRESSED, _KINDS, _open_source, is_actors_file
from routerlab.errors import DataError, UsageError


@dataclass(frozen=True)
class LongRows:
    """Rows of long files, column by column: ``strings`` (query_id, actor, text, dataset, split; ``""`` =
    empty), ``numbers`` (float64, NaN = empty; only columns some file has), and where each row came from."""

    files: tuple[Path, ...]
    actors_files: tuple[Path, ...]  # ``*.actors.*`` side-files among the inputs (not read here)
    strings: dict[str, npt.NDArray[np.object_]]
    numbers: dict[str, npt.NDArray[np.float64]]
    file: npt.NDArray[np.intp]  # index into ``files``
    row: npt.NDArray[np.int64]  # 1-based row number as errors count it (CSV: the header is row 1)
    present: frozenset[str]  # canonical columns some file has

    def __len__(self) -> int:
        return int(self.file.shape[0])

    def error(self, i: int, message: str, field: str | None = None) -> DataError:
        """A :class:`DataError` naming the file and row of row ``i``."""
        return DataError(message, file=self.files[int(self.file[i])], row=int(self.row[i]), field=field)

    def where(self, i: int) -> str:
        """``FILE row R`` of row ``i``, for messages naming two rows."""
        return f"{self.files[int(self.file[i])]} row {int(self.row[i])}"


def read_rows(
    paths: Sequence[str | Path],
    *,
    extra: Sequence[str] = (),
    unit: Sequence[str] = (),
    columns: Mapping[str, str] | None = None,
    rename: str | Mapping[str, str] | None = None,
    batch_rows: int = 1 << 16,
) -> LongRows:
    """Every row of the long files ``paths`` (CSV/TSV, JSON lines/array, Parquet; folders expanded): ids and
    per-query text, the cell numbers (checked as :func:`read_long` checks them), ``propensity`` (in (0, 1]) and
    the ``extra`` numeric columns (finite, >= 0; those also in ``unit``: in [0, 1]). A file without a split
    column takes its split from its name, as in :func:`read_long`. Bad values name file, row and field."""
    files = expand_paths([Path(p) for p in paths], suffixes=tuple(s + c for s in _KINDS for c in ("", *_COMPRESSED)),
                         what="long-format files")
    side = tuple(p for p in files if is_actors_file(p))
    files = [p for p in files if not is_actors_file(p)]
    if not files:
        raise UsageError("no long-format data file among the inputs (only an actors side-file)")
    clash = sorted(set(extra) & set(column_map()))
    if clash:
        raise UsageError(f"extra columns {clash} are long-format columns already")
    mapping = {**column_map(columns, rename), **{e: e for e in extra}}
    fields = [*mapping]
    strings: dict[str, list[npt.NDArray[np.object_]]] = {c: [] for c in STRING_FIELDS}
    numbers: dict[str, list[npt.NDArray[np.float64]]] = {c: [] for c in fields if c not in STRING_FIELDS}
    file_idx: list[npt.NDArray[np.intp]] = []
    rows: list[npt.NDArray[np.int64]] = []
    present: set[str] = set()
    for index, path in enumerate(files):
        src = _open_source(path, mapping, index)
        if not src.json:
            present |= set(src.names)
        with closing(_prefetch(_batches(src, fields, int(batch_rows)))) as it:
            for batch in it:
                k = len(batch)
                if k == 0:
                    continue
                if batch.keys is not None:
                    src.seen |= batch.keys
                    present |= batch.keys
                for what in ("query_id", "actor"):
                    _check_ids(_strings(batch.cols[what]), batch, src, what)
                for c in STRING_FIELDS:
                    arr = batch.cols.get(c)
                    if arr is None and c == "split" and src.split:
                        strings[c].append(np.full(k, src.split, dtype=object))
                        continue
                    if arr is None:
                        strings[c].append(np.full(k, "", dtype=object))
                        continue
                    text = _decode(_strings(arr)).fill_null("").to_numpy(zero_copy_only=False)
                    strings[c].append(np.asarray(text, dtype=object))
                for c in numbers:
                    arr = batch.cols.get(c)
                    if arr is None:
                        numbers[c].append(np.full(k, np.nan))
                    elif c in CELL_FIELDS:
                        numbers[c].append(_numbers(arr, c, batch, src).astype(np.float64))
                    else:
                        numbers[c].append(_numbers64(arr, c, batch, src, unit=c in unit))
                file_idx.append(np.full(k, index, dtype=np.intp))
                rows.append(np.asarray(batch.lines, dtype=np.int64) if batch.lines is not None
                            else batch.start + np.arange(k, dtype=np.int64))
        if src.split:
            present.add("split")  # the split comes from the file's name
    return LongRows(
        files=tuple(files),
        actors_files=side,
        strings={c: _cat(v, object) for c, v in strings.items()},
        numbers={c: _cat(v, np.float64) for c, v in numbers.items() if c in present},
        file=_cat(file_idx, np.intp),
        row=_cat(rows, np.int64),
        present=frozenset(present & set(fields)),
    )


def _cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
