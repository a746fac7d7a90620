"""Two-model reports (SPEC 6; routerxbench Tables 1-2 layout) on a hand-made result dict: the exact Markdown
header and cells, bold on the best non-oracle router, the CSV's long rows, and one plot per dataset whatever
its name."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab.reports.two_model_report import (
    csv_rows,
    csv_text,
    markdown_tables,
    plot_call_rate_curves,
    plot_file_name,
    write_two_model_report,
)

ID = ["mmlu", "arc|challenge"]
OOD = ["math/algebra ?*"]
X = np.linspace(0, 1, 101)


def cell(auroc: float | None, ci: tuple[float, float] | None, lpm: float = 0.5, hcr: float = 0.1,
         n: int = 40) -> dict[str, Any]:
    """One dataset's metrics; ``None`` stands where the JSON writes null (NaN)."""
    return {"n": n, "auroc": auroc, "auroc_ci": list(ci) if ci else [None, None], "lpm": lpm,
            "lpm_ci": [lpm - 0.05, lpm + 0.05], "mpm": 0.6, "mpm_ci": [0.55, 0.65], "hcr": hcr,
            "hcr_ci": [hcr / 2, hcr * 2], "auc": 0.62, "auc_ci": [0.6, 0.64], "apgr": 0.3, "apgr_ci": [0.2, 0.4],
            "perf_small": 0.4, "perf_large": 0.8}


