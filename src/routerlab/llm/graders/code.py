"""The ``code`` grader: runs the answer's code against the question's tests in the sandbox; 1 only when all pass.

The tests come from the reference as the source wrote it:

- MBPP: a Python-repr list of ``assert`` lines. The function to write is the first non-builtin name the asserts
  call (``sum`` when that is all they call). A module the asserts use by name (``sys.getsizeof``) is imported
  before them: MBPP's setup code did that and LLMRouter's reference leaves it out.
- HumanEval: the ``check(candidate)`` function (with its ``METADATA``); the entry point is the last
  top-level ``def NAME(`` of the question, and the program ends with ``check(NAME)``.
- Any other reference that parses as Python and holds an ``assert`` runs as test code after the answer.

The code read from the reply (:func:`read_code`): the first fenced block (```python, ```py or untagged) that
defines the needed function; else all such blocks joined (a helper and its use may be split); else the whole
reply when it parses as Python and defines something. Without such fences, the code between MBPP's few-shot
markers ``[BEGIN]`` and ``[DONE]`` counts as one block. Other fences (```text, ```bash) are never run; a fence
cut off by the end of the reply runs to the end. For HumanEval, code that does not define the entry point is
read as a completion: the question's prompt, then the code (indented by four spaces when it only compiles so);
code that defines it runs after the question's lines before that ``def`` (its imports and helper functions, which
an answer often takes as given; a definition in the answer replaces the question's).
A reply with no code is a failed grade ``no code found``.

The program run is the code, then the tests; it passes when it runs to its end (:mod:`.sandbox`: its own
process, limits, no network, a wall-clock timeout). The detail says why not: the first failing ``assert`` line
where it is one of the tests, the exception and line otherwise, the timeout or limit reached.
"""

from __future__ import annotations

import ast
import builtins
import os
import re
import sys
import textwrap
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from routerlab.llm.graders import _prompts
from routerlab.llm.graders.base import Grade, Grader, Item, register_grader
from routerlab.llm.graders.sandbox import Limits, SandboxResult, run_python

__all__ = ["CodeGrader", "Program", "Tests", "python_blocks", "read_code", "read_tests"]

