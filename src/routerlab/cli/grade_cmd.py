"""``routerlab grade``: grade answers a user already has (a JSON-lines file) and write them with their grades.

The output is the input rows plus ``score``, ``grader``, ``extracted`` and ``detail``, written atomically;
``routerlab import long GRADED.jsonl -O rename=question=text`` turns it into a routing table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from routerlab.cli import app
from routerlab.cli._io import check_file_parent, force_option, json_option, print_json, refuse_overwrite
from routerlab.errors import UsageError

GRADER_HELP = ("The grader of every row (NAME: mc, short, f1, number, math, code, coverage, judge:SPEC) or of some "
               "datasets (DATASET=NAME,...); repeatable. Default: the row's metric (LLMRouter's em_mc, f1_score, "
               "GSM8K, MATH, code_eval, commongen_coverage), else mc with choices, short without.")


@app.command("grade")
def grade_cmd(
    answers: Annotated[Path, typer.Argument(
        help="A JSON-lines file of answers: {query_id, actor, question, answer, reference} per line, optional "
             "metric, dataset, choices (and task_id); or a table collect wrote (its generated answers).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The JSON-lines file to write the graded rows to.")],
    grader: Annotated[list[str] | None, typer.Option(
        "--grader", metavar="NAME|DATASET=NAME,...", help=GRADER_HELP)] = None,
    cache_dir: Annotated[Path | None, typer.Option(
        help="Call cache directory of a judge grader (default: $ROUTERLAB_CACHE_DIR/llm or "
             "~/.cache/routerlab/llm).")] = None,
    force: Annotated[bool, force_option("Replace the output file if it exists.")] = False,
    as_json: Annotated[bool, json_option("Print the summary as one JSON object.")] = False,
) -> None:
    """Grade answers you already have, each with its question's grader, and write the rows with score, grader,
    extracted answer and detail (routerlab import long reads them)."""
    from routerlab._atomic import atomic_write
    from routerlab.llm.answers import grade_answers, read_answers
    from routerlab.llm.graders import parse_grader_choice
    from routerlab.reports.files import say_written

    refuse_overwrite(output, force)
    if output.is_dir():
        raise UsageError(f"-o {output}: is a directory; give a .jsonl file")
    if output.suffix.lower() != ".jsonl":
        raise UsageError(f"-o {output}: the graded rows are JSON lines; give a .jsonl file")
    check_file_parent(output)
    if output.resolve() == answers.resolve():
        raise UsageError(f"-o {output}: is the answers file itself; write the grades to another file")
    if cache_dir is not None and cache_dir.exists() and not cache_dir.is_dir():
        raise UsageError(f"--cache-dir {cache_dir}: is a file, not a directory")
    choice = parse_grader_choice(grader)
    rows = read_answers(answers, choice)
    graded, runs = grade_answers(rows, cache_dir=cache_dir)

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            for record in graded:
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")

    atomic_write(output, write)
    summary = {name: run.summary() for name, run in runs.items()}
    if as_json:
        print_json({"answers": str(answers), "output": str(output), "rows": len(graded),
                    "grader_choice": choice.describe(), "graders": summary})
    else:
        typer.echo(f"graded {len(graded)} answers of {answers}")
        width = max(len(name) for name in summary)
        for name, s in summary.items():
            typer.echo(f"  {name:<{width}}  {s['n']:>6} answers  mean score {s['mean_score']:.3f}  "
                       f"{s['seconds']:.2f} s")
    say_written([output], to_stderr=as_json)
