"""The protocol layer: one registered protocol per capability, shared by the CLI, experiment files and the audit.

A protocol is three things (see docs/protocols.md):

- a typed **settings** object, a frozen dataclass of :func:`setting` fields, each declaring its default, its
  meaning and its rule (an :class:`~routerlab._spec.Interval`, an :class:`~routerlab._spec.Options` or a check
  function). :meth:`ProtocolSettings.from_mapping` turns values from the command line, a TOML file or Python
  into settings with the same checks and the same one-line errors, whatever the source; only where the error is
  located differs (``--rounds``, ``exp.toml: protocols[2].rounds``, ``rounds``);
- ``run(table, settings, seed, routers) -> Result``;
- one **result** shape: the run record (:class:`~routerlab.data.provenance.Provenance`) plus metric records
  ``(router, metric, value, ci_low, ci_high, slice)``, with artifacts (curves, per-query decisions) and the
  protocol's own detailed result (``native``, what the CLI prints and the audit renders) beside them.

Protocols register with ``@register_protocol``; plugins join through the ``routerlab.protocols`` entry-point
group, as routers and backends do. ``routerlab protocols`` lists them with their settings.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self, TypeVar

from routerlab._registry import Registry
from routerlab._spec import Constraint, Interval, Options
from routerlab.data.provenance import Provenance
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError

SEED_MAX = 2**32 - 1
# The fewest resamples for a 95% percentile interval whose 2.5% and 97.5% tails each hold at least one
# resample (alpha / 2 * n_boot >= 1); fewer would make the interval bounds a single arbitrary resample.
MIN_BOOT = 40
MAX_BOOT = 1_000_000


# ------------------------------------------------------------------------------------------------ settings
class SettingError(UsageError):
    """A setting's value breaks its rule: ``key`` names the setting, ``reason`` says why (without the place)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


Check = Callable[[Any], Any]
"""A check function: returns the (possibly normalised) value, or raises UsageError with the reason."""


@dataclass(frozen=True)
class Setting:
    """What a settings field declares beside its default: its meaning (``help``, shown by ``--help`` and
    ``routerlab protocols``) and its rule."""

    help: str
    rule: Constraint | None = None
    check: Check | None = None
    option: str | None = None  # the CLI's long option when it is not --<name with dashes>
    path: bool = False  # a file or directory: relative to the experiment file when it comes from one


def setting(default: Any, help: str, rule: Constraint | None = None, *, check: Check | None = None,
            option: str | None = None, path: bool = False) -> Any:
    """A settings field: ``rounds: int = setting(5, "number of rounds", Interval(int, 2, 10_000))``."""
    meta = {"setting": Setting(help, rule, check, option, path)}
    if isinstance(default, list):
        default = tuple(default)
    return field(default=default, metadata=meta)


def option_name(name: str, info: Setting | None = None) -> str:
    """A setting's command-line option: ``--n-boot`` for ``n_boot`` (TOML keys are the same with underscores)."""
    if info is not None and info.option:
        return info.option
    return "--" + name.replace("_", "-")


def value_kind(value: Any, list_word: str = "a list") -> str:
    """A value's type in words, for messages (``an integer (3)``); a TOML reader calls a list ``an array``."""
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, list | tuple):
        return list_word
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__



def _base_type(tp: Any) -> tuple[Any, bool, bool]:
    """(element type, optional?, list?) of an annotation such as ``int``, ``str | None`` or ``tuple[int, ...]``."""
    optional = False
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        optional = len(args) < len(typing.get_args(tp))
        tp = args[0] if len(args) == 1 else tp
        origin = typing.get_origin(tp)
    if origin in (tuple, list):
        return typing.get_args(tp)[0], optional, True
    return tp, optional, False


