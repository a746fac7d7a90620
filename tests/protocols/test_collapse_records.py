"""The collapse flag as store records (RouterWorld Table 3's orange cells): every evaluated router gets ``top_share``
(its largest selection share) and ``collapsed_flag`` (1 when that share is >= 0.99), under full, cold-start and
every Voyager round, equal to the result's own ``selection`` and ``collapsed``."""

from __future__ import annotations

import numpy as np
import pytest

from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.protocols.base import run_protocol
from routerlab.protocols.full import router_records

ROUTERS = ["oracle", "fixed:actor=tiny-2b", "knn"]


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return demo(n_queries=300, seed=0)


def test_top_share_and_flag_match_the_choices(table: RoutingTable) -> None:
    result = run_protocol("full", table, {"n_boot": 40}, 0, ROUTERS)
    for r in result.native.results:
        shares = np.bincount(r.choice, minlength=table.n_actors) / r.choice.size
        assert result.value(r.spec, "top_share", "") == pytest.approx(shares.max())
        assert result.value(r.spec, "collapsed_flag", "") == float(shares.max() >= 0.99)
        (rec,) = result.select(r.spec, "collapsed_flag", "")
        assert rec.ci_low is None and rec.ci_high is None  # a flag has no interval
    # the fixed router always picks tiny-2b: collapsed; the oracle spreads over the actors
    assert result.value("fixed:actor=tiny-2b", "top_share", "") == 1.0
    assert result.value("fixed:actor=tiny-2b", "collapsed_flag", "") == 1.0
    assert result.value("oracle", "collapsed_flag", "") == 0.0


def test_hand_computed_records() -> None:
    """Two routers in their to_dict form: shares 0.995 (collapsed at the 99% line) and an even 0.5/0.5."""
    rows = [{"spec": "a", "metrics": {"mu_o": 0.5}, "ci": {"mu_o": [0.4, 0.6]}, "selection": {"x": 0.995, "y": 0.005},
             "collapsed": True},
            {"spec": "b", "metrics": {"mu_o": 0.7}, "ci": {"mu_o": [0.6, 0.8]}, "selection": {"x": 0.5, "y": 0.5},
             "collapsed": False}]
    recs = {(r.router, r.metric): r.value for r in router_records(rows, {}, "round=2")}
    assert recs[("a", "top_share")] == 0.995 and recs[("a", "collapsed_flag")] == 1.0
    assert recs[("b", "top_share")] == 0.5 and recs[("b", "collapsed_flag")] == 0.0
    assert {r.slice for r in router_records(rows, {}, "round=2")} == {"round=2"}


def test_cold_start_and_every_voyager_round_carry_the_flag(table: RoutingTable) -> None:
    cold = run_protocol("cold-start", table, {"n_boot": 40}, 0, ROUTERS)
    for r in cold.native.results:
        assert cold.value(r.spec, "collapsed_flag", "") == float(r.collapsed)
    vg = run_protocol("voyager", table, {"n_boot": 40, "rounds": 3}, 0, ROUTERS)
    for rnd in vg.native.extra["rounds"]:
        for r in rnd["results"]:
            where = f"round={rnd['round']}"
            assert vg.value(r["spec"], "top_share", where) == pytest.approx(max(r["selection"].values()))
            assert vg.value(r["spec"], "collapsed_flag", where) == float(r["collapsed"])
    assert vg.value("fixed:actor=tiny-2b", "collapsed_flag", "round=1") == 1.0
