"""The agent's tools: the calculator (ast-parsed arithmetic, bounded, refusing everything else) and the python tool
(the code grader's sandbox), and the tool cache (a rerun is served from it with the seconds first measured)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from routerlab.errors import UsageError
from routerlab.llm.agent.tools import (
    MAX_EXPRESSION,
    CalculatorError,
    ToolRunner,
    calculate,
    get_tool,
    tool_key,
    tool_names,
)


@pytest.mark.parametrize(("expression", "value"), [
    ("12*7", "84"), ("(3+4)*12", "84"), ("10/4", "2.5"), ("7 // 2", "3"), ("7 % 3", "1"), ("-3+5", "2"),
    ("2**10", "1024"), ("+4", "4"), ("1/3", "0.3333333333"), ("6/3", "2"), ("0.1+0.2", "0.3"),
    # what models write around numbers
    ("$1,250 x 2", "2500"), ("3 × 4", "12"), ("12 ÷ 4", "3"), ("2^3", "8"), ("3.5*2 =", "7"), ("`5+5`", "10"),
    ("50% * 10", "500"), ("1,000,000 / 1,000", "1000"),
])
def test_calculator_computes_arithmetic(expression: str, value: str) -> None:
    assert calculate(expression) == value


@pytest.mark.parametrize(("expression", "why"), [
    ("__import__('os').system('true')", "not Call"),
    ("open('/etc/passwd')", "not Call"),
    ("x + 1", "not Name"),
    ("(1).__class__", "not Attribute"),
    ("[1] * 10", "not List"),
    ("'a' * 3", "the constant 'a'"),
    ("True + 1", "the constant True"),
    ("1j * 2", "the constant 1j"),
    ("1 if 1 else 2", "not IfExp"),
    ("lambda: 1", "not Lambda"),
    ("2**1000", "an exponent above 64"),
    ("9**9**9", "an exponent above 64"),
    ("10**19", "exceeds"),
    ("99999999999 * 99999999999", "exceeds"),
    ("1/0", "division by zero"),
    ("5 % 0", "division by zero"),
    ("0**-1", "zero to a negative power"),
    ("(-8)**0.5", "fractional power"),
    ("((", "not an arithmetic expression"),
    ("", "empty"),
    ("1+" * 150 + "1", f"longer than {MAX_EXPRESSION}"),
])
def test_calculator_refuses_what_is_not_bounded_arithmetic(expression: str, why: str) -> None:
    with pytest.raises(CalculatorError) as info:
        calculate(expression)
    assert why in str(info.value)


def test_calculator_tool_reports_errors_as_observations() -> None:
    calc = get_tool("calculator")
    assert calc.run("6*7") == ("42", True)
    text, ok = calc.run("__import__('os')")
    assert not ok and text.startswith("error: only numbers")


def test_python_tool_runs_in_the_sandbox() -> None:
    py = get_tool("python")
    assert py.run("print(sum(range(5)))") == ("10", True)
    assert py.run("```python\nprint('fenced')\n```") == ("fenced", True)
    assert py.run("x = 1") == ("(no output)", True)
    text, ok = py.run("print('before')\nprint(1/0)")
    assert not ok and text == "before\nerror: ZeroDivisionError: division by zero (line 2)"
    text, ok = py.run("while True:\n    pass")
    assert not ok and "error:" in text


def test_tools_are_registered() -> None:
    assert {"calculator", "python"} <= set(tool_names())
    with pytest.raises(UsageError, match="unknown agent tool 'search'"):
        get_tool("search")


def test_tool_calls_are_cached_by_content(tmp_path: Path) -> None:
    runner = ToolRunner({"python": get_tool("python"), "calculator": get_tool("calculator")}, tmp_path)
    first = runner.run("python", "print(6*7)")
    calc = runner.run("calculator", "6*7")
    assert (first.observation, first.cached, calc.observation) == ("42", False, "42")
    assert first.seconds > 0 and runner.fresh == 2
    again = ToolRunner({"python": get_tool("python"), "calculator": get_tool("calculator")}, tmp_path)
    replay = again.run("python", "print(6*7)")
    assert replay.cached and replay.observation == "42" and replay.seconds == first.seconds
    assert again.run("calculator", "6*7").seconds == calc.seconds and again.fresh == 0 and again.cached == 2
    assert again.run("python", "print(6*8)").observation == "48" and again.fresh == 1  # other content: a miss
    assert tool_key(get_tool("python"), "a") != tool_key(get_tool("calculator"), "a")
    with pytest.raises(UsageError, match="unknown tool 'search'"):
        runner.run("search", "x")


def test_long_observations_keep_their_end(tmp_path: Path) -> None:
    result = ToolRunner({"python": get_tool("python")}, None).run("python", "print('a' * 1000 + 'END')")
    assert result.observation.endswith("END") and len(result.observation) <= 403 and not math.isnan(result.seconds)
