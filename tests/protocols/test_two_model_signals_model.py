"""Hidden states paired with the wrong model (issue 21): an extract directory's manifest records its model, a
collected or joined table records each actor's; ``two-model --features`` refuses another model's signals where
both record it and warns, naming both, where the table does not. Through Python, the CLI and an experiment file."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab import RoutingTable
from routerlab.cli import main
from routerlab.data._files import DataWarning
from routerlab.data.join import join
from routerlab.data.table import Actors
from routerlab.errors import DataError
from routerlab.features.signals import check_signals_model, recorded_model
from routerlab.llm.extract import text_hash
from routerlab.protocols.two_model import run_two_model
from tests.protocols.test_two_model import synthetic

SMOL_ID = "local:" + "a" * 64
LLAMA_ID = "local:" + "b" * 64


def extract_dir(path: Path, table: RoutingTable, model_id: str | None, spec: str | None) -> Path:
    """Signals of every query of ``table`` in the on-disk format of routerlab extract, the manifest recording
    ``model_id`` and ``spec`` (None: left out)."""
    shards = path / "shards"
    shards.mkdir(parents=True)
    rows = [{"key": f"k{i}", "id": str(q), "text_sha": text_hash(str(t)), "option_logits": [0.5, -0.5],
             "self_ask": 0.0, "samples": []}
            for i, (q, t) in enumerate(zip(table.queries.ids.tolist(), table.queries.text.tolist(), strict=True))]
    np.savez(shards / "s1.npz", keys=np.asarray([r["key"] for r in rows]),
             hidden=np.zeros((len(rows), 2, 3), dtype=np.float16))
    (shards / "s1.json").write_text(json.dumps({"version": 1, "rows": rows}))
    manifest: dict[str, Any] = {"format": "routerlab-signals", "version": 1, "layers": 2, "dim": 3}
    if model_id is not None:
        manifest["model_id"] = model_id
    if spec is not None:
        manifest["spec"] = spec
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


def with_models(table: RoutingTable, **columns: list[Any]) -> RoutingTable:
    """``table`` whose actors (L, M, S) carry the given metadata columns, as a collected table's do."""
    a = table.actors
    actors = Actors.create(a.names, params_b=a.params_b, extra={k: np.array(v, dtype=object)
                                                                 for k, v in columns.items()})
    return RoutingTable(queries=table.queries, actors=actors, score=table.score, name="collected", meta=table.meta)


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return synthetic()


def _run(table: RoutingTable, signals: Path) -> None:
    run_two_model(table, "S", "L", ["best-single"], signals=signals, ood_datasets=["c"], split="given", n_boot=5)


def test_another_models_hidden_states_are_an_error(table: RoutingTable, tmp_path: Path) -> None:
    signals = extract_dir(tmp_path / "smol", table, SMOL_ID + ":bfloat16", "local:smollm2-135m,threads=2")
    collected = with_models(table, model_id=[None, None, LLAMA_ID + ":bfloat16"],
                            spec=["x:l", "x:m", "local:/models/llama-2-7b"])
    with pytest.raises(DataError, match=r"field 'model_id': the signals are hidden states of local:smollm2-135m, "
                                        r"but the small model 'S' of table 'collected' is local:/models/llama-2-7b"):
        _run(collected, signals)


def test_same_weights_in_another_dtype_pass_quietly(table: RoutingTable, tmp_path: Path) -> None:
    signals = extract_dir(tmp_path / "smol", table, SMOL_ID + ":float32", "local:smollm2-135m")
    collected = with_models(table, model_id=[None, None, SMOL_ID + ":bfloat16"], spec=["x:l", "x:m", "local:/m"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _run(collected, signals)


def test_spec_only_records_compare_kind_and_model(table: RoutingTable, tmp_path: Path) -> None:
    """An older collected table records the spec alone (meta["collect"]): its KIND:MODEL is compared."""
    signals = extract_dir(tmp_path / "smol", table, None, "local:smollm2-135m,dtype=float32")
    meta = {"collect": {"actors": {"S": {"spec": "local:qwen2.5-coder-1.5b,threads=1"}}}}
    older = RoutingTable(queries=table.queries, actors=table.actors, score=table.score, name="old", meta=meta)
    assert recorded_model(older, "S") == {"spec": "local:qwen2.5-coder-1.5b,threads=1"}
    with pytest.raises(DataError, match=r"hidden states of local:smollm2-135m, but the small model 'S' of table "
                                        r"'old' is local:qwen2\.5-coder-1\.5b"):
        check_signals_model(signals, older, "S")
    meta["collect"]["actors"]["S"]["spec"] = "local:smollm2-135m"
    check_signals_model(signals, older, "S")


def test_a_table_that_records_no_model_warns_naming_both(table: RoutingTable, tmp_path: Path) -> None:
    signals = extract_dir(tmp_path / "smol", table, SMOL_ID + ":bfloat16", "local:smollm2-135m")
    with pytest.warns(DataWarning, match=r"smol, field 'model_id': the signals are hidden states of "
                                         r"local:smollm2-135m; table 'table' does not record which model actor "
                                         r"'S' is") as caught:
        _run(table, signals)
    assert len([w for w in caught if issubclass(w.category, DataWarning)]) == 1


def test_join_keeps_the_recorded_model(table: RoutingTable, tmp_path: Path) -> None:
    small = with_models(table.select_actors(["S"]), model_id=[LLAMA_ID + ":bfloat16"], spec=["local:/llama"])
    joined = join([small, table.select_actors(["L"])], small="S", large="L")
    assert recorded_model(joined, "S") == {"model_id": LLAMA_ID + ":bfloat16", "spec": "local:/llama"}
    signals = extract_dir(tmp_path / "smol", table, SMOL_ID + ":bfloat16", "local:smollm2-135m")
    with pytest.raises(DataError, match="but the small model 'S'"):
        run_two_model(joined, "S", "L", ["best-single"], signals=signals, split="random:0.3", n_boot=5)


def test_cli_and_experiment_refuse_in_one_line(table: RoutingTable, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERLAB_PROGRESS", "0")
    collected = with_models(table, model_id=[None, None, LLAMA_ID + ":bfloat16"], spec=["x:l", "x:m", "local:/ll"])
    collected.save(tmp_path / "t")
    signals = extract_dir(tmp_path / "smol", table, SMOL_ID + ":bfloat16", "local:smollm2-135m")
    code = main(["two-model", str(tmp_path / "t"), "--small", "S", "--large", "L", "--routers", "best-single",
                 "--features", str(signals), "--ood", "c", "--split", "given", "--boot", "40"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err.startswith(f"routerlab: error: {signals}, field 'model_id': the signals are hidden states of "
                          "local:smollm2-135m, but the small model 'S'")
    (tmp_path / "exp.toml").write_text(
        'name = "x"\nrouters = ["best-single"]\nseeds = [0]\n'
        'protocols = [{ name = "two-model", small = "S", large = "L", features = "smol", '
        'ood_datasets = ["c"] }]\n[settings]\nn_boot = 40\n[[tables]]\npath = "t"\nsplit = "given"\n', encoding="utf-8")
    code = main(["run", str(tmp_path / "exp.toml"), "--store", str(tmp_path / "store")])
    captured = capsys.readouterr()
    assert "the signals are hidden states of local:smollm2-135m, but the small model 'S'" in captured.err, \
        captured