def router(spec: str, cells: dict[str, dict[str, Any]]) -> dict[str, Any]:
    def mean(names: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for m in ("auroc", "lpm", "hcr"):
            vals = [cells[d][m] for d in names]
            out[m] = None if None in vals else float(np.mean(vals))
            out[f"{m}_ci"] = [out[m] - 0.01, out[m] + 0.01] if out[m] is not None else [None, None]
        return out

    return {"router": spec, "datasets": cells, "id_mean": mean(ID), "ood_mean": mean(OOD)}


def result() -> dict[str, Any]:
    """Four routers on two in-domain and one out-of-domain dataset. Hand-chosen so that: the oracle is highest
    everywhere (never bold), the probe is best on mmlu, knn on arc|challenge, and knn and random tie on the OOD
    LPM (both bold)."""
    results = [
        router("oracle", {"mmlu": cell(1.0, (1.0, 1.0), lpm=0.9, hcr=0.7),
                          "arc|challenge": cell(1.0, (1.0, 1.0), lpm=0.9, hcr=0.7),
                          "math/algebra ?*": cell(1.0, (1.0, 1.0), lpm=0.9, hcr=0.7)}),
        router("random", {"mmlu": cell(0.5, (0.45, 0.55)), "arc|challenge": cell(0.5, (0.44, 0.56)),
                          "math/algebra ?*": cell(0.5, (0.4, 0.6), lpm=0.61)}),
        router("knn:k=5", {"mmlu": cell(0.6123, (0.55, 0.67)), "arc|challenge": cell(0.58, (0.5, 0.66), hcr=0.2),
                           "math/algebra ?*": cell(0.52, (0.45, 0.59), lpm=0.61)}),
        router("probe-dirichlet", {"mmlu": cell(0.7202, (0.70, 0.74)), "arc|challenge": cell(0.55, (0.5, 0.6)),
                                   "math/algebra ?*": cell(None, None, lpm=0.6)}),
    ]
    curves = {r["router"]: {d: {"x": X.tolist(), "phi": (0.4 + 0.4 * X ** (0.5 + i)).tolist()}
                            for d in [*ID, *OOD]} for i, r in enumerate(results)}
    return {"routerlab_version": "0.1.0", "data": {"name": "hand"}, "split": {"kind": "random"}, "seed": 0,
            "routers": [r["router"] for r in results], "small": "qwen-1.5b", "large": "gemini-1.5-pro",
            "convention": "routerlab", "bands": {"lpm": [0.25, 0.3], "rp": [0.85, 0.95]}, "n_boot": 200,
            "id_datasets": ID, "ood_datasets": OOD, "dropped": {}, "signals": None, "results": results,
            "curves": curves}


def _table(md: str, title: str) -> list[str]:
    """The Markdown table lines that follow the bold ``title`` line."""
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"**{title}"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def test_markdown_layout_header_and_cells() -> None:
    md = markdown_tables(result())
    auroc = _table(md, "AUROC")
    assert auroc[0] == r"| router | mmlu | arc\|challenge | ID avg | math/algebra ?* | OOD avg |"
    assert auroc[1] == "|---|---|---|---|---|---|"
    probe = next(r for r in auroc if r.startswith("| probe-dirichlet "))
    cells = [c.strip() for c in probe.strip("|").split(" | ")]
    # 0.7202 [0.70, 0.74] in percent, best non-oracle on mmlu: bold; its OOD AUROC is null: "-" and "[-]"
    assert cells[1] == "**72.02 [70.00, 74.00]**"
    assert cells[2] == "55.00 [50.00, 60.00]"
    assert cells[4] == "- [-]" and cells[5] == "- [-]"
    titles = [line for line in md.splitlines() if line.startswith("**")]  # one titled table per metric, in order
    assert titles == ["**AUROC (router ability) (%)**", "**LPM (low-band performance mean) (%)**",
                      "**HCR (high-band call rate) (%)**"]
    assert "(%)" in md and "Small model `qwen-1.5b`, large model `gemini-1.5-pro`" in md
    assert "`mmlu` 40" in md and "[0.25, 0.3]" in md and "[0.85, 0.95]" in md and "`routerlab`" in md


def test_bold_marks_the_best_non_oracle_router_per_column() -> None:
    md = markdown_tables(result())
    auroc = {r.split(" | ")[0].strip("| "): [c.strip() for c in r.strip("|").split(" | ")][1:]
             for r in _table(md, "AUROC")[2:]}
    bold = {name: [c.startswith("**") for c in cells] for name, cells in auroc.items()}
    assert bold["oracle"] == [False] * 5  # 100 everywhere, but a bound
    assert bold["probe-dirichlet"][0] and not bold["knn:k=5"][0]  # mmlu
    assert bold["knn:k=5"][1] and not bold["probe-dirichlet"][1]  # arc|challenge: 58 > 55 > 50
    assert bold["knn:k=5"][3] and not bold["random"][3]  # OOD: 52 > 50, the probe has none
    # ID avg: probe (72.02 + 55) / 2 = 63.51 beats knn (61.23 + 58) / 2 = 59.615 (59.61 in binary floating point)
    assert auroc["probe-dirichlet"][2] == "**63.51 [62.51, 64.51]**" and auroc["knn:k=5"][2].startswith("59.61 [")
    lpm = {r.split(" | ")[0].strip("| "): r for r in _table(md, "LPM")[2:]}
    ood_lpm = {k: [c.strip() for c in v.strip("|").split(" | ")][4] for k, v in lpm.items()}
    assert ood_lpm["knn:k=5"] == ood_lpm["random"] == "**61.00 [56.00, 66.00]**"  # a tie: both bold
    assert not ood_lpm["probe-dirichlet"].startswith("**")


def test_json_scale_on_request_and_unknown_metric() -> None:
    md = markdown_tables(result(), metrics=("auroc",), percent=False)
    assert "**0.7202 [0.7000, 0.7400]**" in md and "(0-1)" in md and "LPM" not in md.split("\n\n", 1)[1]
    with pytest.raises(ValueError, match="unknown two-model metrics"):
        markdown_tables(result(), metrics=("acc",))


def test_csv_rows_long_format() -> None:
    rows = csv_rows(result())
    # 4 routers x (2 ID + ID avg + 1 OOD + OOD avg) x 6 metrics
    assert len(rows) == 4 * 5 * 6
    assert list(rows[0]) == ["router", "dataset", "domain", "metric", "value", "lo", "hi"]
    knn = {(r["dataset"], r["metric"]): r for r in rows if r["router"] == "knn:k=5"}
    assert knn[("mmlu", "auroc")] == {"router": "knn:k=5", "dataset": "mmlu", "domain": "id", "metric": "auroc",
                                      "value": 0.6123, "lo": 0.55, "hi": 0.67}
    assert knn[("OOD avg", "lpm")]["domain"] == "ood" and knn[("OOD avg", "lpm")]["value"] == pytest.approx(0.61)
    assert knn[("ID avg", "mpm")]["value"] is None  # the hand-made means carry no MPM: unknown, not 0
    probe = next(r for r in rows if r["router"] == "probe-dirichlet" and r["dataset"] == OOD[0]
                 and r["metric"] == "auroc")
    assert probe["value"] is None and probe["lo"] is None
    parsed = list(csv.DictReader(io.StringIO(csv_text(result()))))
    assert len(parsed) == 120 and parsed[0]["dataset"] == "mmlu"
    no_ood = {**result(), "ood_datasets": []}
    assert len(csv_rows(no_ood)) == 4 * 3 * 6
    assert "OOD avg" not in markdown_tables(no_ood)


def test_plot_file_names_are_safe_and_distinct() -> None:
    assert plot_file_name("mmlu") == "call_rate_mmlu.png"
    odd = ["a/b", "a_b", "..", "", "../../etc", "x" * 300, "é"]
    taken: set[str] = set()
    names = []
    for d in odd:
        names.append(plot_file_name(d, taken))
        taken.add(names[-1])
    assert len(set(names)) == len(odd)
    assert all("/" not in n and not n.startswith(".") and len(n) < 120 for n in names)
    assert names[1] == "call_rate_a_b.png" and names[0].startswith("call_rate_a_b-")


def test_plots_written_for_odd_dataset_names(tmp_path: Path) -> None:
    res = result()
    res["ood_datasets"] = [*OOD, "..", "cost $x^{$ (\\bad"]  # a "$" must not start matplotlib's math mode
    for r in res["results"]:
        for d in res["ood_datasets"][1:]:
            r["datasets"][d] = cell(0.5, (0.4, 0.6))
    res["results"][2]["router"] = "knn:k=$5$"
    res["curves"]["knn:k=$5$"] = res["curves"].pop("knn:k=5")
    out = tmp_path / "plots"
    paths = plot_call_rate_curves(res, out)
    assert len(paths) == 5 and len({p.name for p in paths}) == 5
    for p in paths:
        assert p.parent == out and p.stat().st_size > 1000 and p.read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in paths)  # no temp file left


