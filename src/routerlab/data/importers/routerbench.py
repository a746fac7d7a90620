"""RouterBench's wide layout: one row per prompt, one quality / response / cost column per model.

Reads the CSV files RouterDC re-split from RouterBench 0-shot (``datasets/routerbench_zs/*.csv``, or their
folder) and, with ``trust_pickle=True``, the upstream pickle (``routerbench_0shot.pkl``). Columns:

- ``<model>``: quality 0/1 (empty = not observed -> NaN, counted in a warning per file);
- ``<model>|total_cost``: USD per query -> ``cost_usd``; ``<model>|model_response``: not kept (large);
- ``sample_id`` -> query id, ``prompt`` (a Python-list repr; its parts are joined by a blank line) -> text,
  ``eval_name`` -> dataset, ``oracle_model_to_route_to`` -> query metadata; split from the file name.

Visible to routers: ``sample_id`` (RouterBench's id of the prompt). Hidden: ``oracle_model_to_route_to``, the
best model read off the outcomes; a router that read it would score the oracle (:mod:`routerlab.data.visibility`).

Quality, response and cost columns come in different model orders, so they are matched by model name,
never by position. Actors are sorted by name.

Accepted pickle contents: a pandas DataFrame (needs pandas installed), a dict of columns (name -> list,
tuple or 1-D array, or name -> {index: value} as ``DataFrame.to_dict()`` writes) or a list of row dicts.
Rows named in errors and warnings: for a CSV the line where the record starts (header = line 1; a record
can span lines), for a pickle the 1-based record position.
"""

from __future__ import annotations

import csv
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from routerlab._words import plural, verb
from routerlab.data._files import allow_long_csv_fields
from routerlab.data.importers import importer
from routerlab.data.importers._common import (
    expand_paths,
    float_column,
    normalise_split,
    parse_py_literal,
    split_from_filename,
    unique_ids,
    warn,
)
from routerlab.data.table import Actors, Queries, RoutingTable
from routerlab.data.visibility import declared_visible
from routerlab.errors import DataError

ID, PROMPT, EVAL, ORACLE = "sample_id", "prompt", "eval_name", "oracle_model_to_route_to"
RESPONSE, COST = "|model_response", "|total_cost"
_INDEX_COLUMNS = frozenset({"", "Unnamed: 0", "index"})
_KNOWN = frozenset({ID, PROMPT, EVAL, ORACLE})
_PICKLE_SUFFIXES = (".pkl", ".pickle")
_PART_SEPARATOR = "\n\n"
_ID_SPLITS = frozenset({"train", "test", "val", "valid", "validation", "dev"})


@dataclass
class _Frame:
    """One input file as columns of raw cells, with the row number a person would look for each row."""

    file: Path
    columns: dict[str, list[Any]]
    rows: list[int]


@dataclass
class _Block:
    """One input file parsed: per-row fields and per-model quality and cost columns."""

    file: Path
    raw_ids: list[str]
    ids: list[str]
    text: list[str]
    dataset: list[str]
    split: str
    oracle: list[str]
    score: dict[str, np.ndarray]
    cost: dict[str, np.ndarray]


