"""The full protocol with a development part (issue 23, section 1): ``evaluate(..., dev=F)``, the ``dev`` setting,
``routerlab evaluate --dev F`` and ``dev = F`` in an experiment file. Routers fit on the training side less the
development part, the routers that train by epochs stop there and say which epoch they kept, the run record holds
the part's fraction, seed and size, and the test queries choose nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from routerlab.data.feedback import Feedback
from routerlab.data.splits import make_split
from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.features import encode
from routerlab.features.base import Features
from routerlab.protocols.base import RunContext, run_protocol
from routerlab.protocols.full import FullSettings, evaluate
from routerlab.routers import get_router
from routerlab.routers.base import DevPart, Router
from tests import run_main

ROUTERS = ["best-single", "knn:k=5", "mlp:hidden=16,epochs=30", "barp:epochs=30"]


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return demo(400, seed=3)


def by_spec(ev: object) -> dict[str, dict]:
    return {r["spec"]: r for r in ev.to_dict()["results"]}  # type: ignore[attr-defined]


def test_evaluate_with_dev_fits_on_train_less_dev_and_records_it(table: RoutingTable) -> None:
    ev = evaluate(table, ROUTERS, split="random", seed=4, n_boot=40, dev=0.25)
    sp = make_split(table, "random", 4, dev=0.25)
    record = ev.to_dict()
    assert record["split"]["dev_fraction"] == 0.25 and record["split"]["dev_seed"] == 4
    assert record["split"]["n_dev"] == sp.dev.size > 0
    assert record["split"]["n_train"] == sp.train.size == make_split(table, "random", 4).train.size - sp.dev.size
    results = by_spec(ev)
    for spec in ("mlp:hidden=16,epochs=30", "barp:epochs=30"):
        es = results[spec]["early_stopping"]
        assert es["on"] == "dev" and es["n_dev"] == sp.dev.size and 0 <= es["best_epoch"] <= es["epochs_run"] <= 30
    for spec in ("best-single", "knn:k=5"):
        assert "early_stopping" not in results[spec]
    # the numbers are those of the routers fitted by hand: train = train less dev, dev features from the encoder
    # fitted on the training texts only
    train, test = sp.apply(table)
    dev = sp.apply_dev(table)
    ftrain = encode(train, "tfidf", fit_on=train)
    fdev = encode(dev, "tfidf", fit_on=train)
    ftest = encode(test, "tfidf", fit_on=train)
    mlp = get_router("mlp:hidden=16,epochs=30", seed=4).fit(train, ftrain, dev=DevPart(dev, fdev))
    assert mlp.early_stopping == results["mlp:hidden=16,epochs=30"]["early_stopping"]
    choice = mlp.choose(ftest)
    assert results["mlp:hidden=16,epochs=30"]["metrics"]["mu_o"] == pytest.approx(
        float(test.score[np.arange(test.n_queries), choice].mean()))


def test_without_dev_nothing_changes(table: RoutingTable) -> None:
    """No development part: every number equals a run of the routers on the whole training side, and no result
    reports an epoch."""
    ev = evaluate(table, ROUTERS, split="random", seed=4, n_boot=40)
    again = run_protocol("full", table, {"split": "random", "n_boot": 40}, seed=4, routers=ROUTERS)
    assert [r.metrics for r in ev.results] == [r.metrics for r in again.native.results]
    assert all(r.early_stopping is None for r in ev.results)
    assert "n_dev" not in ev.to_dict()["split"]
    sp = make_split(table, "random", 4)
    train, test = sp.apply(table)
    mlp = get_router("mlp:hidden=16,epochs=30", seed=4).fit(train, encode(train, "tfidf", fit_on=train))
    choice = mlp.choose(encode(test, "tfidf", fit_on=train))
    assert by_spec(ev)["mlp:hidden=16,epochs=30"]["metrics"]["mu_o"] == pytest.approx(
        float(test.score[np.arange(test.n_queries), choice].mean()))


def test_the_dev_setting_through_the_protocol_layer_and_a_shared_context(table: RoutingTable) -> None:
    direct = evaluate(table, ROUTERS, split="random", seed=1, n_boot=40, dev=0.2)
    via = run_protocol("full", table, {"split": "random", "n_boot": 40, "dev": 0.2}, seed=1, routers=ROUTERS)
    assert [r.metrics for r in via.native.results] == [r.metrics for r in direct.results]
    assert via.to_dict()["settings"]["dev"] == 0.2 and via.provenance.split["n_dev"] > 0
    # one context, a run without a development part first: its features (an encoder fitted on the whole training
    # side) must not be reused for the run with one, whose training side is smaller
    context = RunContext()
    plain = run_protocol("full", table, {"split": "random", "n_boot": 40}, seed=1, routers=ROUTERS, context=context)
    shared = run_protocol("full", table, {"split": "random", "n_boot": 40, "dev": 0.2}, seed=1, routers=ROUTERS,
                          context=context)
    assert [r.metrics for r in shared.native.results] == [r.metrics for r in direct.results]
    assert [r.metrics for r in plain.native.results] != [r.metrics for r in shared.native.results]
    assert len(context.features) == 3  # (train, test) without dev; (train, test) and dev features with it


class TwoArgumentFit(Router):
    """A router written before ``fit`` took a development part, overriding ``fit`` with two arguments."""

    name = "two-argument-fit"

    def fit(self, train: RoutingTable | Feedback, features: Features) -> TwoArgumentFit:  # type: ignore[override]
        return super().fit(train, features)

    def _fit(self, train: RoutingTable, features: Features) -> None:
        self.means = np.nanmean(train.score, axis=0)

    def _scores(self, features: Features) -> np.ndarray:
        return np.tile(self.means, (features.n, 1))


def test_a_router_overriding_fit_with_two_arguments_runs_with_dev(table: RoutingTable) -> None:
    ev = evaluate(table, [TwoArgumentFit(), "best-single"], split="random", seed=2, n_boot=40, dev=0.2)
    mu = [r.metrics["mu_o"] for r in ev.results]
    assert mu[0] == pytest.approx(mu[1])  # the best training mean for every query = best-single


@pytest.mark.parametrize(("value", "message"), [
    (0, "dev: the dev fraction must be in (0, 1), got 0"),
    (1, "dev: the dev fraction must be in (0, 1), got 1"),
    (-1, "dev: the dev fraction must be in (0, 1), got -1"),
    (float("nan"), "dev: the dev fraction must be in (0, 1), got nan"),
    ("x", "dev: must be a number, got a string ('x')"),
    (True, "dev: must be a number, got a boolean (true)"),
])
def test_bad_dev_settings_are_one_line(value: object, message: str) -> None:
    with pytest.raises(UsageError) as err:
        FullSettings.from_mapping({"dev": value})
    assert str(err.value).startswith(message)
    with pytest.raises(UsageError, match=r"^--dev: "):
        FullSettings.from_cli(dev=value)


def test_a_fraction_leaving_no_development_queries_is_a_usage_error(table: RoutingTable) -> None:
    with pytest.raises(UsageError, match="leaves no development queries"):
        evaluate(table, ["best-single"], split="random", n_boot=40, dev=1e-4)


# ----------------------------------------------------------------------------------------------------------- CLI
@pytest.fixture(scope="module")
def table_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("dev") / "t"
    demo(n_queries=300, seed=0).save(path)
    return str(path)


run = run_main


def test_cli_evaluate_dev_json_and_console(table_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["evaluate", table_dir, "--routers", "best-single,mlp:hidden=16,epochs=20", "--split", "random",
            "--dev", "0.2", "--n-boot", "40"]
    code, out, err = run([*argv, "--json"], capsys)
    assert code == 0, err
    record = json.loads(out)
    assert record["settings"]["dev"] == 0.2 and record["split"]["n_dev"] > 0 and record["split"]["dev_seed"] == 0
    es = {r["spec"]: r.get("early_stopping") for r in record["results"]}
    assert es["best-single"] is None and es["mlp:hidden=16,epochs=20"]["metric"] == "dev_mu_o"
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert f"/ {record['split']['n_dev']} dev /" in out.splitlines()[0]
    line = next(x for x in out.splitlines() if x.startswith("stopped "))
    e = es["mlp:hidden=16,epochs=20"]
    assert line.startswith(f"stopped mlp:hidden=16,epochs=20: epoch {e['best_epoch']} kept, best dev_mu_o ")
    assert f"on {record['split']['n_dev']} dev queries" in line


@pytest.mark.parametrize(("value", "message"), [
    ("0", "--dev: the dev fraction must be in (0, 1), got 0.0"),
    ("1", "--dev: the dev fraction must be in (0, 1), got 1.0"),
    ("-1", "--dev: the dev fraction must be in (0, 1), got -1.0"),
    ("nan", "--dev: the dev fraction must be in (0, 1), got nan"),
    ("x", "--dev: must be a number, got a string ('x')"),
    ("0.0001", "leaves no development queries"),
])
def test_cli_evaluate_bad_dev_is_one_line_exit_2(table_dir: str, value: str, message: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["evaluate", table_dir, "--routers", "best-single", "--n-boot", "40", "--dev", value],
                       capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("routerlab: error: ") and message in lines[0], err


def test_cli_dev_belongs_to_the_full_protocol(table_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["evaluate", table_dir, "--routers", "best-single", "--n-boot", "40", "--dev", "0.2",
                        "--protocol", "cold-start"], capsys)
    assert code == 2 and "--dev: applies to protocol choose, full, two-model and voyager only, not to cold-start" in err


# ---------------------------------------------------------------------------------------------- experiment files
EXPERIMENT = """\
name = "dev"
routers = ["best-single", "mlp:hidden=16,epochs=10"]
seeds = [0]
protocols = ["full", {{ name = "full", dev = 0.2 }}]

