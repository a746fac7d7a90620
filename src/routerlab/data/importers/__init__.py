"""Importers: one module per upstream format, registered by decorator, plus entry-point plugins.

An importer is a function ``(paths: list[Path], **options) -> RoutingTable`` that reads the upstream
files as they are. Third-party packages add formats through the ``routerlab.importers`` entry-point
group; each entry point names such a function and its name is the format name.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from routerlab._spec import check_option_type
from routerlab.data.table import RoutingTable
from routerlab.errors import DataError, UsageError

ImporterFn = Callable[..., RoutingTable]


@dataclass(frozen=True)
class ImporterInfo:
    name: str
    fn: ImporterFn
    summary: str


_REGISTRY: dict[str, ImporterInfo] = {}
_BUILTIN_MODULES = ("routerbench", "routerdc", "routeprofile", "mmlu_pro", "long")


def importer(name: str) -> Callable[[ImporterFn], ImporterFn]:
    """Register ``fn`` as the importer of format ``name``; its docstring's first line is its summary."""

    def register(fn: ImporterFn) -> ImporterFn:
        if name in _REGISTRY and _REGISTRY[name].fn is not fn:
            raise ValueError(f"importer {name!r} registered twice")
        summary = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        _REGISTRY[name] = ImporterInfo(name, fn, summary)
        return fn

    return register


def _load_all() -> None:
    for mod in _BUILTIN_MODULES:
        importlib.import_module(f"routerlab.data.importers.{mod}")
    for ep in entry_points(group="routerlab.importers"):
        if ep.name not in _REGISTRY:
            _REGISTRY[ep.name] = ImporterInfo(ep.name, ep.load(), f"plugin from {ep.value}")


def importers() -> dict[str, ImporterInfo]:
    """Every known format, built-in and plugin, by name."""
    _load_all()
    return dict(sorted(_REGISTRY.items()))


def read(format: str, *paths: str | Path, **options: Any) -> RoutingTable:
    """Read upstream files of ``format`` into a routing table (see ``routerlab import --help``)."""
    known = importers()
    if format not in known:
        raise UsageError(f"unknown format {format!r}; known formats: {', '.join(known)}")
    if not paths:
        raise UsageError(f"format {format!r} needs at least one input path")
    resolved = [Path(p) for p in paths]
    for p in resolved:
        if not p.exists():
            raise DataError("no such file or directory", file=p)
    fn = known[format].fn
    params = inspect.signature(fn).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        accepted = [n for n, p in params.items() if p.kind is p.KEYWORD_ONLY]
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            raise UsageError(f"format {format!r} has no option {', '.join(unknown)}; "
                             f"options: {', '.join(accepted) or 'none'}")
        for key, value in options.items():
            default = params[key].default
            check_option_type(f"format {format!r}", key, value, None if default is inspect.Parameter.empty else default)
    return fn(resolved, **options)
