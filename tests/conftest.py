"""Shared fixtures. ``shared_data`` finds ../shared/data (or $ROUTERLAB_SHARED_DATA).

Without it the tests that need it skip, unless ROUTERLAB_REQUIRE_SHARED_DATA=1 (as in CI), where
they fail: a missing data folder must never turn a red run green.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _shared_data_dir() -> Path:
    env = os.environ.get("ROUTERLAB_SHARED_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = _shared_data_dir()
    if not (path / "README.md").exists():
        message = f"shared data not found at {path}"
        if os.environ.get("ROUTERLAB_REQUIRE_SHARED_DATA") == "1":
            pytest.fail(message + " (ROUTERLAB_REQUIRE_SHARED_DATA=1)")
        pytest.skip(message)
    return path
