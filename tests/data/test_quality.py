"""The leak check counts on the split that is evaluated, not only on the table's split column."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from routerlab.data.quality import quality_report, train_test_overlap
from routerlab.data.splits import Split, random_split
from routerlab.data.table import RoutingTable


def tiny() -> RoutingTable:
    texts = ["a", "b", "a", "c", "b", "", "", "d"]
    return RoutingTable.from_arrays(np.zeros((8, 2)), actors=["x", "y"], text=texts,
                                    dataset=["p", "q", "p", "p", "r", "p", "p", "q"])


def test_overlap_on_a_given_split() -> None:
    t = tiny()  # no split labels: the column finds nothing to compare
    assert train_test_overlap(t) == 0
    assert quality_report(t)["overlap_split"] == "column"
    split = Split(train=np.array([0, 1, 5, 7]), test=np.array([2, 3, 4, 6]), kind="random", seed=3)
    # test rows: 2 "a" (in train) leaks, 3 "c" no, 4 "b" (in train) leaks, 6 "" never counts
    assert train_test_overlap(t, split=split) == 2
    rep = quality_report(t, split=split)
    assert rep["train_test_overlap"] == 2
    assert rep["train_test_overlap_by_dataset"] == {"p": 1, "r": 1}
    assert rep["overlap_split"] == split.describe() and rep["overlap_split"]["kind"] == "random"
    swapped = Split(train=split.test, test=split.train, kind="random", seed=4)
    assert train_test_overlap(t, split=swapped) == 2  # rows 0 "a" and 1 "b"; row 5 "" and 7 "d" do not


def test_overlap_column_still_used_without_split() -> None:
    t = RoutingTable.from_arrays(np.zeros((4, 1)), actors=["x"], text=["a", "a", "b", "b"],
                                 split=["train", "test", "test", "val"])
    rep = quality_report(t)
    assert rep["train_test_overlap"] == train_test_overlap(t) == 1 and rep["overlap_split"] == "column"


def test_random_split_on_mmlu_pro_finds_leaks(real_table: Callable[[str], RoutingTable]) -> None:
    """The issue: a random split on mmlu-pro reported 0 leaks while 120 of 2,407 test questions were in train."""
    t = real_table("mmlu-pro")
    split = random_split(t, 0.2, seed=0)
    rep = quality_report(t, split=split)
    assert rep["train_test_overlap"] > 0
    assert (rep["train_test_overlap"], split.test.size) == (120, 2407)  # the numbers in the issue
    assert rep["train_test_overlap"] == sum(rep["train_test_overlap_by_dataset"].values())
    texts = t.queries.text.astype(str)
    train = set(texts[split.train].tolist()) - {""}
    assert rep["train_test_overlap"] == sum(1 for x in texts[split.test].tolist() if x and x in train)
    assert rep["overlap_split"]["kind"] == "random" and rep["overlap_split"]["n_test"] == split.test.size
