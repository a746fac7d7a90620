"""Collect agentic episodes: every actor runs every task of a task set as a tool-using agent
(:mod:`routerlab.llm.agent.loop`), and the episodes become a routing table with steps
(:func:`routerlab.data.episodes.episode_table`).

Each actor is loaded once (through the call cache), runs all its episodes in lockstep batches and is closed; tool
calls go through the tool cache under ``<cache>/tools``. The table's cells are derived from the steps (score = the
last step's, latency = model plus tool seconds, tokens summed, cost from the actor's prices when given). Query
metadata, all hidden from routers: ``gold`` (the reference as the source wrote it), the task set's own columns
(``reference_steps``, ``n_tests``), and per actor ``output.<actor>`` (the final answer, "" without one),
``stop.<actor>`` (``final answer``, ``unmarked answer`` or ``step limit``), ``detail.<actor>`` (the grader's reason) and
``transcript.<actor>`` (the chat as JSON). ``meta["collect"]`` records the task set, its tools, the step limit and
token cap, the seed, the prompts' hash, the routerlab version and per actor the calls fresh and cached and the
model's own seconds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from routerlab.errors import UsageError
from routerlab.llm.agent.loop import OBSERVATION, EpisodeRun, RunStats, run_episodes, step_medians
from routerlab.llm.agent.tasksets import Task, TaskSet
from routerlab.llm.agent.tools import ToolRunner, get_tool
from routerlab.llm.base import Backend, BackendSpec, Decoding

if TYPE_CHECKING:
    from routerlab.data.table import RoutingTable

__all__ = ["collect_episodes", "tool_cache_dir"]


def tool_cache_dir(cache_dir: str | Path | None) -> Path:
    """Where tool calls are cached: ``<llm cache>/tools``."""
    from routerlab.llm.cache import default_cache_dir

    return (Path(cache_dir) if cache_dir is not None else default_cache_dir()) / "tools"


def collect_episodes(
    tasks: Sequence[Task],
    actors: Sequence[tuple[str, BackendSpec | Backend]],
    taskset: TaskSet,
    *,
    max_steps: int = 6,
    batch_size: int = 8,
    cache_dir: str | Path | None = None,
    name: str = "episodes",
    provenance: Mapping[str, Any] | None = None,
    progress: bool | None = None,
) -> RoutingTable:
    """Run every actor on every task as an agent and return the table with its episodes (module docstring).
    ``actors`` pair a name with a spec (loaded here, closed after its episodes) or a loaded backend (used as is,
    left open)."""
    from routerlab._version import __version__
    from routerlab.data.episodes import Episodes, episode_table
    from routerlab.data.table import Actors, Queries
    from routerlab.llm.graders import get_grader

    if not tasks:
        raise UsageError("no tasks to run")
    if not actors:
        raise UsageError("no actors: give at least one NAME=KIND:MODEL")
    names = [a for a, _ in actors]
    if len(set(names)) != len(names):
        raise UsageError(f"actor names must be distinct, got {names}")
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise UsageError("task ids must be distinct")
    decoding = Decoding(max_tokens=taskset.max_tokens, stop=(OBSERVATION,))
    runner = ToolRunner({t: get_tool(t) for t in taskset.tools}, tool_cache_dir(cache_dir))
    grader = get_grader(taskset.grader)
    runs: dict[str, list[EpisodeRun]] = {}
    stats: dict[str, RunStats] = {}
    params: list[float] = []
    specs: list[str] = []
    model_ids: list[str] = []
    try:
        for actor_name, actor in actors:
            fresh_tools, cached_tools = runner.fresh, runner.cached
            backend = actor if isinstance(actor, Backend) else _load(actor_name, actor, cache_dir, progress)
            try:
                runs[actor_name], stats[actor_name] = run_episodes(
                    backend, actor_name, tasks, taskset, runner, grader, max_steps=max_steps,
                    batch_size=batch_size, decoding=decoding, progress=progress)
            finally:
                if not isinstance(actor, Backend):
                    backend.close()
            st = stats[actor_name]
            st.fresh_tools, st.cached_tools = runner.fresh - fresh_tools, runner.cached - cached_tools
            spec = backend.spec
            size = spec.params_b if spec.params_b is not None else getattr(backend, "params_b", None)
            params.append(math.nan if size is None else float(size))
            specs.append(spec.describe())
            model_ids.append(backend.model_id)
    finally:
        grader.close()

    steps = [row for actor_name in names for e in runs[actor_name] for row in e.steps]
    episodes = Episodes.from_records(steps)
    extra: dict[str, list[Any]] = {"gold": [t.reference for t in tasks]}
    for key in sorted({k for t in tasks for k in t.meta}):
        extra[key] = [t.meta.get(key, "") for t in tasks]
    if any(t.metric for t in tasks):
        extra["metric"] = [t.metric for t in tasks]
    for actor_name in names:
        eps = runs[actor_name]
        extra[f"output.{actor_name}"] = [e.final or "" for e in eps]
        extra[f"stop.{actor_name}"] = [e.stop for e in eps]
        extra[f"detail.{actor_name}"] = [e.grade.detail if e.grade else "" for e in eps]
        extra[f"transcript.{actor_name}"] = [json.dumps(e.transcript(), ensure_ascii=False) for e in eps]
    queries = Queries.create(ids, text=[t.text for t in tasks], dataset=[t.dataset for t in tasks],
                             split=[t.split for t in tasks], extra=extra, visible=())
    medians = [step_medians(stats[a]) for a in names]
    actor_table = Actors.create(
        names, params_b=params, ttft_ms=[m["ttft_ms"] for m in medians], itl_ms=[m["itl_ms"] for m in medians],
        input_price=[_price(a, "input_price") for _, a in actors],
        output_price=[_price(a, "output_price") for _, a in actors],
        extra={"spec": np.array(specs, dtype=object), "mode": np.array(["agent"] * len(names), dtype=object),
               "model_id": np.array(model_ids, dtype=object)})
    per_actor = {}
    for actor_name in names:
        st, eps = stats[actor_name], runs[actor_name]
        per_actor[actor_name] = {
            "accuracy": float(np.mean([e.grade.score if e.grade else 0.0 for e in eps])),
            "episodes": len(eps),
            "final_answers": sum(e.final is not None for e in eps),
            "step_limit": sum(e.stop == "step limit" for e in eps),
            "model_calls": sum(e.model_calls for e in eps),
            "tool_calls": sum(e.tool_calls for e in eps),
            "invalid_actions": sum(e.invalid for e in eps),
            "fresh_calls": st.fresh_calls, "cached_calls": st.cached_calls,
            "fresh_tool_calls": st.fresh_tools, "cached_tool_calls": st.cached_tools,
            "rounds": st.rounds, "wall_s": round(st.wall_s, 3), "model_s": round(st.model_s, 3),
            "spec": specs[names.index(actor_name)],
        }
    meta_collect = {
        **dict(provenance or {}),
        "agent": taskset.name,
        "tools": list(taskset.tools),
        "grader": taskset.grader,
        "max_steps": max_steps,
        "batch_size": batch_size,
        "n_tasks": len(tasks),
        "decoding": decoding.as_dict(),
        "prompts_sha256": taskset.prompts_hash(),
        "actors": per_actor,
        "routerlab_version": __version__,
    }
    return episode_table(episodes, queries=queries, actors=actor_table, name=name,
                         meta={"format": "collect", "source": str((provenance or {}).get("source", "")),
                               "collect": meta_collect})


def _load(name: str, spec: BackendSpec, cache_dir: str | Path | None, progress: bool | None) -> Backend:
    from routerlab.llm.base import load_backend
    from routerlab.progress import task

    with task(f"collect: loading {name} ({spec.describe()})", enabled=progress):
        return load_backend(spec, cache_dir=None if cache_dir is None else Path(cache_dir))


def _price(actor: BackendSpec | Backend, key: str) -> float:
    spec = actor.spec if isinstance(actor, Backend) else actor
    value = spec.options.get(key)
    return math.nan if value is None else float(value)
