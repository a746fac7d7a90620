"""The robustness protocol (SPEC 3): rho's anchors on a real table, the invariance check by hand on a tiny table,
the outcome join by id and name, bad input, determinism and strict JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytest

from routerlab.data.splits import make_split
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.perturb.base import PerturbationSet, Perturber, Variant, level_names, perturb, register_level
from routerlab.protocols.robustness import UNTESTED_NOTE, robustness, set_masks
from routerlab.reports.files import json_safe
from routerlab.routers.base import Router

SWAP = "test-robustness-swap"


if SWAP not in level_names():

    @register_level(SWAP)
    class AdjacentSwap(Perturber):
        """Test-only offline level: swap two adjacent words at a seeded position."""

        offline = True
        summary = "swap two adjacent words (tests only)"

        def candidates(self, texts: Sequence[str], p: int, rngs: Sequence[np.random.Generator]) -> list[list[str]]:
            out = []
            for text, rng in zip(texts, rngs, strict=True):
                words = text.split(" ")
                cands = []
                for _ in range(3 * p):
                    if len(words) < 2:
                        break
                    i = int(rng.integers(len(words) - 1))
                    w = list(words)
                    w[i], w[i + 1] = w[i + 1], w[i]
                    cands.append(" ".join(w))
                out.append(cands)
            return out


@pytest.fixture(scope="module")
def llmrouter(real_table: Callable[[str], RoutingTable]) -> RoutingTable:
    return real_table("llmrouter")


@pytest.fixture(scope="module")
def swapped(llmrouter: RoutingTable) -> PerturbationSet:
    test = llmrouter.select_split("test")
    # tf-idf scores the variants: the swap level has no similarity filter, so the cosine is only recorded (the
    # variants are the ones MiniLM would give) and robustness() never reads it; MiniLM on 1,500 texts took minutes
    return perturb(test.queries.ids.tolist(), test.queries.text.tolist(), [SWAP], 2, seed=0, similarity="tfidf")


def test_anchors_on_a_real_table(llmrouter: RoutingTable, swapped: PerturbationSet) -> None:
    rob = robustness(llmrouter, ["best-single", "random", "oracle"], swapped, n_boot=200)
    out = {r.spec: r for r in rob.results}
    assert "oracle" in rob.skipped and "oracle" not in out  # a bound: no labels for the variants
    assert rob.n_test == 500 and rob.levels == [SWAP] and rob.p == 2
    fixed = out["best-single"]
    assert fixed.rho == 1.0 and all(v == 1.0 for v in fixed.rho_by_level.values())
    # random: every existing variant matches its original's actor with probability 1/N, independently
    m = len(rob.actor_names)
    k = int((fixed.perturbed_choice >= 0).sum())
    assert k > 800
    se = math.sqrt((1 / m) * (1 - 1 / m) / k)
    rnd = out["random"]
    assert abs(rnd.rho - 1 / m) < 4 * se
    lo, hi = rnd.rho_ci
    assert lo <= rnd.rho <= hi and hi - lo < 0.1
    # per actor: the fixed router's actor carries rho 1, every other actor 0 (none routed there, SPEC 3)
    best = max(fixed.selection, key=lambda a: fixed.selection[a])
    assert fixed.rho_by_actor[best] == 1.0
    assert all(v == 0.0 for a, v in fixed.rho_by_actor.items() if a != best)
    assert all(math.isnan(v[0]) for a, v in fixed.rho_by_actor_ci.items() if a != best)
    # accuracy is the mean score of the chosen actor on the original test queries
    test = llmrouter.select_split("test")
    assert fixed.accuracy == pytest.approx(float(test.score[:, test.actor_names.index(best)].mean()))
    assert not rob.invariance_tested and fixed.invariance == {"tested": False, "note": UNTESTED_NOTE}
    assert fixed.perturbed_accuracy is None
    # without outcomes the paper's perturbed accuracy is still measured: for a fixed router, the mean over the
    # variants of their original's score for its actor (a query weighs by its number of variants)
    per_variant = test.score[:, test.actor_names.index(best)].astype(np.float64)[:, None]
    have = fixed.perturbed_choice >= 0
    expected = float((per_variant * have).sum() / have.sum())
    assert fixed.perturbed_accuracy_orig == pytest.approx(expected)
    assert fixed.perturbed_accuracy_orig_by_level == pytest.approx({SWAP: expected})


def test_identical_texts_route_identically(llmrouter: RoutingTable) -> None:
    """A variant whose text encodes like its original's (a trailing space: the driver would drop it as a
    duplicate, so the set is built by hand) is routed to the same actor by every deterministic router."""
    test = llmrouter.select_split("test")
    hand = PerturbationSet(tuple(Variant(str(q), "character", 0, str(t) + " ") for q, t in
                                 zip(test.queries.ids.tolist(), test.queries.text.tolist(), strict=True)),
                           ("character",), 1)
    rob = robustness(llmrouter, ["knn"], hand, n_boot=50)
    for r in rob.results:
        assert r.rho == 1.0 and r.rho_by_level == {"character": 1.0}
        assert len(set(r.choice.tolist())) > 1  # not trivially fixed


def test_variants_for_another_split(llmrouter: RoutingTable) -> None:
    train = llmrouter.select_split("train")
    vs = PerturbationSet(tuple(Variant(str(q), "word", 0, "some text") for q in train.queries.ids[:5]),
                         ("word",), 1)
    with pytest.raises(UsageError, match="another split"):
        robustness(llmrouter, ["best-single"], vs, n_boot=10)


def test_same_seed_same_numbers(llmrouter: RoutingTable, swapped: PerturbationSet) -> None:
    def numbers(seed: int) -> dict[str, Any]:
        d = robustness(llmrouter, ["random", "knn"], swapped, n_boot=100, seed=seed).to_dict()
        for r in d["results"]:
            r.pop("fit_seconds"), r.pop("score_seconds")
        return json_safe(d)  # NaN (an undefined kappa_rho) as None, so equal runs compare equal

    a, b = numbers(3), numbers(3)
    assert a == b
    assert numbers(4)["results"][0]["rho"] != a["results"][0]["rho"]  # random's draws follow the seed


# --------------------------------------------------------------------------- hand-built invariance case
class KeywordRouter(Router):
    """Routes by a word in the text: 'beta' -> actor 1, 'gamma' -> actor 2, else actor 0."""

    name = "keyword-test"

    def _fit(self, train: RoutingTable, features: Features) -> None:
        pass

    def _scores(self, features: Features) -> npt.ArrayLike:
        texts = [str(t) for t in features.queries.text.tolist()]
        pick = np.array([1 if "beta" in t else 2 if "gamma" in t else 0 for t in texts])
        return np.asarray(np.eye(len(self.actor_names))[pick], dtype=np.float64)


def _tiny() -> tuple[RoutingTable, PerturbationSet]:
    score = [[1, 0, 0], [0, 1, 0], [1, 1, 1], [0, 0, 1],  # train
             [1, 0, 0], [1, 1, 0]]  # test q0: optimal {A}; q1: optimal {A, B}
    table = RoutingTable.from_arrays(
        np.array(score, dtype=np.float32), actors=["A", "B", "C"],
        query_ids=["t0", "t1", "t2", "t3", "q0", "q1"],
        text=["red apple", "green pear", "blue plum", "red pear", "alpha one", "alpha two"],
        split=["train"] * 4 + ["test"] * 2)
    texts = {("q0", "character", 0): "alpha one x", ("q0", "character", 1): "beta one",
             ("q0", "word", 0): "gamma one", ("q0", "word", 1): "alpha uno",
             ("q1", "character", 0): "alpha deux", ("q1", "character", 1): "beta two",
             ("q1", "word", 0): "alpha zwei"}  # q1 has no second word variant (ragged)
    variants = PerturbationSet(tuple(Variant(q, lv, j, t) for (q, lv, j), t in texts.items()),
                               ("character", "word"), 2, seed=0)
    return table, variants


def _outcomes(order: list[int] | None = None) -> RoutingTable:
    """Outcomes of the variants, actors in another order and one extra actor, an unrelated row, and no row for
    q0#word#1 (unknown)."""
    rows = {"q0#character#0": [1, 0, 0], "q0#character#1": [0, 1, 0], "q0#word#0": [1, 0, 1],
            "q1#character#0": [1, 1, 0], "q1#character#1": [0, 1, 0], "q1#word#0": [0, 0, 0],
            "unrelated": [1, 1, 1]}
    ids = list(rows)
    if order is not None:
        ids = [ids[i] for i in order]
    abc = np.array([rows[i] for i in ids], dtype=np.float32)
    # columns C, A, D, B
    mat = np.column_stack([abc[:, 2], abc[:, 0], np.full(len(ids), 0.5, dtype=np.float32), abc[:, 1]])
    return RoutingTable.from_arrays(mat, actors=["C", "A", "D", "B"], query_ids=ids)


