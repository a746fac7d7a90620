"""Importers: one module per upstream format, registered by decorator, plus entry-point plugins.

An importer is a function ``(paths: list[Path], **options) -> RoutingTable`` that reads the upstream
files as they are. Third-party packages add formats through the ``routerlab.importers`` entry-point
group; each entry point names such a function and its name is the format name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

from routerlab._registry import Registry
from routerlab._spec import check_option_type
from routerlab.data.table import RoutingTable
from routerlab.errors import DataError, UsageError

ImporterFn = Callable[..., RoutingTable]


@dataclass(frozen=True)
class ImporterInfo:
    name: str
    fn: ImporterFn
    summary: str


def _plugin_importer(name: str, fn: ImporterFn, ep: EntryPoint) -> ImporterInfo:
    return ImporterInfo(name, fn, f"plugin from {ep.value}")


_REGISTRY: Registry[ImporterInfo] = Registry(
    "format", package=__name__, group="routerlab.importers", from_plugin=_plugin_importer
)
"""Every format by name: the modules of this package, then ``routerlab.importers`` entry points."""


def importer(name: str) -> Callable[[ImporterFn], ImporterFn]:
    """Register ``fn`` as the importer of format ``name``; its docstring's first line is its summary."""

    def register(fn: ImporterFn) -> ImporterFn:
        summary = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        _REGISTRY.add(name, ImporterInfo(name, fn, summary))
        return fn

    return register


def importers() -> dict[str, ImporterInfo]:
    """Every known format, built-in and plugin, by name."""
    return _REGISTRY.as_dict()


def read(format: str, *paths: str | Path, **options: Any) -> RoutingTable:
    """Read upstream files of ``format`` into a routing table (see ``routerlab import --help``).

    ``visible=`` (column names, or ``"a,b"``) declares query metadata columns visible to routers beside those
    the importer declares; an importer that takes ``visible`` itself (``long``: which file columns to keep)
    gets it as an option, any other importer's table gets it through :meth:`RoutingTable.with_visible`."""
    info = _REGISTRY.get(format)
    if not paths:
        raise UsageError(f"format {format!r} needs at least one input path")
    resolved = [Path(p) for p in paths]
    for p in resolved:
        if not p.exists():
            raise DataError("no such file or directory", file=p)
    fn = info.fn
    params = inspect.signature(fn).parameters
    declared = options.pop("visible", None) if "visible" not in params else None
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        accepted = [n for n, p in params.items() if p.kind is p.KEYWORD_ONLY]
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            raise UsageError(f"format {format!r} has no option {', '.join(unknown)}; "
                             f"options: {', '.join(accepted) or 'none'}")
        for key, value in options.items():
            default = params[key].default
            check_option_type(f"format {format!r}", key, value, None if default is inspect.Parameter.empty else default)
    table = fn(resolved, **options)
    return table if declared is None else table.with_visible(declared)
