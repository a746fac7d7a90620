"""``routerlab audit``: one report on a routing table, built from sections.

A section is a function ``(table, ctx) -> Section`` registered with :func:`audit_section`; every
module in :mod:`routerlab.reports.sections` is imported on first use, so a new capability adds its
section by adding one module there. Every section reads the same split: its test side is the
*evaluable* set (queries with every actor's score observed), computed once here, so the bounds and
the leaderboard can never disagree on the queries they score. The audit writes into a temporary
directory beside the target and publishes it at the end (``report.md`` and ``audit.json`` last), so
an interrupted run leaves no half-written report; it records table hash, split, seed and version
(SPEC 7), and closes the report with a glossary of every metric it shows. Sections return blocks
(:mod:`routerlab.reports.blocks`), not Markdown; :func:`routerlab.reports.render.render_markdown`
writes report.md from them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from routerlab import __version__
from routerlab._atomic import atomic_directory
from routerlab._registry import Registry
from routerlab.data.provenance import Provenance
from routerlab.data.splits import Split, given_split, random_split
from routerlab.data.table import RoutingTable
from routerlab.errors import RouterlabError, UsageError
from routerlab.progress import track
from routerlab.reports.blocks import Definition, Definitions, Paragraph, Section
from routerlab.reports.files import write_json, write_text
from routerlab.reports.render import render_markdown

SYNTHETIC_SUFFIX = " (synthetic demo benchmark)"


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

    @property
    def quick(self) -> bool:
        """``--quick``: a first look (fewer routers, resamples and variants); every section reads it."""
        return bool(self.options.get("quick", False))


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

GLOSSARY: dict[str, tuple[str, str]] = {
    "full observability": ("full observability", "routers are trained on every actor's score for every training "
                           "query, and evaluated on the test queries' full (hidden) scores (SPEC 1)"),
    "cold-start": ("cold-start", "routers are trained on one outcome per training query, of the actor a logging "
                   "policy (uniform random unless stated) chose, and evaluated on the full test outcomes (SPEC 1, 5; "
                   "routerworld.txt 3.3)"),
    "shift": ("Δ (shift)", "a metric under cold-start minus the same metric under full observability, same router "
              "and test queries: Acc@1 up with L-DCG down is routerworld.txt's risk-aversion (SPEC 5)"),
    "held up": ("held up", "a router whose cold-start L-DCG (mu_o without latency) is at or above the lower end of "
                "its full-observability 95% interval"),
    "oracle": ("oracle", "mean over the test queries of the best actor's score: what a perfect router would "
               "reach (SPEC 4)"),
    "best single actor": ("best single actor", "the actor with the highest mean score on the training split, "
                          "always called: the baseline a router must beat (SPEC 4)"),
    "random": ("random", "mean over the test queries of the mean actor score: a uniformly random choice, in "
               "expectation (SPEC 4)"),
    "mu_o": ("mu_o", "mean score of the actors a router chose, over the test queries; scores are in [0, 1], "
             "higher is better (SPEC 4)"),
    "95% CI": ("95% CI", "percentile bootstrap interval over 1,000 resamples of the test queries (SPEC 7)"),
    "paired difference": ("paired difference", "a router's mu_o minus the best single actor's on the same test "
                          "queries, with a paired bootstrap 95% interval; a router 'beats' the best single "
                          "actor only when the whole interval is above 0 (SPEC 7)"),
    "v_b": ("V_B", "mu_o divided by the best single actor's mean score on the same test queries (that actor "
            "picked on train); above 1 beats always calling it (SPEC 4)"),
    "e_p": ("E_p", "mean entropy, in bits, of the router's selection distribution per query: 0 = certain of "
            "one actor, log2(m) = uniform over m actors (SPEC 4)"),
    "acc_at_1": ("Acc@1", "share of test queries where the chosen actor is correct, i.e. scores >= 0.5 "
                 "(SPEC 5)"),
    "acc_at_1_l": ("Acc@1-L", "share of test queries where the chosen actor is the fastest correct one "
                   "(SPEC 5)"),
    "dcg": ("DCG", "1 / log2(r + 1) for the chosen actor's rank r among the correct actors ordered by "
            "latency (fastest = 1), 0 when it is wrong; mean over test queries (SPEC 5)"),
    "l_dcg": ("L-DCG", "DCG times the fastest correct actor's latency over the chosen actor's latency: right "
              "and fastest scores 1 (SPEC 5)"),
    "mean_cost": ("mean cost", "mean cost of the chosen actors' answers, in USD per query (SPEC 1)"),
    "mean_latency": ("mean latency", "mean latency of the chosen actors' answers, in seconds per query "
                     "(SPEC 1: TTFT + (output tokens - 1) * ITL when derived from tokens)"),
    "collapsed": ("collapsed", "one actor takes >= 99% of the test queries (SPEC 5); expected of fixed "
                  "routers such as best-single, a warning sign for a learned one"),
    "oracle best-of-N": ("oracle best-of-N", "per query, the best actor among those picked by the evaluated "
                         "routers that do not read test outcomes: what combining them could reach (SPEC 5)"),
    "hse": ("HSE", "hierarchic social entropy: the area under H(h), the entropy in bits of the actors' "
            "cluster sizes at distance level h; in bits x distance units, 0 = identical actors (SPEC 2)"),
    "hse_normalized": ("normalised HSE", "HSE / (log2(N) * largest possible distance), in [0, 1]; 1 = every "
                       "pair of the N actors maximally different (SPEC 2)"),
    "coreset": ("coreset", "the greedy max-HSE subset; its 90% / 95% sizes are the first sizes whose HSE "
                "reaches that share of the whole pool's (SPEC 2)"),
    "specialists": ("specialists", "one perfect binary expert per dataset (1 on its dataset, 0 elsewhere): "
                    "the most complementary pool of that size (SPEC 2)"),
    "duplicates": ("duplicates", "queries whose text repeats an earlier query's text"),
    "leaks": ("leaks", "evaluated test queries whose exact text also occurs in the training split: a learned "
              "router's score on them is optimistic"),
}
"""Every term the report may show (key -> label, meaning with unit and SPEC section); the report's
glossary lists those its sections used, in order of appearance."""


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
        return random_split(table, 0.2, seed)


def evaluable_split(table: RoutingTable, split: Split) -> tuple[Split, int]:
    """``split`` with its test side cut to the queries whose every actor score is observed (the set the
    leaderboard can evaluate), and how many test queries were left out."""
    from routerlab.protocols.full import complete_rows

    keep = complete_rows(table.select_queries(split.test))
    kept = Split(split.train, split.test[keep], split.kind, split.seed, dict(split.params))
    return kept, int(split.test.size - kept.test.size)


def run_audit(
    table: RoutingTable, out_dir: str | Path, *, seed: int = 0, only: list[str] | None = None,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run every registered section (or those named in ``only``) and publish the report to ``out_dir``.

    Everything is written into a temporary directory beside ``out_dir`` and published at the end; an
    exception (Ctrl-C included) leaves ``out_dir`` as it was. The record's ``files`` lists what was written.
    """
    registered = sections()
    if only:
        unknown = sorted(set(only) - {s.name for s in registered})
        if unknown:
            raise UsageError(f"unknown audit section {', '.join(map(repr, unknown))}; known: "
                             f"{', '.join(s.name for s in registered)}")
        registered = [s for s in registered if s.name in only]
    out = Path(out_dir)
    split, excluded = evaluable_split(table, audit_split(table, seed))
    if split.test.size == 0:
        raise UsageError("no test query has every actor's score observed; nothing can be audited")
    train, test = split.apply(table)
    run = Provenance.of(table, split, seed=seed, data_extra={"synthetic": is_synthetic_demo(table)},
                        split_extra={"excluded_test_queries": excluded})
    record: dict[str, Any] = {**run.to_dict(), "sections": {}}
    left_out = (f"; {excluded} more test queries are left out because some actor's score on them is "
                "unobserved, so no router's choice on them could be scored" if excluded else "")
    head = Section(f"routerlab audit: {display_name(table)}", [Paragraph(
        f"Table hash `{table.content_hash[:16]}`, seed {seed}, routerlab {__version__}. "
        f"Split {split.kind} ({_split_recipe(split)}): {split.train.size} train queries; every section "
        f"evaluates the same {split.test.size} test queries{left_out}.")], level=1)
    if is_synthetic_demo(table):
        head.blocks.append(Paragraph("This is routerlab's **synthetic** demo benchmark, generated from a seed: "
                                     "none of it is real data. Pass a table directory to audit real data."))
    parts = [head]
    terms: list[str] = []
    with atomic_directory(out) as tmp:
        ctx = AuditContext(tmp, split, seed, train, test, dict(options or {}), excluded)
        for reg in track(registered, "audit: section", unit="section", label=lambda r: r.name):
            sec = reg.fn(table, ctx)
            record["sections"][reg.name] = {"title": sec.title, **sec.data, "figures": [f.path for f in sec.figures]}
            parts.append(sec)
            terms += [t for t in sec.terms if t not in terms]
        if terms:
            parts.append(glossary_section(terms))
        record["files"] = [*sorted(p.name for p in tmp.iterdir()), "audit.json", "report.md"]
        write_text(tmp / "report.md", render_markdown(parts))
        write_json(tmp / "audit.json", record)
    return record


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
    audit.json key where that differs from the label."""
    items = []
    for key in terms:
        if key in GLOSSARY:
            label, text = GLOSSARY[key]
            items.append(Definition(label, text + ".", f"`{key}` in audit.json" if key != label else "", key))
    return Section("What the numbers mean", [Definitions(items)])


def audit_summary(record: dict[str, Any], out_dir: Path) -> list[str]:
    """A few lines for the terminal: table, split, headline numbers and the files written."""
    t, sp, secs = record["data"], record["split"], record["sections"]
    name = t["name"] + (SYNTHETIC_SUFFIX if t.get("synthetic") else "")
    lines = [f"audit of {name}: {t['n_queries']} queries x {t['n_actors']} actors, hash {t['content_hash'][:12]}",
             f"split {sp['kind']}: {sp['n_train']} train / {sp['n_test']} test queries evaluated"
             + (f" ({sp['excluded_test_queries']} left out: unobserved scores)" if sp["excluded_test_queries"]
                else "")]
    if "table" in secs:
        q = secs["table"].get("quality", {})
        lines.append(f"leaks: {q.get('train_test_overlap', 0)} test queries share their text with a training "
                     f"query; duplicates: {q.get('duplicate_texts', 0)}")
    if "bounds" in secs:
        b = secs["bounds"]
        lines.append(f"oracle {b['oracle']:.4f}, best single actor {b['best_single_actor']} {b['best_single']:.4f}, "
                     f"random {b['random']:.4f}")
    if "leaderboard" in secs and secs["leaderboard"].get("headline"):
        lines.append(secs["leaderboard"]["headline"])
    for name in ("partial", "robustness"):
        if name in secs and secs[name].get("headline"):
            lines.append(secs[name]["headline"])
    if "diversity" in secs and "hse_normalized" in secs["diversity"]:
        d = secs["diversity"]
        lines.append(f"diversity: normalised HSE {d['hse_normalized']:.3f} over {d['n_actors']} actors"
                     + (f"; 90% of it with {d['coreset']['size_90']}" if d.get("coreset", {}).get("size_90")
                        else ""))
    others = [f for f in record.get("files", []) if f != "report.md"]
    lines.append(f"wrote {out_dir / 'report.md'} (the report) and beside it: {', '.join(others)}")
    return lines
