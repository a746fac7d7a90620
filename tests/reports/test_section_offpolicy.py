"""The audit's off-policy section: skipped in one sentence without logs; with logs, IPS/SNIPS/DR estimates beside the
truth, computed findings whose numbers are in section.data; `routerlab log`'s default output usable as it is; a log
that does not match the table, or a missing file, one error naming the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from routerlab.cli import main
from routerlab.data.demo import demo
from routerlab.data.logs import write_logs
from routerlab.data.table import RoutingTable
from routerlab.errors import DataError, UsageError
from routerlab.protocols.policies import simulate_logs
from routerlab.reports import audit
from routerlab.reports.blocks import Section, Table
from routerlab.reports.sections.offpolicy import ESTIMATES_ID, WEIGHTS_ID, offpolicy_section


def run(table: RoutingTable, out: Path, **options: Any) -> Section:
    split, excluded = audit.evaluable_split(table, audit.audit_split(table, 0))
    train, test = split.apply(table)
    out.mkdir(parents=True, exist_ok=True)
    return offpolicy_section(table, audit.AuditContext(out, split, 0, train, test, dict(options), excluded))


def log_file(table: RoutingTable, path: Path, part: str = "test", seed: int = 0, policy: str = "uniform") -> Path:
    write_logs(simulate_logs(table, policy, part=part, seed=seed), path)
    return path


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return demo(500, seed=0)


@pytest.fixture(scope="module")
def logged(table: RoutingTable, tmp_path_factory: pytest.TempPathFactory) -> tuple[Section, Path]:
    out = tmp_path_factory.mktemp("ope")
    path = log_file(table, out / "test.csv", policy="eps-greedy:best-single:0.5")
    return run(table, out, logs=str(path)), path


def test_skipped_without_logs_says_how_to_enable(table: RoutingTable, tmp_path: Path) -> None:
    sec = run(table, tmp_path)
    assert sec.name == "offpolicy" and sec.data["measured"] is False and sec.findings == []
    assert len(sec.blocks) == 1
    text = sec.blocks[0].text  # type: ignore[union-attr]
    assert "--logs LOGS" in text and "routerlab log" in text


def test_estimates_truth_and_findings(logged: tuple[Section, Path]) -> None:
    sec, _ = logged
    assert sec.data["measured"] and sec.data["routers"] == ["best-single", "knn", "linear"]
    tables = {b.id: b for b in sec.blocks if isinstance(b, Table)}
    est, weights = tables[ESTIMATES_ID], tables[WEIGHTS_ID]
    assert est.sortable and weights.sortable and "ess" in (weights.terms or [])
    rows = sec.data["rows"]
    assert len(est.rows) == len(rows) == 9 and {r["estimator"] for r in rows} == {"ips", "snips", "dr"}
    assert all(r["truth"] is not None for r in rows)  # the demo holds the logged queries' full outcomes
    for r in rows:
        assert r["inside"] == (r["ci"][0] <= r["truth"] <= r["ci"][1])
    # one DR finding per router, its numbers those of the data
    for spec in sec.data["routers"]:
        f = next(f for f in sec.findings if f"`{spec}`'s mu_o" in f.text)
        dr = next(r for r in rows if r["router"] == spec and r["estimator"] == "dr")
        assert f.values["estimate"] == dr["value"] and f.values["truth"] == dr["truth"]
        assert f.interval == tuple(dr["ci"]) and f"{dr['value']:.3f}" in f.text
        assert ("inside" in f.text) == dr["inside"]
    cover = next(f for f in sec.findings if "intervals" in f.text and "contain" in f.text)
    assert cover.values == {"inside": sum(r["inside"] for r in rows), "intervals": 9}


def test_findings_follow_the_log(table: RoutingTable, logged: tuple[Section, Path], tmp_path: Path) -> None:
    other = run(table, tmp_path, logs=str(log_file(table, tmp_path / "u.csv", seed=5)))
    assert [f.text for f in other.findings] != [f.text for f in logged[0].findings]


def test_quick_estimates_fewer_routers_with_fewer_resamples(table: RoutingTable, logged: tuple[Section, Path],
                                                            tmp_path: Path) -> None:
    sec = run(table, tmp_path, logs=str(logged[1]), quick=True)
    assert len(sec.data["routers"]) == 2 < len(logged[0].data["routers"])
    assert sec.data["ope"]["interval"]["n_boot"] < logged[0].data["ope"]["interval"]["n_boot"]


def test_bounds_are_left_out_of_the_routers_option(table: RoutingTable, logged: tuple[Section, Path],
                                                   tmp_path: Path) -> None:
    sec = run(table, tmp_path, logs=str(logged[1]), routers=["oracle", "knn"], quick=True)
    assert sec.data["routers"] == ["knn"] and "oracle" in sec.data["skipped_routers"]
    assert run(table, tmp_path, logs=str(logged[1]), routers="oracle, linear", quick=True).data["routers"] == ["linear"]


def test_routerlab_log_default_output_is_usable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`routerlab log` logs the train split by default: the routers then train on the queries not logged."""
    small = demo(300, seed=2)
    small.save(tmp_path / "t")
    assert main(["log", str(tmp_path / "t"), "-o", str(tmp_path / "logs.csv")]) == 0
    sec = run(small, tmp_path / "out", logs=str(tmp_path / "logs.csv"), quick=True)
    assert sec.data["measured"]
    n_train = sec.data["ope"]["training"]["n_train"]
    assert n_train == int((small.queries.split == "test").sum())
    assert "not logged" in sec.blocks[0].text  # type: ignore[union-attr]


