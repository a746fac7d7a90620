"""Candidate groups (routereval.txt 4.2, SPEC 4): all-strong, all-weak and strong-to-weak pools.

Eligible actors have train performance in [0.1, 0.9], sorted best first. all-strong draws m actors
from the top 20%, all-weak from the bottom 20%; strong-to-weak splits the sorted list into m slices
and draws the j-th actor from the j-th slice. Among K seeded draws the group with the highest oracle
performance on the train split is kept. When the 20% slice holds fewer than m actors (tables with
few actors), it is widened to the m best (or worst) eligible actors.

:class:`GroupsSettings` are the ``groups`` protocol's settings; the protocol itself (which evaluates routers on
each group) is registered in :mod:`routerlab.protocols.groups_eval`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.metrics.bounds import actor_means, oracle_score
from routerlab.protocols.base import (
    COMPARE_HELP,
    ENCODER_HELP,
    NBOOT,
    NBOOT_HELP,
    SKIP_HELP,
    SPLIT_HELP,
    Interval,
    ProtocolSettings,
    check_encoder,
    check_split,
    setting,
)
from routerlab.protocols.full import _check_reference as check_reference
from routerlab.protocols.scaling import PoolSizes, check_pool_size_spec

KINDS = ("all-strong", "all-weak", "strong-to-weak")
DEFAULT_GROUP_M = PoolSizes((3, 5))
GROUP_SIZES_HELP = ("group sizes m: integers (each at most the table's actors), 'all' (every eligible actor: mean "
                    "train score in [0.1, 0.9]), 'N|all' (N, or every eligible actor when there are fewer) or a "
                    "range like '3..5' or '3..all'")
AVERAGE = "average"
"""The slice ``group=average``: each number averaged over the three groups of one m, as RouterEval reports it."""
GROUP_REFERENCE_HELP = ("add V_R = mu_o / Perf(reference) on every group (RouterEval, section 5.1): a number (a "
                        "published Perf(reference)) or an actor of the table (its mean on each group's evaluated "
                        "test queries; resampled with the router's when the group holds it); none = off")
MAX_DRAWS = 1_000_000


@dataclass(frozen=True)
class GroupsSettings(ProtocolSettings):
    """The ``routerlab groups`` options that change what is computed (SPEC 4): the group sizes and draws, and
    what every router evaluation on a group shares with the full protocol (split, encoder, resamples, the paired
    comparison, whether an inapplicable router stops the run)."""

    m: PoolSizes = setting(DEFAULT_GROUP_M, GROUP_SIZES_HELP, check=check_pool_size_spec)  # noqa: RUF009 (a tuple)
    draws: int = setting(1000, "random draws per group; the one with the best train oracle is kept",
                         Interval(int, 1, MAX_DRAWS))
    split: str = setting("given", SPLIT_HELP, check=check_split)
    encoder: str = setting("tfidf", ENCODER_HELP, check=check_encoder)
    n_boot: int = setting(1000, NBOOT_HELP, NBOOT)
    compare_to: str = setting("auto", COMPARE_HELP)
    skip_inapplicable: bool = setting(False, SKIP_HELP)
    reference: str | None = setting(None, GROUP_REFERENCE_HELP, check=check_reference)


@dataclass(frozen=True)
class CandidateGroup:
    kind: str
    m: int
    actors: list[str]
    train_oracle: float

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "m": self.m, "actors": self.actors, "train_oracle": self.train_oracle}


def _draws(kind: str, eligible: npt.NDArray[np.intp], m: int, k: int, share: float,
           rng: np.random.Generator) -> list[np.ndarray]:
    if eligible.size < m:
        raise UsageError(f"{kind} needs m={m} eligible actors (train performance in range), there are "
                         f"{eligible.size}")
    # the 20% slice, widened to m actors when the pool is too small to hold m (small tables)
    n_slice = max(int(np.ceil(share * eligible.size)), m)
    pool = {"all-strong": eligible[:n_slice], "all-weak": eligible[-n_slice:]}.get(kind, eligible)
    if kind == "strong-to-weak":
        slices = np.array_split(pool, m)
        return [np.array([rng.choice(s) for s in slices]) for _ in range(k)]
    return [rng.choice(pool, size=m, replace=False) for _ in range(k)]


def eligible_actors(train: RoutingTable, low: float = 0.1, high: float = 0.9) -> npt.NDArray[np.intp]:
    """The actors a candidate group may hold: mean train score in [``low``, ``high``] (SPEC 4), in table order."""
    means = actor_means(train.score)
    return np.flatnonzero((means >= low) & (means <= high))


def candidate_groups(
    train: RoutingTable, m_values: list[int], kinds: tuple[str, ...] = KINDS, draws: int = 1000, seed: int = 0,
    low: float = 0.1, high: float = 0.9, share: float = 0.2,
) -> list[CandidateGroup]:
    """Pick one group per (kind, m) by the SPEC 4 rule, deterministically for ``seed``."""
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise UsageError(f"unknown group kinds {sorted(unknown)}; use {', '.join(KINDS)}")
    means = actor_means(train.score)
    eligible = eligible_actors(train, low, high)
    eligible = eligible[np.argsort(-means[eligible], kind="stable")]
    if eligible.size == 0:
        raise UsageError(f"no actor has train performance in [{low}, {high}]")
    rng = np.random.default_rng(seed)
    score = train.score
    out = []
    for kind in kinds:
        for m in m_values:
            best_val, best_group = -np.inf, None
            seen: set[tuple[int, ...]] = set()
            for group in _draws(kind, eligible, m, draws, share, rng):
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
