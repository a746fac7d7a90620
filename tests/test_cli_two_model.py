"""``routerlab two-model``: one end-to-end run with -o and --json, the printed table, and every bad value
refused in one line with exit 2 before any work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routerlab.cli import main
from tests.protocols.test_two_model import synthetic


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("two-model") / "t"
    synthetic().save(path)
    return path


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERLAB_PROGRESS", "0")


BASE = ["--small", "S", "--large", "L", "--routers", "oracle,best-single,knn:k=5", "--ood", "c", "--split",
        "given", "--boot", "50"]


def _strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise AssertionError(f"non-strict JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_end_to_end_with_output_and_json(table_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    out = tmp_path / "out"
    assert main(["two-model", str(table_dir), *BASE, "--lpm-band", "0,0.3", "--json", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    record = _strict(captured.out)
    assert isinstance(record, dict)
    assert record == _strict((out / "results.json").read_text())
    assert record["bands"] == {"lpm": [0.0, 0.3], "rp": [0.85, 0.95]} and record["n_boot"] == 50
    assert [r["router"] for r in record["results"]] == ["oracle", "best-single", "knn:k=5"]
    assert record["id_datasets"] == ["a", "b"] and record["ood_datasets"] == ["c"]
    oracle = record["results"][0]
    assert oracle["datasets"]["c"]["auroc"] == 1.0 and oracle["ood_mean"]["auroc"] == 1.0
    assert set(record["curves"]) == {"oracle", "best-single", "knn:k=5"}
    tables = (out / "tables.md").read_text()
    assert "AUROC" in tables and "| knn:k=5 |" in tables
    plots = sorted(p.name for p in out.glob("*.png"))
    assert plots == ["call_rate_a.png", "call_rate_b.png", "call_rate_c.png"]
    assert all((out / p).stat().st_size > 1000 for p in plots)
    assert (out / "results.csv").read_text().startswith("router,")
    assert captured.err.count("wrote ") == 6  # JSON on stdout, the written files on stderr


def test_compare_to_adds_paired_differences(table_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["two-model", str(table_dir), *BASE, "--compare-to", "best-single", "--json"]) == 0
    record = _strict(capsys.readouterr().out)
    assert isinstance(record, dict)
    by = {r["router"]: r for r in record["results"]}
    assert "versus" not in by["best-single"]
    assert by["oracle"]["versus"]["reference"] == "best-single"
    assert by["oracle"]["versus"]["ood_mean"]["auroc_diff"] == 0.5


def test_printed_table(table_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["two-model", str(table_dir), *BASE]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    for metric in ("AUROC", "LPM", "HCR"):
        header = next(line for line in lines if line.startswith(metric))
        assert header.split()[1:] == ["a", "b", "ID", "avg", "c", "OOD", "avg"]
    auroc = lines[lines.index(next(x for x in lines if x.startswith("AUROC"))) + 1].split()
    assert auroc == ["oracle", "1.000", "1.000", "1.000", "1.000", "1.000"]


@pytest.mark.parametrize("change,message", [
    ({"--small": "nope"}, "unknown small actor 'nope'; the table's actors are L, M, S"),
    ({"--large": "S"}, "--large: the small and the large model are both 'S'"),
    ({"--lpm-band": "0.3,0.2"}, "LO <= HI"),
    ({"--lpm-band": "nan,0.3"}, "--lpm-band: must be two numbers in [0, 1], got nan,0.3"),
    ({"--rp-band": "0.9"}, "--rp-band: needs two numbers LO,HI in [0, 1], got '0.9'"),
    ({"--rp-band": "0.8,2"}, "--rp-band: must be two numbers in [0, 1], got 0.8,2"),
    ({"--seed": "-1"}, "--seed"),
    ({"--boot": "0"}, "--boot: must be an integer in [40, "),
    ({"--convention": "routellm"}, "no call-rate grid"),
    ({"--id": "a", "--ood": "a"}, "--ood: dataset 'a' is named both in-domain and out-of-domain"),
    ({"--id": "a,,b"}, "--id needs comma-separated dataset names"),
    ({"--ood": "zz"}, "unknown out-of-domain dataset 'zz'"),
    ({"--features": "/nonexistent/signals.npz"}, "--features: no such directory or file: /nonexistent/signals.npz"),
    ({"--routers": "knn:k=0"}, "knn"),
    ({"--routers": "nope"}, "nope"),
    ({"--split": "ood:a"}, "--split: 'ood:...' does not apply here: name out-of-domain"),
    ({"--split": "random:2"}, "test fraction"),
    ({"--encoder": "nope"}, "unknown encoder 'nope'"),
    ({"--compare-to": "random"}, "--compare-to 'random' is not one of --routers"),
])
def test_bad_values_one_line_exit_2(table_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    change: dict[str, str], message: str) -> None:
    args = dict(zip(BASE[::2], BASE[1::2], strict=True))
    args.update(change)
    out = tmp_path / "out"
    argv = ["two-model", str(table_dir), *[x for kv in args.items() for x in kv], "-o", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("routerlab: error: "), err
    assert message in err[0]
    assert not (out / "results.json").exists()


def test_unwritable_output_is_refused_before_loading(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("x")
    argv = ["two-model", str(tmp_path / "no-table"), *BASE, "-o", str(tmp_path / "file" / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "-o" in err[0] and "file" in err[0]
