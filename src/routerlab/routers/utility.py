"""Cost- and latency-aware decisions for any router: pick ``argmax(score - lambda * penalty)``.

The penalty of an actor is its *expected* cost (USD per query) or latency (seconds per query),
estimated on the training split only: the per-actor mean of the observed training cells; where the
table has no cost/latency, from the actors' prices or TTFT/ITL (see ``expected_actor_cost`` and
``expected_actor_latency`` in ``routers._common``). It is one number per actor, the same for every
query (choice: per-query cost prediction is left out; it would need a token-length model). An
actor of unknown penalty gets the largest known one (pessimistic).

``lambda_sweep`` divides the penalty by its largest value by default, so lambda reads "score units
given up to avoid the most expensive (slowest) actor's penalty": lambda = 0 is the router's own
choice, a large lambda the cheapest (fastest) actor. ``utility_choice(scores, penalty, lam)`` is the
metrics layer's (``metrics.cost``), re-exported; AIQ and Pareto fronts live there too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.metrics.cost import utility_choice
from routerlab.routers._common import expected_actor_cost, expected_actor_latency
from routerlab.routers.base import Router

By = Literal["cost", "latency"]

__all__ = ["Sweep", "expected_penalty", "lambda_sweep", "utility_choice"]


def expected_penalty(table: RoutingTable, by: By = "cost", normalize: bool = True) -> npt.NDArray[np.float64]:
    """Per-actor expected cost or latency of ``table`` (pass the *training* split), unknown actors at
    the largest known value, divided by the largest value when ``normalize``."""
    if by == "cost":
        values, _ = expected_actor_cost(table)
    elif by == "latency":
        values, _ = expected_actor_latency(table)
    else:
        raise UsageError(f"by must be 'cost' or 'latency', got {by!r}")
    if np.isnan(values).all():
        raise UsageError(f"the table gives no {by} for any actor (nor prices / TTFT-ITL)")
    top = float(np.nanmax(values))
    filled = np.where(np.isnan(values), top, values)
    if normalize and top > 0:
        filled = filled / top
    return np.asarray(filled, dtype=np.float64)


@dataclass(frozen=True)
class Sweep:
    """Choices of one router across lambdas: ``choices[i]`` are the actors picked at ``lambdas[i]``."""

    lambdas: npt.NDArray[np.float64]
    choices: npt.NDArray[np.intp]  # (len(lambdas), n)
    penalty: npt.NDArray[np.float64]  # (m,) as used
    by: str


def lambda_sweep(
    router: Router,
    features: Features,
    lambdas: Sequence[float] | npt.ArrayLike,
    by: By = "cost",
    train: RoutingTable | None = None,
    penalty: npt.ArrayLike | None = None,
    normalize: bool = True,
) -> Sweep:
    """Score ``features`` once with a fitted ``router`` and decide by utility at every lambda.

    The penalty comes from ``penalty`` if given, else from ``train`` (the split the router was fitted
    on), else from the routed table's *actor attributes* only (prices, TTFT/ITL: never its observed
    cost or latency, which a router cannot know before routing)."""
    lam = np.asarray(lambdas, dtype=np.float64).ravel()
    if penalty is None:
        if train is None:
            source = RoutingTable(queries=features.queries.take(np.arange(0)), actors=features.actors,
                                  score=np.zeros((0, len(features.actor_names)), dtype=np.float32))
        else:
            source = train
        pen = expected_penalty(source, by, normalize)
    else:
        pen = np.asarray(penalty, dtype=np.float64)
    scores = router.scores(features)
    choices = np.stack([utility_choice(scores, pen, float(v)) for v in lam]) if lam.size else np.zeros(
        (0, features.n), dtype=np.intp
    )
    return Sweep(lambdas=lam, choices=np.asarray(choices, dtype=np.intp), penalty=pen, by=by)
