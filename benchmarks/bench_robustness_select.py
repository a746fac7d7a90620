"""The question selection of the local robustness experiment (benchmarks/bench_robustness.py), kept apart so the
expensive LLM stages can be run (and their call cache warmed) on exactly the same questions."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from routerlab.data.table import RoutingTable

SHORT_DATASETS = ("arc_challenge", "commonsense_qa", "openbook_qa")
MAX_CHARS = 300


POOL = 300


def local_split(table: RoutingTable, n_test: int, seed: int = 0, pool: int = POOL
                ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """(train rows, test rows): ``n_test`` short questions (under 300 characters) of ARC, CommonsenseQA and
    OpenBookQA, taken round-robin over the datasets from a seeded order of each, are the test part (so a smaller
    sample is nested in a larger one); the questions outside the first ``pool`` of that order train, so the
    training part (and every prompt built from it) is the same for every ``n_test`` up to ``pool``."""
    if not 0 < n_test <= pool:
        raise ValueError(f"n_test must lie in 1..{pool}, got {n_test}")
    rng = np.random.default_rng(seed)
    text_len = np.array([len(str(x)) for x in table.queries.text])
    orders = [rng.permutation(np.flatnonzero((table.queries.dataset == ds) & (text_len < MAX_CHARS)))
              for ds in SHORT_DATASETS]
    interleaved = [int(order[i]) for i in range(max(o.size for o in orders)) for order in orders if i < order.size]
    test = np.sort(np.asarray(interleaved[:n_test], dtype=np.intp))
    train = np.setdiff1d(np.arange(table.n_queries), np.asarray(interleaved[:pool], dtype=np.intp))
    return train.astype(np.intp), test
