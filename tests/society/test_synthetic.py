"""Synthetic specialist societies from item partitions (SPEC 2; paper app. 10.3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from routerlab.errors import DataError, UsageError
from routerlab.society import (
    hse,
    item_labels,
    normalized_hse,
    specialist_society,
    table_specialists,
    union_society,
)


def test_one_binary_expert_per_group() -> None:
    soc = specialist_society(["b", "a", "b", "c", "a"])
    assert soc.names == ["a", "b", "c"]
    assert soc.matrix.tolist() == [[0, 1, 0, 0, 1], [1, 0, 1, 0, 0], [0, 0, 0, 1, 0]]
    assert hse(soc) == math.log2(3)
    assert normalized_hse(soc) == 1.0


def test_unlabelled_items_belong_to_no_expert() -> None:
    soc = specialist_society(["x", "", None, "y"], prefix="g:")
    assert soc.names == ["g:x", "g:y"]
    assert soc.matrix[:, 1:3].sum() == 0
    assert "2 items have no label" in soc.notes[0]
    with pytest.raises(DataError, match="missing"):
        specialist_society(["", None])


def test_union_of_two_partitions_like_rd_plus_sa() -> None:
    # 12 items; SA = 4 subject areas of 3 items, RD = 3 depth tiers of 4 items
    sa = specialist_society(np.repeat(["s0", "s1", "s2", "s3"], 3), prefix="SA:")
    rd = specialist_society(np.tile(["r0", "r1", "r2"], 4), prefix="RD:")
    both = union_society(sa, rd)
    assert both.n_actors == 7 and both.names[:4] == sa.names
    assert hse(sa) == 2.0 and hse(rd) == math.log2(3)
    # every SA expert overlaps every RD expert on exactly one item: d = 1 - 1/sqrt(12)
    d = 1 - 1 / math.sqrt(12)
    h7 = math.log2(7)
    assert hse(both) == pytest.approx(h7 * d, abs=1e-12)
    assert hse(both) < hse(sa)
    dup = union_society(sa, sa)
    assert dup.names[4] == "SA:s0#2"
    with pytest.raises(DataError, match="share the items"):
        union_society(sa, specialist_society(["a", "b"]))


def test_table_specialists(tiny_table) -> None:  # type: ignore[no-untyped-def]
    soc = table_specialists(tiny_table, "dataset")
    assert soc.names == ["dataset=code", "dataset=law", "dataset=math"]
    train = tiny_table.queries.split == "train"
    assert soc.n_items == int(train.sum())
    assert hse(soc) == math.log2(3)
    topic = table_specialists(tiny_table, "topic", split=None)
    assert topic.n_items == tiny_table.n_queries and hse(topic) == 1.0
    assert item_labels(tiny_table, "topic", None).shape == (tiny_table.n_queries,)
    with pytest.raises(UsageError, match="no query column"):
        table_specialists(tiny_table, "nope")