def test_set_masks() -> None:
    assert set_masks(np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0], [0.5, 0.49, 1.0]])).tolist() == [1, 3, 7, 4]


def test_invariance_by_hand() -> None:
    table, variants = _tiny()
    rob = robustness(table, [KeywordRouter()], variants, outcomes=_outcomes(), n_boot=200)
    r = rob.results[0]
    assert r.choice.tolist() == [0, 0]
    # rho_q0 = 2/4 (c0, w1 kept), rho_q1 = 2/3 (c0, w0 kept)
    assert r.rho == pytest.approx(7 / 12)
    assert r.rho_by_level == pytest.approx({"character": 0.5, "word": 0.75})
    assert r.rho_by_actor == pytest.approx({"A": 7 / 12, "B": 0.0, "C": 0.0})
    assert r.accuracy == 1.0
    # chosen-actor scores on the 6 variants with outcomes: 1, 1, 1 | 1, 1, 0
    assert r.perturbed_accuracy == pytest.approx(5 / 6)
    assert r.perturbed_accuracy_by_level == pytest.approx({"character": 1.0, "word": 0.5})
    # the paper's perturbed accuracy scores each variant's choice with its ORIGINAL's outcome, all 7 variants:
    # q0 [1,0,0]: c0 A 1, c1 B 0, w0 C 0, w1 A 1 | q1 [1,1,0]: c0 A 1, c1 B 1, w0 A 1
    assert r.perturbed_accuracy_orig == pytest.approx(5 / 7)
    assert r.perturbed_accuracy_orig_by_level == pytest.approx({"character": 3 / 4, "word": 2 / 3})
    inv = r.invariance
    assert inv["tested"] and rob.invariance_tested
    assert (inv["n_perturbations"], inv["n_known"]) == (7, 6)
    # sets: q0c1 {B}, q0w0 {A,C}, q1c1 {B}, q1w0 {A,B,C} differ from the originals' {A} / {A,B}
    assert inv["changed_share"] == pytest.approx(4 / 6)
    # argmax (oracle tie-break, first): only q0c1 and q1c1 move from A to B
    assert inv["changed_share_argmax"] == pytest.approx(2 / 6)
    assert inv["rho_all"] == pytest.approx(7 / 12)
    assert inv["rho_invariant"] == 1.0  # q0c0 and q1c0, both kept
    ch, wd = inv["by_level"]["character"], inv["by_level"]["word"]
    assert (ch["n_perturbations"], ch["n_known"], wd["n_perturbations"], wd["n_known"]) == (4, 4, 3, 2)
    assert ch["changed_share"] == 0.5 and ch["changed_share_argmax"] == 0.5 and ch["rho_invariant"] == 1.0
    assert wd["changed_share"] == 1.0 and wd["changed_share_argmax"] == 0.0
    assert math.isnan(wd["rho_invariant"]) and wd["rho_all"] == pytest.approx(0.75)
    # 2 test queries, fewer than MIN_QUERIES: no interval is computed (issue 21), every one NaN
    lo, hi = inv["changed_share_ci"]
    assert math.isnan(lo) and math.isnan(hi) and all(math.isnan(x) for x in (*r.rho_ci, *r.accuracy_ci))
    # strict JSON once NaN is null
    text = json.dumps(json_safe(rob.to_dict()), allow_nan=False)
    back = json.loads(text)["results"][0]
    assert back["invariance"]["by_level"]["word"]["rho_invariant"] is None
    assert back["router"] == "KeywordRouter()" and back["rho_ci"] == [None, None]
    assert "choice" not in back and "perturbed_choice" not in back


