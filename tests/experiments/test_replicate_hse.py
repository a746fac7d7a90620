"""examples/replicate/hse.toml runs with --quick (CI's slice: MMLU-Pro sampled to 500 questions, its max-HSE
subset and its SA, RD and RD+SA societies, the two KNN routers, character and syntax variants) and stores what the
replication reads: the synthetic societies' exact HSE, the greedy curve with its 90/95% sizes, and per router and
society accuracy, the paper's perturbed accuracy, rho and kappa_rho, whole and per level."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from routerlab.cli import main
from routerlab.experiments.schema import load_experiment
from routerlab.experiments.store import query
from routerlab.protocols.robustness import RobustnessSettings
from routerlab.protocols.society import SocietySettings
from tests import missing_requirement

REPO = Path(__file__).resolve().parents[2]
HSE = REPO / "examples" / "replicate" / "hse.toml"
INVARIANCE = REPO / "examples" / "replicate" / "hse-invariance.toml"
PROMPTED = REPO / "examples" / "replicate" / "hse-prompted.toml"
SOCIETIES = ["mmlu-pro", "mmlu-pro-max", "mmlu-pro-rd", "mmlu-pro-sa", "mmlu-pro-rdsa"]


def test_quick_runs_and_stores_every_figure_s_numbers(shared_data: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """One quick run (the import of MMLU-Pro's ten zip files included: the test's cache directory is empty)."""
    if shared_data.resolve() != (REPO.parent / "shared" / "data").resolve():
        missing_requirement(f"hse.toml reads ../shared/data next to the repository, not {shared_data}")
    store = tmp_path / "store"
    assert main(["run", str(HSE), "--quick", "--store", str(store), "--backend", "serial"]) == 0
    out = capsys.readouterr().out
    assert "compared numbers agree" in out and "peak memory" in out
    # the quick run left out the other pools and the prompted router (no model loads in CI)
    _, tables = query(store, "SELECT DISTINCT table_name FROM results ORDER BY 1")
    assert [t for (t,) in tables] == sorted(SOCIETIES)
    _, routers = query(store, "SELECT DISTINCT router FROM results WHERE protocol = 'robustness' ORDER BY 1")
    assert [r for (r,) in routers] == ["knn:k=10", "knn:k=100"]

    def value(table: str, router: str, metric: str, slice_: str = "") -> float:
        _, rows = query(store, "SELECT value FROM results WHERE table_name = ? AND router = ? AND metric = ? AND "
                               "slice = ?", [table, router, metric, slice_])
        assert len(rows) == 1, (table, router, metric, slice_, rows)
        return float(rows[0][0])

    # SA / RD experts partition the items: HSE = log2 k exactly, normalised 1, oracle accuracy 1 (paper sec. 6)
    assert value("mmlu-pro-rd", "pool", "hse") == pytest.approx(math.log2(5), abs=1e-9)
    assert value("mmlu-pro-sa", "pool", "hse") == pytest.approx(math.log2(14), abs=1e-9)
    assert value("mmlu-pro-sa", "pool", "hse_normalized") == pytest.approx(1.0)
    assert value("mmlu-pro-sa", "pool", "oracle_accuracy") == 1.0
    rdsa = value("mmlu-pro-rdsa", "pool", "hse_normalized")
    assert 0 < rdsa < 1  # overlapping experts: less than maximally diverse
    # Fig. 3: the greedy curve runs to every actor, normalised HSE per size; the 90/95% sizes within it
    _, curve = query(store, "SELECT slice FROM results WHERE table_name = 'mmlu-pro' AND router = 'coreset' AND "
                            "metric = 'hse_normalized'")
    assert {s for (s,) in curve} == {f"size={k}" for k in range(1, 11)}
    size_90, size_95 = value("mmlu-pro", "coreset", "size_90"), value("mmlu-pro", "coreset", "size_95")
    assert 2 <= size_90 <= size_95 <= 10
    assert value("mmlu-pro", "coreset", "hse", f"size={int(size_90)}") >= 0.9 * value("mmlu-pro", "pool", "hse")
    # the max-HSE subset is the table of coreset = 6 actors, derived on the pool's training side
    assert value("mmlu-pro-max", "pool", "n_actors") == 6
    # Fig. 4-6: per router and society, accuracy, perturbed accuracy (original's outcome), rho, kappa_rho, by level
    for table in SOCIETIES:
        for router in ("knn:k=10", "knn:k=100"):
            assert 0.0 <= value(table, router, "accuracy") <= 1.0
            for metric in ("perturbed_accuracy_orig", "rho"):
                for where in ("", "level=character", "level=syntax"):
                    assert 0.0 <= value(table, router, metric, where) <= 1.0
            _, kappa = query(store, "SELECT count(*) FROM results WHERE table_name = ? AND router = ? AND "
                                    "metric = 'kappa_rho' AND slice = ''", [table, router])
            assert kappa[0][0] == 1


def test_the_full_files_parse_as_documented() -> None:
    """The full runs' settings (checked when a file is read, before any data): the three pools, their max-HSE
    subsets and the three societies with the KNN routers on 300 test queries; the prompted router on SmolLM2 on 30;
    the invariance file where bench_falsifier's tables exist."""
    exp = load_experiment(HSE)
    assert [t.name for t in exp.tables] == ["mmlu-pro", "llmrouter", "routerbench", "mmlu-pro-max", "llmrouter-max",
                                            "routerbench-max", "mmlu-pro-rd", "mmlu-pro-sa", "mmlu-pro-rdsa"]
    assert exp.routers == ["knn:k=10", "knn:k=100"]
    rob = RobustnessSettings.from_mapping(next(p for p in exp.protocols if p.name == "robustness").options)
    assert rob.levels == ("character", "word", "syntax") and rob.max_queries == 300 and rob.backend is None
    assert SocietySettings.from_mapping(next(p for p in exp.protocols if p.name == "society").options).coreset == 4
    prompted = load_experiment(PROMPTED)
    assert prompted.routers[-2:] == ["prompted:calibrate=true,max_chars=200",
                                     "prompted:calibrate=true,k=1,max_chars=200"]
    rob = RobustnessSettings.from_mapping(prompted.protocols[0].options)
    assert rob.max_queries == 30 and rob.backend == "local:smollm2-135m,threads=1"
    if (REPO / "runs" / "falsifier" / "originals").is_dir():  # built by benchmarks/bench_falsifier.py
        inv = load_experiment(INVARIANCE)
        assert [t.name for t in inv.tables] == ["local"] and inv.tables[0].split == "random:0.5"
