"""Grading answers a user already has: a JSON-lines file of answers in, the same rows with their grades out.

``routerlab grade`` reads rows ``{query_id, actor, question, answer, reference}`` with optional ``metric``,
``dataset`` and ``choices`` (:func:`read_answers`), gives each row its grader as ``collect`` gives a question
its grader (:class:`~routerlab.llm.graders.GraderChoice`: the user's ``DATASET=NAME``, the user's ``NAME``, the
row's ``metric``, ``mc`` with options, ``short`` otherwise) and grades every row (:func:`grade_answers`). The
output rows are the input rows, every field kept, plus ``score``, ``grader``, ``extracted`` and ``detail``
(fields of those names in the input are replaced): ``routerlab import long`` reads them as a routing table
(``query_id``, ``actor`` and ``score`` are the long format's columns; ``-O rename=question=text`` keeps the
questions' text).

ANSWERS may also be a table ``collect`` wrote (a directory): its generated answers become the rows
(:func:`answers_from_table`), so a collected table can be graded again with another grader, or its answers,
graded by execution or exact match, serve ``routerlab judge-check`` as reference labels.

``choices`` (a list of option texts, ``{"text", "label"}``, or that as JSON text) are options only where the
metric is empty or ``em_mc``, as in LLMRouter's files, whose MBPP rows hold their tests there; with options the
reference is the gold letter, a label, or the option's exact text. A ``reference`` may be a list of texts (MBPP's
``assert`` lines), kept as its Python form, the way LLMRouter writes it. Every bad row is a DataError naming
the file, the line and the field.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from routerlab.errors import DataError, UsageError
from routerlab.llm.graders import Grade, Grader, GraderChoice, Item, get_grader, grader_class

__all__ = ["GRADE_FIELDS", "AnswerRow", "GraderRun", "answers_from_table", "grade_answers", "read_answers"]

REQUIRED_FIELDS: tuple[str, ...] = ("query_id", "actor", "question", "answer", "reference")
GRADE_FIELDS: tuple[str, ...] = ("score", "grader", "extracted", "detail")
"""The fields :func:`grade_answers` adds to every row."""
OPTION_METRICS = ("", "em_mc")
CHUNK = 32
"""Rows handed to a grader's ``grade_many`` at once (the code grader runs a chunk's sandboxes side by side)."""


@dataclass(frozen=True)
class AnswerRow:
    """One row of an answers file: its line, the row as read (written back with the grade) and the item to
    grade, with the name of its grader."""

    line: int
    row: Mapping[str, Any]
    item: Item
    grader: str


@dataclass
class GraderRun:
    """What one grader did in a run: rows graded, the sum of their scores and the seconds spent."""

    n: int = 0
    total: float = 0.0
    seconds: float = 0.0
    rows: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {"n": self.n, "mean_score": self.total / self.n if self.n else None,
                "seconds": round(self.seconds, 4)}


def _text(obj: Mapping[str, Any], key: str, path: Path, line: int, *, required: bool, empty_ok: bool = False,
          number_ok: bool = False) -> str:
    value = obj.get(key)
    if value is None:
        if required:
            raise DataError("missing", file=path, row=line, field=key)
        return ""
    if number_ok and isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise DataError(f"expected a text, got {type(value).__name__} {value!r:.60}", file=path, row=line, field=key)
    if required and not empty_ok and not value.strip():
        raise DataError("empty", file=path, row=line, field=key)
    return value


def answers_from_table(path: Path) -> list[dict[str, Any]]:
    """The generated answers of a table ``collect`` wrote, one row per (question, actor) with a reply: the rows
    of an answers file (``query_id, actor, question, answer, reference``, ``dataset``, ``metric``, ``task_id``,
    ``choices``) plus the cell's own ``score`` and ``grader``. Answers read from option-letter logits have no
    text and are left out."""
    import json

    from routerlab.data.store import load

    table = load(path)
    extra = table.queries.extra
    actors = [a for a in table.actor_names if f"output.{a}" in extra]
    if "gold" not in extra or not actors:
        raise DataError("is not a table collect wrote (no gold answers or no output.<actor> columns); give a "
                        "JSON-lines file of answers", file=path)

    def column(name: str) -> list[str]:
        values = extra.get(name)
        return [""] * table.n_queries if values is None else ["" if v is None else str(v) for v in values.tolist()]

    gold, choices, metric, task_id = column("gold"), column("choices"), column("metric"), column("task_id")
    rows: list[dict[str, Any]] = []
    for j, actor in enumerate(actors):
        outputs, graders = column(f"output.{actor}"), column(f"grader.{actor}")
        for i in range(table.n_queries):
            if not outputs[i]:
                continue
            row: dict[str, Any] = {
                "query_id": str(table.queries.ids[i]), "actor": actor, "dataset": str(table.queries.dataset[i]),
                "question": str(table.queries.text[i]), "answer": outputs[i], "reference": gold[i],
                "metric": metric[i], "task_id": task_id[i], "score": float(table.score[i, j]),
                "grader": graders[i]}
            if choices[i]:
                row["choices"] = json.loads(choices[i])
            rows.append(row)
    if not rows:
        raise DataError("holds no generated answer (every answer came from option-letter logits; collect with "
                        "--mode generate)", file=path)
    return rows


def read_answers(path: Path, choice: GraderChoice) -> list[AnswerRow]:
    """The rows of an answers file, or of a table ``collect`` wrote (module docstring), each with its grader;
    any bad row is a DataError naming the file, the line (the row, for a table) and the field; a (query_id,
    actor) pair given twice too."""
    from routerlab.data._files import iter_jsonl
    from routerlab.llm.questions import not_an_option, option_letter, parse_options

    if not path.exists():
        raise DataError("no such file", file=path)
    source = (enumerate(answers_from_table(path), start=1) if path.is_dir() else iter_jsonl(path))
    out: list[AnswerRow] = []
    seen: dict[tuple[str, str], int] = {}
    checked: set[str] = set()
    for line, obj in source:
        qid = _text(obj, "query_id", path, line, required=True, number_ok=True)
        actor = _text(obj, "actor", path, line, required=True)
        question = _text(obj, "question", path, line, required=True)
        answer = _text(obj, "answer", path, line, required=True, empty_ok=True, number_ok=True)
        ref_value = obj.get("reference")
        if isinstance(ref_value, list) and ref_value and all(isinstance(v, str) for v in ref_value):
            reference = repr(ref_value)  # MBPP's assert lines, written as LLMRouter writes them
        else:
            reference = _text(obj, "reference", path, line, required=True, number_ok=True)
        metric = _text(obj, "metric", path, line, required=False)
        dataset = _text(obj, "dataset", path, line, required=False)
        task_id = _text(obj, "task_id", path, line, required=False, number_ok=True)
        key = (qid, actor)
        if key in seen:
            raise DataError(f"query {qid!r} of actor {actor!r} is given twice (first on line {seen[key]})",
                            file=path, row=line, field="query_id")
        seen[key] = line
        choices: tuple[str, ...] | None = None
        if metric.strip().lower() in OPTION_METRICS:
            try:
                parsed = parse_options(obj.get("choices"))
            except ValueError as exc:
                raise DataError(str(exc), file=path, row=line, field="choices") from None
            if parsed is not None:
                choices, labels = parsed
                letter = option_letter(reference, choices, labels)
                if letter is None:
                    raise DataError(not_an_option(f"{reference!r:.60}", choices, labels), file=path, row=line,
                                    field="reference")
                reference = letter
        name = choice.name_for(dataset, metric, choices is not None)
        if name not in checked:
            grader_class(name)  # every name from --grader was checked; this checks a metric's
            checked.add(name)
        if grader_class(name).kind == "mc" and choices is None:
            raise DataError("graded by mc but has no options (give its choices, or another --grader)",
                            file=path, row=line, field="choices")
        item = Item(question=question, answer=answer, reference=reference, choices=choices, dataset=dataset,
                    metric=metric, query_id=qid, extra={"task_id": task_id} if task_id else {})
        out.append(AnswerRow(line, obj, item, name))
    if not out:
        raise DataError("holds no answer", file=path)
    return out


def grade_answers(rows: Sequence[AnswerRow], *, cache_dir: Path | None = None,
                  graders: Mapping[str, Grader] | None = None) -> tuple[list[dict[str, Any]], dict[str, GraderRun]]:
    """Every row graded by its grader (one instance per name, built here unless given in ``graders``, closed
    after), in chunks through ``grade_many``: the output rows (input fields, then :data:`GRADE_FIELDS`) in input
    order, and per grader what it did."""
    given = dict(graders or {})
    names = sorted({r.grader for r in rows})
    owned: dict[str, Grader] = {}
    runs: dict[str, GraderRun] = {name: GraderRun() for name in names}
    grades: list[Grade | None] = [None] * len(rows)
    for k, r in enumerate(rows):
        runs[r.grader].rows.append(k)
    try:
        for name in names:
            if name not in given:
                owned[name] = get_grader(name, cache_dir=cache_dir)
        for name in names:
            grader = given.get(name) or owned[name]
            run = runs[name]
            for s in range(0, len(run.rows), CHUNK):
                chunk = run.rows[s : s + CHUNK]
                t0 = time.perf_counter()
                got = grader.grade_many([rows[k].item for k in chunk])
                run.seconds += time.perf_counter() - t0
                if len(got) != len(chunk):
                    raise UsageError(f"grader {name} returned {len(got)} grades for {len(chunk)} answers")
                for k, one in zip(chunk, got, strict=True):
                    grades[k] = one
                    run.n += 1
                    run.total += one.score
    finally:
        for owned_grader in owned.values():
            owned_grader.close()
    out: list[dict[str, Any]] = []
    for r, grade in zip(rows, grades, strict=True):
        assert grade is not None
        record = {k: v for k, v in r.row.items() if k not in GRADE_FIELDS}
        out.append({**record, **grade.to_record()})
    return out, runs
