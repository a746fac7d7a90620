"""The house's floors (../shared/ARCHITECTURE.md): a module imports only from its own floor or lower ones, so
``metrics`` knows nothing of routers, ``routers`` nothing of protocols, and nothing imports ``cli`` or ``reports``
but the floors above them.

Imports are read with :mod:`ast`, in every form: ``import routerlab.x``, ``import routerlab.x as y``,
``from routerlab.x import y``, ``from routerlab import x``, relative imports (``from ..x import y``, resolved
against the module's own package), ``importlib.import_module("routerlab.x")`` with a literal name, at the top
level or inside functions, classes and ``if TYPE_CHECKING:`` blocks alike."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "routerlab"
FLOOR = {
    # shared plumbing, importable by every floor
    "errors": 0, "_atomic": 0, "_paths": 0, "_registry": 0, "_spec": 0, "_threads": 0, "_version": 0, "_words": 0,
    "progress": 0, "execute": 0,
    "metrics": 1,  # pure functions of arrays: routerlab's plumbing only
    "data": 2, "datasets": 2,
    "llm": 3,
    "features": 4,
    "perturb": 5, "society": 5,
    "routers": 6,
    "ope": 7, "protocols": 7, "testing": 7,
    "serve": 8, "reports": 8, "experiments": 8,
    "cli": 9,
}
# the package root re-exports the data layer (read, load, RoutingTable, ...), so it sits just above it: a data
# module that imports the root (for __version__, say) closes an import cycle through routerlab/__init__.py
ROOT_FLOOR = FLOOR["data"] + 0.5


def _module_name(path: Path, src: Path) -> tuple[str, bool]:
    """``routerlab.a.b`` for ``src/a/b.py`` (``src`` is the routerlab package directory), and whether it is a
    package (``__init__.py``), which is what relative imports resolve against."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(["routerlab", *parts]), is_package


def imported_names(source: str, module: str, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """``(line, absolute dotted name)`` of everything ``source`` (the text of module ``module``) imports.

    ``from a import b`` yields both ``a`` and ``a.b`` (``b`` may be a submodule), except that ``from routerlab
    import b`` yields only ``routerlab.b``: ``b`` is a module with its own floor, or an attribute of the root.
    A relative import is resolved against the module's package; one that climbs above the top-level
    package is an error."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                if node.level - 1 >= len(parts):
                    raise ValueError(f"{module}:{node.lineno}: relative import climbs above the top-level package")
                base = ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            if base != "routerlab" or any(alias.name == "*" for alias in node.names):
                yield node.lineno, base  # the root itself only for *: "from routerlab import x" names x
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, f"{base}.{alias.name}"
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                   or (isinstance(node.func, ast.Name) and node.func.id == "import_module"))):
            yield node.lineno, node.args[0].value


def floor_of(name: str, src: Path = SRC) -> float | None:
    """The floor of the routerlab module ``name`` refers to (None: outside routerlab)."""
    parts = name.split(".")
    if parts[0] != "routerlab":
        return None
    if len(parts) == 1:
        return ROOT_FLOOR
    top = parts[1]
    if top in FLOOR:
        return FLOOR[top]
    if (src / f"{top}.py").exists() or (src / top / "__init__.py").exists():
        raise AssertionError(f"routerlab.{top} has no floor in FLOOR")
    return ROOT_FLOOR  # an attribute of the package root (``from routerlab import read``)


def upward_imports(source: str, module: str, is_package: bool = False, src: Path = SRC) -> list[str]:
    """``line: name (floor k)`` for each import in ``source`` of a floor above ``module``'s own."""
    home = FLOOR[module.split(".")[1]]
    found = []
    for line, name in imported_names(source, module, is_package):
        floor = floor_of(name, src)
        if floor is not None and floor > home:
            found.append(f"{line}: {name} (floor {floor})")
    return found


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p.relative_to(SRC).parts[0].removesuffix(".py") in FLOOR)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_go_down_only(path: Path) -> None:
    module, is_package = _module_name(path, SRC)
    upward = upward_imports(path.read_text(encoding="utf-8"), module, is_package)
    assert not upward, f"{path.relative_to(SRC)} (floor {FLOOR[module.split('.')[1]]}) imports higher floors: {upward}"