def test_log_of_another_table_is_one_error_naming_the_file(table: RoutingTable, tmp_path: Path) -> None:
    path = log_file(table, tmp_path / "logs.csv")
    fewer = table.select_actors(table.actor_names[:-1])
    with pytest.raises(DataError) as err:
        run(fewer, tmp_path / "out", logs=str(path))
    assert "logs.csv" in str(err.value) and table.actor_names[-1] in str(err.value)
    with pytest.raises(UsageError, match=r"missing\.csv: no such log file"):
        run(table, tmp_path / "out", logs=str(tmp_path / "missing.csv"))


def test_decisions_on_the_logged_queries_match_the_truth(table: RoutingTable, logged: tuple[Section, Path]) -> None:
    """Each router's per-query choices on the logged queries: the mean score they obtain (read from the table's
    full outcomes) is the router's true mu_o on those queries, the truth the section reports."""
    import numpy as np

    sec, path = logged
    (dec,) = sec.decisions
    assert dec.protocol == "off-policy" and dec.actor_names == table.actor_names
    logged_ids = set(pd_ids(path))
    assert set(dec.query_ids) == logged_ids and set(dec.choices) == set(sec.data["routers"])
    truth = {r["router"]: r["truth"] for r in sec.data["rows"] if r["estimator"] == "dr"}
    for spec, choice in dec.choices.items():
        assert choice.shape == (len(dec.query_ids),) and ((choice >= 0) & (choice < table.n_actors)).all()
        deployed = dec.deployed.get(spec, dec.scores[spec])  # an exploring router: its expected scores
        assert float(np.mean(deployed)) == pytest.approx(truth[spec])


def pd_ids(path: Path) -> list[str]:
    """The query ids of a logs CSV."""
    import csv

    with path.open(newline="") as f:
        return [row["query_id"] for row in csv.DictReader(f)]


def test_an_exploring_routers_decisions_hold_its_argmax_and_its_expected_scores(
        table: RoutingTable, logged: tuple[Section, Path], tmp_path: Path) -> None:
    """random samples its distribution when deployed: its truth is the mean actor score of the logged queries, its
    decision rows hold its argmax pick, and its expected scores (mean = the truth) are written beside them."""
    import numpy as np

    sec = run(table, tmp_path, logs=str(logged[1]), routers=["random", "knn"], quick=True)
    (dec,) = sec.decisions
    assert dec.policies == {"random": "distribution"} and set(dec.deployed) == {"random"}
    truth = {r["router"]: r["truth"] for r in sec.data["rows"] if r["estimator"] == "dr"}
    rows = np.array([list(table.queries.ids.astype(str)).index(q) for q in dec.query_ids])
    assert truth["random"] == pytest.approx(float(table.score[rows].astype(np.float64).mean()))
    assert float(np.mean(dec.deployed["random"])) == pytest.approx(truth["random"])
    np.testing.assert_array_equal(dec.scores["random"], table.score[rows, dec.choices["random"]])
