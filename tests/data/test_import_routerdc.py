"""The ``routerdc`` importer on LLMRouter's dcrouter_preprocessed files (+ query metadata, prices)."""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routerlab.data.importers._common import DataWarning
from routerlab.data.importers.routerdc import read_routerdc
from routerlab.data.quality import quality_report, train_test_overlap
from routerlab.data.table import RoutingTable
from routerlab.errors import DataError
from tests.data.importer_checks import assert_names, has_warning, mean_scores, same_cells, warning_texts

MEANS = {
    "codegemma-7b": 0.298,
    "gemma-2-9b-it": 0.528,
    "llama-3.1-8b-instruct": 0.556,
    "llama-3.1-nemotron-51b-instruct": 0.617,
    "llama-3.3-nemotron-super-49b-v1": 0.573,
    "llama3-chatqa-1.5-70b": 0.200,
    "llama3-chatqa-1.5-8b": 0.173,
    "mistral-7b-instruct-v0.3": 0.363,
    "qwen2.5-7b-instruct": 0.512,
}
# Task counts with the documented pick for the 6 texts listed under two tasks (the first match: mmlu).
# The data README's "mmlu 494, openbook_qa 500, arc_challenge 500" is what a last-match-wins join gives.
TRAIN_TASKS = {
    "agentverse-logicgrid": 150,
    "agentverse-mgsm": 200,
    "commongen": 150,
    "natural_qa": 500,
    "trivia_qa": 500,
    "mmlu": 500,
    "openbook_qa": 496,
    "arc_challenge": 498,
    "gpqa": 448,
    "mbpp": 498,
    "human_eval": 164,
    "gsm8k": 500,
    "commonsense_qa": 500,
    "math": 504,
}
TEST_TASKS = dict.fromkeys(
    [
        "agentverse-logicgrid",
        "agentverse-mgsm",
        "commongen",
        "natural_qa",
        "trivia_qa",
        "mmlu",
        "gpqa",
        "mbpp",
        "human_eval",
        "gsm8k",
    ],
    50,
)


@pytest.fixture(scope="module")
def llmrouter(shared_data: Path) -> Path:
    return shared_data / "llmrouter" / "data"


@pytest.fixture(scope="module")
def real(llmrouter: Path) -> tuple[RoutingTable, list[str]]:
    qdir = llmrouter / "example_data" / "query_data"
    with pytest.warns(DataWarning, match=r"6 query texts match metadata rows of more than one task") as rec:
        table = read_routerdc(
            [
                llmrouter / "dcrouter_preprocessed",
                qdir / "default_query_train.jsonl",  # auto-detected as query metadata
                llmrouter / "example_data" / "llm_candidates" / "default_llm.json",  # auto-detected as prices
            ],
            queries=[qdir / "default_query_test.jsonl"],
        )
    return table, warning_texts(rec.list)


def _counts(table: RoutingTable, split: str) -> dict[str, int]:
    return table.select_split(split).dataset_counts()


def test_real_counts(real: tuple[RoutingTable, list[str]]) -> None:
    t, _ = real
    assert (t.n_queries, t.n_actors) == (6108, 9)
    assert t.actor_names == sorted(MEANS)
    assert t.split_counts() == {"train": 5608, "test": 500}
    assert _counts(t, "train") == TRAIN_TASKS
    assert _counts(t, "test") == TEST_TASKS
    assert not np.isnan(t.score).any()
    assert t.queries.ids[0] == "test:0" and t.queries.ids[17] == "test:17" and t.queries.ids[500] == "train:0"


def test_real_score_values(real: tuple[RoutingTable, list[str]]) -> None:
    t, _ = real
    for split, zeros, ones, fractional in (("train", 28211, 20940, 1321), ("test", 2604, 1464, 432)):
        s = t.select_split(split).score
        assert (int((s == 0).sum()), int((s == 1).sum()), int(((s > 0) & (s < 1)).sum())) == (zeros, ones, fractional)
    assert {a: round(v, 3) for a, v in mean_scores(t).items()} == MEANS


