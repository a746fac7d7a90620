"""``routerlab perturb``, ``routerlab robustness`` and ``routerlab collect --variants`` end to end (SPEC 3).

A tiny test-only level (``casefold-test``: flips the case of one word) has a hand-known property: the tfidf encoder
lowercases, so its variants encode exactly as their originals and every deterministic router keeps its choice
(rho = 1), while the seeded random router draws again (rho near 1/N). The real model test collects SmolLM2's
outcomes of hand-written variants and checks the invariance numbers against the collected tables by hand.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab.cli import main
from routerlab.data.store import load
from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.llm import base as llm_base
from routerlab.llm.base import Backend, BackendSpec, register_backend
from routerlab.llm.cache import CachedBackend, CallCache
from routerlab.perturb import base as perturb_base
from routerlab.perturb.base import Perturber, level_names, register_level
from routerlab.perturb.files import read_variants
from tests import run_main
from tests.llm.test_collect import ScriptedBackend

TEST_LEVEL = "casefold-test"


class CaseFlip(Perturber):
    """Test-only level: each candidate flips the case of one seeded word (meaning and tfidf features kept)."""

    def candidates(self, texts: Sequence[str], p: int, rngs: Sequence[np.random.Generator]) -> list[list[str]]:
        out = []
        for text, rng in zip(texts, rngs, strict=True):
            words = text.split()
            cands = []
            for i in rng.permutation(len(words))[: 2 * p].tolist():
                flipped = list(words)
                flipped[i] = words[i].upper() if words[i] != words[i].upper() else words[i].lower()
                cands.append(" ".join(flipped))
            out.append(cands)
        return out


@pytest.fixture(autouse=True)
def test_level() -> Iterator[str]:
    level_names()  # load the built-in levels first, so the test level joins a loaded registry
    register_level(TEST_LEVEL)(CaseFlip)
    yield TEST_LEVEL
    perturb_base._REGISTRY.remove(TEST_LEVEL)


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rob") / "demo"
    demo(n_queries=240, seed=3).save(path)
    return path


run = run_main


def run_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, err = run([*args, "--json"], capsys)
    assert code == 0, err
    record: dict[str, Any] = json.loads(out)
    return record


# ----------------------------------------------------------------------------------------------- perturb


def test_perturb_writes_the_variants_file(table_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    out = tmp_path / "sub" / "v.jsonl"
    record = run_json(["perturb", str(table_dir), "--levels", f"{TEST_LEVEL},paraphrase,rambling", "--variants", "3",
                       "--seed", "7", "-o", str(out)], capsys)
    table = load(table_dir)
    test_ids = {str(q) for q, s in zip(table.queries.ids, table.queries.split, strict=True) if s == "test"}
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines and all(set(x) == {"query_id", "level", "variant", "text", "similarity", "encoder"} for x in lines)
    assert all(-1 <= x["similarity"] <= 1 and x["encoder"] == record["settings"][TEST_LEVEL]["similarity_encoder"]
               for x in lines)
    assert {x["query_id"] for x in lines} <= test_ids and {x["level"] for x in lines} == {TEST_LEVEL}
    assert record["n_queries"] == len(test_ids) and record["n_variants"] == len(lines) and record["p"] == 3
    level = record["levels"][TEST_LEVEL]
    assert level["queries"] == len(test_ids) and level["variants"] == len(lines)
    per_query: dict[str, int] = {}
    for x in lines:
        per_query[x["query_id"]] = per_query.get(x["query_id"], 0) + 1
    assert max(per_query.values()) == 3 and level["short"] == sum(c < 3 for c in per_query.values()) + (
        len(test_ids) - len(per_query))
    # no backend: the LLM levels are reported, never faked
    for lv in ("paraphrase", "rambling"):
        assert record["levels"][lv] == {"not_generated": perturb_base.NO_BACKEND}
    # every variant differs from its original by the case of one word only
    text = dict(zip(map(str, table.queries.ids), map(str, table.queries.text), strict=True))
    for x in lines:
        a, b = text[x["query_id"]].split(), x["text"].split()
        assert len(a) == len(b) and sum(u != v for u, v in zip(a, b, strict=True)) == 1
        assert x["text"].lower() == " ".join(a).lower()
    # the same seed gives the same file; the text summary names every level
    again = tmp_path / "again.jsonl"
    code, text_out, _ = run(["perturb", str(table_dir), "--levels", f"{TEST_LEVEL},paraphrase", "--variants", "3",
                             "--seed", "7", "-o", str(again)], capsys)
    assert code == 0 and again.read_text() == out.read_text()
    assert "paraphrase     not generated: no LLM backend" in text_out and f"wrote {again}" in text_out


def test_perturb_parts(table_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = load(table_dir)
    n_train = int((table.queries.split == "train").sum())
    for part, n in (("train", n_train), ("all", table.n_queries)):
        record = run_json(["perturb", str(table_dir), "--levels", TEST_LEVEL, "--variants", "1", "--part", part,
                           "--encoder", "tfidf", "-o", str(tmp_path / f"{part}.jsonl")], capsys)  # parts, not scores
        assert record["n_queries"] == n and record["part"] == part


@pytest.mark.parametrize(("extra", "message"), [
    (["--levels", "nope"], "unknown level 'nope'"),
    (["--levels", ""], "write a comma list of levels"),
    (["--levels", f"{TEST_LEVEL},{TEST_LEVEL}"], "a level is named twice"),
    (["--variants", "0"], "--variants"),
    (["--variants", "101"], "--variants"),
    (["--variants", "nan"], "--variants"),
    (["--seed", "-1"], "--seed"),
    (["--part", "val"], "--part must be one of test, train, all"),
    (["--backend", ":x"], "--backend"),
    (["--backend", "nosuch:model"], "unknown backend kind 'nosuch'"),
    (["--split", "random:2"], "test fraction must be in (0, 1)"),
    (["--levels", "paraphrase,rambling"], "written by an LLM, and no --backend is given"),
])
def test_perturb_bad_options_are_one_line(table_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          extra: list[str], message: str) -> None:
    out = tmp_path / "v.jsonl"
    code, _, err = run(["perturb", str(table_dir), "--levels", TEST_LEVEL, "-o", str(out), *extra], capsys)
    assert code == 2 and message in err and err.count("\n") == 1 and err.startswith("routerlab: error:"), err
    assert not out.exists()


def test_perturb_bad_outputs_are_one_line(table_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    (tmp_path / "file").write_text("x")
    cases = [(tmp_path, "is a directory"), (tmp_path / "v.txt", "ends in .jsonl"),
             (tmp_path / "file" / "v.jsonl", "which is a file"),
             (tmp_path / "missing-table", "")]
    for out, message in cases[:3]:
        code, _, err = run(["perturb", str(table_dir), "--levels", TEST_LEVEL, "-o", str(out)], capsys)
        assert code == 2 and message in err and err.count("\n") == 1, err
    code, _, err = run(["perturb", str(tmp_path / "nope"), "--levels", TEST_LEVEL, "-o", str(tmp_path / "v.jsonl")],
                       capsys)
    assert code == 2 and "nope" in err and err.count("\n") == 1, err


# ------------------------------------------------------------------------------------ collect --variants

QUESTIONS = [
    ("t1", "Which is a fruit?", ["stone", "apple", "chair"], "B", "train"),
    ("t2", "Which is a colour?", ["red", "dog", "car", "run"], "A", "train"),
    ("t3", "Which is a number?", ["cat", "seven", "sky", "hat"], "B", "train"),
    ("t4", "Which animal barks?", ["dog", "fish", "tree", "cup"], "A", "train"),
    ("t5", "Which is a metal?", ["wood", "glass", "iron", "paper"], "C", "train"),
    ("t6", "Which is a planet?", ["Mars", "Paris", "milk", "shoe"], "A", "train"),
    ("q1", "Which flies?", ["rock", "fish", "bird", "tree"], "C", "test"),
    ("q2", "Which is frozen water?", ["steam", "sand", "oil", "ice"], "D", "test"),
    ("q3", "Which is a vegetable?", ["carrot", "stone", "car", "pen"], "A", "test"),
]
SCRIPT = {text: gold for _, text, _, gold, _ in QUESTIONS}  # the scripted actor knows every original
VARIANTS = [
    ("q1", "paraphrase", "Which of these can fly?"),
    ("q1", "character", "Whcih flies?"),
    ("q2", "paraphrase", "Which one is water that has frozen?"),
    ("q2", "character", "Which is frozen watr?"),
    ("q3", "paraphrase", "Which of these is a vegetable?"),
    ("q3", "character", "Which is a vegetabel?"),
]


@pytest.fixture()
def quiz(tmp_path: Path) -> Path:
    path = tmp_path / "quiz.jsonl"
    path.write_text("".join(json.dumps({"id": i, "question": q, "choices": c, "answer": a, "dataset": "quiz",
                                        "split": s}) + "\n" for i, q, c, a, s in QUESTIONS))
    return path


@pytest.fixture()
def variants_file(tmp_path: Path) -> Path:
    path = tmp_path / "variants.jsonl"
    path.write_text("".join(json.dumps({"query_id": q, "level": lv, "text": t}) + "\n" for q, lv, t in VARIANTS))
    return path


@pytest.fixture()
def scripted_kind() -> Iterator[str]:
    class Scripted(ScriptedBackend):
        """Answers the originals right (keyed by the question's first line); a variant is not in the script,
        so its logits peak at A."""

        def __init__(self, spec: BackendSpec, *, cache_dir: Path | None = None) -> None:
            super().__init__(spec, cache_dir=cache_dir, script=SCRIPT)

    register_backend("rob-scripted")(Scripted)
    yield "rob-scripted"
    llm_base._REGISTRY.remove("rob-scripted")


def test_collect_variants_asks_the_variants(quiz: Path, variants_file: Path, scripted_kind: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "vt"
    code, text, err = run(["collect", str(quiz), "--variants", str(variants_file), "-a", f"s={scripted_kind}:m",
                           "--timing-probes", "0", "-o", str(out), "--cache-dir", str(tmp_path / "c")], capsys)
    assert code == 0, err
    assert "asked 6 variants of 3 questions" in text
    table = load(out)
    assert table.queries.ids.tolist() == [f"{q}#{lv}#0" for q, lv, _ in VARIANTS]
    assert table.queries.text.tolist() == [t for _, _, t in VARIANTS]
    extra = table.queries.extra
    assert extra["variant_of"].tolist() == [q for q, _, _ in VARIANTS]
    assert extra["level"].tolist() == [lv for _, lv, _ in VARIANTS]
    assert [int(x) for x in extra["variant"].tolist()] == [0] * 6
    assert {"variant_of", "level", "variant", "gold"} <= set(table.queries.hidden)  # never seen by a router
    gold = {i: a for i, _, _, a, _ in QUESTIONS}
    assert extra["gold"].tolist() == [gold[q] for q, _, _ in VARIANTS]  # the original's options and gold
    assert table.queries.split.tolist() == ["test"] * 6
    # the script does not know a variant's text: its logits peak at A, right only where the gold is A (q3)
    assert table.score[:, 0].tolist() == [0, 0, 0, 0, 1, 1]
    meta = table.meta["collect"]
    assert meta["variants"] == str(variants_file) and meta["n_variants_available"] == 6 and meta["n_originals"] == 3


def test_collect_variants_limit_samples_variants(quiz: Path, variants_file: Path, scripted_kind: str,
                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "vt"
    assert main(["collect", str(quiz), "--variants", str(variants_file), "-a", f"s={scripted_kind}:m", "--limit",
                 "2", "--seed", "4", "--timing-probes", "0", "-o", str(out),
                 "--cache-dir", str(tmp_path / "c")]) == 0
    table = load(out)
    # stratified by level: one paraphrase and one character variant, in file order
    assert table.n_queries == 2 and sorted(table.queries.extra["level"].tolist()) == ["character", "paraphrase"]
    keys = [f"{q}#{lv}#0" for q, lv, _ in VARIANTS]
    ids = table.queries.ids.tolist()
    assert ids == sorted(ids, key=keys.index)


def test_collect_variants_bad_files(quiz: Path, scripted_kind: str, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"query_id": "q1", "level": "character", "text": "Whcih flies?"}) + "\n\n"
                   + json.dumps({"query_id": "zz", "level": "character", "text": "Which?"}) + "\n")
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"query_id": "q1", "level": "character"}) + "\n")
    cases = [(bad, f"{bad}, row 3, field 'query_id': query 'zz' is not among the 9 questions of the source"),
             (broken, f"{broken}, row 1, field 'text'"), (tmp_path / "none.jsonl", "none.jsonl")]
    for path, message in cases:
        code, _, err = run(["collect", str(quiz), "--variants", str(path), "-a", f"s={scripted_kind}:m",
                            "-o", str(tmp_path / "o")], capsys)
        assert code == 2 and message in err and err.count("\n") == 1, err
        assert not (tmp_path / "o").exists()


def _borrow_smollm2(smollm2: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """``load_backend`` gives the session's SmolLM2 for local:smollm2-135m (behind a fresh call cache), other
    kinds as usual."""
    inner = smollm2.inner if isinstance(smollm2, CachedBackend) else smollm2
    real = llm_base.load_backend

    class Borrowed(CachedBackend):
        def close(self) -> None:  # the session fixture owns the model
            pass

    def load_backend(spec: BackendSpec, *, cache_dir: Path | None = None, cache: bool = True) -> Backend:
        if spec.kind == "local":
            assert spec.model == "smollm2-135m"
            return Borrowed(inner, CallCache(cache_dir))
        return real(spec, cache_dir=cache_dir, cache=cache)

    monkeypatch.setattr(llm_base, "load_backend", load_backend)


def _optimal_set(row: Mapping[str, float]) -> frozenset[str]:
    """SPEC 4's selection vector for 0/1 scores: the actors scoring the row maximum, every actor when none > 0."""
    best = max(row.values())
    return frozenset(a for a, v in row.items() if best <= 0 or v >= 0.95 * best)


def test_collect_variants_and_invariance_with_smollm2(
    smollm2: Backend, quiz: Path, variants_file: Path, scripted_kind: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """Originals and 6 variants through SmolLM2 and the scripted actor; robustness --outcomes tests invariance,
    and its changed shares equal the ones computed here from the two collected tables."""
    _borrow_smollm2(smollm2, monkeypatch)
    actors = f"smol=local:smollm2-135m,threads=1,s={scripted_kind}:m"
    base, outs = tmp_path / "orig", tmp_path / "outcomes"
    # the variants' questions come from the collected table itself (its gold and choices columns), as documented
    for args in ([str(quiz)], [str(base), "--variants", str(variants_file)]):
        code, _, err = run(["collect", *args, "-a", actors, "--timing-probes", "0", "--cache-dir",
                            str(tmp_path / "c"), "-o", str(base if len(args) == 1 else outs)], capsys)
        assert code == 0, err
    original, outcome = load(base), load(outs)
    assert outcome.n_queries == 6 and outcome.actor_names == ["smol", "s"]
    assert set(np.unique(outcome.score).tolist()) <= {0.0, 1.0}
    # the prompted router asks the --backend model (SmolLM2) to route originals and variants
    record = run_json(["robustness", str(base), "--routers", "best-single,knn:k=3,prompted", "--variants-file",
                       str(variants_file), "--outcomes", str(outs), "--n-boot", "40", "--backend",
                       "local:smollm2-135m,threads=1", "--cache-dir", str(tmp_path / "c")], capsys)
    assert [r["router"] for r in record["results"]] == ["best-single", "knn:k=3", "prompted"]
    assert record["invariance_tested"] is True and "invariance_note" not in record
    rows = {str(q): dict(zip(original.actor_names, map(float, original.score[i]), strict=True))
            for i, q in enumerate(original.queries.ids)}
    vrows = {str(q): dict(zip(outcome.actor_names, map(float, outcome.score[i]), strict=True))
             for i, q in enumerate(outcome.queries.ids)}
    changed = {lv: [_optimal_set(vrows[f"{q}#{lv}#0"]) != _optimal_set(rows[q]) for q, lv2, _ in VARIANTS
                    if lv2 == lv] for lv in ("paraphrase", "character")}
    for result in record["results"]:
        inv = result["invariance"]
        assert inv["tested"] is True and inv["n_known"] == 6
        assert inv["changed_share"] == pytest.approx(sum(map(sum, changed.values())) / 6)
        for lv, flags in changed.items():
            assert inv["by_level"][lv]["changed_share"] == pytest.approx(sum(flags) / len(flags))
        assert result["perturbed_accuracy"] is not None
    best = next(r for r in record["results"] if r["router"] == "best-single")
    assert best["rho"] == 1.0  # a fixed router keeps every variant with its original (SPEC 3 anchor)


# ------------------------------------------------------------------------------------------- robustness

RESULT_FIELDS = {"router", "rho", "rho_ci", "rho_by_level", "rho_by_level_ci", "rho_by_actor", "rho_by_actor_ci",
                 "accuracy", "accuracy_ci", "perturbed_accuracy", "perturbed_accuracy_ci", "invariance"}
ROUTERS = "random,best-single,knn:k=5"


def _numbers(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The results without timings (the only fields that may differ between two identical runs)."""
    return [{k: v for k, v in r.items() if k not in ("fit_seconds", "score_seconds")} for r in record["results"]]


def test_robustness_json_on_the_demo(table_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = run_json(["robustness", str(table_dir), "--routers", ROUTERS, "--levels", f"{TEST_LEVEL},paraphrase",
                       "--variants", "2", "--n-boot", "40", "--seed", "1"], capsys)
    table = load(table_dir)
    n_test = int((table.queries.split == "test").sum())
    assert record["n_test"] == n_test and record["p"] == 2 and record["levels"] == [TEST_LEVEL]
    assert record["data"]["content_hash"] == table.content_hash
    assert record["invariance_tested"] is False and "untested" in record["invariance_note"]
    assert record["perturbations"]["not_generated"] == {"paraphrase": perturb_base.NO_BACKEND}
    by_router = {r["router"]: r for r in record["results"]}
    assert set(by_router) == set(ROUTERS.split(","))
    for r in record["results"]:
        assert set(r) >= RESULT_FIELDS, RESULT_FIELDS - set(r)
        assert set(r["rho_by_level"]) == {TEST_LEVEL} and set(r["rho_by_actor"]) == set(table.actor_names)
        assert r["perturbed_accuracy"] is None and r["invariance"]["tested"] is False
        lo, hi = r["rho_ci"]
        assert lo is None or lo <= r["rho"] <= hi
    # tfidf lowercases: a case flip encodes as its original, so deterministic routers keep every choice ...
    assert by_router["best-single"]["rho"] == 1.0 and by_router["knn:k=5"]["rho"] == 1.0
    assert by_router["knn:k=5"]["rho_by_level"][TEST_LEVEL] == 1.0
    # ... and the random router draws again: rho near 1/N (SPEC 3 anchor), far below 1
    assert abs(by_router["random"]["rho"] - 1 / table.n_actors) < 0.1


def test_robustness_variants_file_round_trip(table_dir: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """perturb -> file -> robustness --variants-file gives the numbers of generating in-process with the seed."""
    common = ["--routers", ROUTERS, "--n-boot", "40", "--seed", "5"]
    generated = run_json(["robustness", str(table_dir), *common, "--levels", TEST_LEVEL, "--variants", "3"], capsys)
    vfile = tmp_path / "v.jsonl"
    assert run(["perturb", str(table_dir), "--levels", TEST_LEVEL, "--variants", "3", "--seed", "5",
                 "-o", str(vfile)], capsys)[0] == 0
    read = run_json(["robustness", str(table_dir), *common, "--variants-file", str(vfile)], capsys)
    assert _numbers(read) == _numbers(generated)
    assert read["perturbations"]["n_variants"] == generated["perturbations"]["n_variants"]
    # --variants P with a file keeps the first P of each query and level: the same as a file of those lines
    one = run_json(["robustness", str(table_dir), *common, "--variants-file", str(vfile), "--variants", "1"],
                   capsys)
    firsts = tmp_path / "firsts.jsonl"
    firsts.write_text("".join(x + "\n" for x in vfile.read_text().splitlines() if json.loads(x)["variant"] == 0))
    by_hand = run_json(["robustness", str(table_dir), *common, "--variants-file", str(firsts)], capsys)
    assert one["p"] == by_hand["p"] == 1 and _numbers(one) == _numbers(by_hand)
    assert one["perturbations"]["n_variants"] == len(firsts.read_text().splitlines())


def test_robustness_outcomes_table_by_hand(table_dir: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Outcomes of the variants equal to their originals' except where hand-edited: the changed share is the
    count of edited variants whose optimal set moved over the variants with outcomes."""
    vfile = tmp_path / "v.jsonl"
    assert run(["perturb", str(table_dir), "--levels", TEST_LEVEL, "--variants", "2", "-o", str(vfile)], capsys)[0] == 0
    table = load(table_dir)
    pset = read_variants(vfile)
    row = {str(q): i for i, q in enumerate(table.queries.ids)}
    src = np.array([row[v.query_id] for v in pset.variants])
    score = np.asarray(table.score, dtype=np.float64)[src].copy()
    # give the first 10 variants a single new optimum: actor k is the only one right, k not optimal before
    flipped = 0
    for r in range(10):
        orig = score[r]
        k = int(np.argmin(orig))
        if orig[k] < orig.max():
            score[r] = 0.0
            score[r, k] = 1.0
            flipped += 1
    outcomes = RoutingTable.from_arrays(score, actors=table.actors, query_ids=[v.key for v in pset.variants],
                                        text=[v.text for v in pset.variants])
    outcomes.save(tmp_path / "outcomes")
    record = run_json(["robustness", str(table_dir), "--routers", "best-single", "--variants-file", str(vfile),
                       "--outcomes", str(tmp_path / "outcomes"), "--n-boot", "40"], capsys)
    assert record["invariance_tested"] is True
    inv = record["results"][0]["invariance"]
    assert inv["n_known"] == len(pset.variants) and flipped > 0
    assert inv["changed_share"] == pytest.approx(flipped / len(pset.variants))
    assert inv["by_level"][TEST_LEVEL]["changed_share"] == pytest.approx(flipped / len(pset.variants))


@pytest.mark.parametrize(("extra", "message"), [
    (["--routers", "nosuch"], "nosuch"),
    (["--routers", ""], "--routers needs at least one router"),
    (["--levels", "nope"], "unknown level 'nope'"),
    (["--variants", "0"], "--variants"),
    (["--variants", "1000"], "--variants"),
    (["--n-boot", "39"], "--n-boot"),
    (["--n-boot", "nan"], "--n-boot"),
    (["--seed", "-3"], "--seed"),
    (["--backend", ""], "--backend"),
    (["--variants-file", "/nonexistent/v.jsonl"], "--variants-file: /nonexistent/v.jsonl: no such file"),
    (["--outcomes", "/nonexistent/t"], "--outcomes: /nonexistent/t: no such file"),
    (["--ask", "0"], "--ask: must be an integer in [1, 100], got 0"),
    (["--max-queries", "0"], "--max-queries: must be an integer >= 1, got 0"),
    (["--levels", "character,character"], "--levels: lists 'character' twice"),
    (["--encoder", "precomputed:path=x.npy"], ""),
    (["--split", "ood:nope"], "nope"),
    (["--levels", "rambling"], "--levels: rambling: written by an LLM, and no backend is given"),
    (["--routers", "knn,prompted"], "--backend: router prompted asks an LLM: give one"),
    (["--routers", "prompted:backend=nosuch:m"], "unknown backend kind 'nosuch'"),
])
def test_robustness_bad_options_are_one_line(table_dir: Path, capsys: pytest.CaptureFixture[str],
                                             extra: list[str], message: str) -> None:
    code, _, err = run(["robustness", str(table_dir), "--levels", TEST_LEVEL, "--n-boot", "40", *extra], capsys)
    assert code == 2 and message in err and err.count("\n") == 1 and err.startswith("routerlab: error:"), err


def test_robustness_bad_files_are_one_line(table_dir: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"query_id": "x", "level": TEST_LEVEL, "text": "hi"}) + "\n" + "{oops\n")
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"query_id": "not-a-query", "level": TEST_LEVEL, "text": "hi"}) + "\n")
    good = tmp_path / "good.jsonl"
    assert run(["perturb", str(table_dir), "--levels", TEST_LEVEL, "--variants", "1", "-o", str(good)], capsys)[0] == 0
    (tmp_path / "file").write_text("x")
    cases = [
        (["--variants-file", str(bad)], f"{bad}, row 2: invalid JSON"),
        (["--variants-file", str(other)], "none of its 1 variants is of a test query"),
        (["--variants-file", str(good), "--levels", "paraphrase"], "no variant at level paraphrase"),
        (["--outcomes", str(bad)], str(bad)),
        (["--levels", TEST_LEVEL, "-o", str(tmp_path / "file")], "is an existing file"),
        (["--levels", TEST_LEVEL, "-o", str(tmp_path / "file" / "sub")], "which is a file"),
    ]
    for args, message in cases:
        code, _, err = run(["robustness", str(table_dir), "--n-boot", "40", *args], capsys)
        assert code == 2 and message in err and err.count("\n") == 1, (args, err)


