"""A cheat that routes to any actor named in a per-query column gains nothing (README "What a router sees"):
on RouterBench, whose hidden ``oracle_model_to_route_to`` names the best model, and on the demo with such a column
added, it scores the best single actor; with the column declared visible it would score exactly the oracle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytest

from routerlab.data.demo import demo
from routerlab.data.splits import make_split
from routerlab.data.table import Queries, RoutingTable
from routerlab.features.base import Features
from routerlab.protocols.full import evaluate
from routerlab.routers import Router

ORACLE = "oracle_model_to_route_to"


class _NamedActor(Router):
    """The cheat: each actor's mean training score, plus 10 for every actor that some per-query column names (it
    reads every column its features carry, and asks for the hidden ones by name with ``get``)."""

    name = "named-actor-cheat"
    defaults: ClassVar[dict[str, Any]] = {}

    def _fit(self, train: RoutingTable, features: Features) -> None:
        self._means = np.nan_to_num(np.nanmean(train.score, axis=0), nan=0.0)

    def _scores(self, features: Features) -> npt.ArrayLike:
        s = np.tile(self._means, (features.n, 1))
        names = {a: j for j, a in enumerate(features.actor_names)}
        extra = features.queries.extra
        columns = [extra[k] for k in extra] + [extra.get(k) for k in (ORACLE, "best_actor", "ground_truth")]
        for col in columns:
            if col is None:
                continue
            for i, v in enumerate(col.tolist()):
                if str(v) in names:
                    s[i, names[str(v)]] += 10.0
        return s


def _mu(table: RoutingTable) -> dict[str, float]:
    """mu_o of oracle, best-single and the cheat under the table's own split (features: zeros, the cheat needs
    none and nor do the other two)."""
    train, test = make_split(table, "given", 0).apply(table)
    zeros = (Features(np.zeros((train.n_queries, 1)), train, "zeros"),
             Features(np.zeros((test.n_queries, 1)), test, "zeros"))
    ev = evaluate(table, ["oracle", "best-single", _NamedActor()], features=zeros, n_boot=20)
    return {r.router: r.metrics["mu_o"] for r in ev.results}


def _with_best_actor(table: RoutingTable) -> RoutingTable:
    q = table.queries
    best = np.asarray(table.actor_names, dtype=object)[np.nan_to_num(table.score, nan=-1.0).argmax(axis=1)]
    return replace(table, queries=Queries(q.ids, q.text, q.dataset, q.split, {**q.extra, "best_actor": best},
                                          q.visible))


def _assert_gains_nothing(table: RoutingTable, column: str) -> None:
    assert column in table.queries.hidden
    hidden = _mu(table)
    assert hidden["named-actor-cheat"] <= hidden["best-single"] + 0.005
    assert hidden["oracle"] - hidden["named-actor-cheat"] > 0.05  # far below the oracle
    shown = _mu(table.with_visible([column]))  # the same run, had the importer declared the column visible
    assert shown["named-actor-cheat"] == pytest.approx(shown["oracle"], abs=1e-12)


def test_the_cheat_gains_nothing_on_routerbench(real_table: Callable[[str], RoutingTable]) -> None:
    table = real_table("routerbench")
    _assert_gains_nothing(table, ORACLE)
    assert _mu(table)["oracle"] == pytest.approx(0.9757, abs=5e-5)  # the number


def test_the_cheat_gains_nothing_on_the_demo() -> None:
    _assert_gains_nothing(_with_best_actor(demo(1500)), "best_actor")