_FENCE_RE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)(?:^[ \t]*```|\Z)", re.MULTILINE | re.DOTALL)
_BEGIN_RE = re.compile(r"\[BEGIN\][ \t]*\n?(.*?)(?:\[DONE\]|\Z)", re.IGNORECASE | re.DOTALL)
_PYTHON_TAGS = {"", "python", "python3", "py", "py3"}
_DEF_RE = re.compile(r"^def[ \t]+(\w+)[ \t]*\(", re.MULTILINE)  # a top-level def: HumanEval's entry point


@dataclass(frozen=True)
class Tests:
    """The test code read from a reference, the function the answer must define (None when unknown), the
    number of asserts, and for HumanEval the question's prompt (completion style)."""

    code: str
    needed: str | None
    count: int
    prompt: str | None = None
    preamble: str = ""
    """HumanEval: the question's lines before the entry point's ``def`` (its imports, its helper functions)."""


def _nodes(tests: Sequence[str]) -> Iterator[ast.AST]:
    """Every syntax node of the tests that parse (one that does not is skipped: it fails when run)."""
    for test in tests:
        try:
            tree = ast.parse(test)
        except SyntaxError:
            continue
        yield from ast.walk(tree)


def _called_names(tests: Sequence[str]) -> list[str]:
    """The plain names the tests call, in order of first call."""
    calls = (n.func.id for n in _nodes(tests) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name))
    return list(dict.fromkeys(calls))


def _modules_used(tests: Sequence[str]) -> list[str]:
    """Standard-library modules the tests use by name (``sys.getsizeof``) without importing them."""
    names = (n.value.id for n in _nodes(tests) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name))
    return [name for name in dict.fromkeys(names) if name in sys.stdlib_module_names]


def read_tests(item: Item) -> Tests | None:
    """The tests of ``item``'s reference (module docstring); None when it is none of the known forms."""
    asserts = _prompts.mbpp_tests(item.reference)
    if asserts is not None:
        called = _called_names(asserts)
        own = [n for n in called if not hasattr(builtins, n)]
        needed = (own or called)[0] if called else None
        imports = [f"import {m}" for m in _modules_used(asserts) if m != needed]
        return Tests("\n".join([*imports, *asserts]) + "\n", needed, len(asserts))
    if "def check(" in item.reference:
        defs = _DEF_RE.findall(item.question)
        if defs:
            entry = defs[-1]
            count = len(re.findall(r"^\s*assert\b", item.reference, re.MULTILINE))
            last = list(_DEF_RE.finditer(item.question))[-1]
            return Tests(f"{item.reference.strip()}\n\n\ncheck({entry})\n", entry, count,
                         prompt=item.question.rstrip() + "\n", preamble=item.question[: last.start()])
    reference = item.reference.strip()
    if reference and re.search(r"^\s*assert\b", reference, re.MULTILINE) and _parses(reference):
        return Tests(reference + "\n", None, len(re.findall(r"^\s*assert\b", reference, re.MULTILINE)))
    return None


def _parses(code: str) -> bool:
    """Whether ``code`` compiles (``return`` outside a function fails here, not in ``ast.parse``); nothing
    runs."""
    try:
        compile(code, "<answer>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):  # ValueError: a NUL byte
        return False
    return True


def _defines(code: str, name: str) -> bool:
    n = re.escape(name)
    return re.search(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{n}[ \t]*\(|^[ \t]*class[ \t]+{n}\b|^{n}[ \t]*=",
                     code, re.MULTILINE) is not None


def _defines_something(code: str) -> bool:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Assign)
               for node in tree.body)


def python_blocks(reply: str) -> list[str]:
    """The fenced code blocks of a reply tagged python/py (or untagged), in order; without one, the code
    between MBPP's few-shot markers ``[BEGIN]`` and ``[DONE]`` (its quotes removed)."""
    blocks = [m.group(2) for m in _FENCE_RE.finditer(reply) if m.group(1).lower() in _PYTHON_TAGS
              and m.group(2).strip()]
    if not blocks:
        blocks = [m.group(1) for m in _BEGIN_RE.finditer(reply) if m.group(1).strip()]
        blocks = [b.strip()[1:-1] + "\n" if re.fullmatch(r"\s*'.*'\s*", b, re.DOTALL) else b for b in blocks]
    return blocks


def read_code(reply: str, needed: str | None = None, prompt: str | None = None) -> tuple[str, str]:
    """The code to run from a reply and how it was read (module docstring); ``("", "no code found")`` when
    there is none. ``needed`` is the function the tests call, ``prompt`` HumanEval's prompt to complete."""
    blocks = python_blocks(reply)
    code, how = "", ""
    if needed is not None:
        for block in blocks:
            if _defines(block, needed):
                code, how = block, f"the first python block defining {needed}"
                break
    if not code and blocks:
        code, how = "\n\n".join(blocks), "all python blocks" if len(blocks) > 1 else "the python block"
    if not code and reply.strip() and _defines_something(reply):
        code, how = reply, "the whole reply"
    if prompt is not None and needed is not None and not (code and _defines(code, needed)):
        body = (code or reply).strip("\n") + "\n"
        if body.strip():
            raw, indented = prompt + body, prompt + textwrap.indent(textwrap.dedent(body), "    ")
            # a body written at column 0 is most likely the function's body unindented
            for candidate in ((indented, raw) if textwrap.dedent(body) == body else (raw, indented)):
                if _parses(candidate):
                    return candidate, f"a completion of the question's prompt ({how or 'the reply'})"
    if not code.strip():
        return "", "no code found"
    return code, how


@dataclass(frozen=True)
class Program:
    """What the grader runs: ``text`` = ``answer`` (the code read from the reply), then the tests."""

    text: str
    answer: str
    how: str
    tests: Tests


def _line_text(program: str, line: int | None) -> str:
    if line is None:
        return ""
    lines = program.splitlines()
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return text if len(text) <= 200 else text[:197] + "..."


def explain(result: SandboxResult, program: Program) -> str:
    """One line on how the program ended: which test or answer line failed, or which limit was reached."""
    if result.passed:
        return f"passed {program.tests.count} assert{'s' if program.tests.count != 1 else ''}"
    text = _line_text(program.text, result.line)
    in_tests = result.line is not None and result.line > program.answer.count("\n")
    if result.reason == "assertion" and in_tests:
        message = result.detail.partition(": ")[2]
        return f"test failed: {text}" + (f" ({message})" if message else "")
    if result.reason in ("assertion", "error") and text:
        where = f"test {text}" if in_tests else f"answer line {result.line}: {text}"
        return f"{result.detail} (at {where})"
    return result.detail


@register_grader("code")
class CodeGrader(Grader):
    """Runs the answer's code with the question's tests in the sandbox (module docstring); ``limits`` are the
    sandbox's (:class:`~routerlab.llm.graders.sandbox.Limits`), ``workers`` how many run side by side in
    :meth:`grade_many` (default: the number of CPUs)."""

    def __init__(self, arg: str | None = None, *, cache_dir: Path | None = None, limits: Limits | None = None,
                 workers: int | None = None) -> None:
        super().__init__(arg, cache_dir=cache_dir)
        self.limits = limits or Limits()
        self.workers = max(1, workers if workers is not None else (os.cpu_count() or 1))

    def instruction(self, item: Item) -> str:
        return _prompts.CODE

    def prompt(self, item: Item) -> str:
        return _prompts.ask_code(item)

    def program(self, item: Item) -> Program | str:
        """The program to run for ``item`` (answer then tests), or the reason there is none (a reference
        without tests, a reply without code)."""
        tests = read_tests(item)
        if tests is None:
            return "the reference is neither MBPP's list of asserts, HumanEval's check(candidate) nor test code"
        code, how = read_code(item.answer, tests.needed, tests.prompt)
        if not code:
            return how
        # (not before a __future__ import, which must come first; postponed annotations need no typing names)
        if tests.preamble.strip() and not code.startswith(tests.prompt or "") and "from __future__" not in code:
            code = tests.preamble.rstrip() + "\n\n\n" + code.strip("\n")
        answer = code.rstrip() + "\n"
        return Program(f"{answer}\n\n{tests.code}", answer, how, tests)

    def grade(self, item: Item) -> Grade:
        built = self.program(item)
        if isinstance(built, str):
            return Grade(0.0, self.name, "", built)
        result = run_python(built.text, self.limits)
        return Grade(1.0 if result.passed else 0.0, self.name, built.answer, explain(result, built))

    def grade_many(self, items: Sequence[Item]) -> list[Grade]:
        """Grades in order; up to ``workers`` sandboxes run side by side (threads waiting on processes)."""
        if len(items) <= 1 or self.workers == 1:
            return [self.grade(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self.workers, len(items))) as pool:
            return list(pool.map(self.grade, items))