def test_robustness_writes_its_outputs_and_the_variants(table_dir: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """-o: the report's files plus variants.jsonl, which repeats the run with --variants-file."""
    out = tmp_path / "rob"
    args = ["robustness", str(table_dir), "--routers", ROUTERS, "--n-boot", "40", "--seed", "2"]
    code, text, err = run([*args, "--levels", f"{TEST_LEVEL},rambling", "--variants", "2", "-o", str(out)], capsys)
    assert code == 0, err
    names = ["robustness.json", "rho_by_level.png", "accuracy_vs_rho.png", "robustness.md", "variants.jsonl"]
    for name in names:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
        assert f"wrote {out / name}" in text
    assert "knn:k=5" in text and "untested" in text  # the terminal table and the invariance status
    assert f"level rambling: {perturb_base.NO_BACKEND}" in text
    saved = json.loads((out / "robustness.json").read_text())
    assert saved["invariance_tested"] is False and saved["p"] == 2
    again = run_json([*args, "--variants-file", str(out / "variants.jsonl")], capsys)
    assert _numbers(again) == _numbers(saved)


def test_robustness_on_a_real_table_with_the_offline_levels(
    real_table: Callable[[str], RoutingTable], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """LLMRouter's real queries at the three offline levels: every level generated, the LLM levels reported as not
    generated, a fixed router at rho 1, and knn on tfidf at most 1 with per-level values in [0, 1]. The variants are
    scored with tf-idf (none of this depends on the encoder; MiniLM over every variant took 1-3 minutes here): the
    README walkthrough runs the same command on this table with the default MiniLM."""
    offline = [lv for lv in ("character", "word", "syntax") if lv in level_names()]
    if len(offline) < 3:
        pytest.skip(f"offline levels registered: {offline}")
    table_path = tmp_path / "llmrouter"
    real_table("llmrouter").save(table_path)
    record = run_json(["robustness", str(table_path), "--routers", "best-single,knn:k=10", "--levels", "all",
                       "--variants", "1", "--n-boot", "40", "--split", "random:0.05", "--similarity", "tfidf"], capsys)
    assert record["levels"] == offline
    assert set(record["perturbations"]["not_generated"]) == {"paraphrase", "rambling"}
    by_router = {r["router"]: r for r in record["results"]}
    assert by_router["best-single"]["rho"] == 1.0
    knn = by_router["knn:k=10"]
    assert 0.0 <= knn["rho"] <= 1.0 and set(knn["rho_by_level"]) == set(offline)
    assert all(0.0 <= v <= 1.0 for v in knn["rho_by_level"].values())
    assert record["n_test"] > 100


def test_perturb_with_a_backend_writes_the_llm_levels(smollm2: Backend, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """--backend reaches the LLM levels: SmolLM2 paraphrases the test query (the offline level runs beside it)."""
    _borrow_smollm2(smollm2, monkeypatch)
    texts = ["Which planet is closest to the sun?", "What is the capital city of France?",
             "Which animal is known as the king of the jungle?", "What colour is a ripe banana?"]
    RoutingTable.from_arrays(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 1.0]]), actors=["a", "b"],
                             query_ids=["p1", "p2", "p3", "p4"], text=texts,
                             split=["train", "train", "train", "test"]).save(tmp_path / "t")
    out = tmp_path / "v.jsonl"
    record = run_json(["perturb", str(tmp_path / "t"), "--levels", f"{TEST_LEVEL},paraphrase", "--variants", "2",
                       "--backend", "local:smollm2-135m,threads=1", "--cache-dir", str(tmp_path / "c"),
                       "--ask", "3", "-o", str(out)], capsys)
    para = record["levels"]["paraphrase"]
    assert record["settings"]["paraphrase"]["ask"] == 3
    assert "not_generated" not in para and para["queries"] == 1
    assert record["backend"].startswith("local:smollm2-135m") and "paraphrase" in record["settings"]
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    made = [x for x in lines if x["level"] == "paraphrase"]
    assert 1 <= len(made) == para["variants"] <= 2 and {x["query_id"] for x in made} == {"p4"}
    assert all(x["text"] not in texts for x in made)


