"""Tables, CSV rows and plots of a two-model run (SPEC 6; routerxbench-probedirichlet.txt Tables 1-2), all pure
functions of the run's result dict (``TwoModelResult.to_dict()``, the two-model JSON).

Tables follow the paper's layout: one per metric, rows = routers, columns = the in-domain datasets, "ID avg", the
out-of-domain datasets, "OOD avg"; each cell "value [lo, hi]" with its bootstrap interval, the best router that is
not an oracle bound in bold per column. Scale: **percent** by default, like the paper's tables (AUROC 72.02 means
0.7202 in the JSON); every table's title says so, and ``percent=False`` keeps the JSON's 0-1 scale. Every metric
shown is higher-is-better (AUROC, LPM, MPM, HCR = 1 - mean call rate in the high band, AUC, APGR), so "best" is
the largest value as shown.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from routerlab.metrics import catalog
from routerlab.metrics.bootstrap import MIN_QUERIES, unavailable
from routerlab.reports.blocks import Block, Figure, Paragraph, Section, Table
from routerlab.reports.files import save_figure, write_text
from routerlab.reports.render import block_markdown, render_markdown

METRICS: tuple[str, ...] = ("auroc", "lpm", "mpm", "hcr", "auc", "apgr")
"""The per-dataset metrics with a bootstrap interval, in the order the CSV lists them."""

CSV_FIELDS = ("router", "dataset", "domain", "metric", "value", "lo", "hi")
ID_AVG, OOD_AVG = "ID avg", "OOD avg"


# ------------------------------------------------------------------------------------------------ reading the dict
def _num(v: Any) -> float:
    """A JSON number as float; null (the JSON's NaN) and anything missing as NaN."""
    return math.nan if v is None else float(v)


def _ci(values: dict[str, Any] | None, metric: str) -> tuple[float, float]:
    ci = (values or {}).get(f"{metric}_ci")
    if not ci or len(ci) != 2:
        return math.nan, math.nan
    return _num(ci[0]), _num(ci[1])


def columns(result: dict[str, Any]) -> list[tuple[str, str]]:
    """The table's columns as (label, domain): ID datasets, "ID avg", then OOD datasets and "OOD avg" when there
    are any; domain is ``id`` or ``ood``."""
    cols = [(d, "id") for d in result.get("id_datasets", [])] + [(ID_AVG, "id")]
    ood = list(result.get("ood_datasets", []) or [])
    if ood:
        cols += [(d, "ood") for d in ood] + [(OOD_AVG, "ood")]
    return cols


def cell_values(router: dict[str, Any], column: str, metric: str) -> tuple[float, float, float]:
    """(value, lo, hi) of ``metric`` for one router's result in one column (a dataset or an average)."""
    if column == ID_AVG:
        src = router.get("id_mean")
    elif column == OOD_AVG:
        src = router.get("ood_mean")
    else:
        src = (router.get("datasets") or {}).get(column)
    if not src:
        return math.nan, math.nan, math.nan
    return (_num(src.get(metric)), *_ci(src, metric))


def is_bound(spec: str) -> bool:
    """True for the oracle bound (which reads test outcomes), left out of "best"."""
    return spec.split(":", 1)[0].strip().startswith("oracle")


def n_per_dataset(result: dict[str, Any]) -> dict[str, int]:
    """Evaluated queries per dataset (the same for every router; the first router that has the dataset)."""
    out: dict[str, int] = {}
    for r in result.get("results", []):
        for name, d in (r.get("datasets") or {}).items():
            if name not in out and d and d.get("n") is not None:
                out[name] = int(d["n"])
    return out


def column_sizes(result: dict[str, Any]) -> dict[str, int]:
    """The fewest queries each column's intervals rest on: a dataset's own count, an average's smallest dataset."""
    n = n_per_dataset(result)
    out = dict(n)
    for avg, names in ((ID_AVG, result.get("id_datasets", [])), (OOD_AVG, result.get("ood_datasets", []) or [])):
        known = [n[d] for d in names if d in n]
        if known:
            out[avg] = min(known)
    return out


# ------------------------------------------------------------------------------------------------ tables
def _fmt(v: float, percent: bool) -> str:
    if math.isnan(v):
        return "-"
    return f"{100 * v:.2f}" if percent else f"{v:.4f}"


def format_cell(value: float, lo: float, hi: float, percent: bool = True, n: int | None = None) -> str:
    """``value [lo, hi]`` on the table's scale; ``-`` for a missing value, ``[-]`` for a missing interval, and
    ``n/a (n=12 < 30)`` for one left out because the ``n`` queries it would rest on are too few."""
    if n is not None and n < MIN_QUERIES:
        return f"{_fmt(value, percent)} {unavailable(n)}"
    interval = "[-]" if math.isnan(lo) or math.isnan(hi) else f"[{_fmt(lo, percent)}, {_fmt(hi, percent)}]"
    return f"{_fmt(value, percent)} {interval}"


def _md(text: str) -> str:
    """A cell's text safe inside a Markdown table (a ``|`` would split the cell)."""
    return text.replace("|", "\\|")


def metric_table(result: dict[str, Any], metric: str, percent: bool = True) -> Table:
    """One metric's table: rows = routers in run order, columns = :func:`columns`; the best non-oracle value of
    each column, as shown, in bold (ties all bold)."""
    cols = columns(result)
    routers = result.get("results", [])
    sizes = column_sizes(result)
    shown = [[format_cell(*cell_values(r, c, metric), percent=percent, n=sizes.get(c)) for c, _ in cols]
             for r in routers]
    for j, (c, _) in enumerate(cols):
        values = {i: _fmt(cell_values(r, c, metric)[0], percent) for i, r in enumerate(routers)
                  if not is_bound(str(r["router"]))}
        known = {i: float(v) for i, v in values.items() if v != "-"}
        if known:
            best = max(known.values())
            for i, v in known.items():
                if v == best:
                    shown[i][j] = f"**{shown[i][j]}**"
    header = ["router", *[_md(c) for c, _ in cols]]
    return Table(header, [[_md(str(r["router"])), *row] for r, row in zip(routers, shown, strict=True)])


def convention_line(result: dict[str, Any], percent: bool = True) -> str:
    """What every table shows: the two models, n per dataset, bands, curve convention, intervals and scale."""
    n = n_per_dataset(result)
    bands = result.get("bands") or {}
    lpm = bands.get("lpm", [math.nan, math.nan])
    rp = bands.get("rp", [math.nan, math.nan])
    ood = list(result.get("ood_datasets", []) or [])
    per = "; ".join(
        f"{dom} " + ", ".join(f"`{d}` {n.get(d, '?')}" for d in names)
        for dom, names in (("in-domain", list(result.get("id_datasets", []))), ("out-of-domain", ood)) if names)
    scale = ("values in percent (the JSON's 0-1 values x 100), as in the paper's tables" if percent
             else "values on the JSON's 0-1 scale")
    return (f"Small model `{result.get('small', '?')}`, large model `{result.get('large', '?')}`. Queries evaluated "
            f"per dataset: {per or '-'} (in-domain: the test part of the split; out-of-domain: every query). Bands: "
            f"LPM over call rates [{lpm[0]}, {lpm[1]}], HCR and MPM at relative performance [{rp[0]}, {rp[1]}]; "
            f"curve convention `{result.get('convention', '?')}`. Each cell is the value with its 95% percentile "
            f"bootstrap interval ({result.get('n_boot', '?')} resamples of the dataset's queries); the averages are "
            f"over datasets. **Bold**: the best router per column, the oracle bound left out; {scale}.")


def table_blocks(result: dict[str, Any], metrics: Sequence[str] = ("auroc", "lpm", "hcr"),
                 percent: bool = True) -> list[Block]:
    """The convention line, then per metric a title line and its table: what the audit section and
    :func:`markdown_tables` both show."""
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown two-model metrics {unknown}; known: {list(METRICS)}")
    blocks: list[Block] = [Paragraph(convention_line(result, percent))]
    unit = " (%)" if percent else " (0-1)"
    for m in metrics:
        blocks.append(Paragraph(f"**{catalog.metric_info(m).long_label}{unit}**"))
        blocks.append(metric_table(result, m, percent))
    return blocks


def markdown_tables(result: dict[str, Any], metrics: Sequence[str] = ("auroc", "lpm", "hcr"),
                    percent: bool = True) -> str:
    """The routerxbench Tables 1-2 layout as Markdown: a line on the run, then one table per metric."""
    return "\n\n".join(block_markdown(b) for b in table_blocks(result, metrics, percent)) + "\n"


# ------------------------------------------------------------------------------------------------ CSV
def csv_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Long format, on the JSON's 0-1 scale: one row per (router, column of the tables, metric of
    :data:`METRICS`) with router, dataset ("ID avg"/"OOD avg" for the averages), domain (id/ood), metric, value,
    lo, hi (None where unknown)."""
    rows: list[dict[str, Any]] = []
    for r in result.get("results", []):
        for col, domain in columns(result):
            for m in METRICS:
                v, lo, hi = cell_values(r, col, m)
                rows.append({"router": str(r["router"]), "dataset": col, "domain": domain, "metric": m,
                             "value": None if math.isnan(v) else v, "lo": None if math.isnan(lo) else lo,
                             "hi": None if math.isnan(hi) else hi})
    return rows


def csv_text(result: dict[str, Any]) -> str:
    """:func:`csv_rows` as CSV text (empty cells where unknown)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(CSV_FIELDS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_rows(result))
    return buf.getvalue()


