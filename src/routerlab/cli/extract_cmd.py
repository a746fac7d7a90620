"""``routerlab extract``: a local model's own signals per multiple-choice question, for two-model routing (SPEC 6).

Per question the model reads the prompt ``routerlab collect`` asks once; kept are its mean-pooled hidden state
at every layer, its option-letter logits, the self-ask score and ``--samples`` sampled answers
(:mod:`routerlab.llm.extract`; docs/extract.md). Every option, the model spec, the output directory and the
question source are checked before the model is loaded (one line, exit 2). The output directory is resumable:
a rerun extracts only the questions not there yet. The option logits also go to the call cache
(``--cache-dir``, collect's default), so ``routerlab collect --mode logits`` on the same questions afterwards
asks the model nothing.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from routerlab._words import plural
from routerlab.cli import app
from routerlab.cli._io import json_option, on_interrupt, print_json, seed_option
from routerlab.errors import UsageError

MODEL_HELP = ("The local model as KIND:MODEL[,key=value...]: local:smollm2-135m,threads=1, local:qwen2.5-coder-1.5b, "
              "local:/path/model.gguf or a Hugging Face model directory (hidden states need a local model).")


@app.command("extract")
@on_interrupt(lambda a: signals_kept(a["output"], a["shard_size"]))
def extract_cmd(
    model: Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)],
    questions: Annotated[Path, typer.Option(
        "--questions", "-q",
        help="A table directory whose queries carry gold answers (MMLU-Pro or LLMRouter imports) or a .jsonl "
             "file of {id, question, choices, answer, dataset?}; only multiple-choice questions are extracted.")],
    output: Annotated[Path, typer.Option(
        "-o", "--output", help="Directory of the signals (created; an existing one is resumed).")],
    limit: Annotated[int | None, typer.Option(
        min=1, help="Extract a seeded sample of this many questions, stratified by dataset (as collect).")] = None,
    seed: Annotated[int, seed_option("Seed of the question sample and of the sampled answers.")] = 0,
    samples: Annotated[int, typer.Option(
        min=0, max=1000, help="Answers sampled per question (semantic-entropy router); 0: none.")] = 10,
    temperature: Annotated[float, typer.Option(help="Temperature of the sampled answers (> 0).")] = 1.0,
    no_self_ask: Annotated[bool, typer.Option(
        "--no-self-ask", metavar="", help="Skip the self-ask follow-up turn (saves its ~20 tokens per question).")
    ] = False,
    shard_size: Annotated[int, typer.Option(
        min=1, max=100_000, help="Questions per shard file (a killed run loses at most one shard's work).")] = 32,
    cache_dir: Annotated[Path | None, typer.Option(
        help="Call cache directory (default: $ROUTERLAB_CACHE_DIR/llm or ~/.cache/routerlab/llm, as collect).")
    ] = None,
    as_json: Annotated[bool, json_option("Print the run's summary as one JSON object.")] = False,
) -> None:
    """Extract a local model's hidden states (every layer, mean-pooled over the prompt), option-letter logits,
    self-ask score and sampled answers for each multiple-choice question into a resumable directory, the
    input of the two-model routers (routerlab two-model --features DIR)."""
    from routerlab.cli._io import check_output_dir
    from routerlab.llm.base import backend_class, parse_backend_spec
    from routerlab.llm.extract import ExtractSettings
    from routerlab.llm.questions import load_questions

    if not (math.isfinite(temperature) and temperature > 0):
        raise UsageError(f"--temperature must be a finite number > 0, got {temperature}")
    check_output_dir(output)
    if cache_dir is not None and cache_dir.exists() and not cache_dir.is_dir():
        raise UsageError(f"--cache-dir {cache_dir}: is a file, not a directory")
    spec = parse_backend_spec(model, option="--model")
    _check_local(spec.kind, backend_class(spec.kind), model)
    settings = ExtractSettings(samples=samples, temperature=temperature, self_ask=not no_self_ask, seed=seed)
    _check_signals_dir(output, settings)
    qs = load_questions(questions, limit=limit, seed=seed, kinds=("mc",))
    if not qs:
        raise UsageError(f"{questions}: no multiple-choice question to extract")
    report, manifest = _run(spec, qs, output, settings, shard_size, cache_dir)
    skipped = {**dict(qs.skipped), **report.skipped}
    record = {**report.as_dict(), "layers": manifest.get("layers", report.layers),
              "dim": manifest.get("dim", report.dim), "source": str(questions), "limit": limit, "seed": seed,
              "n_available": qs.n_available, "skipped": skipped, "settings": manifest.get("settings", {}),
              "spec": spec.describe()}
    if as_json:
        print_json(record)
    else:
        rate = record["questions_per_s"]
        typer.echo(f"{plural(len(qs), 'question')} ({qs.n_available} multiple-choice available in {questions}"
                   + (", skipped: " + "; ".join(f"{k} {v}" for k, v in skipped.items()) if skipped else "") + ")")
        typer.echo(f"  rows {record['rows']}  fresh {record['fresh']}  reused {record['reused']}  "
                   f"{'-' if rate is None else format(rate, '.2f')} questions/s  "
                   f"layers {record['layers']}  dim {record['dim']}")
    from routerlab.reports.files import say_written

    say_written([output], to_stderr=as_json)


def signals_kept(output: Path, shard_size: int) -> str:
    """The Ctrl-C line: how many questions' signals the directory holds now (shards are written whole, every
    ``shard_size`` questions), and that the same command goes on from there."""
    from routerlab.llm.extract import stored_ids

    n = len(stored_ids(output)) if output.is_dir() else 0
    return (f"{output} holds the signals of {n} question{'' if n == 1 else 's'} (a shard is written every "
            f"{shard_size}); rerun the same command to resume")


def _check_signals_dir(output: Path, settings: Any) -> None:
    """-o is new, empty, or a signals directory of these settings (an interrupted first run has shards and no
    manifest yet); a directory holding anything else is refused rather than filled with shards."""
    from routerlab.llm.extract import MANIFEST, SHARDS, check_directory

    if output.is_dir():
        other = sorted(p.name for p in output.iterdir() if p.name not in (MANIFEST, SHARDS))
        if other:
            raise UsageError(f"-o {output}: holds other files ({', '.join(other[:3])}"
                             f"{', ...' if len(other) > 3 else ''}); give a new directory or a signals directory")
    check_directory(output, settings)


def _check_local(kind: str, cls: type, text: str) -> None:
    """Hidden states come only from a model loaded here (the local backend or a subclass of it)."""
    from routerlab.llm.local import LocalBackend

    if not issubclass(cls, LocalBackend):
        raise UsageError(f"--model {text!r}: extract reads hidden states, which only a local model gives "
                         f"(kind {kind} has none); use local:MODEL, e.g. local:smollm2-135m")


def _run(spec: Any, qs: Any, output: Path, settings: Any, shard_size: int, cache_dir: Path | None
         ) -> tuple[Any, dict[str, Any]]:
    """Load the model (through the call cache) and extract, with progress on stderr; the report and the
    directory's manifest."""
    from routerlab.features.signals import read_manifest
    from routerlab.llm.base import load_backend
    from routerlab.llm.extract import extract
    from routerlab.progress import Progress, task

    with task(f"extract: loading {spec.describe()}"):
        backend = load_backend(spec, cache_dir=cache_dir)
    try:
        with Progress("extract", len(qs), unit="q") as bar:
            done = 0

            def on_row(i: int, total: int) -> None:
                nonlocal done
                bar.update(i - done)
                done = i

            report = extract(backend, list(qs), output, settings, shard_size=shard_size,
                             call_cache=getattr(backend, "cache", None), on_row=on_row)
    finally:
        backend.close()
    return report, read_manifest(output)
