"""benchmarks/bench_sweep.py --smoke: the RouterEval-scale sweep's code path on a small table, through main()."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import require_module

require_module("distributed", "pip install 'routerlab[distributed]'")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_sweep.py"


@pytest.mark.slow  # a Dask LocalCluster and two process pools start (~6-10 s on 2 cores)
def test_smoke_sweep_is_identical_on_every_backend(tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    # a subprocess: process workers import the script's task function from its __main__, as in a real run
    proc = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--skip-audit", "--backends",
                           "serial,local,dask", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert [r["label"] for r in report["runs"]] == ["serial", "local", "dask"]
    assert [r["workers"] for r in report["runs"]] == [1, 2, 2]
    assert report["all_identical"] is True
    assert len({r["digest"] for r in report["runs"]}) == 1
    assert all(r["sweep_s"] > 0 and r["peak_rss_gib"]["all_processes"] > 0 for r in report["runs"])
    assert "identical" in proc.stdout and "speed-up" in proc.stdout


def test_generated_table_is_binary_and_actors_differ() -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import bench_sweep
    finally:
        sys.path.remove(str(SCRIPT.parent))
    score, domain, is_test = bench_sweep.generate_scores(600, 30, seed=1, block=128)
    again, _, _ = bench_sweep.generate_scores(600, 30, seed=1, block=600)
    assert score.dtype.name == "float32" and score.shape == (600, 30)
    assert set(score.ravel().tolist()) == {0.0, 1.0}
    assert (score == again).all()  # the block size does not change the table
    means = score.mean(axis=0)
    assert means.max() - means.min() > 0.2  # actors differ in ability
    assert 0.15 < is_test.mean() < 0.25 and domain.max() < bench_sweep.N_DOMAINS
