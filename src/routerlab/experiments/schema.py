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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from routerlab.errors import RouterlabError, UsageError
from routerlab.experiments.sources import Derivation, Source, is_table_dir
from routerlab.protocols.base import MAX_BOOT, MIN_BOOT, SEED_MAX, get_protocol, protocol_names, value_kind

DEMO = "demo"
"""``path = "demo"`` names the embedded demo benchmark (write ``"./demo"`` for a directory called demo)."""

INJECTED = {"split": "[[tables]] split / test_fraction", "encoder": "[settings] encoder",
            "n_boot": "[settings] n_boot", "skip_inapplicable": "[settings] skip_inapplicable",
            "compare_to": "nowhere: a cell's numbers must not depend on the other routers run beside it"}
"""Protocol settings an experiment sets in one place for every protocol, never in a protocol's own table: where
each is set instead."""
_TOP_KEYS = ("name", "description", "tables", "routers", "protocols", "seeds", "settings", "quick", "paper")
_QUICK_CAP = "\x00quick n_queries"  # where _apply_quick leaves [quick] n_queries for parse_experiment (no TOML key)
_QUICK_KEYS = ("seeds", "routers", "n_queries", "skip_tables", "skip_protocols", "settings", "protocols")
_PAPER_KEYS = ("claim", "value", "table", "protocol", "options", "metric", "router", "slice", "tolerance", "note")
_TABLE_KEYS = ("name", "path", "paths", "format", "options", "visible", "from", "synth", "map", "coreset", "actors",
               "n_queries", "seed", "split", "test_fraction", "dev")
_SETTING_KEYS = ("encoder", "n_boot", "skip_inapplicable")
_SETTING_DEFAULTS: dict[str, Any] = {"encoder": "tfidf", "n_boot": 200, "skip_inapplicable": False}


@dataclass(frozen=True)
class TableSpec:
    """One table of the experiment: where it comes from (``source``: the embedded demo, a table directory,
    upstream files imported on load, or a table derived from an earlier one; :mod:`routerlab.experiments.sources`),
    an optional seeded sample of its queries (``sample``: (n, seed)), the split its cells use (``given`` or
    ``random:F``) and the fraction of its training side held out as a development part (``dev``; None = none),
    which every protocol that makes choices reads. ``path`` is the table directory of a ``dir`` source."""

    name: str
    path: Path | None
    demo_options: dict[str, int]
    split: str
    dev: float | None = None
    source: Source | None = None
    sample: tuple[int, int] | None = None

    @property
    def derived_from(self) -> str | None:
        """The name of the table this one is derived from (``from = ...``), if any."""
        src = self.source
        return src.derivation.base if src is not None and src.derivation is not None else None

    def load(self, loaded: dict[str, Any] | None = None, seed: int = 0) -> Any:
        """The :class:`routerlab.data.table.RoutingTable` (loaded here, so reading the file stays cheap); a
        derived table needs its base among ``loaded`` (by name), and ``seed`` for a coreset's split."""
        from routerlab.experiments.sources import derive, load_import, sample_queries

        src = self.source
        if src is None or src.kind in ("demo", "dir"):
            if self.path is None:
                from routerlab.datasets import demo

                table = demo(**self.demo_options)
            else:
                from routerlab.data.store import load

                table = load(self.path)
        elif src.kind == "import":
            table = load_import(src)
        else:
            assert src.derivation is not None
            base = (loaded or {}).get(src.derivation.base)
            if base is None:
                raise UsageError(f"from = {src.derivation.base!r}: that table is not loaded before this one")
            table = derive(base, src.derivation, self.split, seed)
        if self.sample is not None:
            table = sample_queries(table, *self.sample)
        return table


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
class PaperNumber:
    """A ``[[paper]]`` entry: a number the paper reports (``value``, on routerlab's scale) and where routerlab's
    own number for it is (table, protocol and the options that pick one of several, metric, router, slice);
    they agree when the paper's number lies within routerlab's 95% interval widened by ``tolerance`` (or, for a
    number without an interval, within ``tolerance`` of it). ``note`` says why they may differ."""

    claim: str
    value: float
    table: str
    protocol: str
    metric: str
    router: str = ""
    """The router; for a protocol without routers, the record's actor-set label (``pool``, ``coreset``, ...) or
    empty for any."""
    slice: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    tolerance: float = 0.0
    note: str = ""

    def agrees(self, ours: float | None, low: float | None, high: float | None) -> bool | None:
        """Whether routerlab's number (with its interval, when it has one) agrees with the paper's; None
        without a number."""
        if ours is None or not math.isfinite(ours):
            return None
        if low is not None and high is not None and math.isfinite(low) and math.isfinite(high):
            return low - self.tolerance <= self.value <= high + self.tolerance
        return abs(ours - self.value) <= self.tolerance


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
    papers: list[PaperNumber] = field(default_factory=list)
    quick: bool = False

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


