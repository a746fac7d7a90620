"""benchmarks/bench_memory.py --smoke: each command runs in its own process on a small table, and its peak RSS,
wall time and output come back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_memory.py"


@pytest.mark.slow  # three fresh routerlab processes, the audit the longest (~10 s on 2 cores)
def test_smoke_measures_every_command(tmp_path: Path) -> None:
    out, saved, table = tmp_path / "memory.json", tmp_path / "outputs", tmp_path / "table"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--table", str(table), "--out", str(out),
                           "--save-output", str(saved)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert (report["queries"], report["actors"]) == (1200, 60) and (table / "manifest.json").exists()
    runs = {r["command"]: r for r in report["runs"]}
    assert list(runs) == ["evaluate", "society", "audit"]
    for run in runs.values():
        assert run["rc"] == 0 and 0.02 < run["peak_rss_gib"] < 4 and run["wall_s"] > 0
        assert run["ratio_to_matrix"] == round(run["peak_rss_gib"] / (report["score_matrix_bytes"] / 2**30), 2)
    assert runs["evaluate"]["goal_gib"] == 3.5 and runs["audit"]["goal_gib"] == 4.0
    assert runs["society"]["goal_gib"] is None and runs["society"]["within_goal"] is None
    evaluation = json.loads((saved / "evaluate.json").read_text())
    assert [r["router"] for r in evaluation["results"]] == ["best-single", "knn", "linear"]
    assert evaluation["split"]["kind"] == "random" and "hse" in json.loads((saved / "society.json").read_text())
    assert "leaderboard" in json.loads((saved / "audit.json").read_text())["sections"]
    assert "peak RSS GiB" in proc.stdout and "(cached)" not in proc.stdout
    again = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--table", str(table), "--only", "society"],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "(cached)" in again.stdout
    assert [line.split()[0] for line in again.stdout.splitlines()[3:]] == ["society"]
