"""Data-quality checks a router builder must see before trusting a number: repeats and leaks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from routerlab.data.table import RoutingTable

TRAIN = "train"


def _texts(table: RoutingTable) -> np.ndarray:
    return table.queries.text.astype(str)


def duplicate_texts(table: RoutingTable) -> int:
    """Number of queries whose (non-empty) text repeats an earlier query's text."""
    texts = _texts(table)
    texts = texts[texts != ""]
    return int(texts.shape[0] - np.unique(texts).shape[0])


def train_test_overlap(table: RoutingTable) -> int:
    """Number of non-train queries (test, val, ...) whose text also occurs in the train split: leaks."""
    texts = _texts(table)
    split = table.queries.split.astype(str)
    train = set(texts[(split == TRAIN) & (texts != "")].tolist())
    held_out = (split != TRAIN) & (split != "") & (texts != "")
    return int(sum(1 for t in texts[held_out].tolist() if t in train))


def quality_report(table: RoutingTable) -> dict[str, Any]:
    """Counts behind ``duplicate_texts`` and ``train_test_overlap``, with the leaks per dataset and
    how many repeated texts carry different scores (a sign that one of the copies is noisy)."""
    texts = _texts(table)
    split = table.queries.split.astype(str)
    dataset = table.queries.dataset.astype(str)
    groups: dict[str, list[int]] = {}
    for i, t in enumerate(texts.tolist()):
        if t:
            groups.setdefault(t, []).append(i)
    repeated = [rows for rows in groups.values() if len(rows) > 1]
    score = table.score
    conflicting = 0
    for rows in repeated:
        block = score[rows]
        same = np.all((block == block[0]) | (np.isnan(block) & np.isnan(block[0])))
        conflicting += 0 if bool(same) else 1
    train = {t for t, rows in groups.items() if any(split[r] == TRAIN for r in rows)}
    leaks: dict[str, int] = {}
    for i in np.flatnonzero((split != TRAIN) & (split != "")).tolist():
        if texts[i] and texts[i] in train:
            leaks[str(dataset[i])] = leaks.get(str(dataset[i]), 0) + 1
    return {
        "duplicate_texts": duplicate_texts(table),
        "repeated_text_groups": len(repeated),
        "repeated_texts_with_different_scores": conflicting,
        "train_test_overlap": sum(leaks.values()),
        "train_test_overlap_by_dataset": dict(sorted(leaks.items())),
        "empty_texts": int(np.count_nonzero(texts == "")),
        "queries_with_no_observed_score": int(np.count_nonzero(np.isnan(score).all(axis=1))),
    }
