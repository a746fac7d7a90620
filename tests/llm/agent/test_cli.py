"""``routerlab collect --agent``: option errors are one line and exit 2, before any model loads; a run with a
scripted backend writes a table with episodes and a rerun is served from the caches."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from routerlab.llm import base as llm_base
from routerlab.llm.agent.tasksets import QUERY_FILES
from routerlab.llm.base import BackendSpec, register_backend
from tests import run_main
from tests.llm.agent.test_loop import AgentScript

GSM = {"task_name": "gsm8k", "metric": "GSM8K", "choices": None, "task_id": None}
ROWS = {
    "train": [{**GSM, "query": f"Question {i}: {i} boxes of 3 apples and one more?",
               "ground_truth": f"<<{i}*3={3 * i}>> <<{3 * i}+1={3 * i + 1}>>\n#### {3 * i + 1}"} for i in range(1, 7)],
    "test": [{**GSM, "query": f"Question {i}: {i} boxes of 3 apples and one more?",
              "ground_truth": f"<<{i}*3={3 * i}>> <<{3 * i}+1={3 * i + 1}>>\n#### {3 * i + 1}"} for i in range(7, 9)],
}


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    root = tmp_path / "shared"
    for split, rows in ROWS.items():
        path = root / QUERY_FILES.format(split=split)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return root


@pytest.fixture()
def agent_kind() -> Iterator[list[AgentScript]]:
    """A scripted agent as a registered backend kind: it multiplies with the calculator, adds one, answers."""
    made: list[AgentScript] = []
    script = {}
    for rows in ROWS.values():
        for r in rows:
            q = str(r["query"])
            n = int(q.split()[1].rstrip(":"))
            script[f"Question: {q}"] = [f"Thought: boxes.\nAction: calculator[{n}*3]",
                                        f"Action: calculator[{3 * n}+1]", f"Final Answer: {3 * n + 1}"]

    class Registered(AgentScript):
        def __init__(self, spec: BackendSpec, *, cache_dir: Path | None = None) -> None:
            super().__init__(spec, cache_dir=cache_dir, script=script)
            made.append(self)

    register_backend("agent-cli-test")(Registered)
    yield made
    llm_base._REGISTRY.remove("agent-cli-test")


def _one_error(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(("extra", "message"), [
    (["--agent", "chess"], "--agent: unknown task set 'chess'; known: arithmetic, code"),
    (["--agent", "arithmetic", "--grader", "number"], "--grader does not apply with --agent"),
    (["--agent", "arithmetic", "--mode", "logits"], "--mode does not apply with --agent"),
    (["--max-steps", "3"], "--max-steps applies only with --agent TASKSET"),
    ([], "collect needs a TABLE (or .jsonl file) of questions, or --agent TASKSET"),
    (["--data", "x"], "--data applies only with --agent TASKSET"),
])
def test_option_errors(extra: list[str], message: str, data: Path, tmp_path: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
    where = ["--data", str(data)] if "--agent" in extra else []
    code, _, err = run_main(["collect", "-a", "x=agent-cli-test:m", *where, "-o", str(tmp_path / "out"), *extra],
                            capsys)
    assert code == 2 and message in _one_error(err)


@pytest.mark.parametrize(("option", "value"), [("--max-steps", "0"), ("--max-steps", "-1"), ("--limit", "0"),
                                               ("--batch-size", "0")])
def test_range_errors(option: str, value: str, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["collect", "--agent", "arithmetic", "-a", "x=agent-cli-test:m", "--data", str(data),
                             "-o", str(tmp_path / "out"), option, value], capsys)
    assert code == 2 and option in err


def test_missing_data_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  agent_kind: list[AgentScript]) -> None:
    code, _, err = run_main(["collect", "--agent", "arithmetic", "-a", "x=agent-cli-test:m", "--data",
                             str(tmp_path / "nowhere"), "-o", str(tmp_path / "out")], capsys)
    line = _one_error(err)
    assert code == 2 and str(tmp_path / "nowhere") in line and "--data DIR" in line and not agent_kind


def test_run_writes_episodes_and_a_rerun_is_cached(data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   agent_kind: list[AgentScript]) -> None:
    from routerlab.data.store import load

    out = tmp_path / "out"
    argv = ["collect", "--agent", "arithmetic", "-a", "x=agent-cli-test:m", "--data", str(data), "--limit", "4",
            "--cache-dir", str(tmp_path / "cache"), "-o", str(out), "--json"]
    code, stdout, _ = run_main(argv, capsys)
    assert code == 0, stdout
    doc = json.loads(stdout)
    assert doc["agent"] == "arithmetic" and doc["n_tasks"] == 4 and doc["n_available"] == 8
    assert doc["actors"]["x"]["accuracy"] == 1.0 and doc["actors"]["x"]["fresh_calls"] == 12
    table = load(out)
    assert table.episodes is not None and table.n_queries == 4
    assert sorted(table.queries.split.tolist()) == ["test", "train", "train", "train"]  # stratified by split
    assert table.episodes.summary().n_steps.tolist() == [5, 5, 5, 5]
    code, _, err = run_main(argv, capsys)
    assert code == 2 and "already holds a routerlab table; pass --force" in _one_error(err)
    code, stdout, _ = run_main([*argv, "--force"], capsys)
    again = json.loads(stdout)
    assert code == 0 and again["actors"]["x"]["fresh_calls"] == 0 and again["actors"]["x"]["cached_calls"] == 12
    assert again["actors"]["x"]["fresh_tool_calls"] == 0 and again["content_hash"] == doc["content_hash"]
    code, stdout, _ = run_main([*argv[:-1], "--force"], capsys)
    assert code == 0 and "x  accuracy 1.000  final answers 4/4  median steps 5" in stdout


def test_agent_on_a_table_of_questions(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       agent_kind: list[AgentScript]) -> None:
    quiz = tmp_path / "quiz.jsonl"
    quiz.write_text(json.dumps({"id": "q1", "question": "Question 2: 2 boxes of 3 apples and one more?",
                                "answer": "#### 7", "dataset": "toy"}) + "\n", encoding="utf-8")
    code, stdout, _ = run_main(["collect", str(quiz), "--agent", "arithmetic", "-a", "x=agent-cli-test:m",
                                "--cache-dir", str(tmp_path / "cache"), "-o", str(tmp_path / "out"), "--json"],
                               capsys)
    doc = json.loads(stdout)
    assert code == 0 and doc["source"] == str(quiz) and doc["actors"]["x"]["accuracy"] == 1.0
