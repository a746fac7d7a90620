"""``routerlab audit``: one report on a routing table, built from sections.

A section is a function ``(table, ctx) -> Section`` registered with :func:`audit_section`; every
module in :mod:`routerlab.reports.sections` is imported on first use, so a new capability adds its
section by adding one module there. Every section reads the same split: its test side is the
*evaluable* set (queries with every actor's score observed), computed once here, so the bounds and
the leaderboard can never disagree on the queries they score. Sections return blocks
(:mod:`routerlab.reports.blocks`), not text: the report opens with every section's findings, and
report.html (:func:`routerlab.reports.html.render_html`) and report.md
(:func:`routerlab.reports.render.render_markdown`) are two renderings of the same blocks, so they never
drift. results.json holds every number the report shows (sections' data and the findings' values), with
table hash, split, seed and version (SPEC 7); ``decisions/*.parquet`` every per-query choice. The audit
writes into a temporary directory beside the target and publishes it at the end, so an interrupted run
leaves no half-written report; each section's result is cached as soon as it exists
(:mod:`routerlab.reports.audit_cache`), so a rerun recomputes only what a crash or a changed option
left undone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from routerlab._atomic import atomic_directory, write_bytes
from routerlab._registry import Registry
from routerlab._version import __version__
from routerlab._words import plural, verb
from routerlab.data.provenance import Provenance
from routerlab.data.splits import Split, given_split, in_split_order, make_split
from routerlab.data.table import RoutingTable
from routerlab.errors import Interrupted, RouterlabError, UsageError
from routerlab.metrics import catalog
from routerlab.metrics.bootstrap import MIN_QUERIES
from routerlab.progress import mode as progress_mode
from routerlab.protocols.base import RunContext
from routerlab.reports.audit_cache import SectionCache
from routerlab.reports.blocks import Block, Definition, Definitions, Finding, Findings, Paragraph, Section
from routerlab.reports.files import write_json, write_text
from routerlab.reports.render import render_markdown

SYNTHETIC_SUFFIX = " (synthetic demo benchmark)"


def _audit_encode(train: RoutingTable, test: RoutingTable, encoder: str) -> Any:
    """The audit's encoder for protocol runs: the named one on query text, else a one-hot of the dataset."""
    from routerlab.reports.sections.leaderboard import audit_features

    return audit_features(train, test, encoder)[0]


@dataclass
class AuditContext:
    """What every section shares: where to write (a temporary directory, published at the end), the
    evaluated split and its tables, the seed and the options.

    ``split.test`` and ``test`` hold only the evaluable test queries (every actor's score observed);
    ``excluded_test_queries`` counts those left out of the audit's split for an unobserved score.
    """

    out_dir: Path
    split: Split
    seed: int
    train: RoutingTable
    test: RoutingTable
    options: dict[str, Any] = field(default_factory=dict)
    excluded_test_queries: int = 0
    # results one section computes and a later one may reuse (the leaderboard's full-observability evaluation,
    # which the partial-observability section compares with), keyed by what they are
    shared: dict[str, Any] = field(default_factory=dict)
    # what the sections' protocol runs share (features encoded once per split, encoder and seed; the audit's
    # encoder, which falls back to a one-hot of the dataset on a table without text)
    run_context: RunContext = field(default_factory=lambda: RunContext(encode=_audit_encode))

    @property
    def split_spec(self) -> str:
        """The split spec that makes this audit's split (``given:test``, ``random:0.2``), for protocol settings:
        a protocol run with it and :attr:`seed` evaluates the same test queries as every section."""
        if self.split.kind == "given":
            return f"given:{self.split.params['test_split']}"
        return f"random:{self.split.params['test_fraction']!r}"

    @property
    def quick(self) -> bool:
        """``--quick``: a first look (fewer routers, resamples and variants); every section reads it."""
        return bool(self.options.get("quick", False))

    @property
    def n_test(self) -> int:
        """The evaluated test queries every section scores."""
        return int(self.split.test.size)

    @property
    def few_queries(self) -> bool:
        """Too few evaluated test queries for a 95% interval (fewer than ``MIN_QUERIES``): no interval is
        computed, and no finding rests on one (:func:`left_out`)."""
        return self.n_test < MIN_QUERIES


