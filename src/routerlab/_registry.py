"""One registry type for everything routerlab finds by name: importers, encoders, routers, audit
sections and CLI commands.

A :class:`Registry` maps names to entries and follows one set of rules:

- built-ins register themselves (usually by a decorator) when their module is imported; the registry
  imports every public module of its ``package`` once (``pkgutil``), the first time it is asked;
- plugins come from one ``importlib.metadata`` entry-point ``group``, loaded once, after the
  built-ins; each entry point's name is the entry's name;
- a repeated name (built-in vs built-in, plugin vs built-in, plugin vs plugin) is a
  :class:`RegistryError` naming both sides, never a silent overwrite; registering the very same
  entry again is a no-op (a module imported twice);
- a plugin whose entry point fails to import is skipped with a :class:`PluginWarning` naming it:
  one broken third-party package should not break every command;
- an unknown name is a :class:`~routerlab.errors.UsageError` listing the known ones.

Standard library only (plus ``routerlab.errors``), so every layer can use it.
"""

from __future__ import annotations

import importlib
import pkgutil
import warnings
from collections.abc import Callable, Iterable, Iterator
from importlib import metadata
from importlib.metadata import EntryPoint
from typing import Any, Generic, TypeVar

from routerlab.errors import UsageError

T = TypeVar("T")
_MISSING: Any = object()


class RegistryError(UsageError, ValueError):
    """One name registered by two different entries (a UsageError for the CLI, a ValueError for code
    that registers at import time)."""


class PluginWarning(UserWarning):
    """An entry-point plugin failed to load and was skipped."""


def _origin(obj: object) -> str:
    """Where an entry comes from, for error messages: ``module.qualname`` of it (or of its ``fn``)."""
    target = getattr(obj, "fn", obj)
    module, qualname = getattr(target, "__module__", None), getattr(target, "__qualname__", None)
    return f"{module}.{qualname}" if module and qualname else repr(obj)


class Registry(Generic[T]):
    """Entries of one kind by name (see the module docstring for the rules).

    ``kind`` names one entry in messages ("router"), ``plural`` several ("routers"). ``package`` is
    the dotted package whose public modules (no leading underscore, none in ``skip``) hold the
    built-ins; ``group`` the entry-point group of plugins; ``from_plugin(name, loaded, entry_point)``
    turns what an entry point loads into an entry (default: the loaded object itself);
    ``on_load(registry)`` runs once after both, for kinds whose modules register elsewhere first
    (CLI commands register on the typer app, and are collected from it).
    """

    def __init__(
        self,
        kind: str,
        *,
        plural: str | None = None,
        package: str | None = None,
        group: str | None = None,
        skip: Iterable[str] = (),
        from_plugin: Callable[[str, Any, EntryPoint], T] | None = None,
        on_load: Callable[[Registry[T]], None] | None = None,
    ) -> None:
        self.kind = kind
        self.plural = plural or f"{kind}s"
        self.package = package
        self.group = group
        self.skip = frozenset(skip)
        self._from_plugin = from_plugin
        self._on_load = on_load
        self._entries: dict[str, T] = {}
        self._origins: dict[str, str] = {}
        self._loaded = False

    # -- registration -----------------------------------------------------------------
    def add(self, name: str, entry: T, origin: str | None = None) -> T:
        """Register ``entry`` under ``name``; a different entry under a taken name is an error."""
        where = origin or _origin(entry)
        if name in self._entries:
            current = self._entries[name]
            if current is entry or current == entry:
                return entry
            raise RegistryError(f"{self.kind} {name!r} registered twice: by {self._origins[name]} and by {where}")
        self._entries[name] = entry
        self._origins[name] = where
        return entry

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@REGISTRY.register("name")`` adds the decorated object as is."""

        def decorate(entry: T) -> T:
            return self.add(name, entry)

        return decorate

    def register_named(self, name: str) -> Callable[[T], T]:
        """Class decorator: adds the class under ``name`` and sets its ``name`` attribute to it (after adding, so a
        taken name raises before the class is touched)."""

        def decorate(cls: T) -> T:
            self.add(name, cls)
            cls.name = name  # type: ignore[attr-defined]
            return cls

        return decorate

    def remove(self, name: str) -> None:
        """Forget ``name`` (tests that register a temporary entry clean up with this)."""
        self._entries.pop(name, None)
        self._origins.pop(name, None)

    # -- discovery --------------------------------------------------------------------
    def load(self) -> None:
        """Import the built-in modules, then load the plugins; only the first call does work."""
        if self._loaded:
            return
        self._loaded = True
        try:
            if self.package is not None:
                pkg = importlib.import_module(self.package)
                for mod in pkgutil.iter_modules(pkg.__path__):
                    if not mod.name.startswith("_") and mod.name not in self.skip:
                        importlib.import_module(f"{self.package}.{mod.name}")
            if self.group is not None:
                for ep in metadata.entry_points(group=self.group):  # looked up here: tests patch it
                    self._load_plugin(ep)
            if self._on_load is not None:
                self._on_load(self)
        except BaseException:
            self._loaded = False  # a repeated name stays an error on the next call too
            raise

    def _load_plugin(self, ep: EntryPoint) -> None:
        try:
            loaded = ep.load()
        except Exception as exc:  # any failure inside third-party code: warn and go on
            warnings.warn(f"{self.kind} plugin {ep.name!r} ({ep.value}, entry point group {self.group!r}) "
                          f"failed to load and is skipped: {type(exc).__name__}: {exc}", PluginWarning, stacklevel=4)
            return
        entry = self._from_plugin(ep.name, loaded, ep) if self._from_plugin else loaded
        self.add(ep.name, entry, origin=f"plugin {ep.value} (entry point group {self.group!r})")

    # -- lookup -----------------------------------------------------------------------
    def get(self, name: str, default: Any = _MISSING) -> T:
        """The entry called ``name``; unknown: ``default`` when given, else a UsageError listing the
        known names."""
        self.load()
        if name in self._entries:
            return self._entries[name]
        if default is not _MISSING:
            return default  # type: ignore[no-any-return]
        raise UsageError(f"unknown {self.kind} {name!r}; known {self.plural}: {', '.join(self.names()) or 'none'}")

    def names(self) -> list[str]:
        """Every known name, sorted."""
        self.load()
        return sorted(self._entries)

    def items(self) -> list[tuple[str, T]]:
        """Every (name, entry), sorted by name."""
        self.load()
        return sorted(self._entries.items(), key=lambda kv: kv[0])

    def as_dict(self) -> dict[str, T]:
        """A sorted copy as a plain dict (the shape the older ``routers()``-style functions return)."""
        return dict(self.items())

    # A small mapping surface, so ``REGISTRY[name]``, ``name in REGISTRY`` and pytest's
    # ``monkeypatch.setitem`` work; assignment goes through :meth:`add`, so it cannot overwrite.
    def __getitem__(self, name: str) -> T:
        self.load()
        return self._entries[name]

    def __setitem__(self, name: str, entry: T) -> None:
        self.add(name, entry)

    def __delitem__(self, name: str) -> None:
        if name not in self._entries:
            raise KeyError(name)
        self.remove(name)

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self.load()
        return len(self._entries)

    def values(self) -> list[T]:
        return [entry for _, entry in self.items()]

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self._entries)} entries)"
