"""``routerlab robustness``: routing robustness rho of each router under meaning-preserving perturbations (SPEC 3).

Routers train on the train split; the test split's queries are perturbed (or their variants read from
``--variants-file``) and every router routes originals and variants. With ``--outcomes`` (a table of the variants'
outcomes, e.g. from ``routerlab collect --variants``) the invariance assumption is tested per level. Every option,
the variants file and the outcomes table are checked before any router is trained or any model loaded.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from routerlab.cli import app
from routerlab.cli._io import check_output_dir, json_option, open_table, print_json, seed_option
from routerlab.cli.evaluate_cmd import (
    ENCODER_HELP,
    MAX_BOOT,
    MIN_BOOT,
    NBOOT_HELP,
    SPLIT_HELP,
    TABLE_HELP,
    router_specs,
)
from routerlab.cli.perturb_cmd import (
    ASK_HELP,
    BACKEND_HELP,
    CACHE_HELP,
    DEFAULT_ASK,
    MAX_VARIANTS,
    check_cache_dir,
    check_something_to_generate,
    load_backend_for,
    needs_llm,
    parse_backend,
    part_positions,
    perturb_queries,
)
from routerlab.errors import UsageError

if TYPE_CHECKING:
    from routerlab.data.table import RoutingTable
    from routerlab.perturb.base import PerturbationSet

DEFAULT_LEVELS = "all"
DEFAULT_P = 5


def filter_variants(pset: PerturbationSet, levels: list[str] | None, p: int | None, source: Path
                    ) -> PerturbationSet:
    """A variants file narrowed by ``--levels`` (levels it lacks are an error) and ``--variants P`` (variant numbers
    below P kept). Variant numbers are renumbered 0.. per query and level so the grid has no gaps."""
    from routerlab.perturb.base import Variant

    if levels is not None:
        missing = [lv for lv in levels if lv not in pset.levels]
        if missing:
            raise UsageError(f"--variants-file {source} has no variant at level {', '.join(missing)} "
                             f"(it has {', '.join(pset.levels)})")
    if p is None:
        return pset
    numbers: dict[tuple[str, str], list[int]] = {}
    for v in pset.variants:
        numbers.setdefault((v.query_id, v.level), []).append(v.variant)
    rank = {(q, lv, j): r for (q, lv), js in numbers.items() for r, j in enumerate(sorted(js))}
    # file order kept: a seeded random router's draws follow the order the variants are routed in
    kept = [Variant(v.query_id, v.level, rank[(v.query_id, v.level, v.variant)], v.text) for v in pset.variants
            if rank[(v.query_id, v.level, v.variant)] < p]
    stats = {lv: {"queries": len({v.query_id for v in kept if v.level == lv}),
                  "variants": sum(v.level == lv for v in kept)} for lv in pset.levels}
    return replace(pset, variants=tuple(kept), p=min(p, pset.p), stats=stats)


def routers_wanting_backend(specs: list[str]) -> list[str]:
    """The routers that route by asking an LLM (``needs_backend``, the ``prompted`` one) and name no backend of
    their own in their spec: they take ``--backend``."""
    from routerlab.routers.base import get_router

    out = []
    for spec in specs:
        router = get_router(spec)
        if getattr(type(router), "needs_backend", False) and not router.params.get("backend"):
            out.append(spec)
    return out


def check_variants_cover(pset: PerturbationSet, table: RoutingTable, positions: Any, source: Path) -> None:
    """A variants file must hold variants of at least one test query of the table (else nothing can be measured)."""
    test_ids = {str(x) for x in table.queries.ids[positions].tolist()}
    if not any(v.query_id in test_ids for v in pset.variants):
        raise UsageError(f"--variants-file {source}: none of its {len(pset.variants)} variants is of a test query "
                         f"of {table.name} ({len(test_ids)} test queries); check --split and the table")


@app.command("robustness")
def robustness_cmd(
    table_dir: Annotated[Path | None, typer.Argument(help=TABLE_HELP)] = None,
    routers: Annotated[str, typer.Option("--routers", help="Comma-separated router specs, e.g. knn:k=10,mlp.")] = (
        "random,best-single,knn"
    ),
    levels: Annotated[str | None, typer.Option(
        "--levels", help="Perturbation levels (default all); with --variants-file: keep only these levels.")] = None,
    variants: Annotated[int | None, typer.Option(
        "--variants", min=1, max=MAX_VARIANTS,
        help=f"Variants per query per level, p (default {DEFAULT_P}); with --variants-file: keep the first p.")] = None,
    variants_file: Annotated[Path | None, typer.Option(
        "--variants-file", help="Bring your own variants (routerlab perturb's JSON lines) instead of generating "
                                "them.")] = None,
    outcomes: Annotated[Path | None, typer.Option(
        "--outcomes", help="A table of the variants' outcomes (routerlab collect --variants): tests the "
                           "invariance assumption.")] = None,
    backend: Annotated[str | None, typer.Option("--backend", help=BACKEND_HELP + " Also the prompted router's.")
                       ] = None,
    ask: Annotated[int, typer.Option("--ask", min=1, max=100, help=ASK_HELP)] = DEFAULT_ASK,
    encoder: Annotated[str, typer.Option(help=ENCODER_HELP)] = "tfidf",
    split: Annotated[str, typer.Option(help=SPLIT_HELP)] = "given",
    seed: Annotated[int, seed_option("Seed of the split, the variants, the routers and the bootstrap.")] = 0,
    n_boot: Annotated[int, typer.Option("--n-boot", min=MIN_BOOT, max=MAX_BOOT, help=NBOOT_HELP)] = 1000,
    cache_dir: Annotated[Path | None, typer.Option("--cache-dir", help=CACHE_HELP)] = None,
    as_json: Annotated[bool, json_option()] = False,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Directory for the JSON record, its tables and the variants used (variants.jsonl)."
    )] = None,
) -> None:
    """Routing robustness (SPEC 3): the share of a query's perturbed variants routed to the actor its original
    went to, per router, level and actor, with 95% CIs; with --outcomes, whether the best actor stays the same."""
    from routerlab.perturb.base import parse_levels

    specs = router_specs(routers)
    names = parse_levels(levels) if levels is not None else None
    check_cache_dir(cache_dir)
    spec = parse_backend(backend)
    wanting = routers_wanting_backend(specs)
    if wanting and spec is None:
        raise UsageError(f"router {', '.join(wanting)} asks an LLM: give --backend KIND:MODEL (e.g. "
                         "local:smollm2-135m,threads=1) or prompted:backend=KIND:MODEL")
    if output is not None:
        check_output_dir(output)
    for path, option in ((variants_file, "--variants-file"), (outcomes, "--outcomes")):
        if path is not None and not path.exists():
            raise UsageError(f"{option} {path}: no such file or directory")
    pset = None
    if variants_file is not None:
        from routerlab.perturb.files import read_variants

        pset = filter_variants(read_variants(variants_file, levels=names), names, variants, variants_file)
        llm = False
    else:
        names = names if names is not None else parse_levels(DEFAULT_LEVELS)
        llm = needs_llm(names)
        check_something_to_generate(names, spec)
    outcome_table = None
    if outcomes is not None:
        from routerlab.data.store import load

        outcome_table = load(outcomes)
    table = open_table(table_dir)
    positions, _ = part_positions(table, split, seed, "test")
    if pset is not None and variants_file is not None:
        check_variants_cover(pset, table, positions, variants_file)
    model = load_backend_for(spec, cache_dir) if (llm or wanting) else None
    try:
        if pset is None:
            assert names is not None
            pset = perturb_queries(table, positions, names, variants or DEFAULT_P, seed, model, ask)
            if not len(pset):
                raise UsageError(f"no variant could be made of the {len(positions)} test queries at level "
                                 f"{', '.join(names)}: {pset.describe()['stats']}")
        result = run_protocol(table, specs, pset, split=split, encoder=encoder, seed=seed, n_boot=n_boot,
                              outcomes=outcome_table, backend=model)  # features: the default feature cache
    finally:
        if model is not None:
            model.close()
    emit_robustness(result, pset, output, as_json)


def run_protocol(table: RoutingTable, specs: list[str], pset: PerturbationSet, **kwargs: Any) -> Any:
    """The robustness protocol (:func:`routerlab.protocols.robustness.robustness`)."""
    from routerlab.protocols.robustness import robustness

    return robustness(table, specs, pset, **kwargs)


def emit_robustness(result: Any, pset: PerturbationSet, output: Path | None, as_json: bool) -> None:
    """Print the result (text or JSON) and, with ``-o``, write its files plus ``variants.jsonl`` (the variants
    used, so ``--variants-file`` repeats the run exactly)."""
    from routerlab.perturb.files import write_variants
    from routerlab.reports.files import say_written

    written: list[Path] = []
    if output is not None:
        from routerlab.reports.robustness_report import write_robustness

        output.mkdir(parents=True, exist_ok=True)
        written = [Path(p) if Path(p).exists() else output / p for p in write_robustness(result, output)]
        written.append(write_variants(output / "variants.jsonl", pset.variants))
    if as_json:
        print_json(result.to_dict())
    else:
        from routerlab.reports.robustness_report import robustness_text

        typer.echo(robustness_text(result))
        for level, reason in pset.not_generated.items():  # SPEC 3: say what was not measured, never fake it
            typer.echo(f"level {level}: {reason}")
    say_written(written, to_stderr=as_json)
