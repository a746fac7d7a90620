"""Files and text of a robustness run (SPEC 3): ``robustness.json`` (the run's record), two plots, and
``robustness.md`` (a table per router: accuracy, rho, rho per level, its weakest level, the invariance check),
plus the fixed-width table the terminal shows."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from routerlab.metrics.bootstrap import MIN_QUERIES, unavailable
from routerlab.metrics.catalog import label, legend_line
from routerlab.metrics.sources import cite
from routerlab.protocols.robustness import UNTESTED_NOTE, Robustness, RobustnessResult
from routerlab.reports.blocks import Figure, Paragraph, Section, Table
from routerlab.reports.files import write_json, write_text
from routerlab.reports.render import render_markdown
from routerlab.reports.robustness_plot import plot_accuracy_vs_rho, plot_rho_by_level

JSON_NAME = "robustness.json"
MARKDOWN_NAME = "robustness.md"
RHO_PLOT = "rho_by_level.png"
ACCURACY_PLOT = "accuracy_vs_rho.png"


def _num(v: float | None, digits: int = 4) -> str:
    return "-" if v is None or v != v else f"{v:.{digits}f}"


def _ci(ci: tuple[float, float] | list[float] | None, n: int | None = None) -> str:
    """``[lo, hi]``; ``n/a (n=3 < 30)`` when the run's ``n`` test queries are too few for an interval."""
    if n is not None and n < MIN_QUERIES:
        return unavailable(n)
    if ci is None or any(x is None or (isinstance(x, float) and math.isnan(x)) for x in ci):
        return "[-]"
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _with_ci(v: float | None, ci: tuple[float, float] | list[float] | None, n: int | None = None) -> str:
    return f"{_num(v)} {_ci(ci, n)}"


def _pct(v: float) -> str:
    return "-" if v != v else f"{100 * v:.1f}%"


def _pct_ci(ci: tuple[float, float] | list[float] | None, n: int | None = None) -> str:
    if n is not None and n < MIN_QUERIES:
        return unavailable(n)
    if ci is None or any(x is None or (isinstance(x, float) and math.isnan(x)) for x in ci):
        return "[-]"
    return f"[{100 * ci[0]:.1f}%, {100 * ci[1]:.1f}%]"


def invariance_cell(r: RobustnessResult, n: int | None = None) -> str:
    """The router's invariance check in a few words: untested, or the changed share (sets, and arg-max) and rho on
    the invariant variants against rho on all."""
    inv = r.invariance
    if not inv.get("tested"):
        return "untested (no outcomes of the variants)"
    return (f"optimal actor changed for {_pct(inv['changed_share'])} of {inv['n_known']} variants with outcomes "
            f"(argmax: {_pct(inv['changed_share_argmax'])}); rho on the invariant ones "
            f"{_with_ci(inv['rho_invariant'], inv['rho_invariant_ci'], n)} vs {_num(inv['rho_all'])} on all")


def ranked(result: Robustness) -> list[RobustnessResult]:
    """Routers by rho, most robust first (ties in run order): the order of tables and text."""
    return sorted(result.results, key=lambda r: -(r.rho if r.rho == r.rho else -1.0))


def kappa_cell(r: RobustnessResult, n: int | None = None) -> str:
    """kappa_rho with its interval (unavailable below MIN_QUERIES of ``n``), or ``null (collapsed)`` where
    rho_chance = 1 (SPEC 3: never 1)."""
    k = r.kappa
    if k is None:
        return "-"
    if k.flag():
        return "null (collapsed)"
    return _with_ci(k.value, k.ci, n)


def _level_head(result: Robustness, lv: str) -> str:
    return f"{label('rho')} {lv}" + (" (meaning-changing)" if lv in result.meaning_changing else "")


def _rows(result: Robustness, *, full: bool) -> tuple[list[str], list[list[str]]]:
    levels = list(result.levels)
    rho = label("rho")
    head = ["router", f"{label('accuracy')} [95% CI]", f"{rho} [95% CI]", f"{label('kappa_rho')} [95% CI]",
            *[_level_head(result, lv) for lv in levels], "weakest level"]
    if full:
        head.append("invariance")
    rows = []
    n = result.n_test
    for r in ranked(result):
        row = [r.spec, _with_ci(r.accuracy, r.accuracy_ci, n), _with_ci(r.rho, r.rho_ci, n), kappa_cell(r, n),
               *[_num(r.rho_by_level.get(lv)) for lv in levels], r.weakest_cell()]
        if full:
            row.append(invariance_cell(r, n))
        rows.append(row)
    return head, rows


