"""The metric catalog: every entry is complete (label, unit, direction, a SPEC section that exists), every computed
metric has an entry, lookups fail with one readable line, formatting keeps the digits tables printed before the
catalog existed, and plugins join through an entry point."""

from __future__ import annotations

import importlib.metadata
import re
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab._registry import Registry
from routerlab.errors import UsageError
from routerlab.metrics import catalog
from routerlab.metrics.catalog import (
    DIRECTIONS,
    GLOSSARY,
    PROTOCOLS,
    Metric,
    Term,
    all_metrics,
    all_terms,
    format_value,
    glossary_entry,
    legend,
    metric_info,
    metrics_for,
)
from routerlab.metrics.registry import registered_metrics
from routerlab.metrics.sources import PAPERS, SPEC_SOURCES, cite, source

PLUGIN_METRIC = Metric("plugin_gain", "plugin gain", "score in [0, 1]", "higher", "4",
                       f"a plugin's metric, in [0, 1] ({cite('4')})", ("full",))
TAKEN = Metric("mu_o", "mine", "score in [0, 1]", "higher", "4", f"a plugin's mu_o ({cite('4')})")


def test_every_entry_is_complete() -> None:
    metrics = all_metrics()
    assert len({m.name for m in metrics}) == len(metrics) > 50
    for m in metrics:
        assert m.label and m.unit and m.meaning, m.name
        assert m.direction in DIRECTIONS, m.name
        assert m.spec in SPEC_SOURCES, m.name
        assert cite(m.spec) in m.meaning, m.name  # the meaning cites its own section's paper and section
        assert set(m.protocols) <= set(PROTOCOLS), m.name
        assert format(1.0 if m.digits != "d" else 1, m.digits)  # a valid format spec
    for t in all_terms():
        assert t.label and t.spec in SPEC_SOURCES and cite(t.spec) in t.meaning, t.key
    assert catalog.check_catalog() == []
    # each protocol produces at least one metric, so 'routerlab metrics --protocol P' is never empty
    assert all(metrics_for(p) for p in PROTOCOLS)


def test_spec_sections_exist_in_spec_md(shared_data: Path) -> None:
    spec = (shared_data.parent / "SPEC.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^## ([0-9]+)\. ", spec, flags=re.M))
    assert {"1", "4", "7"} <= sections
    missing = {e.name if isinstance(e, Metric) else e.key: e.spec
               for e in (*all_metrics(), *all_terms()) if e.spec not in sections}
    assert not missing, f"SPEC.md has no section for {missing}"
    assert set(SPEC_SOURCES) == sections  # every section has one source users can read, and only those


def test_a_citation_names_the_paper_and_section() -> None:
    assert cite("5") == "RouterWorld, sections 3.3 and 4.4"
    assert cite("2", "3") == "the HSE paper, sections 4 and 5"
    assert cite("1", "5") == "RouterWorld, sections 3, 3.3 and 4.4"
    assert cite("6", "7") == "RouterXBench, section 3; routerlab's own rule"
    assert cite("4", "4") == cite("4") == "RouterEval, sections 3, 4.2 and 5.1"
    assert str(source("7")) == cite("7") == cite("8") == "routerlab's own rule"
    with pytest.raises(ValueError, match="no specification section '10'"):
        cite("10")
    assert all(src.paper in PAPERS for src in SPEC_SOURCES.values() if src.paper != "routerlab")


def test_every_computed_metric_is_in_the_catalog() -> None:
    names = {m.name for m in all_metrics()}
    assert set(registered_metrics()) <= names
    # the leaderboard's columns are the full protocol's per-query metrics, in catalog order, each choice metric
    # followed by its greedy twin (an exploring router's argmax value); v_r only with a reference
    assert [m.name for m in metrics_for("full") if m.name in registered_metrics()] == [
        "mu_o", "mu_o_greedy", "v_b", "v_b_greedy", "v_r", "v_r_greedy", "e_p", "acc_at_1", "acc_at_1_greedy",
        "acc_at_1_l", "acc_at_1_l_greedy", "dcg", "dcg_greedy", "l_dcg", "l_dcg_greedy", "mean_cost",
        "mean_cost_greedy", "mean_latency", "mean_latency_greedy"]


def test_directions_and_units_of_known_metrics() -> None:
    assert (metric_info("mu_o").direction, metric_info("mean_cost").direction) == ("higher", "lower")
    assert metric_info("mean_latency").direction == "lower" and metric_info("e_p").direction == "none"
    assert metric_info("mean_cost").header == "mean cost (USD/query)"
    assert metric_info("e_p").header == "E_p (bits)" and metric_info("v_b").header == "V_B"
    assert metric_info("lpm").long_label == "LPM (low-band performance mean)"
    diff = metric_info("auroc_diff")
    assert (diff.label, diff.direction, diff.protocols) == ("ΔAUROC", "higher", ("two-model",))
    assert [m.name for m in metrics_for("society")][:2] == ["hse", "hse_normalized"]