def test_outcomes_join_by_id_not_position() -> None:
    table, variants = _tiny()
    a = robustness(table, [KeywordRouter()], variants, outcomes=_outcomes(), n_boot=50).results[0]
    b = robustness(table, [KeywordRouter()], variants, outcomes=_outcomes([6, 3, 0, 5, 2, 4, 1]),
                   n_boot=50).results[0]
    assert json_safe(a.invariance) == json_safe(b.invariance)  # NaN -> None: NaN != NaN
    assert a.perturbed_accuracy == b.perturbed_accuracy and a.invariance["n_known"] == 6


def test_outcomes_missing_an_actor() -> None:
    table, variants = _tiny()
    out = _outcomes()
    with pytest.raises(UsageError, match=r"lacks actor.*'B'"):
        robustness(table, [KeywordRouter()], variants, outcomes=out.select_actors(["C", "A", "D"]), n_boot=10)


def test_to_dict_without_outcomes_is_strict_json() -> None:
    table, variants = _tiny()
    rob = robustness(table, [KeywordRouter(), "best-single"], variants, n_boot=50)
    d = rob.to_dict()
    json.dumps(json_safe(d), allow_nan=False)
    assert d["invariance_tested"] is False and d["invariance_note"] == UNTESTED_NOTE
    assert d["perturbations"]["n_variants_used"] == 7 and d["split"]["n_test"] == 2
    assert d["data"]["content_hash"] == table.content_hash and d["seed"] == 0 and d["encoder"]
    keys = {"router", "rho", "rho_ci", "rho_by_level", "rho_by_level_ci", "rho_by_actor", "rho_by_actor_ci",
            "accuracy", "accuracy_ci", "perturbed_accuracy", "perturbed_accuracy_ci", "perturbed_accuracy_by_level",
            "invariance", "selection", "collapsed", "params", "fit_seconds", "score_seconds"}
    assert keys <= set(d["results"][0])
    assert d["results"][0]["invariance"]["tested"] is False


