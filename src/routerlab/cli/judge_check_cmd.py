"""``routerlab judge-check``: how far LLM judges agree with reference labels and with each other.

The options, the judges' specs and the output path are checked before the label file is read or a model loaded
(one line, exit 2). Calls go through the LLM call cache, so a rerun asks nothing again and an interrupted run
resumes; the JSON report is written once, atomically.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from routerlab.cli import app
from routerlab.cli._io import (
    call_cache_kept,
    check_file_parent,
    force_option,
    json_option,
    on_interrupt,
    print_json,
    refuse_overwrite,
    seed_option,
)
from routerlab.errors import UsageError

JUDGES_HELP = ("Judges, comma-separated: judge:KIND:MODEL[,key=value...] (judge:local:smollm2-135m, "
               "judge:local:qwen2.5-coder-1.5b,threads=1, judge:openai:MODEL@URL,key_env=VAR), with the judge "
               "options template=auto|qa|math|code|open|pair, verdict=auto|logits|generate and max_tokens=N; any "
               "other grader name (short, mc, f1, ...) is compared the same way.")


@app.command("judge-check")
@on_interrupt(lambda a: call_cache_kept(a["cache_dir"], "verdicts", "the report not written"))
def judge_check_cmd(
    labels: Annotated[Path, typer.Argument(
        help="A table collect wrote (its generated answers, labelled by their scores), or a .csv or .jsonl file "
             "of graded answers: question, answer, reference and a reference-label column "
             "(1/0 or a graded share in [0, 1]); optional dataset and metric (they choose a judge's template), "
             "answer_b (a pair's second answer), query_id and choices (options: the reference is then the gold "
             "letter).")],
    judges: Annotated[str, typer.Option("--judges", help=JUDGES_HELP)],
    reference: Annotated[str | None, typer.Option(
        "--reference", metavar="COLUMN",
        help="The column of reference labels (default: label; score for a table collect wrote).")] = None,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Write the report, with every row's verdicts, to this JSON file.")] = None,
    n_boot: Annotated[int, typer.Option("--n-boot", min=100, max=100_000,
                                        help="Bootstrap resamples of the rows for each interval.")] = 1000,
    seed: Annotated[int, seed_option("Seed of the bootstrap.")] = 0,
    cache_dir: Annotated[Path | None, typer.Option(
        help="Call cache directory (default: $ROUTERLAB_CACHE_DIR/llm or ~/.cache/routerlab/llm).")] = None,
    force: Annotated[bool, force_option()] = False,
    as_json: Annotated[bool, json_option("Print the report as one JSON object.")] = False,
) -> None:
    """Check LLM judges against reference labels and against each other, with bootstrap intervals.

    Every judge grades the same answers; the report gives each judge's agreement with the reference labels
    (Cohen's kappa, precision, recall, F1, accuracy) and the judges' agreement with each other (Fleiss' kappa,
    Krippendorff's alpha), every figure with a 95% bootstrap interval over rows. A judge whose kappa interval
    reaches 0 is reported as not better than chance; below 30 rows no interval is computed and the report says
    so. Rows a judge gave no verdict for are counted apart (unparseable)."""
    from routerlab.llm.graders.base import get_grader
    from routerlab.llm.graders.judge import verdict_of
    from routerlab.llm.judge_check import compare, grade_all, read_labels, split_judges, verdict_rows

    if output is not None:
        if output.suffix.lower() != ".json":
            raise UsageError(f"-o {output}: the report is a .json file")
        refuse_overwrite(output, force)
        check_file_parent(output)
    if cache_dir is not None and cache_dir.exists() and not cache_dir.is_dir():
        raise UsageError(f"--cache-dir {cache_dir}: is a file, not a directory")
    if reference is None:
        reference = "score" if labels.is_dir() else "label"
    if not reference.strip():
        raise UsageError("--reference: name the column of reference labels")
    names = split_judges(judges)
    graders = [get_grader(name, cache_dir=cache_dir) for name in names]  # a bad spec fails before any model loads
    label_set = read_labels(labels, reference)
    grades: dict[str, Any] = {}
    try:
        for grader in graders:
            grades[grader.name] = grade_all(grader, label_set.items)
            grader.close()
    finally:
        for grader in graders:
            grader.close()
    verdicts = {name: [verdict_of(g) for g in gs] for name, gs in grades.items()}
    report = {**compare(label_set, verdicts, n_boot=n_boot, seed=seed), **_provenance(labels, names)}
    if output is not None:
        from routerlab.reports.files import say_written, write_json

        write_json(output, {**report, "rows_verdicts": verdict_rows(label_set, grades)})
    if as_json:
        print_json(report)
    else:
        typer.echo(report_text(report))
    if output is not None:
        say_written([output], to_stderr=as_json)


def _num(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def _figure(name: str, fig: dict[str, Any], intervals: bool) -> str:
    text = f"{name:<22} {_num(fig['value']):>7}"
    if intervals and math.isfinite(fig["lo"]):
        text += f"  [{_num(fig['lo'])}, {_num(fig['hi'])}]"
    if fig["note"] and "no interval" not in fig["note"]:
        text += f"  ({fig['note']})"
    return text


def _provenance(labels: Path, judges: list[str]) -> dict[str, Any]:
    """What the report was computed from: routerlab's version, the judges' specs and the labels' content hash (a
    table's own, or the sha256 of the file's bytes)."""
    import hashlib

    from routerlab._version import __version__

    if labels.is_dir():
        from routerlab.data.store import load

        digest = load(labels).content_hash
    else:
        digest = hashlib.sha256(labels.read_bytes()).hexdigest()
    return {"routerlab_version": __version__, "judge_specs": judges, "labels_hash": digest}


def report_text(report: dict[str, Any]) -> str:
    """The report as text: the labels, then each judge, then the judges together."""
    n, pos = report["rows"], report["reference_positive"]
    kind = "1/0" if report["binary_reference"] else "graded, read as 1 from 0.5"
    lines = [f"{n} rows of {report['labels']}, reference column {report['reference']!r} ({kind}): {pos} positive "
             f"({report['reference_rate']:.1%})"]
    intervals = report["intervals"]
    if not intervals:
        lines.append(f"only {n} rows, fewer than the {report['min_rows_for_intervals']} a 95% interval needs: "
                     "intervals not computed, and no judge can be shown better than chance")
    else:
        lines.append("95% bootstrap intervals over rows in brackets")
    for name, j in report["judges"].items():
        chance = j["better_than_chance"]
        verdict = ("better than chance" if chance else "NOT BETTER THAN CHANCE (kappa interval includes 0)"
                   if chance is not None else "cannot tell if better than chance")
        lines.append(f"{name}: {j['rated']} rated, {j['unparseable']} unparseable, {j['judged_positive']} judged "
                     f"positive; {verdict}")
        for key, label in (("kappa", "Cohen's kappa"), ("precision", "precision"), ("recall", "recall"),
                           ("f1", "F1"), ("accuracy", "accuracy"), ("alpha_interval", "Krippendorff alpha (int.)")):
            if key in j:
                lines.append("  " + _figure(label, j[key], intervals))
    among = report["among_judges"]
    if among is not None:
        lines.append(f"among the {len(report['judges'])} judges ({among['rows_every_judge_rated']} rows every judge "
                     "rated):")
        lines.append("  " + _figure("Fleiss' kappa", among["fleiss_kappa"], intervals))
        lines.append("  " + _figure("Krippendorff alpha", among["krippendorff_alpha"], intervals))
    return "\n".join(lines)
