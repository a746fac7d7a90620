"""The ReAct loop: an actor works through a task in turns, each a thought and one action, until a final answer or
the step limit.

**The chat.** A system message (the task set's: its tools, the format, a tiny example), the task as the first user
message, then per turn the model's reply (an assistant message) and, after a tool call or a malformed reply, the
observation as a user message ``Observation: TEXT``.

**The action format** (one per reply; :func:`parse_action`):

- ``Action: TOOL[ARGUMENT]``: call a tool; the argument runs from the first ``[`` after the tool's name to the last
  ``]`` of the reply, so code with brackets needs no escaping. Without brackets, a fenced code block after the
  name, else an ``Action Input:`` line, else the rest of the line is the argument.
- ``Final Answer: TEXT``: the answer, graded by the task set's grader.

An action or answer ends where a line starting ``Thought:``, ``Action:``, ``Final Answer:``, ``Observation``,
``Question:`` or ``Task:`` begins (a model that goes on writing steps without waiting is cut there). Whichever
of ``Action:`` and ``Final Answer:`` (at the start of a line, any case, ``**`` bold allowed) comes first decides.
A reply with neither that the model ended itself (not cut by the token cap) is its final answer, as a
tool-calling API takes a reply without a tool call (``stop`` says ``unmarked answer``). A reply with neither that
the cap cut, an unknown tool or an empty argument is a step whose observation says what was wrong (never a
crash); the episode goes on. Generation stops at :data:`OBSERVATION` (the model must not write the
observation itself), and the reply kept in the chat ends where its action ends.

**Steps.** Every model call is a step of kind ``model`` (tokens, TTFT, ITL, latency as measured; ``env_s`` 0);
every tool call a step of kind ``tool`` (the tool's name, ``env_s`` its measured seconds; ``latency_s`` and tokens
0). Steps are numbered from 1 in order. ``max_steps`` bounds the model calls: an episode that has made that many
without a final answer ends, scored 0. The last step carries the episode's score (NaN on the others).

**Lockstep batches.** Each round sends the next prompt of every unfinished episode of one actor in calls of
``batch_size`` chats (``Backend.complete_batch``), longest prompts first, then runs their tools; a model is
loaded once per run. Every call goes through the call cache and every tool call through the tool cache
(:class:`~routerlab.llm.agent.tools.ToolRunner`), so a rerun replays every episode exactly and runs nothing.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from routerlab.errors import UsageError
from routerlab.llm.base import Backend, Completion, Decoding, Message
from routerlab.llm.graders import Grade, Grader, Item

if TYPE_CHECKING:
    from routerlab.llm.agent.tasksets import Task, TaskSet
    from routerlab.llm.agent.tools import ToolRunner

__all__ = ["OBSERVATION", "Action", "EpisodeRun", "parse_action", "run_episodes"]

OBSERVATION = "Observation:"
"""The marker that starts an observation; generation stops there."""
FORMAT_HINT = "Reply with 'Action: TOOL[INPUT]' or 'Final Answer: ANSWER'."

_MARKER = re.compile(r"^[ \t>*_#-]*(?:\*\*)?(action|final[ \t]+answer)(?:\*\*)?[ \t]*:(?:\*\*)?[ \t]*",
                     re.IGNORECASE | re.MULTILINE)
_NAME = re.compile(r"[ \t]*`?([A-Za-z_][\w.-]*)`?")
_FENCE = re.compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_NEXT = re.compile(r"^[ \t>*_#-]*(?:\*\*)?(?:thought|action|final[ \t]+answer|observation|question|task)(?:\*\*)?"
                   r"[ \t]*:", re.IGNORECASE | re.MULTILINE)
_INPUT = re.compile(r"^[ \t*]*action[ \t]+input[ \t]*:[ \t]*(.*)", re.IGNORECASE | re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Action:
    """One parsed reply: ``tool`` (call ``name`` with ``argument``), ``final`` (``argument`` is the answer) or
    ``invalid`` (``message`` says why). ``end`` is where the action ends in the reply (the chat keeps the reply up
    to there)."""

    kind: Literal["tool", "final", "invalid"]
    name: str = ""
    argument: str = ""
    message: str = ""
    end: int = 0
    marked: bool = True
    """Whether the reply holds an ``Action:`` or ``Final Answer:`` marker at all."""


def parse_action(text: str, tools: Sequence[str]) -> Action:
    """The action of one reply (module docstring); deterministic, never raises."""
    m = _MARKER.search(text)
    if m is None:
        return Action("invalid", message=f"no action found. {FORMAT_HINT}", end=len(text), marked=False)
    rest = text[m.end():]
    nxt = _NEXT.search(rest)
    if nxt is not None:  # the action ends where the next thought, action or observation begins
        rest = rest[:nxt.start()]
    if m.group(1).lower() != "action":
        answer = rest.strip()
        if not answer:
            return Action("invalid", message=f"the final answer is empty. {FORMAT_HINT}", end=m.end() + len(rest))
        return Action("final", argument=answer, end=m.end() + len(rest))
    nm = _NAME.match(rest)
    if nm is None:
        return Action("invalid", message=f"no tool name after 'Action:'. {FORMAT_HINT}", end=m.end() + len(rest))
    name = nm.group(1).lower()
    after = rest[nm.end():]
    base = m.end() + nm.end()
    if after.lstrip(" \t").startswith(("[", "(")):
        opening = after.lstrip(" \t")[0]
        closing = "]" if opening == "[" else ")"
        start = after.index(opening) + 1
        stop = after.rfind(closing)
        argument, end = (after[start:stop], base + stop + 1) if stop >= start else (after[start:], base + len(after))
    elif (f := _FENCE.search(after)) is not None and not after[:f.start()].strip(" \t\n:"):
        argument, end = f.group(1), base + f.end()
    elif (i := _INPUT.search(after)) is not None and not after[:i.start()].strip():
        argument, end = i.group(1).split("\n")[0] if name == "calculator" else i.group(1), base + len(after)
    else:
        line = after.split("\n", 1)[0]
        argument, end = line.strip(" \t:"), base + len(line)
    if name not in tools:
        known = ", ".join(tools) or "none"
        return Action("invalid", message=f"unknown tool {name!r}; the tools are: {known}. {FORMAT_HINT}", end=end)
    if not argument.strip():
        return Action("invalid", message=f"the input of {name} is empty; write {name}[INPUT]", end=end)
    argument = argument.strip("\n")
    return Action("tool", name=name, argument=argument if "\n" in argument else argument.strip(), end=end)


@dataclass
class EpisodeRun:
    """One episode as it runs: the chat so far, its steps (rows of the episode table), and how it ended."""

    task: Task
    actor: str
    messages: list[Message]
    steps: list[dict[str, Any]] = field(default_factory=list)
    model_calls: int = 0
    tool_calls: int = 0
    invalid: int = 0
    final: str | None = None
    last_code: str = ""
    done: bool = False
    stop: str = ""
    grade: Grade | None = None

    def add_model_step(self, c: Completion) -> None:
        self.steps.append({
            "query_id": self.task.id, "actor": self.actor, "step": len(self.steps) + 1, "kind": "model", "tool": "",
            "tokens_in": float(c.tokens_in), "tokens_out": float(c.tokens_out), "ttft_s": _num(c.ttft_s),
            "itl_s": _num(c.itl_s), "latency_s": float(c.latency_s), "env_s": 0.0, "score": math.nan})

    def add_tool_step(self, name: str, seconds: float) -> None:
        self.steps.append({
            "query_id": self.task.id, "actor": self.actor, "step": len(self.steps) + 1, "kind": "tool", "tool": name,
            "tokens_in": 0.0, "tokens_out": 0.0, "ttft_s": math.nan, "itl_s": math.nan, "latency_s": 0.0,
            "env_s": float(seconds), "score": math.nan})

    def transcript(self) -> list[dict[str, str]]:
        """The chat after the system message, as role/content dicts (kept hidden in the table)."""
        return [{"role": m.role, "content": m.content} for m in self.messages[1:]]


def _num(value: float | None) -> float:
    return math.nan if value is None or not math.isfinite(value) else float(value)


@dataclass
class RunStats:
    """What one actor's episodes cost: model calls fresh and cached, the model's own seconds (calls it
    answered), tool calls fresh and cached, and the wall time."""

    fresh_calls: int = 0
    cached_calls: int = 0
    model_s: float = 0.0
    wall_s: float = 0.0
    rounds: int = 0
    fresh_tools: int = 0
    cached_tools: int = 0
    ttft: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)


def run_episodes(backend: Backend, actor: str, tasks: Sequence[Task], taskset: TaskSet, runner: ToolRunner,
                 grader: Grader, *, max_steps: int, batch_size: int, decoding: Decoding,
                 progress: bool | None = None) -> tuple[list[EpisodeRun], RunStats]:
    """Every task as one episode of ``actor`` (module docstring), graded; the episodes in task order and the
    run's counts."""
    from routerlab.progress import Progress

    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise UsageError(f"max steps must be an integer >= 1, got {max_steps!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise UsageError(f"batch size must be an integer >= 1, got {batch_size!r}")
    tools = list(taskset.tools)
    system = Message("system", taskset.system_prompt())
    episodes = [EpisodeRun(t, actor, [system, Message("user", taskset.prompt(t))]) for t in tasks]
    stats = RunStats()
    t_start = time.perf_counter()
    with Progress(f"agent: {actor}", len(episodes), unit="episode", enabled=progress) as bar:
        while True:
            todo = [e for e in episodes if not e.done]
            if not todo:
                break
            stats.rounds += 1
            todo.sort(key=lambda e: -sum(len(m.content) for m in e.messages))
            for s in range(0, len(todo), batch_size):
                chunk = todo[s:s + batch_size]
                t0 = time.perf_counter()
                replies = backend.complete_batch([e.messages for e in chunk], decoding)
                seconds = time.perf_counter() - t0
                if len(replies) != len(chunk):
                    raise UsageError(f"backend {backend.name} returned {len(replies)} answers for {len(chunk)} chats")
                if any(not c.cached for c in replies):
                    stats.model_s += seconds
                for e, c in zip(chunk, replies, strict=True):
                    stats.cached_calls += c.cached
                    stats.fresh_calls += not c.cached
                    if c.ttft_s is not None and math.isfinite(c.ttft_s):
                        stats.ttft.append(c.ttft_s)
                    if c.itl_s is not None and math.isfinite(c.itl_s):
                        stats.itl.append(c.itl_s)
                    _turn(e, c, tools, runner, max_steps)
                    if e.done:
                        bar.update(1, f"round {stats.rounds}")
    stats.wall_s = time.perf_counter() - t_start
    _grade(episodes, taskset, grader)
    return episodes, stats


def _turn(e: EpisodeRun, c: Completion, tools: Sequence[str], runner: ToolRunner, max_steps: int) -> None:
    """One model reply into the episode: its step, then its action's tool step or the final answer."""
    e.model_calls += 1
    e.add_model_step(c)
    action = parse_action(c.text, tools)
    kept = c.text[:action.end].strip() or c.text.strip() or "(empty reply)"
    e.messages.append(Message("assistant", kept))
    if action.kind == "final":
        e.final, e.done, e.stop = action.argument, True, "final answer"
        return
    if action.kind == "invalid" and not action.marked and c.finish_reason == "stop" and c.text.strip():
        # no action and no final answer, ended by the model itself: its answer (as a reply without a tool call)
        e.final, e.done, e.stop = c.text.strip(), True, "unmarked answer"
        return
    if action.kind == "tool":
        e.tool_calls += 1
        result = runner.run(action.name, action.argument)
        e.add_tool_step(action.name, result.seconds)
        if action.name == "python":
            e.last_code = action.argument
        observation = result.observation
    else:
        e.invalid += 1
        observation = f"error: {action.message}"
    if e.model_calls >= max_steps:
        e.done, e.stop = True, "step limit"
        return
    e.messages.append(Message("user", f"{OBSERVATION} {observation}"))


def _grade(episodes: Sequence[EpisodeRun], taskset: TaskSet, grader: Grader) -> None:
    """Grade the final answers (all at once: the code grader runs its sandboxes side by side); an episode without
    one scores 0. The score goes on the last step."""
    answered = [e for e in episodes if e.final is not None]
    items = [Item(question=e.task.text, answer=taskset.answer_to_grade(e.final or "", e.last_code),
                  reference=e.task.reference, dataset=e.task.dataset, metric=e.task.metric, query_id=e.task.id)
             for e in answered]
    grades = grader.grade_many(items) if items else []
    for e, g in zip(answered, grades, strict=True):
        e.grade = g
    for e in episodes:
        if e.grade is None:
            e.grade = Grade(0.0, grader.name, "", "step limit reached without a final answer")
        e.steps[-1]["score"] = e.grade.score


def step_medians(stats: RunStats) -> Mapping[str, float]:
    """Median TTFT and ITL of an actor's replies, in ms (NaN when none was measured)."""
    import statistics

    return {"ttft_ms": statistics.median(stats.ttft) * 1000 if stats.ttft else math.nan,
            "itl_ms": statistics.median(stats.itl) * 1000 if stats.itl else math.nan}
