"""How ``collect`` asks a question so that its grader can read the answer: one user message per question.

These texts are part of every call's cache key: changing one re-asks every question of its kind.
"""

from __future__ import annotations

import ast
import re

from routerlab.llm.graders.base import Item

SHORT = "Answer with the final answer only."
MC = "Answer with the letter of the correct option."
NUMBER = "Solve the problem step by step, then end with a line of the form 'The answer is N', N a number."
MATH = "Solve the problem step by step, then put the final answer in \\boxed{}."
CODE = "Write the Python code in one ```python code block."
_COVERAGE = "Write one short, plausible sentence that uses all of these words: {words}."
_HUMANEVAL = ("Complete this Python function. Reply with the whole function, its imports included, in one "
              "```python code block.\n\n```python\n{prompt}```")
_MBPP = "{question}\n\nYour code should pass these tests:\n{tests}\n\n" + CODE


def ask_number(item: Item) -> str:
    """A GSM8K-style word problem, answered with a final number."""
    return f"{item.question.rstrip()}\n\n{NUMBER}"


def ask_math(item: Item) -> str:
    """A MATH-style problem, answered in ``\\boxed{}`` (MGSM's own request for one is kept as written)."""
    return f"{item.question.rstrip()}\n\n{MATH}"


def ask_coverage(item: Item) -> str:
    """CommonGen: the question is the comma list of concept words."""
    return _COVERAGE.format(words=item.question.strip())


def mbpp_tests(reference: str) -> list[str] | None:
    """MBPP's reference, a Python-repr list of ``assert`` lines, as a list; None when it is not one."""
    text = reference.strip()
    if not text.startswith("["):
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value]
    return None


def ask_code(item: Item) -> str:
    """MBPP (a task and its ``assert`` lines, shown as MBPP's own prompt does, which also names the function) or
    HumanEval (a signature and docstring to complete); any other code question gets the code instruction."""
    tests = mbpp_tests(item.reference)
    if tests is not None:
        return _MBPP.format(question=item.question.strip(), tests="\n".join(tests))
    if re.search(r"^\s*def \w+\(", item.question, re.MULTILINE) and "def check(" in item.reference:
        return _HUMANEVAL.format(prompt=item.question.rstrip() + "\n")
    return f"{item.question.rstrip()}\n\n{CODE}"