def test_real_overlap_and_metadata(real: tuple[RoutingTable, list[str]]) -> None:
    t, _ = real
    assert train_test_overlap(t) == 119
    report = quality_report(t)
    assert report["train_test_overlap_by_dataset"] == {"gpqa": 50, "human_eval": 50, "mbpp": 19}
    assert report["repeated_texts_with_different_scores"] == 50
    x = t.queries.extra
    assert sorted(set(x["cluster_id"][t.queries.split == "train"].tolist())) == ["0", "1", "2"]
    assert set(x["cluster_id"][t.queries.split == "test"].tolist()) == {""}
    assert (x["task_name"] == t.queries.dataset).all()
    assert int((x["metric"] == "").sum()) == 0
    choices = [c for c in x["choices"].tolist() if c]
    assert len(choices) == 3290 and all(isinstance(json.loads(c), dict | list) for c in choices)
    bee = int(np.flatnonzero(t.queries.text == "A bee can enjoy a lovely snack on")[0])
    assert t.queries.dataset[bee] == "mmlu"  # listed under mmlu and openbook_qa: the first match wins


def test_real_prices(real: tuple[RoutingTable, list[str]]) -> None:
    a = real[0].actors
    price = dict(zip(a.names.tolist(), a.input_price.tolist(), strict=True))
    assert price["gemma-2-9b-it"] == 0.1 and price["llama3-chatqa-1.5-70b"] == 0.9
    assert (a.input_price == a.output_price).all()
    params = dict(zip(a.names.tolist(), a.params_b.tolist(), strict=True))
    assert params["llama-3.1-nemotron-51b-instruct"] == 51.0 and params["codegemma-7b"] == 7.0
    assert a.extra["service"].tolist() == ["NVIDIA"] * 9


def test_real_warnings(real: tuple[RoutingTable, list[str]]) -> None:
    texts = real[1]
    assert has_warning(
        texts, r"default_query_train\.jsonl, field 'task_name': 6 query texts match .* more than one task"
    )
    assert has_warning(
        texts,
        r"default_llm\.json: 5 models have no scores and are left out: llama3-70b-instruct, "
        r"mixtral-8x7b-instruct-v0.1, mixtral-8x22b-instruct-v0.1, palmyra-creative-122b, mistral-nemo-12b-instruct",
    )
    assert len(texts) == 2  # every row matched a metadata row; no score cell missing


def test_real_without_metadata(llmrouter: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        t = read_routerdc([llmrouter / "dcrouter_preprocessed" / "train.json"])
    assert t.n_queries == 5608 and t.dataset_counts() == {"": 5608} and t.split_counts() == {"train": 5608}
    assert np.isnan(t.actors.input_price).all()




# ---------------------------------------------------------------- generated files

MODEL_POOL = ["m-a", "m.b", "M/c", "m d"]
_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=10)
_cell = st.one_of(st.sampled_from([0, 1, 0.0, 1.0, None, "missing"]), st.floats(0, 1))


@st.composite
def dc_rows(draw: st.DrawFn) -> list[dict]:
    n = draw(st.integers(1, 6))
    rows = []
    for _ in range(n):
        cells = {m: draw(_cell) for m in MODEL_POOL}
        order = draw(st.permutations(MODEL_POOL))
        scores = {m: cells[m] for m in order if cells[m] != "missing"}
        row: dict = {"question": draw(_text), "scores": scores}
        if draw(st.booleans()):
            row["cluster_id"] = draw(st.integers(0, 3))
        rows.append(row)
    return rows


def _quiet(paths: list[Path], **options: Any) -> RoutingTable:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        return read_routerdc(paths, **options)


