"""Candidate groups (routereval.txt 4.2, SPEC 4): all-strong, all-weak and strong-to-weak pools.

Eligible actors have train performance in [0.1, 0.9], sorted best first. all-strong draws m actors
from the top 20%, all-weak from the bottom 20%; strong-to-weak splits the sorted list into m slices
and draws the j-th actor from the j-th slice. Among K seeded draws the group with the highest oracle
performance on the train split is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.metrics.bounds import actor_means, oracle_score

KINDS = ("all-strong", "all-weak", "strong-to-weak")


@dataclass(frozen=True)
class CandidateGroup:
    kind: str
    m: int
    actors: list[str]
    train_oracle: float

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "m": self.m, "actors": self.actors, "train_oracle": self.train_oracle}


def _draws(kind: str, pool: npt.NDArray[np.intp], m: int, k: int, rng: np.random.Generator) -> list[np.ndarray]:
    if kind == "strong-to-weak":
        slices = np.array_split(pool, m)
        if any(s.size == 0 for s in slices):
            raise UsageError(f"strong-to-weak needs at least m={m} eligible actors, there are {pool.size}")
        return [np.array([rng.choice(s) for s in slices]) for _ in range(k)]
    if pool.size < m:
        raise UsageError(f"{kind} needs m={m} actors in its 20% slice, which has {pool.size}; "
                         "use a smaller m or a table with more actors")
    return [rng.choice(pool, size=m, replace=False) for _ in range(k)]


def candidate_groups(
    train: RoutingTable, m_values: list[int], kinds: tuple[str, ...] = KINDS, draws: int = 1000, seed: int = 0,
    low: float = 0.1, high: float = 0.9, share: float = 0.2,
) -> list[CandidateGroup]:
    """Pick one group per (kind, m) by the SPEC 4 rule, deterministically for ``seed``."""
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise UsageError(f"unknown group kinds {sorted(unknown)}; use {', '.join(KINDS)}")
    means = actor_means(train.score)
    eligible = np.flatnonzero((means >= low) & (means <= high))
    eligible = eligible[np.argsort(-means[eligible], kind="stable")]
    if eligible.size == 0:
        raise UsageError(f"no actor has train performance in [{low}, {high}]")
    n_slice = max(1, int(np.ceil(share * eligible.size)))
    pools = {"all-strong": eligible[:n_slice], "all-weak": eligible[-n_slice:], "strong-to-weak": eligible}
    rng = np.random.default_rng(seed)
    score = train.score
    out = []
    for kind in kinds:
        for m in m_values:
            best_val, best_group = -np.inf, None
            seen: set[tuple[int, ...]] = set()
            for group in _draws(kind, pools[kind], m, draws, rng):
                key = tuple(sorted(group.tolist()))
                if key in seen:
                    continue
                seen.add(key)
                val = oracle_score(score[:, key])
                if val > best_val:
                    best_val, best_group = val, key
            assert best_group is not None
            order = sorted(best_group, key=lambda j: (-means[j], j))
            out.append(CandidateGroup(kind, m, [train.actor_names[j] for j in order], float(best_val)))
    return out
