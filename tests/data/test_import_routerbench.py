"""The ``routerbench`` importer on RouterDC's re-split of RouterBench 0-shot, and on generated files."""

from __future__ import annotations

import csv
import pickle
import random
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routerlab.data.importers import _REGISTRY
from routerlab.data.importers._common import DataWarning
from routerlab.data.importers.routerbench import read_routerbench
from routerlab.data.quality import duplicate_texts, train_test_overlap
from routerlab.data.table import RoutingTable
from routerlab.errors import DataError
from tests.data.importer_checks import assert_names, has_warning, mean_scores, same_cells, warning_texts

FOLDER = "routerbench-routerdc/datasets/routerbench_zs"
FIRST_ID = "arc-challenge.test.1"  # first row of arc_challenge_test.csv, the first file by name
MODELS = [
    "WizardLM/WizardLM-13B-V1.2",
    "claude-instant-v1",
    "claude-v1",
    "claude-v2",
    "gpt-3.5-turbo-1106",
    "gpt-4-1106-preview",
    "meta/code-llama-instruct-34b-chat",
    "meta/llama-2-70b-chat",
    "mistralai/mistral-7b-chat",
    "mistralai/mixtral-8x7b-chat",
    "zero-one-ai/Yi-34B-Chat",
]


@pytest.fixture(scope="module")
def real(shared_data: Path) -> tuple[RoutingTable, list[str]]:
    with pytest.warns(DataWarning, match=r"empty quality cells") as rec:
        table = read_routerbench([shared_data / FOLDER])
    return table, warning_texts(rec.list)


# ---------------------------------------------------------------- the real files


def test_real_counts(real: tuple[RoutingTable, list[str]]) -> None:
    t, _ = real
    assert (t.n_queries, t.n_actors) == (3178, 11)
    assert t.actor_names == MODELS
    assert t.dataset_counts() == {"arc-challenge": 1484, "mbpp": 427, "winogrande": 1267}
    assert t.split_counts() == {"train": 2225, "test": 953}
    per = {(d, s): 0 for d in ("arc-challenge", "mbpp", "winogrande") for s in ("train", "test")}
    for d, s in zip(t.queries.dataset, t.queries.split, strict=True):
        per[d, s] += 1
    assert per == {
        ("arc-challenge", "train"): 1039,
        ("arc-challenge", "test"): 445,
        ("mbpp", "train"): 299,
        ("mbpp", "test"): 128,
        ("winogrande", "train"): 887,
        ("winogrande", "test"): 380,
    }


def test_real_missing_cells_and_cost(real: tuple[RoutingTable, list[str]]) -> None:
    t, _ = real
    nan = np.isnan(t.score)
    assert nan.sum(axis=0).tolist() == [14] * 11
    assert int(nan.sum()) == 154
    arc = t.queries.dataset == "arc-challenge"
    assert not nan[~arc].any()
    assert int(nan[arc & (t.queries.split == "test")].sum()) == 62
    only_gpt35 = nan.sum(axis=1) == 10
    assert int(only_gpt35.sum()) == 14 and not nan[only_gpt35, MODELS.index("gpt-3.5-turbo-1106")].any()
    assert t.cost_usd is not None and not np.isnan(t.cost_usd).any()
    assert set(np.unique(t.score[~nan]).tolist()) == {0.0, 1.0}


@pytest.mark.parametrize(
    ("dataset", "model", "quality", "cost"),
    [
        ("arc-challenge", "gpt-4-1106-preview", 0.954, 0.00507),
        ("arc-challenge", "claude-v1", 0.908, 0.00406),
        ("arc-challenge", "zero-one-ai/Yi-34B-Chat", 0.903, 0.000404),
        ("arc-challenge", "mistralai/mixtral-8x7b-chat", 0.854, 0.000304),
        ("arc-challenge", "mistralai/mistral-7b-chat", 0.670, 0.000101),
        ("mbpp", "gpt-4-1106-preview", 0.686, 0.00938),
        ("mbpp", "gpt-3.5-turbo-1106", 0.653, 0.000335),
        ("mbpp", "mistralai/mistral-7b-chat", 0.344, 0.0000485),
        ("winogrande", "gpt-4-1106-preview", 0.859, 0.00353),
        ("winogrande", "zero-one-ai/Yi-34B-Chat", 0.754, 0.000281),
        ("winogrande", "mistralai/mistral-7b-chat", 0.566, 0.0000704),
    ],
)
def test_real_means_match_readme(
    real: tuple[RoutingTable, list[str]], dataset: str, model: str, quality: float, cost: float
) -> None:
    sub = real[0].select_datasets([dataset])
    assert round(mean_scores(sub)[model], 3) == quality
    assert sub.cost_usd is not None
    mean_cost = float(np.mean(sub.cost_usd[:, sub.actor_names.index(model)], dtype=np.float64))
    assert float(f"{mean_cost:.3g}") == cost  # 3 significant digits
    assert mean_cost == pytest.approx(cost, abs=6e-6)  # README rounds: 0.000335 is printed as 0.00034


