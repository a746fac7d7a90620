"""Layering inside the data package: the long format and the shared file helpers sit below the importers.

``importers/long.py`` wraps :mod:`routerlab.data.longformat`, so the long format must not import the
importers package (not even lazily inside a function); both use :mod:`routerlab.data._files`.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import routerlab.data

DATA = Path(routerlab.data.__file__).parent
LOWER = ("longformat", "_files")


def _sources(name: str) -> list[Path]:
    """The source files of module or package ``routerlab.data.<name>``."""
    package = DATA / name
    if package.is_dir():
        return sorted(package.rglob("*.py"))
    return [DATA / f"{name}.py"]


def _imported(path: Path) -> set[str]:
    """Every module an ``import`` or ``from ... import`` anywhere in ``path`` names (absolute or relative)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    parts = list(path.relative_to(DATA.parent.parent).with_suffix("").parts)
    package = parts[:-1]  # a module and a package's __init__ both resolve relative to their folder
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{alias.name}" for alias in node.names)
    return out


@pytest.mark.parametrize("name", LOWER)
def test_lower_modules_do_not_import_the_importers(name: str) -> None:
    files = _sources(name)
    assert files and all(f.is_file() for f in files)
    for f in files:
        bad = sorted(m for m in _imported(f) if m.startswith("routerlab.data.importers"))
        assert not bad, f"{f.name} imports {bad}"


def test_reading_long_files_loads_no_importer(tmp_path: Path) -> None:
    # ``import routerlab`` itself loads ``routerlab.data.importers`` (for ``routerlab.read``), so compare
    # what importing and running the long format (with its formerly lazy imports) adds on top of that.
    csv = tmp_path / "cells_train.csv"
    csv.write_text("query_id,actor,score\nq1,a,1\nq1,b,0\nq2,a,0.5\nq2,b,1\n", encoding="utf-8")
    code = (
        "import sys, routerlab\n"
        "before = set(sys.modules)\n"
        "from routerlab.data.longformat import read_long, write_long\n"
        f"t = read_long([{str(tmp_path)!r}], progress=False)\n"
        f"write_long(t, {str(tmp_path / 'out.jsonl')!r})\n"
        "print(sorted(m for m in set(sys.modules) - before if m.startswith('routerlab.data.importers')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


def test_common_reexports_the_file_helpers() -> None:
    from routerlab.data import _files
    from routerlab.data.importers import _common

    for name in ("DataWarning", "warn", "expand_paths", "iter_jsonl", "load_json", "parse_json", "split_in_name"):
        assert getattr(_common, name) is getattr(_files, name)
