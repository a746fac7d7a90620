"""Every bad command line of issue 7 ends in one readable error line and exit code 2, checked before any
data is loaded or router trained; flags and options have help; ``--version`` works."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
import typer

import routerlab
from routerlab.cli import _io, _register_commands, app, main
from routerlab.data.table import Actors
from routerlab.datasets import demo
from routerlab.errors import UsageError


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("cli") / "t"
    demo(n_queries=120, seed=0).save(path)
    return str(path)


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("routerlab: error: "), err
    return lines[0]


FAST = ["--routers", "random,best-single", "--n-boot", "40"]

CASES = [
    # router option ranges
    (["evaluate", "T", "--routers", "mlp:hidden=-5"], "router 'mlp': option hidden=-5 is out of range"),
    (["evaluate", "T", "--routers", "mlp:lr=nan"], "router 'mlp': option lr=nan is out of range"),
    (["evaluate", "T", "--routers", "mlp:epochs=-1"], "option epochs=-1 is out of range"),
    (["evaluate", "T", "--routers", "avenger:k=0"], "router 'avenger': option k=0 is out of range"),
    (["evaluate", "T", "--routers", "cluster:k=5000"], "option k=5000 is larger than the training set"),
    (["evaluate", "T", "--routers", "knn:k=5000"], "option k=5000 is larger than the training set"),
    # groups
    (["groups", "T", "--m", "0", *FAST], "--m: item 1: must be an integer >= 1, got 0"),
    (["groups", "T", "--m", "", *FAST], "--m: needs at least one value"),
    (["groups", "T", "--m", "2,x", *FAST],
     "--m: item 2: must be an integer, 'all', 'N|all' or a range like '2..all', got a string ('x')"),
    (["groups", "T", "--m", "99", *FAST], "--m: pool size 99 is larger than the table's 8 actors"),
    (["groups", "T", "--draws", "0", *FAST], "--draws: must be an integer in [1, "),
    (["groups", "T", "--draws", "-1", *FAST], "--draws: must be an integer in [1, "),
    (["groups", "T", "--seed", "-1", *FAST], "Invalid value for '--seed'"),
    (["groups", "T", "--m", "2", "--routers", "random", "--n-boot", "1"], "--n-boot: must be an integer in [40, "),
    (["groups", "T", "--m", "2", *FAST, "--compare-to", "knn"], "--compare-to: 'knn' is not a router of this run"),
    # scaling
    (["scaling", "T", "--samples", "0"], "--samples: must be an integer in [1, "),
    (["scaling", "T", "--samples", "-3"], "--samples: must be an integer in [1, "),
    (["scaling", "T", "--seed", "-1"], "Invalid value for '--seed'"),
    (["scaling", "T", "--p", "1.5"], "--p: item 1: must be a finite number in [0, 1], got 1.5"),
    (["scaling", "T", "--p", "0,-0.1"], "--p: item 2: must be a finite number in [0, 1], got -0.1"),
    (["scaling", "T", "--p", "nan"], "--p: item 1: must be a finite number in [0, 1], got nan"),
    (["scaling", "T", "--p", "inf"], "--p: item 1: must be a finite number in [0, 1], got inf"),
    (["scaling", "T", "--p", ""], "--p: needs at least one value"),
    (["scaling", "T", "--m", ""], "--m: needs at least one value"),
    (["scaling", "T", "--m", "0"], "--m: item 1: must be an integer >= 1, got 0"),
    (["scaling", "T", "--m", "2,2"], "--m: lists 2 twice"),
    (["scaling", "T", "--m", "2,9,10"], "--m: pool sizes 9, 10 are larger than the table's 8 actors"),
    # evaluate
    (["evaluate", "T", *FAST, "--n-boot", "0"], "--n-boot: must be an integer in [40, 1,000,000], got 0"),
    (["evaluate", "T", *FAST, "--n-boot", "-5"], "--n-boot: must be an integer in [40, 1,000,000], got -5"),
    (["evaluate", "T", *FAST, "--n-boot", "1"], "--n-boot: must be an integer in [40, 1,000,000], got 1"),
    (["evaluate", "T", *FAST, "--split", "random", "--seed", "-1"], "Invalid value for '--seed'"),
    (["evaluate", "T", *FAST, "--compare-to", "knn"], "--compare-to 'knn' is not a router of this run"),
    (["evaluate", "T", *FAST, "--sweep", "speed"], "--sweep: must be one of cost, latency, got 'speed'"),
    (["evaluate", "T", "--routers", ""], "--routers needs at least one router"),
    (["evaluate", "T", "--routers", "nosuch"], "unknown router 'nosuch'"),
    # society and audit
    (["society", "T", "--seed", "-1"], "Invalid value for '--seed'"),
    (["society", "T", "--coreset", "0"], "--coreset: must be an integer >= 1, got 0"),
    (["society", "T", "--coreset", "9"], "--coreset: must be in 1..8 (the pool's actors), got 9"),
    (["society", "T", "--curve-max", "0"], "--curve-max: must be an integer >= 1, got 0"),
    (["society", "T", "--coreset", "3", "--alpha", "nan"], "--alpha: must be a finite number in [0, 1], got nan"),
    (["society", "T", "--coreset", "3", "--alpha", "1.5"], "--alpha: must be a finite number in [0, 1], got 1.5"),
    (["society", "T", "--alpha", "0.5"], "--alpha: applies only with a coreset"),
    (["society", "T", "--nan", "keep"], "--nan: must be one of drop, raise, zero, got 'keep'"),
    (["audit", "T", "--seed", "-1"], "Invalid value for '--seed'"),
    # click's own usage errors are one line too
    (["evaluate", "T", "--no-such-option"], "No such option: --no-such-option"),
    (["nosuchcommand"], "No such command 'nosuchcommand'"),
    (["scaling", "T", "--samples", "many"], "Invalid value for '--samples'"),
]


@pytest.mark.parametrize("args,needle", CASES, ids=[" ".join(a[0:1] + a[2:4]) for a, _ in CASES])
def test_bad_command_lines_are_one_line_exit_2(args: list[str], needle: str, table_dir: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    argv = [table_dir if a == "T" else a for a in args]
    assert main(argv) == 2
    assert needle in one_error_line(capsys)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"routerlab {routerlab.__version__}"


def test_every_option_and_argument_has_help_and_flags_show_no_bool() -> None:
    _register_commands()  # every command module (``--version`` imports none of them)
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    assert len(group.commands) >= 9
    for name, cmd in group.commands.items():
        for param in cmd.params:
            if param.name == "help":
                continue
            assert getattr(param, "help", None), f"{name} {param.name} has no help"
            if getattr(param, "is_flag", False):
                assert param.metavar == "", f"{name} --{param.name} shows a metavar"


def test_flags_in_help_text_have_no_bool(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("evaluate", "scaling", "groups", "society", "audit", "info", "routers"):
        assert main([command, "-h"]) == 0
        lines = [ln for ln in capsys.readouterr().out.splitlines() if "--json" in ln]
        assert lines and all("<bool>" not in ln for ln in lines), command


def test_compare_to_none_and_auto(table_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", table_dir, *FAST, "--compare-to", "none", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert all("paired" not in r for r in results)
    assert main(["evaluate", table_dir, *FAST, "--json"]) == 0  # auto: best-single is in the run
    results = json.loads(capsys.readouterr().out)["results"]
    assert results[0]["paired"]["versus"] == "best-single"
    assert main(["evaluate", table_dir, "--routers", "random,oracle", "--n-boot", "40", "--json"]) == 0
    assert all("paired" not in r for r in json.loads(capsys.readouterr().out)["results"])


def test_every_interval_contains_its_estimate(table_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", table_dir, *FAST, "--json"]) == 0
    for r in json.loads(capsys.readouterr().out)["results"]:
        for key, (lo, hi) in r["ci"].items():
            est = r["metrics"][key]
            assert lo is None or lo - 1e-12 <= est <= hi + 1e-12, (r["spec"], key)


def test_interval_outside_its_estimate_is_undefined() -> None:
    from routerlab.protocols.full import interval

    assert interval(0.5, 0.4, 0.6) == (0.4, 0.6)
    lo, hi = interval(0.7, 0.4, 0.6)
    assert lo != lo and hi != hi  # NaN: undefined


def test_scaling_p_stays_below_the_oracle(table_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scaling", table_dir, "--m", "2,8", "--p", "0,1", "--samples", "5", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["oracle_p"]["1.0"]["mean"][-1] >= rec["oracle_p"]["0.0"]["mean"][-1]


def test_inapplicable_router_fails_before_any_training(table_dir: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    bare = demo(n_queries=120, seed=0)
    bare = replace(bare, actors=Actors.create(bare.actor_names), cost_usd=None, latency_s=None)
    bare.save(tmp_path / "bare")
    from routerlab.routers.neighbours import KNNRouter

    def boom(*args: object) -> None:
        raise AssertionError("knn was trained before cheapest was checked")

    monkeypatch.setattr(KNNRouter, "_fit", boom)
    assert main(["evaluate", str(tmp_path / "bare"), "--routers", "knn,cheapest", "--n-boot", "40"]) == 2
    assert "router 'cheapest' needs cost or prices" in one_error_line(capsys)
    assert main(["groups", str(tmp_path / "bare"), "--routers", "knn,fastest", "--m", "2", "--draws", "2"]) == 2
    assert "router 'fastest' needs latency" in one_error_line(capsys)


def test_skip_inapplicable_lists_skipped_routers() -> None:
    from routerlab.protocols.full import evaluate

    t = demo(n_queries=120, seed=0)
    t = replace(t, actors=Actors.create(t.actor_names), cost_usd=None, latency_s=None)
    ev = evaluate(t, ["random", "cheapest"], n_boot=40, skip_inapplicable=True)
    assert [r.spec for r in ev.results] == ["random"]
    assert "needs cost or prices" in ev.extra["skipped"]["cheapest"]
    with pytest.raises(UsageError, match="compare_to 'knn' is not a router of this run"):
        evaluate(t, ["random"], n_boot=40, compare_to="knn")


# ---------------------------------------------------------------------------- output paths
@pytest.mark.parametrize("command", [["evaluate", *FAST], ["scaling", "--samples", "2"],
                                     ["groups", "--m", "2", "--draws", "2", *FAST], ["society"], ["audit"]])
def test_output_is_checked_before_loading(command: list[str], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    existing = tmp_path / "file.txt"
    existing.write_text("x")
    missing_table = str(tmp_path / "no-such-table")  # would fail to load: the -o error must come first
    argv = [command[0], missing_table, *command[1:]]
    assert main([*argv, "-o", str(existing)]) == 2
    assert f"-o {existing}: is an existing file" in one_error_line(capsys)
    assert main([*argv, "-o", str(existing / "sub")]) == 2
    assert "which is a file" in one_error_line(capsys)


def test_check_output_dir_read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _io.check_output_dir(tmp_path / "new" / "deeper")  # a new path under a writable dir is fine
    _io.check_output_dir(tmp_path)  # an existing writable dir is fine
    assert not list(tmp_path.iterdir())  # the probe left nothing behind
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.geteuid() != 0:  # as root a chmod does not stop writes: the probe below covers that case
            with pytest.raises(UsageError, match="cannot write there"):
                _io.check_output_dir(ro)
        monkeypatch.setattr(_io, "probe_writable", lambda d: d != ro)
        with pytest.raises(UsageError, match=rf"-o {ro}: cannot write there$"):
            _io.check_output_dir(ro)
        with pytest.raises(UsageError, match=f"nearest existing parent {ro} is not writable"):
            _io.check_output_dir(ro / "a" / "b")
    finally:
        ro.chmod(0o700)


def test_read_only_output_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(_io, "probe_writable", lambda d: False)
    assert main(["scaling", "--samples", "2", "-o", str(tmp_path / "out")]) == 2
    assert "cannot write there" in one_error_line(capsys)