def too_few_queries(n: int, what: str = "evaluated test queries") -> str:
    """Why a finding that needs an interval is left out: ``n`` queries are too few for one."""
    return f"their 95% intervals would rest on only {n} {what}, fewer than the {MIN_QUERIES} an interval needs"


def left_out(what: str, why: str) -> dict[str, str]:
    """A finding a section did not write, for its data's ``skipped_findings``: ``what`` it would have said (a noun
    phrase: "whether `knn` beats the best single actor") and ``why`` not. The report states them in one sentence
    under the findings (:func:`skipped_sentence`)."""
    return {"what": what, "why": why}


def skipped_sentence(skipped: list[dict[str, str]]) -> str:
    """One sentence for every finding left out, grouped by why: "Not stated as findings: A and B (why); C (why)."
    (empty when none was)."""
    if not skipped:
        return ""
    by_why: dict[str, list[str]] = {}
    for s in skipped:
        whats = by_why.setdefault(s["why"], [])
        if s["what"] not in whats:
            whats.append(s["what"])
    parts = []
    for why, whats in by_why.items():
        listed = whats[0] if len(whats) == 1 else ", ".join(whats[:-1]) + " and " + whats[-1]
        parts.append(f"{listed} ({why})")
    return "Not stated as findings: " + "; ".join(parts) + "."


OPTION_KEYS = ("quick", "routers", "encoder", "logs", "small", "large", "robustness_levels")
"""The audit options a section may read (``ctx.options``): ``quick`` (bool), ``routers`` (router specs),
``encoder`` (feature encoder name), ``logs`` (path of a logs file for the off-policy section), ``small`` /
``large`` (actor names of the two-model pair), ``robustness_levels`` (perturbation levels). A section
registers the keys it reads (``depends``), so its cached result is reused when only other keys change."""

SectionFn = Callable[[RoutingTable, AuditContext], Section]


@dataclass(frozen=True)
class _Registered:
    name: str
    order: int
    fn: SectionFn
    depends: tuple[str, ...] = ()


_SECTIONS: Registry[_Registered] = Registry("audit section", package="routerlab.reports.sections")

GLOSSARY = catalog.GLOSSARY
"""Every term the report may show (key -> label, meaning with unit and SPEC section), read from the metric catalog
(:mod:`routerlab.metrics.catalog`, read-only: a section declares no term of its own); the report's glossary lists
those its sections used, in order of appearance."""


def audit_section(name: str, order: int, depends: tuple[str, ...] = ()) -> Callable[[SectionFn], SectionFn]:
    """Register a report section; sections appear in ascending ``order``. ``depends`` names the
    :data:`OPTION_KEYS` it reads (its cache key), besides the table, the split and the seed."""

    def register(fn: SectionFn) -> SectionFn:
        _SECTIONS.add(name, _Registered(name, order, fn, tuple(depends)))
        return fn

    return register


def sections() -> list[_Registered]:
    """Every registered section, in report order (importing the section modules first)."""
    return sorted(_SECTIONS.values(), key=lambda s: (s.order, s.name))


def section_names() -> list[str]:
    """The names ``--only`` accepts, in report order."""
    return [s.name for s in sections()]


def is_synthetic_demo(table: RoutingTable) -> bool:
    """True for routerlab's embedded demo benchmark (generated, not real data)."""
    return "synthetic demo" in str(table.meta.get("source", ""))


def display_name(table: RoutingTable) -> str:
    """The table's name for titles, marked when it is the synthetic demo."""
    return table.name + (SYNTHETIC_SUFFIX if is_synthetic_demo(table) else "")


def audit_split(table: RoutingTable, seed: int) -> Split:
    """The table's own train/test split when it has one, else a seeded 80/20 split by query."""
    try:
        return given_split(table)
    except RouterlabError:
        return make_split(table, "random:0.2", seed)  # (a table in audit order answers with its own split)


