"""RouteProfile routing data: per query, per model score and token counts, plus model prices and domains.

``routing_test_data.json`` is a JSON list of ``{task_name, query, ground_truth, metric, choices, task_id,
model_performance: {model: {prompt_tokens, completion_tokens, input_token, output_token, success,
task_performance, response}}}``. Mapping: ``task_performance`` -> score, ``prompt_tokens`` -> tokens_in,
``completion_tokens`` -> tokens_out, ``task_name`` -> dataset, the split named in the file name -> split
(``routing_test_data.json`` -> test); ids are ``<file stem>:<0-based item index>`` (texts have no id).

``candidate_models.json`` (prices in USD per 1M tokens, ``parameters`` / ``size``) and
``domain_task_map.json`` (domain -> tasks) are read when given as paths or options, else looked for next
to the data file and in ``../profile_data/``. Cost is then derived by the table from tokens and prices.
``params_b`` is ``parameters`` (the exact count) when present, else ``size`` ("7B"); a task in several
domains gets them all joined by ``|``. Rows named in errors: the 1-based item position in the list.

Visible to routers: ``metric``, ``choices``, ``task_id`` and ``domain``. Hidden: ``ground_truth``, the answer
(:mod:`routerlab.data.visibility`).
"""

from __future__ import annotations

import math
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
    json_start,
    json_text,
    load_json,
    parse_py_literal,
    parse_size_b,
    split_in_name,
    unique_ids,
    warn,
)
from routerlab.data.table import Actors, Queries, RoutingTable
from routerlab.data.visibility import declared_visible
from routerlab.errors import DataError

MODELS_FILE, DOMAINS_FILE = "candidate_models.json", "domain_task_map.json"
PERF = "model_performance"
_TOKEN_PAIRS = (("prompt_tokens", "input_token"), ("completion_tokens", "output_token"))
_QUERY_META = ("ground_truth", "metric", "task_id")
_SIZE_TOLERANCE = 0.10


@dataclass
class _Cells:
    """Per-cell values of one data file, keyed by (row index, model)."""

    score: dict[tuple[int, str], float] = field(default_factory=dict)
    tokens_in: dict[tuple[int, str], float] = field(default_factory=dict)
    tokens_out: dict[tuple[int, str], float] = field(default_factory=dict)


@importer("routeprofile")
def read_routeprofile(
    paths: list[Path],
    *,
    models: str | Path | None = None,
    domains: str | Path | None = None,
) -> RoutingTable:
    """RouteProfile routing_*_data.json: scores and tokens per query, prices and domains from profile_data/."""
    notes: list[str] = []
    data_files: list[Path] = []
    model_file = Path(models) if models is not None else None
    domain_file = Path(domains) if domains is not None else None
    for f in expand_paths(paths, suffixes=(".json",), what="JSON files"):
        if f.suffix.lower() != ".json":
            raise DataError(f"routeprofile reads JSON files, got {f.suffix or 'no suffix'!r}", file=f)
        kind = _kind(f)
        if kind == "models":
            model_file = f
        elif kind == "domains":
            domain_file = f
        else:
            data_files.append(f)
    if not data_files:
        raise DataError("no routing data file among the inputs (only profile files)", file=paths[0])
    model_file = model_file or _find_beside(data_files[0], MODELS_FILE)
    domain_file = domain_file or _find_beside(data_files[0], DOMAINS_FILE)

    ids: list[str] = []
    text: list[str] = []
    dataset: list[str] = []
    split: list[str] = []
    meta: dict[str, list[str]] = {k: [] for k in (*_QUERY_META, "choices")}
    cells = _Cells()
    names: set[str] = set()
    for f in data_files:
        _read_data(f, ids, text, dataset, split, meta, cells, names, notes)
    if not names:
        raise DataError(f"no model results in any row (field {PERF!r} is empty everywhere)", file=data_files[0])
    order = sorted(names)
    col = {m: j for j, m in enumerate(order)}
    n = len(ids)
    mats = {}
    for key in ("score", "tokens_in", "tokens_out"):
        mat = np.full((n, len(order)), np.nan, dtype=np.float32)
        values: dict[tuple[int, str], float] = getattr(cells, key)
        if values:
            rows = np.fromiter((r for r, _ in values), dtype=np.intp, count=len(values))
            cols = np.fromiter((col[m] for _, m in values), dtype=np.intp, count=len(values))
            mat[rows, cols] = np.fromiter(values.values(), dtype=np.float64, count=len(values))
        mats[key] = mat
    absent = int(n * len(order) - len(cells.tokens_out))
    if absent:
        notes.append(warn(f"{absent} (query, model) cells have no entry in {PERF}: read as NaN", file=data_files[0]))

    extra: dict[str, Any] = {k: np.array(v, dtype=object) for k, v in meta.items()}
    if domain_file is not None:
        extra["domain"] = _domains(dataset, domain_file, notes)
    actors = _actors(order, model_file, notes)
    return RoutingTable(
        queries=Queries.create(unique_ids(ids, field="query_id"), text=text, dataset=dataset, split=split, extra=extra,
                               visible=declared_visible("routeprofile", extra)),  # all but ground_truth
        actors=actors,
        score=mats["score"],
        tokens_in=mats["tokens_in"],
        tokens_out=mats["tokens_out"],
        name="routeprofile",
        meta={
            "format": "routeprofile",
            "source": [str(f) for f in [*data_files, model_file, domain_file] if f is not None],
            "warnings": notes,
        },
    )


