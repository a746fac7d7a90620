"""``routerlab power``: the text and JSON of a comparison (the protocol's numbers), one error line (exit 2) for every
bad request before any data is read, the project's 'too few queries' rule, identical routers, and the protocol in
an experiment file (``routerlab run``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from routerlab.cli import main
from routerlab.data.demo import demo
from routerlab.metrics.power import sample_size

pytestmark = pytest.mark.usefixtures("quiet_progress")


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("power") / "t"
    demo(1000, seed=5).save(path)
    return str(path)


def run(argv: list[str], capsys: pytest.CaptureFixture[str], code: int = 0) -> tuple[str, str]:
    assert main(argv) == code
    out, err = capsys.readouterr()
    return out, err


def test_text_and_json_say_the_same(table_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["power", table_dir, "--routers", "knn,best-single", "--delta", "0.03", "--n-boot", "100", "--seed", "1"]
    record = json.loads(run([*argv, "--json"], capsys)[0])
    (c,) = record["comparisons"]
    assert (record["protocol"], c["router"], c["versus"], record["settings"]["delta"]) == (
        "power", "knn", "best-single", 0.03)
    assert c["n_test"] == record["split"]["n_test"] - record["excluded_test_queries"] > 30
    assert c["n_needed"] == sample_size(c["sd_difference"], 0.03) and c["reason"] is None
    assert {r["metric"]: r["value"] for r in record["records"]}["n_needed"] == c["n_needed"]
    text = run(argv, capsys)[0].splitlines()
    assert text[1] == f"knn - best-single on {c['n_test']:,} evaluated test queries"
    assert text[2].split()[1:] == ["knn", f"{c['mu_o']['knn']:.4f},", "best-single", f"{c['mu_o']['best-single']:.4f}"]
    lo, hi = c["ci"]
    assert text[3].endswith(f"{c['mu_o_difference']:+.4f}, 95% paired interval [{lo:+.4f}, {hi:+.4f}]")
    assert text[4].split()[-1] == f"{c['sd_difference']:.4f}"
    assert text[5] == (f"  to detect 0.03 at 80% power, two-sided paired test at alpha 0.05: {c['n_needed']:,} test "
                       f"queries; with {c['n_test']:,} now, power {c['power_at_n']:.2f}")
    assert text[6].startswith(f"  to detect the observed {abs(c['mu_o_difference']):.4f}: ")


def test_identical_routers(table_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    # on the demo the best single actor is the largest model: the two routers pick the same actor every time
    out = run(["power", table_dir, "--routers", "best-single,largest", "--delta", "0.02", "--n-boot", "40"],
              capsys)[0]
    assert "  sd of the differences    0.0000" in out
    assert ("  the two routers score the same on every test query (sd of the differences 0): no sample size can be "
            "estimated from them") in out
    record = json.loads(run(["power", table_dir, "--routers", "best-single,largest", "--delta", "0.02",
                             "--n-boot", "40", "--json"], capsys)[0])
    assert record["comparisons"][0]["n_needed"] is None and record["comparisons"][0]["sd_difference"] == 0.0


def test_too_few_queries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = demo(1000, seed=0)
    split = np.asarray(table.queries.split)
    rows = np.concatenate([np.flatnonzero(split == "train")[:300], np.flatnonzero(split == "test")[:3]])
    table.select_queries(rows).save(tmp_path / "t3")
    out, err = run(["power", str(tmp_path / "t3"), "--routers", "knn,random", "--delta", "0.05"], capsys)
    assert err.splitlines().count(
        "routerlab: warning: only 3 evaluated test queries, fewer than the 30 a 95% interval needs: intervals and "
        "p-values are reported as unavailable (docs/metrics.md, 'Too few queries')") == 1
    assert "95% paired interval n/a (n=3 < 30)" in out
    assert ("  only 3 evaluated test queries, fewer than the 30 a 95% interval needs: no sample size is estimated "
            "from them") in out


@pytest.mark.parametrize(("args", "error"), [
    (["--routers", "knn,best-single"], "--delta: must be given: the difference in mu_o to detect, e.g. 0.02"),
    (["--delta", "0.02"], "--routers: name the two routers to compare, e.g. --routers knn,best-single"),
    (["--routers", "knn", "--delta", "0.02"], "power compares exactly two routers A,B (e.g. knn,best-single), got "
                                              "1: knn; to compare several with one, set versus (--versus ROUTER)"),
    (["--routers", "knn,best-single,oracle", "--delta", "0.02"], "got 3: knn, best-single, oracle"),
    (["--routers", "knn,knn", "--delta", "0.02"], "power compares two different routers; 'knn' is named twice"),
    (["--routers", "knn", "--versus", "knn", "--delta", "0.02"], "power needs a router to compare with versus 'knn'"),
    (["--routers", "knn,nope", "--delta", "0.02"], "unknown router 'nope'"),
    (["--routers", "knn", "--versus", "nope", "--delta", "0.02"], "unknown router 'nope'"),
    (["--routers", "knn,best-single", "--delta", "nan"], "--delta: must be a finite number in (0, 1], got nan"),
    (["--routers", "knn,best-single", "--delta", "inf"], "--delta: must be a finite number in (0, 1], got inf"),
    (["--routers", "knn,best-single", "--delta", "0"], "--delta: must be a finite number in (0, 1], got 0"),
    (["--routers", "knn,best-single", "--delta", "-0.1"], "--delta: must be a finite number in (0, 1], got -0.1"),
    (["--routers", "knn,best-single", "--delta", "0.1", "--alpha", "1.5"],
     "--alpha: must be a finite number in (0, 1), got 1.5"),
    (["--routers", "knn,best-single", "--delta", "0.1", "--power", "1"],
     "--power: must be a finite number in (0, 1), got 1"),
    (["--routers", "knn,best-single", "--delta", "0.1", "--alpha", "0.2", "--power", "0.1"],
     "--power: must be above alpha (0.2)"),
    (["--routers", "knn,best-single", "--delta", "0.1", "--n-boot", "3"],
     "--n-boot: must be an integer in [40, 1,000,000], got 3"),
    (["--routers", "knn,best-single", "--delta", "0.1", "--split", "random:1.5"], "--split: bad split"),
])
def test_bad_requests_are_one_line(args: list[str], error: str, capsys: pytest.CaptureFixture[str]) -> None:
    # no table is read: a directory that does not exist would be the error otherwise
    _, err = run(["power", "/no/such/table", *args], capsys, code=2)
    assert err.count("\n") == 1 and err.startswith("routerlab: error: ") and error in err, err


def test_help_reads_the_settings(capsys: pytest.CaptureFixture[str]) -> None:
    out = " ".join(run(["power", "-h"], capsys)[0].replace("│", " ").split())
    for text in ("(default: 0.05)", "(default: 0.8)", "(default: given)", "(e.g. 0.02); it has no default.",
                 "--versus", "--routers"):
        assert text in out, text


def test_in_an_experiment_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from routerlab.experiments.store import query

    exp = tmp_path / "exp.toml"
    exp.write_text('name = "power"\nrouters = ["knn", "best-single"]\nseeds = [0]\n'
                   'protocols = [{ name = "power", delta = 0.05, versus = "best-single" }]\n'
                   '[settings]\nn_boot = 40\n[[tables]]\npath = "demo"\nn_queries = 400\nsplit = "random"\n',
                   encoding="utf-8")
    store = tmp_path / "store"
    run(["run", str(exp), "--store", str(store), "--backend", "serial"], capsys)
    _, rows = query(store, "SELECT router, metric, value FROM results WHERE protocol = 'power' ORDER BY metric")
    assert sorted((r[0], r[1]) for r in rows) == sorted([("best-single", "mu_o"), *(("knn", m) for m in (
        "mu_o", "mu_o_difference", "sd_difference", "n_needed", "power_at_n", "n_needed_observed",
        "power_observed"))])
    _, cells = query(store, "SELECT router, status FROM cells ORDER BY router")
    assert cells == [("best-single", "ok"), ("knn", "ok")]
    # the same numbers as the command on the same table, split and seed
    _, (split,) = query(store, "SELECT DISTINCT split FROM cells")
    demo(400).save(tmp_path / "demo400")
    record = json.loads(run(["power", str(tmp_path / "demo400"), "--routers", "knn", "--versus", "best-single",
                             "--delta", "0.05", "--n-boot", "40", "--split", split[0], "--json"], capsys)[0])
    stored = {r[1]: r[2] for r in rows if r[0] == "knn"}
    c = record["comparisons"][0]
    assert stored["n_needed"] == c["n_needed"] and stored["mu_o_difference"] == pytest.approx(c["mu_o_difference"])
