"""The experiment file: a small TOML schema declaring tables x routers x protocols x seeds x settings.

Every value is checked when the file is read, before any table is loaded or router trained; an error is
one :class:`routerlab.errors.UsageError` line naming the file and the key (``exp.toml: [[tables]][1].path:
no such directory``), an unknown key suggests the nearest known one. Relative paths are relative to the
TOML file. The schema is documented in the README ("Experiments as files").
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from routerlab.errors import RouterlabError, UsageError
from routerlab.protocols.base import MAX_BOOT, MIN_BOOT, SEED_MAX, get_protocol, protocol_names, value_kind

DEMO = "demo"
"""``path = "demo"`` names the embedded demo benchmark (write ``"./demo"`` for a directory called demo)."""

INJECTED = {"split": "[[tables]] split / test_fraction", "encoder": "[settings] encoder",
            "n_boot": "[settings] n_boot", "skip_inapplicable": "[settings] skip_inapplicable",
            "compare_to": "nowhere: a cell's numbers must not depend on the other routers run beside it"}
"""Protocol settings an experiment sets in one place for every protocol, never in a protocol's own table: where
each is set instead."""
_TOP_KEYS = ("name", "description", "tables", "routers", "protocols", "seeds", "settings")
_TABLE_KEYS = ("name", "path", "n_queries", "seed", "split", "test_fraction", "dev")
_SETTING_KEYS = ("encoder", "n_boot", "skip_inapplicable")
_SETTING_DEFAULTS: dict[str, Any] = {"encoder": "tfidf", "n_boot": 200, "skip_inapplicable": False}


@dataclass(frozen=True)
class TableSpec:
    """One table of the experiment: the embedded demo (``path == "demo"``, with ``demo_options``) or a
    routerlab table directory, the split its cells use (``given`` or ``random:F``) and the fraction of its training
    side held out as a development part (``dev``; None = none), which every protocol that makes choices reads."""

    name: str
    path: Path | None
    demo_options: dict[str, int]
    split: str
    dev: float | None = None

    def describe(self) -> dict[str, Any]:
        """What identifies this table's cells besides its content hash (name, source and split)."""
        source: Any = {"demo": self.demo_options} if self.path is None else {"dir": str(self.path)}
        return {"name": self.name, "source": source, "split": self.split}

    def load(self) -> Any:
        """The :class:`routerlab.data.table.RoutingTable` (loaded here, so reading the file stays cheap)."""
        if self.path is None:
            from routerlab.datasets import demo

            return demo(**self.demo_options)
        from routerlab.data.store import load

        return load(self.path)


@dataclass(frozen=True)
class ProtocolSpec:
    """A registered protocol (``routerlab protocols``) and the settings its TOML table gives (``rounds = 3``),
    checked by the protocol's settings class when the file is read; the experiment's split, encoder, n_boot and
    skip_inapplicable are added per cell (:data:`INJECTED`)."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``cold-start`` or ``cold-start(logging=eps-greedy:knn:0.1)``: how tables print it."""
        if not self.options:
            return self.name
        return f"{self.name}({', '.join(f'{k}={v}' for k, v in sorted(self.options.items()))})"


@dataclass(frozen=True)
class Experiment:
    """A parsed experiment file. ``settings_grid`` is the product of every list-valued setting (one dict
    per combination); ``file_hash`` is the sha256 of the file's bytes (recorded with each run)."""

    name: str
    description: str
    source: Path
    file_hash: str
    tables: list[TableSpec]
    routers: list[str]
    protocols: list[ProtocolSpec]
    seeds: list[int]
    settings_grid: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    @property
    def n_cells(self) -> int:
        """Cells per table and seed, summed over protocols: its routers (one cell for a protocol that takes none)
        x the distinct combinations of the settings it reads."""
        total = 0
        for p in self.protocols:
            proto = get_protocol(p.name)
            reads = set(proto.Settings.names())
            combos = {canonical({k: v for k, v in g.items() if k in reads}) for g in self.settings_grid}
            total += len(combos) * (len(self.routers) if proto.uses_routers else 1)
        return total * len(self.tables) * len(self.seeds)


