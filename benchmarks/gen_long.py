"""Synthetic RouterEval-sized long-format Parquet: seeded, written row group by row group.

Run: ``python benchmarks/gen_long.py OUT.parquet [--queries 36000 --actors 8500 --seed 0 --order actor]``.

Each actor has a skill and each query a difficulty (a 2-parameter item-response model), so scores are
0/1 with realistic per-actor means; ``--missing`` of the cells are left out (no row). Rows come actor
by actor (``--order actor``, as per-model result files are concatenated: the scatter into the matrix
is strided) or query by query (``--order query``). Peak memory is one block of rows, never the table.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

DATASETS = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k", "ifeval", "bbh", "gpqa", "musr",
            "math", "mmlu_pro")
BLOCK_ROWS = 1 << 20


def query_ids(n: int) -> list[str]:
    return [f"q{i:06d}" for i in range(n)]


def actor_names(m: int) -> list[str]:
    return [f"org{j % 97:02d}/model-{j:05d}" for j in range(m)]


def generate(
    out: Path, *, queries: int, actors: int, seed: int = 0, order: str = "actor", missing: float = 0.02
) -> dict[str, float]:
    """Write the file; returns rows written, bytes and seconds."""
    if order not in ("actor", "query"):
        raise ValueError(f"order must be 'actor' or 'query', got {order!r}")
    rng = np.random.default_rng(seed)
    skill = rng.normal(0.0, 1.0, actors)
    difficulty = rng.normal(0.0, 1.2, queries)
    qids = pa.array(query_ids(queries), type=pa.string())
    names = pa.array(actor_names(actors), type=pa.string())
    q_dataset = np.arange(queries) * len(DATASETS) // queries  # contiguous benchmark blocks
    datasets = pa.array(DATASETS, type=pa.string())
    q_split = np.where(rng.random(queries) < 0.8, 0, 1).astype(np.int32)
    splits = pa.array(["train", "test"], type=pa.string())
    schema = pa.schema([
        ("query_id", pa.dictionary(pa.int32(), pa.string())),
        ("actor", pa.dictionary(pa.int32(), pa.string())),
        ("dataset", pa.dictionary(pa.int32(), pa.string())),
        ("split", pa.dictionary(pa.int32(), pa.string())),
        ("score", pa.float32()),
    ])
    outer, inner = (actors, queries) if order == "actor" else (queries, actors)
    step = max(1, BLOCK_ROWS // inner)
    rows = 0
    start = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    with pq.ParquetWriter(str(tmp), schema, compression="zstd", compression_level=1) as writer:
        for lo in range(0, outer, step):
            hi = min(lo + step, outer)
            o = np.repeat(np.arange(lo, hi, dtype=np.int32), inner)
            i = np.tile(np.arange(inner, dtype=np.int32), hi - lo)
            q, a = (i, o) if order == "actor" else (o, i)
            keep = rng.random(q.size) >= missing
            q, a = q[keep], a[keep]
            p = 1.0 / (1.0 + np.exp(-(skill[a] - difficulty[q])))
            score = (rng.random(q.size) < p).astype(np.float32)
            batch = pa.table({
                "query_id": pa.DictionaryArray.from_arrays(pa.array(q), qids),
                "actor": pa.DictionaryArray.from_arrays(pa.array(a), names),
                "dataset": pa.DictionaryArray.from_arrays(pa.array(q_dataset[q].astype(np.int32)), datasets),
                "split": pa.DictionaryArray.from_arrays(pa.array(q_split[q]), splits),
                "score": pa.array(score),
            }, schema=schema)
            writer.write_table(batch, row_group_size=batch.num_rows)
            rows += batch.num_rows
    tmp.replace(out)
    return {"rows": rows, "bytes": out.stat().st_size, "seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--queries", type=int, default=36000)
    parser.add_argument("--actors", type=int, default=8500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--order", choices=("actor", "query"), default="actor")
    parser.add_argument("--missing", type=float, default=0.02)
    args = parser.parse_args()
    info = generate(args.out, queries=args.queries, actors=args.actors, seed=args.seed, order=args.order,
                    missing=args.missing)
    print(f"wrote {args.out}: {info['rows']:,.0f} rows, {info['bytes'] / 1e6:.1f} MB, {info['seconds']:.1f} s")


if __name__ == "__main__":
    main()
