"""routerlab judge-check with fake judges: the figures against hand counts, a judge no better than chance, rows
without a verdict counted apart, the small-sample message, the JSON report and output file, and every bad input
as one line with exit 2."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

from routerlab.cli import main
from routerlab.llm import base as llm_base
from routerlab.llm.base import register_backend
from routerlab.llm.judge_check import split_judges
from tests.llm.test_graders_judge import FakeJudge, FakeJudgeNoLogits

GOOD = "judge:fakejudge:m"
YES_MAN = "judge:fakejudge:m,flavour=yes"


@pytest.fixture()
def judges() -> Iterator[None]:
    FakeJudge.built.clear()
    FakeJudge.replies = {}
    register_backend("fakejudge")(FakeJudge)
    register_backend("fakejudge-text")(FakeJudgeNoLogits)
    yield
    llm_base._REGISTRY.remove("fakejudge")
    llm_base._REGISTRY.remove("fakejudge-text")


def _rows(n: int) -> list[dict[str, str]]:
    """n rows, every third answer right; the label disagrees with the truth on rows 0, 10, 20, ... (a noisy
    reference)."""
    rows = []
    for i in range(n):
        right = i % 3 == 0
        label = int(right) if i % 10 else int(not right)
        rows.append({"query_id": f"q{i}", "question": f"Name city {i}.", "answer": f"city{i}" if right else "nowhere",
                     "reference": f"city{i}", "label": str(label), "dataset": "trivia_qa"})
    return rows


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("routerlab: error: ") and "Traceback" not in err, err
    return err.removeprefix("routerlab: error: ").rstrip("\n")


def test_figures_chance_and_unparseable(judges: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _rows(60)
    labels = _write(tmp_path / "labels.csv", rows)
    FakeJudge.replies = {"nowhere": "It is hard to say."}  # the generating judge gives no verdict on wrong answers
    argv = ["judge-check", str(labels), "--judges", f"{GOOD},{YES_MAN},{GOOD},verdict=generate",
            "--cache-dir", str(tmp_path / "cache"), "--n-boot", "200", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    truth = [int(r["answer"] == r["reference"]) for r in rows]
    label = [int(r["label"]) for r in rows]
    good = report["judges"][GOOD]
    assert good["rated"] == 60 and good["unparseable"] == 0 and good["judged_positive"] == 20
    assert good["kappa"]["value"] == pytest.approx(cohen_kappa_score(truth, label))
    tp = sum(t and lab for t, lab in zip(truth, label, strict=True))
    assert good["precision"]["value"] == pytest.approx(tp / 20)
    assert good["recall"]["value"] == pytest.approx(tp / sum(label))
    assert good["accuracy"]["value"] == pytest.approx(54 / 60)
    assert good["kappa"]["lo"] > 0.5 and good["better_than_chance"] is True
    yes = report["judges"][YES_MAN]
    assert yes["kappa"]["value"] == 0.0 and yes["better_than_chance"] is False
    assert yes["recall"]["value"] == 1.0
    gen = report["judges"][f"{GOOD},verdict=generate"]
    assert gen["unparseable"] == 40 and gen["rated"] == 20  # counted apart, not as 0
    assert gen["kappa"]["value"] == 0.0  # it rated only the right answers, all yes: no better than a constant
    among = report["among_judges"]
    assert among["rows_every_judge_rated"] == 20
    assert among["fleiss_kappa"]["n"] == 20 and among["krippendorff_alpha"]["n"] == 60
    assert report["rows"] == 60 and report["binary_reference"] and report["intervals"]


def test_text_report_names_a_judge_no_better_than_chance(judges: None, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    labels = _write(tmp_path / "labels.csv", _rows(45))
    out = tmp_path / "report.json"
    argv = ["judge-check", str(labels), "--judges", f"{GOOD},{YES_MAN}", "--cache-dir", str(tmp_path / "cache"),
            "--n-boot", "200", "-o", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert f"{YES_MAN}: 45 rated, 0 unparseable, 45 judged positive; NOT BETTER THAN CHANCE" in text
    assert f"{GOOD}: 45 rated, 0 unparseable, 15 judged positive; better than chance" in text
    assert "Fleiss' kappa" in text and "Krippendorff alpha" in text and f"wrote {out}" in text
    saved = json.loads(out.read_text())
    assert len(saved["rows_verdicts"]) == 45
    assert saved["rows_verdicts"][0]["judges"][GOOD]["detail"].startswith("verdict yes by logits")
    # an existing report is kept without --force, replaced with it
    assert main(argv) == 2
    assert _one_error(capsys) == f"-o {out}: already exists; pass --force to overwrite it"
    assert main([*argv, "--force"]) == 0


def test_a_small_sample_says_so(judges: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in _rows(6)))
    assert main(["judge-check", str(labels), "--judges", GOOD, "--cache-dir", str(tmp_path / "c")]) == 0
    text = capsys.readouterr().out
    assert "only 6 rows, fewer than the 30 a 95% interval needs: intervals not computed" in text
    assert "cannot tell if better than chance" in text and "[" not in text.split("\n", 2)[2]
    assert main(["judge-check", str(labels), "--judges", GOOD, "--cache-dir", str(tmp_path / "c"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["intervals"] is False and report["among_judges"] is None
    kappa = report["judges"][GOOD]["kappa"]
    assert kappa["lo"] is None and "n=6 < 30: no interval" in kappa["note"]


def test_graded_labels_add_the_interval_alpha(judges: None, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    rows = _rows(30)
    for i, r in enumerate(rows):
        r["label"] = str([0.0, 0.3, 0.8, 1.0][i % 4])
    labels = _write(tmp_path / "graded.csv", rows)
    assert main(["judge-check", str(labels), "--judges", GOOD, "--cache-dir", str(tmp_path / "c"), "--json",
                 "--n-boot", "200"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["binary_reference"] is False and report["reference_positive"] == 14
    alpha = report["judges"][GOOD]["alpha_interval"]
    assert -1.0 < alpha["value"] < 1.0 and alpha["lo"] <= alpha["value"] <= alpha["hi"]


def test_split_judges_keeps_spec_options(judges: None) -> None:
    assert split_judges("judge:local:x,threads=1,template=qa,short,judge:openai:m@http://h/v1,key_env=K") == [
        "judge:local:x,threads=1,template=qa", "short", "judge:openai:m@http://h/v1,key_env=K"]


@pytest.mark.parametrize(("setup", "extra", "message"), [
    (lambda p: p.with_suffix(".txt").write_text("x"), [],
     "{txt}: a label file is .csv or .jsonl (or a table directory collect wrote)"),
    (None, [], "{missing}: no such file"),
    (lambda p: _write(p, [{"question": "q", "answer": "a", "label": "1"}]), [],
     "{csv}, field 'reference': no column 'reference' (the columns: question, answer, label)"),
    (lambda p: _write(p, [{"question": "q", "answer": "a", "reference": "r", "label": "yes"}]), [],
     "{csv}, row 2, field 'label': the label 'yes' is not a number; give 1/0 or a graded share in [0, 1]"),
    (lambda p: _write(p, [{"question": "q", "answer": "a", "reference": "r", "label": "7"}]), [],
     "{csv}, row 2, field 'label': the label '7' lies outside [0, 1] (a rating out of 10 is given as a share: "
     "7 -> 0.7)"),
    (lambda p: _write(p, [{"question": "q", "answer": "a", "reference": "r", "label": "1"}]), ["--reference", "gold"],
     "{csv}, field 'gold': no column 'gold' (the columns: question, answer, reference, label)"),
    (lambda p: _write(p, [{"question": " ", "answer": "a", "reference": "r", "label": "1"}]), [],
     "{csv}, row 2, field 'question': the question is empty"),
])
def test_bad_label_files_are_one_line(judges: None, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      setup: object, extra: list[str], message: str) -> None:
    path = tmp_path / "labels.csv"
    if callable(setup):
        setup(path)
    target = {"txt": path.with_suffix(".txt"), "missing": path, "csv": path}
    key = message[1:message.index("}")]
    assert main(["judge-check", str(target[key]), "--judges", GOOD, "--cache-dir", str(tmp_path / "c"),
                 *extra]) == 2
    assert _one_error(capsys) == message.format(**{k: str(v) for k, v in target.items()})


@pytest.mark.parametrize(("judges_arg", "message"), [
    ("nosuch:x", "unknown grader 'nosuch'"),
    ("judge:fakejudge:m,template=essay", "template must be one of auto, qa, math, code, open, pair"),
    (f"{GOOD},{GOOD}", "a judge is given twice"),
    (f"{GOOD},,short", "an empty judge"),
])
def test_bad_judges_are_one_line_before_reading(judges: None, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                judges_arg: str, message: str) -> None:
    assert main(["judge-check", str(tmp_path / "absent.csv"), "--judges", judges_arg]) == 2
    assert message in _one_error(capsys)


def test_bad_output_is_one_line(judges: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = _write(tmp_path / "labels.csv", _rows(3))
    assert main(["judge-check", str(labels), "--judges", GOOD, "-o", str(tmp_path / "r.csv")]) == 2
    assert _one_error(capsys) == f"-o {tmp_path / 'r.csv'}: the report is a .json file"