def test_variant_questions_joins_by_query_id() -> None:
    """Any object with query_id/level/variant/text/key is a variant (llm sits below perturb); the question keeps
    its original's options, gold, dataset and split, with the variant's text and key."""
    from dataclasses import dataclass

    from routerlab.errors import DataError
    from routerlab.llm.questions import Question, variant_questions

    @dataclass(frozen=True)
    class Own:
        query_id: str
        level: str
        variant: int
        text: str

        @property
        def key(self) -> str:
            return f"{self.query_id}#{self.level}#{self.variant}"

    qs = [Question("a", "Which is red?", "colours", "test", ("sky", "blood"), "B", "mc"),
          Question("b", "6 x 7?", "maths", "train", None, "42", "short")]
    got = variant_questions(qs, [Own("b", "word", 1, "Six times seven?"), Own("a", "character", 0, "Whcih is red?")],
                            source="mine.jsonl")
    assert got == [Question("b#word#1", "Six times seven?", "maths", "train", None, "42", "short"),
                   Question("a#character#0", "Whcih is red?", "colours", "test", ("sky", "blood"), "B", "mc")]
    with pytest.raises(DataError, match=r"mine.jsonl, row 7, field 'query_id': query 'c' is not among the 2"):
        variant_questions(qs, [Own("a", "word", 0, "x"), Own("c", "word", 0, "y")], source="mine.jsonl",
                          lines=[3, 7])