def _scalar(value: Any, kind: Any) -> Any:
    """``value`` as one ``kind`` (int, float, str, bool), or a UsageError saying what was expected."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in {"true", "false"}:
            return value.strip().lower() == "true"
        raise UsageError(f"must be true or false, got {value_kind(value)}")
    if kind is int:
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                raise UsageError(f"must be an integer, got {value_kind(value)}") from None
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and math.isfinite(value) and value.is_integer():
                raise UsageError(f"must be an integer, got {value_kind(value)}: write {int(value)}")
            raise UsageError(f"must be an integer, got {value_kind(value)}")
        return value
    if kind is float:
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                raise UsageError(f"must be a number, got {value_kind(value)}") from None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise UsageError(f"must be a number, got {value_kind(value)}")
        return float(value)
    if kind is str:
        if not isinstance(value, str):
            raise UsageError(f"must be a string, got {value_kind(value)}")
        if not value.strip():
            raise UsageError("must not be empty")
        return value.strip()
    return value


def _check_rule(value: Any, rule: Constraint | None) -> None:
    if rule is None or rule.accepts(value):
        return
    shown = repr(value) if not isinstance(value, float) else f"{value:g}"
    raise UsageError(f"must be {rule.describe()}, got {shown}")


def coerce_setting(value: Any, tp: Any, info: Setting | None) -> Any:
    """One setting's value converted to its declared type and checked against its rule and check function: the
    one place every source of settings goes through. A list accepts a list, a tuple or comma-separated text."""
    kind, optional, many = _base_type(tp)
    if optional and isinstance(value, str) and value.strip().lower() == "none":
        value = None  # the word for no value, as a command line or a file writes it
    if value is None:
        if optional:
            return None
        raise UsageError("must be given (it has no 'none' value)")
    if many:
        items: Iterable[Any]
        if isinstance(value, str):
            items = [v for v in (p.strip() for p in value.split(",")) if v]
        elif isinstance(value, list | tuple):
            items = value
        else:
            items = [value]
        out = []
        for i, item in enumerate(items, start=1):
            try:
                v = _scalar(item, kind)
                if info is not None:
                    _check_rule(v, info.rule)
            except UsageError as exc:
                raise UsageError(f"item {i}: {exc}") from None
            out.append(v)
        if not out:
            raise UsageError("needs at least one value")
        dup = next((v for j, v in enumerate(out) if v in out[:j]), None)
        if dup is not None:
            raise UsageError(f"lists {dup!r} twice")
        result: Any = tuple(out)
    else:
        result = _scalar(value, kind)
        if info is not None:
            _check_rule(result, info.rule)
    if info is not None and info.check is not None:
        result = info.check(result)
    return result


S = TypeVar("S", bound="ProtocolSettings")


@dataclass(frozen=True)
class ProtocolSettings:
    """Base of every protocol's settings: a frozen dataclass of :func:`setting` fields, checked when made.

    Subclasses may override :meth:`validate` for rules that join several settings (raise
    :class:`SettingError` naming the setting). ``protocol_name`` is set when the protocol registers."""

    protocol_name: ClassVar[str] = ""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            info = f.metadata.get("setting")
            try:
                value = coerce_setting(getattr(self, f.name), hints[f.name], info)
            except SettingError:
                raise
            except UsageError as exc:
                raise SettingError(f.name, str(exc)) from None
            object.__setattr__(self, f.name, value)
        self.validate()

    def validate(self) -> None:
        """Rules between settings (none by default)."""

    # -- sources ----------------------------------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], *, where: Callable[[str], str] | None = None) -> Self:
        """Settings from ``values`` (missing keys take their defaults). ``where(key)`` names a setting in errors
        (``--rounds`` from the CLI, ``exp.toml: protocols[2].rounds`` from a file; the key itself by default); an
        unknown key is an error that suggests the nearest known one."""
        import difflib

        loc = where or (lambda key: key)
        known = cls.names()
        for key in values:
            if key not in known:
                owner = f"protocol {cls.protocol_name}" if cls.protocol_name else cls.__name__
                others = [n for n, p in PROTOCOLS.items() if key in p.Settings.names()]
                if others:
                    names = " and ".join(others) if len(others) < 3 else f"{', '.join(others[:-1])} and {others[-1]}"
                    raise UsageError(f"{loc(key)}: applies to protocol {names} only, not to "
                                     f"{owner.removeprefix('protocol ')}")
                close = difflib.get_close_matches(key, known, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"its settings: {', '.join(known) or 'none'}"
                raise UsageError(f"{loc(key)}: not a setting of {owner}; {hint}")
        try:
            return cls(**dict(values))
        except SettingError as exc:
            raise UsageError(f"{loc(exc.key)}: {exc.reason}") from None

    @classmethod
    def from_cli(cls, **values: Any) -> Self:
        """Settings from command-line options: values left at None take their defaults (so an option a user did
        not type is never checked against another protocol), and errors name the option (``--rounds``)."""
        infos = cls.settings_info()
        return cls.from_mapping({k: v for k, v in values.items() if v is not None},
                                where=lambda key: option_name(key, infos.get(key)))

    # -- description ------------------------------------------------------------------------------------------
    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def settings_info(cls) -> dict[str, Setting]:
        return {f.name: f.metadata.get("setting", Setting("")) for f in dataclasses.fields(cls)}

    @classmethod
    def help(cls, name: str) -> str:
        """A setting's meaning, for ``--help`` (the CLI's options read it here)."""
        return cls.settings_info()[name].help

    @classmethod
    def describe(cls) -> list[dict[str, Any]]:
        """Every setting: name, CLI option, type, default, rule and meaning (``routerlab protocols``)."""
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            info = f.metadata.get("setting", Setting(""))
            kind, optional, many = _base_type(hints[f.name])
            type_name = getattr(kind, "__name__", str(kind))
            type_name = f"list of {type_name}" if many else type_name
            default = f.default if f.default is not dataclasses.MISSING else None
            out.append({"name": f.name, "option": option_name(f.name, info),
                        "type": type_name + (" or none" if optional else ""),
                        "default": list(default) if isinstance(default, tuple) else default,
                        "rule": info.rule.describe() if info.rule is not None else None, "help": info.help})
        return out

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON-ready values (lists for tuples), in declaration order."""
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
                for f in dataclasses.fields(self)}

    def changed(self) -> dict[str, Any]:
        """The settings that differ from their defaults (what an experiment cell's label shows)."""
        defaults = type(self)()
        return {k: v for k, v in self.to_dict().items() if v != getattr(defaults, k) and
                not (isinstance(v, list) and tuple(v) == getattr(defaults, k))}


