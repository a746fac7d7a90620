"""The tools an agent calls, run locally: a safe ``calculator`` and a sandboxed ``python``.

A tool takes the action's argument (text) and returns an observation (text) for the next turn. Tool calls are
cached by content like model calls (:class:`ToolRunner`): the observation and the seconds first measured are kept
in one small JSON record per call, so a rerun replays every episode with the same timings and runs nothing.

- ``calculator``: arithmetic only. The expression is parsed with :mod:`ast` (never evaluated as Python): numbers,
  ``+ - * / // % **``, parentheses and a sign. Before parsing, what models write around numbers is read leniently:
  ``$``, ``%`` signs after a number are dropped, ``1,000`` is ``1000``, ``x`` or ``×`` between operands is ``*``,
  ``÷`` is ``/``, ``^`` is ``**``, a trailing ``=`` is dropped. Bounded: an expression of at most
  :data:`MAX_EXPRESSION` characters, exponents up to :data:`MAX_EXPONENT`, every value within
  :data:`MAX_MAGNITUDE`. Anything else is an observation that says why (``error: ...``), never an exception.
- ``python``: the code runs in the code grader's sandbox (:func:`routerlab.llm.graders.sandbox.run_python`, its own
  process, no network, :data:`PYTHON_LIMITS`); the observation is the end of its output and, when it failed, the
  error line.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import operator
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from routerlab._registry import Registry
from routerlab.errors import UsageError

__all__ = ["MAX_EXPONENT", "MAX_EXPRESSION", "MAX_MAGNITUDE", "OBSERVATION_CHARS", "PYTHON_LIMITS", "Calculator",
           "CalculatorError", "PythonTool", "Tool", "ToolResult", "ToolRunner", "calculate", "get_tool",
           "register_tool", "tool_names"]

MAX_EXPRESSION = 200
"""The longest calculator expression, in characters."""
MAX_EXPONENT = 64
"""The largest exponent (in absolute value) ``**`` accepts."""
MAX_MAGNITUDE = 1e18
"""The largest absolute value any step of a calculation may reach."""
OBSERVATION_CHARS = 400
"""An observation longer than this keeps its last characters (an agent's prompt must stay short)."""


def _python_limits() -> Any:
    from routerlab.llm.graders.sandbox import Limits

    lim = PYTHON_LIMITS
    return Limits(wall_s=lim["wall_s"], cpu_s=lim["cpu_s"], memory_bytes=int(lim["memory_bytes"]),
                  output_bytes=int(lim["output_bytes"]))


PYTHON_LIMITS: dict[str, float] = {"wall_s": 5.0, "cpu_s": 5.0, "memory_bytes": float(512 << 20),
                                   "output_bytes": float(64 << 10)}
"""The sandbox limits of one ``python`` action (seconds, bytes); part of its cache key."""


@dataclass(frozen=True)
class ToolResult:
    """One tool call: the observation shown to the agent, whether the tool succeeded, the seconds it took (as
    first measured, also when served from the cache) and whether the cache served it."""

    observation: str
    ok: bool
    seconds: float
    cached: bool = False

    def to_record(self) -> dict[str, Any]:
        return {"observation": self.observation, "ok": self.ok, "seconds": self.seconds}


class Tool(ABC):
    """A tool the agent may call by name: ``Action: NAME[ARGUMENT]``. ``version`` is part of the cache key (bump
    it when the tool's output for the same input changes)."""

    name: ClassVar[str] = ""
    version: ClassVar[int] = 1
    usage: ClassVar[str] = ""
    """One line for the system prompt: what the tool does and how to call it."""

    def key_params(self) -> dict[str, Any]:
        """What besides the input decides the output (limits), for the cache key."""
        return {}

    @abstractmethod
    def run(self, argument: str) -> tuple[str, bool]:
        """The observation for ``argument`` and whether the call succeeded; never raises for bad input."""


_TOOLS: Registry[type[Tool]] = Registry("agent tool")


def register_tool(name: str) -> Callable[[type[Tool]], type[Tool]]:
    """Class decorator: ``@register_tool("calculator") class Calculator(Tool)``."""
    return _TOOLS.register_named(name)


def tool_names() -> list[str]:
    """Every known tool, sorted."""
    return _TOOLS.names()


def get_tool(name: str) -> Tool:
    """A new instance of the tool called ``name`` (an unknown name is a UsageError listing the known ones)."""
    return _TOOLS.get(name)()


# ------------------------------------------------------------------------------------------ calculator
class CalculatorError(ValueError):
    """An expression the calculator refuses (not arithmetic, too large, division by zero)."""


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_TIMES = re.compile(r"(?<=[\d)])\s*[x×·]\s*(?=[\d(.$])")
_PERCENT = re.compile(r"(?<=[\d.])\s*%(?!\s*[\d(.])")


def _normalise(expression: str) -> str:
    """What a model writes around arithmetic, made plain (module docstring): ``$1,000 x 3`` -> ``1000 * 3``."""
    s = expression.strip().strip("`").strip()
    s = s.rstrip("=").strip()
    s = s.replace("$", "").replace("÷", "/").replace("−", "-").replace("^", "**")
    s = _THOUSANDS.sub("", s)
    s = _TIMES.sub(" * ", s)
    s = _PERCENT.sub("", s)  # a percent sign after a number is not the modulo operator
    return s


def _check(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError("the result is not a finite number")
    if abs(value) > MAX_MAGNITUDE:
        raise CalculatorError(f"a value exceeds {MAX_MAGNITUDE:g}")
    return value


def _eval(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _check(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _check(_UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            if abs(right) > MAX_EXPONENT:
                raise CalculatorError(f"an exponent above {MAX_EXPONENT}")
            if left == 0 and right < 0:
                raise CalculatorError("zero to a negative power")
            if left != 0 and abs(right) * math.log10(abs(left)) > math.log10(MAX_MAGNITUDE):
                raise CalculatorError(f"a value exceeds {MAX_MAGNITUDE:g}")
            if left < 0 and not float(right).is_integer():
                raise CalculatorError("a negative number to a fractional power")
        if isinstance(node.op, ast.Div | ast.FloorDiv | ast.Mod) and right == 0:
            raise CalculatorError("division by zero")
        return _check(_BINARY[type(node.op)](left, right))
    what = type(node).__name__ if not isinstance(node, ast.Constant) else f"the constant {node.value!r}"
    raise CalculatorError(f"only numbers, + - * / // % ** and parentheses are allowed, not {what}")


def _format(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return str(value)
    return f"{value:.10g}"


def calculate(expression: str) -> str:
    """The value of an arithmetic ``expression`` as text (``"84"``, ``"2.5"``); a :class:`CalculatorError`
    saying why when it is not one the calculator accepts (module docstring)."""
    text = _normalise(expression)
    if not text:
        raise CalculatorError("the expression is empty")
    if len(text) > MAX_EXPRESSION:
        raise CalculatorError(f"the expression is longer than {MAX_EXPRESSION} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError) as exc:
        raise CalculatorError(f"not an arithmetic expression: {text!r}") from exc
    try:
        return _format(_eval(tree))
    except (OverflowError, RecursionError) as exc:
        raise CalculatorError(f"the expression is too large ({type(exc).__name__})") from exc


@register_tool("calculator")
class Calculator(Tool):
    """Safe arithmetic (module docstring)."""

    usage = "calculator[EXPRESSION]: arithmetic with + - * / // % ** and parentheses, e.g. calculator[(3+4)*12]"

    def key_params(self) -> dict[str, Any]:
        return {"max_expression": MAX_EXPRESSION, "max_exponent": MAX_EXPONENT, "max_magnitude": MAX_MAGNITUDE}

    def run(self, argument: str) -> tuple[str, bool]:
        try:
            return calculate(argument), True
        except CalculatorError as exc:
            return f"error: {exc}", False


# ---------------------------------------------------------------------------------------------- python
@register_tool("python")
class PythonTool(Tool):
    """Python code run in the code grader's sandbox (module docstring)."""

    usage = "python[CODE]: runs Python code and shows what it prints, e.g. python[print(sum(range(5)))]"

    def key_params(self) -> dict[str, Any]:
        return dict(PYTHON_LIMITS)

    def run(self, argument: str) -> tuple[str, bool]:
        from routerlab.llm.graders.sandbox import run_python

        code = _strip_fence(argument)
        if not code.strip():
            return "error: no code to run", False
        result = run_python(code, _python_limits(), tail_bytes=OBSERVATION_CHARS)
        out = result.stdout.strip()
        if result.passed:
            return out or "(no output)", True
        error = f"error: {result.detail}" + (f" (line {result.line})" if result.line else "")
        return (f"{out}\n{error}" if out else error), False


def _strip_fence(code: str) -> str:
    """Code without a surrounding ```python fence (models often write one inside the brackets)."""
    text = code.strip("\n")
    m = re.fullmatch(r"\s*```[\w+.-]*[^\n]*\n(.*?)\n?\s*```\s*", text, re.DOTALL)
    return m.group(1) if m else text


# ---------------------------------------------------------------------------------------------- running
def tool_key(tool: Tool, argument: str) -> str:
    """sha256 (hex) of the canonical JSON of one tool call: the tool, its version and limits, the argument."""
    payload = {"format": 1, "tool": tool.name, "version": tool.version, "params": tool.key_params(),
               "argument": argument}
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ToolRunner:
    """Runs tool calls through an on-disk cache (``cache_dir``, a :class:`~routerlab.llm.cache.CallCache` of tool
    records; None: no cache). Counts fresh and cached calls."""

    def __init__(self, tools: dict[str, Tool], cache_dir: Path | None) -> None:
        from routerlab.llm.cache import CallCache

        self.tools = tools
        self.cache = None if cache_dir is None else CallCache(cache_dir)
        self.fresh = 0
        self.cached = 0

    def run(self, name: str, argument: str) -> ToolResult:
        """The observation of ``name[argument]`` (an unknown tool is a UsageError: the loop checks names first)."""
        if name not in self.tools:
            raise UsageError(f"unknown tool {name!r}; this task set has {', '.join(sorted(self.tools))}")
        tool = self.tools[name]
        key = tool_key(tool, argument)
        if self.cache is not None:
            rec = self.cache.get(key)
            if rec is not None:
                try:
                    hit = ToolResult(str(rec["observation"]), bool(rec["ok"]), float(rec["seconds"]), cached=True)
                except (KeyError, TypeError, ValueError):
                    hit = None
                if hit is not None:
                    self.cached += 1
                    return hit
        t0 = time.perf_counter()
        observation, ok = tool.run(argument)
        seconds = time.perf_counter() - t0
        if len(observation) > OBSERVATION_CHARS:
            observation = "..." + observation[-OBSERVATION_CHARS:]
        result = ToolResult(observation, ok, seconds)
        self.fresh += 1
        if self.cache is not None:
            self.cache.put(key, result.to_record())
        return result
