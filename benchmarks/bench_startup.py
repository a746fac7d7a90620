"""Start-up time of the ``routerlab`` command: how long a command takes before it does any work.

Run: ``python benchmarks/bench_startup.py [--repeat 7] [--json]``.

Each command runs in a fresh interpreter (``python -m routerlab ...``), ``--repeat`` times; the script prints the
best and the median wall time, the heavy packages the command imported, and the ratio of the median to two
references measured in the same run:

- *python*: ``python -c pass``, the interpreter alone, the floor no command can go under;
- *naive*: ``python -c "import numpy, pyarrow"``, what a command that imports the core packages at the top costs
  before its first line runs (``routerlab --version`` did that and more before, 0.43 s on the issue's machine).

``--version`` and ``-h`` need none of the core packages; ``routers`` needs numpy (the routers' classes hold their
options) but neither pyarrow nor scipy; ``metrics`` reads the metric catalog, plain Python. The machine may be
shared: timings move by tens of percent from run to run, so compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"
HEAVY = ("numpy", "pyarrow", "scipy", "sklearn", "torch", "matplotlib", "duckdb", "numba", "pandas")
COMMANDS: tuple[tuple[str, list[str]], ...] = (
    ("routerlab --version", ["--version"]),
    ("routerlab -h", ["-h"]),
    ("routerlab metrics", ["metrics"]),
    ("routerlab routers", ["routers"]),
    ("routerlab evaluate -h", ["evaluate", "-h"]),
)
# prints the heavy top-level packages a command imported, after the command's own output
PROBE = ("import json, sys\nfrom routerlab.cli import main\nrc = main(sys.argv[1:])\n"
         f"print(json.dumps(sorted(m for m in sys.modules if m in {HEAVY!r})), file=sys.stderr)\n"
         "sys.exit(rc)\n")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    return env


def _time(argv: list[str], repeat: int) -> list[float]:
    """Wall seconds of ``repeat`` fresh runs of ``argv`` (output discarded; a failing run is an error)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
        times.append(time.perf_counter() - start)
    return times


def _imports(args: list[str]) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=_env(), check=True)
    imported: list[str] = json.loads(proc.stderr.strip().splitlines()[-1])
    return imported


def measure(repeat: int) -> dict[str, Any]:
    """Every command's and reference's best and median seconds, the commands' ratios to the references, and the
    heavy packages each command imported."""
    refs = {"python": [sys.executable, "-c", "pass"], "naive": [sys.executable, "-c", "import numpy, pyarrow"]}
    rows: list[dict[str, Any]] = []
    for name, argv in refs.items():
        t = _time(argv, repeat)
        rows.append({"name": name, "best_s": min(t), "median_s": statistics.median(t), "imports": None})
    base = {r["name"]: r["median_s"] for r in rows}
    for name, args in COMMANDS:
        t = _time([sys.executable, "-m", "routerlab", *args], repeat)
        median = statistics.median(t)
        rows.append({"name": name, "best_s": min(t), "median_s": median, "imports": _imports(args),
                     "ratio_to_naive": median / base["naive"], "above_python_s": median - base["python"]})
    return {"repeat": repeat, "python": sys.version.split()[0], "rows": rows}


def report(result: dict[str, Any]) -> str:
    lines = [f"start-up, {result['repeat']} runs each (python {result['python']}); ratio = median / naive "
             "(python -c 'import numpy, pyarrow')",
             f"{'command':24s} {'best s':>7s} {'median s':>9s} {'ratio':>6s}  heavy imports"]
    for r in result["rows"]:
        ratio = f"{r['ratio_to_naive']:.2f}" if "ratio_to_naive" in r else "-"
        imports = "-" if r["imports"] is None else (", ".join(r["imports"]) or "none")
        lines.append(f"{r['name']:24s} {r['best_s']:7.3f} {r['median_s']:9.3f} {ratio:>6s}  {imports}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="fresh runs per command (default 7)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    result = measure(args.repeat)
    print(json.dumps(result, indent=2) if args.json else report(result))


if __name__ == "__main__":
    main()