def evaluable_split(table: RoutingTable, split: Split) -> tuple[Split, int]:
    """``split`` with its test side cut to the queries whose every actor score is observed (the set the
    leaderboard can evaluate), and how many test queries were left out."""
    from routerlab.protocols.full import complete_rows

    keep = complete_rows(table.select_queries(split.test))
    kept = Split(split.train, split.test[keep], split.kind, split.seed, dict(split.params))
    return kept, int(split.test.size - kept.test.size)


def in_audit_order(table: RoutingTable, seed: int) -> RoutingTable:
    """``table`` stored as the audit stores it, in the order of its split (:func:`audit_split`; see
    :func:`routerlab.data.splits.in_split_order`). Pass this to :func:`run_audit` and drop ``table``: the audit
    then holds the matrices once, with its train and test parts as views (the CLI does)."""
    return in_split_order(table, audit_split(table, seed))[0]


def run_audit(
    table: RoutingTable, out_dir: str | Path, *, seed: int = 0, only: list[str] | None = None,
    options: dict[str, Any] | None = None, cache_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Run every registered section (or those named in ``only``) and publish the report to ``out_dir``:
    report.html and report.md (one set of blocks, two renderings), results.json (every number) and
    ``decisions/<section>-<protocol>.parquet`` (every per-query choice), beside the sections' figures.

    ``cache_dir`` (None = no cache; the CLI passes ``audit_cache.default_audit_cache_dir()``) keeps each
    section's result, so a rerun after a crash or a changed option recomputes only the sections whose inputs changed
    (:mod:`routerlab.reports.audit_cache`). Everything is written into a temporary directory beside
    ``out_dir`` and published at the end; an exception (Ctrl-C included) leaves ``out_dir`` as it was. The
    record's ``files`` lists what was written; its ``timings`` how long each section took (or that it came
    from the cache).
    """
    registered = sections()
    if only:
        unknown = sorted(set(only) - {s.name for s in registered})
        if unknown:
            raise UsageError(f"unknown audit section {', '.join(map(repr, unknown))}; known: "
                             f"{', '.join(s.name for s in registered)}")
        registered = [s for s in registered if s.name in only]
    out = Path(out_dir)
    # the table stored in its split's order, so that the train and test parts are views, not copies (1.1 GiB less
    # at RouterEval scale); sections and the protocols they run see the same queries in the same order
    table, whole = in_split_order(table, audit_split(table, seed))
    split, excluded = evaluable_split(table, whole)
    if split.test.size == 0:
        raise UsageError("no test query has every actor's score observed; nothing can be audited")
    train, test = split.apply(table)
    run = Provenance.of(table, split, seed=seed, data_extra={"synthetic": is_synthetic_demo(table)},
                        split_extra={"excluded_test_queries": excluded})
    record: dict[str, Any] = {**run.to_dict(), "sections": {}}
    left_out = (f"; {excluded} more test queries are left out because some actor's score on them is "
                "unobserved, so no router's choice on them could be scored" if excluded else "")
    title = f"routerlab audit: {display_name(table)}"
    head = Section(title, [Paragraph(
        f"Table hash `{table.content_hash[:16]}`, seed {seed}, routerlab {__version__}. "
        f"Split {split.kind} ({_split_recipe(split)}): {split.train.size} train queries; every section "
        f"evaluates the same {split.test.size} test queries{left_out}.")], level=1, name="top")
    if is_synthetic_demo(table):
        head.blocks.append(Paragraph("This is routerlab's **synthetic** demo benchmark, generated from a seed: "
                                     "none of it is real data. Pass a table directory to audit real data."))
    cache = SectionCache(Path(cache_dir) if cache_dir is not None else None)
    with atomic_directory(out) as tmp:
        ctx = AuditContext(tmp, split, seed, train, test, dict(options or {}), excluded)
        finished: list[Section] = []
        try:
            done = _run_sections(table, ctx, registered, cache, finished)
        except KeyboardInterrupt:
            raise Interrupted(_interrupted(len(finished), len(registered), cache)) from None
        record["sections"] = {sec.name: {"title": sec.title, **sec.data, "figures": [f.path for f in sec.figures]}
                              for sec in done.sections}
        findings = _findings(done.sections)
        record["findings"] = [{"text": f.text, "section": where, "target": f.target, "values": dict(f.values),
                               "interval": list(f.interval) if f.interval is not None else None}
                              for where, f in findings]
        skipped = [{**s, "section": sec.name} for sec in done.sections for s in sec.data.get("skipped_findings", [])]
        record["skipped_findings"] = skipped
        parts = [head, findings_section(findings, skipped), *done.sections]
        terms = [t for sec in done.sections for t in sec.terms]
        if terms:
            parts.append(glossary_section(list(dict.fromkeys(terms))))
        decision_files = write_decisions(tmp, done.sections)
        from routerlab.reports.html import render_html

        write_text(tmp / "report.html", render_html(parts, base_dir=tmp, title=title))
        write_text(tmp / "report.md", render_markdown(parts))
        beside = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*")
                        if p.is_file() and p.name not in REPORT_FILES and p.relative_to(tmp).as_posix()
                        not in decision_files)
        record["files"] = [*REPORT_FILES, *beside, *decision_files]
        record["timings"] = done.timings
        write_json(tmp / "results.json", record)
    return record


REPORT_FILES = ("report.html", "report.md", "results.json")
"""The report's own files, first in the record's ``files``: the page people read, the same in Markdown,
and every number."""


@dataclass
class _Done:
    sections: list[Section]
    timings: dict[str, dict[str, Any]]


def _interrupted(done: int, total: int, cache: SectionCache) -> str:
    """What a Ctrl-C kept: the sections finished (in the cache, unless it is off) and no report."""
    if cache.root is None:
        return (f"{done} of {total} audit sections were done, none kept (no cache) and no report written; rerun "
                "the same command to start again")
    return (f"{done} of {total} audit sections done and kept in the audit cache {cache.root}, no report written; "
            "rerun the same command to resume")


def _run_sections(table: RoutingTable, ctx: AuditContext, registered: list[_Registered],
                  cache: SectionCache, finished: list[Section] | None = None) -> _Done:
    """Run (or reuse from ``cache``) each section in order, saying on stderr which one runs, about how long
    it should take and how long is left (routerlab.progress conventions), and caching each result the moment
    it exists (so a crash in a later section loses none of the earlier ones). ``finished`` (when given)
    receives each section as it is done, so a caller still knows them after a Ctrl-C."""
    import time

    from routerlab.reports.audit_cache import (
        MISSING,
        CachedSection,
        Tracked,
        base_key,
        option_fingerprint,
        snapshot,
        source_hash,
        split_hash,
        timing_key,
        written_files,
    )

    options = Tracked(ctx.options)
    shared = Tracked(ctx.shared)
    ctx.options, ctx.shared = options, shared
    ids = table.queries.ids
    sp_hash = split_hash(ids[ctx.split.train], ids[ctx.split.test])
    bases = {reg.name: base_key(table_hash=table.content_hash, split=sp_hash, seed=ctx.seed, name=reg.name,
                                source=source_hash(reg.fn),
                                depends={k: option_fingerprint(k, ctx.options.get(k)) for k in reg.depends})
             for reg in registered}
    options.reset()
    quick = bool(dict.get(options, "quick", False))
    # one timing slot per section, table size, --quick and which of its declared options are set (a section
    # given --logs or a model pair does real work; without, it says why it skipped in no time)
    tkeys = {reg.name: timing_key(reg.name, table.n_queries, table.n_actors, quick,
                                  [k for k in reg.depends if k != "quick" and dict.get(options, k) is not None])
             for reg in registered}
    estimates = {reg.name: 0.0 if cache.has(reg.name, bases[reg.name])
                 else _estimate(cache.last_seconds(tkeys[reg.name]), reg.name, table, quick, dict(dict.items(options)))
                 for reg in registered}
    producers: dict[str, str] = {}  # shared key -> effective key of the section that wrote it
    out: list[Section] = [] if finished is None else finished
    timings: dict[str, dict[str, Any]] = {}
    say = _say if progress_mode() != "off" else (lambda text: None)
    for i, reg in enumerate(registered, 1):
        step = f"audit: {reg.name} ({i}/{len(registered)})"
        t0 = time.perf_counter()
        entry = cache.load(reg.name, bases[reg.name], options, producers)
        from_cache = entry is not None
        _say_problems(cache, say)
        if entry is not None:
            for rel, data in entry.files.items():
                write_bytes(ctx.out_dir / rel, data)
            dict.update(shared, entry.shared)
            seconds = time.perf_counter() - t0
            say(f"{step} from cache (computed in {_duration(entry.seconds)} before)")
        else:
            left = sum(estimates[r.name] for r in registered[i - 1:])
            say(f"{step}, {_about(estimates[reg.name])}; {_about(left)} left")
            before_files = snapshot(ctx.out_dir)
            before_shared = {k: id(v) for k, v in dict.items(shared)}
            options.reset()
            shared.reset()
            sec = reg.fn(table, ctx)
            seconds = time.perf_counter() - t0
            sec.name = sec.name or reg.name
            wrote = {k: v for k, v in dict.items(shared) if before_shared.get(k) != id(v)}
            entry = CachedSection(
                section=sec, shared=wrote, files=written_files(ctx.out_dir, before_files),
                option_reads={k: option_fingerprint(k, dict.get(options, k, MISSING))
                              for k in sorted(options.read_keys())},
                shared_reads={k: producers.get(k) for k in sorted(shared.read_keys() - set(wrote))},
                seconds=seconds, base=bases[reg.name])
            cache.store(reg.name, entry)
            cache.record_seconds(tkeys[reg.name], seconds)
            _say_problems(cache, say)
            say(f"{step} done in {_duration(seconds)}")
        sec = entry.section  # named when it was computed (above), before it was cached
        key = entry.effective_key()
        producers.update({k: key for k in entry.shared})
        out.append(sec)
        timings[reg.name] = {"seconds": round(seconds, 3), "from_cache": from_cache,
                             "computed_seconds": round(entry.seconds, 3)}
    ctx.options, ctx.shared = dict(dict.items(options)), dict(dict.items(shared))
    return _Done(out, timings)


def _say_problems(cache: SectionCache, say: Callable[[str], None]) -> None:
    """Report (and forget) the cache entries the last load or store had to ignore."""
    for problem in cache.problems:
        say(f"audit: {problem}")
    cache.problems.clear()


# The cost model used when no run of a section on a table of this size is remembered yet: seconds under --quick
# measured on a loaded 2-core machine on the demo (3,000 x 8 = 24,000 cells) and on a RouterEval-scale synthetic
# table (36,000 x 8,500 = 306 million cells), joined by a power law in the number of cells (the sections cap
# their work on large tables, so time grows far slower than the cells: exponents 0.1-0.9); the third number is
# how much longer a full run takes than --quick, from the demo.
_COST = {"table": (0.01, 7.4, 1.0), "bounds": (0.1, 1.3, 1.0), "diversity": (1.6, 12.9, 2.0),
         "scaling": (1.5, 29.0, 4.0), "leaderboard": (1.2, 37.0, 5.0), "partial": (2.5, 57.0, 2.7),
         "offpolicy": (1.9, 30.0, 1.5), "two-model": (2.6, 30.0, 2.5), "robustness": (2.9, 26.0, 1.5)}
_GENERIC_COST = (2.0, 30.0, 2.5)
_SMALL_CELLS, _LARGE_CELLS = 3000 * 8, 36000 * 8500


def _estimate(last: float | None, name: str, table: RoutingTable, quick: bool,
              options: dict[str, Any] | None = None) -> float:
    """How long a section should take: its last time on a table of this size, else the cost model above (no
    time for the off-policy section without logs, the two-model section without a pair, nor the agentic section without
    episodes: they only say why)."""
    if last is not None:
        return last
    opts = options or {}
    if (name == "offpolicy" and opts.get("logs") is None) or (
            name == "two-model" and opts.get("small") is None and "two_model" not in table.meta) or (
            name == "agentic" and table.episodes is None):
        return 0.0
    small, large, full = _COST.get(name, _GENERIC_COST)
    cells = max(table.n_queries * table.n_actors, 1)
    exponent = math.log(large / small) / math.log(_LARGE_CELLS / _SMALL_CELLS)
    return float(small * (cells / _SMALL_CELLS) ** exponent * (1.0 if quick else full))


def _about(seconds: float) -> str:
    return _duration(seconds) if seconds < 1 else f"about {_duration(seconds)}"


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "under 1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"


def _say(text: str) -> None:
    import sys

    print(f"routerlab: {text}", file=sys.stderr, flush=True)


def _findings(done: list[Section]) -> list[tuple[str, Finding]]:
    """Every section's findings in report order, each with its section's name and a target (the section
    itself when the finding named none)."""
    out = []
    for sec in done:
        for f in sec.findings:
            out.append((sec.name, f if f.target else replace(f, target=sec.name)))
    return out


def findings_section(findings: list[tuple[str, Finding]], skipped: list[dict[str, str]] | None = None) -> Section:
    """The report's opening "Findings" section: one plain sentence per finding, each linking to the table
    or figure that shows it, then one sentence naming the findings left out and why (``skipped``)."""
    blocks: list[Block] = [Findings([f for _, f in findings])] if findings else [Paragraph(
        "No section reported a finding on this table; the sections below hold every number.")]
    if skipped:
        blocks.append(Paragraph(skipped_sentence(skipped)))
    return Section("Findings", blocks, name="findings")


def write_decisions(out_dir: Path, done: list[Section]) -> list[str]:
    """Every section's per-query decisions as ``decisions/<section>-<protocol>.parquet`` in long format
    (protocol, router, query_id, actor name or null for -1, score or null when unknown, policy, deployed_score);
    returns the written paths relative to ``out_dir``.

    ``policy`` says how the router acts when deployed. ``argmax``: ``actor`` is what it routes the query to and
    ``deployed_score`` equals ``score``. ``distribution`` (an exploring router, which draws its actor): ``actor``
    and ``score`` are its argmax (greedy) pick and ``deployed_score`` is its expected score on the query under the
    distribution it draws from; the mean of ``deployed_score`` is the router's mu_o, that of ``score`` its
    mu_o_greedy."""
    import numpy as np
    import pyarrow as pa

    from routerlab.reports.files import write_parquet

    schema = pa.schema([("protocol", pa.string()), ("router", pa.string()), ("query_id", pa.string()),
                        ("actor", pa.string()), ("score", pa.float64()), ("policy", pa.string()),
                        ("deployed_score", pa.float64())])
    written: list[str] = []
    for sec in done:
        for dec in sec.decisions:
            names = pa.array([str(a) for a in dec.actor_names], pa.string())
            ids = pa.array([str(q) for q in dec.query_ids], pa.string())
            parts = []
            for router, choice in dec.choices.items():  # one column block per router, no Python loop per row
                idx = np.asarray(choice, dtype=np.int64).reshape(-1)
                if idx.size != len(ids):
                    raise ValueError(f"section {sec.name}: router {router} has {idx.size} decisions for "
                                     f"{len(ids)} queries")
                score = dec.scores.get(router)
                vals = (np.full(idx.size, np.nan) if score is None
                        else np.asarray(score, dtype=np.float64).reshape(-1))
                policy = dec.policies.get(router, "argmax")
                deployed = dec.deployed.get(router)
                if policy != "argmax" and deployed is None:
                    raise ValueError(f"section {sec.name}: router {router} samples its distribution but has no "
                                     "deployed (expected) scores")
                dep = vals if deployed is None else np.asarray(deployed, dtype=np.float64).reshape(-1)
                if dep.size != idx.size:
                    raise ValueError(f"section {sec.name}: router {router} has {dep.size} deployed scores for "
                                     f"{len(ids)} queries")
                parts.append(pa.table({
                    "protocol": pa.array([dec.protocol] * idx.size, pa.string()),
                    "router": pa.array([str(router)] * idx.size, pa.string()),
                    "query_id": ids,
                    "actor": names.take(pa.array(idx, mask=idx < 0)),  # -1 (no choice) -> null
                    "score": pa.array(vals, mask=np.isnan(vals)),  # NaN (unknown) -> null
                    "policy": pa.array([policy] * idx.size, pa.string()),
                    "deployed_score": pa.array(dep, mask=np.isnan(dep)),
                }, schema=schema))
            rel = f"decisions/{_file_part(sec.name)}-{_file_part(dec.protocol)}.parquet"
            if rel in written:
                raise ValueError(f"section {sec.name} has two decision sets for protocol {dec.protocol!r}")
            write_parquet(out_dir / rel, pa.concat_tables(parts) if parts else schema.empty_table())
            written.append(rel)
    return written


def _file_part(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text) or "_"


def _split_recipe(split: Split) -> str:
    """How the audit's split was made, in words."""
    if split.kind == "random":
        frac = float(split.params.get("test_fraction", 0.2))
        strat = ", stratified by dataset" if split.params.get("stratified") else ""
        return (f"the table has no train/test labels, so a seeded random {1 - frac:.0%}/{frac:.0%} split by "
                f"query{strat}, seed {split.seed}")
    if split.kind == "given":
        return f"the table's own split column, '{split.params.get('test_split', 'test')}' rows tested"
    return ", ".join(f"{k} {v}" for k, v in split.params.items()) or split.kind