# ------------------------------------------------------------------------------------------------ plots
def plot_file_name(dataset: str, taken: set[str] | None = None, prefix: str = "call_rate_") -> str:
    """``<prefix><name>.png``, safe for any dataset name: characters other than letters, digits, ``.``, ``_``
    and ``-`` become ``_``, and a short hash of the real name is added whenever that changed it (or it would
    collide with a name in ``taken``), so two datasets never share a file."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", dataset).strip("._-")[:80]
    if not slug or slug != dataset or (taken is not None and f"{prefix}{slug}.png" in taken):
        slug = f"{slug or 'dataset'}-{hashlib.sha256(dataset.encode()).hexdigest()[:8]}"
    return f"{prefix}{slug}.png"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plain(text: Any) -> str:
    """``text`` shown as it is in a plot: a ``$`` would start matplotlib's math mode (and a bad formula fails)."""
    return str(text).replace("$", r"\$")


def _curve(result: dict[str, Any], spec: str, dataset: str) -> tuple[list[float], list[float]] | None:
    c = ((result.get("curves") or {}).get(spec) or {}).get(dataset)
    if not c or not c.get("x"):
        return None
    return [_num(v) for v in c["x"]], [_num(v) for v in c["phi"]]


def plot_call_rate_curve(result: dict[str, Any], dataset: str, path: Path) -> Path:
    """One dataset's PNG: every router's Phi(x) (legend with its AUROC), the random-routing line from
    (0, Perf_S) to (1, Perf_L), the LPM call-rate band shaded and the HCR levels tau_1, tau_2 marked."""
    plt = _pyplot()
    first: dict[str, Any] = next((r["datasets"][dataset] for r in result.get("results", [])
                  if dataset in (r.get("datasets") or {})), {})
    perf_s, perf_l = _num(first.get("perf_small")), _num(first.get("perf_large"))
    bands = result.get("bands") or {}
    lpm = [float(v) for v in bands.get("lpm", (0.25, 0.30))]
    rp = [float(v) for v in bands.get("rp", (0.85, 0.95))]
    fig, ax = plt.subplots(figsize=(7.4, 4.6), layout="constrained")
    ax.axvspan(lpm[0], lpm[1], color="tab:blue", alpha=0.12, label=f"LPM band (call rate {lpm[0]}-{lpm[1]})")
    if not (math.isnan(perf_s) or math.isnan(perf_l)):
        ax.plot([0.0, 1.0], [perf_s, perf_l], color="grey", linestyle="--", linewidth=1,
                label=f"random routing ({perf_s:.3f} to {perf_l:.3f})")
        taus = [perf_s + r * (perf_l - perf_s) for r in rp]
        ax.axhspan(min(taus), max(taus), color="tab:red", alpha=0.06,
                   label=f"HCR levels: relative performance {rp[0]}-{rp[1]}")
        for i, (r, tau) in enumerate(zip(rp, taus, strict=True), 1):
            ax.axhline(tau, color="tab:red", linestyle=":", linewidth=1)
            ax.text(0.005, tau, f" $\\tau_{i}$ (rp {r})", va="bottom", ha="left", fontsize=7, color="tab:red")
    cmap = plt.get_cmap("tab10")
    for i, r in enumerate(result.get("results", [])):
        spec = str(r["router"])
        curve = _curve(result, spec, dataset)
        if curve is None:
            continue
        auroc = _num(((r.get("datasets") or {}).get(dataset) or {}).get("auroc"))
        label = f"{_plain(spec)} (AUROC {'-' if math.isnan(auroc) else f'{auroc:.3f}'})"
        ax.plot(curve[0], curve[1], color=cmap(i % 10), linewidth=1.4, label=label,
                linestyle="-." if is_bound(spec) else "-")
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel(f"call rate: share of queries sent to the large model {_plain(result.get('large', '?'))}")
    ax.set_ylabel("Phi: mean score of the answers")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    domain = "out-of-domain" if dataset in (result.get("ood_datasets") or []) else "in-domain"
    n = n_per_dataset(result).get(dataset)
    ax.set_title(f"Call-rate curves: {_plain(dataset)} ({domain}, n = {n if n is not None else '?'}); small model "
                 f"{_plain(result.get('small', '?'))}", fontsize=9)
    save_figure(fig, path)
    plt.close(fig)
    return path