def load_experiment(path: Path, tables: dict[str, str] | None = None, *, quick: bool = False) -> Experiment:
    """Read and check an experiment file (see the module docstring); nothing is loaded or trained yet.
    ``tables`` maps a table's name to a path that replaces the file's (``routerlab run --table NAME=PATH``);
    ``quick`` applies the file's ``[quick]`` section (``routerlab run --quick``)."""
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
    return parse_experiment(data, path, hashlib.sha256(raw).hexdigest(), tables, quick=quick)


def parse_experiment(data: dict[str, Any], source: Path, digest: str = "", tables: dict[str, str] | None = None,
                     *, quick: bool = False) -> Experiment:
    """Check a decoded TOML document; ``source`` names it in errors and anchors relative paths; ``tables``
    replaces tables' paths by name (relative to the working directory); ``quick`` applies ``[quick]``."""
    r = _Reader(source)
    r.check_keys("", data, _TOP_KEYS)
    cap = None
    if quick:
        data = _apply_quick(r, data)
        cap = data.pop(_QUICK_CAP, None)
    for key in ("name", "tables", "protocols", "seeds"):
        if key not in data:
            raise r.fail(key, "missing (required: name, tables, protocols, seeds; routers for protocols that "
                              "evaluate routers)")
    name = r.string("name", data["name"])
    description = r.string("description", data["description"]) if "description" in data else ""
    table_specs = _tables(r, data["tables"], source.parent, tables or {})
    if cap is not None:
        table_specs = [_capped(t, cap) for t in table_specs]
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
    papers = _papers(r, data.get("paper", []), table_specs, protocols, routers)
    return Experiment(name=name, description=description, source=source, file_hash=digest, tables=table_specs,
                      routers=routers, protocols=protocols, seeds=seeds, settings_grid=grid, notes=notes,
                      papers=papers, quick=quick)


