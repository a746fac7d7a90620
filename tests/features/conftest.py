"""Fixtures for the feature tests: a private cache dir per test and small tables with text."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from routerlab.data.table import RoutingTable
from routerlab.features.registry import Encoder


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test writes to ~/.cache (fitted encoders live in caller-owned FitCache objects: nothing leaks)."""
    monkeypatch.setenv("ROUTERLAB_CACHE_DIR", str(tmp_path / "default-cache"))
    yield


def make_table(
    texts: Sequence[str], split: Sequence[str] | None = None, ids: Sequence[str] | None = None
) -> RoutingTable:
    """A two-actor table with these query texts (scores all 0: the feature tests never read them)."""
    n = len(texts)
    return RoutingTable.from_arrays(np.zeros((n, 2)), actors=["a", "b"], text=list(texts), split=split,
                                    query_ids=ids)


TRAIN_TEXTS = [
    "What is 12 plus 7?", "Compute 3 times 9.", "Solve for x: 2x + 3 = 11.",
    "Write a Python function that reverses a string.", "Implement binary search in Python.",
    "What gas do plants release during photosynthesis?", "Explain why the sky looks blue.",
    "What is a tort in contract law?", "Who signs a bill into law?", "What is the capital of France?",
]
TEST_TEXTS = ["What is 5 plus 5?", "Write a Python function that sorts a list.", "What is the capital of Peru?"]


@pytest.fixture
def split_table() -> RoutingTable:
    return make_table(TRAIN_TEXTS + TEST_TEXTS, split=["train"] * len(TRAIN_TEXTS) + ["test"] * len(TEST_TEXTS))


class CountingEncoder(Encoder):
    """A stateless stand-in: a vector derived from the text's hash; counts every text it encodes."""

    name = "counting"
    defaults: ClassVar[dict[str, Any]] = {"dim": 8}

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.calls: list[list[str]] = []

    def _transform(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rows = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.options["dim"])
            rows.append(v / np.linalg.norm(v))
        return np.array(rows, dtype=np.float32).reshape(len(texts), self.options["dim"])

    @property
    def n_encoded(self) -> int:
        return sum(len(c) for c in self.calls)
