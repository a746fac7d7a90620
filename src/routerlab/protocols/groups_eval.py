"""Every router evaluated on each candidate group (routereval.txt 4.2, SPEC 4).

Routers may be spec strings or :class:`Router` instances, as in :func:`routerlab.protocols.full.evaluate`.
Each group re-fits every router, so an instance is never fitted itself: each group gets a fresh copy
built from its options, ``type(router)(**router.params)`` (the registry's contract: a router is
defined by its options), which keeps its own seed when it was given one and otherwise gets the run's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from routerlab.data.provenance import Provenance
from routerlab.data.splits import make_split
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.registry import Encoder
from routerlab.progress import task, track
from routerlab.protocols.full import RouterLike, applicable_routers, evaluate, featurize, router_label
from routerlab.protocols.groups import KINDS, candidate_groups
from routerlab.routers.base import Router


def evaluate_groups(
    table: RoutingTable, m_values: list[int], router_specs: Sequence[RouterLike], *, draws: int = 1000,
    kinds: tuple[str, ...] = KINDS, encoder: str | Encoder = "tfidf", split: str = "given", seed: int = 0,
    n_boot: int = 1000,
) -> dict[str, Any]:
    """Pick the groups on the train split, then evaluate each router on each group's test split.

    The query features are computed once and shared by every group (they do not depend on actors).
    """
    sp = make_split(table, split, seed)
    train, test = sp.apply(table)
    # bad or inapplicable routers fail before any encoding (checked on copies: instances stay unfitted)
    applicable_routers([_copy(r) for r in router_specs], train, seed)
    feats = featurize(train, test, encoder)
    with task(f"groups: drawing candidate groups ({draws} draws each)"):
        groups = candidate_groups(train, m_values, kinds, draws, seed)
    out = []
    for g in track(groups, "groups: evaluating", unit="group", label=lambda g: f"{g.kind} m={g.m}"):
        ev = evaluate(table.select_actors(g.actors), [_copy(r) for r in router_specs], split=sp, encoder=encoder,
                      seed=seed, n_boot=n_boot, features=feats)
        out.append({**g.to_dict(), "evaluation": ev.to_dict()})
    run = Provenance.of(table, sp, seed=seed, encoder=feats[0].encoder if isinstance(encoder, Encoder) else encoder,
                        routers=[router_label(r) for r in router_specs])
    return {**run.to_dict(), "draws": draws, "groups": out}


def _copy(router: RouterLike) -> RouterLike:
    """A spec string as is; an unfitted copy of a router instance, made from its options."""
    if isinstance(router, str):
        return router
    if not isinstance(router, Router):
        raise UsageError(f"a router is a spec string or a Router instance, got {type(router).__name__}")
    try:
        return type(router)(**router.params)
    except TypeError as exc:
        raise UsageError(f"{type(router).__name__} cannot be rebuilt from its options {router.params} for each "
                         f"group ({exc}); its __init__ must accept them as keyword arguments") from exc