def glossary_section(terms: list[str]) -> Section:
    """The closing "What the numbers mean" section: one definition per term the report showed, with its
    results.json key where that differs from the label (its ``key`` is the HTML anchor headers link to)."""
    items = []
    for key in terms:
        if key in GLOSSARY:
            label, text = GLOSSARY[key]
            items.append(Definition(label, text + ".", f"`{key}` in results.json" if key != label else "", key))
    return Section("What the numbers mean", [Definitions(items)])


def audit_summary(record: dict[str, Any], out_dir: Path) -> list[str]:
    """A few lines for the terminal: table, split, headline numbers and the files written."""
    t, sp, secs = record["data"], record["split"], record["sections"]
    name = t["name"] + (SYNTHETIC_SUFFIX if t.get("synthetic") else "")
    lines = [f"audit of {name}: {plural(t['n_queries'], 'query')} x {plural(t['n_actors'], 'actor')}, "
             f"hash {t['content_hash'][:12]}",
             f"split {sp['kind']}: {sp['n_train']} train / {sp['n_test']} test queries evaluated"
             + (f" ({sp['excluded_test_queries']} left out: unobserved scores)" if sp["excluded_test_queries"]
                else "")]
    if "table" in secs:
        q = secs["table"].get("quality", {})
        leaks = int(q.get("train_test_overlap", 0))
        lines.append(f"leaks: {plural(leaks, 'test query', 'test queries')} {verb(leaks, 'shares', 'share')} "
                     f"their text with a training query; duplicates: {q.get('duplicate_texts', 0)}")
    if "bounds" in secs:
        b = secs["bounds"]
        lines.append(f"oracle {b['oracle']:.4f}, best single actor {b['best_single_actor']} {b['best_single']:.4f}, "
                     f"random {b['random']:.4f}")
    for name, sec in secs.items():  # every other section's one-line headline, in report order
        if name not in {"table", "bounds", "diversity"} and sec.get("headline"):
            lines.append(str(sec["headline"]))
    if record.get("skipped_findings"):
        lines.append(skipped_sentence(record["skipped_findings"]))
    if "diversity" in secs and "hse_normalized" in secs["diversity"]:
        d = secs["diversity"]
        lines.append(f"diversity: normalised HSE {d['hse_normalized']:.3f} over {plural(d['n_actors'], 'actor')}"
                     + (f"; 90% of it with {d['coreset']['size_90']}" if d.get("coreset", {}).get("size_90")
                        else ""))
    timings = record.get("timings", {})
    cached = sum(1 for t in timings.values() if t.get("from_cache"))
    if cached:
        lines.append(f"{cached} of {plural(len(timings), 'section')} reused from the audit cache (inputs unchanged)")
    files = record.get("files", [])
    others = [f for f in files if f not in REPORT_FILES and not f.startswith("decisions/")]
    decisions = [f for f in files if f.startswith("decisions/")]
    rest = ", ".join(others) + (f"; {len(decisions)} per-query decision files in decisions/" if decisions else "")
    lines.append(f"wrote {out_dir / 'report.html'} (the report: open it in a browser; report.md holds the same), "
                 f"results.json (every number)" + (f", and {rest}" if rest else ""))
    return lines
