"""A RouterEval-scale sweep through every executor, then a quick audit of the same table (issue 13).

Run: ``python benchmarks/bench_sweep.py [--queries 36000 --actors 8500] [--smoke] [--skip-audit] [--out FILE]``.

1. *Table*: a seeded synthetic table of 0/1 scores (float32; no tokens or latency) shaped like RouterEval:
   ``--actors`` actors x ``--queries`` queries in 12 domains. Each actor has a general ability, belongs
   to one of 40 families sharing a domain-skill profile (plus its own noise), and each query a domain,
   a difficulty and a discrimination: P(correct) = sigmoid(disc * (ability + skill[domain] - difficulty)).
   Generated in row blocks, so memory is the 1.2 GB score matrix and one block. 80/20 random split.
2. *Sweep*: independent cells, each seeded by its item alone:
   scaling curves (one cell per seed, every pool size m, ``--samples`` random subsets per m),
   candidate groups (one cell per seed: all-strong, all-weak and strong-to-weak groups for every m,
   ``--draws`` draws each) and society coresets (greedy max-HSE coresets, on the fast popcount path, of
   random sub-societies of ``--society-actors`` actors, one per seed, plus one of the whole pool).
   The score matrix reaches workers as a :class:`routerlab.execute.SharedArrays` file that each
   process maps read-only, never as a per-task (or per-worker) copy.
   The sweep runs serially, on 1 and 2 local worker processes and on a 2-worker Dask LocalCluster
   bound to 127.0.0.1; the script prints start-up and sweep wall time, the speed-up over serial,
   and checks that every backend returns exactly the serial results (local workers start with their first
   task, so their start-up is inside the sweep time).
3. *Audit*: ``run_audit(table, options={"quick": True})`` on the same table, with each section's time,
   and what the sections that cannot run at that scale say.

``--smoke`` runs everything on a small table in seconds (what the test runs). The machine may be
shared: timings move from run to run; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

N_DOMAINS = 12
N_FAMILIES = 40

# ------------------------------------------------------------------------------------------- the table


def generate_scores(n_queries: int, n_actors: int, seed: int, *, block: int = 1024
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(score float32 queries x actors, domain per query, is_test per query): see the module docstring."""
    rng = np.random.default_rng(seed)
    ability = rng.normal(0.0, 1.0, n_actors).astype(np.float32)
    family = rng.integers(0, N_FAMILIES, n_actors)
    profile = rng.normal(0.0, 0.9, (N_FAMILIES, N_DOMAINS))
    skill = (profile[family] + rng.normal(0.0, 0.35, (n_actors, N_DOMAINS))).astype(np.float32)  # actors x domains
    domain = rng.integers(0, N_DOMAINS, n_queries)
    difficulty = (rng.normal(0.0, 1.2, n_queries) + rng.normal(0.0, 0.5, N_DOMAINS)[domain]).astype(np.float32)
    disc = rng.lognormal(0.3, 0.3, n_queries).astype(np.float32)
    score = np.empty((n_queries, n_actors), dtype=np.float32)
    for start in range(0, n_queries, block):
        rows = slice(start, min(start + block, n_queries))
        logit = skill[:, domain[rows]].T  # (rows, actors)
        logit += ability[None, :]
        logit -= difficulty[rows, None]
        logit *= disc[rows, None]
        p = np.negative(logit, out=logit)
        np.exp(p, out=p)
        p += 1.0
        np.reciprocal(p, out=p)  # sigmoid
        score[rows] = rng.random(p.shape, dtype=np.float32) < p
    is_test = np.zeros(n_queries, dtype=bool)
    is_test[rng.permutation(n_queries)[: round(0.2 * n_queries)]] = True
    return score, domain.astype(np.int16), is_test


class BenchShared:
    """What every task receives: the arrays as a SharedArrays (file paths only when pickled) and sizes."""

    def __init__(self, arrays: Any, n_queries: int, n_actors: int) -> None:
        self.arrays = arrays
        self.n_queries = n_queries
        self.n_actors = n_actors


_TABLES: dict[str, Any] = {}
"""Per process: the table built on the mapped score matrix and its train part, built once per worker."""


