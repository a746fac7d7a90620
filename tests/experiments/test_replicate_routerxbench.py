"""examples/replicate/routerxbench.toml with --quick on the demo (--table local=demo) and the synthetic signals of
benchmarks/routerxbench_demo_signals.py: the file parses, every router of its [[paper]] entries runs, and the run
stores the replication's records (Tables 1-2 per domain, training sizes, layer weights, both-fail, Youden-J)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from routerlab.cli import main
from routerlab.experiments.store import query

REPO = Path(__file__).resolve().parents[2]
FILE = REPO / "examples" / "replicate" / "routerxbench.toml"


def test_routerxbench_quick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from routerxbench_demo_signals import write_demo_signals
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    # the file where it lives relative to the repository root, the signals where its [quick] section reads them
    copy = tmp_path / "examples" / "replicate" / FILE.name
    copy.parent.mkdir(parents=True)
    shutil.copy(FILE, copy)
    write_demo_signals(tmp_path / "tables" / "routerxbench-demo-signals.npz")
    store = tmp_path / "store"
    assert main(["run", str(copy), "--quick", "--table", "local=demo", "--store", str(store), "--backend",
                 "serial"]) == 0
    out = capsys.readouterr().out
    assert "| Table 1: AUROC ID avg, ProbeDirichlet | 0.687 |" in out and "peak memory" in out

    def values(sql: str) -> list[tuple[object, ...]]:
        return query(store, sql)[1]

    metrics = {m for (m,) in values("SELECT DISTINCT metric FROM results WHERE protocol = 'two-model'")}
    assert {"auroc", "lpm", "mpm", "hcr", "apgr", "both_fail", "youden_accuracy", "youden_j", "layer_weight"} <= metrics
    slices = {s for (s,) in values("SELECT DISTINCT slice FROM results WHERE router = 'probe-dirichlet'")}
    assert {"domain=id", "domain=ood", "dataset=law", "train_size=0.5,domain=id", "train_size=1,domain=ood",
            "layer=1", "layer=4"} <= slices
    ((weights,),) = values("SELECT sum(value) FROM results WHERE router = 'probe-dirichlet' AND "
                           "metric = 'layer_weight'")
    assert weights == pytest.approx(1.0)
    shares = values("SELECT DISTINCT value FROM results WHERE metric = 'both_fail' AND slice = 'domain=ood'")
    assert len(shares) == 1 and 0.0 <= shares[0][0] <= 1.0  # the pair's share, the same for every router
    # every [[paper]] entry finds its number
    assert main(["results", "paper", str(copy), "--store", str(store), "--quick", "--table", "local=demo",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) >= 20 and all(r["routerlab"] is not None for r in rows)
