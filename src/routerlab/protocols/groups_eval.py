"""Every router evaluated on each candidate group (routereval.txt 4.2, SPEC 4)."""

from __future__ import annotations

from typing import Any

from tqdm import tqdm

from routerlab import __version__
from routerlab.data.splits import make_split
from routerlab.data.table import RoutingTable
from routerlab.protocols.full import evaluate, featurize
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
    feats = featurize(train, test, encoder)
    groups = candidate_groups(train, m_values, kinds, draws, seed)
    out = []
    for g in tqdm(groups, desc="groups", unit="group", disable=None, leave=False):
        ev = evaluate(table.select_actors(g.actors), router_specs, split=sp, encoder=encoder, seed=seed,
                      n_boot=n_boot, features=feats)
        out.append({**g.to_dict(), "evaluation": ev.to_dict()})
    return {"routerlab_version": __version__, "data": {"name": table.name, "content_hash": table.content_hash},
            "split": sp.describe(), "encoder": encoder, "routers": router_specs,
            "seed": seed, "draws": draws, "groups": out}