def routing_table(shared: BenchShared) -> Any:
    """The RoutingTable over the mapped score matrix (no copy of the scores), cached in this process."""
    from routerlab.data.table import RoutingTable

    key = str(shared.arrays.directory)
    if key not in _TABLES:
        _TABLES.clear()
        domain = np.asarray(shared.arrays["domain"])
        is_test = np.asarray(shared.arrays["is_test"])
        _TABLES[key] = RoutingTable.from_arrays(
            shared.arrays["score"],
            actors=[f"actor{j:05d}" for j in range(shared.n_actors)],
            query_ids=[f"q{i:06d}" for i in range(shared.n_queries)],
            text=[f"synthetic question {i} in domain {d}" for i, d in enumerate(domain.tolist())],
            dataset=[f"domain{d:02d}" for d in domain.tolist()],
            split=np.where(is_test, "test", "train").tolist(),
            name="routereval-scale",
        )
    return _TABLES[key]


def _train(shared: BenchShared) -> Any:
    from routerlab.data.splits import given_split

    table = routing_table(shared)
    key = f"train:{shared.arrays.directory}"
    if key not in _TABLES:
        _TABLES[key] = table.select_queries(given_split(table).train)
    return _TABLES[key]


# ------------------------------------------------------------------------------------------- the cells


def run_cell(shared: BenchShared, cell: tuple[Any, ...]) -> dict[str, Any]:
    """One sweep cell (a module-level function, so worker processes import it by reference)."""
    kind = cell[0]
    if kind == "scaling":
        from routerlab.data.splits import given_split
        from routerlab.protocols.scaling import scaling_curve

        _, seed, m_values, samples = cell
        table = routing_table(shared)
        return scaling_curve(table, given_split(table), list(m_values), samples=samples, seed=seed).to_dict()
    if kind == "groups":
        from routerlab.protocols.groups import candidate_groups

        _, seed, m_values, draws = cell
        return {"groups": [g.to_dict() for g in candidate_groups(_train(shared), list(m_values), draws=draws,
                                                                  seed=seed)]}
    if kind == "society":
        from routerlab.society import coreset

        _, seed, n_sub, k = cell
        train = _train(shared)
        n = train.n_actors
        cols = np.arange(n) if n_sub >= n else np.sort(np.random.default_rng(seed).choice(n, n_sub, replace=False))
        behaviour = np.ascontiguousarray(np.asarray(train.score)[:, cols].T)  # actors x train items
        c = coreset(behaviour, k=min(k, cols.size), max_size=min(k, cols.size))
        return {"actors": int(cols.size), "order": [int(cols[i]) for i in c.order],
                "full_hse": c.full_hse, "full_hse_normalized": c.full_hse_normalized,
                "curve": [[p.size, p.hse, p.hse_normalized] for p in c.curve]}
    raise ValueError(f"unknown cell kind {kind!r}")


def make_cells(args: argparse.Namespace, n_actors: int) -> list[tuple[Any, ...]]:
    m_scaling = tuple(m for m in args.scaling_m if m <= n_actors)
    m_groups = tuple(m for m in args.group_m if m <= n_actors)
    cells: list[tuple[Any, ...]] = [("society", 0, n_actors, args.coreset_k)]  # the biggest first
    cells += [("society", s + 1, args.society_actors, args.coreset_k) for s in range(args.seeds)]
    cells += [("scaling", s, m_scaling, args.samples) for s in range(args.seeds)]
    cells += [("groups", s, m_groups, args.draws) for s in range(args.seeds)]
    return cells