def _kind(path: Path) -> str:
    """'data' (a JSON list), 'models' (model -> {input_price, ...}) or 'domains' (domain -> [tasks])."""
    if json_start(path) != "{":
        return "data"
    obj = load_json(path)
    if isinstance(obj, dict) and obj and all(isinstance(v, dict) for v in obj.values()):
        return "models"
    if isinstance(obj, dict) and obj and all(isinstance(v, list) for v in obj.values()):
        return "domains"
    raise DataError(
        "a JSON object that is neither candidate models (model -> {input_price, ...}) nor a domain map "
        "(domain -> [tasks]); routing data is a JSON list",
        file=path,
    )


def _find_beside(data_file: Path, name: str) -> Path | None:
    for folder in (data_file.parent, data_file.parent.parent / "profile_data"):
        if (folder / name).is_file():
            return folder / name
    return None


def _read_data(
    path: Path,
    ids: list[str],
    text: list[str],
    dataset: list[str],
    split: list[str],
    meta: dict[str, list[str]],
    cells: _Cells,
    names: set[str],
    notes: list[str],
) -> None:
    data = load_json(path)
    if not isinstance(data, list):
        raise DataError(f"expected a JSON list of query rows, got {type(data).__name__}", file=path)
    stem = path.name.split(".")[0]
    file_split = split_in_name(path)
    failed = 0
    mismatch: dict[str, int] = {}
    no_tokens = 0
    for i, item in enumerate(data):
        row = i + 1
        if not isinstance(item, dict):
            raise DataError(f"expected an object, got {type(item).__name__}", file=path, row=row)
        q = item.get("query")
        if not isinstance(q, str):
            raise DataError("missing" if q is None else "not text", file=path, row=row, field="query")
        perf = item.get(PERF)
        if not isinstance(perf, dict):
            raise DataError("missing" if perf is None else "expected model -> result", file=path, row=row, field=PERF)
        qi = len(ids)
        ids.append(f"{stem}:{i}")
        text.append(q)
        task = item.get("task_name")
        dataset.append("" if task is None else str(task))
        split.append(file_split)
        for k in _QUERY_META:
            v = item.get(k)
            meta[k].append("" if v is None else str(v))
        choices = item.get("choices")
        if isinstance(choices, str) and choices.strip():
            choices = parse_py_literal(choices, file=path, row=row, field="choices")
        meta["choices"].append(json_text(choices))
        for m, res in perf.items():
            where = f"{PERF}.{m}"
            if not isinstance(res, dict):
                raise DataError("expected an object", file=path, row=row, field=where)
            if "task_performance" not in res:
                raise DataError("missing", file=path, row=row, field=f"{where}.task_performance")
            s = as_score(res["task_performance"], file=path, row=row, field=f"{where}.task_performance")
            if res.get("success", True) is False:
                failed += 1
                s = float("nan")
            toks = []
            for main, alt in _TOKEN_PAIRS:
                t = as_amount(res.get(main), file=path, row=row, field=f"{where}.{main}")
                if alt in res:
                    a = as_amount(res.get(alt), file=path, row=row, field=f"{where}.{alt}")
                    if math.isnan(t):
                        t = a
                    elif not math.isnan(a) and a != t:
                        mismatch[main] = mismatch.get(main, 0) + 1
                toks.append(t)
            no_tokens += math.isnan(toks[0]) or math.isnan(toks[1])
            names.add(str(m))
            cells.score[qi, str(m)] = s
            cells.tokens_in[qi, str(m)] = toks[0]
            cells.tokens_out[qi, str(m)] = toks[1]
    if failed:
        notes.append(
            warn(f"{plural(failed, 'cell')} {verb(failed, 'has', 'have')} success: false; their score is read as NaN",
                 file=path, field="success")
        )
    for main, count in mismatch.items():
        alt = dict(_TOKEN_PAIRS)[main]
        notes.append(warn(f"{plural(count, 'cell')} {verb(count, 'has', 'have')} {main} != {alt}; {main} is used",
                          file=path, field=main))
    if no_tokens:
        notes.append(warn(f"{plural(no_tokens, 'cell')} {verb(no_tokens, 'lacks', 'lack')} token counts: NaN (cost "
                          "unknown there)", file=path))


