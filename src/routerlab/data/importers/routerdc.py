"""RouterDC's ``{question, scores, cluster_id?}`` JSON family (also LLMRouter's ``dcrouter_preprocessed``).

Each input is a JSON list (or JSON lines) of rows ``{"question": str, "scores": {model: number}}``, with an
optional ``cluster_id``. Dataset and split come from the file name (``mmlu_train.json`` -> mmlu / train,
``gsm8k-test.json`` -> gsm8k / test, ``train.json`` -> no dataset / train, ``data.json`` -> data / no split).
Texts repeat (within and across files), so query ids are generated: ``<file stem>:<0-based item index>``.

Optional extra inputs, given as options or auto-detected among the paths:

- query metadata (``queries=[...]``, or any ``.jsonl`` whose rows have ``query``): LLMRouter's
  ``default_query_*.jsonl``, joined by exact text. It adds ``task_name`` (the dataset when the file name
  gives none), ``ground_truth``, ``metric``, ``choices`` (parsed, kept as JSON text) and ``task_id``. When a
  text has several metadata rows, the row from the file of the same split wins, then the first in reading
  order; texts whose candidates name different tasks are counted in a warning.
- model prices (``models=path``, or a ``.json`` dict of models with ``input_price``): LLMRouter's
  ``default_llm.json`` (USD per 1M tokens; ``size`` -> params_b). Only scored models are kept.

Visible to routers: ``cluster_id`` (a k-means cluster of the text's embedding), ``task_name``, ``metric``,
``choices`` and ``task_id``. Hidden: ``ground_truth``, the answer (:mod:`routerlab.data.visibility`).

Rows named in errors: the 1-based item position in a JSON list, the line number in JSON lines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from routerlab._words import plural, verb
from routerlab.data.importers import importer
from routerlab.data.importers._common import (
    as_amount,
    as_score,
    expand_paths,
    iter_jsonl,
    json_start,
    json_text,
    load_json,
    parse_py_literal,
    parse_size_b,
    split_from_filename,
    unique_ids,
    warn,
)
from routerlab.data.table import Actors, Queries, RoutingTable
from routerlab.data.visibility import declared_visible
from routerlab.errors import DataError

_META_FIELDS = ("task_name", "ground_truth", "metric", "choices", "task_id")


@dataclass
class _Rows:
    """One score file: its rows' texts, score dicts and cluster ids, with their 1-based item numbers."""

    file: Path
    dataset: str
    split: str
    questions: list[str] = field(default_factory=list)
    scores: list[dict[str, float]] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)


@dataclass
class _Meta:
    """One metadata row of a query file."""

    split: str
    order: int
    values: dict[str, str]
    file: Path
    row: int