def _apply_quick(r: _Reader, data: dict[str, Any]) -> dict[str, Any]:
    """The document with its ``[quick]`` section applied (the README's "Experiments as files"): seeds and
    routers replaced, settings and each named protocol's options merged, tables and protocols skipped, and every
    table that is not derived cut to at most ``n_queries`` queries."""
    if "quick" not in data:
        raise r.fail("quick", "--quick: the file has no [quick] section")
    q = data["quick"]
    if not isinstance(q, dict):
        raise r.fail("quick", f"must be a table ([quick]), got {_kind(q)}")
    r.check_keys("quick", q, _QUICK_KEYS)
    out = {k: v for k, v in data.items() if k != "quick"}
    for key in ("seeds", "routers"):
        if key in q:
            out[key] = q[key]
    if "settings" in q:
        if not isinstance(q["settings"], dict):
            raise r.fail("quick.settings", f"must be a table, got {_kind(q['settings'])}")
        out["settings"] = {**(data.get("settings") or {}), **q["settings"]}
    tables = data.get("tables")
    if isinstance(tables, list):
        skip = {r.string(f"quick.skip_tables[{j}]", t) for j, t in enumerate(
            r.array("quick.skip_tables", q["skip_tables"]), start=1)} if "skip_tables" in q else set()
        names = _table_names(tables)
        unknown = sorted(skip - set(names))
        if unknown:
            raise r.fail("quick.skip_tables", f"no table {unknown[0]!r} (tables: {', '.join(names)})")
        kept = []
        for name, item in zip(names, tables, strict=True):
            base = item.get("from") if isinstance(item, dict) else None
            if name in skip or base in skip:
                skip.add(name)  # a table derived from a skipped one goes too
                continue
            kept.append(item)
        out["tables"] = kept
    if "n_queries" in q:  # applied to the parsed tables, after any --table override (parse_experiment)
        out[_QUICK_CAP] = r.integer("quick.n_queries", q["n_queries"], 12, 10_000_000)
    protocols = data.get("protocols")
    if isinstance(protocols, list):
        named = [p if isinstance(p, str) else p.get("name") if isinstance(p, dict) else None for p in protocols]
        skip_p = set()
        if "skip_protocols" in q:
            skip_p = {r.string(f"quick.skip_protocols[{j}]", p) for j, p in enumerate(
                r.array("quick.skip_protocols", q["skip_protocols"]), start=1)}
            unknown = sorted(skip_p - {n for n in named if isinstance(n, str)})
            if unknown:
                raise r.fail("quick.skip_protocols", f"the file runs no protocol {unknown[0]!r}")
        merged = q.get("protocols", {})
        if not isinstance(merged, dict):
            raise r.fail("quick.protocols", f"must be a table of protocol name = {{ options }}, got {_kind(merged)}")
        for name, opts in merged.items():
            if name not in named:
                raise r.fail(f"quick.protocols.{name}", "the file runs no such protocol")
            if not isinstance(opts, dict):
                raise r.fail(f"quick.protocols.{name}", f"must be a table of options, got {_kind(opts)}")
        new = []
        for pname, item in zip(named, protocols, strict=True):
            if pname in skip_p:
                continue
            if pname in merged:
                item = {**({"name": item} if isinstance(item, str) else item), **merged[pname]}
            new.append(item)
        out["protocols"] = new
    if isinstance(data.get("paper"), list) and isinstance(out.get("tables"), list):
        # entries on skipped tables, protocols or routers go: the quick run has no number for them
        left_t = set(_table_names(out["tables"]))
        left_p = {p if isinstance(p, str) else p.get("name") for p in out.get("protocols", []) if
                  isinstance(p, str | dict)}
        routers = out.get("routers")
        left_r: list[Any] = routers if isinstance(routers, list) else []
        out["paper"] = [e for e in data["paper"] if not isinstance(e, dict) or (
            e.get("table", next(iter(left_t), None)) in left_t and e.get("protocol") in left_p
            and (e.get("router", "") in left_r or not _routed(e.get("protocol"))))]
    return out


def _routed(protocol: Any) -> bool:
    """Whether ``protocol`` (a name from the file, maybe unknown) evaluates routers."""
    return isinstance(protocol, str) and protocol in protocol_names() and get_protocol(protocol).uses_routers


def _capped(t: TableSpec, cap: int) -> TableSpec:
    """``t`` with at most ``cap`` queries ([quick] n_queries): the demo generates fewer, another table is sampled
    (with its own sample's seed); a derived table follows its base."""
    if t.derived_from is not None:
        return t
    if t.source is not None and t.source.kind == "demo":
        from routerlab.data.demo import DEFAULT_QUERIES

        options = {**t.demo_options, "n_queries": min(cap, t.demo_options.get("n_queries", DEFAULT_QUERIES))}
        return replace(t, demo_options=options)
    n, seed = t.sample if t.sample is not None else (cap, 0)
    return replace(t, sample=(min(cap, n), seed))


