"""One cache location rule (routerlab/_paths.py): every cache's default directory is cache_dir(kind), that is
$ROUTERLAB_CACHE_DIR/<kind> when the variable is set, else ~/.cache/routerlab/<kind>; only _paths reads it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from routerlab._paths import ENV_VAR, KINDS, cache_dir
from routerlab.experiments.sources import default_cache_dir as tables_default
from routerlab.features.cache import default_cache_dir as features_default
from routerlab.llm.cache import default_cache_dir as llm_default
from routerlab.reports.audit_cache import default_audit_cache_dir

SRC = Path(__file__).resolve().parents[1] / "src" / "routerlab"
DEFAULTS = {"llm": llm_default, "audit": default_audit_cache_dir, "features": features_default,
            "tables": tables_default}


def test_every_cache_kind_has_its_default_from_the_one_rule(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert set(DEFAULTS) == set(KINDS)
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    for kind, default in DEFAULTS.items():
        assert default() == cache_dir(kind) == tmp_path / kind
    monkeypatch.setenv(ENV_VAR, "~/somewhere")
    assert cache_dir("audit") == Path.home() / "somewhere" / "audit"
    monkeypatch.delenv(ENV_VAR)
    for kind, default in DEFAULTS.items():
        assert default() == Path.home() / ".cache" / "routerlab" / kind
    monkeypatch.setenv(ENV_VAR, "")  # set but empty: as unset
    assert cache_dir("llm") == Path.home() / ".cache" / "routerlab" / "llm"


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown cache kind 'model'"):
        cache_dir("model")


def test_only_paths_reads_the_cache_variable() -> None:
    readers = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "_paths.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value == ENV_VAR:
                readers.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not readers, f"these spell out {ENV_VAR} instead of calling routerlab._paths.cache_dir: {readers}"
