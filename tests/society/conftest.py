"""Small routing tables for the society tests."""

from __future__ import annotations

import numpy as np
import pytest

from routerlab.data.table import Queries, RoutingTable


def make_table(n_queries: int = 60, n_actors: int = 5, seed: int = 0) -> RoutingTable:
    rng = np.random.default_rng(seed)
    dataset = np.array(["math", "code", "law"])[np.arange(n_queries) % 3]
    split = np.where(np.arange(n_queries) % 4 == 0, "test", "train")
    # each actor is good on one dataset, with noise, so the pool has structure
    skill = rng.random((3, n_actors)) * 0.6 + 0.2
    p = skill[np.arange(n_queries) % 3]
    score = (rng.random((n_queries, n_actors)) < p).astype(np.float32)
    queries = Queries.create([f"q{i}" for i in range(n_queries)], text=[f"text {i}" for i in range(n_queries)],
                             dataset=dataset, split=split,
                             extra={"topic": np.array(["a", "b"], dtype=object)[np.arange(n_queries) % 2]})
    from routerlab.data.table import Actors

    return RoutingTable(queries=queries, actors=Actors.create([f"m{j}" for j in range(n_actors)]), score=score,
                        name="tiny")


@pytest.fixture
def tiny_table() -> RoutingTable:
    return make_table()
