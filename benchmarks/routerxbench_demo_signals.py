"""Synthetic small-model signals for the embedded demo, so examples/replicate/routerxbench.toml's [quick] section can
run every two-model router in seconds without loading a model (CI plumbing, not a measurement).

    python benchmarks/routerxbench_demo_signals.py -o tables/routerxbench-demo-signals.npz
    routerlab run examples/replicate/routerxbench.toml --quick --table local=demo

The demo has no model behind its small actor (tiny-2b), so nothing here is a real hidden state: each signal is its
outcome on the query plus seeded noise (hidden states carry it more in deeper layers, option logits and the self-ask
score weakly, sampled answers agree more where it is right). The numbers a quick run prints from them say that the
pipeline runs end to end, never how a router does on a real model.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

QUICK_QUERIES = 480
"""The [quick] section's n_queries: the demo table the quick run builds (demo(480))."""
SMALL = "tiny-2b"
LAYERS, DIM = 5, 12


def write_demo_signals(path: Path, n_queries: int = QUICK_QUERIES, seed: int = 0) -> Path:
    """An ``.npz`` of ``ids``, ``hidden`` (n, 5, 12) float16, ``option_logits`` (n, 4), ``self_ask`` (n,) and
    ``samples`` (n, 5) for every query of ``demo(n_queries)``, informative about tiny-2b's outcome."""
    from routerlab.datasets import demo

    table = demo(n_queries)
    right = np.nan_to_num(table.score[:, table.actor_names.index(SMALL)]) >= 0.5
    sign = np.where(right, 1.0, -1.0)
    rng = np.random.default_rng(seed)
    n = table.n_queries
    hidden = rng.normal(0.0, 1.0, (n, LAYERS, DIM))
    hidden[:, :, 0] += sign[:, None] * np.linspace(0.1, 1.0, LAYERS)[None, :]  # deeper layers carry more
    logits = rng.normal(0.0, 1.0, (n, 4))
    logits[:, 0] += np.where(right, 1.0, 0.0)
    self_ask = 0.5 * sign + rng.normal(0.0, 1.0, n)
    samples = np.where(right[:, None], 0, rng.integers(0, 4, (n, 5)))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, ids=table.queries.ids.astype(str), hidden=hidden.astype(np.float16),
             option_logits=logits.astype(np.float32), self_ask=self_ask.astype(np.float32),
             samples=samples.astype(np.int32))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, default=Path("tables/routerxbench-demo-signals.npz"))
    ap.add_argument("--n-queries", type=int, default=QUICK_QUERIES)
    args = ap.parse_args()
    print(write_demo_signals(args.out, args.n_queries))


if __name__ == "__main__":
    main()