@importer("routerbench")
def read_routerbench(paths: list[Path], *, trust_pickle: bool = False) -> RoutingTable:
    """RouterBench wide layout: CSV files or a folder of them (RouterDC's re-split), or the 0-shot pickle."""
    files = expand_paths(paths, suffixes=(".csv", *_PICKLE_SUFFIXES), what="RouterBench CSV or pickle files")
    notes: list[str] = []
    blocks = [_parse(_read_frame(f, trust_pickle), notes) for f in files]

    models = sorted({m for b in blocks for m in b.score})
    for b in blocks:
        lacking = [m for m in models if m not in b.score]
        if lacking:
            notes.append(
                warn(
                    f"no column for {len(lacking)} model(s) other files have, left NaN: {', '.join(lacking)}",
                    file=b.file,
                )
            )
    col = {m: j for j, m in enumerate(models)}
    n = sum(len(b.ids) for b in blocks)
    score = np.full((n, len(models)), np.nan, dtype=np.float32)
    cost = np.full((n, len(models)), np.nan, dtype=np.float32)
    start = 0
    for b in blocks:
        stop = start + len(b.ids)
        for m, values in b.score.items():
            score[start:stop, col[m]] = values
        for m, values in b.cost.items():
            cost[start:stop, col[m]] = values
        start = stop

    _check_id_splits(blocks, files, notes)
    ids = [i for b in blocks for i in b.ids]
    if len(blocks) > 1:
        before = list(ids)
        ids = unique_ids(ids, file=_common_parent(files), field=ID)
        if ids != before:
            notes.append(f"sample_id repeats across the {len(files)} files read together; later copies got '#k'")
    queries = Queries.create(
        ids,
        text=[t for b in blocks for t in b.text],
        dataset=[d for b in blocks for d in b.dataset],
        split=[b.split for b in blocks for _ in b.ids],
        extra={
            ID: np.array([s for b in blocks for s in b.raw_ids], dtype=object),
            ORACLE: np.array([o for b in blocks for o in b.oracle], dtype=object),
        },
        visible=declared_visible("routerbench", (ID, ORACLE)),  # the id; never the oracle's pick
    )
    return RoutingTable(
        queries=queries,
        actors=Actors.create(models),
        score=score,
        cost_usd=cost if not np.isnan(cost).all() else None,
        name="routerbench",
        meta={"format": "routerbench", "source": [str(f) for f in files], "warnings": notes},
    )


def _check_id_splits(blocks: list[_Block], files: list[Path], notes: list[str]) -> None:
    """Warn when sample_ids name a RouterBench split (``arc-challenge.val.97``) other than the file's split."""
    differ = total = 0
    named: set[str] = set()
    for b in blocks:
        if not b.split:
            continue
        for sid in b.raw_ids:
            parts = sid.split(".")
            if len(parts) >= 3 and parts[-2].lower() in _ID_SPLITS:
                total += 1
                named.add(parts[-2].lower())
                differ += normalise_split(parts[-2]) != b.split
    if differ:
        notes.append(
            warn(
                f"{differ} of {total} sample_ids name a RouterBench split ({'/'.join(sorted(named))}) other than "
                "their file's; the split is taken from the file name (e.g. RouterDC's re-split) and the id "
                "keeps RouterBench's",
                file=_common_parent(files),
                field=ID,
            )
        )


def _common_parent(files: list[Path]) -> Path:
    parents = {f.parent for f in files}
    return parents.pop() if len(parents) == 1 else Path(".")


# ---------------------------------------------------------------- reading a file into columns


def _read_frame(path: Path, trust_pickle: bool) -> _Frame:
    if path.suffix.lower() in _PICKLE_SUFFIXES:
        return _frame_from_pickle(path, trust_pickle)
    if path.suffix.lower() != ".csv":
        raise DataError(
            f"routerbench reads .csv files or a pickle (.pkl, .pickle), got {path.suffix or 'no suffix'!r}",
            file=path,
        )
    return _frame_from_csv(path)


def _frame_from_csv(path: Path) -> _Frame:
    allow_long_csv_fields()
    records: list[list[str]] = []
    rows: list[int] = []
    try:
        with path.open("r", encoding="utf-8-sig", newline="") as fh:
            reader = csv.reader(fh)
            try:
                header = next(reader)
            except StopIteration:
                raise DataError("empty file, expected a RouterBench CSV header", file=path, row=1) from None
            line = reader.line_num
            for rec in reader:
                start, line = line + 1, reader.line_num
                if not rec:
                    continue
                if len(rec) != len(header):
                    field = header[len(rec)] if len(rec) < len(header) else f"column {len(rec)}"
                    raise DataError(
                        f"has {len(rec)} cells, the header has {len(header)}", file=path, row=start, field=field
                    )
                records.append(rec)
                rows.append(start)
    except csv.Error as exc:
        raise DataError(f"malformed CSV: {exc}", file=path, row=reader.line_num) from None
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text: {exc.reason}", file=path) from None
    except OSError as exc:
        raise DataError(f"cannot read: {exc.strerror or exc}", file=path) from None
    _check_header(header, path)
    columns = {name: [rec[j] for rec in records] for j, name in enumerate(header)}
    return _Frame(path, columns, rows)


