"""Small shared pieces of the CLI: opening a table argument, printing JSON."""

from __future__ import annotations

import json
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
    json.dump(obj, sys.stdout, indent=2, default=_default, allow_nan=False)
    sys.stdout.write("\n")


def _default(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")
