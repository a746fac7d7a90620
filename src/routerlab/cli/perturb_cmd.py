"""``routerlab perturb``: write p meaning-preserving variants per query per level to a variants file (SPEC 3).

Every option (levels, counts, the seed, the backend spec, the output path) is checked before the table is loaded or
any model started (one line, exit 2). LLM levels (paraphrase, rambling) need ``--backend``; without one they are
reported as not generated, never faked. The file is the same JSON-lines format users bring their own variants in
(``routerlab robustness --variants-file``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from routerlab._words import noun, plural
from routerlab.cli import app
from routerlab.cli._io import (
    call_cache_kept,
    check_file_parent,
    force_option,
    json_option,
    on_interrupt,
    open_table,
    print_json,
    refuse_overwrite,
    seed_option,
)
from routerlab.errors import UsageError
from routerlab.perturb.base import DEFAULT_ASK, MAX_VARIANTS, perturb_queries
from routerlab.perturb.review import MAX_REVIEW

if TYPE_CHECKING:
    from routerlab.data.table import RoutingTable
    from routerlab.llm.base import Backend, BackendSpec
    from routerlab.perturb.base import PerturbationSet

PARTS = ("test", "train", "all")

TABLE_HELP = "A table directory (default: the embedded demo benchmark)."
SPLIT_HELP = "Train/test split: given, random[:F] (seeded) or ood:DS1,DS2."
LEVELS_HELP = ("Perturbation levels, comma-separated: character, word, syntax, paraphrase, rambling, or all; control "
               "(opt-in, never in all) makes meaning-changing edits, the invariance check's falsifier.")
VARIANTS_HELP = f"Variants per query per level, p (1..{MAX_VARIANTS})."
BACKEND_HELP = ("LLM backend that writes the paraphrase and rambling levels, KIND:MODEL[,key=value...], e.g. "
                "local:smollm2-135m,threads=1 (without it those levels are not generated).")
ASK_HELP = ("Rewrites the LLM is asked for per query and level (paraphrase, rambling; the paper asks 10 and keeps "
            "distinct ones); fewer is cheaper on a CPU.")
CACHE_HELP = "Call cache directory of the backend (default: $ROUTERLAB_CACHE_DIR/llm or ~/.cache/routerlab/llm)."
ENCODER_HELP = ("Encoder of every variant's similarity to its original: minilm or tfidf (default: minilm where the "
                "embed extra is installed, else tfidf fitted on the table's queries). The word level keeps only "
                "variants at or above the encoder's threshold (docs/perturb.md).")
REVIEW_HELP = ("Also write a stratified sample of N variants (by level and similarity band, seeded) to FILE.csv for "
               "a person to mark same or changed in its mark column; robustness --reviewed FILE.csv reads it back.")
_PLAIN_STATS = ("queries", "variants", "short", "rejected", "below_similarity", "substitutes", "substitutes_kept")


def check_variants_path(path: Path, *, option: str = "-o") -> None:
    """A variants file to write: a ``.jsonl`` name, not a directory, whose nearest existing parent is a writable
    directory. One UsageError naming the path, before anything is loaded."""
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a directory; give a file path such as {path / 'variants.jsonl'}")
    if path.suffix.lower() != ".jsonl":
        raise UsageError(f"{option} {path}: a variants file name ends in .jsonl (one JSON object per line)")
    check_file_parent(path, option=option)


def check_cache_dir(path: Path | None) -> None:
    """``--cache-dir`` must be a directory when it exists."""
    if path is not None and path.exists() and not path.is_dir():
        raise UsageError(f"--cache-dir {path}: is a file, not a directory")


def parse_backend(text: str | None) -> BackendSpec | None:
    """``--backend KIND:MODEL[,opts]`` parsed (a bad spec is one UsageError), before any model is loaded."""
    if text is None:
        return None
    from routerlab.llm.base import parse_backend_spec

    return parse_backend_spec(text, option="--backend")


def needs_llm(levels: Sequence[str]) -> bool:
    """Whether any of ``levels`` is written by an LLM (so a ``--backend`` must be loaded for it)."""
    from routerlab.perturb.base import level_class

    return any(not level_class(lv).offline for lv in levels)


def check_something_to_generate(levels: Sequence[str], spec: BackendSpec | None) -> None:
    """Refuse, before anything loads, a run whose every level needs an LLM when no ``--backend`` is given: it
    could only report every level as not generated."""
    from routerlab.perturb.base import level_class

    if spec is None and all(not level_class(lv).offline for lv in levels):
        raise UsageError(f"--levels {','.join(levels)}: written by an LLM, and no --backend is given "
                         "(e.g. --backend local:smollm2-135m,threads=1), or add an offline level: character, word, "
                         "syntax")


def load_backend_for(spec: BackendSpec | None, cache_dir: Path | None) -> Backend | None:
    """The backend of ``--backend`` loaded behind the on-disk call cache (None without a spec)."""
    if spec is None:
        return None
    from routerlab.llm.base import load_backend

    return load_backend(spec, cache_dir=cache_dir)


def part_positions(table: RoutingTable, split: str, seed: int, part: str) -> tuple[Any, dict[str, Any]]:
    """Positions of the ``part`` (test, train or all) queries under the split, and the split's description."""
    import numpy as np

    from routerlab.data.splits import make_split

    sp = make_split(table, split, seed)
    chosen = {"test": sp.test, "train": sp.train, "all": np.concatenate([sp.train, sp.test])}[part]
    return np.sort(chosen), sp.describe()