def _expected(rows: list[dict], names: list[str]) -> np.ndarray:
    return np.array(
        [[np.nan if r["scores"].get(m) is None else float(r["scores"][m]) for m in names] for r in rows],
        dtype=np.float32,
    )


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(train=dc_rows(), test=dc_rows(), seed=st.integers(0, 2**16))
def test_generated_round_trip(tmp_path_factory: pytest.TempPathFactory, train: list, test: list, seed: int) -> None:
    tmp = tmp_path_factory.mktemp("dc")
    (tmp / "mmlu_train.json").write_text(json.dumps(train), encoding="utf-8")
    (tmp / "mmlu-test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in test), encoding="utf-8")
    rows = train + test
    names = sorted({m for r in rows for m, v in r["scores"].items() if v is not None})
    if not names:
        with pytest.raises(DataError, match="no model scores"):
            _quiet([tmp / "mmlu_train.json", tmp / "mmlu-test.jsonl"])
        return
    t = _quiet([tmp / "mmlu_train.json", tmp / "mmlu-test.jsonl"])
    assert t.actor_names == names
    assert same_cells(t.score, _expected(rows, names))
    assert t.queries.ids.tolist() == [f"mmlu_train:{i}" for i in range(len(train))] + [
        f"mmlu-test:{i}" for i in range(len(test))
    ]
    assert t.queries.text.tolist() == [r["question"] for r in rows]
    assert t.queries.split.tolist() == ["train"] * len(train) + ["test"] * len(test)
    assert set(t.queries.dataset.tolist()) == {"mmlu"}
    if any("cluster_id" in r for r in rows):
        assert t.queries.extra["cluster_id"].tolist() == [str(r.get("cluster_id", "")) for r in rows]

    # shuffling the score keys of every row changes nothing
    rng = random.Random(seed)
    shuffled = []
    for r in train:
        items = list(r["scores"].items())
        rng.shuffle(items)
        shuffled.append({**r, "scores": dict(items)})
    (tmp / "again").mkdir()
    (tmp / "again" / "mmlu_train.json").write_text(json.dumps(shuffled), encoding="utf-8")
    (tmp / "again" / "mmlu-test.jsonl").write_bytes((tmp / "mmlu-test.jsonl").read_bytes())
    again = _quiet([tmp / "again"])  # a folder: read sorted by name, so the test file comes first
    assert again.content_hash == _quiet([tmp / "mmlu-test.jsonl", tmp / "mmlu_train.json"]).content_hash
    assert again.select_split("train").content_hash == t.select_split("train").content_hash


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=dc_rows(), cut=st.integers(0, 5000), junk=st.text(alphabet='{}[]",:01.x-e ', min_size=1, max_size=5))
def test_mangled_json_raises_only_data_error(
    tmp_path_factory: pytest.TempPathFactory, rows: list, cut: int, junk: str
) -> None:
    tmp = tmp_path_factory.mktemp("dcbad")
    raw = json.dumps(rows)
    at = cut % (len(raw) + 1)
    path = tmp / "x_train.json"
    path.write_text(raw[:at] + junk + raw[at + len(junk) :], encoding="utf-8")
    try:
        _quiet([path])
    except DataError as err:
        assert "x_train.json" in str(err)


# ---------------------------------------------------------------- bad input

GOOD = {"question": "q0", "scores": {"a": 1.0, "b": 0}}


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"question": "q", "scores": {"a": "abc"}}, "scores.a"),
        ({"question": "q", "scores": {"b": 1.7}}, "scores.b"),
        ({"question": "q", "scores": {"a": -0.1}}, "scores.a"),
        ({"question": "q", "scores": {"a": [1]}}, "scores.a"),
        ({"scores": {"a": 1}}, "question"),
        ({"question": 3, "scores": {"a": 1}}, "question"),
        ({"question": "q"}, "scores"),
        ({"question": "q", "scores": [1, 0]}, "scores"),
    ],
)
@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_malformed_row_names_file_row_field(tmp_path: Path, bad: dict, field: str, suffix: str) -> None:
    path = tmp_path / f"d_train{suffix}"
    rows = [GOOD, GOOD, bad]
    path.write_text(json.dumps(rows) if suffix == ".json" else "".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError) as info:
        read_routerdc([path])
    assert_names(info.value, path, row=3, field=field)


