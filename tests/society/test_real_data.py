"""Society diversity on the real pools in shared/data (SPEC 2): MMLU-Pro (10 models) and LLMRouter (9)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest

import routerlab
from routerlab import society
from routerlab.data.table import RoutingTable
from routerlab.society.entropy import prepare

pytestmark = pytest.mark.shared_data


@pytest.fixture(scope="module")
def mmlu_pro(shared_data: Path) -> RoutingTable:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return routerlab.read("mmlu-pro", shared_data / "mmlu-pro-outputs" / "eval_results")


@pytest.fixture(scope="module")
def llmrouter(shared_data: Path) -> RoutingTable:
    root = shared_data / "llmrouter" / "data"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return routerlab.read(
            "routerdc",
            root / "dcrouter_preprocessed" / "train.json",
            root / "dcrouter_preprocessed" / "test.json",
            root / "example_data" / "query_data" / "default_query_train.jsonl",
            root / "example_data" / "query_data" / "default_query_test.jsonl",
        )


def test_mmlu_pro_category_specialists_are_14_orthogonal_experts(mmlu_pro: RoutingTable) -> None:
    spec = society.table_specialists(mmlu_pro, "dataset", split=None)
    assert spec.n_actors == 14
    assert society.hse(spec) == math.log2(14)
    assert society.normalized_hse(spec) == 1.0


def test_mmlu_pro_pool(mmlu_pro: RoutingTable) -> None:
    # no split labels: every question counts, with a warning; gemini lacks 12 questions (dropped)
    with pytest.warns(RuntimeWarning):
        soc, dist, dropped = prepare(mmlu_pro, "cosine")
    assert dropped == 12 and dist.n_items == 12_020 and dist.binary
    div = society.diversity_from_distances(dist, names=soc.names)
    assert div.n_actors == 10
    # pinned from this data (correctness = pred == answer, null pred = wrong)
    assert div.hse == pytest.approx(1.1083, abs=5e-4)
    assert div.hse_normalized == pytest.approx(0.3336, abs=5e-4)
    # the pool is far from the diversity its categories could support
    assert div.hse < 0.35 * math.log2(14)
    cs = society.greedy_coreset(dist, 3, names=soc.names, full_hse=div.hse)
    assert (cs.size_90, cs.size_95) == (6, 7)
    assert cs.selected_names[0] == "Llama-2-7b-hf"
    for linkage in ("complete", "average"):
        other = society.diversity_from_distances(dist, linkage)
        assert other.hse > div.hse  # single linkage is the most conservative (paper app. 14)


def test_llmrouter_pool(llmrouter: RoutingTable) -> None:
    div = society.diversity(llmrouter, split="train")
    assert div.n_actors == 9 and div.n_items == 5_608 and not div.binary
    assert div.hse == pytest.approx(1.0333, abs=5e-4)
    assert div.hse_normalized == pytest.approx(0.3260, abs=5e-4)
    cs = society.coreset(llmrouter, 3)
    assert (cs.size_90, cs.size_95) == (4, 4)
    spec = society.table_specialists(llmrouter, "task_name")
    assert spec.n_actors == 14 and society.hse(spec) == math.log2(14)


@pytest.mark.parametrize("metric", ["cosine", "correlation", "euclidean", "manhattan"])
def test_mmlu_pro_pool_popcount_route_is_bit_identical(mmlu_pro: RoutingTable, metric: str) -> None:
    pytest.importorskip("numba")
    import numpy as np

    from routerlab.society.entropy import minimum_spanning_tree, single_linkage

    with pytest.warns(RuntimeWarning):
        _, pc, _ = prepare(mmlu_pro, metric, gram="popcount")
    with pytest.warns(RuntimeWarning):
        _, blas, _ = prepare(mmlu_pro, metric, gram="blas")
    assert pc.gram is not None and blas.gram is not None
    assert pc.gram.dtype == np.int32 and np.array_equal(pc.gram, blas.gram)
    for a, b in zip(minimum_spanning_tree(pc, kernel="numba"), minimum_spanning_tree(blas, kernel="numpy"),
                    strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(single_linkage(pc, kernel="numba"), single_linkage(blas, kernel="numpy"))
    if metric == "cosine":
        assert society.diversity_from_distances(pc).hse == pytest.approx(1.1083, abs=5e-4)
    spec = society.table_specialists(mmlu_pro, "dataset", split=None)
    assert society.hse(spec, metric, gram="popcount") == society.hse(spec, metric, gram="blas")