# -------------------------------------------------------------------------------------------- common rules
def check_seed(value: int) -> int:
    if not 0 <= value <= SEED_MAX:
        raise UsageError(f"must be an integer in [0, {SEED_MAX}], got {value}")
    return value


def check_split(value: str) -> str:
    """A split spec (``given``, ``random[:F]``, ``ood:DS1,DS2``), checked for its form before any data is read."""
    from routerlab.data.splits import check_split_spec

    check_split_spec(value)
    return value


def check_dev(value: float | None) -> float | None:
    """A development fraction in (0, 1), or None (no development part)."""
    from routerlab.data.splits import check_dev_fraction

    return None if value is None else check_dev_fraction(value)


def check_encoder(value: str) -> str:
    from routerlab.features.registry import get_encoder

    try:
        get_encoder(value)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"bad encoder {value!r}: {exc}") from None
    return value


NBOOT = Interval(int, MIN_BOOT, MAX_BOOT)
SPLIT_HELP = "train/test split: given, random[:F] (seeded) or ood:DS1,DS2"
DEV_HELP = ("hold out a seeded fraction F of the training side (stratified by dataset) as a development part, on "
            "which every choice is made; none = no development part")
ENCODER_HELP = "query encoder: tfidf, minilm or precomputed:path=FILE"
NBOOT_HELP = f"bootstrap resamples per 95% interval ({MIN_BOOT}..{MAX_BOOT:,})"
COMPARE_HELP = ("paired bootstrap of every router against this router of the run; 'auto' = best-single when it "
                "is in the run, 'none' = off")
SKIP_HELP = "leave out (and list) a router that cannot fit this table, instead of stopping the run"


# ----------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class MetricRecord:
    """One number of a protocol's result: ``router`` (or the actor set it describes), ``metric`` (a name in the
    metric catalog), ``value`` with its 95% interval (None where it has none), and ``slice``: ``''`` for the
    whole test set, else the part it describes (``level=word``, ``round=3``, ``m=5``, ``dataset=law``)."""

    router: str
    metric: str
    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    slice: str = ""

    @classmethod
    def of(cls, router: str, metric: str, value: Any, ci: Sequence[Any] | None = None, slice: str = "") -> Self:
        """A record with non-finite numbers written as None (JSON and SQL have no NaN)."""
        lo, hi = (ci[0], ci[1]) if ci is not None else (None, None)
        return cls(router, metric, _finite(value), _finite(lo), _finite(hi), slice)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _finite(x: Any) -> float | None:
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


@dataclass
class Result:
    """What every protocol's ``run`` returns: the run record, the settings, the metric records, the routers
    left out (with why), the sizes evaluated, artifacts (curves, per-query decisions: JSON-ready or arrays) and
    ``native``, the protocol's own detailed result (what its command prints and its audit section renders)."""

    protocol: str
    provenance: Provenance
    settings: ProtocolSettings
    records: list[MetricRecord]
    native: Any = None
    skipped: dict[str, str] = field(default_factory=dict)
    n_train: int = 0
    n_test: int = 0
    artifacts: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The run record, then ``protocol``, ``settings``, ``records``, ``skipped`` and ``notes``."""
        return {**self.provenance.to_dict(), "protocol": self.protocol, "settings": self.settings.to_dict(),
                "n_train": self.n_train, "n_test": self.n_test,
                "records": [r.to_dict() for r in self.records], "skipped": dict(self.skipped),
                "notes": list(self.notes)}

    def select(self, router: str | None = None, metric: str | None = None, slice: str | None = None
               ) -> list[MetricRecord]:
        """The records matching every given field."""
        return [r for r in self.records if (router is None or r.router == router)
                and (metric is None or r.metric == metric) and (slice is None or r.slice == slice)]

    def value(self, router: str, metric: str, slice: str = "") -> float | None:
        """One record's value (a KeyError naming what is missing when there is none)."""
        found = self.select(router, metric, slice)
        if not found:
            raise KeyError(f"no record {router!r} / {metric!r} / slice {slice!r} in the {self.protocol} result")
        return found[0].value


