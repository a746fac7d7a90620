"""The README's user-written router example runs exactly as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_router_example() -> str:
    """The Python block of the README that subclasses ``Router`` (the "Routers, features, metrics,
    protocols" section)."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    found = [b for b in blocks if "(Router):" in b and "evaluate(" in b]
    assert len(found) == 1, "expected one README example of a user-written router"
    return str(found[0])


def test_readme_router_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(readme_router_example(), str(README), "exec"), {"__name__": "readme_example"})
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["MeanRouter()", "knn"]
    assert all(re.fullmatch(r"\S+ +mu_o 0\.\d{3}", line) for line in lines)