def test_real_ids_text_and_metadata(real: tuple[RoutingTable, list[str]]) -> None:
    t, _ = real
    q = t.queries
    assert len(set(q.ids.tolist())) == 3178
    assert int((q.extra["sample_id"] != q.ids).sum()) == 14  # 1 + 7 inside arc files, 6 across them
    assert "arc-challenge.val.172#2" in set(q.ids.tolist())
    assert q.ids[0] == FIRST_ID and q.split[0] == "test"
    assert not any(t.startswith("['") for t in q.text.tolist())
    assert set(q.extra["oracle_model_to_route_to"].tolist()) <= {*MODELS, "no_model_correct"}
    assert train_test_overlap(t) == 2  # two mbpp prompts occur in both splits
    assert duplicate_texts(t) == 2


def test_real_warnings(real: tuple[RoutingTable, list[str]]) -> None:
    texts = real[1]
    assert has_warning(texts, r"arc_challenge_test\.csv: 62 empty quality cells in 8 rows")
    assert has_warning(texts, r"arc_challenge_train\.csv: 92 empty quality cells in 20 rows")
    assert has_warning(texts, r"arc_challenge_test\.csv, field 'sample_id': 1 repeated ids")
    assert has_warning(texts, r"arc_challenge_train\.csv, field 'sample_id': 7 repeated ids")
    assert has_warning(texts, r"routerbench_zs, field 'sample_id': 6 repeated ids")
    assert has_warning(texts, r"arc_challenge_test\.csv, field 'prompt': 6 prompts are lists of several parts")
    assert has_warning(texts, r"arc_challenge_train\.csv, field 'prompt': 8 prompts are lists of several parts")
    assert has_warning(texts, r"routerbench_zs, field 'sample_id': 2833 of 3178 sample_ids name a RouterBench split")
    assert not any("mbpp" in x or "winograde" in x for x in texts)
    assert len(texts) == 8


    assert _REGISTRY["routerbench"].summary.startswith("RouterBench wide layout")


# ---------------------------------------------------------------- generated files

HEADER_FIXED = ["", "sample_id", "prompt", "eval_name"]
NAMES = ["m/a", "b-1", "C.2", "z|q", "e"]
_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), min_size=0, max_size=12)


def write_csv(path: Path, rows: list[dict[str, object]], columns: list[str]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if r.get(c) is None else r.get(c) for c in columns])
    return path


@st.composite
def wide_files(draw: st.DrawFn) -> dict[str, object]:
    models = draw(st.lists(st.sampled_from([n for n in NAMES if "|" not in n]), min_size=1, max_size=4, unique=True))
    n = draw(st.integers(1, 6))
    rows = []
    for i in range(n):
        parts = draw(st.lists(_text, min_size=1, max_size=2))
        row: dict[str, object] = {
            "": i,
            "sample_id": draw(st.sampled_from(["s.1", "s.2", "s.3", "t.1"])),
            "prompt": repr(parts),
            "eval_name": draw(st.sampled_from(["arc-challenge", "mbpp"])),
            "oracle_model_to_route_to": draw(st.sampled_from([*models, "no_model_correct"])),
            "_parts": parts,
        }
        for m in models:
            row[m] = draw(st.sampled_from([0.0, 1.0, 0.5, None]))
            row[m + "|model_response"] = repr([draw(_text)])
            row[m + "|total_cost"] = draw(st.floats(0, 0.125, allow_nan=False, width=32))
        rows.append(row)
    quality = draw(st.permutations(models))
    responses = draw(st.permutations([m + "|model_response" for m in models]))
    costs = draw(st.permutations([m + "|total_cost" for m in models]))
    columns = [*HEADER_FIXED, *quality, *responses, *costs, "oracle_model_to_route_to"]
    return {"models": models, "rows": rows, "columns": columns}