def digest(results: list[Any]) -> str:
    return hashlib.sha256(json.dumps(results, sort_keys=True).encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------- driver


class MemorySampler:
    """Peak resident memory of this process and of all its descendants (worker processes, Dask nannies),
    sampled every ``interval`` seconds with psutil (mapped score pages count in every process touching them)."""

    def __init__(self, interval: float = 0.5) -> None:
        import threading

        self.interval = interval
        self.peak_total = 0
        self.peak_one = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        try:
            import psutil
        except ImportError:  # pragma: no cover - psutil comes with the dev extra
            return
        me = psutil.Process()
        while not self._stop.is_set():
            rss = []
            for proc in [me, *me.children(recursive=True)]:
                try:
                    rss.append(proc.memory_info().rss)
                except psutil.Error:
                    continue
            self.peak_total = max(self.peak_total, sum(rss))
            self.peak_one = max(self.peak_one, max(rss, default=0))
            self._stop.wait(self.interval)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def gib(self) -> dict[str, float]:
        return {"all_processes": round(self.peak_total / 2**30, 2), "largest_process": round(self.peak_one / 2**30, 2)}


def warm_up() -> None:
    """Compile (or load from numba's disk cache) the society's popcount kernels before any timing, so the
    first backend does not pay for it."""
    from routerlab.society import hse

    hse((np.random.default_rng(0).random((200, 256)) < 0.5).astype(np.float32))


def run_backend(backend: str, workers: int | None, cells: list[tuple[Any, ...]], shared: BenchShared
                ) -> dict[str, Any]:
    from routerlab.execute import make_executor

    t0 = time.perf_counter()
    sampler = MemorySampler().__enter__()
    ex = make_executor(backend, workers=workers)
    try:
        started = time.perf_counter()
        results: list[Any] = [None] * len(cells)
        for index, result in ex.run(run_cell, cells, shared=shared):
            results[index] = result
        done = time.perf_counter()
    finally:
        ex.close()
        sampler.__exit__()
    closed = time.perf_counter()
    return {"backend": backend, "workers": ex.workers, "startup_s": round(started - t0, 2),
            "sweep_s": round(done - started, 2), "close_s": round(closed - done, 2), "results": results,
            "load": round(os.getloadavg()[0], 2), "peak_rss_gib": sampler.gib()}


NOTE_KEYS = ("reason", "note", "notes", "scale", "skipped", "skipped_routers", "warnings")


def section_notes(sec: Any) -> list[str]:
    """What a section's results say about parts it did not run (skips, reasons, scale guards)."""
    if not isinstance(sec, dict):
        return []
    notes: list[str] = []
    for key in NOTE_KEYS:
        value = sec.get(key)
        if isinstance(value, str) and value:
            notes.append(value)
        elif isinstance(value, dict):
            notes += [f"{k}: {v}" for k, v in value.items()]
        elif isinstance(value, list):
            notes += [str(v) for v in value if v]
    return notes


def run_audit_quick(table: Any, out_dir: Path) -> dict[str, Any]:
    from routerlab.reports.audit import run_audit

    t0 = time.perf_counter()
    record = run_audit(table, out_dir, options={"quick": True})
    wall = time.perf_counter() - t0
    sections: dict[str, Any] = {}
    for name, timing in record.get("timings", {}).items():
        sec = record.get("sections", {}).get(name, {})
        sections[name] = {"seconds": timing.get("seconds"), "notes": section_notes(sec)[:4]}
    return {"wall_s": round(wall, 1), "sections": sections}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=36000)
    ap.add_argument("--actors", type=int, default=8500)
    ap.add_argument("--seed", type=int, default=0, help="table seed")
    ap.add_argument("--seeds", type=int, default=4, help="sweep seeds (cells per kind)")
    ap.add_argument("--scaling-m", type=int, nargs="+", default=[2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000])
    ap.add_argument("--samples", type=int, default=20, help="random subsets per pool size (scaling curve)")
    ap.add_argument("--group-m", type=int, nargs="+", default=[2, 3, 5, 10, 20])
    ap.add_argument("--draws", type=int, default=50, help="draws per candidate group kind and m")
    ap.add_argument("--society-actors", type=int, default=1000, help="actors per random sub-society")
    ap.add_argument("--coreset-k", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2, help="workers of the largest local and Dask runs")
    ap.add_argument("--backends", default="serial,local1,local,dask",
                    help="comma list of serial, local1 (one worker), local, dask")
    ap.add_argument("--smoke", action="store_true", help="a small table and sweep, in seconds")
    ap.add_argument("--skip-audit", action="store_true")
    ap.add_argument("--audit-dir", default=None, help="where the audit report goes (default: a temp dir)")
    ap.add_argument("--out", default=None, help="write the measurements as JSON here")
    args = ap.parse_args(argv)
    if args.smoke:
        args.queries, args.actors, args.seeds = min(args.queries, 1200), min(args.actors, 60), 2
        args.scaling_m, args.samples, args.group_m, args.draws = [2, 5, 10], 5, [2, 3], 10
        args.society_actors, args.coreset_k = 20, 4
    if args.queries < 50 or args.actors < 4:
        ap.error("--queries must be >= 50 and --actors >= 4")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    from routerlab.execute import SharedArrays

    print(f"table: {args.queries:,} queries x {args.actors:,} actors (0/1 float32, "
          f"{args.queries * args.actors * 4 / 2**30:.2f} GiB), seed {args.seed}", flush=True)
    t0 = time.perf_counter()
    score, domain, is_test = generate_scores(args.queries, args.actors, args.seed)
    gen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    arrays = SharedArrays({"score": score, "domain": domain, "is_test": is_test})
    del score
    share_s = time.perf_counter() - t0
    print(f"  generated in {gen_s:.1f} s; written once for the workers to map in {share_s:.1f} s "
          f"({arrays.nbytes / 2**30:.2f} GiB)", flush=True)
    report: dict[str, Any] = {"queries": args.queries, "actors": args.actors, "generate_s": round(gen_s, 1),
                              "share_s": round(share_s, 1), "cpus": os.cpu_count(), "runs": []}
    try:
        shared = BenchShared(arrays, args.queries, args.actors)
        cells = make_cells(args, args.actors)
        kinds = {k: sum(1 for c in cells if c[0] == k) for k in ("scaling", "groups", "society")}
        print(f"sweep: {len(cells)} cells ({', '.join(f'{v} {k}' for k, v in kinds.items())}); scaling m "
              f"{cells[-1 - args.seeds][2]} x {args.samples} subsets; groups m {cells[-1][2]} x {args.draws} draws "
              f"x 3 kinds; coresets k={args.coreset_k} of {args.society_actors} actors and of all", flush=True)
        plan = {"serial": ("serial", None), "local1": ("local", 1), "local": ("local", args.workers),
                "dask": ("dask", args.workers)}
        reference: str | None = None
        warm_up()
        print(f"{'backend':<8} {'workers':>7} {'start s':>8} {'sweep s':>8} {'speed-up':>8}  identical  load  "
              "peak RSS GiB (all processes / largest)", flush=True)
        for label in [b.strip() for b in args.backends.split(",") if b.strip()]:
            if label not in plan:
                raise SystemExit(f"--backends: unknown {label!r}; use {', '.join(plan)}")
            backend, workers = plan[label]
            run = run_backend(backend, workers, cells, shared)
            _TABLES.clear()  # the serial run's cached table and train part: the driver need not keep them
            dig = digest(run.pop("results"))
            if reference is None:
                reference = dig
            run.update(label=label, digest=dig, identical=dig == reference)
            base = report["runs"][0]["sweep_s"] if report["runs"] else run["sweep_s"]
            run["speedup"] = round(base / run["sweep_s"], 2) if run["sweep_s"] > 0 else None
            report["runs"].append(run)
            print(f"{label:<8} {run['workers']:>7} {run['startup_s']:>8.2f} {run['sweep_s']:>8.2f} "
                  f"{run['speedup']:>7}x  {'yes' if run['identical'] else 'NO':<9}  {run['load']:<5} "
                  f"{run['peak_rss_gib']['all_processes']} / {run['peak_rss_gib']['largest_process']}", flush=True)
        report["all_identical"] = all(r["identical"] for r in report["runs"])
        if not args.skip_audit:
            table = routing_table(shared)
            with tempfile.TemporaryDirectory(prefix="bench-sweep-audit-") as tmp:
                out = Path(args.audit_dir) if args.audit_dir else Path(tmp) / "audit"
                print(f"audit --quick of the {args.queries:,} x {args.actors:,} table -> {out}", flush=True)
                audit = run_audit_quick(table, out)
            report["audit"] = audit
            print(f"audit --quick: {audit['wall_s']} s", flush=True)
            for name, sec in audit["sections"].items():
                print(f"  {name:<14} {sec['seconds']!s:>8} s", flush=True)
                for note in sec["notes"]:
                    print(f"      {note[:150]}", flush=True)
    finally:
        _TABLES.clear()
        arrays.close()
    report["driver_peak_rss_gib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    print(f"driver peak RSS over the whole run: {report['driver_peak_rss_gib']} GiB (mapped score pages count)",
          flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    if not report["all_identical"]:
        print("results differ between backends", file=sys.stderr)
        raise SystemExit(1)
    return report


if __name__ == "__main__":
    # Run as the importable module ``bench_sweep``, not as ``__main__``: workers then import the task function
    # by name (Dask's cloudpickle would otherwise ship ``__main__`` functions by value, with their globals).
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_sweep

    bench_sweep.main()