def _papers(r: _Reader, value: Any, tables: list[TableSpec], protocols: list[ProtocolSpec],
            routers: list[str]) -> list[PaperNumber]:
    """``[[paper]]`` entries, each pointing at one number the experiment produces (see :class:`PaperNumber`)."""
    if isinstance(value, dict):
        raise r.fail("paper", "must be an array of tables: write [[paper]], not [paper]")
    if not isinstance(value, list):
        raise r.fail("paper", f"must be an array of tables ([[paper]]), got {_kind(value)}")
    from routerlab.metrics.catalog import metric_info

    out = []
    table_names = [t.name for t in tables]
    for i, item in enumerate(value, start=1):
        where = f"[[paper]][{i}]"
        if not isinstance(item, dict):
            raise r.fail(where, f"must be a table, got {_kind(item)}")
        r.check_keys(where, item, _PAPER_KEYS)
        for key in ("claim", "value", "protocol", "metric"):
            if key not in item:
                raise r.fail(f"{where}.{key}", "missing (required: claim, value, protocol, metric)")
        claim = r.string(f"{where}.claim", item["claim"])
        number = item["value"]
        if isinstance(number, bool) or not isinstance(number, int | float) or not math.isfinite(number):
            raise r.fail(f"{where}.value", f"must be a finite number, got {_kind(number)}")
        if "table" in item:
            table = r.string(f"{where}.table", item["table"])
            if table not in table_names:
                raise r.fail(f"{where}.table", f"no table {table!r} (tables: {', '.join(table_names)})")
        elif len(table_names) == 1:
            table = table_names[0]
        else:
            raise r.fail(f"{where}.table", f"missing: the file has several tables ({', '.join(table_names)})")
        protocol = r.string(f"{where}.protocol", item["protocol"])
        options = item.get("options", {})
        if not isinstance(options, dict):
            raise r.fail(f"{where}.options", f"must be a table of the protocol's options, got {_kind(options)}")
        matching = [p for p in protocols if p.name == protocol
                    and all(p.options.get(k) == v for k, v in options.items())]
        if not matching:
            raise r.fail(f"{where}.protocol", f"the file runs no protocol {protocol!r}" + (
                f" with options {options}" if options else ""))
        if len(matching) > 1:
            raise r.fail(f"{where}.options", f"protocol {protocol!r} runs {len(matching)} times in the file; "
                                             "options = { ... } picks one")
        metric = r.string(f"{where}.metric", item["metric"])
        try:
            metric_info(metric)
        except RouterlabError as exc:
            raise r.fail(f"{where}.metric", str(exc)) from None
        router = r.string(f"{where}.router", item["router"]) if "router" in item else ""
        if get_protocol(protocol).uses_routers and router not in routers:
            raise r.fail(f"{where}.router", f"the file runs no router {router!r}" if router else
                         f"missing: protocol {protocol!r} evaluates routers ({', '.join(routers)})")
        slice_ = str(item.get("slice", ""))
        tol = item.get("tolerance", 0.0)
        if isinstance(tol, bool) or not isinstance(tol, int | float) or not math.isfinite(tol) or tol < 0:
            raise r.fail(f"{where}.tolerance", f"must be a finite number >= 0, got {tol!r}")
        note = r.string(f"{where}.note", item["note"]) if "note" in item else ""
        out.append(PaperNumber(claim=claim, value=float(number), table=table, protocol=protocol, metric=metric,
                               router=router, slice=slice_, options=matching[0].options, tolerance=float(tol),
                               note=note))
    return out


def _tables(r: _Reader, value: Any, base: Path, overrides: dict[str, str]) -> list[TableSpec]:
    if isinstance(value, dict):
        raise r.fail("tables", "must be an array of tables: write [[tables]], not [tables]")
    items = r.array("tables", value)
    out: list[TableSpec] = []
    names = _table_names(items)
    for name in overrides:
        if name not in names:
            raise UsageError(f"--table {name}=...: the experiment has no table {name!r} (its tables: "
                             f"{', '.join(names) or 'none'})")
    for i, item in enumerate(items, start=1):
        where = f"[[tables]][{i}]"
        if not isinstance(item, dict):
            raise r.fail(where, f"must be a table with a path, got {_kind(item)}")
        r.check_keys(where, item, _TABLE_KEYS)
        if "from" in item:
            spec = _derived_table(r, where, item, out, overrides)
        else:
            spec = _source_table(r, where, item, base, overrides)
        out.append(spec)
    seen: set[str] = set()
    for i, t in enumerate(out, start=1):
        if t.name in seen:
            raise r.fail(f"[[tables]][{i}].name", f"{t.name!r} is used by an earlier table; names must be unique")
        seen.add(t.name)
    return out


_DERIVED_ONLY = ("synth", "map", "coreset", "actors")
_IMPORT_ONLY = ("options", "visible")


