"""Calling routerlab from Python leaves no process-wide state behind (issue 8)."""

from __future__ import annotations

import warnings

from routerlab.cli import main


def test_main_restores_the_warning_display_and_filters() -> None:
    before_show, before_filters = warnings.showwarning, list(warnings.filters)
    assert main(["routers"]) == 0
    assert main(["evaluate", "--routers", "no-such-router"]) == 2  # the error path restores them too
    assert warnings.showwarning is before_show
    assert warnings.filters == before_filters
