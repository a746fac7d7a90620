"""examples/replicate/routereval.toml (docs/replications.md) runs with --quick on the shared MMLU-Pro pool:
the scaling curve reaches the pool's size, the candidate groups at m = 3, 5, 10 carry their average over the three
groups with V_R, and the paper's numbers are printed beside routerlab's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routerlab.cli import main
from routerlab.experiments.store import query

FILE = Path(__file__).resolve().parents[2] / "examples" / "replicate" / "routereval.toml"


def test_the_quick_replication_runs(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    assert main(["run", str(FILE), "--quick", "--store", str(store), "--backend", "serial"]) == 0
    out = capsys.readouterr().out
    assert "the paper's numbers next to routerlab's (routereval)" in out and "compared numbers agree" in out
    # the curve: every m from 1 to the pool's 10 models ("1..all"), r_o(1) never below r_o(0)
    _, rows = query(store, "SELECT slice, value FROM results WHERE protocol = 'scaling' AND router = 'oracle-p' "
                           "AND metric = 'mu_o' AND (slice LIKE '%p=1' OR slice LIKE '%p=0')")
    curve = {s: v for s, v in rows}
    assert {s.split(",")[0] for s in curve} == {f"m={m}" for m in range(1, 11)}
    oracle = [curve[f"m={m},p=1"] for m in range(1, 11)]
    assert all(curve[f"m={m},p=1"] >= curve[f"m={m},p=0"] for m in range(1, 11))
    # every pool is a subset of the whole: on each query the whole pool's oracle is at least any pool's
    assert oracle[-1] > oracle[0] and oracle[-1] == max(oracle)
    # the groups: each m with its three kinds and their average; at m = 10 the three are the whole pool, the same
    _, rows = query(store, "SELECT slice, router, value, ci_low, ci_high FROM results WHERE protocol = 'groups' "
                           "AND metric = 'mu_o' AND router = 'oracle'")
    by_slice = {s: (v, lo, hi) for s, _, v, lo, hi in rows}
    for m in (3, 5, 10):
        kinds = [by_slice[f"m={m},group={k}"][0] for k in ("all-strong", "all-weak", "strong-to-weak")]
        assert by_slice[f"m={m},group=average"][0] == pytest.approx(sum(kinds) / 3)
    assert len({by_slice[f"m=10,group={k}"] for k in ("all-strong", "all-weak", "strong-to-weak")}) == 1
    _, rows = query(store, "SELECT value FROM results WHERE protocol = 'groups' AND metric = 'v_r' "
                           "AND router = 'oracle' AND slice = 'm=3,group=average'")
    assert rows[0][0] == pytest.approx(by_slice["m=3,group=average"][0] / 0.637)
    # the paper's table from the store: every entry found (54 numbers)
    assert main(["results", "paper", str(FILE), "--store", str(store), "--quick", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert len(entries) == 54 and all(e["routerlab"] is not None for e in entries)
