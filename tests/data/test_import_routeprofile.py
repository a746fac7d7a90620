"""The ``routeprofile`` importer on RouteProfile's routing_test_data.json (+ candidate models, domains)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routerlab.data.importers._common import DataWarning
from routerlab.data.importers.routeprofile import read_routeprofile
from routerlab.data.quality import train_test_overlap
from routerlab.data.table import RoutingTable
from routerlab.errors import DataError
from tests.data.importer_checks import assert_names, has_warning, mean_scores, same_cells, warning_texts

# model: (mean task_performance, median completion tokens, max completion tokens, in $/1M, out $/1M, params_b)
README = {
    "qwen2.5-7b-instruct": (0.499, 40.5, 671, 0.2, 0.2, 7.616),
    "gemma-2-9b-it": (0.532, 55, 514, 0.1, 0.1, 9.0),
    "llama-3.1-8b-instruct": (0.530, 68, 1024, 0.2, 0.2, 8.03),
    "mixtral-8x7b-instruct-v0.1": (0.476, 112.5, 1024, 0.6, 0.6, 46.703),
    "mixtral-8x22b-instruct-v0.1": (0.557, 96, 1024, 1.2, 1.2, 140.621),
    "llama-3.2-3b-instruct": (0.490, 62, 1024, 0.06, 0.06, 3.213),
    "mistral-small-24b-instruct-2501-bf16": (0.612, 79, 1024, 0.1, 0.3, 23.572),
    "llama-3.3-70b-instruct": (0.610, 108.5, 1024, 0.88, 0.88, 70.554),
}
TASKS = [
    "agentverse-logicgrid",
    "agentverse-mgsm",
    "commongen",
    "natural_qa",
    "trivia_qa",
    "mmlu",
    "mbpp",
    "human_eval",
    "gsm8k",
    "commonsense_qa",
    "openbook_qa",
    "arc_challenge",
]


@pytest.fixture(scope="module")
def real(shared_data: Path) -> tuple[RoutingTable, list[str]]:
    with pytest.warns(DataWarning, match=r"tasks belong to several domains") as rec:
        table = read_routeprofile([shared_data / "routeprofile" / "route_data" / "routing_test_data.json"])
    return table, warning_texts(rec.list)


def test_real_counts(real: tuple[RoutingTable, list[str]]) -> None:
    t, _ = real
    assert (t.n_queries, t.n_actors) == (600, 8)
    assert t.actor_names == sorted(README)
    assert t.dataset_counts() == dict.fromkeys(sorted(TASKS), 50)
    assert t.split_counts() == {"test": 600}
    assert not np.isnan(t.score).any()
    assert t.queries.ids[0] == "routing_test_data:0" and len(set(t.queries.ids.tolist())) == 600
    assert train_test_overlap(t) == 0


def test_real_scores_and_tokens(real: tuple[RoutingTable, list[str]]) -> None:
    t, _ = real
    s = t.score
    frac = (s > 0) & (s < 1)
    assert (int((s == 1).sum()), int((s == 0).sum()), int(frac.sum())) == (2315, 2131, 354)
    assert set(t.queries.extra["metric"][frac.any(axis=1)].tolist()) == {"commongen_coverage"}
    means = mean_scores(t)
    assert t.tokens_in is not None and t.tokens_out is not None
    for j, name in enumerate(t.actor_names):
        mean, median, top, *_ = README[name]
        assert round(means[name], 3) == mean
        assert float(np.median(t.tokens_out[:, j])) == median
        assert float(t.tokens_out[:, j].max()) == top
    assert not np.isnan(t.tokens_in).any() and float(t.tokens_in[0, t.actor_names.index("qwen2.5-7b-instruct")]) == 541


def test_real_prices_params_and_derived_cost(real: tuple[RoutingTable, list[str]]) -> None:
    t, _ = real
    a = t.actors
    for j, name in enumerate(t.actor_names):
        *_, pin, pout, params = README[name]
        assert (a.input_price[j], a.output_price[j], a.params_b[j]) == (pin, pout, params)
    assert a.extra["size"].tolist()[t.actor_names.index("mixtral-8x7b-instruct-v0.1")] == "56B"
    assert t.meta["derived"] == ["cost_usd = (tokens_in * input_price + tokens_out * output_price) / 1e6"]
    assert t.cost_usd is not None and t.tokens_in is not None and t.tokens_out is not None
    want = (t.tokens_in * a.input_price[None, :] + t.tokens_out * a.output_price[None, :]) / 1e6
    np.testing.assert_allclose(t.cost_usd, want, rtol=1e-6)


def test_real_metadata(real: tuple[RoutingTable, list[str]]) -> None:
    x = real[0].queries.extra
    ds = real[0].queries.dataset
    metric = {m: int((x["metric"] == m).sum()) for m in set(x["metric"].tolist())}
    assert metric == {
        "em_mc": 250,
        "f1_score": 100,
        "code_eval": 100,
        "math": 50,
        "commongen_coverage": 50,
        "gsm8k": 50,
    }
    assert int((x["task_id"] == "").sum()) == 450
    choices = [json.loads(c) for c in x["choices"].tolist() if c]
    assert len(choices) == 300 and all(isinstance(c, dict | list) for c in choices)  # mmlu, mbpp: lists
    domain = dict(zip(ds.tolist(), x["domain"].tolist(), strict=True))
    assert domain["natural_qa"] == "knowledge|qa" and domain["commongen"] == "qa|alignment"
    assert domain["mbpp"] == "coding" and domain["agentverse-mgsm"] == "math"
    assert all(domain[t] for t in TASKS)


def test_real_warnings(real: tuple[RoutingTable, list[str]]) -> None:
    texts = real[1]
    assert has_warning(
        texts, r"domain_task_map\.json: 3 tasks belong to several domains.*commongen, natural_qa, trivia_qa"
    )
    assert has_warning(texts, r"candidate_models\.json, field 'mixtral-8x7b-instruct-v0\.1\.size': size '56B' differs")
    assert has_warning(
        texts, r"field 'mixtral-8x22b-instruct-v0\.1\.size': size '176B' differs from parameters 140\.621"
    )
    assert len(texts) == 3  # success is true and input_token == prompt_tokens in every cell


def test_profile_files_as_paths_give_the_same_table(shared_data: Path, real: tuple[RoutingTable, list[str]]) -> None:
    root = shared_data / "routeprofile"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        t = read_routeprofile([root / "profile_data", root / "route_data"])
    assert t.content_hash == real[0].content_hash




# ---------------------------------------------------------------- generated files

MODELS = ["m1", "m-2", "big/m3"]


@st.composite
def profile_items(draw: st.DrawFn) -> list[dict]:
    items = []
    for i in range(draw(st.integers(1, 5))):
        perf = {}
        for m in draw(st.permutations(MODELS)):
            if draw(st.integers(0, 5)) == 0:
                continue  # this model has no entry for this query
            pt, ct = draw(st.integers(0, 5000)), draw(st.integers(0, 1024))
            perf[m] = {
                "response": "r",
                "prompt_tokens": pt,
                "completion_tokens": ct,
                "input_token": pt,
                "output_token": ct,
                "success": draw(st.booleans()),
                "task_performance": draw(st.one_of(st.sampled_from([0.0, 1.0, 0, 1]), st.floats(0, 1))),
            }
        items.append(
            {
                "task_name": draw(st.sampled_from(["mmlu", "gsm8k", "new_task"])),
                "query": f"q{i}",
                "ground_truth": "A",
                "metric": "em_mc",
                "choices": draw(st.sampled_from([None, "{'text': ['1', '2'], 'labels': ['A', 'B']}", "['x', 'y']"])),
                "task_id": draw(st.sampled_from([None, "t1"])),
                "model_performance": perf,
            }
        )
    return items


PRICES = {"m1": (0.1, 0.2), "m-2": (1.0, 3.0), "big/m3": (0.0, 0.5)}


def _write_profile(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    models = {m: {"size": "7B", "input_price": str(i), "output_price": o} for m, (i, o) in PRICES.items()}
    (folder / "candidate_models.json").write_text(json.dumps(models))
    (folder / "domain_task_map.json").write_text(json.dumps({"knowledge": ["mmlu"], "math": ["gsm8k", "math"]}))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=profile_items())
def test_generated_round_trip(tmp_path_factory: pytest.TempPathFactory, items: list[dict]) -> None:
    root = tmp_path_factory.mktemp("rp")
    _write_profile(root / "profile_data")
    (root / "route_data").mkdir()
    path = root / "route_data" / "routing_test_data.json"
    path.write_text(json.dumps(items))
    names = sorted({m for it in items for m in it["model_performance"]})
    if not names:
        with pytest.raises(DataError, match="no model results"):
            read_routeprofile([path])
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        t = read_routeprofile([path])
    assert t.actor_names == names

    def cell(key: str, it: dict, m: str) -> float:
        res = it["model_performance"].get(m)
        if res is None or (key == "task_performance" and not res["success"]):
            return np.nan
        return float(res[key])

    for key, mat in (
        ("task_performance", t.score),
        ("prompt_tokens", t.tokens_in),
        ("completion_tokens", t.tokens_out),
    ):
        assert same_cells(mat, np.array([[cell(key, it, m) for m in names] for it in items]))
    pin = np.array([PRICES[m][0] for m in names])
    pout = np.array([PRICES[m][1] for m in names])
    assert t.tokens_in is not None and t.tokens_out is not None and t.cost_usd is not None
    want = (t.tokens_in.astype(np.float64) * pin + t.tokens_out.astype(np.float64) * pout) / 1e6
    np.testing.assert_allclose(t.cost_usd, want.astype(np.float32), rtol=1e-6)
    assert t.queries.dataset.tolist() == [it["task_name"] for it in items]
    domains = {"mmlu": "knowledge", "gsm8k": "math", "new_task": ""}
    assert t.queries.extra["domain"].tolist() == [domains[it["task_name"]] for it in items]
    assert set(t.queries.split.tolist()) == {"test"}


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=profile_items(), cut=st.integers(0, 5000), junk=st.text(alphabet='{}[]",:01.-tfn', min_size=1, max_size=5))
def test_mangled_json_raises_only_data_error(
    tmp_path_factory: pytest.TempPathFactory, items: list, cut: int, junk: str
) -> None:
    tmp = tmp_path_factory.mktemp("rpbad")
    raw = json.dumps(items)
    at = cut % (len(raw) + 1)
    path = tmp / "routing_test_data.json"
    path.write_text(raw[:at] + junk + raw[at + len(junk) :])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataWarning)
            read_routeprofile([path])
    except DataError as err:
        assert "routing_test_data.json" in str(err)


# ---------------------------------------------------------------- traps and bad input


def _item(**result: object) -> dict:
    res: dict[str, object] = {"prompt_tokens": 10, "completion_tokens": 5, "input_token": 10, "output_token": 5}
    res["success"] = True
    res["task_performance"] = 1.0
    res.update(result)
    return {"task_name": "mmlu", "query": "q", "model_performance": {"a": res}}


def test_success_false_and_token_mismatch_warn(tmp_path: Path) -> None:
    path = tmp_path / "routing_test_data.json"
    path.write_text(json.dumps([_item(), _item(success=False, task_performance=0.0), _item(input_token=11)]))
    with pytest.warns(DataWarning) as rec:
        t = read_routeprofile([path])
    texts = warning_texts(rec.list)
    assert has_warning(texts, r"routing_test_data\.json, field 'success': 1 cell has success: false; .* NaN")
    assert has_warning(
        texts, r"field 'prompt_tokens': 1 cell has prompt_tokens != input_token; prompt_tokens is used"
    )
    assert has_warning(texts, r"no candidate_models\.json found: prices unknown")
    assert same_cells(t.score, np.array([[1.0], [np.nan], [1.0]]))
    assert same_cells(t.tokens_in, np.array([[10.0], [10.0], [10.0]]))
    assert t.cost_usd is None


@pytest.mark.parametrize(
    ("result", "field"),
    [
        ({"task_performance": "abc"}, "model_performance.a.task_performance"),
        ({"task_performance": 1.7}, "model_performance.a.task_performance"),
        ({"task_performance": None, "success": True, "x": 1}, None),
        ({"prompt_tokens": "many"}, "model_performance.a.prompt_tokens"),
        ({"completion_tokens": -3}, "model_performance.a.completion_tokens"),
    ],
)
def test_malformed_cell_names_file_row_field(tmp_path: Path, result: dict, field: str | None) -> None:
    path = tmp_path / "routing_test_data.json"
    path.write_text(json.dumps([_item(), _item(**result)]))
    if field is None:  # a null score is "not observed", not an error
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataWarning)
            assert np.isnan(read_routeprofile([path]).score[1, 0])
        return
    with pytest.raises(DataError) as info:
        read_routeprofile([path])
    assert_names(info.value, path, row=2, field=field)


def test_missing_fields_and_wrong_format(tmp_path: Path) -> None:
    path = tmp_path / "routing_test_data.json"
    bad = _item()
    del bad["model_performance"]["a"]["task_performance"]
    for item, field in (
        (bad, "model_performance.a.task_performance"),
        ({"task_name": "t", "model_performance": {}}, "query"),
        ({"query": "q"}, "model_performance"),
        ({"query": "q", "model_performance": {"a": 1}}, "model_performance.a"),
        ({**_item(), "choices": "{'text': [1,"}, "choices"),
    ):
        path.write_text(json.dumps([_item(), item]))
        with pytest.raises(DataError) as info:
            read_routeprofile([path])
        assert_names(info.value, path, row=2, field=field)
    with pytest.raises(DataError) as info:
        read_routeprofile([tmp_path / "missing.json"])
    assert_names(info.value, tmp_path / "missing.json")
    csv_file = tmp_path / "data.csv"
    csv_file.write_text("a,b\n")
    with pytest.raises(DataError, match=r"data\.csv: routeprofile reads JSON"):
        read_routeprofile([csv_file])
    odd = tmp_path / "odd.json"
    odd.write_text('{"a": 1}')
    with pytest.raises(DataError, match=r"odd\.json: a JSON object that is neither"):
        read_routeprofile([odd])
    models = tmp_path / "m.json"
    models.write_text(json.dumps({"a": {"input_price": "free", "output_price": 1}}))
    path.write_text(json.dumps([_item()]))
    with pytest.raises(DataError) as info:
        read_routeprofile([path, models])
    assert_names(info.value, models, field="a.input_price")
