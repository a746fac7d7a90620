"""Data-quality checks a router builder must see before trusting a number: repeats and leaks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from routerlab.data.splits import Split
    from routerlab.data.table import RoutingTable

TRAIN = "train"


def _texts(table: RoutingTable) -> list[str]:
    """Query texts as Python strings: hashing them in sets and dicts is linear, while a NumPy unicode
    array would be as wide as the longest text (4.7k characters on MMLU-Pro) and sorted to compare."""
    return [str(t) for t in table.queries.text.tolist()]


def duplicate_texts(table: RoutingTable) -> int:
    """Number of queries whose (non-empty) text repeats an earlier query's text."""
    texts = [t for t in _texts(table) if t]
    return len(texts) - len(set(texts))


def _leaking(table: RoutingTable, split: Split | None) -> npt.NDArray[np.intp]:
    """Positions of held-out queries whose non-empty text also occurs among the training queries' texts.

    With ``split`` the held-out side is ``split.test`` and training is ``split.train`` (the split that
    is actually evaluated, e.g. a random one); without it, the table's split column: every labelled
    query not in ``train`` is held out.
    """
    texts = _texts(table)
    if split is None:
        labels = table.queries.split.astype(str)
        train_rows = np.flatnonzero(labels == TRAIN)
        held_out = np.flatnonzero((labels != TRAIN) & (labels != ""))
    else:
        train_rows = np.asarray(split.train, dtype=np.intp)
        held_out = np.asarray(split.test, dtype=np.intp)
    train_texts = {texts[i] for i in train_rows.tolist()} - {""}
    hit = np.fromiter((texts[i] in train_texts for i in held_out.tolist()), dtype=bool, count=held_out.size)
    out: npt.NDArray[np.intp] = held_out[hit]
    return out


def train_test_overlap(table: RoutingTable, *, split: Split | None = None) -> int:
    """Number of held-out queries whose text also occurs among the training queries: leaks.

    ``split`` is the split that is evaluated; without it the table's split column is used (test, val,
    ... against ``train``).
    """
    return int(_leaking(table, split).size)


def overlap_source(split: Split | None) -> dict[str, Any] | str:
    """What a leak count was measured on: the split's description, or ``"column"`` (the split labels)."""
    return "column" if split is None else split.describe()


def quality_report(table: RoutingTable, *, split: Split | None = None) -> dict[str, Any]:
    """Counts behind ``duplicate_texts`` and ``train_test_overlap``, with the leaks per dataset and
    how many repeated texts carry different scores (a sign that one of the copies is noisy).

    Leaks are counted on ``split`` when given (the split an evaluation actually uses), else on the
    table's split column; ``overlap_split`` in the record says which.
    """
    texts = _texts(table)
    dataset = table.queries.dataset.astype(str)
    groups: dict[str, list[int]] = {}
    for i, t in enumerate(texts):
        if t:
            groups.setdefault(t, []).append(i)
    repeated = [rows for rows in groups.values() if len(rows) > 1]
    score = table.score
    conflicting = 0
    for rows in repeated:
        block = score[rows]
        same = np.all((block == block[0]) | (np.isnan(block) & np.isnan(block[0])))
        conflicting += 0 if bool(same) else 1
    leaks: dict[str, int] = {}
    for d in dataset[_leaking(table, split)].tolist():
        leaks[d] = leaks.get(d, 0) + 1
    return {
        "duplicate_texts": duplicate_texts(table),
        "repeated_text_groups": len(repeated),
        "repeated_texts_with_different_scores": conflicting,
        "train_test_overlap": sum(leaks.values()),
        "train_test_overlap_by_dataset": dict(sorted(leaks.items())),
        "overlap_split": overlap_source(split),
        "empty_texts": sum(1 for t in texts if not t),
        "queries_with_no_observed_score": int(np.count_nonzero(np.isnan(score).all(axis=1))),
    }