def _domains(tasks: list[str], path: Path, notes: list[str]) -> np.ndarray:
    """Each task's domains in the map's order joined by '|' ('' when no domain lists the task)."""
    data = load_json(path)
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise DataError("expected a JSON object of domain -> list of tasks", file=path)
    of_task: dict[str, list[str]] = {}
    for domain, listed in data.items():
        for t in listed:
            of_task.setdefault(str(t), []).append(str(domain))
    present = sorted(set(tasks))
    several = [t for t in present if len(of_task.get(t, [])) > 1]
    if several:
        notes.append(
            warn(f"{plural(len(several), 'task')} {verb(len(several), 'belongs', 'belong')} to several domains, joined "
                 f"with '|': {', '.join(several)}", file=path)
        )
    none = [t for t in present if t not in of_task]
    if none:
        notes.append(warn(f"{plural(len(none), 'task')} {verb(len(none), 'is', 'are')} in no domain (domain ''): "
                          f"{', '.join(none)}", file=path))
    return np.array(["|".join(of_task.get(t, [])) for t in tasks], dtype=object)


def _actors(names: list[str], path: Path | None, notes: list[str]) -> Actors:
    if path is None:
        notes.append(warn(f"no {MODELS_FILE} found: prices unknown, so no cost is derived"))
        return Actors.create(names)
    data = load_json(path)
    if not isinstance(data, dict):
        raise DataError(f"expected a JSON object of model -> details, got {type(data).__name__}", file=path)
    unscored = [m for m in data if m not in set(names)]
    if unscored:
        notes.append(warn(f"{plural(len(unscored), 'model')} {verb(len(unscored), 'has', 'have')} no scores and "
                          f"{verb(len(unscored), 'is', 'are')} left out: {', '.join(unscored)}", file=path))
    unknown = [m for m in names if m not in data]
    if unknown:
        notes.append(warn(f"no entry for scored model(s) {', '.join(unknown)}: prices unknown", file=path))
    prices: dict[str, list[float]] = {"input_price": [], "output_price": []}
    params: list[float] = []
    extra: dict[str, list[str]] = {k: [] for k in ("size", "model", "service", "architecture", "license")}
    for m in names:
        info = data.get(m, {})
        if not isinstance(info, dict):
            raise DataError(f"expected an object, got {type(info).__name__}", file=path, field=m)
        for k in prices:
            prices[k].append(as_amount(info.get(k), file=path, row=None, field=f"{m}.{k}"))
        params.append(_params_b(m, info, path, notes))
        for k in extra:
            v = info.get(k)
            extra[k].append("" if v is None else str(v))
    return Actors.create(
        names, params_b=params, extra={k: np.array(v, dtype=object) for k, v in extra.items()}, **prices
    )


def _params_b(model: str, info: dict[str, Any], path: Path, notes: list[str]) -> float:
    """``parameters`` (the exact count in billions) when present, else the ``size`` label ("7B")."""
    size = parse_size_b(info.get("size"))
    exact = info.get("parameters")
    if exact is None or exact == "":
        return size
    value = as_amount(exact, file=path, row=None, field=f"{model}.parameters")
    if not math.isnan(size) and not math.isnan(value) and abs(size - value) > _SIZE_TOLERANCE * value:
        notes.append(
            warn(
                f"size {info.get('size')!r} differs from parameters {exact!r} by more than "
                f"{_SIZE_TOLERANCE:.0%}; params_b uses parameters",
                file=path,
                field=f"{model}.size",
            )
        )
    return value
