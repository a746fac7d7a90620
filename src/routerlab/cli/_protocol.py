"""What the CLI commands that run a registered protocol share: an option's help read from the protocol's
settings (with the default shown), and a run whose table-dependent setting errors name the option."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from routerlab.errors import UsageError

if TYPE_CHECKING:
    from routerlab.data.table import RoutingTable
    from routerlab.protocols.base import ProtocolSettings, Result, RunContext


def option_help(settings: type[ProtocolSettings], name: str, more: str = "") -> str:
    """The ``--help`` text of a setting's option: its meaning (then ``more``), then its default (the option itself
    defaults to None, so that a value not typed takes the settings' default)."""
    default = next(d["default"] for d in settings.describe() if d["name"] == name)
    shown = "none" if default is None else ",".join(map(_fmt, default)) if isinstance(default, list) else _fmt(default)
    text = settings.help(name)
    return f"{text[:1].upper()}{text[1:]}{more} (default: {shown})."


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def run_from_cli(name: str, table: RoutingTable, settings: ProtocolSettings, seed: int,
                 routers: Sequence[Any] = (), context: RunContext | None = None) -> Result:
    """``run_protocol``, with a setting that the table rules out (``coreset`` larger than the pool, a pool size
    ``m`` above the table's actors) reported under its option: ``--coreset: must be in 1..8, got 9``."""
    from routerlab.protocols.base import SettingError, option_name, run_protocol

    try:
        return run_protocol(name, table, settings, seed, routers, context)
    except SettingError as exc:
        info = type(settings).settings_info().get(exc.key)
        raise UsageError(f"{option_name(exc.key, info)}: {exc.reason}") from None


def with_protocol(record: dict[str, Any], result: Result) -> dict[str, Any]:
    """A command's JSON record plus the protocol layer's ``protocol``, ``settings`` and ``records``."""
    layer = result.to_dict()
    return {**record, **{key: layer[key] for key in ("protocol", "settings", "records")}}
