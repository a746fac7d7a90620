"""``routerlab metrics``: the catalog as a table and as JSON, filtered by protocol; the labels the CLI's other
tables print come from it."""

from __future__ import annotations

import json

import pytest

from routerlab.cli import main
from routerlab.metrics.catalog import PROTOCOLS, all_metrics, all_terms


def test_text_lists_every_metric(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "label", "unit", "better", "source", "protocols"]
    table = lines[1:lines.index("")]
    assert [line.split()[0] for line in table] == [m.name for m in all_metrics()]
    # where each number comes from, as a user can follow it: the paper and its section, the papers named below
    assert "RouterWorld, sections 3.3 and 4.4" in next(line for line in table if line.startswith("l_dcg "))
    assert lines[-1].startswith("papers: RouterWorld = RouterWorld: Scaling Conversational AI")
    cost = next(line for line in lines if line.startswith("mean_cost "))
    assert "USD per query" in cost and " lower " in cost and cost.rstrip().endswith("groups, agentic, ope, choose")


def test_json_and_protocol_filter(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in listed] == [m.name for m in all_metrics()]
    assert set(listed[0]) == {"name", "label", "unit", "direction", "spec", "source", "protocols", "meaning"}
    assert (listed[0]["spec"], listed[0]["source"]) == ("4", "RouterEval, sections 3, 4.2 and 5.1")
    assert {p for m in listed for p in m["protocols"]} == set(PROTOCOLS)  # all ten produce something
    assert main(["metrics", "--protocol", "robustness", "--json"]) == 0
    rob = json.loads(capsys.readouterr().out)
    assert rob[0]["name"] == "rho" and all("robustness" in m["protocols"] for m in rob)
    assert main(["metrics", "--terms", "--json"]) == 0
    both = json.loads(capsys.readouterr().out)
    assert [t["key"] for t in both["terms"]] == [t.key for t in all_terms()] and len(both["metrics"]) == len(listed)
    assert main(["metrics", "--protocol", "two-model", "--meaning"]) == 0
    text = capsys.readouterr().out
    assert "auroc_diff" in text and "    router ability: area under the ROC curve" in text


def test_unknown_protocol_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "--protocol", "cold_start"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("routerlab: error: unknown protocol 'cold_start'; known: full, cold-start") and \
        err.count("\n") == 1


def test_results_show_help_lists_the_metrics(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["results", "show", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "lowest first for mean_cost, mean_latency" in out and "acc_at_1_l, dcg, l_dcg" in out
