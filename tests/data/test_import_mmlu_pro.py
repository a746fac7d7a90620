"""The ``mmlu-pro`` importer on ten MMLU-Pro eval_results zips, and on generated files."""

from __future__ import annotations

import json
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routerlab.data.importers._common import DataWarning
from routerlab.data.importers.mmlu_pro import read_mmlu_pro
from routerlab.data.table import RoutingTable
from routerlab.errors import DataError
from tests.data.importer_checks import assert_names, has_warning, mean_scores, same_cells, warning_texts

# model: (rows, null preds, exact-match rate over its rows) from the data README
README = {
    "Llama-2-7b-hf": (12032, 2061, 0.183),
    "Meta-Llama-3_1-8B-Instruct": (12032, 0, 0.442),
    "Meta-Llama-3_1-70B-Instruct": (12032, 0, 0.628),
    "Mistral-7B-Instruct-v0.2": (12032, 2237, 0.288),
    "Mixtral-8x7B-Instruct-v0.1": (12032, 1426, 0.419),
    "Phi-3-mini-4k-instruct": (12032, 1855, 0.415),
    "Qwen1.5-110B": (12032, 726, 0.492),
    "Yi-34B": (12032, 1036, 0.421),
    "jamba-1.5-large": (12032, 56, 0.495),
    "gemini-1.5-pro-002": (12020, 8, 0.702),
}
CATEGORIES = {
    "biology": 717,
    "business": 789,
    "chemistry": 1132,
    "computer science": 410,
    "economics": 844,
    "engineering": 969,
    "health": 818,
    "history": 381,
    "law": 1101,
    "math": 1351,
    "other": 924,
    "philosophy": 499,
    "physics": 1299,
    "psychology": 798,
}


@pytest.fixture(scope="module")
def real(shared_data: Path) -> tuple[RoutingTable, list[str], float]:
    start = time.perf_counter()
    with pytest.warns(DataWarning, match=r"predictions are null") as rec:
        table = read_mmlu_pro([shared_data / "mmlu-pro-outputs" / "eval_results"])
    return table, warning_texts(rec.list), time.perf_counter() - start


def test_real_counts(real: tuple[RoutingTable, list[str], float]) -> None:
    t, _, _ = real
    assert (t.n_queries, t.n_actors) == (12032, 10)
    assert t.actor_names == sorted(README)
    assert t.dataset_counts() == CATEGORIES
    assert t.split_counts() == {"": 12032}
    ids = t.queries.ids.astype(int)
    assert (np.diff(ids) > 0).all() and t.queries.ids[0] == "70"
    assert set(t.queries.extra["src"].tolist()) >= {"ori_mmlu-business_ethics"}
    assert all(isinstance(json.loads(o), list) for o in t.queries.extra["options"][:50].tolist())


def test_real_scores(real: tuple[RoutingTable, list[str], float]) -> None:
    t, _, _ = real
    nan = np.isnan(t.score)
    means = mean_scores(t)
    for j, name in enumerate(t.actor_names):
        rows, nulls, rate = README[name]
        assert int((~nan[:, j]).sum()) == rows
        assert t.actors.extra["null_preds"][j] == nulls
        assert round(means[name], 3) == rate
    assert int(nan.sum()) == 12
    assert set(np.unique(t.score[~nan]).tolist()) == {0.0, 1.0}
    keys = dict(zip(t.actor_names, t.actors.extra["output_key"].tolist(), strict=True))
    assert keys["gemini-1.5-pro-002"] == keys["jamba-1.5-large"] == "model_outputs"
    assert {keys[m] for m in README if m not in ("gemini-1.5-pro-002", "jamba-1.5-large")} == {"generated_text"}
    assert int(t.queries.extra["answer_differs"].sum()) == 33


