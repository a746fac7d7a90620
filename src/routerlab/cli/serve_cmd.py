"""``routerlab serve``: an OpenAI-compatible server in front of a trained router, logging every routed request.

Everything is checked before any model is loaded or router trained (one line, exit 2): the router spec (a bound
that reads test outcomes cannot serve), the actor specs, the host (loopback unless ``--allow-remote``), the port
(bound at once, so a port in use is reported here), the log file (a .csv path that can be written; an existing
log must have the request-log header), the table and that its actors are exactly the served ones.
"""

from __future__ import annotations

import contextlib
import ipaddress
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from routerlab._words import plural
from routerlab.cli import app
from routerlab.cli._io import open_table, seed_option
from routerlab.cli.evaluate_cmd import ENCODER_HELP
from routerlab.errors import UsageError

ACTORS_HELP = ("The served actors, NAME=KIND:MODEL[,key=value...] separated by commas, e.g. "
               "small=local:smollm2-135m,big=openai:MODEL@URL (a URL such as http://host/v1; add ,key_env=KEY for "
               "a key); the names must be exactly the table's actors.")


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_host(host: str, allow_remote: bool) -> None:
    """Loopback hosts only, unless ``--allow-remote``: the server has no authentication, and every request
    spends the backends' compute (and an API key's credit)."""
    if not host:
        raise UsageError("--host is empty; give an address such as 127.0.0.1")
    if not is_loopback(host) and not allow_remote:
        raise UsageError(f"--host {host} accepts connections from other machines, and the server has no "
                         "authentication; add --allow-remote to do so on purpose")