def _head_line(result: Robustness) -> str:
    d, sp = result.data, result.provenance.split
    kind = sp.get("kind", "?") if isinstance(sp, dict) else sp
    per = result.perturbations
    control = (f"; {', '.join(result.meaning_changing)} changes the meaning (the falsifier) and is left out of rho, "
               f"kappa_rho and the invariance check's whole" if result.meaning_changing else "")
    return (f"{d['name']} (hash {str(d['content_hash'])[:12]}), split {kind}, {result.n_test} test queries, "
            f"{per.get('n_variants_used', '?')} variants (levels {', '.join(result.levels)}; p = {result.p}), "
            f"encoder {result.provenance.encoder}, seed {result.provenance.seed}; anchors: fixed router 1, "
            f"uniform random 1/N = {result.uniform_rho:.4f}; kappa_rho: 0 for routing independent of the "
            f"original's choice, 1 when every variant stays{control}")


def falsifier_lines(result: Robustness) -> list[str]:
    """The falsifier's sentence per meaning-changing level (the control level), or why it is untested."""
    if result.falsifier is not None:
        return [str(block["sentence"]) for block in result.falsifier.values()]
    if result.meaning_changing:
        return [f"Falsifier (level {', '.join(result.meaning_changing)}): untested, no outcomes of the variants."]
    return []


def robustness_text(result: Robustness) -> str:
    """The terminal's fixed-width table (most robust router first), the run on top and the invariance status and
    skipped routers below."""
    head, rows = _rows(result, full=False)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = [_head_line(result), line(head), *(line(r) for r in rows)]
    out += legend_line(["rho", "kappa_rho"], f"{label('rho')} LEVEL = rho on that level's variants",
                       "weakest level = the level with the lowest rho")
    out += _invariance_lines(result)
    out += falsifier_lines(result)
    if "review" in result.perturbations:
        from routerlab.perturb.review import review_lines

        out += review_lines(result.perturbations["review"])
    out += [f"skipped {k}: {v}" for k, v in result.skipped.items()]
    out += [f"note    {n}" for n in result.notes]
    return "\n".join(out)


def _invariance_lines(result: Robustness) -> list[str]:
    if not result.invariance_tested:
        return [f"invariance: {UNTESTED_NOTE}"]
    first, n = result.results[0].invariance, result.n_test
    whole = " meaning-preserving" if result.meaning_changing else ""
    lines = [f"invariance: optimal actor (set) changed for {_pct(first['changed_share'])} "
             f"{_pct_ci(first['changed_share_ci'], n)} of {first['n_known']}{whole} variants with outcomes "
             f"(argmax: {_pct(first['changed_share_argmax'])})"]
    for lv, b in first["by_level"].items():
        tag = " (meaning-changing)" if lv in result.meaning_changing else ""
        lines.append(f"  {lv}{tag}: {_pct(b['changed_share'])} {_pct_ci(b['changed_share_ci'], n)} of {b['n_known']} "
                     f"(argmax {_pct(b['changed_share_argmax'])})")
    lines += [f"  {r.spec}: rho {_num(r.invariance['rho_all'])} on all, {_num(r.invariance['rho_invariant'])} "
              f"on invariant variants" for r in result.results]
    return lines


