"""MMLU-Pro ``eval_results``: one file of per-question outputs per model, scored as ``pred == answer``.

Inputs: ``model_outputs_<MODEL>_5shots.zip`` (each JSON member is one model's list), the same as plain
``.json``, or a folder of them. The actor is ``<MODEL>`` from the file (or zip member) name. A null ``pred``
(no letter extracted) scores 0 and is counted per model; a question a model lacks is NaN. The raw output
(``generated_text`` or ``model_outputs``, which varies by file) is not kept; the key used is recorded as
the actor metadata ``output_key``.

Queries are the union of ``question_id`` (sorted; id = the number as text), text = ``question``,
dataset = ``category``, no split; ``src``, ``answer`` and ``options`` (JSON text) are metadata. Some files
carry another version of a question (different answer key, text or options): each model is scored
against the answer in its own file, the metadata comes from the first file read (files sorted by name),
the difference is counted in a warning and ``answer_differs`` marks the questions whose answer key differs.
Rows named in errors: the 1-based item position in the model's list (the line for a JSON syntax error).
Entries of a list that are not records (bare strings, numbers, lists: some real files hold category names
or totals between the records) are skipped with one warning per file; a file with no record is an error.

Visible to routers: ``src`` (the source subset, a task label) and ``options`` (part of the prompt). Hidden:
``answer`` and ``answer_differs``, the gold letter and whether files disagree on it
(:mod:`routerlab.data.visibility`).
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from routerlab._words import plural
from routerlab.data.importers import importer
from routerlab.data.importers._common import expand_paths, json_text, parse_json, warn
from routerlab.data.table import Actors, Queries, RoutingTable
from routerlab.data.visibility import declared_visible
from routerlab.errors import DataError
from routerlab.progress import track

_NAME = re.compile(r"^model_outputs_(?P<model>.+?)(?:_\d+shots?)?$", re.I)
OUTPUT_KEYS = ("generated_text", "model_outputs")
_COMPARED = ("answer", "question", "options")


@dataclass
class _ModelRows:
    """One model's outputs: question ids and correctness (0/1), with its null-prediction count."""

    name: str
    where: str
    qids: np.ndarray
    correct: np.ndarray
    null_preds: int
    output_key: str


@dataclass
class _Questions:
    """Each question's fields as first read, and which fields another file gives differently."""

    first: dict[int, dict[str, Any]] = field(default_factory=dict)
    differs: dict[str, set[int]] = field(default_factory=lambda: {k: set() for k in _COMPARED})

    def add(self, qid: int, row: dict[str, Any]) -> None:
        ref = self.first.get(qid)
        if ref is None:
            self.first[qid] = {k: row.get(k) for k in (*_COMPARED, "category", "src")}
            return
        for k in _COMPARED:
            if row.get(k) != ref[k]:
                self.differs[k].add(qid)