def _quiet_read(paths: list[Path], **options: Any) -> RoutingTable:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        return read_routerbench(paths, **options)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=wide_files(), reorder=st.randoms(use_true_random=False))
def test_generated_csv_round_trip(tmp_path_factory: pytest.TempPathFactory, spec: dict, reorder: random.Random) -> None:
    tmp = tmp_path_factory.mktemp("rb")
    models: list[str] = spec["models"]
    rows: list[dict] = spec["rows"]
    path = write_csv(tmp / "demo_train.csv", rows, spec["columns"])
    t = _quiet_read([path])
    assert t.actor_names == sorted(models)
    want = np.array([[np.nan if r[m] is None else r[m] for m in sorted(models)] for r in rows], dtype=np.float32)
    assert same_cells(t.score, want)
    want_cost = np.array([[r[m + "|total_cost"] for m in sorted(models)] for r in rows], dtype=np.float32)
    assert same_cells(t.cost_usd, want_cost)
    assert t.queries.text.tolist() == ["\n\n".join(r["_parts"]) for r in rows]
    assert t.queries.extra["sample_id"].tolist() == [r["sample_id"] for r in rows]
    assert [i.split("#")[0] for i in t.queries.ids.tolist()] == [r["sample_id"] for r in rows]
    assert t.queries.dataset.tolist() == [r["eval_name"] for r in rows]
    assert set(t.queries.split.tolist()) == {"train"}

    # the same data with every column group in another order gives the same table
    columns = list(spec["columns"])
    reorder.shuffle(columns)
    (tmp / "other").mkdir()
    other = write_csv(tmp / "other" / "demo_train.csv", rows, columns)
    assert _quiet_read([other]).content_hash == t.content_hash

    # a pickle of the same columns (dict of lists, and list of row dicts) reads the same
    cols = {c: [r.get(c) for r in rows] for c in spec["columns"]}
    records = [{c: r.get(c) for c in spec["columns"]} for r in rows]
    by_index = {c: {10 + i: v for i, v in enumerate(vals)} for c, vals in cols.items()}  # DataFrame.to_dict()
    for obj in (cols, records, by_index):
        pkl = tmp / "pkl" / "demo_train.pkl"
        pkl.parent.mkdir(exist_ok=True)
        pkl.write_bytes(pickle.dumps(obj))
        assert _quiet_read([pkl], trust_pickle=True).content_hash == t.content_hash


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    spec=wide_files(),
    cut=st.integers(0, 10_000),
    junk=st.text(alphabet="\",\n\r[]'x1.-", min_size=1, max_size=6),
)
def test_mangled_csv_raises_only_data_error(
    tmp_path_factory: pytest.TempPathFactory, spec: dict, cut: int, junk: str
) -> None:
    tmp = tmp_path_factory.mktemp("rbbad")
    path = write_csv(tmp / "x_test.csv", spec["rows"], spec["columns"])
    raw = path.read_text(encoding="utf-8")
    at = cut % (len(raw) + 1)
    path.write_text(raw[:at] + junk + raw[at + len(junk) :], encoding="utf-8")
    try:
        _quiet_read([path])
    except DataError as err:
        assert "x_test.csv" in str(err)


# ---------------------------------------------------------------- bad input


def _one_row(tmp_path: Path, **cells: object) -> Path:
    row: dict[str, object] = {"": 0, "sample_id": "a.1", "prompt": "['hi']", "eval_name": "mbpp", "m1": 1.0}
    row.update({"m1|model_response": "['x']", "m1|total_cost": 0.001, "oracle_model_to_route_to": "m1"})
    row.update(cells)
    columns = [*HEADER_FIXED, "m1", "m1|model_response", "m1|total_cost", "oracle_model_to_route_to"]
    good = dict(row, **{"sample_id": "a.0", "prompt": "['ok']", "m1": 0.0, "m1|total_cost": 0.0})
    return write_csv(tmp_path / "bad_train.csv", [good, row], columns)


@pytest.mark.parametrize(
    ("cells", "field"),
    [
        ({"m1": "abc"}, "m1"),
        ({"m1": "1.7"}, "m1"),
        ({"m1": "-1"}, "m1"),
        ({"m1|total_cost": "cheap"}, "m1|total_cost"),
        ({"m1|total_cost": "-0.5"}, "m1|total_cost"),
        ({"prompt": "['unterminated"}, "prompt"),
        ({"prompt": "{'a': 1}"}, "prompt"),
        ({"sample_id": ""}, "sample_id"),
    ],
)
def test_malformed_cell_names_file_row_field(tmp_path: Path, cells: dict[str, object], field: str) -> None:
    path = _one_row(tmp_path, **cells)
    with pytest.raises(DataError) as info:
        read_routerbench([path])
    assert_names(info.value, path, row=3, field=field)


