"""Validating judges against reference labels and against each other (``routerlab judge-check``).

A label file (``.csv`` or ``.jsonl``) holds one graded answer a row: ``question``, ``answer``, ``reference`` (text)
and a reference-label column (default ``label``: 1/0, or a graded share in [0, 1]); optional ``dataset`` and
``metric`` (they choose a judge's template), ``answer_b`` (a pair's second answer) and ``query_id``. Each judge (any
grader name, usually ``judge:SPEC``) grades every row; its verdicts are then compared:

- with the reference labels: Cohen's kappa, precision, recall, F1 and accuracy, on the rows the judge gave a verdict
  (a row without one is counted apart, ``unparseable``). Verdicts and graded labels are read as 1 from 0.5 up; for
  graded labels Krippendorff's interval alpha of the raw values is added;
- among the judges (two or more): Fleiss' kappa on the rows every judge rated, Krippendorff's nominal alpha on every
  row (a missing verdict is a missing rating), both on the 0/1 verdicts.

Every figure carries a 95% percentile bootstrap interval over rows (:mod:`routerlab.metrics.agreement`), none below
:data:`~routerlab.metrics.bootstrap.MIN_QUERIES` rows. A judge whose kappa interval reaches 0 or below is flagged
``better_than_chance: False``: its agreement with the labels may be chance.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from routerlab.errors import DataError, UsageError
from routerlab.llm.graders.base import Grade, Grader, Item, grader_names
from routerlab.metrics.agreement import (
    Agreement,
    category_counts,
    cohen_kappa_ci,
    fleiss_kappa_ci,
    krippendorff_alpha_ci,
    precision_recall_f1_ci,
)
from routerlab.metrics.bootstrap import MIN_QUERIES

REQUIRED = ("question", "answer", "reference")
OPTIONAL = ("dataset", "metric", "answer_b", "query_id")


@dataclass(frozen=True)
class LabelSet:
    """The rows of a label file as grader items, with their reference labels."""

    items: tuple[Item, ...]
    labels: tuple[float, ...]
    source: str
    column: str

    @property
    def binary(self) -> bool:
        return all(v in (0.0, 1.0) for v in self.labels)


def split_judges(text: str) -> list[str]:
    """``--judges``: grader names, comma-separated; a comma part continues the judge before it (its spec's
    options, ``judge:local:m,threads=1``) unless it starts with a known grader's name."""
    known = set(grader_names())
    judges: list[str] = []
    for part in text.split(","):
        head = part.strip().partition(":")[0]
        starts = "=" not in head and head in known
        if not part.strip():
            raise UsageError(f"--judges {text!r}: an empty judge; write judge:SPEC,judge:SPEC")
        if starts or not judges:
            judges.append(part.strip())
        else:
            judges[-1] += "," + part.strip()
    if len(set(judges)) != len(judges):
        raise UsageError(f"--judges {text!r}: a judge is given twice")
    return judges


def table_label_rows(path: Path) -> list[tuple[int, Mapping[str, Any]]]:
    """A table ``collect`` wrote, as label rows: its generated answers (:func:`routerlab.llm.answers.
    answers_from_table`) with their cells' scores (graded by execution, sympy, exact match, ...) as the ``score``
    labels; a multiple-choice question keeps its options (a judge shows them lettered, as the actor saw them)."""
    from routerlab.llm.answers import answers_from_table

    return list(enumerate(answers_from_table(path), start=1))


def read_labels(path: Path, column: str = "label") -> LabelSet:
    """The rows of a ``.csv`` or ``.jsonl`` label file, or of a table ``collect`` wrote (:func:`table_label_rows`);
    optional ``choices`` (a list of option texts, or its JSON text) make a row multiple choice, its reference the
    gold letter; every bad row is one DataError naming file, row and field."""
    from routerlab.llm.questions import parse_options

    suffix = path.suffix.lower()
    if not path.exists():
        raise DataError("no such file", file=path)
    if not path.is_dir() and suffix not in (".csv", ".jsonl"):
        raise UsageError(f"{path}: a label file is .csv or .jsonl (or a table directory collect wrote)")
    rows: list[tuple[int, Mapping[str, Any]]] = []
    if path.is_dir():
        rows = table_label_rows(path)
        fields = sorted({k for _, r in rows for k in r})
    elif suffix == ".jsonl":
        from routerlab.data._files import iter_jsonl

        rows = list(iter_jsonl(path))
        fields = sorted({k for _, r in rows for k in r}) if rows else []
    else:
        try:
            with path.open(encoding="utf-8", newline="") as fh:
                reader = csv.DictReader(fh)
                fields = list(reader.fieldnames or [])
                rows = [(reader.line_num, r) for r in reader]
        except (UnicodeDecodeError, csv.Error) as exc:
            raise DataError(f"not a readable CSV file ({exc})", file=path) from None
    if not rows:
        raise DataError("no rows", file=path)
    for name in (*REQUIRED, column):
        if name not in fields:
            raise DataError(f"no column {name!r} (the columns: {', '.join(fields) or 'none'})", file=path,
                            field=name)
    items: list[Item] = []
    labels: list[float] = []
    for lineno, row in rows:
        texts: dict[str, str] = {}
        for name in (*REQUIRED, *OPTIONAL):
            value = row.get(name)
            if value is None or (isinstance(value, float) and math.isnan(value)):
                value = ""
            if not isinstance(value, str):
                if name in REQUIRED or isinstance(value, (dict, list)):
                    raise DataError(f"must be text, got {type(value).__name__}", file=path, row=lineno, field=name)
                value = str(value)
            texts[name] = value
        if not texts["question"].strip():
            raise DataError("the question is empty", file=path, row=lineno, field="question")
        labels.append(_label(row.get(column), path, lineno, column))
        extra = {"answer_b": texts["answer_b"]} if texts["answer_b"].strip() else {}
        try:
            options = parse_options(row.get("choices"))
        except ValueError as exc:
            raise DataError(str(exc), file=path, row=lineno, field="choices") from None
        items.append(Item(question=texts["question"], answer=texts["answer"], reference=texts["reference"],
                          choices=None if options is None else options[0], dataset=texts["dataset"],
                          metric=texts["metric"], query_id=texts["query_id"], extra=extra))
    return LabelSet(tuple(items), tuple(labels), str(path), column)


