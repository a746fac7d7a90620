"""Shared helpers of the test suite."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """One command line through ``routerlab.cli.main``: its exit code, stdout and stderr."""
    from routerlab.cli import main

    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def missing_requirement(message: str) -> NoReturn:
    """Skip a test whose outside requirement (../shared/data, WordNet) is missing, or fail it under
    ROUTERLAB_REQUIRE_SHARED_DATA=1, so that CI cannot turn green by skipping."""
    if os.environ.get("ROUTERLAB_REQUIRE_SHARED_DATA") == "1":
        pytest.fail(message + " (ROUTERLAB_REQUIRE_SHARED_DATA=1)")
    pytest.skip(message)


def require_module(name: str, install: str) -> None:
    """Skip a test whose optional package ``name`` (dask distributed, psutil) is missing, or fail it under
    ROUTERLAB_REQUIRE_SHARED_DATA=1, as in CI, which installs it (``install`` says how)."""
    import importlib.util

    if importlib.util.find_spec(name) is None:
        message = f"{name} is not installed ({install})"
        if os.environ.get("ROUTERLAB_REQUIRE_SHARED_DATA") == "1":
            pytest.fail(message + " (ROUTERLAB_REQUIRE_SHARED_DATA=1)")
        pytest.skip(message, allow_module_level=True)