def test_row_number_is_the_line_where_a_multiline_record_starts(tmp_path: Path) -> None:
    columns = [*HEADER_FIXED, "m1", "m1|model_response"]
    rows = [{"": 0, "sample_id": "a", "prompt": "['p']", "eval_name": "e", "m1": 1.0, "m1|model_response": "a\nb\nc"}]
    rows.append({"": 1, "sample_id": "b", "prompt": "['x']", "eval_name": "e", "m1": "2"})
    path = write_csv(tmp_path / "x.csv", rows, columns)
    with pytest.raises(DataError) as info:
        read_routerbench([path])
    assert_names(info.value, path, row=5, field="m1")


def test_short_row_and_missing_column(tmp_path: Path) -> None:
    path = tmp_path / "short.csv"
    path.write_text(",sample_id,prompt,eval_name,m1\n0,a,['x'],e\n", encoding="utf-8")
    with pytest.raises(DataError) as info:
        read_routerbench([path])
    assert_names(info.value, path, row=2, field="m1")
    path.write_text("id,question,m1\n0,x,1\n", encoding="utf-8")
    with pytest.raises(DataError) as info:
        read_routerbench([path])
    assert_names(info.value, path, row=1, field="sample_id")


def test_missing_file_and_wrong_format(tmp_path: Path) -> None:
    with pytest.raises(DataError) as info:
        read_routerbench([tmp_path / "nope.csv"])
    assert_names(info.value, tmp_path / "nope.csv")
    assert "no such file" in str(info.value)
    js = tmp_path / "data.json"
    js.write_text("[]", encoding="utf-8")
    with pytest.raises(DataError, match=r"data\.json.*\.csv files or a pickle"):
        read_routerbench([js])
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="holds no"):
        read_routerbench([tmp_path / "empty"])
    blank = tmp_path / "blank.csv"
    blank.write_text("", encoding="utf-8")
    with pytest.raises(DataError, match=r"blank\.csv, row 1: empty file"):
        read_routerbench([blank])


def test_pickle_needs_trust_and_pandas(tmp_path: Path) -> None:
    pkl = tmp_path / "routerbench_0shot.pkl"
    pkl.write_bytes(pickle.dumps({"sample_id": ["a"], "prompt": [["hi"]], "eval_name": ["e"], "m": [1.0]}))
    with pytest.raises(DataError, match=r"routerbench_0shot\.pkl: .*--trust-pickle"):
        read_routerbench([pkl])
    t = read_routerbench([pkl], trust_pickle=True)
    assert t.queries.text.tolist() == ["hi"] and t.split_counts() == {"": 1}
    try:
        import pandas  # noqa: F401
    except ImportError:
        frame = tmp_path / "frame.pkl"
        frame.write_bytes(b"cpandas.core.frame\nDataFrame\n)R.")  # what a DataFrame pickle starts with
        with pytest.raises(DataError, match=r"frame\.pkl: .*needs pandas: pip install pandas"):
            read_routerbench([frame], trust_pickle=True)
    odd = tmp_path / "odd.pkl"
    odd.write_bytes(pickle.dumps(42))
    with pytest.raises(DataError, match=r"odd\.pkl: unsupported pickle content int"):
        read_routerbench([odd], trust_pickle=True)
    broken = tmp_path / "broken.pkl"
    broken.write_bytes(b"\x80\x04not a pickle")
    with pytest.raises(DataError, match=r"broken\.pkl: cannot unpickle"):
        read_routerbench([broken], trust_pickle=True)


def test_model_missing_in_one_file_and_orphan_cost(tmp_path: Path) -> None:
    a = write_csv(
        tmp_path / "a_train.csv",
        [{"sample_id": "x", "prompt": "['p']", "eval_name": "e", "m1": 1.0, "m2": 0.0}],
        ["sample_id", "prompt", "eval_name", "m1", "m2"],
    )
    b = write_csv(
        tmp_path / "a_test.csv",
        [{"sample_id": "x", "prompt": "['q']", "eval_name": "e", "m1": 0.0, "m3|total_cost": 0.1}],
        ["sample_id", "prompt", "eval_name", "m1", "m3|total_cost"],
    )
    with pytest.warns(DataWarning) as rec:
        t = read_routerbench([a, b])
    texts = warning_texts(rec.list)
    assert has_warning(texts, r"a_test\.csv: no column for 1 model\(s\) other files have, left NaN: m2")
    assert has_warning(texts, r"a_test\.csv: cost/response columns of model\(s\) with no quality column .*: m3")
    assert has_warning(texts, re.escape("no '<model>|total_cost' column for m1"))
    assert t.queries.ids.tolist() == ["x", "x#2"]
    assert same_cells(t.score, np.array([[1, 0], [0, np.nan]]))
    assert t.cost_usd is None
