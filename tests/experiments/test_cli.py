"""``routerlab run`` and ``routerlab results``: the commands, their output, and one-line errors (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routerlab.cli import main
from tests.experiments.helpers import write_experiment


def _run(tmp_path: Path, *extra: str) -> Path:
    store = tmp_path / "store"
    assert main(["run", str(write_experiment(tmp_path)), "--store", str(store), "--backend", "serial", *extra]) == 0
    return store


@pytest.fixture(scope="module")
def built_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store the read-only tests share (they never change it: that is what some of them check)."""
    return _run(tmp_path_factory.mktemp("built"))


def _one_line_error(capsys: pytest.CaptureFixture[str], code: int, *needles: str) -> str:
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("routerlab: error:")]
    assert len(errors) == 1, err
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


def test_run_prints_reuse_and_leaderboard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _run(tmp_path)
    out = capsys.readouterr().out
    assert "small: 0 of 12 cells reused" in out
    assert "mu_o mean" in out and "knn" in out and "cold-start" in out
    assert "132 rows ->" in out  # 12 cells x 11 records (9 metrics, top_share, collapsed_flag)
    assert "small: 12 of 12 cells reused" not in out
    assert main(["run", str(tmp_path / "exp.toml"), "--store", str(store), "--backend", "serial", "--json"]) == 0
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    assert "small: 12 of 12 cells reused" in captured.err
    assert main(["run", str(tmp_path / "exp.toml"), "--store", str(store), "--backend", "dask"]) == 0
    assert "nothing to run: 12 of 12 cells reused from" in capsys.readouterr().out  # and no cluster was started
    assert (record["cells_reused"], record["cells_run"], record["rows_written"]) == (12, 0, 0)
    assert {r["router"] for r in record["leaderboard"]} == {"oracle", "best-single", "knn"}


