"""The ReAct loop with a scripted backend: actions parsed leniently but deterministically, tools run, the step limit
ends an episode, the last step carries the score, step timings are recorded, a rerun is served from the caches with
identical steps; and the table the collector builds from the episodes."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from routerlab.errors import UsageError
from routerlab.llm.agent.collect import collect_episodes, tool_cache_dir
from routerlab.llm.agent.loop import OBSERVATION, parse_action, run_episodes
from routerlab.llm.agent.tasksets import Task, get_taskset
from routerlab.llm.agent.tools import ToolRunner, get_tool
from routerlab.llm.base import GREEDY, Backend, BackendSpec, Completion, Decoding, Message
from routerlab.llm.cache import CachedBackend, CallCache
from routerlab.llm.graders import get_grader

TOOLS = ("calculator", "python")


@pytest.mark.parametrize(("reply", "kind", "name", "argument", "kept"), [
    ("Thought: 4 pens.\nAction: calculator[4*3]\n", "tool", "calculator", "4*3",
     "Thought: 4 pens.\nAction: calculator[4*3]"),
    ("**Action:** calculator[3+4]", "tool", "calculator", "3+4", "**Action:** calculator[3+4]"),
    ("Action: Calculator [ 2*(3+4) ]", "tool", "calculator", "2*(3+4)", "Action: Calculator [ 2*(3+4) ]"),
    ("Action: calculator[12*7]\nThought: next\nAction: calculator[84+1]", "tool", "calculator", "12*7",
     "Action: calculator[12*7]"),
    ("Action: python[def f(a):\n    return [a]\nprint(f(1))]", "tool", "python",
     "def f(a):\n    return [a]\nprint(f(1))", None),
    ("Action: python\n```python\nprint(1)\n```\ntrailing", "tool", "python", "print(1)",
     "Action: python\n```python\nprint(1)\n```"),
    ("Action: calculator\nAction Input: 3*4\n", "tool", "calculator", "3*4", None),
    ("Action: calculator 5*5", "tool", "calculator", "5*5", None),
    ("Thought: done.\nFinal Answer: 42", "final", "", "42", None),
    ("final answer: $1,250", "final", "", "$1,250", None),
    ("Final Answer: 5\nAction: calculator[1]", "final", "", "5", "Final Answer: 5\n"),
    ("Final Answer:\n```python\ndef f(x):\n    return x\n```", "final", "", "```python\ndef f(x):\n    return x\n```",
     None),
    ("Action: calculator[1+1]\nFinal Answer: 2", "tool", "calculator", "1+1", "Action: calculator[1+1]"),
])
def test_actions_are_parsed(reply: str, kind: str, name: str, argument: str, kept: str | None) -> None:
    action = parse_action(reply, TOOLS)
    assert (action.kind, action.name, action.argument) == (kind, name, argument)
    assert reply[:action.end] == (reply if kept is None else kept)


@pytest.mark.parametrize(("reply", "message", "marked"), [
    ("I think it is 5", "no action found", False),
    ("Action: search[cats]", "unknown tool 'search'; the tools are: calculator, python", True),
    ("Action: calculator[]", "the input of calculator is empty", True),
    ("Action: [3]", "no tool name", True),
    ("Final Answer:   ", "the final answer is empty", True),
])
def test_malformed_actions_say_why(reply: str, message: str, marked: bool) -> None:
    action = parse_action(reply, TOOLS)
    assert action.kind == "invalid" and message in action.message and action.marked is marked


class AgentScript(Backend):
    """Replies by (the task's first line, the turn number); fixed timings; counts its calls and batches. A reply
    whose text ends with '...' was cut by the token cap (finish_reason length)."""

    options: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, spec: BackendSpec, *, cache_dir: Path | None = None,
                 script: Mapping[str, Sequence[str]] | None = None) -> None:
        super().__init__(spec, cache_dir=cache_dir)
        self.script = dict(script or {})
        self.calls = 0
        self.batches: list[int] = []
        self.seen: list[tuple[Message, ...]] = []

    def complete(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Completion:
        self.calls += 1
        self.seen.append(tuple(messages))
        assert decoding.stop == (OBSERVATION,)
        task = messages[1].content.splitlines()[0]
        turn = sum(m.role == "assistant" for m in messages)
        replies = self.script.get(task, ["hmm..."])
        text = replies[min(turn, len(replies) - 1)]
        finish = "length" if text.endswith("...") else "stop"
        return Completion(text, 10 * (turn + 1), len(text.split()), 0.5, 0.1, 0.02, finish_reason=finish)

    def complete_batch(self, batch: Sequence[Sequence[Message]], decoding: Decoding = GREEDY) -> list[Completion]:
        self.batches.append(len(batch))
        return [self.complete(m, decoding) for m in batch]


SCRIPT = {
    "Question: Two boxes of 3 apples and one more apple?": [
        "Thought: boxes first.\nAction: calculator[2*3]", "Thought: plus one.\nAction: calculator[6+1]",
        "Thought: done.\nFinal Answer: 7"],
    "Question: What is 5 times 4?": ["Action: search[5 times 4]", "Final Answer: 21"],
    "Question: Ten minus three?": ["The answer is 7"],  # no marker, ended by the model: its answer
    "Question: Never answers?": ["I keep thinking..."],  # cut by the cap every time: the step limit ends it
    "Question: Unsafe?": ["Action: calculator[__import__('os').system('true')]", "Final Answer: 0"],
}
TASKS = [
    Task("t1", "Two boxes of 3 apples and one more apple?", "toy", "train", "#### 7"),
    Task("t2", "What is 5 times 4?", "toy", "test", "#### 20"),
    Task("t3", "Ten minus three?", "toy", "train", "#### 7"),
    Task("t4", "Never answers?", "toy", "test", "#### 1"),
    Task("t5", "Unsafe?", "toy", "train", "#### 0"),
]


def _run(backend: Backend, tmp_path: Path, max_steps: int = 4, batch_size: int = 8) -> tuple[Any, Any, ToolRunner]:
    taskset = get_taskset("arithmetic")
    runner = ToolRunner({"calculator": get_tool("calculator")}, tmp_path / "tools")
    with get_grader("number") as grader:
        episodes, stats = run_episodes(backend, "x", TASKS, taskset, runner, grader, max_steps=max_steps,
                                       batch_size=batch_size, decoding=Decoding(max_tokens=96, stop=(OBSERVATION,)),
                                       progress=False)
    return episodes, stats, runner


def test_episodes_run_tools_and_end(tmp_path: Path) -> None:
    backend = AgentScript(BackendSpec("agent-script", "m"), script=SCRIPT)
    episodes, stats, runner = _run(backend, tmp_path)
    by_id = {e.task.id: e for e in episodes}
    one = by_id["t1"]
    assert [s["kind"] for s in one.steps] == ["model", "tool", "model", "tool", "model"]
    assert [s["step"] for s in one.steps] == [1, 2, 3, 4, 5]
    assert [s["tool"] for s in one.steps] == ["", "calculator", "", "calculator", ""]
    assert one.final == "7" and one.stop == "final answer" and one.steps[-1]["score"] == 1.0
    assert all(math.isnan(s["score"]) for s in one.steps[:-1])
    # the chat: the observation follows each action, the reply is kept up to its action
    chat = [(m.role, m.content) for m in one.messages[1:]]
    assert chat[:3] == [("user", "Question: Two boxes of 3 apples and one more apple?"),
                        ("assistant", "Thought: boxes first.\nAction: calculator[2*3]"), ("user", "Observation: 6")]
    assert chat[4] == ("user", "Observation: 7")
    # timings: a model step has its latency, TTFT, ITL and tokens, env 0; a tool step its seconds, latency 0
    model, tool = one.steps[0], one.steps[1]
    assert (model["latency_s"], model["ttft_s"], model["itl_s"], model["env_s"]) == (0.5, 0.1, 0.02, 0.0)
    assert (model["tokens_in"], model["tokens_out"]) == (10.0, 5.0)
    assert tool["env_s"] > 0 and (tool["latency_s"], tool["tokens_in"], tool["tokens_out"]) == (0.0, 0.0, 0.0)
    assert math.isnan(tool["ttft_s"])
    # a malformed action is a step whose observation says so; a wrong final answer scores 0
    two = by_id["t2"]
    assert [s["kind"] for s in two.steps] == ["model", "model"] and two.invalid == 1
    assert two.messages[3].content.startswith("Observation: error: unknown tool 'search'")
    assert two.steps[-1]["score"] == 0.0 and two.grade is not None and "20" in two.grade.detail
    # no marker but the model ended the reply itself: its answer
    three = by_id["t3"]
    assert three.stop == "unmarked answer" and three.steps[-1]["score"] == 1.0 and len(three.steps) == 1
    # the step limit ends an episode without a final answer: scored 0 on its last step
    four = by_id["t4"]
    assert four.stop == "step limit" and four.model_calls == 4 and four.final is None
    assert [s["score"] for s in four.steps][-1] == 0.0 and four.grade is not None
    assert four.grade.detail == "step limit reached without a final answer"
    # the calculator refuses; the observation says why
    five = by_id["t5"]
    assert five.messages[3].content.startswith("Observation: error: only numbers")
    assert five.steps[1]["kind"] == "tool" and five.steps[-1]["score"] == 1.0
    # lockstep: one call per round with every unfinished episode, longest prompt first
    assert backend.batches == [5, 4, 2, 1] and stats.rounds == 4 and stats.fresh_calls == backend.calls == 12
    assert runner.fresh == 3


def test_step_limit_after_a_tool_call_scores_the_tool_step(tmp_path: Path) -> None:
    backend = AgentScript(BackendSpec("agent-script", "m"), script=SCRIPT)
    episodes, _, _ = _run(backend, tmp_path, max_steps=1)
    one = episodes[0]
    assert [s["kind"] for s in one.steps] == ["model", "tool"] and one.stop == "step limit"
    assert one.steps[-1]["score"] == 0.0 and math.isnan(one.steps[0]["score"])


def test_batches_are_capped(tmp_path: Path) -> None:
    backend = AgentScript(BackendSpec("agent-script", "m"), script=SCRIPT)
    _run(backend, tmp_path, batch_size=2)
    assert backend.batches == [2, 2, 1, 2, 2, 2, 1]


def test_a_rerun_is_served_from_the_caches_with_identical_steps(tmp_path: Path) -> None:
    cache = CallCache(tmp_path / "llm")
    first_backend = AgentScript(BackendSpec("agent-script", "m"), script=SCRIPT)
    first, _, runner = _run(CachedBackend(first_backend, cache), tmp_path)
    again_backend = AgentScript(BackendSpec("agent-script", "m"), script=SCRIPT)
    second, stats, runner2 = _run(CachedBackend(again_backend, CallCache(tmp_path / "llm")), tmp_path)
    assert again_backend.calls == 0 and stats.fresh_calls == 0 and stats.cached_calls == 12
    assert runner2.fresh == 0 and runner2.cached == runner.fresh == 3
    for a, b in zip(first, second, strict=True):
        assert _same_steps(a.steps, b.steps)


def _same_steps(first: Sequence[Mapping[str, Any]], second: Sequence[Mapping[str, Any]]) -> bool:
    """Equal step rows, NaN equal to NaN."""
    def same(a: Any, b: Any) -> bool:
        return bool(a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)))

    return len(first) == len(second) and all(
        x.keys() == y.keys() and all(same(x[k], y[k]) for k in x) for x, y in zip(first, second, strict=True))


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    backend = AgentScript(BackendSpec("agent-script", "m"), script=SCRIPT)
    with pytest.raises(UsageError, match="max steps must be an integer >= 1, got 0"):
        _run(backend, tmp_path, max_steps=0)
    with pytest.raises(UsageError, match="batch size must be an integer >= 1, got 0"):
        _run(backend, tmp_path, batch_size=0)


def test_collect_builds_a_table_of_episodes(tmp_path: Path) -> None:
    from routerlab.data.store import load

    backend = AgentScript(BackendSpec("agent-script", "m", {"input_price": 1.0, "output_price": 2.0}), script=SCRIPT)
    table = collect_episodes(TASKS, [("x", backend)], get_taskset("arithmetic"), max_steps=4,
                             cache_dir=tmp_path / "llm", progress=False, provenance={"seed": 3})
    assert table.episodes is not None and table.episode_mask.all()
    assert table.score[:, 0].tolist() == [1.0, 0.0, 1.0, 0.0, 1.0]
    summ = table.episodes.summary()
    assert summ.n_steps.tolist() == [5, 2, 1, 4, 3] and summ.n_tool.tolist() == [2, 0, 0, 0, 1]
    # the cell's latency is the sum of the model's latencies and the tools' seconds (episode latency)
    steps = table.episodes.records()
    for i, qid in enumerate(table.queries.ids.tolist()):
        mine = [s for s in steps if s["query_id"] == qid]
        assert table.latency_s is not None and table.tokens_out is not None and table.cost_usd is not None
        assert table.latency_s[i, 0] == pytest.approx(sum(s["latency_s"] + s["env_s"] for s in mine), rel=1e-6)
        assert table.tokens_out[i, 0] == sum(s["tokens_out"] for s in mine)
        tin = sum(s["tokens_in"] for s in mine)
        assert table.cost_usd[i, 0] == pytest.approx((tin * 1.0 + table.tokens_out[i, 0] * 2.0) / 1e6, rel=1e-6)
    # a router sees id, text, dataset and split: the gold answer, outputs and transcripts are hidden
    assert table.queries.visible == frozenset()
    assert {"gold", "output.x", "stop.x", "detail.x", "transcript.x"} <= set(table.queries.hidden)
    assert table.queries.split.tolist() == ["train", "test", "train", "test", "train"]
    meta = table.meta["collect"]
    assert (meta["agent"], meta["tools"], meta["max_steps"], meta["seed"]) == ("arithmetic", ["calculator"], 4, 3)
    assert len(meta["prompts_sha256"]) == 64 and meta["actors"]["x"]["final_answers"] == 4
    assert meta["actors"]["x"]["step_limit"] == 1 and meta["actors"]["x"]["invalid_actions"] == 5
    assert tool_cache_dir(tmp_path / "llm") == tmp_path / "llm" / "tools"
    table.save(tmp_path / "out")
    back = load(tmp_path / "out")
    assert back.content_hash == table.content_hash and back.episodes is not None
    assert np.array_equal(back.score, table.score, equal_nan=True)


def test_code_answers_fall_back_to_the_last_python_action() -> None:
    code = get_taskset("code")
    assert code.answer_to_grade("Final: see above", "def f():\n    return 1") == \
        "Final: see above\n\n```python\ndef f():\n    return 1\n```"
    fenced = "```python\ndef g():\n    return 2\n```"
    assert code.answer_to_grade(fenced, "def f(): pass") == fenced
    assert code.answer_to_grade("def g():\n    return 2", "def f(): pass") == "def g():\n    return 2"
    assert code.answer_to_grade("no code", "") == "no code"


@pytest.mark.slow
def test_smollm2_runs_two_episodes_end_to_end(smollm2: Any, tmp_path: Path) -> None:
    """A real model through the loop: every step measured, the cells derived from them, a rerun all cached."""
    from routerlab.llm.agent.tasksets import data_dir

    root = data_dir(Path(__file__).resolve().parents[4] / "shared" / "data")
    taskset = get_taskset("arithmetic", max_tokens=32)
    try:
        tasks = taskset.load(root)[:2]
    except Exception:
        from tests import missing_requirement

        missing_requirement(f"the shared data is not at {root}")
    backend = CachedBackend(smollm2, CallCache(tmp_path / "llm"))
    table = collect_episodes(tasks, [("smol", backend)], taskset, max_steps=2, cache_dir=tmp_path / "llm",
                             progress=False)
    assert table.episodes is not None and table.episode_mask.all()
    steps = table.episodes.records()
    model = [s for s in steps if s["kind"] == "model"]
    assert model and all(s["latency_s"] > 0 and s["tokens_out"] >= 1 and s["env_s"] == 0 for s in model)
    assert set(table.score[:, 0].tolist()) <= {0.0, 1.0}
    again = collect_episodes(tasks, [("smol", backend)], taskset, max_steps=2, cache_dir=tmp_path / "llm",
                             progress=False)
    assert again.meta["collect"]["actors"]["smol"]["fresh_calls"] == 0
    assert again.episodes is not None and _same_steps(again.episodes.records(), steps)