def test_a_json_mapping_of_variants_is_read_like_the_lines_it_stands_for(table_dir: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A hand-made ``.json`` file {query_id: {level: [texts]}} is the same variants set as the JSON lines written by
    ``perturb``, and gives the same robustness numbers; a wrong shape is one line naming the key."""
    from routerlab.errors import DataError
    from routerlab.perturb.files import read_variants

    lines_file = tmp_path / "v.jsonl"
    run_json(["perturb", str(table_dir), "--levels", TEST_LEVEL, "--variants", "2", "--encoder", "tfidf",
              "-o", str(lines_file)], capsys)
    mapping: dict[str, dict[str, list[str]]] = {}
    for line in lines_file.read_text().splitlines():
        rec = json.loads(line)
        mapping.setdefault(rec["query_id"], {}).setdefault(rec["level"], []).append(rec["text"])
    json_file = tmp_path / "v.json"
    json_file.write_text(json.dumps(mapping))
    def plain(path: Path) -> list[tuple[str, str, int, str]]:  # the mapping has texts only, no similarity
        return [(v.query_id, v.level, v.variant, v.text) for v in read_variants(path).variants]

    assert plain(json_file) == plain(lines_file)
    common = ["robustness", str(table_dir), "--routers", "random,knn", "--n-boot", "40"]
    by_lines = run_json([*common, "--variants-file", str(lines_file)], capsys)
    by_mapping = run_json([*common, "--variants-file", str(json_file)], capsys)
    assert [r["rho"] for r in by_mapping["results"]] == [r["rho"] for r in by_lines["results"]]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"q1": {"word": "not a list"}}))
    with pytest.raises(DataError, match=r"query 'q1', level 'word': expected a list of texts"):
        read_variants(bad)
    code, _, err = run([*common, "--variants-file", str(bad)], capsys)
    assert code == 2 and err.count("\n") == 1 and "q1.word" in err


def test_control_level_end_to_end(table_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """perturb --levels ...,control marks the control rows meaning-changing; robustness reads the mark, reports
    rho at the control level apart (left out of the whole: the deterministic routers' rho is the one without
    control), says the falsifier is untested without outcomes, and -o keeps the marks in variants.jsonl."""
    vfile = tmp_path / "v.jsonl"
    assert run(["perturb", str(table_dir), "--levels", f"{TEST_LEVEL},control", "--variants", "2", "-o",
                str(vfile)], capsys)[0] == 0
    rows = [json.loads(x) for x in vfile.read_text().splitlines()]
    assert {r["level"] for r in rows} == {TEST_LEVEL, "control"}
    assert all(r.get("meaning_changing") is (True if r["level"] == "control" else None) for r in rows)
    out = tmp_path / "rob"
    args = ["robustness", str(table_dir), "--routers", ROUTERS, "--n-boot", "40", "--variants-file", str(vfile)]
    code, text, err = run([*args, "-o", str(out)], capsys)
    assert code == 0, err
    assert "rho control (meaning-changing)" in text and "Falsifier (level control): untested" in text
    saved = json.loads((out / "robustness.json").read_text())
    assert saved["meaning_changing_levels"] == ["control"] and "falsifier" not in saved
    assert [json.loads(x).get("meaning_changing") for x in (out / "variants.jsonl").read_text().splitlines()] == \
        [r.get("meaning_changing") for r in rows]
    without = run_json([*args, "--levels", TEST_LEVEL], capsys)
    for a, b in zip(saved["results"], without["results"], strict=True):
        if a["router"] != "random":  # random draws again for every variant routed, so it moves with the batch
            assert (a["rho"], a["kappa_rho"], a["rho_by_actor"]) == (b["rho"], b["kappa_rho"], b["rho_by_actor"])
    record = run_json(args, capsys)
    slices = {(r["router"], r["slice"]) for r in record["records"] if r["metric"] == "kappa_rho"}
    assert {("knn:k=5", ""), ("knn:k=5", f"level={TEST_LEVEL}"), ("knn:k=5", "level=control")} <= slices
    fixed = next(r for r in record["results"] if r["router"] == "best-single")
    assert fixed["kappa_rho"] is None and fixed["kappa_rho_flag"] == "collapsed"
