"""Files and text of a robustness run (SPEC 3): ``robustness.json`` (the run's record), two plots, and
``robustness.md`` (a table per router: accuracy, rho, rho per level, its weakest level, the invariance check),
plus the fixed-width table the terminal shows."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from routerlab.metrics.catalog import label
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


def _ci(ci: tuple[float, float] | list[float] | None) -> str:
    if ci is None or any(x is None or (isinstance(x, float) and math.isnan(x)) for x in ci):
        return "[-]"
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _with_ci(v: float | None, ci: tuple[float, float] | list[float] | None) -> str:
    return f"{_num(v)} {_ci(ci)}"


def _pct(v: float) -> str:
    return "-" if v != v else f"{100 * v:.1f}%"


def _pct_ci(ci: tuple[float, float] | list[float] | None) -> str:
    if ci is None or any(x is None or (isinstance(x, float) and math.isnan(x)) for x in ci):
        return "[-]"
    return f"[{100 * ci[0]:.1f}%, {100 * ci[1]:.1f}%]"


def invariance_cell(r: RobustnessResult) -> str:
    """The router's invariance check in a few words: untested, or the changed share (sets, and arg-max) and rho on
    the invariant variants against rho on all."""
    inv = r.invariance
    if not inv.get("tested"):
        return "untested (no outcomes of the variants)"
    return (f"optimal actor changed for {_pct(inv['changed_share'])} of {inv['n_known']} variants with outcomes "
            f"(argmax: {_pct(inv['changed_share_argmax'])}); rho on the invariant ones "
            f"{_with_ci(inv['rho_invariant'], inv['rho_invariant_ci'])} vs {_num(inv['rho_all'])} on all")


def ranked(result: Robustness) -> list[RobustnessResult]:
    """Routers by rho, most robust first (ties in run order): the order of tables and text."""
    return sorted(result.results, key=lambda r: -(r.rho if r.rho == r.rho else -1.0))


def _rows(result: Robustness, *, full: bool) -> tuple[list[str], list[list[str]]]:
    levels = list(result.levels)
    rho = label("rho")
    head = ["router", f"{label('accuracy')} [95% CI]", f"{rho} [95% CI]", *[f"{rho} {lv}" for lv in levels],
            "weakest level"]
    if full:
        head.append("invariance")
    rows = []
    for r in ranked(result):
        row = [r.spec, _with_ci(r.accuracy, r.accuracy_ci), _with_ci(r.rho, r.rho_ci),
               *[_num(r.rho_by_level.get(lv)) for lv in levels], r.weakest_level() or "-"]
        if full:
            row.append(invariance_cell(r))
        rows.append(row)
    return head, rows


def _head_line(result: Robustness) -> str:
    d, sp = result.data, result.provenance.split
    kind = sp.get("kind", "?") if isinstance(sp, dict) else sp
    per = result.perturbations
    return (f"{d['name']} (hash {str(d['content_hash'])[:12]}), split {kind}, {result.n_test} test queries, "
            f"{per.get('n_variants_used', '?')} variants (levels {', '.join(result.levels)}; p = {result.p}), "
            f"encoder {result.provenance.encoder}, seed {result.provenance.seed}; anchors: fixed router 1, "
            f"uniform random 1/N = {result.uniform_rho:.4f}")


def robustness_text(result: Robustness) -> str:
    """The terminal's fixed-width table (most robust router first), the run on top and the invariance status and
    skipped routers below."""
    head, rows = _rows(result, full=False)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = [_head_line(result), line(head), *(line(r) for r in rows)]
    out += _invariance_lines(result)
    if "review" in result.perturbations:
        from routerlab.perturb.review import review_lines

        out += review_lines(result.perturbations["review"])
    out += [f"skipped {k}: {v}" for k, v in result.skipped.items()]
    out += [f"note    {n}" for n in result.notes]
    return "\n".join(out)


def _invariance_lines(result: Robustness) -> list[str]:
    if not result.invariance_tested:
        return [f"invariance: {UNTESTED_NOTE}"]
    first = result.results[0].invariance
    lines = [f"invariance: optimal actor (set) changed for {_pct(first['changed_share'])} "
             f"{_pct_ci(first['changed_share_ci'])} of {first['n_known']} variants with outcomes "
             f"(argmax: {_pct(first['changed_share_argmax'])})"]
    for lv, b in first["by_level"].items():
        lines.append(f"  {lv}: {_pct(b['changed_share'])} {_pct_ci(b['changed_share_ci'])} of {b['n_known']} "
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
        rows.append([lv, str(b["n_perturbations"]), str(b["n_known"]),
                     f"{_pct(b['changed_share'])} {_pct_ci(b['changed_share_ci'])}", _pct(b["changed_share_argmax"]),
                     *[_num(p["rho_invariant"]) for p in per]])
    return Table(head, rows)


def robustness_markdown(result: Robustness, figures: list[str] | None = None) -> str:
    """``robustness.md``: the run, the table, the invariance check (or that it is untested) and the figures."""
    head, rows = _rows(result, full=True)
    blocks: list[Any] = [Paragraph(_head_line(result) + "."), Table(head, rows)]
    if result.invariance_tested:
        blocks.append(Paragraph("Invariance check (hse-paper-review.json, SPEC 3): the optimal actor of a query is "
                                "its set of actors within 95% of its best score (SPEC 4); a variant changes it when "
                                "that set differs from the original's. rho on the invariant variants measures the "
                                "router where its assumption holds."))
        tab = invariance_table(result)
        if tab is not None:
            blocks.append(tab)
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
