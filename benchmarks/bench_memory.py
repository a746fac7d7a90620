"""Peak memory of the big commands at RouterEval scale (issue 20, part 8).

Run: ``python benchmarks/bench_memory.py [--queries 36000 --actors 8500] [--only evaluate,society,audit]
[--table DIR] [--save-output DIR] [--out FILE] [--smoke]``.

1. *Table*: the seeded synthetic RouterEval-shaped table of ``benchmarks/bench_sweep.py`` (0/1 float32
   scores, 12 domains, 40 actor families; 1.14 GiB at 36,000 x 8,500), saved once as a routerlab table
   directory and reused from then on (default: ``$TMPDIR/routerlab-bench-memory/table-QxA-sSEED``).
2. *Commands*: each runs in a fresh ``python -m routerlab`` process with this checkout's ``src`` first on
   the path and an empty cache directory (``$ROUTERLAB_CACHE_DIR``: no feature or audit cache is read):

   - ``evaluate TABLE --routers best-single,knn,linear --split random:0.2 --json``
   - ``society TABLE --json``
   - ``audit TABLE --quick --no-cache -o DIR --json``

   Peak RSS is the child's ``ru_maxrss`` from ``wait4`` (the kernel's own high-water mark of that process,
   not a sample), printed with the wall time, the goal of issue 20 and the ratio peak / score matrix.

``--save-output DIR`` keeps each command's stdout (``evaluate.json``, ``society.json``, ``audit.json``, the
audit's results.json), and ``--src DIR`` measures another checkout's ``src`` (an older commit, extracted with
``git archive``), so two versions can be compared number by number and byte by byte. ``--smoke`` runs on a
small table in seconds. Run one measurement at a time on a shared machine: two big processes at once can push
each other into swap.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GIB = 2**30
REPO = Path(__file__).resolve().parents[1]

# command -> (arguments after the table, goal in GiB or None); {out} is the command's scratch directory
COMMANDS: dict[str, tuple[list[str], float | None]] = {
    "evaluate": (["--routers", "best-single,knn,linear", "--split", "random:0.2", "--json"], 3.5),
    "society": (["--json"], None),
    "audit": (["--quick", "--no-cache", "-o", "{out}/audit", "--json"], 4.0),
}
OUTPUT_NAMES = {"evaluate": "evaluate.json", "society": "society.json", "audit": "audit.json"}


def default_table_dir(queries: int, actors: int, seed: int) -> Path:
    return Path(tempfile.gettempdir()) / "routerlab-bench-memory" / f"table-{queries}x{actors}-s{seed}"


def build_table(target: Path, queries: int, actors: int, seed: int) -> float:
    """Generate the synthetic table (bench_sweep's generator) and save it at ``target``; returns seconds."""
    sys.path.insert(0, str(REPO / "src"))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_sweep import generate_scores
    from routerlab.data.table import RoutingTable

    t0 = time.perf_counter()
    score, domain, is_test = generate_scores(queries, actors, seed)
    table = RoutingTable.from_arrays(
        score,
        actors=[f"actor{j:05d}" for j in range(actors)],
        query_ids=[f"q{i:06d}" for i in range(queries)],
        text=[f"synthetic question {i} in domain {d}" for i, d in enumerate(domain.tolist())],
        dataset=[f"domain{d:02d}" for d in domain.tolist()],
        split=["test" if t else "train" for t in is_test.tolist()],
        name=f"routereval-scale-{queries}x{actors}",
    )
    del score
    table.save(target)
    return time.perf_counter() - t0


def run_command(name: str, table: Path, scratch: Path, src: Path = REPO / "src") -> dict[str, Any]:
    """One command in a fresh process: its peak RSS (wait4's ru_maxrss), wall time, exit code and stdout."""
    args, goal = COMMANDS[name]
    args = [a.replace("{out}", str(scratch)) for a in args]
    cache = scratch / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]),
           "MPLBACKEND": "Agg", "ROUTERLAB_CACHE_DIR": str(cache), "PYTHONUNBUFFERED": "1"}
    stdout, stderr = scratch / f"{name}.stdout", scratch / f"{name}.stderr"
    cmd = [sys.executable, "-m", "routerlab", name, str(table), *args]
    t0 = time.perf_counter()
    with stdout.open("wb") as out, stderr.open("wb") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=scratch)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    wall = time.perf_counter() - t0
    peak = usage.ru_maxrss * 1024 / GIB  # Linux reports KiB
    return {"command": name, "argv": ["routerlab", name, "TABLE", *args], "rc": proc.returncode,
            "peak_rss_gib": round(peak, 2), "wall_s": round(wall, 1), "goal_gib": goal,
            "within_goal": None if goal is None else peak < goal,
            "stdout": stdout, "stderr_tail": stderr.read_text(errors="replace")[-2000:]}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=36000)
    ap.add_argument("--actors", type=int, default=8500)
    ap.add_argument("--seed", type=int, default=0, help="table seed")
    ap.add_argument("--table", type=Path, default=None,
                    help="the table directory (built there when missing; default under $TMPDIR)")
    ap.add_argument("--only", default=",".join(COMMANDS), help=f"comma list of {', '.join(COMMANDS)}")
    ap.add_argument("--save-output", type=Path, default=None, help="keep each command's stdout here")
    ap.add_argument("--src", type=Path, default=REPO / "src", help="the routerlab source to measure (default: this "
                    "checkout's src)")
    ap.add_argument("--out", type=Path, default=None, help="write the measurements as JSON here")
    ap.add_argument("--smoke", action="store_true", help="a small table (1,200 x 60), in seconds")
    args = ap.parse_args(argv)
    if args.smoke:
        args.queries, args.actors = min(args.queries, 1200), min(args.actors, 60)
    if args.queries < 50 or args.actors < 4:
        ap.error("--queries must be >= 50 and --actors >= 4")
    args.commands = [c.strip() for c in args.only.split(",") if c.strip()]
    unknown = [c for c in args.commands if c not in COMMANDS]
    if unknown or not args.commands:
        ap.error(f"--only: unknown {unknown}; use some of {', '.join(COMMANDS)}")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    table = args.table or default_table_dir(args.queries, args.actors, args.seed)
    matrix_gib = args.queries * args.actors * 4 / GIB
    report: dict[str, Any] = {"queries": args.queries, "actors": args.actors, "seed": args.seed,
                              "score_matrix_bytes": args.queries * args.actors * 4,
                              "score_matrix_gib": round(matrix_gib, 3), "table": str(table), "src": str(args.src),
                              "cpus": os.cpu_count(),
                              "runs": []}
    if (table / "manifest.json").exists():
        print(f"table: {table} (cached)", flush=True)
    else:
        print(f"table: generating {args.queries:,} x {args.actors:,} -> {table}", flush=True)
        report["build_s"] = round(build_table(table, args.queries, args.actors, args.seed), 1)
        print(f"  built and saved in {report['build_s']} s", flush=True)
    print(f"score matrix: {args.queries:,} queries x {args.actors:,} actors, float32 = {matrix_gib:.2f} GiB",
          flush=True)
    print(f"{'command':<9} {'peak RSS GiB':>12} {'wall s':>8} {'goal GiB':>9} {'peak/matrix':>11}  within goal  "
          "load", flush=True)
    failed = []
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        for name in args.commands:
            scratch = Path(tmp) / name
            scratch.mkdir()
            run = run_command(name, table, scratch, args.src.resolve())
            stdout = run.pop("stdout")
            if args.save_output is not None:
                args.save_output.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(stdout, args.save_output / OUTPUT_NAMES[name])
            run["ratio_to_matrix"] = round(run["peak_rss_gib"] / matrix_gib, 2)
            run["load"] = round(os.getloadavg()[0], 2)
            if run["rc"] != 0:
                failed.append(name)
            else:
                run.pop("stderr_tail")
            report["runs"].append(run)
            goal = "-" if run["goal_gib"] is None else f"{run['goal_gib']:.1f}"
            within = {None: "-", True: "yes", False: "NO"}[run["within_goal"]]
            print(f"{name:<9} {run['peak_rss_gib']:>12.2f} {run['wall_s']:>8.1f} {goal:>9} "
                  f"{run['ratio_to_matrix']:>10.2f}x  {within:<11}  {run['load']}"
                  f"{'' if run['rc'] == 0 else '  FAILED (exit ' + str(run['rc']) + ')'}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    for name in failed:
        run = next(r for r in report["runs"] if r["command"] == name)
        print(f"{name} failed (exit {run['rc']}):\n{run['stderr_tail']}", file=sys.stderr)
    if failed:
        raise SystemExit(1)
    return report


if __name__ == "__main__":
    main()