def plot_call_rate_curves(result: dict[str, Any], out_dir: str | Path, prefix: str = "call_rate_") -> list[Path]:
    """One PNG per dataset (in-domain, then out-of-domain) in ``out_dir``, named by :func:`plot_file_name`,
    each written atomically; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    paths = []
    for d in [*result.get("id_datasets", []), *(result.get("ood_datasets") or [])]:
        name = plot_file_name(str(d), taken, prefix)
        taken.add(name)
        paths.append(plot_call_rate_curve(result, str(d), out / name))
    return paths


def write_two_model_report(result: dict[str, Any], out_dir: str | Path,
                           metrics: Sequence[str] = ("auroc", "lpm", "mpm", "hcr"), percent: bool = True
                           ) -> list[Path]:
    """``results.csv`` (long format), the curve PNGs and ``tables.md`` (the tables and figures; written last) in
    ``out_dir``, each atomically; returns their paths. ``routerlab two-model -o`` writes these beside its JSON."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "results.csv"]
    write_text(paths[0], csv_text(result))
    plots = plot_call_rate_curves(result, out)
    paths += plots
    sec = Section(f"Two-model routing: {result.get('small', '?')} -> {result.get('large', '?')}",
                  table_blocks(result, metrics, percent), figures=[Figure(p.name) for p in plots], level=1)
    md = out / "tables.md"
    write_text(md, render_markdown([sec]))
    paths.append(md)
    return paths