def _check_header(header: list[str], path: Path) -> None:
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise DataError("column name repeats; cannot tell the columns apart", file=path, row=1, field=name)
        seen.add(name)
    for name in (ID, PROMPT):
        if name not in seen:
            raise DataError(
                "missing column: not RouterBench's wide layout (sample_id, prompt, eval_name, <model>, "
                "<model>|total_cost, ...)",
                file=path,
                row=1,
                field=name,
            )


class _NeedsPandas(Exception):
    """A pickle refers to pandas classes while pandas is not installed."""


class _NoPandasUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module.split(".")[0] == "pandas":
            raise _NeedsPandas(f"{module}.{name}")
        return super().find_class(module, name)


def _frame_from_pickle(path: Path, trust_pickle: bool) -> _Frame:
    if not trust_pickle:
        raise DataError(
            "reading a pickle runs code stored in it; pass --trust-pickle (trust_pickle=True) only for a "
            "file you trust, or convert it to CSV",
            file=path,
        )
    try:
        import pandas  # pickles of DataFrames need it; imported only here, and only when installed
    except ImportError:
        pandas = None
    try:
        if pandas is not None:
            obj = pandas.read_pickle(path)  # also handles pickles written by older pandas versions
        else:
            with path.open("rb") as fh:
                obj = _NoPandasUnpickler(fh).load()
    except _NeedsPandas as exc:
        raise DataError(
            f"this pickle holds a pandas object ({exc}); reading it needs pandas: pip install pandas",
            file=path,
        ) from None
    except OSError as exc:
        raise DataError(f"cannot read: {exc.strerror or exc}", file=path) from None
    except Exception as exc:  # unpickling user data can raise anything; report it as bad input
        raise DataError(f"cannot unpickle ({type(exc).__name__}: {exc})", file=path) from None
    columns = _columns_of(obj, path)
    header = list(columns)
    _check_header(header, path)
    n = len(columns[header[0]]) if header else 0
    return _Frame(path, columns, list(range(1, n + 1)))


def _columns_of(obj: Any, path: Path) -> dict[str, list[Any]]:
    """The accepted pickle shapes as columns of equal length (see the module docstring)."""
    if hasattr(obj, "to_dict") and hasattr(obj, "columns"):  # a pandas DataFrame
        obj = obj.to_dict(orient="list")
    if isinstance(obj, dict):
        cols: dict[str, list[Any]] = {}
        index: list[Any] | None = None
        for key, col in obj.items():
            if isinstance(col, dict):
                index = list(col) if index is None else index
                values = [col.get(i) for i in index]
            elif isinstance(col, list | tuple) or (isinstance(col, np.ndarray) and col.ndim == 1):
                values = list(col)
            else:
                raise DataError(
                    f"column is a {type(col).__name__}; expected a list, tuple, 1-D array or index -> value dict",
                    file=path,
                    field=str(key),
                )
            cols[str(key)] = values
        lengths = {len(v) for v in cols.values()}
        if len(lengths) > 1:
            raise DataError(f"columns have different lengths {sorted(lengths)}", file=path)
        return cols
    if isinstance(obj, list | tuple) and all(isinstance(r, dict) for r in obj):
        names: dict[str, None] = {}
        for r in obj:
            names.update(dict.fromkeys(str(k) for k in r))
        return {k: [r.get(k) for r in obj] for k in names}
    raise DataError(
        f"unsupported pickle content {type(obj).__name__}; accepted: a pandas DataFrame, a dict of columns "
        "or a list of row dicts",
        file=path,
    )


# ---------------------------------------------------------------- parsing the columns


