"""The two-model protocol (SPEC 6): the anchors on a synthetic table and on the real MMLU-Pro table, the
vectorised bootstrap against the scalar metrics, signals from a precomputed .npz, and the refusals."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytest

from routerlab import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.protocols.two_model import BOOT_METRICS, run_two_model
from routerlab.routers import routers
from routerlab.routers.two_model import TwoModelRouter

A_WORDS = ["apple", "pear", "plum", "fig", "grape", "melon"]
B_WORDS = ["quark", "boson", "lepton", "meson", "gluon", "muon"]


def synthetic(n: int = 480, seed: int = 0) -> RoutingTable:
    """Three actors (L, M, S); datasets a, b, c of n/3 queries each; fruit questions are easy for the small
    model S (90% right), physics ones hard (20%); every 4th query of a and b is 'test'; two queries lack S or L
    (dropped), one lacks M only (kept: M is not in the pair)."""
    rng = np.random.default_rng(seed)
    easy = rng.integers(0, 2, n).astype(bool)
    text = [" ".join(rng.choice(A_WORDS if e else B_WORDS, 4)) + f" q{i}" for i, e in enumerate(easy)]
    small = (rng.random(n) < np.where(easy, 0.9, 0.2)).astype(np.float64)
    large = (rng.random(n) < 0.8).astype(np.float64)
    mid = (rng.random(n) < 0.5).astype(np.float64)
    small[5], large[90], mid[7] = np.nan, np.nan, np.nan
    dataset = np.repeat(["a", "b", "c"], n // 3)
    split = np.where(np.arange(n) % 4 == 0, "test", "train")
    return RoutingTable.from_arrays(np.column_stack([large, mid, small]), actors=["L", "M", "S"], text=text,
                                    dataset=dataset, split=split)


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return synthetic()


@pytest.fixture(scope="module")
def run(table: RoutingTable) -> dict[str, Any]:
    result = run_two_model(table, "S", "L", ["oracle", "best-single", "knn:k=5", "random"], ood_datasets=["c"],
                           split="given", n_boot=200, seed=1)
    return result.to_dict()


def _rows(table: RoutingTable, dataset: str, test_only: bool) -> npt.NDArray[np.intp]:
    keep = ~np.isnan(table.score[:, [0, 2]]).any(axis=1)
    mask = (table.queries.dataset == dataset) & keep
    if test_only:
        mask &= table.queries.split == "test"
    return np.flatnonzero(mask)


def test_layout_and_dropped(run: dict[str, Any], table: RoutingTable) -> None:
    assert run["small"] == "S" and run["large"] == "L"
    assert run["id_datasets"] == ["a", "b"] and run["ood_datasets"] == ["c"]
    assert run["dropped"] == {"small_or_large_unobserved": 2}
    assert run["routers"] == ["oracle", "best-single", "knn:k=5", "random"]
    assert run["data"]["content_hash"] == table.content_hash and run["seed"] == 1 and run["encoder"]
    assert run["bands"] == {"lpm": [0.25, 0.30], "rp": [0.85, 0.95]} and run["n_boot"] == 200
    for res in run["results"]:
        assert list(res["datasets"]) == ["a", "b", "c"]
        assert res["ood_mean"] is not None
        for cell in res["datasets"].values():
            assert {"n", "auroc", "lpm", "mpm", "hcr", "auc", "apgr", "perf_small", "perf_large"} <= set(cell)
            assert all(f"{m}_ci" in cell for m in BOOT_METRICS)
        for name in ("a", "b", "c"):
            assert res["datasets"][name]["n"] == _rows(table, name, name != "c").size
        # the ID mean is the mean of the ID datasets' values
        assert res["id_mean"]["lpm"] == pytest.approx(np.mean([res["datasets"][d]["lpm"] for d in "ab"]))
        assert res["ood_mean"]["hcr"] == res["datasets"]["c"]["hcr"]


def test_curve_ends_are_the_two_models_accuracies(run: dict[str, Any], table: RoutingTable) -> None:
    for name in ("a", "b", "c"):
        rows = _rows(table, name, name != "c")
        perf_s, perf_l = table.score[rows, 2].mean(), table.score[rows, 0].mean()
        for res in run["results"]:
            phi = run["curves"][res["router"]][name]["phi"]
            assert phi[0] == pytest.approx(perf_s, abs=1e-12) and phi[-1] == pytest.approx(perf_l, abs=1e-12)
            assert res["datasets"][name]["perf_small"] == pytest.approx(perf_s, abs=1e-12)
            assert res["datasets"][name]["perf_large"] == pytest.approx(perf_l, abs=1e-12)


def test_oracle_and_constant_anchors(run: dict[str, Any]) -> None:
    by = {r["router"]: r for r in run["results"]}
    for name in ("a", "b", "c"):
        assert by["oracle"]["datasets"][name]["auroc"] == 1.0
        assert by["oracle"]["datasets"][name]["auroc_ci"] == [1.0, 1.0]
        assert by["best-single"]["datasets"][name]["auroc"] == 0.5
        best = np.asarray(run["curves"]["oracle"][name]["phi"])
        for spec, curves in run["curves"].items():
            assert (best >= np.asarray(curves[name]["phi"]) - 1e-12).all(), spec
    # the constant router's curve is the straight line between the two models (exact tie expectation)
    c = run["curves"]["best-single"]["c"]
    x, phi = np.asarray(c["x"]), np.asarray(c["phi"])
    n = by["best-single"]["datasets"]["c"]["n"]
    sent = (np.arange(101) * n) // 100 / n
    assert phi == pytest.approx(phi[0] + sent * (phi[-1] - phi[0]), abs=1e-12)
    assert x[50] == 0.5


def test_zoo_router_on_two_actors_learns(run: dict[str, Any]) -> None:
    knn = next(r for r in run["results"] if r["router"] == "knn:k=5")
    assert knn["id_mean"]["auroc"] > 0.75 and knn["ood_mean"]["auroc"] > 0.75
    assert knn["id_mean"]["auroc_ci"][0] > 0.5


def test_intervals_bracket_the_estimates(run: dict[str, Any]) -> None:
    defined = 0
    for res in run["results"]:
        for cell in [*res["datasets"].values(), res["id_mean"], res["ood_mean"]]:
            for m in BOOT_METRICS:
                lo, hi = cell[f"{m}_ci"]
                if math.isnan(cell[m]) or math.isnan(lo):
                    continue
                defined += 1
                assert lo - 1e-12 <= cell[m] <= hi + 1e-12, (res["router"], m)
    assert defined >= 0.8 * len(run["results"]) * 5 * len(BOOT_METRICS)


def test_same_seed_same_numbers_and_paired_resamples(table: RoutingTable, run: dict[str, Any]) -> None:
    again = run_two_model(table, "S", "L", ["oracle", "best-single", "knn:k=5", "random"], ood_datasets=["c"],
                          split="given", n_boot=200, seed=1).to_dict()

    def strip(d: dict[str, Any]) -> dict[str, Any]:
        return {**d, "results": [{k: v for k, v in r.items() if k != "fit_seconds"} for r in d["results"]]}

    assert strip(again) == strip(run)
    other = run_two_model(table, "S", "L", ["knn:k=5"], ood_datasets=["c"], split="given", n_boot=200, seed=2)
    knn = next(r for r in run["results"] if r["router"] == "knn:k=5")
    assert other.results[0].datasets["c"]["auroc"] == knn["datasets"]["c"]["auroc"]  # no split, no seed in knn
    assert other.results[0].datasets["c"]["auroc_ci"] != knn["datasets"]["c"]["auroc_ci"]
    # two routers with the same scores get the same intervals: one set of resamples per dataset
    twin = run_two_model(table, "S", "L", ["random", "random:seed=1"], ood_datasets=["c"], split="given",
                         n_boot=100, seed=1)
    assert twin.results[0].datasets["c"] == twin.results[1].datasets["c"]


class _SelfAskRouter(TwoModelRouter):
    """Test router: s = the self_ask signal, and it remembers every fit (to prove none happened)."""

    name = "test-self-ask"
    reads_signals = ("self_ask",)

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.fits: list[int] = []

    def _fit(self, train: RoutingTable, features: Features) -> None:
        features.signal("self_ask", self.name)
        self.fits.append(train.n_queries)

    def _small_score(self, features: Features) -> npt.ArrayLike:
        return features.signal("self_ask", self.name)


class _CountingRouter(TwoModelRouter):
    """Test router reading no signal: a constant score, fits remembered."""

    name = "test-counting"
    defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.fits: list[int] = []

    def _fit(self, train: RoutingTable, features: Features) -> None:
        self.fits.append(train.n_queries)

    def _small_score(self, features: Features) -> npt.ArrayLike:
        return np.zeros(features.n)


def _write_signals(path: Path, table: RoutingTable) -> Path:
    """A precomputed .npz for every query of ``table``: self_ask and option logits informative about the small
    model S (column 2), hidden states (3 layers) carrying it in one dimension, sampled answer codes."""
    rng = np.random.default_rng(4)
    n = table.n_queries
    right = np.nan_to_num(table.score[:, 2]) == 1
    logits = rng.normal(0, 1, (n, 4)).astype(np.float32)
    logits[:, 0] += np.where(right, 3.0, 0.0)
    logits[::3, 3] = np.nan  # three options only on some questions
    hidden = rng.normal(0, 1, (n, 3, 8)).astype(np.float16)
    hidden[:, :, 0] += np.where(right, 2.0, -2.0).astype(np.float16)[:, None]
    samples = np.where(right[:, None], 0, rng.integers(0, 3, (n, 5))).astype(np.int32)
    order = rng.permutation(n)  # joined by id, never by position
    np.savez(path, ids=table.queries.ids.astype(str)[order], self_ask=(np.where(right, 1.0, -1.0)
             + rng.normal(0, 0.5, n))[order].astype(np.float32), option_logits=logits[order], hidden=hidden[order],
             samples=samples[order])
    return path


def test_signals_from_a_precomputed_npz(table: RoutingTable, tmp_path: Path) -> None:
    npz = _write_signals(tmp_path / "signals.npz", table)
    wanted = ["max-logit", "entropy", "margin", "self-ask", "semantic-entropy", "embedding-mlp", "probe-final",
              "probe-mean", "probe-dirichlet"]
    present = [name for name in wanted if name in routers()]  # helpers' routers, where they have landed
    # the probes' defaults (the paper's lr 1e-4) are for thousands of questions; ~90 here need a larger step
    present = [f"{name}:lr=0.01" if name.startswith("probe-") else name for name in present]
    mine = _SelfAskRouter()
    result = run_two_model(table, "S", "L", [mine, *present, "best-single"], signals=npz, ood_datasets=["c"],
                           split="given", n_boot=50)
    d = result.to_dict()
    assert d["signals"]["kind"] == "npz" and d["signals"]["arrays"]["hidden"] == [3, 8]
    keep = ~np.isnan(table.score[:, [0, 2]]).any(axis=1)
    in_domain_train = (table.queries.split == "train") & (table.queries.dataset != "c") & keep
    assert mine.fits == [int(in_domain_train.sum())]  # fitted once
    assert result.result("_SelfAskRouter()").id_mean["auroc"] > 0.85
    for name in present:  # every signal is informative here (best-single: 0.5)
        assert result.result(name).id_mean["auroc"] > 0.75, name


def test_missing_signal_fails_before_any_training(table: RoutingTable) -> None:
    first = _CountingRouter()
    with pytest.raises(UsageError, match=r"test-self-ask.*self-assessment"):
        run_two_model(table, "S", "L", [first, _SelfAskRouter()], ood_datasets=["c"], split="given", n_boot=50)
    assert first.fits == []


@pytest.mark.parametrize("kwargs,message", [
    ({"small": "nope"}, "unknown small actor 'nope'; the table's actors are L, M, S"),
    ({"large": "S"}, "both 'S'"),
    ({"ood_datasets": ["a"], "id_datasets": ["a", "b"]}, "'a' is named both"),
    ({"ood_datasets": ["zz"]}, "unknown out-of-domain dataset 'zz'"),
    ({"id_datasets": ["b", "b"]}, "named twice"),
    ({"ood_datasets": ["a", "b", "c"]}, "no in-domain dataset"),
    ({"lpm_band": (0.3, 0.2)}, "LO <= HI"),
    ({"rp_band": (0.85, float("nan"))}, r"^rp_band: must be two numbers in \[0, 1\], got 0.85,nan$"),
    ({"lpm_band": (0.1, 0.2, 0.3)}, r"^lpm_band: needs two numbers LO,HI in \[0, 1\], got 3 numbers$"),
    ({"convention": "routellm"}, "^convention: must be one of routerlab, routerxbench, got 'routellm' .*grid"),
    ({"n_boot": 0}, "n_boot must be at least 1"),
    ({"routers": ["knn", "knn"]}, "named twice"),
    ({"split": "ood:a"}, "^split: 'ood:...' does not apply here: .*--ood"),
    ({"compare_to": "knn"}, "compare_to 'knn' is not a router of this run"),
])
def test_refusals(table: RoutingTable, kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"small": "S", "large": "L", "routers": ["best-single"], "split": "given", "n_boot": 50,
                            **kwargs}
    with pytest.raises(UsageError, match=message):
        run_two_model(table, args.pop("small"), args.pop("large"), args.pop("routers"), **args)


def test_paired_differences_against_a_reference(table: RoutingTable, run: dict[str, Any]) -> None:
    """compare_to: each router's metric minus the reference's, with intervals from the shared resamples. The
    oracle (AUROC 1) against the constant best-single (0.5) differs by exactly 0.5 in every resample."""
    d = run_two_model(table, "S", "L", ["oracle", "best-single", "knn:k=5", "random"], ood_datasets=["c"],
                      split="given", n_boot=200, seed=1, compare_to="best-single").to_dict()
    by = {r["router"]: r for r in d["results"]}
    assert "versus" not in by["best-single"] and "versus" not in run["results"][0]  # absent without compare_to
    oracle = by["oracle"]["versus"]
    assert oracle["reference"] == "best-single"
    assert oracle["id_mean"]["auroc_diff"] == 0.5 and oracle["id_mean"]["auroc_diff_ci"] == [0.5, 0.5]
    for spec in ("oracle", "knn:k=5", "random"):
        mine, ref = by[spec], by["best-single"]
        for dataset in ("a", "b", "c"):
            for m in ("auroc", "lpm", "hcr", "apgr"):
                got = mine["versus"]["datasets"][dataset]
                assert got[f"{m}_diff"] == pytest.approx(mine["datasets"][dataset][m] - ref["datasets"][dataset][m])
                lo, hi = got[f"{m}_diff_ci"]
                assert math.isnan(lo) or lo - 1e-12 <= got[f"{m}_diff"] <= hi + 1e-12
        assert mine["versus"]["ood_mean"]["lpm_diff"] == pytest.approx(mine["ood_mean"]["lpm"] - ref["ood_mean"]["lpm"])
    # paired: the oracle's curve is never below best-single's, so no resample's LPM difference is negative
    assert oracle["id_mean"]["lpm_diff_ci"][0] >= 0


def test_a_dataset_without_a_test_query_is_named(table: RoutingTable) -> None:
    one = table.select_queries(np.flatnonzero((table.queries.dataset != "b") | (table.queries.split == "train")))
    with pytest.raises(UsageError, match="'b' has no test query"):
        run_two_model(one, "S", "L", ["best-single"], split="given", n_boot=50)


SMALL, LARGE = "Meta-Llama-3_1-8B-Instruct", "gemini-1.5-pro-002"


def test_real_mmlu_pro_anchors(real_table: Callable[[str], RoutingTable]) -> None:
    """Two real models of MMLU-Pro: history and philosophy in-domain, computer science out-of-domain."""
    full = real_table("mmlu-pro")
    table = full.select_datasets(["history", "philosophy", "computer science"])
    result = run_two_model(table, SMALL, LARGE, ["oracle", "best-single", "knn:k=10", "random"],
                           id_datasets=["history", "philosophy"], ood_datasets=["computer science"], n_boot=200)
    d = result.to_dict()
    assert d["id_datasets"] == ["history", "philosophy"] and d["ood_datasets"] == ["computer science"]
    oracle, constant = result.result("oracle"), result.result("best-single")
    pair = table.select_actors([SMALL, LARGE])
    keep = ~np.isnan(pair.score).any(axis=1)
    assert d["dropped"]["small_or_large_unobserved"] == int((~keep).sum())
    cs = keep & (pair.queries.dataset == "computer science")
    for name in ("history", "philosophy", "computer science"):
        assert oracle.datasets[name]["auroc"] == 1.0 and constant.datasets[name]["auroc"] == 0.5
        best = np.asarray(d["curves"]["oracle"][name]["phi"])
        for spec in d["curves"]:
            assert (best >= np.asarray(d["curves"][spec][name]["phi"]) - 1e-12).all(), (spec, name)
    # the out-of-domain dataset is evaluated whole: its curve ends are the two models' accuracies there
    assert oracle.datasets["computer science"]["n"] == int(cs.sum())
    phi = d["curves"]["knn:k=10"]["computer science"]["phi"]
    assert phi[0] == pytest.approx(float(pair.score[cs, 0].astype(np.float64).mean()), abs=1e-12)
    assert phi[-1] == pytest.approx(float(pair.score[cs, 1].astype(np.float64).mean()), abs=1e-12)
    # in-domain: a stratified 20% test part of each dataset
    for name in ("history", "philosophy"):
        n = int((keep & (pair.queries.dataset == name)).sum())
        assert oracle.datasets[name]["n"] == round(0.2 * n)
    # Gemini is far stronger than Llama-3.1-8B on MMLU-Pro; no router's LPM beats the oracle's
    assert oracle.id_mean["perf_large"] > oracle.id_mean["perf_small"] + 0.1
    for r in result.results:
        assert r.id_mean["lpm"] <= oracle.id_mean["lpm"] + 1e-12 and r.ood_mean is not None
        assert r.ood_mean["lpm"] <= oracle.ood_mean["lpm"] + 1e-12  # type: ignore[index]


def test_datasets_keep_the_order_given(table: RoutingTable) -> None:
    result = run_two_model(table, "S", "L", ["best-single"], id_datasets=["b", "a"], ood_datasets=["c"],
                           split="given", n_boot=40).to_dict()
    assert result["id_datasets"] == ["b", "a"] and list(result["results"][0]["datasets"]) == ["b", "a", "c"]


def test_datasets_with_too_few_queries_get_no_interval() -> None:
    """Issue 21: 20 test queries in each in-domain dataset (fewer than MIN_QUERIES) give no interval there, nor for
    their mean, nor for a paired difference; the out-of-domain dataset (all its 80 queries) keeps its intervals.
    One warning names the datasets."""
    import warnings

    from routerlab.metrics.bootstrap import FewQueriesWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_two_model(synthetic(240), "S", "L", ["oracle", "best-single", "knn:k=5"], ood_datasets=["c"],
                               split="given", n_boot=50, seed=1, compare_to="best-single").to_dict()
    few = [str(w.message) for w in caught if issubclass(w.category, FewQueriesWarning)]
    assert few == ["only 20 evaluated queries in each of the datasets a, b, fewer than the 30 a 95% interval needs: "
                   "intervals and p-values are reported as unavailable (docs/metrics.md, 'Too few queries')"]
    for r in result["results"]:
        for name in ("a", "b"):
            assert r["datasets"][name]["n"] < 30 and all(math.isnan(x) for x in r["datasets"][name]["auroc_ci"])
        assert all(math.isnan(x) for x in r["id_mean"]["lpm_ci"])
        assert r["datasets"]["c"]["n"] >= 30 and not math.isnan(r["datasets"]["c"]["lpm_ci"][0])
        assert not math.isnan(r["ood_mean"]["lpm_ci"][0])
    knn = next(r for r in result["results"] if r["router"] == "knn:k=5")
    assert all(math.isnan(x) for x in knn["versus"]["datasets"]["a"]["lpm_diff_ci"])
    assert not math.isnan(knn["versus"]["datasets"]["c"]["lpm_diff_ci"][0])


def test_probes_stop_on_the_development_part_with_their_signals(table: RoutingTable, tmp_path: Path) -> None:
    """two-model --dev: the probes (and every router that trains by epochs) get the development queries, their
    hidden states attached, and report the epoch they kept; the other routers fit as without it."""
    npz = _write_signals(tmp_path / "signals.npz", table)
    result = run_two_model(table, "S", "L", ["probe-final:lr=0.01,epochs=30", "best-single"], signals=npz,
                           ood_datasets=["c"], split="given", n_boot=50, dev=0.3, call_rate=0.3)
    d = {r["router"]: r for r in result.to_dict()["results"]}
    es = d["probe-final:lr=0.01,epochs=30"]["early_stopping"]
    assert es["n_dev"] == result.to_dict()["split"]["n_dev"] and 0 <= es["best_epoch"] <= es["epochs_run"] <= 30
    assert "early_stopping" not in d["best-single"]
    assert result.result("probe-final:lr=0.01,epochs=30").id_mean["auroc"] > 0.75