[settings]
n_boot = 40

[[tables]]
path = "{table}"
split = "random"
"""


def test_experiment_file_dev_option(table_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exp = tmp_path / "exp.toml"
    exp.write_text(EXPERIMENT.format(table=table_dir), encoding="utf-8")
    code, out, err = run(["run", str(exp), "--store", str(tmp_path / "store"), "--backend", "serial", "--json"],
                         capsys)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["cells_run"] == 4 and summary["cells_skipped"] == 0
    bad = tmp_path / "bad.toml"
    bad.write_text(EXPERIMENT.format(table=table_dir).replace("dev = 0.2", "dev = 1.5"), encoding="utf-8")
    code, _, err = run(["run", str(bad), "--store", str(tmp_path / "store2"), "--backend", "serial"], capsys)
    assert code == 2 and "dev: the dev fraction must be in (0, 1), got 1.5" in err


# ----------------------------------------------------------------------------------------------------- real data
def test_evaluate_dev_on_a_real_table(real_table: Callable[[str], RoutingTable]) -> None:
    """llmrouter (its given train/test split, 10 datasets): the development part is stratified by dataset, the
    run records it, and mlp and barp report the epoch they kept."""
    table = real_table("llmrouter")
    ev = evaluate(table, ["best-single", "mlp:epochs=15", "barp:epochs=30"], split="given", seed=0, n_boot=40,
                  dev=0.15)
    split = ev.to_dict()["split"]
    given = make_split(table, "given", 0)
    assert split["dev_fraction"] == 0.15 and split["n_train"] + split["n_dev"] == given.train.size
    results = by_spec(ev)
    for spec in ("mlp:epochs=15", "barp:epochs=30"):
        es = results[spec]["early_stopping"]
        assert es["n_dev"] <= split["n_dev"] and es["best_value"] is not None
        assert results[spec]["metrics"]["mu_o"] > results["best-single"]["metrics"]["mu_o"] - 0.05
