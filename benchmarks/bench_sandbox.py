"""The code grader's sandbox: its overhead per code answer against naive references, and grade_many's throughput.

    python benchmarks/bench_sandbox.py                    # 48 programs, 3 rounds, workers 1 and os.cpu_count()
    python benchmarks/bench_sandbox.py --n 24 --repeat 5 --workers 1,2,4
    python benchmarks/bench_sandbox.py --agreement        # also grade all 800 answers against RouteProfile's scores

Programs: real model answers to real questions, RouteProfile's test data (../shared/data/routeprofile: 50 MBPP
and 50 HumanEval questions, 8 models each), turned into programs by the ``code`` grader (answer + tests), a
seeded sample with as many MBPP as HumanEval programs among those that end within the limits (an answer that
hangs would hang the in-process reference). Each program runs, in the same round and in a shuffled order:

- ``sandbox``: :func:`routerlab.llm.graders.sandbox.run_python` (temporary directory, supervisor process,
  limits, network namespace, cleanup);
- ``subprocess``: ``subprocess.run([sys.executable, "-c", program])``, output captured, no limits;
- ``in-process``: ``exec`` of the compiled program in a fresh namespace, output swallowed (no isolation at all).

Each figure is the median over the rounds of one program's wall time (and CPU time: this process's plus its
reaped children's, steadier than wall time on a loaded machine), then the mean over the programs; the ratios
are of those means, measured in the same run. ``grade_many`` then grades the same answers with each
worker count (answers per second). The machine's load (``os.getloadavg``) is printed before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "routeprofile" / "route_data" / "routing_test_data.json"


def load_answers() -> list[tuple[Any, float]]:
    """Every RouteProfile code answer as an Item, with RouteProfile's own score."""
    from routerlab.llm.graders import Item

    rows = json.loads(DATA.read_text(encoding="utf-8"))
    out = []
    for row in rows:
        if row["metric"] != "code_eval":
            continue
        for model, cell in sorted(row["model_performance"].items()):
            out.append((Item(question=row["query"], answer=cell["response"], reference=row["ground_truth"],
                             dataset=row["task_name"], metric=row["metric"],
                             query_id=f"{row['task_id']}|{model}"), float(cell["task_performance"])))
    return out