def _source_table(r: _Reader, where: str, item: dict[str, Any], base: Path, overrides: dict[str, str]) -> TableSpec:
    """A table read from somewhere: the demo, a table directory, or upstream files with ``format``."""
    for key in _DERIVED_ONLY:
        if key in item:
            raise r.fail(f"{where}.{key}", 'applies only to a derived table (from = "OTHER TABLE")')
    fmt = _format(r, where, item)
    if fmt is None:
        for key in _IMPORT_ONLY:
            if key in item:
                raise r.fail(f"{where}.{key}", "applies only with format = ... (upstream files imported on load)")
    if "path" in item and "paths" in item:
        raise r.fail(f"{where}.paths", "give path or paths, not both")
    if "paths" in item:
        if fmt is None:
            raise r.fail(f"{where}.paths", "applies only with format = ... (several upstream files)")
        raw_paths = [r.string(f"{where}.paths[{j}]", p) for j, p in enumerate(r.array(f"{where}.paths",
                                                                                       item["paths"]), start=1)]
    elif "path" in item:
        raw_paths = [r.string(f"{where}.path", item["path"])]
    else:
        raise r.fail(f"{where}.path", 'missing: a table directory, "demo", or upstream files with format = ...')
    own_name = r.string(f"{where}.name", item["name"]) if "name" in item else _default_name(raw_paths[0])
    anchor = base
    if own_name in overrides:  # --table NAME=PATH: a path relative to the working directory
        raw = overrides[own_name].strip()
        where = f"--table {own_name}"
        item = {k: v for k, v in item.items() if k not in ("n_queries", "seed") or raw == DEMO}
        raw_paths = [raw if raw == DEMO else str(Path(raw).expanduser().resolve())]
        anchor = Path.cwd()
        if raw == DEMO or is_table_dir(Path(raw_paths[0])):
            fmt = None  # the demo or a routerlab table directory replaces upstream files as it is
    demo_options: dict[str, int] = {}
    table_path: Path | None = None
    sample: tuple[int, int] | None = None
    if raw_paths == [DEMO] and fmt is None:
        if "n_queries" in item:
            demo_options["n_queries"] = r.integer(f"{where}.n_queries", item["n_queries"], 12, 10_000_000)
        if "seed" in item:
            demo_options["seed"] = r.integer(f"{where}.seed", item["seed"], 0, SEED_MAX)
        source = Source("demo")
    else:
        paths = []
        for raw in raw_paths:
            p = Path(raw).expanduser()
            paths.append(p if p.is_absolute() else anchor / p)
        key = f"{where}.path" + ("s" if len(paths) > 1 else "")
        if fmt is None:
            table_path = paths[0]
            if not table_path.is_dir():
                what = "is a file, not a table directory" if table_path.exists() else "no such directory"
                raise r.fail(key, f"{what} ({table_path})" + (
                    "; upstream files need format = ... (see routerlab formats)" if table_path.exists() else ""))
            source = Source("dir", paths=(table_path,))
        else:
            for p in paths:
                if not p.exists():
                    raise r.fail(key, f"no such file or directory ({p})")
            source = Source("import", paths=tuple(paths), format=fmt, options=_import_options(r, where, item),
                            visible=tuple(_visible(r, where, item)))
        sample = _sample(r, where, item)
    name = own_name
    return TableSpec(name=name, path=table_path, demo_options=demo_options, split=_split(r, where, item),
                     dev=_dev(r, where, item), source=source, sample=sample)


