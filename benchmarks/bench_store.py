"""Import a RouterEval-sized long file, save and load the table: wall time and peak memory per stage.

Run: ``python benchmarks/bench_store.py [--queries 36000 --actors 8500] [--quick] [--order actor]``.

Stages run in their own subprocess so that each reports its own peak RSS (``ru_maxrss``):

- *generate*: a seeded synthetic long Parquet file (``benchmarks/gen_long.py``, row group by row group)
  under ``benchmarks/_data/``; reused when it already exists with the same parameters.
- *import*: ``read_long`` (two streaming passes, scatter into preallocated float32 matrices).
- *save* / *load*: ``routerlab.data.store`` (the save stage's peak includes the table it writes); load
  runs twice: ``verify=False`` (trusts the manifest's hash) and the default, which verifies the content
  hash by hashing each matrix row group as it is decoded.
- *hash*: ``RoutingTable.content_hash`` on its own (``save`` runs it concurrently with writing).
- references, in the same run: *import naive* reads the whole long table into memory with pyarrow and
  pivots with ``np.unique`` (on a smaller size when the full one would not fit in half the free memory;
  the ratio is then taken against ``read_long`` on that same smaller file); *save/load plain* is the
  previous store (plain LZ4 floats, one ``read_table`` then ``combine_chunks``); *save/load npy* is
  ``np.save`` / ``np.load`` of the raw matrix, the speed of the disk cache.

The machine may be shared: timings move by tens of percent from run to run; ``--repeat`` runs the
timed stages several times and prints the best and the median.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "_data"
NAIVE_BYTES_PER_ROW = 160  # measured: two Python str objects per row plus numpy/Arrow copies


# ---------------------------------------------------------------------------------------- stages (child side)


def _table_from_npy(base: Path) -> Any:
    import numpy as np

    from routerlab.data.table import RoutingTable

    names = json.loads(base.with_suffix(".names.json").read_text())
    score = np.load(base.with_suffix(".score.npy"))
    return RoutingTable.from_arrays(score, actors=names["actors"], query_ids=names["queries"],
                                    dataset=names["dataset"], split=names["split"], name="bench")


def stage_generate(a: dict[str, Any]) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    from gen_long import generate

    info = generate(Path(a["long"]), queries=a["queries"], actors=a["actors"], seed=a["seed"], order=a["order"])
    return {"rows": info["rows"], "bytes": info["bytes"]}


def stage_import(a: dict[str, Any]) -> dict[str, Any]:
    from routerlab.data.longformat import read_long

    t0 = time.perf_counter()
    table = read_long([a["long"]], progress=False)
    wall = time.perf_counter() - t0
    peak = _peak_mb()
    if a.get("dump"):
        import numpy as np

        base = Path(a["dump"])
        np.save(base.with_suffix(".score.npy"), table.score)
        base.with_suffix(".names.json").write_text(json.dumps({
            "queries": table.queries.ids.tolist(), "actors": table.actor_names,
            "dataset": table.queries.dataset.tolist(), "split": table.queries.split.tolist(),
        }))
    return {"wall_s": wall, "peak_mb": peak, "shape": [table.n_queries, table.n_actors],
            "observed": table.observed_fraction}


def stage_import_naive(a: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    tbl = pq.read_table(a["long"])  # the whole long table, strings materialised
    qids = tbl.column("query_id").to_numpy(zero_copy_only=False)
    actors = tbl.column("actor").to_numpy(zero_copy_only=False)
    score = tbl.column("score").to_numpy(zero_copy_only=False)
    uq, qi = np.unique(qids, return_inverse=True)
    ua, ai = np.unique(actors, return_inverse=True)
    mat = np.full((uq.size, ua.size), np.nan, dtype=np.float32)
    mat[qi, ai] = score
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "peak_mb": _peak_mb(), "shape": list(mat.shape)}


def stage_save(a: dict[str, Any]) -> dict[str, Any]:
    from routerlab.data.store import save

    table = _table_from_npy(Path(a["dump"]))
    base = _peak_mb()
    t0 = time.perf_counter()
    save(table, a["table"])
    return {"wall_s": time.perf_counter() - t0, "peak_mb": _peak_mb(), "base_mb": base}


def stage_load(a: dict[str, Any]) -> dict[str, Any]:
    from routerlab.data.store import load

    t0 = time.perf_counter()
    table = load(a["table"], verify=bool(a.get("verify")))
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "peak_mb": _peak_mb(), "shape": [table.n_queries, table.n_actors]}


def stage_hash(a: dict[str, Any]) -> dict[str, Any]:
    table = _table_from_npy(Path(a["dump"]))
    base = _peak_mb()
    t0 = time.perf_counter()
    _ = table.content_hash
    return {"wall_s": time.perf_counter() - t0, "peak_mb": _peak_mb(), "base_mb": base}


def stage_save_plain(a: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    score = np.load(Path(a["dump"]).with_suffix(".score.npy"))
    base = _peak_mb()
    t0 = time.perf_counter()
    pq.write_table(pa.table({"value": pa.array(score.reshape(-1))}), a["plain"], compression="lz4",
                   row_group_size=1 << 24, use_dictionary=False, write_statistics=False)
    return {"wall_s": time.perf_counter() - t0, "peak_mb": _peak_mb(), "base_mb": base}


def stage_load_plain(a: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    col = pq.read_table(a["plain"]).column("value")
    arr = np.array(col.combine_chunks().to_numpy(zero_copy_only=False), copy=True)
    return {"wall_s": time.perf_counter() - t0, "peak_mb": _peak_mb(), "n": int(arr.size)}


def stage_save_npy(a: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    score = np.load(Path(a["dump"]).with_suffix(".score.npy"))
    base = _peak_mb()
    t0 = time.perf_counter()
    np.save(a["npy"], score)
    return {"wall_s": time.perf_counter() - t0, "peak_mb": _peak_mb(), "base_mb": base}


def stage_load_npy(a: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    t0 = time.perf_counter()
    arr = np.load(a["npy"])
    return {"wall_s": time.perf_counter() - t0, "peak_mb": _peak_mb(), "n": int(arr.size)}


STAGES = {name.removeprefix("stage_"): fn for name, fn in globals().items() if name.startswith("stage_")}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


# ---------------------------------------------------------------------------------------- driver (parent side)


def run_stage(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Run one stage in a fresh interpreter; its JSON result plus the child's CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, __file__, "--stage", name, "--stage-args", json.dumps(args)],
                          capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"stage {name} failed (exit {proc.returncode})")
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out


def repeated(name: str, args: dict[str, Any], times: int) -> dict[str, Any]:
    runs = [run_stage(name, args) for _ in range(times)]
    best = min(runs, key=lambda r: r["wall_s"])
    out = dict(best)
    out["median_s"] = statistics.median(r["wall_s"] for r in runs)
    out["runs"] = len(runs)
    return out


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size if path.exists() else 0


def _mem_available() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 << 30


def ensure_long(queries: int, actors: int, seed: int, order: str) -> tuple[Path, dict[str, Any]]:
    path = DATA / f"long_q{queries}_a{actors}_s{seed}_{order}.parquet"
    info_file = path.with_suffix(".json")
    if path.exists() and info_file.exists():
        return path, {**json.loads(info_file.read_text()), "reused": True}
    res = run_stage("generate", {"long": str(path), "queries": queries, "actors": actors, "seed": seed,
                                 "order": order})
    info = {"rows": res["rows"], "bytes": res["bytes"], "wall_s": res.get("wall_s"), "peak_mb": res.get("peak_mb"),
            "cpu_s": res.get("cpu_s")}
    info_file.write_text(json.dumps(info))
    return path, info


def fmt_row(label: str, r: dict[str, Any] | None, note: str = "") -> str:
    if r is None:
        return f"{label:26s} {'-':>9s} {'-':>9s} {'-':>8s} {'-':>11s}  {note}"
    med = f"{r['median_s']:.2f}" if "median_s" in r and r.get("runs", 1) > 1 else "-"
    return (f"{label:26s} {r['wall_s']:9.2f} {med:>9s} {r['cpu_s']:8.1f} {r['peak_mb']:11.0f}  {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=36000)
    parser.add_argument("--actors", type=int, default=8500)
    parser.add_argument("--quick", action="store_true", help="500 actors x 3,600 queries: a few seconds")
    parser.add_argument("--order", choices=("actor", "query"), default="actor", help="row order of the long file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each timed stage (best and median shown)")
    parser.add_argument("--no-naive", action="store_true", help="skip the naive references")
    parser.add_argument("--naive-rows", type=int, default=20_000_000,
                        help="largest long table the naive import reference reads (it is slow and memory-hungry)")
    parser.add_argument("--keep", action="store_true", help="keep the saved table and matrix dumps")
    parser.add_argument("--stage", help=argparse.SUPPRESS)
    parser.add_argument("--stage-args", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage:
        t0 = time.perf_counter()
        res = STAGES[args.stage](json.loads(args.stage_args))
        res.setdefault("wall_s", time.perf_counter() - t0)
        res.setdefault("peak_mb", _peak_mb())
        print(json.dumps(res))
        return
    if args.quick:
        args.queries, args.actors = 3600, 500
    q, m = args.queries, args.actors
    DATA.mkdir(parents=True, exist_ok=True)
    tag = f"q{q}_a{m}_s{args.seed}_{args.order}"
    work = DATA / f"work_{tag}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    print(f"routerlab store benchmark: {q:,} queries x {m:,} actors = {q * m:,} cells, rows in {args.order} order; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    long_path, gen = ensure_long(q, m, args.seed, args.order)
    gen_note = "reused: numbers of the run that wrote it" if gen.get("reused") else "streamed, row group by row group"
    dump = work / "matrix"
    table_dir = work / "table"
    a = {"long": str(long_path), "dump": str(dump), "table": str(table_dir), "plain": str(work / "plain.parquet"),
         "npy": str(work / "plain.npy")}
    rows: list[tuple[str, dict[str, Any] | None, str]] = []
    imp = repeated("import", a, args.repeat)
    rows.append(("import  read_long", imp, f"{gen['rows']:,} rows, {imp['shape'][0]}x{imp['shape'][1]}"))
    sv = repeated("save", a, args.repeat)
    rows.append(("save    store.save", sv, f"table alone {sv['base_mb']:.0f} MB before save"))
    ld = repeated("load", a, args.repeat)
    rows.append(("load    verify=False", ld, "hash trusted from the manifest"))
    ldv = repeated("load", {**a, "verify": True}, args.repeat)
    rows.append(("load    default (verify)", ldv, "hashes each row group as it is decoded"))
    hs = repeated("hash", a, args.repeat)
    rows.append(("hash    content_hash", hs, f"table alone {hs['base_mb']:.0f} MB"))
    ratios = []
    if not args.no_naive:
        budget = min(_mem_available() // 2, args.naive_rows * NAIVE_BYTES_PER_ROW)
        naive_rows = gen["rows"]
        if naive_rows * NAIVE_BYTES_PER_ROW <= budget:
            nv = repeated("import_naive", a, args.repeat)
            rows.append(("import  naive reference", nv, "whole long table in memory, np.unique pivot"))
            ratios.append(f"import: naive / read_long = {nv['wall_s'] / imp['wall_s']:.1f}x time, "
                          f"{nv['peak_mb'] / imp['peak_mb']:.1f}x peak RSS")
        else:
            small_q = max(1, min(q, int(budget // (NAIVE_BYTES_PER_ROW * m))))
            small_path, _ = ensure_long(small_q, m, args.seed, args.order)
            b = {**a, "long": str(small_path), "dump": ""}
            imp_s = repeated("import", b, args.repeat)
            nv = repeated("import_naive", b, args.repeat)
            note = (f"on {small_q:,} x {m:,}: the full size would need ~{naive_rows * NAIVE_BYTES_PER_ROW / 1e9:.0f} GB"
                    f" (cap --naive-rows {args.naive_rows:,})")
            rows.append((f"import  read_long {small_q}q", imp_s, "same smaller file as the naive run"))
            rows.append(("import  naive reference", nv, note))
            ratios.append(f"import ({small_q:,} x {m:,}): naive / read_long = {nv['wall_s'] / imp_s['wall_s']:.1f}x "
                          f"time, {nv['peak_mb'] / imp_s['peak_mb']:.1f}x peak RSS")
        sp = repeated("save_plain", a, args.repeat)
        lp = repeated("load_plain", a, args.repeat)
        sn = repeated("save_npy", a, args.repeat)
        ln = repeated("load_npy", a, args.repeat)
        rows += [("save    plain (old store)", sp, "plain LZ4 floats, 16M-value row groups"),
                 ("load    plain (old store)", lp, "read_table + combine_chunks"),
                 ("save    npy", sn, "np.save, raw 4 bytes a cell"),
                 ("load    npy", ln, "np.load")]
        ratios.append(f"save: plain / store.save = {sp['wall_s'] / sv['wall_s']:.1f}x time; "
                      f"load: plain / store.load = {lp['wall_s'] / ld['wall_s']:.1f}x time, "
                      f"{lp['peak_mb'] / ld['peak_mb']:.1f}x peak RSS")
    print(f"\n{'stage':26s} {'best s':>9s} {'median s':>9s} {'cpu s':>8s} {'peak RSS MB':>11s}  notes")
    gen_row = {"wall_s": gen["wall_s"], "cpu_s": gen.get("cpu_s", float("nan")), "peak_mb": gen["peak_mb"]} \
        if gen.get("wall_s") is not None else None
    print(fmt_row("generate long Parquet", gen_row, gen_note))
    for label, r, note in rows:
        print(fmt_row(label, r, note))
    print("\nfiles:")
    print(f"  long Parquet input      {_size(long_path) / 1e6:10.1f} MB  {long_path.name}")
    for f in sorted(table_dir.iterdir()):
        print(f"  table/{f.name:18s}{_size(f) / 1e6:10.1f} MB")
    if (work / "plain.parquet").exists():
        print(f"  plain LZ4 score matrix  {_size(work / 'plain.parquet') / 1e6:10.1f} MB")
        print(f"  npy score matrix        {_size(work / 'plain.npy') / 1e6:10.1f} MB")
    for line in ratios:
        print(line)
    print(f"load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs: on a shared machine, repeat "
          "(--repeat 3) before trusting a difference of less than ~30%.")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