def test_split_is_reused_and_variants_follow_the_test_ids() -> None:
    """A Split object is used as given, and variants of test queries excluded as incomplete are ignored."""
    table, variants = _tiny()
    sp = make_split(table, "given", 0)
    rob = robustness(table, ["best-single"], variants, split=sp, n_boot=20)
    assert rob.test_ids.tolist() == ["q0", "q1"] and rob.results[0].rho == 1.0


class BackendRouter(KeywordRouter):
    """A router that needs an LLM backend: routes like KeywordRouter but only once one is attached, and reports
    how many texts it saw (its diagnostics)."""

    name = "backend-test"
    needs_backend = True
    defaults: ClassVar[dict[str, Any]] = {"backend": ""}

    def attach_backend(self, backend: object) -> BackendRouter:
        self.backend = backend
        return self

    def has_backend(self) -> bool:
        return bool(self.params["backend"]) or getattr(self, "backend", None) is not None

    def _scores(self, features: Features) -> npt.ArrayLike:
        if getattr(self, "backend", None) is None:
            raise UsageError("backend-test needs a backend")
        self.seen = features.n
        return super()._scores(features)

    def diagnostics(self) -> dict[str, Any]:
        return {"texts": self.seen}


def test_backend_is_attached_and_diagnostics_recorded() -> None:
    table, variants = _tiny()
    with pytest.raises(UsageError, match="asks an LLM and none is given"):
        robustness(table, [BackendRouter()], variants, n_boot=10)
    marker = object()
    router = BackendRouter()
    rob = robustness(table, [router], variants, backend=marker, n_boot=10)
    assert router.backend is marker
    d = rob.results[0].to_dict()
    assert d["diagnostics"] == {"texts": 2 + 7}  # originals and variants in one batch
    assert d["rho"] == pytest.approx(7 / 12)
    given = BackendRouter(backend="local:x")
    given.backend = "own"
    robustness(table, [given], variants, backend=marker, n_boot=10)
    assert given.backend == "own"  # a router given its own backend keeps it