@importer("routerdc")
def read_routerdc(
    paths: list[Path],
    *,
    queries: Iterable[str | Path] | None = None,
    models: str | Path | None = None,
) -> RoutingTable:
    """RouterDC / LLMRouter {question, scores} JSON, with optional query metadata and model prices."""
    notes: list[str] = []
    score_files: list[Path] = []
    query_files = [Path(q) for q in queries or []]
    model_file = Path(models) if models is not None else None
    for f in expand_paths(paths, suffixes=(".json", ".jsonl"), what="JSON files"):
        kind = _kind(f)
        if kind == "scores":
            score_files.append(f)
        elif kind == "queries":
            query_files.append(f)
        elif model_file is None:
            model_file = f
        else:
            raise DataError(f"a second model file; {model_file} was given already", file=f)
    if not score_files:
        raise DataError("no score file among the inputs (JSON rows with 'question' and 'scores')", file=paths[0])

    parts = [_read_scores(f) for f in score_files]
    names = sorted({m for p in parts for s in p.scores for m in s})
    if not names:
        raise DataError("no model scores in any row", file=score_files[0], field="scores")
    col = {m: j for j, m in enumerate(names)}
    n = sum(len(p.questions) for p in parts)
    score = np.full((n, len(names)), np.nan, dtype=np.float32)
    r = 0
    for p in parts:
        missing = 0
        for s in p.scores:
            for m, v in s.items():
                score[r, col[m]] = v
            missing += len(names) - len(s)
            r += 1
        if missing:
            notes.append(
                warn(
                    f"{missing} score cells missing for models other rows have: read as NaN",
                    file=p.file,
                    field="scores",
                )
            )

    ids = unique_ids([f"{_stem(p.file)}:{i}" for p in parts for i in range(len(p.questions))], field="query_id")
    texts = [q for p in parts for q in p.questions]
    splits = [p.split for p in parts for _ in p.questions]
    datasets = [p.dataset for p in parts for _ in p.questions]
    extra: dict[str, Any] = {}
    if any(p.clusters for p in parts):
        extra["cluster_id"] = np.array(
            [c for p in parts for c in (p.clusters or [""] * len(p.questions))], dtype=object
        )
    if query_files:
        meta = _join_metadata(texts, splits, query_files, notes)
        for key in _META_FIELDS:
            extra[key] = np.array([m.get(key, "") for m in meta], dtype=object)
        datasets = [d or m.get("task_name", "") for d, m in zip(datasets, meta, strict=True)]

    actors = _actors(names, model_file, notes)
    return RoutingTable(
        queries=Queries.create(ids, text=texts, dataset=datasets, split=splits, extra=extra,
                               visible=declared_visible("routerdc", extra)),  # all but ground_truth
        actors=actors,
        score=score,
        name="routerdc",
        meta={
            "format": "routerdc",
            "source": [str(f) for f in [*score_files, *query_files, *([model_file] if model_file else [])]],
            "warnings": notes,
        },
    )


def _stem(path: Path) -> str:
    return path.name.split(".")[0] if path.suffix else path.name


def _kind(path: Path) -> str:
    """'scores', 'queries' or 'models', from the content (the first row of a list, or the dict's values)."""
    if path.suffix.lower() not in (".json", ".jsonl"):
        raise DataError(f"routerdc reads JSON or JSON-lines files, got {path.suffix or 'no suffix'!r}", file=path)
    if path.suffix.lower() == ".jsonl":
        for lineno, obj in iter_jsonl(path):
            if "question" in obj or "scores" in obj:
                return "scores"
            if "query" in obj:
                return "queries"
            raise DataError(
                "JSON-lines row has neither 'question'/'scores' (scores) nor 'query' (query metadata)",
                file=path,
                row=lineno,
                field="question",
            )
        raise DataError("empty JSON-lines file", file=path)
    head = json_start(path)
    if head == "{":
        data = load_json(path)
        if isinstance(data, dict) and data and all(isinstance(v, dict) and "input_price" in v for v in data.values()):
            return "models"
        raise DataError(
            "a JSON object that is not a model list (name -> {input_price, output_price, ...}); "
            "score files are JSON lists of {question, scores}",
            file=path,
        )
    return "scores"


def _read_scores(path: Path) -> _Rows:
    dataset, split = split_from_filename(path)
    out = _Rows(path, dataset, split)
    if path.suffix.lower() == ".jsonl":
        items: Iterable[tuple[int, Any]] = iter_jsonl(path)
    else:
        data = load_json(path)
        if not isinstance(data, list):
            raise DataError(f"expected a JSON list of {{question, scores}} rows, got {type(data).__name__}", file=path)
        items = enumerate(data, start=1)
    for row, item in items:
        if not isinstance(item, dict):
            raise DataError(f"expected an object, got {type(item).__name__}", file=path, row=row)
        q = item.get("question")
        if not isinstance(q, str):
            raise DataError(
                "missing" if q is None else f"expected text, got {type(q).__name__}",
                file=path,
                row=row,
                field="question",
            )
        s = item.get("scores")
        if not isinstance(s, dict):
            raise DataError(
                "missing" if s is None else f"expected an object of model -> score, got {type(s).__name__}",
                file=path,
                row=row,
                field="scores",
            )
        cells: dict[str, float] = {}
        for m, v in s.items():
            x = as_score(v, file=path, row=row, field=f"scores.{m}")
            if not math.isnan(x):
                cells[str(m)] = x
        out.questions.append(q)
        out.scores.append(cells)
        out.rows.append(row)
        c = item.get("cluster_id")
        out.clusters.append("" if c is None else str(c))
    if not out.questions:
        raise DataError("no rows", file=path)
    if not any(out.clusters):
        out.clusters = []
    return out


