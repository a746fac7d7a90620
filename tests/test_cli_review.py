"""The review loop end to end (SPEC 3, issue 22): ``routerlab perturb --review N FILE.csv`` writes a stratified,
seeded sample with a ``mark`` column; a person marks it; ``routerlab robustness --reviewed FILE.csv`` drops the
variants marked changed and reports each level's share marked changed; a bad file is one line naming the file, the
row and the field."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from routerlab.cli import main
from routerlab.datasets import demo
from routerlab.errors import DataError
from routerlab.perturb.base import PerturbationSet, Variant
from routerlab.perturb.review import COLUMNS, apply_review, read_review, review_sample, wilson
from tests import run_main
from tests.perturb import require_wordnet

LEVELS = "character,word"


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("review") / "demo"
    demo(n_queries=240, seed=3).save(path)
    return path


run = run_main


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else list(COLUMNS))
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def sampled(table_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    require_wordnet()
    out = tmp_path_factory.mktemp("sample")
    code = main(["perturb", str(table_dir), "--levels", LEVELS, "--variants", "2", "--encoder", "tfidf",
                 "--seed", "4", "-o", str(out / "v.jsonl"), "--review", "12", str(out / "r.csv")])
    assert code == 0
    return out / "v.jsonl", out / "r.csv"


def test_perturb_writes_a_stratified_seeded_sample(table_dir: Path, sampled: tuple[Path, Path], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    variants, review = sampled
    rows = _rows(review)
    assert list(rows[0]) == list(COLUMNS) and len(rows) == 12
    lines = {json.loads(x)["query_id"] + "#" + json.loads(x)["level"] + "#" + str(json.loads(x)["variant"]):
             json.loads(x) for x in variants.read_text().splitlines()}
    for row in rows:
        v = lines[row["variant_id"]]  # every sampled id is a variant of the file, with its text and similarity
        assert row["variant"] == v["text"] and float(row["similarity"]) == pytest.approx(v["similarity"])
        assert row["mark"] == "" and row["original"] and row["level"] == v["level"]
    # 6 per level, spread over the 4 similarity quartiles of each level (2, 2, 1, 1: round-robin)
    by_level: dict[str, list[str]] = {}
    for row in rows:
        by_level.setdefault(row["level"], []).append(row["band"])
    assert {lv: len(b) for lv, b in by_level.items()} == {"character": 6, "word": 6}
    for bands in by_level.values():
        assert sorted(bands.count(b) for b in set(bands)) == [1, 1, 2, 2]
    # the same seed, the same sample; the text summary says where it is
    again = tmp_path / "again.csv"
    code, out, _ = run(["perturb", str(table_dir), "--levels", LEVELS, "--variants", "2", "--encoder", "tfidf",
                        "--seed", "4", "-o", str(tmp_path / "v.jsonl"), "--review", "12", str(again)], capsys)
    assert code == 0 and again.read_text() == review.read_text()
    assert f"review sample: 12 variants to mark same or changed (column mark) in {again}" in out
    assert "synonym candidates:" in out and "below similarity 0.75" in out


def _mark(review: Path, tmp_path: Path) -> tuple[Path, dict[str, int]]:
    """Mark every third row changed, the rest same (with stray case and spaces, which are allowed)."""
    rows = _rows(review)
    changed: dict[str, int] = {}
    for i, row in enumerate(rows):
        row["mark"] = " Changed" if i % 3 == 0 else "same "
        if i % 3 == 0:
            changed[row["level"]] = changed.get(row["level"], 0) + 1
    return _write(tmp_path / "marked.csv", rows), changed


def test_robustness_drops_the_variants_marked_changed(table_dir: Path, sampled: tuple[Path, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    variants, review = sampled
    marked, changed = _mark(review, tmp_path)
    common = ["robustness", str(table_dir), "--routers", "best-single,knn", "--n-boot", "40", "--seed", "4",
              "--variants-file", str(variants)]
    code, out, err = run([*common, "--json"], capsys)
    assert code == 0, err
    plain: dict[str, Any] = json.loads(out)
    code, out, err = run([*common, "--reviewed", str(marked), "--json"], capsys)
    assert code == 0, err
    record: dict[str, Any] = json.loads(out)
    summary = record["perturbations"]["review"]
    assert summary["reviewed"] == 12 and summary["dropped"] == sum(changed.values()) == 4
    for level, n in changed.items():
        block = summary["by_level"][level]
        assert block["reviewed"] == 6 and block["changed"] == n and block["changed_share"] == pytest.approx(n / 6)
        lo, hi = block["changed_share_ci"]
        assert (lo, hi) == pytest.approx(wilson(n, 6)) and lo <= n / 6 <= hi
    assert record["perturbations"]["n_variants_used"] == plain["perturbations"]["n_variants_used"] - 4
    assert record["settings"]["reviewed"] == str(marked)
    out_dir = tmp_path / "rob"
    code, text, err = run([*common, "--reviewed", str(marked), "-o", str(out_dir)], capsys)
    assert code == 0, err
    assert f"review {marked}: 12 variants reviewed, 4 marked changed and dropped" in text
    assert f"  word: {changed['word']}/6 changed" in text and "(meaning drift)" in text
    assert f"Review {marked}: 12 variants reviewed" in (out_dir / "robustness.md").read_text()
    # the variants used: the changed ones left out, every row still with its similarity
    used = [json.loads(x) for x in (out_dir / "variants.jsonl").read_text().splitlines()]
    assert len(used) == record["perturbations"]["n_variants_used"] and all("similarity" in x for x in used)


def test_bad_review_files_are_one_line(table_dir: Path, sampled: tuple[Path, Path], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    variants, review = sampled
    good = _rows(review)
    for row in good:
        row["mark"] = "same"
    some_id = good[0]["variant_id"]
    qid, level, _ = some_id.rsplit("#", 2)
    cases: list[tuple[list[dict[str, str]], str]] = [
        ([{**good[0], "mark": ""}, *good[1:]], "row 2, field 'mark': no mark for variant"),
        ([*good[:2], {**good[2], "mark": "maybe"}], "row 4, field 'mark': mark must be same or changed, got 'maybe'"),
        ([{**good[0], "variant_id": "nope#word#0"}], "row 2, field 'variant_id': unknown variant nope#word#0: the "
                                                     "table has no query 'nope'"),
        ([{**good[0], "variant_id": f"{qid}#{level}#9"}], f"unknown variant {qid}#{level}#9: this run has no such"),
        ([{**good[0], "variant_id": f"{qid}#typo#0"}], "no level 'typo'"),
        ([{**good[0], "variant_id": "no-hashes"}], "variant_id must be query_id#level#number"),
        ([good[0], good[0]], f"row 3, field 'variant_id': variant {some_id} is already marked on row 2"),
        ([{**good[0], "variant": "another text"}], "the text reviewed differs from this run's variant"),
    ]
    for k, (rows, message) in enumerate(cases):
        path = _write(tmp_path / f"bad{k}.csv", rows)
        code, _, err = run(["robustness", str(table_dir), "--n-boot", "40", "--seed", "4", "--variants-file",
                            str(variants), "--reviewed", str(path)], capsys)
        assert code == 2 and message in err and str(path) in err and err.count("\n") == 1, (k, err)
    (tmp_path / "nocol.csv").write_text("variant_id,verdict\nq#word#0,same\n")
    code, _, err = run(["robustness", str(table_dir), "--variants-file", str(variants), "--reviewed",
                        str(tmp_path / "nocol.csv")], capsys)
    assert code == 2 and "field 'mark': the review file has no 'mark' column" in err
    code, _, err = run(["robustness", str(table_dir), "--reviewed", str(tmp_path / "missing.csv")], capsys)
    assert code == 2 and "missing.csv: no such file" in err and err.count("\n") == 1
    for args, message in ((["--review", "0", str(tmp_path / "r.csv")], "--review: the sample size must be"),
                          (["--review", "5", str(tmp_path / "r.txt")], "a review file name ends in .csv"),
                          (["--encoder", "precomputed:path=x"], "--encoder")):
        code, _, err = run(["perturb", str(table_dir), "--levels", "character", "-o", str(tmp_path / "v.jsonl"),
                            *args], capsys)
        assert code == 2 and message in err and err.count("\n") == 1, (args, err)


def test_review_by_hand(tmp_path: Path) -> None:
    """Eight variants of two levels, four at known similarities each: 2 levels x 4 quartile bands of one variant
    each; a sample of 4 takes the two lowest bands of both levels (band by band across the levels)."""
    variants = tuple(Variant(f"q{j}", lv, 0, f"{lv} text {j}", s, "tfidf")
                     for lv, sims in (("character", (0.9, 0.8, 0.7, 0.6)), ("word", (0.95, 0.85, 0.75, 0.65)))
                     for j, s in enumerate(sims))
    pset = PerturbationSet(variants, ("character", "word"), 1, 0)
    sample = review_sample(pset, 4, seed=0)
    assert [(band, v.key) for band, v in sample] == [
        ("q1 0.60-0.60", "q3#character#0"), ("q1 0.65-0.65", "q3#word#0"), ("q2 0.70-0.70", "q2#character#0"),
        ("q2 0.75-0.75", "q2#word#0")]
    everything = review_sample(pset, 100, seed=0)
    assert len(everything) == 8
    path = tmp_path / "r.csv"
    path.write_text("variant_id,mark\nq0#word#0,changed\nq1#word#0,same\nq2#character#0,same\nzz#word#0,same\n")
    with pytest.raises(DataError, match=r"r\.csv, row 5, field 'variant_id': unknown variant zz#word#0"):
        apply_review(pset, read_review(path), {f"q{j}" for j in range(4)})
    kept, summary = apply_review(pset, read_review(path), {f"q{j}" for j in range(4)} | {"zz"})
    assert [v.key for v in kept.variants if v.level == "word"] == ["q1#word#0", "q2#word#0", "q3#word#0"]
    assert summary["ignored"] == 1 and summary["dropped"] == 1  # zz is a query of the table, not of this run
    assert summary["by_level"]["word"]["changed_share"] == 0.5
    assert summary["by_level"]["character"] == {"reviewed": 1, "changed": 0, "changed_share": 0.0,
                                                "changed_share_ci": list(wilson(0, 1))}
    # Wilson by hand, 1 of 2 with z = 1.96 (z^2 = 3.8415): centre (0.5 + 3.8415/4) / (1 + 3.8415/2) = 0.5,
    # half-width 1.96 * sqrt(0.125 + 3.8415/16) / 2.9208 = 0.4055
    lo, hi = wilson(1, 2)
    assert lo == pytest.approx(0.5 - 0.4055, abs=1e-3) and hi == pytest.approx(0.5 + 0.4055, abs=1e-3)
