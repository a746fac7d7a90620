"""Small shared pieces of the CLI: opening a table argument, printing JSON."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from routerlab.data.table import RoutingTable


def open_table(path: Path | None) -> RoutingTable:
    """A saved table directory, or the embedded demo benchmark when no path is given."""
    if path is None:
        from routerlab.datasets import demo

        return demo()
    from routerlab.data.store import load

    return load(path)


def print_json(obj: Any) -> None:
    from routerlab.reports.files import dumps

    sys.stdout.write(dumps(obj) + "\n")