def _derived_table(r: _Reader, where: str, item: dict[str, Any], earlier: list[TableSpec],
                   overrides: dict[str, str]) -> TableSpec:
    """``from = "OTHER"`` with exactly one of ``synth`` (+ ``map``), ``coreset`` or ``actors``."""
    for key in ("path", "paths", "format", *_IMPORT_ONLY):
        if key in item:
            raise r.fail(f"{where}.{key}", "a derived table (from = ...) takes its queries from its base table")
    base_name = r.string(f"{where}.from", item["from"])
    bases = {t.name: t for t in earlier}
    if base_name not in bases:
        raise r.fail(f"{where}.from", f"no earlier table {base_name!r} (tables so far: "
                                      f"{', '.join(bases) or 'none'}); a base table comes before the tables "
                                      "derived from it")
    if "name" not in item:
        raise r.fail(f"{where}.name", "missing: a derived table needs its own name")
    name = r.string(f"{where}.name", item["name"])
    if name in overrides:
        raise UsageError(f"--table {name}=...: {name!r} is derived from table {base_name!r}; point --table at "
                         f"{base_name!r} instead")
    ways = [k for k in ("synth", "coreset", "actors") if k in item]
    if len(ways) != 1:
        raise r.fail(where, f"a derived table needs exactly one of synth, coreset or actors, got "
                            f"{', '.join(ways) or 'none'}")
    if "map" in item and "synth" not in item:
        raise r.fail(f"{where}.map", "applies only with synth = ...")
    d = Derivation(base=base_name)
    if "synth" in item:
        from routerlab.society.synthetic import SOCIETIES

        society = r.string(f"{where}.synth", item["synth"]).lower()
        if society not in SOCIETIES:
            raise r.fail(f"{where}.synth", f"must be one of {', '.join(SOCIETIES)}, got {society!r}")
        smap = r.string(f"{where}.map", item["map"]) if "map" in item else None
        if smap is not None and smap.endswith(".toml") and not Path(smap).is_absolute():
            smap = str(r.source.parent / smap)
        d = Derivation(base=base_name, synth=society, society_map=smap)
    elif "coreset" in item:
        d = Derivation(base=base_name, coreset=r.integer(f"{where}.coreset", item["coreset"], 1, 1_000_000))
    else:
        actors = [r.string(f"{where}.actors[{j}]", a) for j, a in enumerate(r.array(f"{where}.actors",
                                                                                     item["actors"]), start=1)]
        dup = [a for j, a in enumerate(actors) if a in actors[:j]]
        if dup:
            raise r.fail(f"{where}.actors", f"{dup[0]!r} is listed twice")
        d = Derivation(base=base_name, actors=tuple(actors))
    split = _split(r, where, item) if ("split" in item or "test_fraction" in item) else bases[base_name].split
    return TableSpec(name=name, path=None, demo_options={}, split=split, dev=_dev(r, where, item),
                     source=Source("derived", derivation=d), sample=_sample(r, where, item))


def _format(r: _Reader, where: str, item: dict[str, Any]) -> str | None:
    if "format" not in item:
        return None
    from routerlab.data.importers import importers

    fmt = r.string(f"{where}.format", item["format"])
    known = sorted(importers())
    if fmt not in known:
        raise r.fail(f"{where}.format", f"unknown format {fmt!r}{_did_you_mean(fmt, tuple(known))}")
    return fmt


def _import_options(r: _Reader, where: str, item: dict[str, Any]) -> dict[str, Any]:
    value = item.get("options", {})
    if not isinstance(value, dict):
        raise r.fail(f"{where}.options", f"must be a table of importer options (options = {{ key = \"value\" }}), "
                                         f"got {_kind(value)}")
    for key, v in value.items():
        if not isinstance(v, str | int | float | bool):
            raise r.fail(f"{where}.options.{key}", f"must be a string, number or boolean, got {_kind(v)}")
    return dict(value)


def _visible(r: _Reader, where: str, item: dict[str, Any]) -> list[str]:
    if "visible" not in item:
        return []
    return [r.string(f"{where}.visible[{j}]", c) for j, c in enumerate(r.array(f"{where}.visible", item["visible"]),
                                                                        start=1)]


def _sample(r: _Reader, where: str, item: dict[str, Any]) -> tuple[int, int] | None:
    """``n_queries = N`` (+ ``seed``) on a table other than the demo: a seeded sample of N queries."""
    if "n_queries" not in item:
        if "seed" in item:
            raise r.fail(f"{where}.seed", "applies only with n_queries (the sample's seed) or to the demo")
        return None
    n = r.integer(f"{where}.n_queries", item["n_queries"], 12, 10_000_000)
    seed = r.integer(f"{where}.seed", item["seed"], 0, SEED_MAX) if "seed" in item else 0
    return (n, seed)


def _default_name(raw_path: str) -> str:
    return DEMO if raw_path == DEMO else Path(raw_path).expanduser().name


def _table_names(items: list[Any]) -> list[str]:
    out = []
    for it in items:
        if isinstance(it, dict):
            path = it.get("path", (it.get("paths") or [""])[0] if isinstance(it.get("paths"), list) else "")
            out.append(str(it["name"]) if isinstance(it.get("name"), str) else _default_name(str(path)))
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
