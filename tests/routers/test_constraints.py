"""Router options are range-checked when the router is built (one UsageError naming router, option, value
and range), data-dependent limits and applicability are checked before training."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from routerlab._spec import Interval, Options, check_constraints
from routerlab.data.table import Actors, RoutingTable
from routerlab.errors import UsageError
from routerlab.routers import get_router, routers
from tests.routers.conftest import Data


@pytest.mark.parametrize("name", sorted(routers()))
def test_every_option_has_a_constraint_and_its_default_satisfies_it(name: str) -> None:
    cls = routers()[name]
    assert set(cls.constraints) == set(cls.defaults), name
    check_constraints(name, cls.defaults, cls.constraints)  # the defaults are in range
    get_router(name)


@pytest.mark.parametrize("spec,needle", [
    ("mlp:hidden=-5", "option hidden=-5 is out of range; it must be an integer in [0, 65,536]"),
    ("mlp:hidden=64/-1", "option hidden=64/-1 is out of range"),
    ("mlp:lr=nan", "option lr=nan is out of range; it must be a finite number > 0"),
    ("mlp:lr=inf", "option lr=inf is out of range"),
    ("mlp:lr=0", "option lr=0 is out of range"),
    ("mlp:epochs=-1", "option epochs=-1 is out of range; it must be an integer >= 1"),
    ("mlp:batch_size=0", "option batch_size=0"),
    ("mlc:rel=1.5", "option rel=1.5"),
    ("hybrid:threshold=-0.1", "option threshold=-0.1"),
    ("avenger:k=0", "router 'avenger': option k=0 is out of range"),
    ("avenger:top=0", "option top=0"),
    ("avenger:beta=-1", "option beta=-1"),
    ("avenger:rank_by=speed", "option rank_by='speed' is out of range; it must be one of accuracy, auto, ldcg"),
    ("cluster:k=0", "option k=0"),
    ("cluster:temperature=0", "option temperature=0"),
    ("knn:k=0", "option k=0"),
    ("knn:metric=manhattan", "one of cosine, euclidean"),
    ("prknn:k=-3", "option k=-3"),
    ("graph:alpha=2", "option alpha=2"),
    ("graph:hops=-1", "option hops=-1"),
    ("graph:prior_weight=-1", "option prior_weight=-1"),
    ("mf:dim=0", "option dim=0"),
    ("mf:l2=-1", "option l2=-1"),
    ("linear:alpha=0", "option alpha=0"),
    ("naive-bayes:var_smoothing=nan", "option var_smoothing=nan"),
    ("svm:C=-1", "option C=-1"),
    ("svm:solver=lbfgs", "option solver='lbfgs'"),
    ("svm:max_iter=0", "option max_iter=0"),
    ("oracle-p:p=1.5", "router 'oracle-p': option p=1.5 is out of range; it must be a finite number in [0, 1]"),
    ("oracle-p:p=nan", "option p=nan"),
    ("knn:seed=-1", "option seed=-1 is out of range; it must be an integer >= 0"),
])
def test_out_of_range_options_are_one_clear_error(spec: str, needle: str) -> None:
    with pytest.raises(UsageError) as err:
        get_router(spec)
    assert needle in str(err.value)


def test_negative_seed_override_is_refused() -> None:
    with pytest.raises(UsageError, match="seed=-1"):
        get_router("random", seed=-1)


def test_interval_and_options_describe_and_accept() -> None:
    unit = Interval(float, 0, 1, closed="left")
    assert unit.accepts(0) and unit.accepts(0.5) and not unit.accepts(1.0) and not unit.accepts(math.nan)
    assert unit.describe() == "a finite number in [0, 1)"
    assert not Interval(int, 1, None).accepts(2.0) and not Interval(int, 1, None).accepts(True)
    assert Interval(float, 0, None, allow_inf=True).accepts(math.inf)
    assert not Interval(float, 0, None).accepts(math.inf)
    assert Options({"a"}).accepts("a") and not Options({"a"}).accepts(["a"])
    with pytest.raises(ValueError):
        Interval(int, 0, 1, closed="sideways")


@pytest.mark.parametrize("spec", ["cluster:k=100000", "avenger:k=100000", "knn:k=100000", "prknn:k=100000",
                                  "graph:k=100000"])
def test_k_larger_than_the_training_set_is_an_error(spec: str, data: Data) -> None:
    router = get_router(spec)
    n = data.train.n_queries
    with pytest.raises(UsageError, match=rf"k=100000 is larger than the training set \({n} queries\)"):
        router.check_applicable(data.train)
    with pytest.raises(UsageError, match="larger than the training set"):
        router.fit(data.train, data.ftrain)  # fit runs the same check


def _without_attributes(table: RoutingTable) -> RoutingTable:
    return replace(table, actors=Actors.create(table.actor_names), latency_s=None, cost_usd=None)


@pytest.mark.parametrize("name,needle", [
    ("cheapest", "needs cost or prices"), ("fastest", "needs latency or TTFT/ITL"),
    ("largest", "needs actor sizes (params_b)"), ("smallest", "needs actor sizes (params_b)"),
    ("avenger:rank_by=ldcg", "rank_by=ldcg needs latency"),
])
def test_inapplicable_routers_say_why_before_training(name: str, needle: str, data: Data) -> None:
    bare = _without_attributes(data.train)
    router = get_router(name)
    with pytest.raises(UsageError) as err:
        router.check_applicable(bare)
    assert needle in str(err.value)
    get_router(name).check_applicable(data.train)  # the demo has all of them
