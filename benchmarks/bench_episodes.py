"""Episodes at RouterWorld-Agentic scale: build, summarise, derive the table, hash, save and load.

Run: ``python benchmarks/bench_episodes.py [--tasks 12740 --actors 6 --max-steps 40] [--repeat 3]``.

A seeded synthetic set of episodes (each task x actor cell 1 to ``--max-steps`` steps, model and tool steps
alternating, the last one scored), about 1.5M steps at the default size, like RouterWorld-Agentic's 76k
trajectories. Stages: *create* (``Episodes.create``: every value checked, cells ordered), *summary* (per-cell
totals), *table* (``episode_table``: the derived matrices), *hash*, *save* and *load* (the store, verifying the
content hash). The naive reference, in the same run: the per-cell totals and the derived latency and score
matrices by a Python loop over the step records (a dict per cell), as one would write it first; the two must
agree to the last bit, and the ratio is printed. The machine may be shared: timings move by tens of percent.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from routerlab.data.episodes import Episodes, episode_table
from routerlab.data.store import load


def synthetic(tasks: int, actors: int, max_steps: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, max_steps + 1, size=tasks * actors)
    n = int(counts.sum())
    q = np.repeat(np.repeat(np.arange(tasks), actors), counts)
    a = np.repeat(np.tile(np.arange(actors), tasks), counts)
    step = np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts)
    model = step % 2 == 0
    last = np.r_[step[1:] == 0, True]
    return {
        "query_id": np.array([f"t{i}" for i in range(tasks)], dtype=object)[q],
        "actor": np.array([f"m{j}" for j in range(actors)], dtype=object)[a],
        "step": step, "kind": np.where(model, "model", "tool").astype(object),
        "tokens_in": np.where(model, rng.integers(50, 2000, n), 0).astype(float),
        "tokens_out": np.where(model, rng.integers(1, 300, n), 0).astype(float),
        "latency_s": np.where(model, rng.gamma(2.0, 0.5, n), 0.0),
        "env_s": np.where(model, 0.0, rng.gamma(1.0, 0.2, n)),
        "score": np.where(last, rng.integers(0, 2, n).astype(float), np.nan),
    }


def naive(cols: dict[str, np.ndarray]) -> dict[tuple[str, str], tuple[float, float, int]]:
    """Per cell: episode latency, the last step's score and the step count, one record at a time."""
    cells: dict[tuple[str, str], list[Any]] = {}
    for q, a, s, lat, env, score in zip(cols["query_id"].tolist(), cols["actor"].tolist(), cols["step"].tolist(),
                                        cols["latency_s"].tolist(), cols["env_s"].tolist(), cols["score"].tolist(),
                                        strict=True):
        cell = cells.setdefault((q, a), [0.0, -1, float("nan"), 0])
        cell[0] += lat + env
        if s > cell[1]:
            cell[1], cell[2] = s, score
        cell[3] += 1
    return {k: (v[0], v[2], v[3]) for k, v in cells.items()}


def timed(fn: Callable[[], Any], repeat: int) -> tuple[Any, list[float]]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=12740)
    ap.add_argument("--actors", type=int, default=6)
    ap.add_argument("--max-steps", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if min(args.tasks, args.actors, args.max_steps, args.repeat) < 1:
        ap.error("--tasks, --actors, --max-steps and --repeat must be >= 1")
    cols = synthetic(args.tasks, args.actors, args.max_steps, args.seed)
    print(f"{args.tasks} tasks x {args.actors} actors, {cols['step'].size:,} steps")
    rows: list[tuple[str, list[float]]] = []
    eps, t = timed(lambda: Episodes.create(**cols), args.repeat)
    rows.append(("create", t))
    summ, t = timed(eps.summary, args.repeat)
    rows.append(("summary", t))
    table, t = timed(lambda: episode_table(eps), args.repeat)
    rows.append(("table", t))
    _, t = timed(lambda: (table.__dict__.pop("content_hash", None), table.content_hash)[1], args.repeat)
    rows.append(("hash", t))
    with tempfile.TemporaryDirectory() as tmp:
        _, t = timed(lambda: table.save(Path(tmp) / "t"), args.repeat)
        rows.append(("save", t))
        back, t = timed(lambda: load(Path(tmp) / "t"), args.repeat)
        rows.append(("load (verified)", t))
    assert back.content_hash == table.content_hash
    ref, t_naive = timed(lambda: naive(cols), args.repeat)
    for name, times in rows:
        print(f"{name:16s} best {min(times):7.3f} s  median {statistics.median(times):7.3f} s")
    # the naive totals agree with the summary and the table's derived cells
    keys = list(zip(summ.query_id.tolist(), summ.actor.tolist(), strict=True))
    lat = np.array([ref[k][0] for k in keys])
    score = np.array([ref[k][1] for k in keys])
    assert np.array_equal(np.array([ref[k][2] for k in keys]), summ.n_steps)
    assert np.allclose(lat, summ.latency_s, rtol=1e-12) and np.array_equal(score, summ.score)
    rows_i = np.array([int(q[1:]) for q, _ in keys])
    cols_i = np.array([int(a[1:]) for _, a in keys])
    assert np.allclose(table.latency_s[rows_i, cols_i], lat.astype(np.float32), rtol=1e-6)
    best_summary = min(dict(rows)["summary"])
    print(f"naive per-cell totals  best {min(t_naive):7.3f} s  median {statistics.median(t_naive):7.3f} s  "
          f"(summary is x{min(t_naive) / best_summary:.0f} faster; create + summary x"
          f"{min(t_naive) / (min(dict(rows)['create']) + best_summary):.1f}; same numbers)")


if __name__ == "__main__":
    main()
