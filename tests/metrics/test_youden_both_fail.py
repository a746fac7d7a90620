"""The two analyses RouterXBench's replication adds to the two-model metrics, on hand-computed cases: the share of
queries both models fail (appendix D.2) and the Youden-J threshold for "the large model is needed" with the routing
accuracy at it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from routerlab.errors import UsageError
from routerlab.metrics.curves import both_fail, both_fail_share
from routerlab.metrics.operating_points import routing_accuracy, youden_escalate, youden_j, youden_threshold


def test_both_fail_on_binary_and_graded_scores() -> None:
    small = [0, 0, 1, 1, 0]
    large = [0, 1, 0, 1, 0]
    assert both_fail(small, large).tolist() == [True, False, False, False, True]
    assert both_fail_share(small, large) == pytest.approx(2 / 5)
    # graded scores: a model fails below half marks (0.5 itself passes)
    assert both_fail([0.2, 0.49, 0.5, 0.1], [0.4, 0.3, 0.1, 0.5]).tolist() == [True, True, False, False]
    assert math.isnan(both_fail_share([], []))
    with pytest.raises(ValueError, match="NaN"):
        both_fail([0, np.nan], [0, 0])


def test_youden_threshold_by_hand() -> None:
    # s: 0.1 0.2 0.2 0.9; large needed on the first two. Candidates: none (J 0), s < 0.15 (TPR 1/2, FPR 0: J 1/2),
    # s < 0.55 (TPR 1, FPR 1/2: J 1/2), all (J 0): the tie goes to the lower call rate, 1/4
    p = youden_threshold([0.1, 0.2, 0.2, 0.9], [True, True, False, False])
    assert (p.value, p.j, p.tpr, p.fpr, p.call_rate, p.n_fit) == (pytest.approx(0.15), 0.5, 0.5, 0.0, 0.25, 4)
    assert youden_escalate([0.0, 0.16, 0.3], p).tolist() == [True, False, False]
    d = p.to_dict()
    assert d["sends"] == "below" and d["threshold"] == pytest.approx(0.15) and d["j_fit"] == 0.5
    # a perfect ranking: J 1 at the cut between the two groups
    p = youden_threshold([3, 1, 2, 4], [False, True, True, False])
    assert (p.value, p.j, p.call_rate) == (2.5, 1.0, 0.5)
    # a constant router ties every candidate at J 0: it keeps every query on the small model
    p = youden_threshold([0.7, 0.7, 0.7], [True, False, True])
    assert p.value == -math.inf and p.j == 0.0 and p.call_rate == 0.0 and p.to_dict()["sends"] == "none"
    # an inverted router: its only cut has J -1, so none and all tie at J 0 and none (the lower rate) wins
    p = youden_threshold([0.9, 0.1], [True, False])
    assert p.j == 0.0 and p.value == -math.inf
    # three queries, the two needing ones lowest: the cut between them and the third
    p = youden_threshold([0.1, 0.2, 0.3], [True, True, False])
    assert (p.value, p.j, p.call_rate) == (0.25, 1.0, pytest.approx(2 / 3))
    # the one query that needs no large model scores lowest: every cut sends it first (J -1, then -1/2), so the
    # best is J 0, shared by none and all, and none wins
    p = youden_threshold([0.1, 0.5, 0.6], [False, True, True])
    assert (p.value, p.j, p.call_rate) == (-math.inf, 0.0, 0.0)
    # one label only: J undefined
    p = youden_threshold([0.1, 0.2], [True, True])
    assert math.isnan(p.j) and p.value == -math.inf


def test_youden_j_and_routing_accuracy_by_hand() -> None:
    sent = [True, True, False, False, True]
    needed = [True, False, False, True, True]
    # TPR 2/3, FPR 1/2; right on queries 0, 2 and 4
    assert youden_j(sent, needed) == pytest.approx(2 / 3 - 1 / 2)
    assert routing_accuracy(sent, needed) == pytest.approx(3 / 5)
    assert math.isnan(youden_j([True, False], [True, True]))
    with pytest.raises(UsageError, match="one label per query"):
        routing_accuracy([True, False], [True])
    with pytest.raises(UsageError, match="not a finite number"):
        youden_threshold([0.1, math.nan], [True, False])
