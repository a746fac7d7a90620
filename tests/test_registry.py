"""One registry type (issue 8): repeated names are errors, unknown names list the known ones,
entry-point plugins load once, and every pluggable kind uses it."""

from __future__ import annotations

import importlib.metadata
from importlib.metadata import EntryPoint
from typing import Any

import pytest

from routerlab import cli
from routerlab._registry import PluginWarning, Registry, RegistryError
from routerlab.data import importers
from routerlab.errors import UsageError
from routerlab.features import registry as encoder_registry
from routerlab.reports import audit
from routerlab.routers import base as router_base


def double(x: int) -> int:
    return 2 * x


def triple(x: int) -> int:
    return 3 * x


def _patch_entry_points(monkeypatch: pytest.MonkeyPatch, group: str, *eps: EntryPoint) -> None:
    def fake(**kw: Any) -> list[EntryPoint]:
        return [ep for ep in eps if ep.group == kw.get("group")]

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)


def test_a_repeated_name_is_an_error_naming_both() -> None:
    reg: Registry[Any] = Registry("thing")
    reg.register("x")(double)
    reg.register("x")(double)  # the same entry again (a module imported twice) is fine
    with pytest.raises(RegistryError, match=r"thing 'x' registered twice: by .*double and by .*triple"):
        reg.register("x")(triple)
    assert reg.get("x") is double
    with pytest.raises(RegistryError):
        reg["x"] = triple  # item assignment cannot overwrite either


def test_an_unknown_name_lists_the_known_ones() -> None:
    reg: Registry[Any] = Registry("thing")
    reg.add("b", triple)
    reg.add("a", double)
    with pytest.raises(UsageError, match=r"unknown thing 'c'; known things: a, b"):
        reg.get("c")
    assert reg.names() == ["a", "b"] and reg.items() == [("a", double), ("b", triple)]
    assert reg.get("c", None) is None and "a" in reg and len(reg) == 2


def test_an_entry_point_plugin_loads_once(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = EntryPoint("dbl", f"{__name__}:double", "demo.things")
    _patch_entry_points(monkeypatch, "demo.things", ep)
    reg: Registry[Any] = Registry("thing", group="demo.things")
    assert reg.get("dbl") is double
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: pytest.fail("loaded twice"))
    assert reg.names() == ["dbl"]


def test_a_plugin_may_not_take_a_built_in_name(monkeypatch: pytest.MonkeyPatch) -> None:
    _patch_entry_points(monkeypatch, "demo.things", EntryPoint("x", f"{__name__}:triple", "demo.things"))
    reg: Registry[Any] = Registry("thing", group="demo.things")
    reg.add("x", double)
    with pytest.raises(RegistryError, match=r"registered twice: by .*double and by plugin .*:triple"):
        reg.names()
    with pytest.raises(RegistryError):  # still an error on the next call, not half loaded
        reg.names()


def test_a_broken_plugin_is_a_warning_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _patch_entry_points(monkeypatch, "demo.things", EntryPoint("bad", "no_such_module_xyz:fn", "demo.things"),
                        EntryPoint("dbl", f"{__name__}:double", "demo.things"))
    reg: Registry[Any] = Registry("thing", group="demo.things")
    with pytest.warns(PluginWarning, match=r"thing plugin 'bad' \(no_such_module_xyz:fn"):
        assert reg.names() == ["dbl"]


def test_a_router_plugin_joins_the_router_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    from routerlab.routers.bounds import RandomRouter

    fresh: Registry[Any] = Registry("router", group="routerlab.routers")
    for name, cls in router_base.routers().items():  # the built-ins, without re-importing their modules
        fresh.add(name, cls)
    monkeypatch.setattr(router_base, "_REGISTRY", fresh)
    _patch_entry_points(monkeypatch, "routerlab.routers",
                        EntryPoint("my-random", "routerlab.routers.bounds:RandomRouter", "routerlab.routers"))
    assert router_base.routers()["my-random"] is RandomRouter
    assert router_base.get_router("my-random:seed=1").seed == 1 and "knn" in router_base.routers()


def test_a_plugin_command_joins_the_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    cli._register_commands()  # the built-in command modules, imported once for the real registry
    fresh: Registry[Any] = Registry("command", group="routerlab.commands", from_plugin=cli._plugin_command,
                                    on_load=cli._collect_commands)
    monkeypatch.setattr(cli, "COMMANDS", fresh)
    monkeypatch.setattr(cli.app, "registered_commands", list(cli.app.registered_commands))
    _patch_entry_points(monkeypatch, "routerlab.commands",
                        EntryPoint("hello", f"{__name__}:hello", "routerlab.commands"))
    cli._register_commands()
    assert "hello" in fresh.names() and "evaluate" in fresh.names()
    assert cli.main(["hello"]) == 0
    assert capsys.readouterr().out == "hello from a plugin\n"


def hello() -> None:
    """Say hello (a plugin command)."""
    print("hello from a plugin")


def test_every_pluggable_kind_is_a_registry() -> None:
    for reg in (importers._REGISTRY, encoder_registry._REGISTRY, router_base._REGISTRY, audit._SECTIONS,
                cli.COMMANDS):
        assert isinstance(reg, Registry)
        assert reg.names(), reg
    assert {"evaluate", "import", "routers", "audit"} <= set(cli.COMMANDS.names())
    assert "tfidf" in encoder_registry.encoders() and "routerbench" in importers.importers()