@importer("mmlu-pro")
def read_mmlu_pro(paths: list[Path]) -> RoutingTable:
    """MMLU-Pro eval_results model_outputs_<MODEL>_5shots.(zip|json): correctness = pred == answer."""
    notes: list[str] = []
    files = expand_paths(paths, suffixes=(".zip", ".json"), what="MMLU-Pro model output files")
    questions = _Questions()
    models: list[_ModelRows] = []
    seen: dict[str, str] = {}
    for f in track(files, "mmlu-pro: reading", unit="file", label=lambda f: f.name):
        for name, where, data in _members(f):
            if name in seen:
                raise DataError(f"model {name!r} is read twice (also from {seen[name]})", file=where)
            seen[name] = where
            models.append(_parse_model(name, where, data, questions, notes))
            del data
    models.sort(key=lambda m: m.name)

    qids = np.unique(np.concatenate([m.qids for m in models]))
    if qids.shape[0] == 0:
        raise DataError("no question rows in any file", file=files[0])
    score = np.full((qids.shape[0], len(models)), np.nan, dtype=np.float32)
    for j, m in enumerate(models):
        score[np.searchsorted(qids, m.qids), j] = m.correct
        lacking = int(qids.shape[0] - m.qids.shape[0])
        if lacking:
            notes.append(
                warn(
                    f"model {m.name!r} lacks {lacking} of the {plural(qids.shape[0], 'question')} (union of all "
                    "files): NaN",
                    file=m.where,
                )
            )
    counts = {k: len(v) for k, v in questions.differs.items() if v}
    if counts:
        notes.append(
            warn(
                "files disagree on some questions (" + ", ".join(f"{k}: {c}" for k, c in counts.items()) + "); "
                "each model is scored against the answer in its own file, metadata is from the first file read",
                file=_common_parent(files),
                field="answer",
            )
        )
    rows = [questions.first[int(q)] for q in qids.tolist()]
    queries = Queries.create(
        [str(q) for q in qids.tolist()],
        text=[str(r["question"]) for r in rows],
        dataset=[str(r["category"] or "") for r in rows],
        extra={
            "src": np.array([str(r["src"] or "") for r in rows], dtype=object),
            "answer": np.array([str(r["answer"]) for r in rows], dtype=object),
            "options": np.array([json_text(r["options"]) for r in rows], dtype=object),
            "answer_differs": np.isin(qids, np.fromiter(questions.differs["answer"], dtype=np.int64)),
        },
        visible=declared_visible("mmlu-pro", ("src", "options")),  # never the answer
    )
    actors = Actors.create(
        [m.name for m in models],
        extra={
            "output_key": np.array([m.output_key for m in models], dtype=object),
            "null_preds": np.array([m.null_preds for m in models], dtype=np.int64),
        },
    )
    return RoutingTable(
        queries=queries,
        actors=actors,
        score=score,
        name="mmlu-pro",
        meta={"format": "mmlu-pro", "source": [str(f) for f in files], "warnings": notes},
    )


def _common_parent(files: list[Path]) -> Path:
    parents = {f.parent for f in files}
    return parents.pop() if len(parents) == 1 else Path(".")


def _model_name(member: str) -> str | None:
    stem = Path(member).name
    stem = stem[: -len(".json")] if stem.lower().endswith(".json") else stem
    m = _NAME.match(stem)
    return m.group("model") if m else None


def _members(path: Path) -> Iterator[tuple[str, str, Any]]:
    """(model name, where it was read, parsed JSON) for a .json file or each JSON member of a zip."""
    if path.suffix.lower() == ".json":
        name = _model_name(path.name)
        if name is None:
            raise DataError("file name is not model_outputs_<MODEL>_<k>shots.json", file=path)
        try:
            with path.open("rb") as fh:
                data = parse_json(fh, str(path))
        except OSError as exc:
            raise DataError(f"cannot read: {exc.strerror or exc}", file=path) from None
        yield name, str(path), data
        return
    if path.suffix.lower() != ".zip":
        raise DataError(f"mmlu-pro reads .zip or .json files, got {path.suffix or 'no suffix'!r}", file=path)
    try:
        with zipfile.ZipFile(path) as zf:
            members = [i.filename for i in zf.infolist() if i.filename.lower().endswith(".json") and not i.is_dir()]
            members = [m for m in members if not Path(m).name.startswith("._")]  # macOS resource forks
            if not members:
                raise DataError("zip holds no .json member", file=path)
            for member in members:
                name = _model_name(member) or (_model_name(path.stem) if len(members) == 1 else None)
                if name is None:
                    raise DataError(f"member {member!r}: name is not model_outputs_<MODEL>_<k>shots.json", file=path)
                where = f"{path}!{member}"
                with zf.open(member) as fh:
                    data = parse_json(fh, where)
                yield name, where, data
    except zipfile.BadZipFile as exc:
        raise DataError(f"not a zip file ({exc})", file=path) from None
    except (OSError, EOFError, zipfile.LargeZipFile) as exc:
        raise DataError(f"cannot read the zip ({type(exc).__name__}: {exc})", file=path) from None


