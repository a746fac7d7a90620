"""Agentic task sets: which tasks, which tools, how the agent is told, how its final answer is graded.

A task set is registered by name (``@register_taskset("arithmetic")``) and reads its tasks from LLMRouter's query
files in the shared data (``DATA/llmrouter/data/example_data/query_data/default_query_{train,test}.jsonl``; the
split is the file's) or from the questions of a table or ``.jsonl`` file (:meth:`TaskSet.from_questions`).

- ``arithmetic``: GSM8K word problems whose worked solution uses at least two calculator steps (its ``<<a*b=c>>``
  annotations; the count is kept as the hidden ``reference_steps``), solved with the ``calculator``; the final
  answer is graded by the ``number`` grader against the number after ``####``.
- ``code``: MBPP tasks, solved with the ``python`` tool (the sandbox); the task shows the first of its ``assert``
  lines (which names the function), and the final answer's code is graded by the ``code`` grader on all of them.
  A final answer without code is graded on the code of the agent's last ``python`` action.

The gold answer and the tests are hidden query metadata: a router sees a task's id, text, dataset and split.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from routerlab._registry import Registry
from routerlab.errors import DataError, UsageError

__all__ = ["DATA_ENV", "QUERY_FILES", "Task", "TaskSet", "data_dir", "get_taskset", "register_taskset",
           "taskset_names"]

DATA_ENV = "ROUTERLAB_SHARED_DATA"
QUERY_FILES = "llmrouter/data/example_data/query_data/default_query_{split}.jsonl"
"""LLMRouter's query files under the shared data directory, one per split (train, test)."""
SPLITS = ("train", "test")
_CALC_STEP = re.compile(r"<<[^<>]*=[^<>]*>>")


@dataclass(frozen=True)
class Task:
    """One task: ``text`` is the question as a router sees it, ``reference`` the gold answer or tests as the
    source wrote them (hidden), ``meta`` more hidden metadata (``reference_steps``)."""

    id: str
    text: str
    dataset: str
    split: str
    reference: str
    metric: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)


def data_dir(given: str | os.PathLike[str] | None) -> Path:
    """The shared data directory: ``given``, else ``$ROUTERLAB_SHARED_DATA``, else ``../shared/data`` from the working
    directory."""
    if given is not None:
        return Path(given)
    env = os.environ.get(DATA_ENV)
    return Path(env) if env else Path("..") / "shared" / "data"


def read_query_rows(root: Path, task_name: str) -> list[tuple[str, int, dict[str, Any]]]:
    """LLMRouter's query rows of ``task_name`` from both split files: (split, row number in its file, row); a
    missing file is one DataError naming it and the option that sets the directory."""
    out: list[tuple[str, int, dict[str, Any]]] = []
    for split in SPLITS:
        path = root / QUERY_FILES.format(split=split)
        if not path.is_file():
            raise DataError(f"no LLMRouter query file here (set the shared data directory with --data DIR or "
                            f"${DATA_ENV})", file=path)
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(f"not JSON: {exc.msg}", file=path, row=lineno) from None
                if isinstance(row, dict) and row.get("task_name") == task_name:
                    out.append((split, lineno, row))
    return out


