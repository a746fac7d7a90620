"""Task sets read from LLMRouter's query files in the shared data: GSM8K problems needing >= 2 calculator steps
(arithmetic) and MBPP tasks with their asserts (code), upstream splits kept, gold answers and tests hidden."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from routerlab.errors import DataError, UsageError
from routerlab.llm.agent.tasksets import QUERY_FILES, data_dir, get_taskset, taskset_names
from tests import missing_requirement

SHARED = Path(__file__).resolve().parents[4] / "shared" / "data"


def _shared() -> Path:
    if not (SHARED / QUERY_FILES.format(split="train")).is_file():
        missing_requirement(f"the shared data is not at {SHARED}")
    return SHARED


def _write(root: Path, rows: dict[str, list[dict[str, object]]]) -> Path:
    for split, items in rows.items():
        path = root / QUERY_FILES.format(split=split)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in items), encoding="utf-8")
    return root


GSM = {"task_name": "gsm8k", "metric": "GSM8K", "choices": None, "task_id": None}


def test_arithmetic_keeps_problems_with_two_calculator_steps(tmp_path: Path) -> None:
    root = _write(tmp_path, {
        "train": [{**GSM, "query": "one step", "ground_truth": "2+2 = <<2+2=4>>4\n#### 4"},
                  {**GSM, "query": "two steps", "ground_truth": "a <<2*3=6>>6 b <<6+1=7>>7\n#### 7"},
                  {"task_name": "math", "query": "x", "ground_truth": "y"}],
        "test": [{**GSM, "query": "three", "ground_truth": "<<1+1=2>> <<2+1=3>> <<3*2=6>>\n#### 6"},
                 {**GSM, "query": "no gold", "ground_truth": "<<1+1=2>> <<2+1=3>>"}]})
    tasks = get_taskset("arithmetic").load(root)
    assert [(t.id, t.text, t.split, t.meta["reference_steps"]) for t in tasks] == [
        ("gsm8k-train-2", "two steps", "train", 2), ("gsm8k-test-1", "three", "test", 3)]
    assert tasks[0].reference.endswith("#### 7") and tasks[0].dataset == "gsm8k"


def test_missing_data_names_the_path_and_the_option(tmp_path: Path) -> None:
    with pytest.raises(DataError) as info:
        get_taskset("arithmetic").load(tmp_path)
    text = str(info.value)
    assert str(tmp_path / QUERY_FILES.format(split="train")) in text and "--data DIR" in text


def test_data_dir_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ROUTERLAB_SHARED_DATA", raising=False)
    assert data_dir(None) == Path("..") / "shared" / "data"
    monkeypatch.setenv("ROUTERLAB_SHARED_DATA", str(tmp_path))
    assert data_dir(None) == tmp_path and data_dir("x") == Path("x")


def test_unknown_task_set() -> None:
    assert {"arithmetic", "code"} <= set(taskset_names())
    with pytest.raises(UsageError, match="--agent: unknown task set 'chess'; known: arithmetic, code"):
        get_taskset("chess")
    with pytest.raises(UsageError, match="--max-tokens must be an integer >= 1"):
        get_taskset("code", max_tokens=0)
    assert get_taskset("code", max_tokens=64).max_tokens == 64 and get_taskset("code").max_tokens == 160


@pytest.mark.shared_data
def test_arithmetic_from_the_shared_data() -> None:
    tasks = get_taskset("arithmetic").load(_shared())
    assert len(tasks) == len({t.id for t in tasks}) > 400
    assert {t.split for t in tasks} == {"train", "test"}
    assert all(t.meta["reference_steps"] >= 2 for t in tasks)
    assert all(len(re.findall(r"<<[^<>]*=[^<>]*>>", t.reference)) == t.meta["reference_steps"] for t in tasks)
    assert all("####" in t.reference for t in tasks)


@pytest.mark.shared_data
def test_code_from_the_shared_data_shows_one_assert() -> None:
    code = get_taskset("code")
    tasks = code.load(_shared())
    assert len(tasks) == 550 and {t.split for t in tasks} == {"train", "test"}
    first = tasks[0]
    prompt = code.prompt(first)
    assert prompt.startswith(f"Task: {first.text.strip()}\nTest: assert ")
    assert prompt.count("assert") == 1 and first.meta["n_tests"] >= 3 and first.reference.count("assert") >= 3
