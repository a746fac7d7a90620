"""MMLU-Pro result files with bare strings or totals between the records: skipped, counted, the rest imports."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from routerlab.data.importers._common import DataWarning
from routerlab.data.importers.mmlu_pro import read_mmlu_pro
from routerlab.errors import DataError
from tests.data.importer_checks import assert_names

ROW = {"question_id": 1, "question": "q", "options": ["a", "b"], "answer": "A", "category": "math", "pred": "A"}


def row(qid: int, pred: str | None = "A") -> dict[str, object]:
    return {**ROW, "question_id": qid, "question": f"q{qid}", "pred": pred}


def test_non_records_are_skipped_with_one_warning_per_file(tmp_path: Path) -> None:
    junk_a = ["biology", row(1), 12032, row(2, "B"), ["x", 1], None, "total", row(3)]
    (tmp_path / "model_outputs_A_5shots.json").write_text(json.dumps(junk_a))
    with zipfile.ZipFile(tmp_path / "model_outputs_B_5shots.zip", "w") as zf:
        zf.writestr("model_outputs_B_5shots.json", json.dumps([row(1, "B"), "law", row(2)]))
    (tmp_path / "model_outputs_C_5shots.json").write_text(json.dumps([row(1), row(2), row(3)]))
    with pytest.warns(DataWarning) as rec:
        t = read_mmlu_pro([tmp_path])
    texts = [str(w.message) for w in rec.list if "not question records" in str(w.message)]
    assert len(texts) == 2
    assert any("model_outputs_A_5shots.json" in x and "skipped 5 of 8 entries" in x and "'biology'" in x
               for x in texts)
    assert any("model_outputs_B_5shots.zip!model_outputs_B_5shots.json" in x and "skipped 1 of 3" in x
               for x in texts)
    assert t.actor_names == ["A", "B", "C"] and t.queries.ids.tolist() == ["1", "2", "3"]
    got = [[None if v != v else v for v in r] for r in t.score.tolist()]
    assert got == [[1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [1.0, None, 1.0]]
    assert t.queries.text.tolist() == ["q1", "q2", "q3"]


def test_bad_record_after_junk_names_its_place_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "model_outputs_M_5shots.json"
    path.write_text(json.dumps(["header", row(1), "sep", {**row(2), "answer": None}]))
    with pytest.raises(DataError) as info, pytest.warns(DataWarning, match="skipped 2 of 4"):
        read_mmlu_pro([path])
    assert_names(info.value, path, row=4, field="answer")
    path.write_text(json.dumps(["header", row(1), "sep", row(1)]))
    with pytest.raises(DataError) as info, pytest.warns(DataWarning, match="skipped 2 of 4"):
        read_mmlu_pro([path])
    assert_names(info.value, path, row=4, field="question_id")


def test_file_without_records_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "model_outputs_A_5shots.json").write_text(json.dumps([row(1)]))
    bad = tmp_path / "model_outputs_S_5shots.json"
    bad.write_text(json.dumps(["biology", 717, "law", 1101]))
    with pytest.raises(DataError, match=r"model_outputs_S_5shots\.json: holds no question records.*'biology'"):
        read_mmlu_pro([tmp_path])