def test_argmax_tie_break_uses_latency_only_where_both_sides_have_it() -> None:
    """SPEC 4's oracle breaks ties by latency: q1's optimal {A, B} gives B (faster) with latency. Variants' argmax
    follows their own latency; when the outcomes lack latency, neither side uses it."""
    base, variants = _tiny()
    lat = np.ones((6, 3), dtype=np.float32)
    lat[5] = [2, 1, 1]  # q1: B is fastest among its optimal A, B
    table = RoutingTable.from_arrays(base.score, actors=base.actor_names, query_ids=base.queries.ids.tolist(),
                                     text=base.queries.text.tolist(), split=base.queries.split.tolist(),
                                     latency_s=lat)
    plain = _outcomes()
    # variant latency (A, B, C): A fastest everywhere
    vlat = np.tile(np.array([3, 1, 0.5, 2], dtype=np.float32), (plain.n_queries, 1))  # columns C, A, D, B
    timed = RoutingTable.from_arrays(plain.score, actors=plain.actor_names, query_ids=plain.queries.ids.tolist(),
                                     latency_s=vlat)
    with_lat = robustness(table, [KeywordRouter()], variants, outcomes=timed, n_boot=20).results[0].invariance
    # originals: q0 -> A, q1 -> B. Variants -> A except q0c1, q1c1 -> B (only B optimal), so changed: q0c1
    # (B vs A), q1c0 (A vs B), q1w0 (all tie -> fastest A, vs B)
    assert with_lat["changed_share_argmax"] == pytest.approx(3 / 6)
    assert with_lat["by_level"]["word"]["changed_share_argmax"] == pytest.approx(1 / 2)
    assert with_lat["changed_share"] == pytest.approx(4 / 6)  # sets ignore latency
    without = robustness(table, [KeywordRouter()], variants, outcomes=plain, n_boot=20).results[0].invariance
    assert without["changed_share_argmax"] == pytest.approx(2 / 6)  # first-index ties on both sides


def test_ratio_intervals_need_the_minimum_of_queries() -> None:
    """Issue 21 ("robustness rho [0.200, 0.500]" on 3 test queries): below MIN_QUERIES no interval, at it one that
    holds the ratio."""
    from routerlab.metrics.bootstrap import MIN_QUERIES, FewQueriesWarning
    from routerlab.protocols.robustness import ratio_intervals

    v, w = np.array([1.0, 0.0, 0.5]), np.array([2.0, 1.0, 1.0])
    with pytest.warns(FewQueriesWarning, match="only 3 evaluated test queries"):
        assert all(math.isnan(x) for x in ratio_intervals({"rho": (v, w)}, 3, 100, 0)["rho"])
    k = MIN_QUERIES // 3
    lo, hi = ratio_intervals({"rho": (np.tile(v, k), np.tile(w, k))}, 3 * k, 200, 0)["rho"]
    assert 0.0 <= lo <= (2.0 + 0.5) / 4.0 <= hi <= 1.0