def _parse(frame: _Frame, notes: list[str]) -> _Block:
    path, cols, rows = frame.file, frame.columns, frame.rows
    n = len(rows)
    models: list[str] = []
    cost_cols: dict[str, str] = {}
    responses: set[str] = set()
    unknown: list[str] = []
    for name in cols:
        if name in _KNOWN or name in _INDEX_COLUMNS:
            continue
        if name.endswith(COST):
            cost_cols[name[: -len(COST)]] = name
        elif name.endswith(RESPONSE):
            responses.add(name[: -len(RESPONSE)])
        elif "|" in name:
            unknown.append(name)
        else:
            models.append(name)
    if not models:
        raise DataError("no model quality column found", file=path, row=1, field="<model>")
    if unknown:
        notes.append(warn(f"ignored {len(unknown)} unknown '|' column(s): {', '.join(unknown)}", file=path))
    orphans = sorted((set(cost_cols) | responses) - set(models))
    if orphans:
        notes.append(
            warn(
                f"cost/response columns of model(s) with no quality column are ignored: {', '.join(orphans)}", file=path
            )
        )
    no_cost = [m for m in models if m not in cost_cols]
    if no_cost:
        notes.append(warn(f"no '<model>{COST}' column for {', '.join(no_cost)}: cost left NaN", file=path))

    score = {m: float_column(cols[m], file=path, rows=rows, field=m, score=True) for m in models}
    cost = {m: float_column(cols[c], file=path, rows=rows, field=c, score=False) for m, c in cost_cols.items()}
    cost = {m: v for m, v in cost.items() if m in score}
    if n:
        empty = np.isnan(np.column_stack([score[m] for m in models]))
        if empty.any():
            notes.append(
                warn(
                    f"{plural(int(empty.sum()), 'empty quality cell')} in "
                    f"{plural(int(empty.any(axis=1).sum()), 'row')} read as NaN (not observed)",
                    file=path,
                )
            )
        for m, values in cost.items():
            missing = np.isnan(values) & ~np.isnan(score[m])
            if missing.any():
                notes.append(
                    warn(
                        f"{int(missing.sum())} empty cost cells for scored cells read as NaN", file=path, field=m + COST
                    )
                )

    raw_ids = [_text_cell(v, path, r, ID) for v, r in zip(cols[ID], rows, strict=True)]
    empty_ids = [r for i, r in zip(raw_ids, rows, strict=True) if not i]
    if empty_ids:
        raise DataError("empty sample_id", file=path, row=empty_ids[0], field=ID)
    before = list(raw_ids)
    ids = unique_ids(raw_ids, file=path, field=ID)
    if ids != before:
        notes.append(f"{path}: repeated sample_id values made unique with '#k'")

    multi = 0
    text: list[str] = []
    for value, r in zip(cols[PROMPT], rows, strict=True):
        t, parts = _prompt_text(value, path, r)
        text.append(t)
        multi += parts > 1
    if multi:
        notes.append(
            warn(f"{multi} prompts are lists of several parts, joined with a blank line", file=path, field=PROMPT)
        )

    file_dataset, split = split_from_filename(path)
    if EVAL in cols:
        dataset = [_text_cell(v, path, r, EVAL) for v, r in zip(cols[EVAL], rows, strict=True)]
        blank = sum(1 for d in dataset if not d)
        if blank:
            notes.append(
                warn(f"{plural(blank, 'row')} {verb(blank, 'has', 'have')} no eval_name; dataset taken from the file "
                     "name", file=path, field=EVAL)
            )
            dataset = [d or file_dataset for d in dataset]
    else:
        notes.append(warn(f"no eval_name column; dataset taken from the file name: {file_dataset!r}", file=path))
        dataset = [file_dataset] * n
    oracle = (
        [_text_cell(v, path, r, ORACLE) for v, r in zip(cols[ORACLE], rows, strict=True)]
        if ORACLE in cols
        else [""] * n
    )
    return _Block(path, before, ids, text, dataset, split, oracle, score, cost)


def _text_cell(value: Any, path: Path, row: int, field: str) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, str | int | np.integer):
        return str(value).strip()
    raise DataError(f"expected text, got {type(value).__name__}", file=path, row=row, field=field)


def _prompt_text(value: Any, path: Path, row: int) -> tuple[str, int]:
    """The query text of a prompt cell (a Python-list repr, or a list in a pickle) and its number of parts."""
    parsed = parse_py_literal(value, file=path, row=row, field=PROMPT) if isinstance(value, str) else value
    if isinstance(parsed, str):
        return parsed, 1
    if isinstance(parsed, list | tuple) and parsed and all(isinstance(p, str) for p in parsed):
        return _PART_SEPARATOR.join(parsed), len(parsed)
    raise DataError(
        f"prompt is a {type(parsed).__name__}; expected a list of strings (as a Python repr)",
        file=path,
        row=row,
        field=PROMPT,
    )
