"""Every router evaluated on each candidate group (routereval.txt 4.2, SPEC 4)."""

from __future__ import annotations

from typing import Any

from routerlab import __version__
from routerlab.data.splits import make_split
from routerlab.data.table import RoutingTable
from routerlab.progress import task, track
from routerlab.protocols.full import applicable_routers, evaluate, featurize
from routerlab.protocols.groups import KINDS, candidate_groups


def evaluate_groups(
    table: RoutingTable, m_values: list[int], router_specs: list[str], *, draws: int = 1000,
    kinds: tuple[str, ...] = KINDS, encoder: str = "tfidf", split: str = "given", seed: int = 0, n_boot: int = 1000,
) -> dict[str, Any]:
    """Pick the groups on the train split, then evaluate each router on each group's test split.

    The query features are computed once and shared by every group (they do not depend on actors).
    """
    sp = make_split(table, split, seed)
    train, test = sp.apply(table)
    applicable_routers(router_specs, train, seed)  # bad or inapplicable routers fail before any encoding
    feats = featurize(train, test, encoder)
    with task(f"groups: drawing candidate groups ({draws} draws each)"):
        groups = candidate_groups(train, m_values, kinds, draws, seed)
    out = []
    for g in track(groups, "groups: evaluating", unit="group", label=lambda g: f"{g.kind} m={g.m}"):
        ev = evaluate(table.select_actors(g.actors), router_specs, split=sp, encoder=encoder, seed=seed,
                      n_boot=n_boot, features=feats)
        out.append({**g.to_dict(), "evaluation": ev.to_dict()})
    return {"routerlab_version": __version__, "data": {"name": table.name, "content_hash": table.content_hash},
            "split": sp.describe(), "encoder": encoder, "routers": router_specs,
            "seed": seed, "draws": draws, "groups": out}