def test_bad_json_line_names_file_row_and_column(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + '{"question": "q", "scores": {"a": 1,}}\n')
    with pytest.raises(DataError, match=r"d\.jsonl, row 2: invalid JSON: .*\(column \d+\)") as info:
        read_routerdc([path])
    assert_names(info.value, path, row=2)
    meta = tmp_path / "meta.jsonl"
    meta.write_text(json.dumps({"query": "q0", "task_name": "t"}) + "\n{oops\n")
    good = tmp_path / "g.json"
    good.write_text(json.dumps([GOOD]))
    with pytest.raises(DataError) as info:
        read_routerdc([good, meta])
    assert_names(info.value, meta, row=2)
    meta.write_text(json.dumps({"query": "q0", "choices": "{'text': ["}) + "\n")
    with pytest.raises(DataError) as info:
        read_routerdc([good, meta])
    assert_names(info.value, meta, row=1, field="choices")


def test_missing_file_and_wrong_format(tmp_path: Path) -> None:
    with pytest.raises(DataError) as info:
        read_routerdc([tmp_path / "train.json"])
    assert_names(info.value, tmp_path / "train.json")
    csv_file = tmp_path / "scores.csv"
    csv_file.write_text("question,a\nq,1\n")
    with pytest.raises(DataError, match=r"scores\.csv: routerdc reads JSON"):
        read_routerdc([csv_file])
    not_json = tmp_path / "scores.json"
    not_json.write_text("question,a\nq,1\n")
    with pytest.raises(DataError) as info:
        read_routerdc([not_json])
    assert_names(info.value, not_json, row=1)
    obj = tmp_path / "obj.json"
    obj.write_text('{"question": "q", "scores": {}}')
    with pytest.raises(DataError, match=r"obj\.json: a JSON object that is not a model list"):
        read_routerdc([obj])
    only_meta = tmp_path / "meta.jsonl"
    only_meta.write_text(json.dumps({"query": "q"}) + "\n")
    with pytest.raises(DataError, match="no score file"):
        read_routerdc([only_meta])


def test_missing_model_cells_and_metadata_join(tmp_path: Path) -> None:
    data = tmp_path / "train.json"
    data.write_text(
        json.dumps(
            [
                {"question": "q1", "scores": {"b": 1, "a": 0.25}},
                {"question": "q2", "scores": {"a": 1}},
                {"question": "q3", "scores": {"a": 0, "b": None}},
            ]
        )
    )
    train_meta = tmp_path / "default_query_train.jsonl"
    test_meta = tmp_path / "default_query_test.jsonl"
    train_meta.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in [
                {"query": "q1", "task_name": "math", "ground_truth": "4", "metric": "em", "task_id": None},
                {"query": "q2", "task_name": "mmlu", "choices": "{'text': ['x'], 'labels': ['A']}"},
                {"query": "q2", "task_name": "openbook_qa"},
            ]
        )
    )
    test_meta.write_text(json.dumps({"query": "q1", "task_name": "gsm8k", "ground_truth": "5"}) + "\n")
    models = tmp_path / "llms.json"
    models.write_text(json.dumps({"a": {"size": "8x7B", "input_price": 0.5, "output_price": "1.5"}, "z": {}}))
    with pytest.warns(DataWarning) as rec:
        t = read_routerdc([data, test_meta], queries=[train_meta], models=models)
    texts = warning_texts(rec.list)
    assert has_warning(texts, r"train\.json, field 'scores': 2 score cells missing for models other rows have")
    assert has_warning(texts, r"1 query texts match metadata rows of more than one task")
    assert has_warning(texts, r"1 of 3 questions has no metadata row")
    assert has_warning(texts, r"llms\.json: 1 model has no scores and is left out: z")
    assert has_warning(texts, r"llms\.json: no entry for scored model\(s\) b")
    assert has_warning(texts, r"llms\.json, field 'a\.size': size '8x7B' is not a parameter count")
    assert same_cells(t.score, np.array([[0.25, 1], [1, np.nan], [0, np.nan]]))
    assert t.queries.dataset.tolist() == ["math", "mmlu", ""]  # q1: same-split file (train) wins over test
    assert t.queries.extra["ground_truth"].tolist() == ["4", "", ""]
    assert t.queries.extra["choices"].tolist()[1] == '{"text": ["x"], "labels": ["A"]}'
    assert t.actors.input_price.tolist()[0] == 0.5 and t.actors.output_price.tolist()[0] == 1.5
    assert np.isnan(t.actors.input_price[1]) and np.isnan(t.actors.params_b).all()
