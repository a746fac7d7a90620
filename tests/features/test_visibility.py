"""Features carry the visible query columns only, however they are built (README "What a router sees")."""

from __future__ import annotations

import numpy as np
import pytest

from routerlab.data.demo import demo
from routerlab.data.table import HiddenColumnError, Queries
from routerlab.errors import UsageError
from routerlab.features import encode_pair
from routerlab.features.base import Features


def test_features_drop_hidden_columns_wherever_they_are_built() -> None:
    table = demo(80).with_visible(["tier"])
    f = Features(np.zeros((80, 2)), table, "zeros")
    assert list(f.queries.extra) == ["tier"] and f.hidden_columns == ("difficulty",)
    assert f.queries.extra["tier"].tolist() == table.queries.extra["tier"].tolist()
    with pytest.raises(HiddenColumnError, match="'difficulty' is hidden from routers") as info:
        f.queries.extra["difficulty"]
    assert isinstance(info.value, UsageError)  # the CLI prints it as one line, exit 2
    assert "difficulty" not in f.queries.extra and f.queries.extra.get("difficulty") is None
    # from parts: the table's own Queries object, with every column, goes in; only the visible ones stay
    q = table.queries
    assert set(q.extra) == {"difficulty", "tier"}
    g = Features.of(np.zeros((80, 2)), q, table.actors, "zeros")
    assert list(g.queries.extra) == ["tier"] and g.hidden_columns == ("difficulty",)
    for derived in (f.take(np.array([3, 1])), f.with_signals({"self_ask": np.zeros(80)})):
        assert list(derived.queries.extra) == ["tier"] and derived.hidden_columns == ("difficulty",)
    raw = Queries(q.ids, q.text, q.dataset, q.split, dict(q.extra))  # no declaration: default-deny
    h = Features.of(np.zeros((80, 2)), raw, table.actors, "zeros")
    assert list(h.queries.extra) == [] and h.hidden_columns == ("difficulty", "tier")


def test_encoded_features_hold_no_hidden_column() -> None:
    table = demo(120)
    train, test = table.select_split("train"), table.select_split("test")
    ftrain, ftest = encode_pair(train, test, "tfidf:dim=16")
    for f in (ftrain, ftest):
        assert list(f.queries.extra) == [] and f.hidden_columns == ("difficulty", "tier")
