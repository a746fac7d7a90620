"""SPEC 2 anchors and the paper's sanity cases (sec. 4.4), plus hand-computed societies."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from routerlab import society
from routerlab.society import diversity, hse, normalized_hse, orthogonal_society, taxonomic_curve

from .reference import naive_hse, threshold_graph_hse


@pytest.mark.parametrize(("n", "expected"), [(5, 2.3219), (15, 3.9069)])
def test_spec_anchor_orthogonal_societies(n: int, expected: float) -> None:
    # the paper's RD (5 tiers) = 2.32 and SA (15 subject areas) = 3.91
    value = hse(np.eye(n))
    assert value == math.log2(n)
    assert round(value, 4) == expected


def test_spec_anchor_duplicate_lowers_hse() -> None:
    base = np.eye(3)
    with_copy = np.vstack([base, base[2]])
    assert hse(base) == pytest.approx(1.585, abs=5e-4)
    assert hse(with_copy) == pytest.approx(1.5, abs=1e-15)
    assert hse(with_copy) < hse(base)


@pytest.mark.parametrize("n", [2, 3, 7, 14, 40])
@pytest.mark.parametrize("items_per_actor", [1, 3])
def test_orthogonal_normalised_is_one_for_any_size(n: int, items_per_actor: int) -> None:
    soc = orthogonal_society(n, items_per_actor)
    assert normalized_hse(soc) == 1.0
    assert hse(soc) == math.log2(n)


@pytest.mark.parametrize("metric", ["cosine", "correlation", "euclidean", "manhattan"])
@pytest.mark.parametrize("linkage", ["single", "complete", "average"])
def test_identical_actors_give_zero(metric: str, linkage: str) -> None:
    row = np.array([1.0, 0.0, 1.0, 0.5, 0.25])
    for k in (2, 5, 30):
        assert hse(np.tile(row, (k, 1)), metric, linkage) == 0.0
        assert hse(np.tile(row > 0.4, (k, 1)).astype(float), metric, linkage) == 0.0


def test_duplicated_prompt_lowers_hse() -> None:
    # paper sec. 4.4 (case c): a fourth evaluation prompt that copies p3 does not inflate diversity.
    # Three distinct overlapping actors: all distances 1/2; the copy pulls B and C together (1/3)
    # and pushes A away (1 - 1/sqrt(6)).
    base = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]], dtype=float)
    extra = np.hstack([base, base[:, [2]]])
    assert hse(base) == pytest.approx(math.log2(3) / 2, abs=1e-15)
    far = 1 - 1 / math.sqrt(6)
    h21 = -(2 / 3) * math.log2(2 / 3) - (1 / 3) * math.log2(1 / 3)
    assert hse(extra) == pytest.approx(math.log2(3) / 3 + h21 * (far - 1 / 3), abs=1e-15)
    assert hse(extra) < hse(base)


def test_hse_grows_as_distinct_actors_are_added() -> None:
    rng = np.random.default_rng(7)
    B = (rng.random((12, 400)) < 0.3).astype(float)
    values = [hse(B[:k]) for k in range(1, 13)]
    assert values[0] == 0.0
    assert all(b > a for a, b in itertools.pairwise(values))
    orth = [hse(np.eye(k)) for k in range(1, 16)]
    assert all(b > a for a, b in itertools.pairwise(orth))


def test_hand_computed_three_actors() -> None:
    # d(0,1) = d(1,2) = 1 - 1/sqrt(2); d(0,2) = 1
    B = np.array([[1, 0], [1, 1], [0, 1]], dtype=float)
    a = 1 - 1 / math.sqrt(2)
    h3 = math.log2(3)
    h2 = entropy_21 = -(2 / 3) * math.log2(2 / 3) - (1 / 3) * math.log2(1 / 3)
    assert hse(B, linkage="single") == pytest.approx(h3 * a, abs=1e-15)
    assert hse(B, linkage="complete") == pytest.approx(h3 * a + h2 * (1 - a), abs=1e-15)
    assert hse(B, linkage="average") == pytest.approx(h3 * a + entropy_21 * ((1 + a) / 2 - a), abs=1e-15)


def test_hand_computed_two_groups() -> None:
    # two tight pairs far apart: H = 2 bits until each pair merges, then 1 bit until the groups merge
    B = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]], dtype=float)
    B[1, 1] = 0.0  # d(0, 1) = 1 - 1/sqrt(2)
    a = 1 - 1 / math.sqrt(2)
    assert hse(B) == pytest.approx(1.5 * a + 1.0 * (1 - a), abs=1e-15)
    curve = taxonomic_curve(B)
    assert curve.levels.tolist() == pytest.approx([0.0, 0.0, a, 1.0])
    assert curve.entropy.tolist() == pytest.approx([2.0, 1.5, 1.0, 0.0])
    assert curve.n_clusters.tolist() == [4, 3, 2, 1]
    assert curve.at(0.0) == 1.5 and curve.at(0.5) == 1.0 and curve.at(1.0) == 0.0
    assert float(np.sum(curve.entropy[:-1] * np.diff(curve.levels))) == pytest.approx(hse(B))


def test_zero_norm_rule_even_between_two_zero_actors() -> None:
    # SPEC 2: d = 1 when either vector has zero norm, even when both are zero
    B = np.array([[0, 0, 0], [0, 0, 0], [1, 0, 0]], dtype=float)
    d = diversity(B)
    assert d.distances.matrix[0, 1] == 1.0 and d.distances.matrix[0, 2] == 1.0
    assert d.hse == math.log2(3)


def test_small_societies() -> None:
    assert hse(np.zeros((0, 3))) == 0.0
    assert hse(np.array([[1.0, 0.0]])) == 0.0
    assert normalized_hse(np.array([[1.0, 0.0]])) == 0.0
    assert hse(np.array([[1.0, 0.0], [0.0, 1.0]])) == 1.0


def test_normalisation_uses_the_metric_maximum() -> None:
    B = np.eye(4)
    for metric, dmax in [("cosine", 1.0), ("correlation", 2.0), ("euclidean", 2.0), ("manhattan", 4.0)]:
        d = diversity(B, metric)
        assert d.d_max == dmax
        assert d.hse_normalized == pytest.approx(d.hse / (2.0 * dmax))


def test_single_linkage_matches_the_threshold_graph_definition() -> None:
    rng = np.random.default_rng(3)
    for _ in range(5):
        B = (rng.random((9, 6)) < 0.5).astype(float)
        d = diversity(B)
        assert d.hse == pytest.approx(threshold_graph_hse(d.distances.matrix), abs=1e-12)
        assert d.hse == pytest.approx(naive_hse(B), abs=1e-12)


def test_table_input_uses_the_train_split(tiny_table) -> None:  # type: ignore[no-untyped-def]
    B_train = tiny_table.score[tiny_table.queries.split == "train"].T
    assert hse(tiny_table) == hse(B_train)
    assert hse(tiny_table, split="train") == hse(B_train)
    assert hse(tiny_table, split=None) == hse(tiny_table.score.T)
    assert society.diversity(tiny_table).names == tiny_table.actor_names


def test_packed_gram_pipeline_matches_reference() -> None:
    # 450 actors take the packed float32 route; 5,000 items span two packed chunks
    rng = np.random.default_rng(21)
    B = (rng.random((450, 5_000)) < rng.uniform(0.1, 0.9, size=(450, 1))).astype(np.float32)
    B[10] = B[20]
    assert hse(B) == pytest.approx(naive_hse(B), rel=1e-12, abs=1e-12)
