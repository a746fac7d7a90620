"""The registered ``robustness`` protocol: the numbers of ``robustness`` and of ``routerlab robustness``, its records
(rho per level and actor, accuracy, the invariance check per level, each under its slice), the variants it makes
(or reads from a file, narrowed by ``levels`` and ``variants``), the seeded sample of ``max_queries`` and the levels
it leaves out with ``skip_unavailable_levels``; and its settings' checks, with the same message from Python, a TOML
table and the command line."""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab.cli import main
from routerlab.data.splits import Split, make_split
from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.perturb import base as perturb_base
from routerlab.perturb.base import NO_BACKEND, perturb_queries
from routerlab.perturb.files import write_variants
from routerlab.protocols.base import get_protocol, run_protocol
from routerlab.protocols.robustness import NoVariants, RobustnessSettings, robustness
from tests.protocols.test_robustness import KeywordRouter, _outcomes, _tiny

ENC = "tfidf:dim=32"
ROUTERS = ["random", "best-single", "knn:k=5"]


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return demo(240, seed=3)


def test_run_gives_robustness_s_and_the_command_s_numbers(table: RoutingTable, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    settings = {"levels": "character,syntax", "variants": 2, "encoder": ENC, "n_boot": 50}
    result = run_protocol("robustness", table, settings, 2, ROUTERS)
    sp = make_split(table, "given", 2)
    variants = perturb_queries(table, np.sort(sp.test), ["character", "syntax"], 2, 2, None)
    direct = robustness(table, ROUTERS, variants, encoder=ENC, seed=2, n_boot=50)
    assert result.artifacts["variants"] == variants
    for mine, theirs in zip(result.native.results, direct.results, strict=True):
        assert (mine.rho, mine.rho_ci, mine.rho_by_level, mine.accuracy_ci) == (
            theirs.rho, theirs.rho_ci, theirs.rho_by_level, theirs.accuracy_ci)
        assert mine.choice.tolist() == theirs.choice.tolist()
    assert result.n_test == direct.n_test == sp.test.size and result.n_train == sp.train.size
    table.save(tmp_path / "t")
    assert main(["robustness", str(tmp_path / "t"), "--routers", ",".join(ROUTERS), "--levels", "character,syntax",
                 "--variants", "2", "--encoder", ENC, "--n-boot", "50", "--seed", "2", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["protocol"] == "robustness" and record["settings"] == result.settings.to_dict()
    assert record["records"] == [r.to_dict() for r in result.records]
    assert [r["rho"] for r in record["results"]] == [r.rho for r in direct.results]


def test_records_carry_every_number_under_its_slice(tmp_path: Path) -> None:
    """The hand-built case of test_robustness (rho 7/12, by level 1/2 and 3/4, the invariance check), read from
    a variants file and an outcomes table as the settings name them."""
    tiny, variants = _tiny()
    write_variants(tmp_path / "v.jsonl", variants.variants)
    _outcomes().save(tmp_path / "out")
    result = run_protocol("robustness", tiny, {"variants_file": str(tmp_path / "v.jsonl"),
                                               "outcomes": str(tmp_path / "out"), "n_boot": 200},
                          0, [KeywordRouter()])
    direct = robustness(tiny, [KeywordRouter()], variants, outcomes=_outcomes(), n_boot=200)
    def numbers(rob: Any) -> str:  # every number of the result (NaN written alike), timings aside
        return json.dumps([{k: v for k, v in r.to_dict().items() if not k.endswith("_seconds")}
                           for r in rob.results])

    assert numbers(result.native) == numbers(direct)
    r = "KeywordRouter()"
    assert result.value(r, "rho") == pytest.approx(7 / 12)
    assert result.value(r, "rho", "level=character") == 0.5 and result.value(r, "rho", "level=word") == 0.75
    assert result.value(r, "rho", "actor=A") == pytest.approx(7 / 12)
    # the router never chose B or C: SPEC 3's 0 stays in the native result, but no record claims a measurement
    assert result.native.results[0].rho_by_actor["B"] == 0 and not result.select(r, "rho", "actor=B")
    assert result.value(r, "accuracy") == 1.0
    assert result.value(r, "perturbed_accuracy") == pytest.approx(5 / 6)
    assert result.value(r, "perturbed_accuracy", "level=word") == 0.5
    assert result.value(r, "changed_share") == pytest.approx(4 / 6)
    assert result.value(r, "changed_share_argmax") == pytest.approx(2 / 6)
    assert result.value(r, "rho_invariant") == 1.0 and result.value(r, "rho_all") == pytest.approx(7 / 12)
    assert result.value(r, "changed_share", "level=word") == 1.0
    assert result.value(r, "rho_invariant", "level=word") is None  # NaN: no invariant word variant
    (rec,) = result.select(r, "rho", "")
    # 2 test queries: no interval (NaN in the native result, NULL in the record; issue 21)
    assert (rec.ci_low, rec.ci_high) == (None, None) and all(math.isnan(x) for x in direct.results[0].rho_ci)
    assert result.value(r, "perturbed_accuracy_orig") == pytest.approx(5 / 7)
    assert result.value(r, "perturbed_accuracy_orig", "level=word") == pytest.approx(2 / 3)
    assert {x.metric for x in result.records} == {"rho", "kappa_rho", "accuracy", "perturbed_accuracy",
                                                  "perturbed_accuracy_orig", "changed_share",
                                                  "changed_share_argmax", "rho_all", "rho_invariant"}
    # both test queries go to A: collapsed, so kappa_rho is null under every slice rho has
    kappa = result.select(r, "kappa_rho")
    assert {x.slice for x in kappa} == {x.slice for x in result.select(r, "rho")}
    assert all(x.value is None for x in kappa)
    assert {x.slice for x in result.records} == {"", "level=character", "level=word", "actor=A"}
    # the file narrowed by levels and variants: only the character level, its first variant
    one = run_protocol("robustness", tiny, {"variants_file": str(tmp_path / "v.jsonl"), "levels": "character",
                                            "variants": 1, "n_boot": 40}, 0, [KeywordRouter()])
    assert one.native.levels == ["character"] and one.native.p == 1
    assert one.value(r, "rho") == 1.0  # q0c0 and q1c0 keep actor A
    with pytest.raises(UsageError, match=r"^variants_file: .*v\.jsonl has no variant at level syntax"):
        run_protocol("robustness", tiny, {"variants_file": str(tmp_path / "v.jsonl"), "levels": "word,syntax"}, 0,
                     [KeywordRouter()])


def test_max_queries_is_a_seeded_sample_of_the_evaluable_test_queries(table: RoutingTable) -> None:
    settings = {"levels": ["character"], "variants": 1, "max_queries": 25, "encoder": ENC, "n_boot": 40}
    a = run_protocol("robustness", table, settings, 1, ["knn:k=5"])
    b = run_protocol("robustness", table, settings, 1, ["knn:k=5"])
    c = run_protocol("robustness", table, settings, 2, ["knn:k=5"])
    assert a.n_test == 25 and a.records == b.records
    assert list(a.native.test_ids) == list(b.native.test_ids) != list(c.native.test_ids)
    sp = make_split(table, "given", 1)
    pick = np.sort(np.random.default_rng(1).choice(sp.test.size, 25, replace=False))
    assert list(a.native.test_ids) == table.queries.ids[sp.test[pick]].tolist()
    sampled = Split(sp.train, sp.test[pick], sp.kind, sp.seed, dict(sp.params))
    variants = perturb_queries(table, sampled.test, ["character"], 1, 1, None)
    direct = robustness(table, ["knn:k=5"], variants, split=sampled, encoder=ENC, seed=1, n_boot=40)
    assert a.native.results[0].rho_ci == direct.results[0].rho_ci
    assert a.notes == ["a seeded sample of 25 evaluable test queries"]
    # at or above the number of test queries: every one
    every = run_protocol("robustness", table, {**settings, "max_queries": 10_000}, 1, ["knn:k=5"])
    assert every.n_test == sp.test.size and every.notes == []


def test_similarity_names_the_encoder_that_scores_the_variants(table: RoutingTable) -> None:
    """``similarity = "tfidf"`` scores (and filters the word level's) variants with tf-idf, as perturb_queries does
    when given it; left out, the default encoder does, as before."""
    settings = {"levels": ["character", "word"], "variants": 1, "max_queries": 20, "encoder": ENC, "n_boot": 40}
    tfidf = run_protocol("robustness", table, {**settings, "similarity": "tfidf"}, 0, ["knn:k=5"])
    pset = tfidf.artifacts["variants"]
    assert {str(v.encoder).split(":")[0] for v in pset.variants} == {"tfidf"}
    assert {pset.settings[lv]["similarity_encoder"].split(":")[0] for lv in ("character", "word")} == {"tfidf"}
    sp = make_split(table, "given", 0)
    sampled = np.sort(sp.test[np.sort(np.random.default_rng(0).choice(sp.test.size, 20, replace=False))])
    direct = perturb_queries(table, sampled, ["character", "word"], 1, 0, None, similarity="tfidf")
    assert pset.variants == direct.variants
    default = run_protocol("robustness", table, settings, 0, ["knn:k=5"]).artifacts["variants"]
    assert default.variants == perturb_queries(table, sampled, ["character", "word"], 1, 0, None).variants


def test_unavailable_levels_stop_the_run_or_are_left_out(table: RoutingTable, monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    real = perturb_base.perturb_queries

    def broken_word(t: RoutingTable, positions: Any, levels: Any, *args: Any, **kwargs: Any) -> Any:
        if "word" in levels:
            raise UsageError("WordNet 3.0 not found at /nowhere")
        return real(t, positions, levels, *args, **kwargs)

    monkeypatch.setattr(perturb_base, "perturb_queries", broken_word)
    base = {"levels": "character,word,paraphrase", "variants": 1, "encoder": ENC, "n_boot": 40}
    with pytest.raises(UsageError, match=r"WordNet 3\.0 not found"):
        run_protocol("robustness", table, base, 0, ["knn:k=5"])
    result = run_protocol("robustness", table, {**base, "skip_unavailable_levels": True}, 0, ["knn:k=5"])
    assert result.native.levels == ["character"]
    assert result.artifacts["skipped_levels"] == {"word": "UsageError: WordNet 3.0 not found at /nowhere",
                                                  "paraphrase": NO_BACKEND}
    assert result.notes == ["level word left out: UsageError: WordNet 3.0 not found at /nowhere",
                            f"level paraphrase left out: {NO_BACKEND}"]
    assert result.native.perturbations["not_generated"] == {}
    with pytest.raises(NoVariants) as err:
        run_protocol("robustness", table, {**base, "levels": "word,rambling", "skip_unavailable_levels": True}, 0,
                     ["knn:k=5"])
    assert set(err.value.skipped) == {"word", "rambling"}


@pytest.mark.parametrize("values,message", [
    ({"variants": 0}, "variants: must be an integer in [1, 100], got 0"),
    ({"variants": 2.0}, "variants: must be an integer, got a number (2.0): write 2"),
    ({"ask": 101}, "ask: must be an integer in [1, 100], got 101"),
    ({"max_queries": 0}, "max_queries: must be an integer >= 1, got 0"),
    ({"levels": "character,nope"}, "levels: unknown level 'nope'; known: "),
    ({"levels": ["word", "word"]}, "levels: lists 'word' twice"),
    ({"levels": "rambling"}, "levels: rambling: written by an LLM, and no backend is given"),
    ({"variants_file": "/nonexistent/v.jsonl"}, "variants_file: /nonexistent/v.jsonl: no such file or directory"),
    ({"outcomes": "/nonexistent/t"}, "outcomes: /nonexistent/t: no such file or directory"),
    ({"backend": "nosuch"}, "backend: 'nosuch': write KIND:MODEL"),
    ({"backend": "nosuch:m"}, "backend: 'nosuch:m': unknown backend kind 'nosuch'"),
    ({"skip_unavailable_levels": "yes"}, "skip_unavailable_levels: must be true or false"),
    ({"split": "random:2"}, "split: bad split 'random:2'"),
    ({"similarity": "nosuch"}, "similarity: unknown encoder 'nosuch'"),
    ({"similarity": "precomputed:path=x.npy"}, "similarity: precomputed:path=x.npy: the similarity is measured with "
                                               "a text encoder, minilm or tfidf"),
    ({"level": "word"}, "level: not a setting of protocol robustness; did you mean 'levels'?"),
])
def test_a_bad_setting_is_one_line_from_python_toml_and_the_command_line(values: dict[str, Any], message: str
                                                                        ) -> None:
    key = next(iter(values))
    from_toml = tomllib.loads(f"{key} = {json.dumps(values[key])}")
    for source in (values, from_toml):
        with pytest.raises(UsageError) as err:
            RobustnessSettings.from_mapping(source)
        assert str(err.value).startswith(message), str(err.value)
    with pytest.raises(UsageError) as err:
        run_protocol("robustness", demo(60), values, 0, ["knn"])
    assert str(err.value).startswith(message)
    if key in RobustnessSettings.names():
        option = "--" + key.replace("_", "-")
        with pytest.raises(UsageError) as err:
            RobustnessSettings.from_cli(**values)
        assert str(err.value).startswith(message.replace(f"{key}:", f"{option}:", 1)), str(err.value)


def test_a_router_that_asks_an_llm_needs_a_backend(table: RoutingTable) -> None:
    with pytest.raises(UsageError, match=r"^backend: router prompted asks an LLM: give one"):
        run_protocol("robustness", table, {"levels": "character"}, 0, ["knn", "prompted"])


def test_levels_all_and_described_settings() -> None:
    assert RobustnessSettings(levels="all").levels == perturb_base.LEVELS
    assert RobustnessSettings(levels=("all",), backend="local:smollm2-135m").levels == perturb_base.LEVELS
    rows = {d["name"]: d for d in get_protocol("robustness").describe()["settings"]}
    assert rows["levels"]["type"] == "list of str or none" and rows["levels"]["default"] is None
    assert rows["variants_file"]["option"] == "--variants-file" and rows["ask"]["default"] == 10
    assert all(d["help"] for d in rows.values())
    assert math.isclose(RobustnessSettings().n_boot, 1000)