def test_unknown_names_are_one_readable_error() -> None:
    with pytest.raises(UsageError, match=r"unknown metric 'acc_at1'; did you mean acc_at_1, acc_at_1_l"):
        metric_info("acc_at1")
    with pytest.raises(UsageError, match=r"unknown metric 'zzzz'; known: mu_o, mu_o_greedy, v_b"):
        metric_info("zzzz")
    with pytest.raises(UsageError, match=r"unknown metric 'collapsed'"):
        metric_info("collapsed")  # a glossary term, not a metric
    with pytest.raises(UsageError, match=r"unknown protocol 'ful'; known: full, cold-start"):
        metrics_for("ful")
    with pytest.raises(UsageError, match=r"unknown glossary term 'rhoo'; did you mean rho"):
        glossary_entry("rhoo")
    term = glossary_entry("95% CI")
    assert isinstance(term, Term) and term.spec == "7"
    assert glossary_entry("rho") is metric_info("rho")


@pytest.mark.parametrize(("name", "value", "shown"), [
    ("mu_o", 0.98671, "0.9867"), ("mu_o", 1, "1.0000"), ("mean_cost", 6.2634e-05, "6.26e-05"),
    ("mean_latency", 10.12744, "10.1274"), ("mu_o", float("nan"), "-"), ("mu_o", None, "-"),
    ("v_b", np.float32("nan"), "-"), ("v_b", np.float64(1.22024), "1.2202"), ("size_90", 3, "3"),
])
def test_format_value_keeps_the_printed_digits(name: str, value: Any, shown: str) -> None:
    assert format_value(name, value) == shown


def test_legend_groups_by_direction() -> None:
    assert legend(["mu_o", "v_b", "e_p", "mean_cost", "mean_latency"]) == (
        "higher is better: mu_o, v_b; lower is better: mean_cost (USD/query), mean_latency (s); "
        "descriptive: e_p (bits)")
    assert legend(["mu_o"]) == "higher is better: mu_o"


def test_the_glossary_is_read_only_and_derived() -> None:
    assert GLOSSARY["v_b"] == ("V_B", metric_info("v_b").meaning)
    assert GLOSSARY["collapsed"][0] == "collapsed" and "paired difference" not in GLOSSARY
    assert GLOSSARY["mu_o_difference"][0] == "paired difference"
    assert set(GLOSSARY) == {m.name for m in all_metrics()} | {t.key for t in all_terms()}
    assert not hasattr(GLOSSARY, "setdefault")
    with pytest.raises(TypeError):
        GLOSSARY["new"] = ("x", "y")  # type: ignore[index]


def test_bad_entries_are_refused() -> None:
    with pytest.raises(ValueError, match="direction must be one of higher, lower, none"):
        Metric("x", "x", "u", "up", "4", "m")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"spec must be a section number of the specification \(1-9\)"):
        Metric("x", "x", "u", "higher", "4.2", "m")
    with pytest.raises(ValueError, match="lower-case letters"):
        Metric("Mu O", "x", "u", "higher", "4", "m")
    with pytest.raises(ValueError, match="must not be empty"):
        Term("k", "", "4", "m")


def _plugins(monkeypatch: pytest.MonkeyPatch, *eps: EntryPoint) -> None:
    """A fresh plugin registry reading only ``eps``."""
    monkeypatch.setattr(catalog, "_PLUGINS", Registry("metric", group="routerlab.metrics",
                                                      from_plugin=catalog._from_plugin))
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda **kw: [ep for ep in eps if ep.group == kw.get("group")])


def test_a_plugin_metric_joins_the_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    _plugins(monkeypatch, EntryPoint("plugin_gain", f"{__name__}:PLUGIN_METRIC", "routerlab.metrics"))
    assert metric_info("plugin_gain") is PLUGIN_METRIC
    assert metrics_for("full")[-1] is PLUGIN_METRIC  # after the built-ins
    assert GLOSSARY["plugin_gain"] == ("plugin gain", PLUGIN_METRIC.meaning)


def test_a_plugin_may_not_take_a_built_in_name(monkeypatch: pytest.MonkeyPatch) -> None:
    _plugins(monkeypatch, EntryPoint("mu_o", f"{__name__}:TAKEN", "routerlab.metrics"))
    with pytest.raises(UsageError, match="metric plugin\\(s\\) 'mu_o' take the name of a built-in entry"):
        metric_info("v_b")


@pytest.mark.parametrize(("value", "message"), [
    ("PLUGIN_METRIC", r"metric plugin 'other' \(.*\) names the entry 'plugin_gain'; the entry point must have"),
    ("TAKEN.label", r"metric plugin 'other' \(.*\) must name a routerlab.metrics.catalog Metric or Term, not a str"),
])
def test_a_plugin_that_names_something_else_is_one_error(monkeypatch: pytest.MonkeyPatch, value: str,
                                                         message: str) -> None:
    _plugins(monkeypatch, EntryPoint("other", f"{__name__}:{value}", "routerlab.metrics"))
    with pytest.raises(UsageError, match=message):
        all_metrics()
