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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from routerlab.errors import RouterlabError, UsageError

SEED_MAX = 2**32 - 1
MIN_BOOT = 40
MAX_BOOT = 1_000_000
DEMO = "demo"
"""``path = "demo"`` names the embedded demo benchmark (write ``"./demo"`` for a directory called demo)."""

PROTOCOLS = ("full", "cold-start", "voyager")
_PROTOCOL_KEYS: dict[str, tuple[str, ...]] = {
    "full": ("name",),
    "cold-start": ("name", "logging"),
    "voyager": ("name", "rounds", "order"),
}
_TOP_KEYS = ("name", "description", "tables", "routers", "protocols", "seeds", "settings")
_TABLE_KEYS = ("name", "path", "n_queries", "seed", "split", "test_fraction")
_SETTING_KEYS = ("encoder", "n_boot", "skip_inapplicable")
_SETTING_DEFAULTS: dict[str, Any] = {"encoder": "tfidf", "n_boot": 200, "skip_inapplicable": False}


@dataclass(frozen=True)
class TableSpec:
    """One table of the experiment: the embedded demo (``path == "demo"``, with ``demo_options``) or a
    routerlab table directory, and the split its cells use (``given`` or ``random:F``)."""

    name: str
    path: Path | None
    demo_options: dict[str, int]
    split: str

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
    """An evaluation protocol (SPEC 5) and its options: cold-start's ``logging`` policy, Voyager's
    ``rounds`` and ``order``."""

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

    @property
    def n_cells(self) -> int:
        return len(self.tables) * len(self.protocols) * len(self.routers) * len(self.seeds) * len(self.settings_grid)


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
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_experiment(path: Path) -> Experiment:
    """Read and check an experiment file (see the module docstring); nothing is loaded or trained yet."""
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
    return parse_experiment(data, path, hashlib.sha256(raw).hexdigest())


def parse_experiment(data: dict[str, Any], source: Path, digest: str = "") -> Experiment:
    """Check a decoded TOML document; ``source`` names it in errors and anchors relative paths."""
    r = _Reader(source)
    r.check_keys("", data, _TOP_KEYS)
    for key in ("name", "tables", "routers", "protocols", "seeds"):
        if key not in data:
            raise r.fail(key, "missing (required: name, tables, routers, protocols, seeds)")
    name = r.string("name", data["name"])
    description = r.string("description", data["description"]) if "description" in data else ""
    tables = _tables(r, data["tables"], source.parent)
    routers = _routers(r, data["routers"])
    protocols = _protocols(r, data["protocols"])
    seeds = _seeds(r, data["seeds"])
    grid = _settings(r, data.get("settings", {}))
    return Experiment(name=name, description=description, source=source, file_hash=digest, tables=tables,
                      routers=routers, protocols=protocols, seeds=seeds, settings_grid=grid)


def _tables(r: _Reader, value: Any, base: Path) -> list[TableSpec]:
    if isinstance(value, dict):
        raise r.fail("tables", "must be an array of tables: write [[tables]], not [tables]")
    items = r.array("tables", value)
    out: list[TableSpec] = []
    for i, item in enumerate(items, start=1):
        where = f"[[tables]][{i}]"
        if not isinstance(item, dict):
            raise r.fail(where, f"must be a table with a path, got {_kind(item)}")
        r.check_keys(where, item, _TABLE_KEYS)
        if "path" not in item:
            raise r.fail(f"{where}.path", 'missing: a table directory or "demo"')
        raw_path = r.string(f"{where}.path", item["path"])
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
        out.append(TableSpec(name=name, path=table_path, demo_options=demo_options, split=split))
    seen: set[str] = set()
    for i, t in enumerate(out, start=1):
        if t.name in seen:
            raise r.fail(f"[[tables]][{i}].name", f"{t.name!r} is used by an earlier table; names must be unique")
        seen.add(t.name)
    return out


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


def _protocols(r: _Reader, value: Any) -> list[ProtocolSpec]:
    items = r.array("protocols", value)
    out: list[ProtocolSpec] = []
    for i, item in enumerate(items, start=1):
        where = f"protocols[{i}]"
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict):
            raise r.fail(where, f"must be a protocol name or a table with name = ..., got {_kind(item)}")
        if "name" not in item:
            raise r.fail(f"{where}.name", f"missing: one of {', '.join(PROTOCOLS)}")
        name = r.string(f"{where}.name", item["name"])
        if name not in PROTOCOLS:
            close = difflib.get_close_matches(name, PROTOCOLS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise r.fail(f"{where}.name", f"unknown protocol {name!r} (known: {', '.join(PROTOCOLS)}){hint}")
        r.check_keys(where, item, _PROTOCOL_KEYS[name])
        options: dict[str, Any] = {}
        if "logging" in item:
            options["logging"] = _logging(r, f"{where}.logging", item["logging"])
        if "rounds" in item:
            options["rounds"] = r.integer(f"{where}.rounds", item["rounds"], 2, 10_000)
        if "order" in item:
            order = r.string(f"{where}.order", item["order"])
            if order not in ("given", "shuffle"):
                raise r.fail(f"{where}.order", f"must be 'given' or 'shuffle', got {order!r}")
            options["order"] = order
        spec = ProtocolSpec(name=name, options=options)
        if spec in out:
            raise r.fail(where, f"{spec.label} is listed twice")
        out.append(spec)
    return out


def _logging(r: _Reader, key: str, value: Any) -> str:
    from routerlab.protocols.policies import parse_policy

    spec = r.string(key, value)
    try:
        parse_policy(spec)
    except RouterlabError as exc:
        raise r.fail(key, str(exc)) from None
    return spec


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