@app.command("serve")
def serve_cmd(
    router_spec: Annotated[str, typer.Argument(help="The router, e.g. knn:k=10 or linucb (see 'routerlab routers').",
                                               metavar="ROUTER_SPEC")],
    actors: Annotated[str, typer.Option("--actors", help=ACTORS_HELP)],
    table_dir: Annotated[Path | None, typer.Option(
        "--table", help="The table the router trains on (default: the embedded demo benchmark).")] = None,
    host: Annotated[str, typer.Option(help="Address to listen on (loopback unless --allow-remote).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on (0: any free port).")] = 8000,
    log: Annotated[Path | None, typer.Option(
        "--log", help="Request log to append to (CSV, one row per answered request with its propensity).")] = None,
    explore: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="Exploration rate e: the policy is (1-e)*router + e*uniform (0: greedy).")] = 0.0,
    split: Annotated[str, typer.Option(
        help="Which queries of the table train the router: given, all, random[:F] or ood:DS1,DS2.")] = "given",
    encoder: Annotated[str, typer.Option(help=ENCODER_HELP)] = "tfidf",
    seed: Annotated[int, seed_option("Seed for the split, the router and the serving policy's draws.")] = 0,
    allow_remote: Annotated[bool, typer.Option(
        "--allow-remote", metavar="",
        help="Allow a --host that other machines can reach (the server has no authentication).")] = False,
    max_body: Annotated[int, typer.Option(
        "--max-body", min=1024, max=1 << 30, help="Largest request body in bytes (larger: HTTP 413).")] = 1 << 20,
    no_cache: Annotated[bool, typer.Option(
        "--no-cache", metavar="",
        help="Call the backends every time (default: identical requests hit the llm call cache).")] = False,
    request_timeout: Annotated[float, typer.Option(
        "--request-timeout", metavar="SECONDS",
        help="Deadline of each request, streams included: past it the generation stops and the answer is a 504 "
             "(or a stream's error event).")] = 300.0,
    workers: Annotated[int | None, typer.Option(
        "--workers", metavar="N",
        help="Calls each actor runs at once (default: 1 for a local model, an openai actor's concurrency "
             "option, else 4).")] = None,
    queue: Annotated[int, typer.Option(
        "--queue", metavar="N",
        help="Requests that may wait for each actor's workers; one more is a 429 with Retry-After.")] = 64,
    trip_after: Annotated[int, typer.Option(
        "--trip-after", metavar="N",
        help="Refuse an actor at once (503, Retry-After) for --cooldown seconds after its backend failed N calls in "
             "a row, calls past their --request-timeout included (0: never).")] = 5,
    cooldown: Annotated[float, typer.Option(
        "--cooldown", metavar="SECONDS",
        help="How long a failing actor is refused before one trial call (doubled after a failed trial).")] = 10.0,
    learn: Annotated[int | None, typer.Option(
        "--learn", metavar="N",
        help="Refit an exploring router (linucb, thompson, eps-greedy, barp) in the background after every N "
             "feedback events (POST /v1/feedback); needs --log.")] = None,
    fsync: Annotated[str, typer.Option(
        "--fsync", metavar="MODE",
        help="How the log reaches the disk: per-request (one fsync per row) or batch (the rows written "
        "while an fsync runs share the next: group commit); either way a request is answered once its row is on "
        "disk.")] = "per-request",
    fsync_interval_ms: Annotated[float, typer.Option(
        "--fsync-interval-ms", metavar="MS",
        help="With --fsync batch, a commit also waits until MS have passed since the "
        "previous one, 0 <= MS <= 1000 (0: no wait, the rows written during one fsync share the next).")] = 0.0,
    blas_threads: Annotated[int, typer.Option(
        "--blas-threads", metavar="N",
        help="BLAS threads of the serving process, set at startup whatever the environment "
        "says (1: a second thread per request's matrix product only doubles its CPU).")] = 1,
) -> None:
    """Answer /v1/chat/completions and /v1/models like an OpenAI server, routing each request (docs/serve.md)."""
    from importlib.util import find_spec

    from routerlab.llm.base import parse_actor_list
    from routerlab.protocols.ope import refuse_bounds
    from routerlab.routers import get_router
    from routerlab.serve.routing import check_actor_names, check_serving_encoder

    check_limits(request_timeout, workers, queue, trip_after, cooldown)
    missing = [m for m in ("fastapi", "uvicorn") if find_spec(m) is None]
    if missing:
        raise UsageError(f"routerlab serve needs {' and '.join(missing)}: pip install 'routerlab[llm]'")
    probe = get_router(router_spec, seed=seed)  # a bad name or option is one line, before anything is loaded
    refuse_bounds([router_spec])
    if learn is not None:
        from routerlab.serve.learn import check_learn

        check_learn(learn, probe)
        if log is None:
            raise UsageError("--learn needs --log: it learns from the feedback on logged requests")
    check_serving_encoder(encoder)
    from routerlab.serve.blas import check_blas_threads, limit_blas_threads
    from routerlab.serve.log import check_fsync

    check_fsync(fsync, fsync_interval_ms)
    check_blas_threads(blas_threads)
    specs = parse_actor_list(actors)
    check_host(host, allow_remote)
    if log is not None:
        _check_log_path(log)
    table = open_table(table_dir)
    check_actor_names(table, [name for name, _ in specs])

    from routerlab.llm.base import load_backend
    from routerlab.serve.app import base_url, bind, create_app, make_server
    from routerlab.serve.feedback_store import FeedbackStore
    from routerlab.serve.learn import Learner
    from routerlab.serve.log import RequestLog
    from routerlab.serve.routing import RoutingService

    sock = bind(host, port)
    restore: Callable[[], None] = _nothing
    request_log = None
    store = None
    learner = None
    backends = {}
    try:
        if log is not None:
            request_log = RequestLog(log, fsync=fsync, fsync_interval_ms=fsync_interval_ms)
        store = FeedbackStore(request_log) if request_log is not None else None
        for name, spec in specs:
            typer.echo(f"routerlab: serve: loading actor {name} ({spec.describe()})", err=True)
            backends[name] = load_backend(spec, cache=not no_cache)
        service = RoutingService.train(router_spec, table, backends, encoder=encoder, split=split,
                                       explore=explore, seed=seed, log=request_log, trip_after=trip_after,
                                       cooldown_s=cooldown)
        limit_blas_threads(blas_threads)  # after training: every BLAS the routing path uses is loaded
        if learn is not None:
            from routerlab.protocols.ope import training_split

            learner = Learner(service, router_spec, training_split(table, split, seed).apply(table)[0], store,
                              learn, seed=seed)
        url = base_url(sock)
        where = f"; logging to {log}" if log is not None else ""
        typer.echo(f"routerlab: serving {router_spec} over {', '.join(service.actor_names)} at {url} "
                   f"(model 'routerlab' routes, an actor's name forces it; explore {explore:g}{where}); "
                   "Ctrl-C stops", err=True)
        typer.echo(url)
        sys.stdout.flush()
        app_ = create_app(service, max_body_bytes=max_body, request_timeout=request_timeout, workers=workers,
                          queue_size=queue, feedback=store)
        server = make_server(app_)
        # SIGINT/SIGTERM: requests in flight get a 503 (streams an error event), generations stop between tokens,
        # and run returns (a second signal skips the wait): stopping on purpose is this command's normal end, exit 0
        with contextlib.suppress(KeyboardInterrupt):
            server.run(sockets=[sock])
        # another Ctrl-C from here on ends the process at once, still exit 0; kept to the end of the process when a
        # signal stopped the server (it is ending: its teardown takes seconds with torch loaded)
        serving = app_.state.serving
        serving.flush_log()  # the aborted rows of the requests stopped in flight
        n = request_log.n_records if request_log is not None else None
        held = "" if n is None else f"; the log holds {plural(n, 'request')}"
        typer.echo(f"routerlab: serve: stopped{held}", err=True)
        put_back = _exit_on_signal()
        restore = put_back if server.signals == 0 else _nothing  # stopped by a signal: kept to the process's end
        serving.close(timeout=1.0)  # cancelled generations end; a hanging backend's worker ends with the process
    finally:
        if learner is not None:
            learner.close()
        if store is not None:
            store.close()
        for backend in backends.values():
            backend.close()
        if request_log is not None:
            request_log.close()
        sock.close()
        restore()