def _did_you_mean(key: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"


class _Reader:
    """Checks values, raising one UsageError that names the file and the key."""

    def __init__(self, source: Path) -> None:
        self.source = source

    def fail(self, key: str, message: str) -> UsageError:
        return UsageError(f"{self.source}: {key}: {message}")

    def check_keys(self, where: str, data: dict[str, Any], known: tuple[str, ...]) -> None:
        for key in data:
            if key not in known:
                name = f"{where}.{key}" if where else key
                raise self.fail(name, f"unknown key{_did_you_mean(key, known)}")

    def string(self, key: str, value: Any) -> str:
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string, got {_kind(value)}")
        if not value.strip():
            raise self.fail(key, "must not be empty")
        return value.strip()

    def integer(self, key: str, value: Any, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"must be an integer, got {_kind(value)}")
        if not lo <= value <= hi:
            raise self.fail(key, f"must be between {lo} and {hi:,}, got {value}")
        return value

    def array(self, key: str, value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(key, f"must be an array, got {_kind(value)}")
        if not value:
            raise self.fail(key, "must not be empty")
        return value


def _kind(value: Any) -> str:
    """A TOML reader's name for a value's type, for messages."""
    return value_kind(value, "an array")


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_experiment(path: Path, tables: dict[str, str] | None = None) -> Experiment:
    """Read and check an experiment file (see the module docstring); nothing is loaded or trained yet.
    ``tables`` maps a table's name to a path that replaces the file's (``routerlab run --table NAME=PATH``)."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file")
    if path.is_dir():
        raise UsageError(f"{path}: is a directory, not an experiment file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror})") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text, so not a TOML experiment file") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    return parse_experiment(data, path, hashlib.sha256(raw).hexdigest(), tables)


def parse_experiment(data: dict[str, Any], source: Path, digest: str = "", tables: dict[str, str] | None = None
                     ) -> Experiment:
    """Check a decoded TOML document; ``source`` names it in errors and anchors relative paths; ``tables``
    replaces tables' paths by name (relative to the working directory)."""
    r = _Reader(source)
    r.check_keys("", data, _TOP_KEYS)
    for key in ("name", "tables", "protocols", "seeds"):
        if key not in data:
            raise r.fail(key, "missing (required: name, tables, protocols, seeds; routers for protocols that "
                              "evaluate routers)")
    name = r.string("name", data["name"])
    description = r.string("description", data["description"]) if "description" in data else ""
    table_specs = _tables(r, data["tables"], source.parent, tables or {})
    protocols = _protocols(r, data["protocols"], source.parent)
    with_routers = [p.name for p in protocols if get_protocol(p.name).uses_routers]
    notes: list[str] = []
    if "routers" in data:
        routers = _routers(r, data["routers"])
        without = [p.name for p in protocols if not get_protocol(p.name).uses_routers]
        if without:
            notes.append(f"{', '.join(dict.fromkeys(without))} take{'s' if len(set(without)) == 1 else ''} no "
                         "routers: the experiment's router list is ignored for "
                         f"{'it' if len(set(without)) == 1 else 'them'}")
    elif with_routers:
        raise r.fail("routers", f"missing: protocol {with_routers[0]} evaluates routers, e.g. routers = "
                                '["oracle", "best-single", "knn"]')
    else:
        routers = []
    if any(t.dev is not None for t in table_specs):
        blind = [p.name for p in protocols if "dev" not in get_protocol(p.name).Settings.names()]
        if blind:
            notes.append(f"{', '.join(dict.fromkeys(blind))} make{'s' if len(set(blind)) == 1 else ''} no choice "
                         "on a development part: [[tables]] dev is ignored for "
                         f"{'it' if len(set(blind)) == 1 else 'them'}")
    seeds = _seeds(r, data["seeds"])
    grid = _settings(r, data.get("settings", {}))
    return Experiment(name=name, description=description, source=source, file_hash=digest, tables=table_specs,
                      routers=routers, protocols=protocols, seeds=seeds, settings_grid=grid, notes=notes)


def _tables(r: _Reader, value: Any, base: Path, overrides: dict[str, str]) -> list[TableSpec]:
    if isinstance(value, dict):
        raise r.fail("tables", "must be an array of tables: write [[tables]], not [tables]")
    items = r.array("tables", value)
    out: list[TableSpec] = []
    names = [str(item.get("name", "")) for item in items if isinstance(item, dict)]
    for name in overrides:
        if name not in names and not any(Path(str(it.get("path", ""))).name == name or it.get("path") == name
                                         for it in items if isinstance(it, dict) and "name" not in it):
            raise UsageError(f"--table {name}=...: the experiment has no table {name!r} (its tables: "
                             f"{', '.join(_table_names(items)) or 'none'})")
    for i, item in enumerate(items, start=1):
        where = f"[[tables]][{i}]"
        if not isinstance(item, dict):
            raise r.fail(where, f"must be a table with a path, got {_kind(item)}")
        r.check_keys(where, item, _TABLE_KEYS)
        if "path" not in item:
            raise r.fail(f"{where}.path", 'missing: a table directory or "demo"')
        raw_path = r.string(f"{where}.path", item["path"])
        own_name = str(item["name"]) if isinstance(item.get("name"), str) else _default_name(raw_path)
        if own_name in overrides:  # --table NAME=PATH: a path relative to the working directory
            raw_path = overrides[own_name].strip()
            if not raw_path:
                raise UsageError(f"--table {own_name}=: the path is empty")
            where = f"--table {own_name}"
            item = {k: v for k, v in item.items() if k not in ("n_queries", "seed") or raw_path == DEMO}
            if raw_path != DEMO:
                raw_path = str(Path(raw_path).expanduser().resolve())
            item["name"] = own_name
        demo_options: dict[str, int] = {}
        table_path: Path | None = None
        if raw_path == DEMO:
            if "n_queries" in item:
                demo_options["n_queries"] = r.integer(f"{where}.n_queries", item["n_queries"], 12, 10_000_000)
            if "seed" in item:
                demo_options["seed"] = r.integer(f"{where}.seed", item["seed"], 0, SEED_MAX)
        else:
            table_path = Path(raw_path).expanduser()
            if not table_path.is_absolute():
                table_path = base / table_path
            if not table_path.is_dir():
                what = "is a file, not a table directory" if table_path.exists() else "no such directory"
                raise r.fail(f"{where}.path", f"{what} ({table_path})")
            for key in ("n_queries", "seed"):
                if key in item:
                    raise r.fail(f"{where}.{key}", 'applies only to path = "demo"')
        default_name = DEMO if table_path is None else table_path.name
        name = r.string(f"{where}.name", item["name"]) if "name" in item else default_name
        split = _split(r, where, item)
        dev = _dev(r, where, item)
        out.append(TableSpec(name=name, path=table_path, demo_options=demo_options, split=split, dev=dev))
    seen: set[str] = set()
    for i, t in enumerate(out, start=1):
        if t.name in seen:
            raise r.fail(f"[[tables]][{i}].name", f"{t.name!r} is used by an earlier table; names must be unique")
        seen.add(t.name)
    return out


def _default_name(raw_path: str) -> str:
    return DEMO if raw_path == DEMO else Path(raw_path).expanduser().name


def _table_names(items: list[Any]) -> list[str]:
    return [str(it["name"]) if isinstance(it.get("name"), str) else _default_name(str(it.get("path", "")))
            for it in items if isinstance(it, dict)]


def _split(r: _Reader, where: str, item: dict[str, Any]) -> str:
    kind = r.string(f"{where}.split", item["split"]) if "split" in item else "given"
    if kind not in ("given", "random"):
        raise r.fail(f"{where}.split", f"must be 'given' or 'random', got {kind!r}")
    if "test_fraction" not in item:
        return "given" if kind == "given" else "random:0.2"
    if kind != "random":
        raise r.fail(f"{where}.test_fraction", 'applies only to split = "random"')
    frac = item["test_fraction"]
    if isinstance(frac, bool) or not isinstance(frac, int | float) or not math.isfinite(frac):
        raise r.fail(f"{where}.test_fraction", f"must be a number, got {_kind(frac)}")
    if not 0.0 < frac < 1.0:
        raise r.fail(f"{where}.test_fraction", f"must be between 0 and 1 (exclusive), got {frac}")
    return f"random:{float(frac)!r}"


def _dev(r: _Reader, where: str, item: dict[str, Any]) -> float | None:
    """``dev = F``: the share of the training side held out as a development part, a number in (0, 1)."""
    if "dev" not in item:
        return None
    frac = item["dev"]
    if isinstance(frac, bool) or not isinstance(frac, int | float) or not math.isfinite(frac):
        raise r.fail(f"{where}.dev", f"must be a number, got {_kind(frac)}")
    if not 0.0 < frac < 1.0:
        raise r.fail(f"{where}.dev", f"must be between 0 and 1 (exclusive), got {frac}")
    return float(frac)


def _routers(r: _Reader, value: Any) -> list[str]:
    from routerlab.routers.base import get_router

    items = r.array("routers", value)
    out: list[str] = []
    for i, item in enumerate(items, start=1):
        spec = r.string(f"routers[{i}]", item)
        try:
            get_router(spec)
        except RouterlabError as exc:
            raise r.fail(f"routers[{i}]", str(exc)) from None
        except (TypeError, ValueError) as exc:
            raise r.fail(f"routers[{i}]", f"bad router {spec!r}: {exc}") from None
        if spec in out:
            raise r.fail(f"routers[{i}]", f"{spec!r} is listed twice")
        out.append(spec)
    return out


def _protocols(r: _Reader, value: Any, base: Path) -> list[ProtocolSpec]:
    """Each item a registered protocol's name, or a table ``{ name = ..., SETTING = value }`` whose keys are the
    protocol's settings (its command's long options with dashes as underscores), checked by the protocol's own
    settings class, the same checks and messages as on the command line."""
    known = protocol_names()
    items = r.array("protocols", value)
    out: list[ProtocolSpec] = []
    for i, item in enumerate(items, start=1):
        where = f"protocols[{i}]"
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict):
            raise r.fail(where, f"must be a protocol name or a table with name = ..., got {_kind(item)}")
        if "name" not in item:
            raise r.fail(f"{where}.name", f"missing: one of {', '.join(known)}")
        name = r.string(f"{where}.name", item["name"])
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise r.fail(f"{where}.name", f"unknown protocol {name!r} (known: {', '.join(known)}){hint}")
        settings_cls = get_protocol(name).Settings
        options = {k: v for k, v in item.items() if k != "name"}
        for key in options:
            if key in INJECTED and key in settings_cls.names():
                raise r.fail(f"{where}.{key}", f"set for every protocol in one place: {INJECTED[key]}")
        options = _anchor_paths(settings_cls, options, base)
        settings_cls.from_mapping(options, where=_locate(r.source, where))
        spec = ProtocolSpec(name=name, options=options)
        if spec in out:
            raise r.fail(where, f"{spec.label} is listed twice")
        out.append(spec)
    return out


def _locate(source: Path, where: str) -> Callable[[str], str]:
    return lambda key: f"{source}: {where}.{key}"


def _anchor_paths(settings_cls: Any, options: dict[str, Any], base: Path) -> dict[str, Any]:
    """Settings declared as paths (``logs = "logs/test.csv"``, or an array of them) made relative to the experiment
    file's directory."""
    infos = settings_cls.settings_info()
    out = dict(options)
    def anchored(value: str) -> str:
        p = Path(value.strip()).expanduser()
        return str(p if p.is_absolute() else base / p)

    for key, value in options.items():
        info = infos.get(key)
        if info is None or not info.path:
            continue
        if isinstance(value, str) and value.strip():
            out[key] = anchored(value)
        elif isinstance(value, list):  # several files (ope's logs = ["a.csv", "b.csv"])
            out[key] = [anchored(v) if isinstance(v, str) and v.strip() else v for v in value]
    return out


def _seeds(r: _Reader, value: Any) -> list[int]:
    items = r.array("seeds", value)
    seeds = [r.integer(f"seeds[{i}]", s, 0, SEED_MAX) for i, s in enumerate(items, start=1)]
    for i, s in enumerate(seeds, start=1):
        if s in seeds[: i - 1]:
            raise r.fail(f"seeds[{i}]", f"seed {s} is listed twice")
    return seeds


def _settings(r: _Reader, value: Any) -> list[dict[str, Any]]:
    """The settings grid: each key a value or an array of values (an array sweeps it)."""
    if not isinstance(value, dict):
        raise r.fail("settings", f"must be a table ([settings]), got {_kind(value)}")
    r.check_keys("settings", value, _SETTING_KEYS)
    choices: dict[str, list[Any]] = {}
    for key in _SETTING_KEYS:
        raw = value.get(key, _SETTING_DEFAULTS[key])
        many = raw if isinstance(raw, list) else [raw]
        if not many:
            raise r.fail(f"settings.{key}", "must not be an empty array")
        checked = []
        for j, v in enumerate(many, start=1):
            name = f"settings.{key}" + (f"[{j}]" if isinstance(raw, list) else "")
            checked.append(_setting(r, key, name, v))
        for j, v in enumerate(checked, start=1):
            if v in checked[: j - 1]:
                raise r.fail(f"settings.{key}[{j}]", f"{v!r} is listed twice")
        choices[key] = checked
    return [dict(zip(choices, combo, strict=True)) for combo in itertools.product(*choices.values())]


def _setting(r: _Reader, key: str, name: str, value: Any) -> Any:
    if key == "encoder":
        from routerlab.features.registry import get_encoder

        spec = _anchor_encoder_path(r.string(name, value), r.source.parent)
        try:
            get_encoder(spec)
        except RouterlabError as exc:
            raise r.fail(name, str(exc)) from None
        except (TypeError, ValueError) as exc:
            raise r.fail(name, f"bad encoder {spec!r}: {exc}") from None
        return spec
    if key == "n_boot":
        return r.integer(name, value, MIN_BOOT, MAX_BOOT)
    if not isinstance(value, bool):
        raise r.fail(name, f"must be true or false, got {_kind(value)}")
    return value


def _anchor_encoder_path(spec: str, base: Path) -> str:
    """``precomputed:path=vectors.npy`` -> the path made relative to the experiment file's directory."""
    name, _, opts = spec.partition(":")
    if name.strip() != "precomputed" or not opts:
        return spec
    parts = []
    for part in opts.split(","):
        key, eq, val = part.partition("=")
        if eq and key.strip() == "path" and val.strip() and not Path(val.strip()).expanduser().is_absolute():
            part = f"{key}={base / val.strip()}"
        parts.append(part)
    return f"{name}:{','.join(parts)}"


def canonical(obj: Any) -> str:
    """The canonical JSON a cell id hashes: sorted keys, no spaces."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
