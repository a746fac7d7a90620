"""The house's floors (../shared/ARCHITECTURE.md): a module imports only from its own floor or lower ones, so
``metrics`` knows nothing of routers, ``routers`` nothing of protocols, and nothing imports ``cli`` or ``reports``
but the floors above them. Read from the source text (top-level and function-level imports alike)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "routerlab"
FLOOR = {
    # shared plumbing, importable by every floor
    "errors": 0, "_atomic": 0, "_paths": 0, "_registry": 0, "_spec": 0, "progress": 0, "execute": 0,
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
IMPORT = re.compile(r"^\s*(?:from|import)\s+routerlab\.(\w+)", re.M)


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p.relative_to(SRC).parts[0].removesuffix(".py") in FLOOR)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_go_down_only(path: Path) -> None:
    home = path.relative_to(SRC).parts[0].removesuffix(".py")
    upward = [m for m in IMPORT.findall(path.read_text(encoding="utf-8")) if FLOOR.get(m, -1) > FLOOR[home]]
    assert not upward, f"{path.relative_to(SRC)} ({home}) imports the higher floor(s) {sorted(set(upward))}"


def test_every_package_has_a_floor() -> None:
    names = {p.name.removesuffix(".py") for p in SRC.iterdir() if not p.name.startswith("__")
             and ((p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py") and p.name != "py.typed"}
    assert names <= set(FLOOR), sorted(names - set(FLOOR))
