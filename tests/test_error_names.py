"""Error lines name the thing that is wrong (issue 21: "a few errors name the wrong thing"), found by trying bad
values on each command: an unknown router was reported as a bad option of it, a directory given as a log file as
"no such log file", and ``log`` / ``perturb`` refused a split or policy without naming the option (and only after
reading the table)."""

from __future__ import annotations

from pathlib import Path

import pytest

from routerlab.cli import main


@pytest.fixture
def log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "test.csv"
    assert main(["log", "--part", "test", "-o", str(path)]) == 0
    capsys.readouterr()
    return path


def error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err.removeprefix("routerlab: error: ").strip()


def test_an_unknown_router_is_named_before_its_options(capsys: pytest.CaptureFixture[str]) -> None:
    # it said "bad router option 'b' in 'nope:b'": the router itself does not exist
    assert error(["evaluate", "--routers", "nope:b"], capsys).startswith("unknown router 'nope'; known routers:")
    assert error(["evaluate", "--routers", "knn:b"], capsys).startswith("bad router option 'b' in 'knn:b'")


def test_log_and_perturb_name_the_option_before_reading_the_table(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "no-table")  # never read: the option is refused first
    assert error(["log", missing, "-o", str(tmp_path / "l.csv"), "--split", "halves"], capsys) == (
        "--split: unknown split 'halves'; use given, random[:F] or ood:DS1,DS2")
    assert error(["log", missing, "-o", str(tmp_path / "l.csv"), "--split", "random:2"], capsys) == (
        "--split: bad split 'random:2': the test fraction must be in (0, 1)")
    assert error(["log", missing, "-o", str(tmp_path / "l.csv"), "--policy", "sometimes"], capsys).startswith(
        "--policy: unknown logging policy 'sometimes'")
    assert error(["perturb", missing, "-o", str(tmp_path / "v.jsonl"), "--split", "halves"], capsys).startswith(
        "--split: unknown split 'halves'")


def test_a_directory_is_not_called_a_missing_log_file(tmp_path: Path, log: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert error(["ope", str(log), "--train-logs", str(tmp_path)], capsys) == (
        f"--train-logs: {tmp_path}: is a directory, not a log file")
    assert error(["ope", str(log), "--train-logs", str(tmp_path / "none.csv")], capsys) == (
        f"--train-logs: {tmp_path / 'none.csv'}: no such log file")


def test_serve_names_several_unknown_actors_in_the_plural(capsys: pytest.CaptureFixture[str]) -> None:
    text = error(["serve", "knn", "--actors", "a=local:smollm2-135m,b=local:smollm2-135m"], capsys)
    assert text.endswith("a, b are not actors of the table")
