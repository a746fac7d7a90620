"""``routerlab collect``: run actors (LLM backends) on questions with gold answers and write a routing table.

Every option, the actor specs and the output directory are checked before any question is read or any
model loaded (one line, exit 2). Calls go through the on-disk call cache, so an interrupted run resumes
and a rerun asks nothing again; the table is written once, atomically, at the end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from routerlab.cli import app
from routerlab.cli._io import call_cache_kept, json_option, on_interrupt, print_json, seed_option
from routerlab.errors import UsageError

KIND_CHOICES = {"all": ("mc", "generated"), "mc": ("mc",), "generated": ("generated",), "short": ("generated",)}
"""--kind: ``mc`` questions have options, ``generated`` ones do not (``short``, the older name, is ``generated``)."""
GRADER_HELP = ("The grader of every question (NAME: mc, short, f1, number, math, code, coverage, judge:SPEC) or of "
               "some datasets (DATASET=NAME,...); repeatable. Default: the question's metric metadata (LLMRouter's "
               "em_mc, f1_score, GSM8K, MATH, code_eval, commongen_coverage), else mc with options, short without.")
ACTORS_HELP = ("Actors as NAME=KIND:MODEL[,key=value...], comma-separated: NAME=local:smollm2-135m, "
               "NAME=local:qwen2.5-coder-1.5b, NAME=local:/path/model.gguf, NAME=openai:MODEL@BASE_URL,key_env=VAR; "
               "options input_price= and output_price= (USD per 1M tokens) give the cost; a local model's threads=N "
               "sets its torch threads (default: the cores other processes leave free; 0: torch's own).")


@app.command("collect")
@on_interrupt(lambda a: call_cache_kept(a["cache_dir"], "answers", "the table not written"))
def collect_cmd(
    questions: Annotated[Path | None, typer.Argument(
        help="A table directory whose queries carry gold answers (MMLU-Pro or LLMRouter imports) or a .jsonl "
             "file of {id, question, choices?, answer, dataset?}; with --agent optional (default: the task set's "
             "tasks in the shared data).", show_default=False)] = None,
    actors: Annotated[str, typer.Option("--actors", "-a", help=ACTORS_HELP)] = "",
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Directory to write the routing table to.", show_default=False)] = None,
    limit: Annotated[int | None, typer.Option(
        min=1, help="Ask a seeded sample of this many questions, stratified by dataset.")] = None,
    seed: Annotated[int, seed_option("Seed of the question sample.")] = 0,
    mode: Annotated[str, typer.Option(
        help="Multiple choice by option-letter logits (logits, local models only), by generated text "
             "(generate), or logits where the backend gives them (auto).")] = "auto",
    kind: Annotated[str, typer.Option(
        help="Which questions: mc (with options), generated (without options; 'short' is the older name) or "
             "all.")] = "all",
    grader: Annotated[list[str] | None, typer.Option(
        "--grader", metavar="NAME|DATASET=NAME,...", help=GRADER_HELP)] = None,
    max_tokens: Annotated[int | None, typer.Option(
        min=1, max=32768, help="Most tokens of a generated answer (default 256; with --agent, of one step: the "
                               "task set's cap, 96 for arithmetic, 160 for code).", show_default=False)] = None,
    batch_size: Annotated[int, typer.Option(min=1, max=4096, help="Questions generated in one batch.")] = 8,
    logits_batch_size: Annotated[int, typer.Option(
        min=1, max=4096, help="Questions scored by option-letter logits in one forward pass (1: on a CPU a padded "
                              "batch is slower, and in bf16 it changes the logits).")] = 1,
    timing_probes: Annotated[int, typer.Option(
        min=0, max=1024, help="Short greedy replies (16 tokens) that time TTFT/ITL of an actor whose answers all "
                              "came from logits.")] = 8,
    cache_dir: Annotated[Path | None, typer.Option(
        help="Call cache directory (default: $ROUTERLAB_CACHE_DIR/llm or ~/.cache/routerlab/llm).")] = None,
    force: Annotated[bool, typer.Option(
        "--force", metavar="", help="Replace a table already in the output directory.")] = False,
    as_json: Annotated[bool, json_option("Print the run's summary as one JSON object.")] = False,
    variants: Annotated[Path | None, typer.Option(
        "--variants", help="A variants file (routerlab perturb): ask each variant instead of the questions, i.e. "
                           "its original question with the text replaced; query ids become QID#LEVEL#J and "
                           "--limit samples variants.")] = None,
    agent: Annotated[str | None, typer.Option(
        "--agent", metavar="TASKSET", help="Run every actor as a tool-using agent on a task set's tasks "
                                           "(arithmetic, code) and write a table with episodes.")] = None,
    max_steps: Annotated[int | None, typer.Option(
        min=1, max=64, help="With --agent: most model steps of an episode (default 6); an episode that reaches it "
                            "without a final answer scores 0.", show_default=False)] = None,
    data: Annotated[Path | None, typer.Option(
        "--data", metavar="DIR", help="With --agent and no TABLE: the shared data directory (default: "
                                      "$ROUTERLAB_SHARED_DATA, else ../shared/data).", show_default=False)] = None,
) -> None:
    """Run every actor on every question, grade the answers and write a routing table (score, tokens,
    latency, cost; option-letter logits as query metadata).

    With --agent TASKSET every actor works through the task set's tasks (arithmetic: GSM8K with a calculator; code:
    MBPP with a Python sandbox) as a tool-using agent, and the table holds its episodes: every model and tool step,
    measured and cached (docs/agentic.md).

    With --variants the questions asked are perturbed variants of the source's questions (SPEC 3): the table's
    query metadata gains variant_of, level and variant, and feeds routerlab robustness --outcomes."""
    from routerlab.cli.data_cmds import _check_output
    from routerlab.llm.base import Decoding, parse_actor_list
    from routerlab.llm.collect import MODES, build_graders, check_mode, collect
    from routerlab.llm.graders import parse_grader_choice
    from routerlab.llm.questions import load_questions

    if not actors:
        raise UsageError("--actors is required: NAME=KIND:MODEL[,...]")
    if output is None:
        raise UsageError("-o/--output is required: the directory to write the table to")
    if agent is not None:
        _collect_agent(questions, agent, actors, output, limit=limit, seed=seed, max_steps=max_steps,
                       max_tokens=max_tokens, batch_size=batch_size, cache_dir=cache_dir, force=force,
                       as_json=as_json, data=data,
                       others={"--grader": grader, "--variants": variants, "--mode": mode != "auto" or None,
                               "--kind": kind != "all" or None, "--logits-batch-size": logits_batch_size != 1 or None,
                               "--timing-probes": timing_probes != 8 or None})
        return
    for flag, value in (("--max-steps", max_steps), ("--data", data)):
        if value is not None:
            raise UsageError(f"{flag} applies only with --agent TASKSET")
    if questions is None:
        raise UsageError("collect needs a TABLE (or .jsonl file) of questions, or --agent TASKSET")
    _check_output(output, force)
    if mode not in MODES:
        raise UsageError(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    if kind not in KIND_CHOICES:
        raise UsageError(f"--kind must be one of {', '.join(KIND_CHOICES)}, got {kind!r}")
    if cache_dir is not None and cache_dir.exists() and not cache_dir.is_dir():
        raise UsageError(f"--cache-dir {cache_dir}: is a file, not a directory")
    specs = parse_actor_list(actors)
    check_mode(mode, specs)
    choice = parse_grader_choice(grader)
    decoding = Decoding(max_tokens=256 if max_tokens is None else max_tokens)
    if variants is not None:
        qs = load_questions(questions, kinds=KIND_CHOICES[kind], graders=choice)
        asked, provenance, query_meta = _variant_questions(qs, variants, limit, seed, kind)
    else:
        qs = load_questions(questions, limit=limit, seed=seed, kinds=KIND_CHOICES[kind], graders=choice)
        if not qs:
            raise UsageError(f"{questions}: no question of kind {kind} to ask")
        asked, query_meta = list(qs), None
        provenance = {"source": str(questions), "limit": limit, "seed": seed, "kind": kind,
                      "n_available": qs.n_available, "skipped": dict(qs.skipped)}
    provenance["grader_choice"] = choice.describe()
    graders = build_graders(asked, cache_dir)  # every grader built (a judge's spec checked) before a model loads
    try:
        table = collect(asked, specs, graders=graders, mode=mode, decoding=decoding, cache_dir=cache_dir,
                        batch_size=batch_size, logits_batch_size=logits_batch_size, timing_probes=timing_probes,
                        name=output.name or "collected", provenance=provenance, query_meta=query_meta)
    finally:
        for g in graders.values():
            g.close()
    table.save(output)
    summary = _summary(table)
    if as_json:
        print_json({**table.meta["collect"], "output": str(output), "content_hash": table.content_hash,
                    "actor_summary": summary})
    else:
        skipped = sum(qs.skipped.values())
        available = (f"{qs.n_available} available in {questions}"
                     + (f", {skipped} skipped: " + "; ".join(f"{k} {v}" for k, v in qs.skipped.items()) if skipped
                        else ""))
        typer.echo(f"asked {table.n_queries} questions ({available})" if variants is None else
                   f"asked {table.n_queries} variants of {provenance['n_originals']} questions "
                   f"({provenance['n_variants_available']} in {variants}; questions: {available})")
        width = max(len(a) for a in summary)
        for actor, s in summary.items():
            rate = ("model - q/s (every answer from the cache)" if s["questions_per_s"] is None
                    else f"model {s['questions_per_s']:.2f} q/s")
            typer.echo(f"  {actor:<{width}}  accuracy {s['accuracy']:.3f}  {s['mode']:8}  {rate}  "
                       f"TTFT {_num(s['ttft_ms'], '.0f')} ms  ITL {_num(s['itl_ms'], '.1f')} ms  "
                       f"calls {s['fresh_calls']} new, {s['cached_calls']} cached")
        graded = table.meta["collect"]["graders"]
        if set(graded) - {"mc", "short"}:  # a run of mc and short answers only prints what it printed before
            typer.echo("  graded: " + "; ".join(f"{g} {v['questions']} answers in {v['seconds']:.2f} s"
                                               for g, v in graded.items()))
    from routerlab.reports.files import say_written

    say_written([output], to_stderr=as_json)


def _collect_agent(questions: Path | None, agent: str, actors: str, output: Path, *, limit: int | None, seed: int,
                   max_steps: int | None, max_tokens: int | None, batch_size: int, cache_dir: Path | None,
                   force: bool, as_json: bool, data: Path | None, others: dict[str, Any]) -> None:
    """``collect --agent TASKSET``: every actor runs the task set's tasks (the shared data's, or TABLE's questions)
    as a tool-using agent; the table with its episodes is written to ``output``."""
    import numpy as np

    from routerlab.cli.data_cmds import _check_output
    from routerlab.llm.agent.collect import collect_episodes
    from routerlab.llm.agent.tasksets import data_dir, get_taskset
    from routerlab.llm.base import parse_actor_list
    from routerlab.llm.questions import load_questions, stratified_order

    taskset = get_taskset(agent, max_tokens=max_tokens)
    for flag, value in others.items():
        if value:
            raise UsageError(f"{flag} does not apply with --agent (the task set {agent!r} decides how tasks are "
                             "asked and graded)")
    if questions is not None and data is not None:
        raise UsageError("--data: give either a TABLE of questions or --data DIR, not both")
    _check_output(output, force)
    if cache_dir is not None and cache_dir.exists() and not cache_dir.is_dir():
        raise UsageError(f"--cache-dir {cache_dir}: is a file, not a directory")
    specs = parse_actor_list(actors)
    if questions is not None:
        qs = load_questions(questions, kinds=("generated",), graders=taskset.grader)
        tasks = taskset.from_questions(list(qs))
        source = str(questions)
    else:
        root = data_dir(data)
        tasks = taskset.load(root)
        source = str(root)
    if not tasks:
        raise UsageError(f"{source}: no task of task set {agent!r} there")
    n_available = len(tasks)
    if limit is not None and limit < len(tasks):
        chosen = sorted(stratified_order([t.split for t in tasks], seed)[:limit].tolist())
        tasks = [tasks[i] for i in chosen]
    provenance = {"source": source, "limit": limit, "seed": seed, "n_available": n_available}
    table = collect_episodes(tasks, specs, taskset, max_steps=6 if max_steps is None else max_steps,
                             batch_size=batch_size, cache_dir=cache_dir, name=output.name or "episodes",
                             provenance=provenance)
    table.save(output)
    runs = table.meta["collect"]["actors"]
    if as_json:
        print_json({**table.meta["collect"], "output": str(output), "content_hash": table.content_hash})
    else:
        summ = table.episodes.summary() if table.episodes is not None else None
        typer.echo(f"ran {table.n_queries} {agent} tasks ({n_available} available in {source}) as episodes of at "
                   f"most {table.meta['collect']['max_steps']} model steps")
        width = max(len(a) for a in runs)
        for actor, run in runs.items():
            steps = ""
            if summ is not None:
                mine = summ.n_steps[summ.actor == actor]
                steps = f"  median steps {float(np.median(mine)):g}" if mine.size else ""
            typer.echo(f"  {actor:<{width}}  accuracy {run['accuracy']:.3f}  final answers {run['final_answers']}/"
                       f"{run['episodes']}{steps}  model calls {run['fresh_calls']} new, {run['cached_calls']} "
                       f"cached  tool calls {run['fresh_tool_calls']} new, {run['cached_tool_calls']} cached")
    from routerlab.reports.files import say_written

    say_written([output], to_stderr=as_json)


def _variant_questions(qs: Any, variants: Path, limit: int | None, seed: int, kind: str
                       ) -> tuple[list[Any], dict[str, Any], dict[str, list[Any]]]:
    """``--variants``: the variants of the file as questions (their originals found in ``qs`` by query id), a
    seeded sample of ``limit`` of them stratified by level (in file order), the provenance and the variant
    metadata columns (``variant_of``, ``level``, ``variant``)."""
    from routerlab.data._files import iter_jsonl
    from routerlab.llm.questions import stratified_order, variant_questions
    from routerlab.perturb.files import read_variants

    pset = read_variants(variants)
    if variants.suffix.lower() == ".json":  # a mapping: errors count variants in file order
        lines = list(range(1, len(pset.variants) + 1))
    else:
        lines = [lineno for lineno, _ in iter_jsonl(variants)]  # read_variants keeps every line, in file order
    chosen = list(range(len(pset.variants)))
    if limit is not None and limit < len(chosen):
        chosen = sorted(stratified_order([v.level for v in pset.variants], seed)[:limit].tolist())
    picked = [pset.variants[k] for k in chosen]
    asked = variant_questions(qs, picked, source=str(variants), lines=[lines[k] for k in chosen])
    provenance: dict[str, Any] = {
        "source": str(qs.source), "variants": str(variants), "limit": limit, "seed": seed, "kind": kind,
        "n_available": qs.n_available, "skipped": dict(qs.skipped), "n_variants_available": len(pset.variants),
        "n_originals": len({v.query_id for v in picked}), "levels": sorted({v.level for v in picked}),
    }
    meta: dict[str, list[Any]] = {"variant_of": [v.query_id for v in picked], "level": [v.level for v in picked],
            "variant": [v.variant for v in picked]}
    return asked, provenance, meta


def _summary(table: Any) -> dict[str, dict[str, Any]]:
    """Per actor: accuracy, mode, the model's own questions/s in this run (fresh calls over the model's time;
    None when the cache answered everything), TTFT/ITL (ms, NaN -> None) and the call counts."""
    import math

    out: dict[str, dict[str, Any]] = {}
    runs = table.meta["collect"]["actors"]
    for j, actor in enumerate(table.actor_names):
        run = runs[actor]
        ttft, itl = float(table.actors.ttft_ms[j]), float(table.actors.itl_ms[j])
        out[actor] = {
            "accuracy": run["accuracy"], "mode": run["mode"], "questions_per_s": run["questions_per_s"],
            "ttft_ms": None if math.isnan(ttft) else ttft, "itl_ms": None if math.isnan(itl) else itl,
            "fresh_calls": run["fresh_calls"], "cached_calls": run["cached_calls"],
        }
    return out


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)