# ---------------------------------------------------------------------------------------------- protocols
@dataclass
class RunContext:
    """What one caller shares between protocol runs on the same table: encoded (train, test) features by (split,
    encoder, seed), so an experiment task or an audit encodes a table once for every protocol; the feature cache
    directory; and ``encode(train, test, encoder) -> (ftrain, ftest)`` when the caller encodes its own way (the
    audit falls back to a one-hot of the dataset on a table without text)."""

    features: dict[tuple[str, str, int], Any] = field(default_factory=dict)
    cache_dir: str | None = None
    encode: Callable[[RoutingTable, RoutingTable, str], Any] | None = None


class Protocol(ABC):
    """One capability (SPEC 4-6): ``Settings`` declares its settings, ``run`` computes its result.

    ``uses_routers`` is False for protocols that evaluate actor sets, not routers (``society``, ``scaling``): an
    experiment's router list is ignored for them, once, with a note."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    spec: ClassVar[str] = ""  # the SPEC section(s) it implements
    Settings: ClassVar[type[ProtocolSettings]]
    uses_routers: ClassVar[bool] = True

    @abstractmethod
    def run(self, table: RoutingTable, settings: Any, seed: int = 0, routers: Sequence[Any] = (),
            context: RunContext | None = None) -> Result:
        """Run on ``table`` with ``settings`` (this protocol's :attr:`Settings`) and ``seed``."""

    def settings(self, **values: Any) -> ProtocolSettings:
        """This protocol's settings from Python keywords (checked as from any other source)."""
        return self.Settings.from_mapping(values)

    def describe(self) -> dict[str, Any]:
        """The protocol as ``routerlab protocols --json`` lists it."""
        return {"name": self.name, "summary": self.summary, "spec": self.spec, "uses_routers": self.uses_routers,
                "settings": self.Settings.describe()}

    def check_routers(self, routers: Sequence[Any]) -> None:
        """A protocol that takes routers needs at least one."""
        if self.uses_routers and not routers:
            raise UsageError(f"protocol {self.name} needs at least one router, e.g. oracle,knn,best-single")


def _plugin_protocol(name: str, loaded: Any, ep: Any) -> type[Protocol]:
    """A plugin's entry point must load a :class:`Protocol` subclass; it takes the entry point's name."""
    if not (isinstance(loaded, type) and issubclass(loaded, Protocol)):
        raise UsageError(f"protocol plugin {name!r} ({ep.value}) is not a Protocol subclass")
    loaded.name = name
    if "protocol_name" not in loaded.Settings.__dict__:
        loaded.Settings.protocol_name = name
    return loaded


PROTOCOLS: Registry[type[Protocol]] = Registry("protocol", package="routerlab.protocols",
                                               group="routerlab.protocols", skip=("base",),
                                               from_plugin=_plugin_protocol)

P = TypeVar("P", bound=type[Protocol])


def register_protocol(name: str) -> Callable[[P], P]:
    """Class decorator: register a :class:`Protocol` subclass under ``name`` (also set as its ``name``)."""

    def decorate(cls: P) -> P:
        if not (isinstance(cls, type) and issubclass(cls, Protocol)):
            raise TypeError(f"@register_protocol({name!r}) decorates a Protocol subclass, got {cls!r}")
        cls.name = name
        PROTOCOLS.add(name, cls)
        if "protocol_name" not in cls.Settings.__dict__:
            cls.Settings.protocol_name = name
        return cls

    return decorate


def get_protocol(name: str) -> Protocol:
    """The protocol called ``name`` (an unknown name is a UsageError listing the known ones)."""
    return PROTOCOLS.get(name)()


def protocol_names() -> list[str]:
    return PROTOCOLS.names()


def run_protocol(name: str, table: RoutingTable, settings: Mapping[str, Any] | ProtocolSettings | None = None,
                 seed: int = 0, routers: Sequence[Any] = (), context: RunContext | None = None) -> Result:
    """Python's door to every protocol: ``run_protocol("voyager", table, {"rounds": 3}, seed=0, routers=[...])``."""
    proto = get_protocol(name)
    if not isinstance(settings, ProtocolSettings):
        settings = proto.Settings.from_mapping(settings or {})
    elif not isinstance(settings, proto.Settings):
        raise UsageError(f"protocol {name} takes {proto.Settings.__name__}, got {type(settings).__name__}")
    check_seed(seed)
    proto.check_routers(routers)
    return proto.run(table, settings, seed, routers, context)


__all__ = ["MAX_BOOT", "MIN_BOOT", "NBOOT", "PROTOCOLS", "Interval", "MetricRecord", "Options", "Protocol",
           "ProtocolSettings", "Result", "RunContext", "Setting", "SettingError", "get_protocol", "option_name",
           "protocol_names", "register_protocol", "run_protocol", "setting"]