def test_write_two_model_report(tmp_path: Path) -> None:
    paths = write_two_model_report(result(), tmp_path)
    assert paths[0].name == "results.csv" and paths[-1].name == "tables.md"
    md = paths[-1].read_text()
    assert md.startswith("# Two-model routing: qwen-1.5b -> gemini-1.5-pro")
    assert "**MPM" in md and "![call_rate_mmlu.png](call_rate_mmlu.png)" in md


# ------------------------------------------------------------------------------------------------ audit section
def test_section_is_registered_before_robustness() -> None:
    from routerlab.reports.audit import section_names

    names = section_names()
    assert "two-model" in names and names.index("two-model") < names.index("robustness")


def test_section_skips_a_table_without_a_pair(tmp_path: Path) -> None:
    from routerlab.datasets import demo
    from routerlab.reports.audit import run_audit

    rec = run_audit(demo(120, seed=1), tmp_path / "a", only=["two-model"])
    sec = rec["sections"]["two-model"]
    assert sec["measured"] is False and "no small/large pair: pass `--small A --large B`" in sec["reason"]
    report = (tmp_path / "a" / "report.md").read_text()
    body = report.split("## Two-model routing", 1)[1].split("\n\n")[1]
    assert body.startswith("Skipped: no small/large pair") and "\n" not in body.strip()
    stale = demo(120, seed=1)
    stale = type(stale)(queries=stale.queries, actors=stale.actors, score=stale.score, name="stale",
                        meta={"two_model": {"small": "gone", "large": "frontier-235b"}})
    sec = run_audit(stale, tmp_path / "b", only=["two-model"])["sections"]["two-model"]
    assert sec["measured"] is False and "'gone' is not an actor" in sec["reason"]


def test_section_runs_the_protocol_on_a_designated_table(tmp_path: Path) -> None:
    from routerlab import join
    from routerlab.datasets import demo
    from routerlab.reports.audit import run_audit

    table = join([demo(200, seed=2)], small="tiny-2b", large="frontier-235b", name="pair")
    rec = run_audit(table, tmp_path / "a", only=["two-model"])
    sec = rec["sections"]["two-model"]
    assert sec["measured"] is True and sec["routers"] == ["oracle", "random", "best-single", "knn", "linear"]
    res = sec["two_model"]
    assert (res["small"], res["large"], res["n_boot"]) == ("tiny-2b", "frontier-235b", 200)
    by = {r["router"]: r for r in res["results"]}
    # anchors (SPEC 6): the oracle's AUROC is 1 and best-single's (a constant score) 0.5, on every dataset whose
    # test part has both labels (small model right on some queries, wrong on others); undefined (null) otherwise
    test = table.queries.split == "test"
    both_labels = 0
    for name, d in by["oracle"]["datasets"].items():
        rows = test & (table.queries.dataset == name)
        if np.unique(table.score[rows, 0]).size == 2:
            both_labels += 1
            assert d["auroc"] == pytest.approx(1.0)
            assert by["best-single"]["datasets"][name]["auroc"] == pytest.approx(0.5)
        else:
            assert d["auroc"] is None or np.isnan(d["auroc"])
    assert both_labels >= 3
    # Perf_S and Perf_L per dataset = each model's mean score on the audit's test queries of that dataset
    for name, d in by["knn"]["datasets"].items():
        rows = test & (table.queries.dataset == name)
        assert d["n"] == int(rows.sum())
        assert d["perf_small"] == pytest.approx(float(table.score[rows, 0].mean()))
        assert d["perf_large"] == pytest.approx(float(table.score[rows, table.actor_names.index("frontier-235b")]
                                                      .mean()))
        assert res["curves"]["knn"][name]["phi"][0] == pytest.approx(d["perf_small"])
    report = (tmp_path / "a" / "report.md").read_text()
    assert "**AUROC (router ability) (%)**" in report and "**HCR (high-band call rate) (%)**" in report
    assert "| router | " + " | ".join(res["id_datasets"]) + " | ID avg |" in report
    assert len(sec["figures"]) == len(res["id_datasets"])
    for fig in sec["figures"]:
        assert (tmp_path / "a" / fig).stat().st_size > 1000 and f"]({fig})" in report
