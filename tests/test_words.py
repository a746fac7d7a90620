"""Counts agree with their nouns everywhere routerlab prints them (issue 21: "1 requests", "round round 3")."""

from __future__ import annotations

import pytest

from routerlab import progress
from routerlab._words import noun, plural, verb
from routerlab.cli import main


def test_plural_noun_and_verb() -> None:
    assert [plural(n, "request") for n in (0, 1, 2)] == ["0 requests", "1 request", "2 requests"]
    assert plural(1, "query") == "1 query" and plural(3, "query") == "3 queries"
    assert plural(2, "test query", "test queries") == "2 test queries" and noun(1, "test query", "x") == "test query"
    assert plural(2, "match") == "2 matches" and plural(2, "pass") == "2 passes"
    assert f"{plural(1, 'cell')} {verb(1, 'has', 'have')}" == "1 cell has"
    assert f"{plural(5, 'model')} {verb(5, 'has', 'have')}" == "5 models have"


def test_voyager_progress_names_the_round_once(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(progress.ENV, "lines")
    monkeypatch.setattr(progress, "MIN_SECONDS", 0.0)  # every round gets its line
    assert main(["evaluate", "--routers", "best-single", "--n-boot", "40", "--protocol", "voyager", "--rounds", "2"]
                ) == 0
    err = capsys.readouterr().err
    assert "routerlab: voyager: round 2 (2/2)" in err and "round round" not in err


def test_a_loop_s_closing_line_reads_done(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    monkeypatch.setattr(progress, "MIN_SECONDS", 0.0)
    monkeypatch.setattr(progress, "HEARTBEAT_SECONDS", 1e9)
    with progress.Progress("evaluate: router", 2, enabled=None) as bar:
        bar._mode = "lines"
        bar.update(1)
        bar.update(1)
    err = capsys.readouterr().err
    assert err.startswith("routerlab: evaluate: router (2/2) done ... ")  # was "router done (2/2)"