class TaskSet(ABC):
    """A kind of agentic task (module docstring). Subclasses set ``name``, ``tools``, ``grader``, ``step_tokens``
    (the default cap of tokens per model step) and ``system`` (the system prompt), and implement :meth:`load`.
    ``max_tokens`` replaces the cap of one run."""

    name: ClassVar[str] = ""
    tools: ClassVar[tuple[str, ...]] = ()
    grader: ClassVar[str] = ""
    step_tokens: ClassVar[int] = 96
    system: ClassVar[str] = ""
    dataset: ClassVar[str] = ""

    def __init__(self, max_tokens: int | None = None) -> None:
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                       or max_tokens < 1):
            raise UsageError(f"--max-tokens must be an integer >= 1, got {max_tokens!r}")
        self.max_tokens = self.step_tokens if max_tokens is None else max_tokens

    def system_prompt(self) -> str:
        return self.system

    def prompt(self, task: Task) -> str:
        """The first user message of an episode."""
        return f"Question: {task.text.strip()}"

    @abstractmethod
    def load(self, root: Path) -> list[Task]:
        """Every task of this set in the shared data under ``root``, in file order (train, then test)."""

    def from_questions(self, questions: Sequence[Any]) -> list[Task]:
        """Tasks from questions read by :func:`routerlab.llm.questions.load_questions` (a table or a ``.jsonl``
        file): each question's text, dataset, split and reference as they are."""
        return [Task(q.id, q.text, q.dataset, q.split, q.reference, q.metric) for q in questions]

    def answer_to_grade(self, final: str, last_code: str) -> str:
        """The text the grader reads: the final answer."""
        return final

    def prompts_hash(self) -> str:
        """sha256 of what the agent is told (system prompt, tools, step token cap), for the table's provenance."""
        text = json.dumps({"system": self.system_prompt(), "tools": list(self.tools), "max_tokens": self.max_tokens,
                           "prompt": self.prompt(Task("", "QUESTION", "", "", ""))}, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


_TASKSETS: Registry[type[TaskSet]] = Registry("agentic task set")


def register_taskset(name: str) -> Callable[[type[TaskSet]], type[TaskSet]]:
    """Class decorator: ``@register_taskset("arithmetic") class Arithmetic(TaskSet)``."""
    return _TASKSETS.register_named(name)


def taskset_names() -> list[str]:
    """Every known task set, sorted."""
    return _TASKSETS.names()


def get_taskset(name: str, *, max_tokens: int | None = None) -> TaskSet:
    """The task set called ``name``, its step cap ``max_tokens`` when given (unknown name: a UsageError listing the
    known ones)."""
    cls = _TASKSETS.get(name, None)
    if cls is None:
        raise UsageError(f"--agent: unknown task set {name!r}; known: {', '.join(taskset_names())}")
    return cls(max_tokens)


_ARITHMETIC = """Solve the problem with the calculator tool. Each reply is one step:
Thought: what to do next
Action: calculator[EXPRESSION]
Then you get "Observation: RESULT". The calculator takes numbers, + - * / // % ** and parentheses. When you know \
the answer, reply:
Thought: ...
Final Answer: NUMBER

Example
Question: A pen costs $3 and a book $5. How much do 4 pens and 2 books cost?
Thought: 4 pens cost 4*3.
Action: calculator[4*3]
Observation: 12
Thought: 2 books cost 2*5, plus the pens.
Action: calculator[12+2*5]
Observation: 22
Thought: I know the answer.
Final Answer: 22"""


@register_taskset("arithmetic")
class Arithmetic(TaskSet):
    """GSM8K word problems needing at least two calculator steps (module docstring)."""

    tools = ("calculator",)
    grader = "number"
    step_tokens = 96
    system = _ARITHMETIC
    dataset = "gsm8k"
    min_steps: ClassVar[int] = 2

    def load(self, root: Path) -> list[Task]:
        tasks = []
        for split, lineno, row in read_query_rows(root, "gsm8k"):
            reference = str(row.get("ground_truth") or "")
            steps = len(_CALC_STEP.findall(reference))
            if "####" not in reference or steps < self.min_steps:
                continue
            tasks.append(Task(f"gsm8k-{split}-{lineno}", str(row["query"]), "gsm8k", split, reference,
                              str(row.get("metric") or ""), {"reference_steps": steps}))
        return tasks

    def from_questions(self, questions: Sequence[Any]) -> list[Task]:
        return [Task(q.id, q.text, q.dataset, q.split, q.reference, q.metric,
                     {"reference_steps": len(_CALC_STEP.findall(q.reference))}) for q in questions]


_CODE = """Write the Python function the task asks for. You may test code with the python tool. Each reply is one step:
Thought: what to do next
Action: python[CODE]
Then you get "Observation: OUTPUT" (what the code prints, or its error). When the function is ready, reply:
Thought: ...
Final Answer: the function in a ```python block

Example
Task: Write a function to add two numbers.
Test: assert add(2, 3) == 5
Thought: I write add and test it.
Action: python[def add(a, b):
    return a + b
print(add(2, 3))]
Observation: 5
Thought: It works.
Final Answer:
```python
def add(a, b):
    return a + b
```"""


@register_taskset("code")
class Code(TaskSet):
    """MBPP tasks solved with the python tool (module docstring)."""

    tools = ("python",)
    grader = "code"
    step_tokens = 160
    system = _CODE
    dataset = "mbpp"

    def prompt(self, task: Task) -> str:
        from routerlab.llm.graders._prompts import mbpp_tests

        tests = mbpp_tests(task.reference) or []
        shown = f"\nTest: {tests[0]}" if tests else ""
        return f"Task: {task.text.strip()}{shown}"

    def load(self, root: Path) -> list[Task]:
        from routerlab.llm.graders._prompts import mbpp_tests

        tasks = []
        for split, lineno, row in read_query_rows(root, "mbpp"):
            reference = str(row.get("ground_truth") or row.get("choices") or "")
            tests = mbpp_tests(reference)
            if not tests:
                continue
            tasks.append(Task(f"mbpp-{split}-{lineno}", str(row["query"]), "mbpp", split, reference,
                              str(row.get("metric") or ""), {"n_tests": len(tests),
                                                              "task_id": str(row.get("task_id") or "")}))
        return tasks

    def answer_to_grade(self, final: str, last_code: str) -> str:
        from routerlab.llm.graders.code import python_blocks

        if python_blocks(final) or not last_code.strip() or re.search(r"^\s*def \w+", final, re.MULTILINE):
            return final
        return f"{final}\n\n```python\n{last_code.strip()}\n```"