def _records(name: str, where: str, data: list[Any], notes: list[str]) -> tuple[list[Any], list[int] | None]:
    """The entries of a model's list that are question records (JSON objects), and their 1-based positions
    when some were left out (None when all are records).

    Some real result files hold bare strings or totals between the records (category names, counts): they
    are skipped with one warning per file, and a file with entries but not one record is an error.
    """
    records = [r for r in data if isinstance(r, dict)]
    skipped = len(data) - len(records)
    if not skipped:
        return data, None
    first = next(r for r in data if not isinstance(r, dict))
    example = repr(first) if len(repr(first)) <= 40 else repr(first)[:37] + "..."
    if not records:
        raise DataError(f"holds no question records: none of its {len(data)} entries is a JSON object "
                        f"(first: {example})", file=where)
    notes.append(
        warn(
            f"model {name!r}: skipped {skipped} of {len(data)} entries that are not question records "
            f"(JSON objects), e.g. {example}",
            file=where,
        )
    )
    return records, [i + 1 for i, r in enumerate(data) if isinstance(r, dict)]


def _parse_model(name: str, where: str, data: Any, questions: _Questions, notes: list[str]) -> _ModelRows:
    if not isinstance(data, list):
        raise DataError(f"expected a JSON list of question rows, got {type(data).__name__}", file=where)
    data, positions = _records(name, where, data, notes)
    try:  # fast path: whole columns at once; any surprise falls back to the row-by-row check
        qid_list = [r["question_id"] for r in data]
        answers = [r["answer"] for r in data]
        preds = [r["pred"] for r in data]
        ok = (
            all(type(q) is int for q in qid_list)
            and all(type(a) is str and a for a in answers)
            and all(p is None or type(p) is str for p in preds)
            and all(type(r["question"]) is str for r in data)
            and all(type(r.get("category", "")) is str and type(r.get("src", "")) is str for r in data)
        )
    except (KeyError, TypeError):
        ok = False
    if not ok:
        _check_rows(data, where, positions)
        raise DataError("unexpected row content", file=where)  # _check_rows names the row; kept for safety
    qids = np.array(qid_list, dtype=np.int64)
    correct = np.fromiter((p == a for p, a in zip(preds, answers, strict=True)), dtype=np.float32, count=len(data))
    nulls = preds.count(None)
    uniq, counts = np.unique(qids, return_counts=True)
    if (counts > 1).any():
        dup = int(uniq[counts > 1][0])
        second = int(np.flatnonzero(qids == dup)[1])
        second = positions[second] if positions is not None else second + 1
        raise DataError(f"question_id {dup} repeats in one model's file", file=where, row=second, field="question_id")
    for q, r in zip(qid_list, data, strict=True):
        questions.add(q, r)
    if nulls:
        notes.append(
            warn(
                f"model {name!r}: {nulls} of {len(data)} predictions are null (no letter extracted), scored 0",
                file=where,
                field="pred",
            )
        )
    keys = [k for k in OUTPUT_KEYS if data and k in data[0]]
    return _ModelRows(name, where, qids, correct, nulls, "/".join(keys))


def _check_rows(data: list[Any], where: str, positions: list[int] | None = None) -> None:
    """Row by row: raise a DataError naming the first row and field that is not as expected.

    Rows are named by ``positions`` (their place in the file's list) when non-records were left out.
    """
    for i, r in enumerate(data):
        row = positions[i] if positions is not None else i + 1
        if not isinstance(r, dict):
            raise DataError(f"expected an object, got {type(r).__name__}", file=where, row=row)
        for key in ("question_id", "question", "answer", "pred"):
            if key not in r:
                extra = " (null is allowed: no letter extracted)" if key == "pred" else ""
                raise DataError("missing" + extra, file=where, row=row, field=key)
        qid = r["question_id"]
        if type(qid) is not int:
            raise DataError(f"expected an integer, got {qid!r}", file=where, row=row, field="question_id")
        if not isinstance(r["question"], str):
            raise DataError(f"expected text, got {r['question']!r}", file=where, row=row, field="question")
        answer = r["answer"]
        if not isinstance(answer, str) or not answer:
            raise DataError(f"expected an answer letter, got {answer!r}", file=where, row=row, field="answer")
        if r["pred"] is not None and not isinstance(r["pred"], str):
            raise DataError(f"expected a letter or null, got {r['pred']!r}", file=where, row=row, field="pred")
        for key in ("category", "src"):
            if not isinstance(r.get(key, ""), str):
                raise DataError(f"expected text, got {r[key]!r}", file=where, row=row, field=key)