def level_summary(pset: PerturbationSet) -> dict[str, dict[str, Any]]:
    """Per level asked for: queries, variants, queries short of p, candidates rejected for altering a protected
    span (and any further count the driver keeps); or ``{"not_generated": reason}``."""
    out: dict[str, dict[str, Any]] = {}
    for lv in pset.levels:
        if lv in pset.not_generated:
            out[lv] = {"not_generated": pset.not_generated[lv]}
        else:
            out[lv] = {"queries": 0, "variants": 0, "short": 0, "rejected": 0, **pset.stats.get(lv, {})}
    return out


def summary_lines(levels: dict[str, dict[str, Any]], p: int,
                  settings: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """One line per level: counts, or why it was not generated; for a level that filters by similarity, the
    variants dropped below its threshold; for the word level, a second line with the synonym candidates dropped
    per reason."""
    width = max(len(lv) for lv in levels)
    lines = []
    for lv, s in levels.items():
        if "not_generated" in s:
            lines.append(f"  {lv:<{width}}  {s['not_generated']}")
            continue
        below = ""
        if "below_similarity" in s:
            bar = (settings or {}).get(lv, {}).get("min_similarity")
            below = f"  {s['below_similarity']} below similarity" + (f" {bar}" if bar is not None else "")
        lines.append(f"  {lv:<{width}}  {plural(s['queries'], 'query')}  {plural(s['variants'], 'variant')}  "
                     f"{s['short']} short of p={p}  {s['rejected']} rejected (altered a protected span)" + below
                     + "".join(f"  {v} {k}" for k, v in s.items()
                               if k not in _PLAIN_STATS and not k.startswith("substitutes_dropped_")))
        if "substitutes" in s:
            reasons = [(k.removeprefix("substitutes_dropped_"), v) for k, v in s.items()
                       if k.startswith("substitutes_dropped_")]
            lines.append(f"  {'':<{width}}  synonym candidates: {s['substitutes']} considered, "
                         f"{s.get('substitutes_kept', 0)} kept; dropped: "
                         + ", ".join(f"{v} {k}" for k, v in reasons))
    return lines


def check_review_path(path: Path) -> None:
    """``--review N FILE.csv``: a ``.csv`` name, not a directory, in a writable place."""
    if path.is_dir():
        raise UsageError(f"--review {path}: is a directory; give a file path such as {path / 'review.csv'}")
    if path.suffix.lower() != ".csv":
        raise UsageError(f"--review {path}: a review file name ends in .csv")
    check_file_parent(path, option="--review")


@app.command("perturb")
@on_interrupt(lambda a: None if a["backend"] is None else
              call_cache_kept(a["cache_dir"], "rewrites", "the variants file not written"))
def perturb_cmd(
    output: Annotated[Path, typer.Option("-o", "--output", help="Variants file to write (.jsonl).")],
    table_dir: Annotated[Path | None, typer.Argument(help=TABLE_HELP)] = None,
    levels: Annotated[str, typer.Option("--levels", help=LEVELS_HELP)] = "all",
    variants: Annotated[int, typer.Option("--variants", min=1, max=MAX_VARIANTS, help=VARIANTS_HELP)] = 5,
    split: Annotated[str, typer.Option(help=SPLIT_HELP)] = "given",
    part: Annotated[str, typer.Option("--part", help="Which queries to perturb: test, train or all.")] = "test",
    seed: Annotated[int, seed_option("Seed of the split and of every query's variants.")] = 0,
    backend: Annotated[str | None, typer.Option("--backend", help=BACKEND_HELP)] = None,
    ask: Annotated[int, typer.Option("--ask", min=1, max=100, help=ASK_HELP)] = DEFAULT_ASK,
    cache_dir: Annotated[Path | None, typer.Option("--cache-dir", help=CACHE_HELP)] = None,
    encoder: Annotated[str | None, typer.Option("--encoder", help=ENCODER_HELP)] = None,
    review: Annotated[tuple[int, Path] | None, typer.Option("--review", metavar="N FILE.csv",
                                                            help=REVIEW_HELP)] = None,
    as_json: Annotated[bool, json_option("Print the summary as one JSON object.")] = False,
    force: Annotated[bool, force_option("Overwrite the variants file if it exists.")] = False,
) -> None:
    """Write up to p meaning-preserving variants of each query per perturbation level (SPEC 3): one JSON object
    {query_id, level, variant, text} per line. Numbers, formulae, code and option labels are never altered."""
    from routerlab.perturb.base import parse_levels
    from routerlab.perturb.files import write_variants
    from routerlab.reports.files import say_written

    names = parse_levels(levels)
    p = variants
    if part not in PARTS:
        raise UsageError(f"--part must be one of {', '.join(PARTS)}, got {part!r}")
    from routerlab.data.splits import check_split_spec

    try:  # before the table is read, the option named
        check_split_spec(split)
    except UsageError as exc:
        raise UsageError(f"--split: {exc}") from None
    check_variants_path(output)
    refuse_overwrite(output, force)
    check_cache_dir(cache_dir)
    if encoder is not None:
        from routerlab.features.registry import get_encoder

        if get_encoder(encoder).name not in ("minilm", "tfidf"):
            raise UsageError(f"--encoder {encoder}: the similarity is measured with a text encoder, minilm or tfidf")
    if review is not None:
        if not 1 <= review[0] <= MAX_REVIEW:
            raise UsageError(f"--review: the sample size must be an integer in 1..{MAX_REVIEW}, got {review[0]}")
        check_review_path(review[1])
        refuse_overwrite(review[1], force, option="--review")  # a marked review file is a person's work
    spec = parse_backend(backend)
    llm = needs_llm(names)
    check_something_to_generate(names, spec)
    table = open_table(table_dir)
    positions, split_info = part_positions(table, split, seed, part)
    model = load_backend_for(spec, cache_dir) if llm else None
    try:
        pset = perturb_queries(table, positions, names, p, seed, model, ask, similarity=encoder)
    finally:
        if model is not None:
            model.close()
    output.parent.mkdir(parents=True, exist_ok=True)
    write_variants(output, pset.variants)
    written = [output]
    sampled = 0
    if review is not None:
        from routerlab.perturb.review import review_sample, write_review

        sample = review_sample(pset, review[0], seed)
        originals = dict(zip((str(x) for x in table.queries.ids[positions].tolist()),
                             (str(x) for x in table.queries.text[positions].tolist()), strict=True))
        review[1].parent.mkdir(parents=True, exist_ok=True)
        written.append(write_review(review[1], sample, originals))
        sampled = len(sample)
    per_level = level_summary(pset)
    if as_json:
        print_json({"table": table.name, "content_hash": table.content_hash, "split": split_info, "part": part,
                    "seed": seed, "p": p, "backend": None if spec is None else spec.describe(),
                    "n_queries": len(positions), "n_variants": len(pset.variants), "levels": per_level,
                    "settings": {k: dict(v) for k, v in pset.settings.items()}, "output": str(output),
                    **({"review": {"file": str(review[1]), "n": sampled}} if review is not None else {})})
    else:
        typer.echo(f"perturbed {len(positions)} {part} {noun(len(positions), 'query')} of {table.name} at "
                   f"{plural(len(names), 'level')}, p={p} (seed {seed}): {plural(len(pset.variants), 'variant')}")
        for line in summary_lines(per_level, p, {k: dict(v) for k, v in pset.settings.items()}):
            typer.echo(line)
        if review is not None:
            typer.echo(f"review sample: {sampled} variants to mark same or changed (column mark) in {review[1]}")
    say_written(written, to_stderr=as_json)
