"""benchmarks/bench_startup.py: every command and reference runs in a fresh interpreter and comes back with its
times, its ratio to the naive reference and the heavy packages it imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_startup.py"


@pytest.mark.slow  # about fifteen fresh interpreters
def test_one_round_of_the_benchmark() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--repeat", "1", "--json"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    rows = {r["name"]: r for r in result["rows"]}
    assert {"python", "naive", "routerlab --version", "routerlab routers"} <= set(rows)
    version = rows["routerlab --version"]
    assert version["imports"] == [] and version["median_s"] > 0
    assert version["ratio_to_naive"] == version["median_s"] / rows["naive"]["median_s"]
    assert "pyarrow" not in rows["routerlab routers"]["imports"] and "numpy" in rows["routerlab routers"]["imports"]