def test_real_warnings(real: tuple[RoutingTable, list[str], float]) -> None:
    texts = real[1]
    for name, (rows, nulls, _) in README.items():
        if nulls:
            assert has_warning(texts, rf"model '{name}': {nulls} of {rows} predictions are null")
    assert has_warning(texts, r"gemini-1\.5-pro-002_5shots\.json: model 'gemini-1\.5-pro-002' lacks 12 of the 12032")
    assert has_warning(
        texts, r"eval_results, field 'answer': files disagree .*\(answer: 33, question: 7, options: 11\)"
    )
    assert len(texts) == 10




# ---------------------------------------------------------------- generated files

LETTERS = "ABCD"


@st.composite
def outputs(draw: st.DrawFn) -> dict[str, list[dict]]:
    pool = draw(st.lists(st.integers(0, 40), min_size=1, max_size=8, unique=True))
    answers = {q: draw(st.sampled_from(LETTERS)) for q in pool}
    models = draw(st.lists(st.sampled_from(["M-1", "m_2", "Model.3"]), min_size=1, max_size=3, unique=True))
    out = {}
    for m in models:
        rows = []
        for q in draw(st.permutations(pool)):
            if draw(st.integers(0, 4)) == 0:
                continue
            key = draw(st.sampled_from(["generated_text", "model_outputs"]))
            rows.append(
                {
                    "question_id": q,
                    "question": f"question {q}?",
                    "options": ["o1", "o2", "o3", "o4"],
                    "answer": answers[q],
                    "answer_index": LETTERS.index(answers[q]),
                    "cot_content": "",
                    "category": "math" if q % 2 else "law",
                    "src": "ori",
                    "pred": draw(st.sampled_from([*LETTERS, None])),
                    key: "text",
                }
            )
        out[m] = rows
    return out


def _write(folder: Path, data: dict[str, list[dict]], as_zip: bool) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for m, rows in data.items():
        member = f"model_outputs_{m}_5shots.json"
        if as_zip:
            with zipfile.ZipFile(folder / f"model_outputs_{m}_5shots.zip", "w", zipfile.ZIP_DEFLATED) as zf:
                zf.writestr(member, json.dumps(rows))
        else:
            (folder / member).write_text(json.dumps(rows))


def _quiet(paths: list[Path]) -> RoutingTable:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        return read_mmlu_pro(paths)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=outputs())
def test_generated_round_trip(tmp_path_factory: pytest.TempPathFactory, data: dict[str, list[dict]]) -> None:
    tmp = tmp_path_factory.mktemp("mp")
    _write(tmp / "zips", data, as_zip=True)
    _write(tmp / "json", data, as_zip=False)
    qids = sorted({r["question_id"] for rows in data.values() for r in rows})
    if not qids:
        with pytest.raises(DataError):
            _quiet([tmp / "zips"])
        return
    t = _quiet([tmp / "zips"])
    names = sorted(data)
    assert t.actor_names == names
    assert t.queries.ids.tolist() == [str(q) for q in qids]
    want = np.full((len(qids), len(names)), np.nan)
    for j, m in enumerate(names):
        for r in data[m]:
            want[qids.index(r["question_id"]), j] = float(r["pred"] == r["answer"])
    assert same_cells(t.score, want)
    nulls = [sum(r["pred"] is None for r in data[m]) for m in names]
    assert t.actors.extra["null_preds"].tolist() == nulls
    assert t.queries.dataset.tolist() == ["math" if q % 2 else "law" for q in qids]
    assert _quiet([tmp / "json"]).content_hash == t.content_hash


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=outputs(), cut=st.integers(0, 3000), junk=st.text(alphabet='{}[]",:0A.nul', min_size=1, max_size=5))
def test_mangled_json_raises_only_data_error(
    tmp_path_factory: pytest.TempPathFactory, data: dict[str, list[dict]], cut: int, junk: str
) -> None:
    tmp = tmp_path_factory.mktemp("mpbad")
    m, rows = next(iter(data.items()))
    raw = json.dumps(rows)
    at = cut % (len(raw) + 1)
    path = tmp / f"model_outputs_{m}_5shots.json"
    path.write_text(raw[:at] + junk + raw[at + len(junk) :])
    try:
        _quiet([path])
    except DataError as err:
        assert path.name in str(err)


# ---------------------------------------------------------------- bad input