def _nothing() -> None:
    """Nothing to undo."""


def _exit_on_signal() -> Callable[[], None]:
    """After the server has stopped, SIGINT and SIGTERM end the process at once with exit 0 (the log's rows are
    whole in the file already: each is one write): a second Ctrl-C during the last steps (closing the backends
    and the log, and a process with torch loaded takes seconds to exit) must not raise KeyboardInterrupt nor
    die with 143. Returns the function that puts the previous handlers back (main thread only)."""
    import os
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return _nothing
    sigs = (signal.SIGINT, signal.SIGTERM)
    before = {sig: signal.signal(sig, lambda *_: os._exit(0)) for sig in sigs}

    def restore() -> None:
        for sig, handler in before.items():
            signal.signal(sig, handler)

    return restore


def check_limits(request_timeout: float, workers: int | None, queue: int, trip_after: int = 5,
                 cooldown: float = 10.0) -> None:
    """``--request-timeout`` a finite number of seconds > 0, ``--workers`` >= 1, ``--queue`` >= 0,
    ``--trip-after`` >= 0, ``--cooldown`` a finite number of seconds > 0."""
    import math

    if not math.isfinite(request_timeout) or request_timeout <= 0:
        raise UsageError(f"--request-timeout must be a finite number of seconds > 0, got {request_timeout:g}")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be an integer >= 1, got {workers}")
    if queue < 0:
        raise UsageError(f"--queue must be an integer >= 0, got {queue}")
    if trip_after < 0:
        raise UsageError(f"--trip-after must be an integer >= 0 (0: never), got {trip_after}")
    if not math.isfinite(cooldown) or cooldown <= 0:
        raise UsageError(f"--cooldown must be a finite number of seconds > 0, got {cooldown:g}")


def _check_log_path(path: Path) -> None:
    """A .csv path that can be written (the same checks as ``routerlab log -o``)."""
    from routerlab.cli.log_cmd import check_log_path

    if path.suffix.lower() != ".csv":
        raise UsageError(f"--log {path}: the request log is a CSV file; give a name ending in .csv")
    check_log_path(path, option="--log")