def cpu_seconds() -> float:
    """User + system CPU of this process and of its reaped children (the sandbox's supervisor and runner)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def in_process(program: str) -> None:
    namespace: dict[str, Any] = {"__name__": "__solution__"}
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        old_stdin = sys.stdin
        sys.stdin = io.StringIO("")
        try:
            exec(compile(program, "solution.py", "exec"), namespace)
        except BaseException:
            pass
        finally:
            sys.stdin = old_stdin


def naive_subprocess(program: str) -> None:
    subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=60, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=48, help="programs (half MBPP, half HumanEval)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds per program")
    parser.add_argument("--workers", default=f"1,{os.cpu_count() or 1}", help="grade_many worker counts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--agreement", action="store_true",
                        help="grade all 800 answers and compare with RouteProfile's recorded scores")
    args = parser.parse_args()

    from routerlab.llm.graders.code import CodeGrader, Program
    from routerlab.llm.graders.sandbox import Limits, run_python

    limits = Limits()
    os.chdir(tempfile.mkdtemp(prefix="bench-sandbox-"))  # the references write where they run
    print(f"load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} "
          f"({os.cpu_count()} CPUs); python {sys.version.split()[0]}")
    answers = load_answers()
    grader = CodeGrader(limits=limits)
    rng = random.Random(args.seed)
    chosen: list[tuple[Any, Program]] = []
    for dataset in ("mbpp", "human_eval"):
        pool = [a for a in answers if a[0].dataset == dataset]
        rng.shuffle(pool)
        taken = 0
        for item, _score in pool:
            built = grader.program(item)
            if taken >= args.n // 2:
                break
            if isinstance(built, str) or "_exit" in built.text:  # os._exit would end the in-process reference
                continue
            probe = run_python(built.text, Limits(wall_s=5, cpu_s=2))
            if probe.reason in ("timeout", "cpu", "memory", "killed"):
                continue
            chosen.append((item, built))
            taken += 1
    passed = sum(run_python(p.text, limits).passed for _, p in chosen)
    print(f"{len(chosen)} programs ({sum(i.dataset == 'mbpp' for i, _ in chosen)} MBPP, "
          f"{sum(i.dataset == 'human_eval' for i, _ in chosen)} HumanEval), {passed} pass their tests")

    methods = {"sandbox": lambda p: run_python(p, limits), "subprocess": naive_subprocess, "in-process": in_process}
    times: dict[str, list[list[float]]] = {m: [[] for _ in chosen] for m in methods}
    cpus: dict[str, list[list[float]]] = {m: [[] for _ in chosen] for m in methods}
    for _ in range(args.repeat):
        order = [(m, i) for m in methods for i in range(len(chosen))]
        rng.shuffle(order)
        for m, i in order:
            c0 = cpu_seconds()
            t0 = time.perf_counter()
            methods[m](chosen[i][1].text)
            times[m][i].append(time.perf_counter() - t0)
            cpus[m][i].append(cpu_seconds() - c0)
    means = {m: statistics.fmean(statistics.median(t) for t in times[m]) for m in methods}
    cpu = {m: statistics.fmean(statistics.median(t) for t in cpus[m]) for m in methods}
    print("\nper program (mean over programs of the median of rounds): wall, and CPU of this process and its "
          "children")
    for m in methods:
        print(f"  {m:<11} wall {means[m] * 1000:8.2f} ms   cpu {cpu[m] * 1000:8.2f} ms")
    print(f"  sandbox / subprocess: wall {means['sandbox'] / means['subprocess']:.2f}x, "
          f"cpu {cpu['sandbox'] / cpu['subprocess']:.2f}x; overhead over subprocess "
          f"{(means['sandbox'] - means['subprocess']) * 1000:.1f} ms wall, "
          f"{(cpu['sandbox'] - cpu['subprocess']) * 1000:.1f} ms cpu per answer")
    print(f"  sandbox / in-process: wall {means['sandbox'] / means['in-process']:.0f}x, "
          f"cpu {cpu['sandbox'] / cpu['in-process']:.0f}x")

    print("\ngrade_many on the same answers:")
    items = [item for item, _ in chosen]
    base: float | None = None
    for workers in (int(w) for w in args.workers.split(",")):
        g = CodeGrader(limits=limits, workers=workers)
        t0 = time.perf_counter()
        grades = g.grade_many(items)
        seconds = time.perf_counter() - t0
        base = base or seconds
        print(f"  workers={workers:<3} {seconds:6.2f} s  {len(items) / seconds:6.1f} answers/s  "
              f"speed-up {base / seconds:.2f}x  ({sum(x.score for x in grades):.0f} pass)")

    if args.agreement:
        t0 = time.perf_counter()
        grades = grader.grade_many([item for item, _ in answers])
        seconds = time.perf_counter() - t0
        both = sum(g.score == 1 and s == 1 for g, (_, s) in zip(grades, answers, strict=True))
        ours = sum(g.score == 1 and s == 0 for g, (_, s) in zip(grades, answers, strict=True))
        theirs = sum(g.score == 0 and s == 1 for g, (_, s) in zip(grades, answers, strict=True))
        print(f"\nall {len(answers)} RouteProfile code answers graded in {seconds:.1f} s: ours pass "
              f"{both + ours}, RouteProfile's scores pass {both + theirs}; both pass {both}, only ours {ours}, "
              f"only theirs {theirs}, agreement {1 - (ours + theirs) / len(answers):.3f}")
        reasons: dict[str, int] = {}
        for g in grades:
            if g.score == 0:
                key = g.detail.split(":")[0].split(" (")[0][:40]
                reasons[key] = reasons.get(key, 0) + 1
        print("  failures by reason: " + ", ".join(f"{k} {v}" for k, v in
                                                   sorted(reasons.items(), key=lambda kv: -kv[1])[:10]))
    print(f"\nload after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    main()