def _label(value: Any, path: Path, row: int, column: str) -> float:
    where = {"file": path, "row": row, "field": column}
    if isinstance(value, bool) or value is None or (isinstance(value, str) and not value.strip()):
        raise DataError("the label is missing; give 1/0 or a graded share in [0, 1]", **where)  # type: ignore[arg-type]
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DataError(f"the label {value!r} is not a number; give 1/0 or a graded share in [0, 1]",
                        **where) from None  # type: ignore[arg-type]
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise DataError(f"the label {value!r} lies outside [0, 1] (a rating out of 10 is given as a share: 7 -> 0.7)",
                        **where)  # type: ignore[arg-type]
    return number


def grade_all(grader: Grader, items: Sequence[Item], chunk: int = 32) -> list[Grade]:
    """Every item's grade, in chunks (each chunk one batched call of the grader), progress on stderr."""
    from routerlab.progress import track

    out: list[Grade] = []
    starts = range(0, len(items), chunk)
    for start in track(starts, f"judge-check: {grader.name}", unit="chunk",
                       label=lambda s: f"rows {s + 1}-{min(s + chunk, len(items))}"):
        out.extend(grader.grade_many(items[start:start + chunk]))
    return out


def _fig(a: Agreement) -> dict[str, Any]:
    return {"value": a.value, "lo": a.lo, "hi": a.hi, "n": a.n, "note": a.note}


def compare(labels: LabelSet, verdicts: Mapping[str, Sequence[float | None]], *, n_boot: int = 1000,
            seed: int = 0) -> dict[str, Any]:
    """The report (module docstring) of each judge's verdicts (None: no verdict) against the labels."""
    ref = np.asarray(labels.labels, dtype=np.float64)
    ref01 = (ref >= 0.5).astype(np.float64)
    judges: dict[str, Any] = {}
    binarised: dict[str, np.ndarray] = {}
    for name, v in verdicts.items():
        raw = np.array([math.nan if x is None else x for x in v], dtype=np.float64)
        rated = ~np.isnan(raw)
        pred = np.where(rated, (raw >= 0.5).astype(np.float64), math.nan)
        binarised[name] = pred
        kappa = cohen_kappa_ci(pred[rated], ref01[rated], n_boot=n_boot, seed=seed)
        prf = precision_recall_f1_ci(pred[rated], ref01[rated], n_boot=n_boot, seed=seed)
        entry: dict[str, Any] = {
            "rated": int(rated.sum()), "unparseable": int((~rated).sum()), "judged_positive": int(np.nansum(pred)),
            "kappa": _fig(kappa), **{k: _fig(a) for k, a in prf.items()},
            "better_than_chance": None if math.isnan(kappa.lo) else bool(kappa.lo > 0.0),
        }
        if not labels.binary:
            pair = np.stack([raw, ref], axis=1)[rated]
            entry["alpha_interval"] = _fig(krippendorff_alpha_ci(pair, "interval", n_boot=n_boot, seed=seed))
        judges[name] = entry
    among: dict[str, Any] | None = None
    if len(verdicts) >= 2:
        matrix = np.stack(list(binarised.values()), axis=1)
        complete = ~np.isnan(matrix).any(axis=1)
        counts = category_counts(matrix[complete])
        among = {
            "rows_every_judge_rated": int(complete.sum()),
            "fleiss_kappa": _fig(fleiss_kappa_ci(counts, n_boot=n_boot, seed=seed)) if complete.any() else
            _fig(Agreement(math.nan, math.nan, math.nan, 0, "no row every judge rated")),
            "krippendorff_alpha": _fig(krippendorff_alpha_ci(matrix, "nominal", n_boot=n_boot, seed=seed)),
        }
    return {
        "labels": labels.source, "reference": labels.column, "rows": len(labels.items),
        "binary_reference": labels.binary, "reference_positive": int(ref01.sum()),
        "reference_rate": float(ref01.mean()), "min_rows_for_intervals": MIN_QUERIES,
        "intervals": len(labels.items) >= MIN_QUERIES, "n_boot": n_boot, "seed": seed, "confidence": 0.95,
        "judges": judges, "among_judges": among,
    }


def verdict_rows(labels: LabelSet, grades: Mapping[str, Sequence[Grade]]) -> list[dict[str, Any]]:
    """Per row: the reference label and each judge's grade (score, verdict read, detail), for the JSON output."""
    out = []
    for i, item in enumerate(labels.items):
        row: dict[str, Any] = {"row": i, "query_id": item.query_id, "label": labels.labels[i]}
        row["judges"] = {name: g[i].to_record() for name, g in grades.items()}
        out.append(row)
    return out

