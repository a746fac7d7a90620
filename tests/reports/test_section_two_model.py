"""The audit's two-model section: the pair from the audit's --small/--large (checked: both, distinct, actors of the
table) or the table's designation; skipped in one sentence without one; findings computed from the run with their
numbers in section.data; per-query decisions at the call rate; labelled sortable tables; --quick smaller."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab.data.demo import demo
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.reports import audit
from routerlab.reports.blocks import Paragraph, Section, Table
from routerlab.reports.sections.two_model import CALL_RATE, NAME, two_model_section

SMALL, LARGE = "tiny-2b", "frontier-235b"


def run(table: RoutingTable, out: Path, **options: Any) -> Section:
    split, excluded = audit.evaluable_split(table, audit.audit_split(table, 0))
    train, test = split.apply(table)
    out.mkdir(parents=True, exist_ok=True)
    return two_model_section(table, audit.AuditContext(out, split, 0, train, test, dict(options), excluded))


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    # three datasets (three figures, not six) of about 40 test queries each: enough for intervals (MIN_QUERIES)
    return demo(1200, seed=0).select_datasets(["math", "code", "law"])


@pytest.fixture(scope="module")
def full(table: RoutingTable, tmp_path_factory: pytest.TempPathFactory) -> Section:
    return run(table, tmp_path_factory.mktemp("full"), small=SMALL, large=LARGE)


def test_skipped_without_a_pair(table: RoutingTable, tmp_path: Path) -> None:
    sec = run(table, tmp_path)
    assert sec.name == NAME and sec.data["measured"] is False and sec.findings == []
    assert isinstance(sec.blocks[0], Paragraph) and "--small A --large B" in sec.blocks[0].text


@pytest.mark.parametrize(("options", "message"), [
    ({"small": "nope-1b", "large": LARGE}, "--small 'nope-1b' is not an actor"),
    ({"small": SMALL, "large": "nope-9b"}, "--large 'nope-9b' is not an actor"),
    ({"small": SMALL}, "--small needs --large"),
    ({"large": LARGE}, "--large needs --small"),
    ({"small": SMALL, "large": SMALL}, "both name"),
])
def test_bad_pair_is_one_error(table: RoutingTable, tmp_path: Path, options: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        run(table, tmp_path, **options)


def test_findings_tables_and_decisions(full: Section) -> None:
    assert full.data["measured"] and full.data["small"] == SMALL and full.data["large"] == LARGE
    stats = full.data["call_rate"]["routers"]
    auroc = next(f for f in full.findings if "AUROC" in f.text)
    best = max((r for r in full.data["two_model"]["results"] if r["router"] != "oracle"),
               key=lambda r: r["id_mean"]["auroc"])
    assert f"`{best['router']}`" in auroc.text and auroc.values["auroc"] == best["id_mean"]["auroc"]
    assert auroc.interval == tuple(best["id_mean"]["auroc_ci"])
    rate = next(f for f in full.findings if f.target == f"{NAME}-call-rate")
    spec = max((k for k in stats if k not in {"oracle", "random"}), key=lambda k: stats[k]["phi"])
    assert f"`{spec}`" in rate.text and rate.values["phi"] == stats[spec]["phi"]
    assert f"{stats[spec]['phi']:.3f}" in rate.text and f"{stats[spec]['perf_large']:.3f}" in rate.text
    tables = {b.id: b for b in full.blocks if isinstance(b, Table)}
    assert {f"{NAME}-auroc", f"{NAME}-lpm", f"{NAME}-hcr", f"{NAME}-call-rate"} <= set(tables)
    assert all(t.sortable for t in tables.values()) and tables[f"{NAME}-auroc"].terms[1] == "auroc"  # type: ignore[index]
    # decisions: every router sends the same share of the test queries to the large model, its mean score is Phi
    (d,) = full.decisions
    assert d.actor_names == [SMALL, LARGE] and set(d.choices) == set(full.data["routers"])
    for router, choice in d.choices.items():
        assert choice.mean() == pytest.approx(CALL_RATE, abs=1 / len(d.query_ids))
        assert np.mean(d.scores[router]) == pytest.approx(stats[router]["phi"])
    # the oracle escalates exactly where the large model is right and the small one wrong, first
    oracle = d.scores["oracle"].mean()
    assert oracle >= max(np.mean(v) for v in d.scores.values()) - 1e-12


def test_no_finding_rests_on_an_interval_over_too_few_queries(tmp_path: Path) -> None:
    """Issue 21: about 23 test queries per dataset (fewer than MIN_QUERIES): the AUROC finding states the value
    with no interval and no verdict on chance (the verdict is listed as left out, with why); the call-rate finding,
    over all 70 test queries together, keeps its interval."""
    sec = run(demo(700, seed=0).select_datasets(["math", "code", "law"]), tmp_path, small=SMALL, large=LARGE,
              quick=True)
    auroc = next(f for f in sec.findings if "AUROC" in f.text)
    assert auroc.interval is None and "chance" not in auroc.text and "[" not in auroc.text
    rate = next(f for f in sec.findings if f.target == f"{NAME}-call-rate")
    assert rate.interval is not None and f"[{rate.interval[0]:.3f}, " in rate.text
    (left,) = sec.data["skipped_findings"]
    assert "above chance" in left["what"] and "evaluated queries in the smallest dataset" in left["why"]
    assert "n/a (n=" in " ".join(b.text for b in sec.blocks if isinstance(b, Paragraph))


def test_findings_follow_the_pair(table: RoutingTable, full: Section, tmp_path: Path) -> None:
    other = run(table, tmp_path, small="general-7b", large="large-120b", quick=True)
    assert [f.text for f in other.findings] != [f.text for f in full.findings]
    assert "general-7b" in other.blocks[0].text  # type: ignore[union-attr]


def test_table_designation_is_used_without_options(table: RoutingTable, tmp_path: Path) -> None:
    import dataclasses

    marked = dataclasses.replace(table, meta={**table.meta, "two_model": {"small": SMALL, "large": LARGE}})
    sec = run(marked, tmp_path, quick=True)
    assert sec.data["measured"] and (sec.data["small"], sec.data["large"]) == (SMALL, LARGE)
    assert sec.blocks[0].text.startswith("The table designates")  # type: ignore[union-attr]


def test_quick_is_smaller(table: RoutingTable, full: Section, tmp_path: Path) -> None:
    sec = run(table, tmp_path, small=SMALL, large=LARGE, quick=True)
    assert sec.data["n_boot"] < full.data["n_boot"]
    assert len(sec.figures) == 1 < len(full.figures)


def test_datasets_without_a_test_query_train_nothing(table: RoutingTable, tmp_path: Path) -> None:
    """A dataset whose queries are all training queries is left out (with a count), not an index error."""
    import dataclasses

    split = table.queries.split.copy()
    split[table.queries.dataset == "law"] = "train"
    queries = dataclasses.replace(table.queries, split=split)
    sec = run(dataclasses.replace(table, queries=queries), tmp_path, small=SMALL, large=LARGE, quick=True)
    assert sec.data["measured"] and sec.data["datasets"] == ["code", "math"]
    assert sec.data["left_out_train_queries"] == int((table.queries.dataset == "law").sum())


def test_routers_are_fitted_once_and_decisions_are_the_runs(table: RoutingTable, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The section renders the protocol's run: every router is fitted once, and the per-query decisions come from
    the run's per-query scores (the random split of a table without a split column, with unobserved scores)."""
    import dataclasses

    from routerlab.protocols import two_model
    from routerlab.routers.base import get_router

    score = table.score.astype(np.float64).copy()
    score[::7, table.actor_names.index("general-7b")] = np.nan  # test queries the audit leaves out
    score[3, table.actor_names.index(SMALL)] = np.nan  # a query the pair lacks
    unsplit = dataclasses.replace(table, score=score, queries=dataclasses.replace(
        table.queries, split=np.full(table.n_queries, "", dtype=object)))
    knn = type(get_router("knn"))
    fits: list[int] = []
    original = knn.fit

    def counting(self: Any, train: RoutingTable, features: Any) -> Any:
        fits.append(train.n_queries)
        return original(self, train, features)

    runs: list[Any] = []
    real_run = two_model.TwoModel.run

    def keep(self: Any, *args: Any, **kwargs: Any) -> Any:
        runs.append(real_run(self, *args, **kwargs))
        return runs[-1]

    monkeypatch.setattr(knn, "fit", counting)
    monkeypatch.setattr(two_model.TwoModel, "run", keep)
    sec = run(unsplit, tmp_path, small=SMALL, large=LARGE, quick=True)
    assert sec.data["measured"] and len(fits) == 1 and len(runs) == 1
    per = runs[0].artifacts["per_query"]
    (d,) = sec.decisions
    assert d.query_ids == per.ids and d.choices["knn"].sum() == round(CALL_RATE * len(per.ids))
    np.testing.assert_array_equal(d.choices["knn"], per.escalated("knn", CALL_RATE))
    # the protocol scored exactly the audit's evaluated test queries that both models answered
    split, _ = audit.evaluable_split(unsplit, audit.audit_split(unsplit, 0))
    assert split.kind == "random"
    both = ~np.isnan(score[:, table.actor_index([SMALL, LARGE])]).any(axis=1)
    assert sorted(per.ids) == sorted(str(q) for q in unsplit.queries.ids[split.test[both[split.test]]])
    assert fits == [int(both[split.train].sum())]


def test_no_share_of_a_large_model_that_scores_zero() -> None:
    """Issue 21, "a finding never divides by a zero gain": when the large model scores 0 on the test queries, no
    finding says what share of its score a router keeps."""
    from routerlab.reports.sections.two_model import finding_objects

    stats = {"knn": {"phi": 0.0, "ci": [0.0, 0.0], "share_of_large": float("nan"), "perf_large": 0.0,
                     "perf_small": 0.0, "call_rate": 0.3}}
    result = {"small": SMALL, "large": LARGE, "results": [], "id_datasets": [], "ood_datasets": []}
    found, skipped = finding_objects(result, stats)
    assert found == [] and "share of the large model's score" in skipped[0]["what"]
    assert "scores 0.000" in skipped[0]["why"]
