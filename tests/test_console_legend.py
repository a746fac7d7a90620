"""Every console table says what its abbreviated columns are (issue 21: ``v_b``, ``e_p``, LPM and HCR were printed
with no legend). The legend line under each table is built from the metric catalog's long names, so it cannot
drift from the catalog; these tests read the columns off the printed table and look each one up."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from routerlab.cli import main
from routerlab.cli.results_cmd import board_text
from routerlab.experiments.store import BoardRow
from routerlab.metrics.catalog import GLOSSARY, abbreviations, glossary_entry, legend_line, metric_info

FAST = ["--n-boot", "40"]


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERLAB_PROGRESS", "0")


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 0
    return capsys.readouterr().out


def legends(out: str) -> str:
    return "\n".join(line for line in out.splitlines() if line.startswith("legend  "))


def cells(line: str) -> list[str]:
    return [c for c in re.split(r"\s{2,}", line.strip()) if c]


def title_of(key: str) -> str:
    """The catalog's long name of an entry named ``key`` (its key or its label); empty when it has none."""
    if key in GLOSSARY:
        return glossary_entry(key).title
    return next((glossary_entry(k).title for k, (label, _) in GLOSSARY.items() if label == key), "")


def explained(out: str, shown: str, key: str | None = None) -> bool:
    """Whether the legend under ``out``'s table names column ``shown`` with the catalog's long name of ``key``."""
    title = title_of(key or shown)
    return bool(title) and f"{shown} = {title}" in legends(out)


def check_columns(out: str, columns: list[str]) -> None:
    """Every column the catalog gives a long name is explained in the legend under the table."""
    titled = [c for c in columns if title_of(c)]
    assert titled, columns
    assert all(explained(out, c) for c in titled), (titled, legends(out))


def test_abbreviations_read_the_catalog() -> None:
    assert abbreviations(["router", "v_b", "mean_cost", "e_p", "v_b"]) == (
        f"v_b = {metric_info('v_b').title}; e_p = {metric_info('e_p').title} (bits)")
    assert abbreviations(["AUROC", ("p=P", "oracle-p")]) == (
        "AUROC = router ability; p=P = mu_o of the oracle with probability p, else a random actor")
    assert legend_line(["router", "a dataset"]) == []
    assert legend_line([], "r1..r3 = rounds") == ["legend  r1..r3 = rounds"]


def test_evaluate_and_voyager(capsys: pytest.CaptureFixture[str]) -> None:
    out = run(["evaluate", "--routers", "best-single,knn,thompson", *FAST], capsys)
    header = next(line for line in out.splitlines() if line.startswith("router "))
    columns = [c.removesuffix(" [95% CI]") for c in cells(header)[1:-1]]
    assert {"mu_o", "v_b", "e_p", "l_dcg", "mu_o_greedy"} <= set(columns)
    check_columns(out, columns)
    out = run(["evaluate", "--routers", "best-single,knn", *FAST, "--protocol", "voyager", "--rounds", "2"], capsys)
    assert explained(out, "L-DCG", "l_dcg") and "r1..r2 = rounds 1 to 2" in legends(out)


def test_scaling_groups_society(capsys: pytest.CaptureFixture[str]) -> None:
    out = run(["scaling", "--samples", "3", "--m", "2,3"], capsys)
    assert explained(out, "m", "pool size m") and explained(out, "p=P", "oracle-p")
    assert explained(out, "best-single", "best_single")
    out = run(["groups", "--routers", "best-single", "--m", "3", "--draws", "5", *FAST], capsys)
    check_columns(out, ["mu_o", "v_b"])
    out = run(["society"], capsys)
    assert explained(out, "HSE", "hse")


def test_robustness(capsys: pytest.CaptureFixture[str]) -> None:
    out = run(["robustness", "--routers", "best-single", "--levels", "character", "--variants", "2", "--similarity",
               "tfidf", *FAST], capsys)  # tf-idf: the character level has no similarity filter; MiniLM adds a minute
    assert explained(out, "rho") and "rho LEVEL = rho on that level's variants" in legends(out)


def test_ope(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "test.csv"
    run(["log", "--part", "test", "-o", str(log)], capsys)
    out = run(["ope", str(log), "--routers", "best-single", *FAST], capsys)
    header = next(line for line in out.splitlines() if line.strip().startswith("metric "))
    rows = [cells(line)[0] for line in out.splitlines() if line.startswith("  ") and not line.strip().startswith(
        "metric ")]
    check_columns(out, [*cells(header)[1:], *rows])
    assert all(explained(out, est) for est in ("IPS", "SNIPS", "DR")) and explained(out, "ESS")


def test_two_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.protocols.test_two_model import synthetic

    synthetic().save(tmp_path / "t")
    out = run(["two-model", str(tmp_path / "t"), "--small", "S", "--large", "L", "--routers", "oracle,best-single",
               "--ood", "c", "--split", "given", "--boot", "50"], capsys)
    blocks = [cells(line)[0] for line in out.splitlines() if line.endswith("OOD avg")]
    assert blocks and all(explained(out, b) for b in blocks)  # each table's metric: AUROC, LPM, HCR
    assert explained(out, "ID avg") and explained(out, "OOD avg")


def test_results_show_board() -> None:
    row = BoardRow("demo", "abc", "given", "full", "{}", "knn", 2, 0.8, 0.79, 0.81, 0.75, 0.85)
    text = board_text([row], "v_b")
    assert "v_b mean" in text.splitlines()[0]
    assert explained(text, "v_b mean", "v_b")
