"""Atomic writes: a crash never leaves a half-written report, JSON or Parquet file behind."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from routerlab._atomic import atomic_write
from routerlab._atomic import write_text as write_text  # re-exported: the reports' writers import it from here


def _atomic(path: Path, write: Callable[[str], None]) -> None:
    """Write ``path`` through a temp file (mode follows the umask); see :func:`routerlab._atomic.atomic_write`."""
    atomic_write(path, write)


def _default(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")


def json_safe(obj: Any) -> Any:
    """``obj`` with NaN and infinities replaced by None and NumPy values by Python ones: strict JSON."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, str):
        return json_safe(obj.tolist())
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        return None
    return obj


def dumps(obj: Any) -> str:
    return json.dumps(json_safe(obj), indent=2, default=_default, allow_nan=False)


def write_json(path: Path, obj: Any) -> None:
    write_text(path, dumps(obj) + "\n")


def write_parquet(path: Path, table: Any) -> None:
    import pyarrow.parquet as pq

    _atomic(path, lambda tmp: pq.write_table(table, tmp))


def save_figure(fig: Any, path: Path, dpi: int = 120) -> None:
    _atomic(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format=path.suffix.lstrip(".") or "png"))


def say_written(paths: list[Path], *, to_stderr: bool = False) -> None:
    """One ``wrote PATH`` line per file an ``-o`` option produced: on stdout, or on stderr when stdout
    carries ``--json``."""
    import sys

    stream = sys.stderr if to_stderr else sys.stdout
    for p in paths:
        stream.write(f"wrote {p}\n")
    stream.flush()
