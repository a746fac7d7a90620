"""One version, in routerlab/_version.py: the package root re-exports it, pyproject reads it from there, and no
module inside the package imports it from the root (which would pull the data layer into every importer)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import routerlab
from routerlab import _version

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "routerlab"


def test_the_root_reexports_the_single_version() -> None:
    assert routerlab.__version__ is _version.__version__
    assert isinstance(_version.__version__, str) and _version.__version__.count(".") >= 2


def test_pyproject_reads_the_version_from_version_module() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "routerlab._version.__version__"}


def test_no_module_imports_the_version_from_the_package_root() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.ImportFrom) and node.module == "routerlab" and node.level == 0
                    and any(a.name == "__version__" for a in node.names)):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not offenders, offenders
