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
    questions: Annotated[Path, typer.Argument(
        help="A table directory whose queries carry gold answers (MMLU-Pro or LLMRouter imports) or a .jsonl "
             "file of {id, question, choices?, answer, dataset?}.")],
    actors: Annotated[str, typer.Option("--actors", "-a", help=ACTORS_HELP)],
    output: Annotated[Path, typer.Option("-o", "--output", help="Directory to write the routing table to.")],
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
    max_tokens: Annotated[int, typer.Option(min=1, max=32768, help="Most tokens of a generated answer.")] = 256,
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
) -> None:
    """Run every actor on every question, grade the answers and write a routing table (score, tokens,
    latency, cost; option-letter logits as query metadata).

    With --variants the questions asked are perturbed variants of the source's questions (SPEC 3): the table's
    query metadata gains variant_of, level and variant, and feeds routerlab robustness --outcomes."""
    from routerlab.cli.data_cmds import _check_output
    from routerlab.llm.base import Decoding, parse_actor_list
    from routerlab.llm.collect import MODES, build_graders, check_mode, collect
    from routerlab.llm.graders import parse_grader_choice
    from routerlab.llm.questions import load_questions

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
    decoding = Decoding(max_tokens=max_tokens)
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