def test_results_query_text_and_json(built_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = built_store
    sql = "SELECT router, count(*) AS n FROM results WHERE metric = 'mu_o' GROUP BY router ORDER BY router"
    assert main(["results", "query", sql, "--store", str(store)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["router", "n"]
    assert [line.split() for line in out[2:5]] == [["best-single", "4"], ["knn", "4"], ["oracle", "4"]]
    assert out[-1] == "(3 rows)"
    assert main(["results", "query", sql, "--store", str(store), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"router": "best-single", "n": 4}, {"router": "knn", "n": 4},
                                                   {"router": "oracle", "n": 4}]


def test_results_show_leaderboard(built_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = built_store
    assert main(["results", "show", "--store", str(store), "--metric", "acc_at_1", "--json"]) == 0
    board = json.loads(capsys.readouterr().out)
    assert len(board) == 6  # 3 routers x 2 protocols on one table
    assert all(r["seeds"] == 2 and r["seed_min"] <= r["mean"] <= r["seed_max"] for r in board)
    full = [r for r in board if r["protocol"] == "full"]
    assert full[0]["router"] == "oracle"  # ranked by the mean, best first
    assert main(["results", "show", "--store", str(store)]) == 0
    assert "mu_o mean" in capsys.readouterr().out
    # a lower-is-better metric (its direction in the metric catalog) ranks lowest first
    assert main(["results", "show", "--store", str(store), "--metric", "mean_cost", "--json"]) == 0
    cost_board = json.loads(capsys.readouterr().out)
    for protocol in ("full", "cold-start"):
        costs = [r["mean"] for r in cost_board if r["protocol"] == protocol]
        assert len(costs) == 3 and costs == sorted(costs) and costs[0] < costs[-1]
    code = main(["results", "show", "--store", str(store), "--metric", "nope"])
    _one_line_error(capsys, code, "--metric 'nope'", "mu_o")


def test_results_query_is_read_only(built_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = built_store
    code = main(["results", "query", "DELETE FROM results", "--store", str(store)])
    _one_line_error(capsys, code, "read-only")
    code = main(["results", "query", f"COPY results TO '{tmp_path / 'out.csv'}'", "--store", str(store)])
    _one_line_error(capsys, code, "results query:")
    assert not (tmp_path / "out.csv").exists()
    assert main(["results", "query", "SELECT count(*) AS n FROM results", "--store", str(store), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 132}]


def test_bad_sql_is_one_line(built_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = built_store
    code = main(["results", "query", "SELEC * FROM results", "--store", str(store)])
    _one_line_error(capsys, code, "results query:", "syntax error")
    code = main(["results", "query", "SELECT nope FROM results", "--store", str(store)])
    _one_line_error(capsys, code, "nope")


@pytest.mark.parametrize(("args", "needles"), [
    (["run", "{tmp}/missing.toml", "--backend", "serial"], ["missing.toml: no such file"]),
    (["run", "{tmp}/bad.toml", "--backend", "serial"], ["bad.toml: not valid TOML"]),
    (["run", "{tmp}/exp.toml", "--backend", "nope"], ["--backend", "nope"]),
    (["run", "{tmp}/exp.toml", "--backend", "local", "--scheduler", "tcp://127.0.0.1:1"], ["--scheduler"]),
    (["run", "{tmp}/exp.toml", "--backend", "dask", "--scheduler", "nohost"], ["--scheduler", "tcp://HOST:PORT"]),
    (["run", "{tmp}/exp.toml", "--backend", "serial", "--store", "{tmp}/afile"], ["--store", "not a directory"]),
    (["run", "{tmp}/exp.toml", "--backend", "serial", "--store", "{tmp}/afile/sub"], ["--store", "which is a file"]),
    (["run", "{tmp}/exp.toml", "--backend", "serial", "--workers", "0"], ["--workers"]),
    (["run", "{tmp}/exp.toml", "--backend", "serial", "--metric", "accuracy"], ["--metric 'accuracy'", "mu_o"]),
    (["run", "{tmp}/exp.toml", "--backend", "serial", "--workers", "2"], ["--workers 2", "serial"]),
    (["results", "query", "SELECT 1", "--store", "{tmp}/nostore"], ["no results store", "routerlab run"]),
    (["results", "show", "--store", "{tmp}/nostore"], ["no results store"]),
    (["results", "query", "  ", "--store", "{tmp}/nostore"], ["SQL is empty"]),
])
def test_bad_command_lines_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               args: list[str], needles: list[str]) -> None:
    write_experiment(tmp_path)
    (tmp_path / "bad.toml").write_text("name = [\n", encoding="utf-8")
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    code = main([a.replace("{tmp}", str(tmp_path)) for a in args])
    _one_line_error(capsys, code, *needles)
    assert not (tmp_path / "afile").is_dir()


def test_show_keeps_table_versions_and_settings_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    for n_queries, n_boot in ((120, 40), (150, 40), (150, 50)):
        path = tmp_path / f"e{n_queries}-{n_boot}.toml"
        path.write_text(f'name = "e"\nrouters = ["best-single"]\nseeds = [0]\nprotocols = ["full"]\n'
                        f'[settings]\nn_boot = {n_boot}\n[[tables]]\npath = "demo"\nn_queries = {n_queries}\n',
                        encoding="utf-8")
        assert main(["run", str(path), "--store", str(store), "--backend", "serial"]) == 0
    capsys.readouterr()
    assert main(["results", "show", "--store", str(store), "--json"]) == 0
    board = json.loads(capsys.readouterr().out)
    assert len(board) == 3 and len({r["data_hash"] for r in board}) == 2  # never averaged across versions
    assert main(["results", "show", "--store", str(store)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["table", "protocol", "settings"]
    labels = {line.split()[0] for line in lines[2:] if not line.startswith("legend  ")}  # the legend is last
    assert len(labels) == 2 and all(label.startswith("demo@") for label in labels)
    assert sum("n_boot=50" in line for line in lines) == 1


def test_table_option_runs_the_same_experiment_on_another_table(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from routerlab.datasets import demo
    from routerlab.experiments.store import query

    other = tmp_path / "other"
    demo(n_queries=240, seed=5).save(other)
    exp = write_experiment(tmp_path, routers='"best-single"', seeds="0")
    store = tmp_path / "store"
    assert main(["run", str(exp), "--store", str(store), "--backend", "serial"]) == 0
    assert main(["run", str(exp), "--store", str(store), "--backend", "serial", "--table", f"demo={other}"]) == 0
    assert "0 of 2 cells reused" in capsys.readouterr().out  # another table: other cells
    _, rows = query(store, "SELECT DISTINCT table_name, data_hash FROM cells ORDER BY data_hash")
    assert len(rows) == 2 and {r[0] for r in rows} == {"demo"}
    _, sizes = query(store, "SELECT DISTINCT n_train + n_test FROM cells ORDER BY 1")
    assert [s[0] for s in sizes] == [240, 300]


@pytest.mark.parametrize("value,needle", [
    ("demo", "--table 'demo': write NAME=PATH"),
    ("nosuch=demo", "--table nosuch=...: the experiment has no table 'nosuch' (its tables: demo)"),
    ("demo=", "--table 'demo=': write NAME=PATH"),
    ("demo=/no/such/dir", "no such directory (/no/such/dir)"),
])
def test_bad_table_options_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str,
                                        needle: str) -> None:
    exp = write_experiment(tmp_path)
    _one_line_error(capsys, main(["run", str(exp), "--store", str(tmp_path / "s"), "--table", value]), needle)


def test_a_store_from_before_slices_gains_the_column(tmp_path: Path) -> None:
    import duckdb

    from routerlab.experiments.store import RESULT_COLUMNS, query

    store = tmp_path / "old"
    store.mkdir()
    old = [(c, t) for c, t in RESULT_COLUMNS if c != "slice"]
    con = duckdb.connect(str(store / "results.duckdb"))
    con.execute(f"CREATE TABLE results ({', '.join(f'{c} {t}' for c, t in old)})")
    con.execute(f"INSERT INTO results ({', '.join(c for c, _ in old)}) VALUES ('r', 'c', 'e', 't', 'h', 'given', "
                "'full', 'knn', 0, '{}', 'mu_o', 0.5, 0.4, 0.6, '0', now())")
    con.close()
    exp = write_experiment(tmp_path, routers='"best-single"', seeds="0")
    assert main(["run", str(exp), "--store", str(store), "--backend", "serial"]) == 0
    _, rows = query(store, "SELECT slice, count(*) FROM results GROUP BY slice ORDER BY slice")
    assert rows[0][0] == "" and rows[0][1] > 1  # the old row and the new ones, all on the whole test set


@pytest.mark.slow
def test_one_experiment_reaches_all_ten_protocols(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """examples/all-protocols.toml: every registered protocol runs from one file, results query finds rows of
    each, and every stored metric is in the metric catalog under the protocol that wrote it."""
    from routerlab.experiments.store import query
    from routerlab.metrics.catalog import metric_info
    from routerlab.protocols.base import protocol_names

    example = Path(__file__).resolve().parents[2] / "examples" / "all-protocols.toml"
    store = tmp_path / "store"
    assert main(["run", str(example), "--store", str(store), "--backend", "serial"]) == 0
    err = capsys.readouterr().err
    assert err.count("take no routers: the experiment's router list is ignored") == 1
    _, rows = query(store, "SELECT protocol, count(*) FROM results GROUP BY protocol ORDER BY protocol")
    # agentic needs a table of agent episodes, which the demo is not (tests/protocols/test_agentic.py runs it)
    assert [r[0] for r in rows] == sorted(p for p in protocol_names() if p != "agentic") and len(rows) == 11
    assert all(n > 0 for _, n in rows)
    _, pairs = query(store, "SELECT DISTINCT protocol, metric FROM results")
    assert all(p in metric_info(m).protocols for p, m in pairs), pairs
    _, sliced = query(store, "SELECT DISTINCT protocol FROM results WHERE slice <> '' ORDER BY 1")
    assert {r[0] for r in sliced} >= {"voyager", "robustness", "scaling", "groups", "two-model", "ope"}
    # society and scaling: one cell each (router ''), whatever the router list
    _, cells = query(store, "SELECT protocol, count(*) FROM cells WHERE router = '' GROUP BY protocol ORDER BY 1")
    assert cells == [("scaling", 1), ("society", 1)]


def test_path_settings_are_relative_to_the_experiment_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    """ope's logs (declared path=True) name a file beside the experiment, as a string or an array."""
    from routerlab.experiments.schema import load_experiment
    from routerlab.experiments.store import query

    (tmp_path / "logs").mkdir()
    assert main(["log", "--part", "test", "--seed", "1", "-o", str(tmp_path / "logs" / "test.csv")]) == 0
    capsys.readouterr()
    for logs in ('"logs/test.csv"', '["logs/test.csv"]'):
        exp = tmp_path / "exp.toml"
        exp.write_text(f'name = "p"\nrouters = ["best-single"]\nseeds = [0]\nprotocols = [{{ name = "ope", logs = '
                       f'{logs} }}]\n[settings]\nn_boot = 40\n[[tables]]\npath = "demo"\n', encoding="utf-8")
        spec = load_experiment(exp).protocols[0]
        assert [str(p) for p in (spec.options["logs"] if isinstance(spec.options["logs"], list)
                                 else [spec.options["logs"]])] == [str(tmp_path / "logs" / "test.csv")]
    assert main(["run", str(exp), "--store", str(tmp_path / "s"), "--backend", "serial"]) == 0
    _, rows = query(tmp_path / "s", "SELECT count(*) FROM results WHERE protocol = 'ope' AND slice LIKE 'estimator=%'")
    assert rows[0][0] > 0


def test_quick_and_paper_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = write_experiment(tmp_path, seeds="0").read_text() + (
        '[quick]\nrouters = ["oracle", "knn"]\nsettings = { n_boot = 50 }\n'
        '[quick.protocols]\ncold-start = { logging = "eps-greedy:knn:0.2" }\n'
        '[[paper]]\nclaim = "oracle mu_o"\nvalue = 0.5\nprotocol = "full"\nrouter = "oracle"\nmetric = "mu_o"\n'
        'tolerance = 1.0\n')
    path = tmp_path / "paper.toml"
    path.write_text(text, encoding="utf-8")
    store = tmp_path / "store"
    assert main(["run", str(path), "--store", str(store), "--quick", "--backend", "serial"]) == 0
    out = capsys.readouterr().out
    assert "| oracle mu_o | 0.500 |" in out and "yes (tolerance 1)" in out and "peak memory" in out
    assert "best-single" not in out  # [quick] replaced the routers
    assert main(["results", "paper", str(path), "--store", str(store), "--quick", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["agrees"] is True and 0 < rows[0]["routerlab"] <= 1
    assert main(["results", "paper", str(path), "--store", str(store)]) == 0  # the full run never ran
    assert "not in the store" in capsys.readouterr().out
    _one_line_error(capsys, main(["results", "paper", str(write_experiment(tmp_path, name="plain.toml")),
                                  "--store", str(store)]), "has no [[paper]] entries")
    _one_line_error(capsys, main(["results", "paper", str(path), "--store", str(tmp_path / "none")]),
                    "no results store there")
    _one_line_error(capsys, main(["run", str(tmp_path / "plain.toml"), "--store", str(store), "--quick"]),
                    "quick: --quick: the file has no [quick] section")


def test_a_run_without_the_leaderboards_metric_ends_with_a_note_not_an_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "society.toml"
    path.write_text('name = "s"\nseeds = [0]\nprotocols = [{ name = "society", coreset = 2 }]\n'
                    '[[tables]]\npath = "demo"\nn_queries = 120\n', encoding="utf-8")
    assert main(["run", str(path), "--store", str(tmp_path / "store"), "--backend", "serial"]) == 0
    assert "no leaderboard: this run has no mu_o records" in capsys.readouterr().out
    assert main(["run", str(path), "--store", str(tmp_path / "store"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["leaderboard"] == [] and "no mu_o records" in out["leaderboard_note"]