def _join_metadata(texts: list[str], splits: list[str], files: list[Path], notes: list[str]) -> list[dict[str, str]]:
    """Metadata for each text by exact match; same-split file first, then reading order (module docstring)."""
    by_text: dict[str, list[_Meta]] = {}
    order = 0
    for f in files:
        _, split = split_from_filename(f)
        for lineno, obj in iter_jsonl(f):
            q = obj.get("query")
            if not isinstance(q, str):
                raise DataError("missing or not text", file=f, row=lineno, field="query")
            values = {}
            for key in _META_FIELDS:
                v = obj.get(key)
                if key == "choices" and isinstance(v, str) and v.strip():
                    v = json_text(parse_py_literal(v, file=f, row=lineno, field=key))
                elif v is not None and not isinstance(v, str):
                    v = json_text(v) if key == "choices" else str(v)
                values[key] = "" if v is None else v
            by_text.setdefault(q, []).append(_Meta(split, order, values, f, lineno))
            order += 1
    out: list[dict[str, str]] = []
    unmatched = 0
    ambiguous: dict[str, _Meta] = {}
    for text, split in zip(texts, splits, strict=True):
        cands = by_text.get(text)
        if not cands:
            unmatched += 1
            out.append({})
            continue
        pool = [c for c in cands if split and c.split == split] or cands
        pick = min(pool, key=lambda c: c.order)
        if len({c.values["task_name"] for c in pool}) > 1:
            ambiguous.setdefault(text, pick)
        out.append(pick.values)
    if ambiguous:
        first = next(iter(ambiguous.values()))
        notes.append(
            warn(
                f"{len(ambiguous)} query texts match metadata rows of more than one task; took the row from the "
                f"file of the same split, else the first in reading order (first case: row {first.row})",
                file=first.file,
                field="task_name",
            )
        )
    if unmatched:
        notes.append(
            warn(
                f"{unmatched} of {plural(len(texts), 'question')} {verb(unmatched, 'has', 'have')} no metadata row "
                f"with the same text in {', '.join(f.name for f in files)}: no task, dataset from the file name only",
                field="query",
            )
        )
    return out


def _actors(names: list[str], model_file: Path | None, notes: list[str]) -> Actors:
    if model_file is None:
        return Actors.create(names)
    data = load_json(model_file)
    if not isinstance(data, dict):
        raise DataError(f"expected a JSON object of model -> details, got {type(data).__name__}", file=model_file)
    unscored = [m for m in data if m not in set(names)]
    if unscored:
        notes.append(
            warn(f"{plural(len(unscored), 'model')} {verb(len(unscored), 'has', 'have')} no scores and "
                 f"{verb(len(unscored), 'is', 'are')} left out: {', '.join(unscored)}", file=model_file)
        )
    unpriced = [m for m in names if m not in data]
    if unpriced:
        notes.append(warn(f"no entry for scored model(s) {', '.join(unpriced)}: prices unknown", file=model_file))
    cols: dict[str, list[Any]] = {k: [] for k in ("params_b", "input_price", "output_price")}
    extra: dict[str, list[str]] = {k: [] for k in ("size", "model", "service", "feature")}
    for m in names:
        info = data.get(m, {})
        if not isinstance(info, dict):
            raise DataError(f"expected an object, got {type(info).__name__}", file=model_file, field=m)
        for k in ("input_price", "output_price"):
            cols[k].append(as_amount(info.get(k), file=model_file, row=None, field=f"{m}.{k}"))
        size = parse_size_b(info.get("size"))
        if math.isnan(size) and info.get("size") not in (None, ""):
            notes.append(
                warn(
                    f"size {info.get('size')!r} is not a parameter count; params_b unknown",
                    file=model_file,
                    field=f"{m}.size",
                )
            )
        cols["params_b"].append(size)
        for k in extra:
            v = info.get(k)
            extra[k].append("" if v is None else str(v))
    return Actors.create(names, extra={k: np.array(v, dtype=object) for k, v in extra.items()}, **cols)