ROW = {"question_id": 1, "question": "q", "options": ["a", "b"], "answer": "A", "category": "math", "pred": "A"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"question_id": "x1"}, "question_id"),
        ({"question_id": 1.5}, "question_id"),
        ({"question_id": 1}, "question_id"),  # repeats row 1
        ({"answer": None}, "answer"),
        ({"pred": 3}, "pred"),
        ({"question": None}, "question"),
        ({"category": 7}, "category"),
        ({"pred": "drop"}, "pred"),
        ({"question": "drop"}, "question"),
    ],
)
def test_malformed_row_names_file_row_field(tmp_path: Path, change: dict, field: str) -> None:
    bad = {**ROW, "question_id": 2, **change}
    for key in [k for k, v in change.items() if v == "drop"]:
        del bad[key]
    path = tmp_path / "model_outputs_M_5shots.json"
    path.write_text(json.dumps([ROW, bad]))
    with pytest.raises(DataError) as info:
        read_mmlu_pro([path])
    assert_names(info.value, path, row=2, field=field)


def test_bad_zip_names_and_duplicates(tmp_path: Path) -> None:
    with pytest.raises(DataError) as info:
        read_mmlu_pro([tmp_path / "model_outputs_X_5shots.zip"])
    assert_names(info.value, tmp_path / "model_outputs_X_5shots.zip")
    fake = tmp_path / "model_outputs_X_5shots.zip"
    fake.write_bytes(b"not a zip")
    with pytest.raises(DataError, match=r"model_outputs_X_5shots\.zip: not a zip file"):
        read_mmlu_pro([fake])
    empty = tmp_path / "e" / "model_outputs_E_5shots.zip"
    empty.parent.mkdir()
    with zipfile.ZipFile(empty, "w") as zf:
        zf.writestr("readme.txt", "x")
    with pytest.raises(DataError, match=r"zip holds no \.json member"):
        read_mmlu_pro([empty])
    badjson = tmp_path / "b" / "model_outputs_B_5shots.zip"
    badjson.parent.mkdir()
    with zipfile.ZipFile(badjson, "w") as zf:
        zf.writestr("model_outputs_B_5shots.json", '[{"question_id": 1,\n oops}]')
    with pytest.raises(
        DataError, match=r"model_outputs_B_5shots\.zip!model_outputs_B_5shots\.json, row 2: invalid JSON"
    ):
        read_mmlu_pro([badjson])
    oddname = tmp_path / "results.json"
    oddname.write_text(json.dumps([ROW]))
    with pytest.raises(DataError, match=r"results\.json: file name is not model_outputs_<MODEL>"):
        read_mmlu_pro([oddname])
    txt = tmp_path / "model_outputs_T_5shots.txt"
    txt.write_text("[]")
    with pytest.raises(DataError, match=r"\.txt: mmlu-pro reads \.zip or \.json"):
        read_mmlu_pro([txt])
    twice = tmp_path / "t"
    twice.mkdir()
    (twice / "model_outputs_M_5shots.json").write_text(json.dumps([ROW]))
    with zipfile.ZipFile(twice / "model_outputs_M_5shots.zip", "w") as zf:
        zf.writestr("model_outputs_M_5shots.json", json.dumps([ROW]))
    with pytest.raises(DataError, match=r"model 'M' is read twice"):
        read_mmlu_pro([twice])


def test_disagreeing_answer_keys_score_each_model_by_its_own(tmp_path: Path) -> None:
    (tmp_path / "model_outputs_A_5shots.json").write_text(json.dumps([ROW]))
    (tmp_path / "model_outputs_B_5shots.json").write_text(json.dumps([{**ROW, "answer": "B", "pred": "B"}]))
    with pytest.warns(DataWarning, match=r"files disagree on some questions \(answer: 1\)"):
        t = read_mmlu_pro([tmp_path])
    assert t.score.tolist() == [[1.0, 1.0]]
    assert t.queries.extra["answer"].tolist() == ["A"] and t.queries.extra["answer_differs"].tolist() == [True]