def test_every_package_has_a_floor() -> None:
    names = {p.name.removesuffix(".py") for p in SRC.iterdir() if not p.name.startswith("__")
             and ((p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py") and p.name != "py.typed"}
    assert names <= set(FLOOR), sorted(names - set(FLOOR))


# ---------------------------------------------------------------- the checker itself, on sources it must catch
UPWARD = {
    "relative, two levels": "from ..routers import knn\n",
    "relative package only": "from .. import cli\n",
    "absolute with alias": "import routerlab.cli as x\n",
    "from the root": "from routerlab import reports\n",
    "the root itself": "import routerlab\n",
    "a root attribute": "from routerlab import read\n",
    "inside a function": "def f():\n    from routerlab.protocols import full\n    return full\n",
    "under TYPE_CHECKING": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                            "    from routerlab.routers.base import Router\n"),
    "import_module": "import importlib\nimportlib.import_module('routerlab.society')\n",
}


@pytest.mark.parametrize("source", UPWARD.values(), ids=list(UPWARD))
def test_the_checker_catches_an_upward_import_however_written(source: str) -> None:
    # as if written in src/routerlab/metrics/curves.py, floor 1
    assert upward_imports(source, "routerlab.metrics.curves"), source


@pytest.mark.parametrize("source", [
    "from . import ranking\n",  # routerlab.metrics.ranking: the same floor
    "from .ranking import ndcg\n",
    "from ..errors import UsageError\n",  # floor 0
    "from routerlab._version import __version__\n",
    "from routerlab.errors import UsageError\n",
    "import numpy as np\nfrom os import path\n",
    "from .. import _atomic\n",
])
def test_the_checker_passes_imports_that_go_down(source: str) -> None:
    assert upward_imports(source, "routerlab.metrics.curves") == []


def test_the_package_root_sits_above_the_data_floor() -> None:
    # routerlab/__init__.py imports routerlab.data: data importing the root is a cycle, llm (floor 3) may
    assert upward_imports("from routerlab import __version__\n", "routerlab.data.store") == [
        "1: routerlab.__version__ (floor 2.5)"]
    assert upward_imports("from routerlab import __version__\n", "routerlab.llm.collect") == []


def test_relative_imports_resolve_against_the_package_of_a_module_or_an_init() -> None:
    source = "from . import a\nfrom ..b import c\nfrom .. import d\n"
    names = [n for _, n in imported_names(source, "routerlab.metrics.curves")]
    assert names == ["routerlab.metrics", "routerlab.metrics.a", "routerlab.b", "routerlab.b.c", "routerlab.d"]
    in_init = [n for _, n in imported_names(source, "routerlab.metrics", True)]
    assert in_init == names
    # in a package's __init__, "." is the package itself: from routerlab/data/importers/__init__.py,
    # "..cli" is routerlab.data.cli and "...cli" is routerlab.cli
    assert [n for _, n in imported_names("from ..cli import app\n", "routerlab.data.importers", True)] == [
        "routerlab.data.cli", "routerlab.data.cli.app"]
    assert upward_imports("from ...cli import app\n", "routerlab.data.importers", True) == [
        "1: routerlab.cli (floor 9)", "1: routerlab.cli.app (floor 9)"]
    with pytest.raises(ValueError, match="above the top-level package"):
        list(imported_names("from .... import x\n", "routerlab.metrics.curves"))


def test_the_checker_reads_a_real_package_on_disk(tmp_path: Path) -> None:
    # a small tree shaped like src/routerlab: the walk over files finds the relative upward import
    pkg = tmp_path / "routerlab"
    (pkg / "metrics").mkdir(parents=True)
    (pkg / "cli").mkdir()
    for init in (pkg / "__init__.py", pkg / "metrics" / "__init__.py", pkg / "cli" / "__init__.py"):
        init.write_text("")
    bad = pkg / "metrics" / "bad.py"
    bad.write_text('"""doc"""\n\ndef run():\n    from ..cli import main as m\n    return m\n')
    module, is_package = _module_name(bad, pkg)
    assert (module, is_package) == ("routerlab.metrics.bad", False)
    assert upward_imports(bad.read_text(), module, is_package, src=pkg) == ["4: routerlab.cli (floor 9)",
                                                                             "4: routerlab.cli.main (floor 9)"]