def invariance_table(result: Robustness) -> Table | None:
    """Per level: variants, those with outcomes, the share whose optimal actor changed (sets, with CI; arg-max)
    and every router's rho on the invariant ones; None when the check is untested."""
    if not result.invariance_tested or not result.results:
        return None
    head = ["level", "variants", "with outcomes", f"{label('changed_share')} [95% CI]", label("changed_share_argmax"),
            *[f"{label('rho_invariant')}: {r.spec}" for r in result.results]]
    first = result.results[0].invariance
    rows = []
    for lv in [*first["by_level"], "all"]:
        b = first if lv == "all" else first["by_level"][lv]
        per = [r.invariance if lv == "all" else r.invariance["by_level"][lv] for r in result.results]
        name = ("all meaning-preserving" if lv == "all" and result.meaning_changing else
                f"{lv} (meaning-changing)" if lv in result.meaning_changing else lv)
        rows.append([name, str(b["n_perturbations"]), str(b["n_known"]),
                     f"{_pct(b['changed_share'])} {_pct_ci(b['changed_share_ci'], result.n_test)}",
                     _pct(b["changed_share_argmax"]),
                     *[_num(p["rho_invariant"]) for p in per]])
    return Table(head, rows)


def falsifier_table(result: Robustness) -> Table | None:
    """Per meaning-changing level and meaning-preserving level: both changed shares with their intervals and the
    paired difference with its interval; None without a tested falsifier."""
    if not result.falsifier:
        return None
    head = ["meaning-changing level", f"{label('changed_share')} [95% CI]", "versus level",
            f"{label('changed_share')} [95% CI]", "difference [95% CI]"]
    rows = []
    for c, block in result.falsifier.items():
        for lv, v in block["versus"].items():
            d, dci = v["difference"], v["difference_ci"]
            diff = f"{100 * d:+.1f} points" + ("" if dci[0] is None or dci[0] != dci[0] else
                                               f" [{100 * dci[0]:+.1f}, {100 * dci[1]:+.1f}]")
            rows.append([c, f"{_pct(block['changed_share'])} {_pct_ci(block['changed_share_ci'], result.n_test)}", lv,
                         f"{_pct(v['changed_share'])} {_pct_ci(v['changed_share_ci'], result.n_test)}", diff])
    return Table(head, rows)


def robustness_markdown(result: Robustness, figures: list[str] | None = None) -> str:
    """``robustness.md``: the run, the table, the invariance check (or that it is untested) and the figures."""
    head, rows = _rows(result, full=True)
    blocks: list[Any] = [Paragraph(_head_line(result) + "."), Table(head, rows)]
    if result.invariance_tested:
        blocks.append(Paragraph(f"Invariance check (the test a review of {cite('3')} asks for): the optimal actor "
                                f"of a query is its set of actors within 95% of its best score ({cite('4')}); a "
                                "variant changes it when "
                                "that set differs from the original's. rho on the invariant variants measures the "
                                "router where its assumption holds."))
        tab = invariance_table(result)
        if tab is not None:
            blocks.append(tab)
        fals = falsifier_table(result)
        if fals is not None:
            blocks += [fals, Paragraph(" ".join(falsifier_lines(result)))]
    else:
        blocks.append(Paragraph(f"Invariance check: {UNTESTED_NOTE}. rho assumes a variant has the same optimal "
                                "actor as its original; without outcomes of the variants that assumption is "
                                "untested."))
    if "review" in result.perturbations:
        from routerlab.perturb.review import review_lines

        first, *levels = review_lines(result.perturbations["review"])
        blocks.append(Paragraph(first[0].upper() + first[1:] + ". " + "; ".join(x.strip() for x in levels) + "."))
    extra = [f"Skipped `{k}`: {v}." for k, v in result.skipped.items()] + [f"Note: {n}." for n in result.notes]
    if extra:
        blocks.append(Paragraph(" ".join(extra)))
    sec = Section(f"Routing robustness: {result.data['name']}", blocks,
                  figures=[Figure(f) for f in (figures or [])], level=1)
    return render_markdown([sec])


def write_robustness(result: Robustness, out_dir: Path) -> list[Path]:
    """Write robustness.json, rho_by_level.png, accuracy_vs_rho.png and robustness.md (last) into ``out_dir``,
    each atomically; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / JSON_NAME]
    write_json(paths[0], result.to_dict())
    paths.append(plot_rho_by_level(result, out / RHO_PLOT))
    paths.append(plot_accuracy_vs_rho(result, out / ACCURACY_PLOT))
    md = out / MARKDOWN_NAME
    write_text(md, robustness_markdown(result, [RHO_PLOT, ACCURACY_PLOT]))
    paths.append(md)
    return paths
