"""One run record (SPEC 7) in one shape: evaluate, scaling, groups, society and audit all carry the
routerlab version, the data (name, content hash, size), the split and the seed the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routerlab import __version__
from routerlab.cli import main
from routerlab.data.provenance import Provenance
from routerlab.data.splits import make_split
from routerlab.datasets import demo

SMALL = demo(300, seed=3)


def test_provenance_by_hand() -> None:
    sp = make_split(SMALL, "random:0.25", seed=7)
    rec = Provenance.of(SMALL, sp, seed=7, encoder="tfidf", routers=["knn", "oracle"],
                        split_extra={"n_test": 5}).to_dict()
    assert rec == {
        "routerlab_version": __version__,
        "data": {"name": SMALL.name, "content_hash": SMALL.content_hash, "n_queries": 300, "n_actors": 8},
        "split": {**sp.describe(), "n_test": 5},
        "encoder": "tfidf", "seed": 7, "routers": ["knn", "oracle"],
    }
    # fields not used by a run are left out, not written as null
    assert set(Provenance.of(SMALL, "all").to_dict()) == {"routerlab_version", "data", "split"}


@pytest.mark.parametrize("command", [
    ["evaluate", "--routers", "random,best-single", "--n-boot", "40"],
    ["scaling", "--m", "2", "--samples", "3"],
    ["groups", "--m", "2", "--draws", "3", "--routers", "random", "--n-boot", "40"],
    ["society"],
    ["audit", "--only", "table,bounds"],
])
def test_every_command_records_the_same_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              command: list[str]) -> None:
    SMALL.save(tmp_path / "t")
    args = [command[0], str(tmp_path / "t"), *command[1:], "--seed", "5", "--json"]
    if command[0] == "audit":
        args += ["-o", str(tmp_path / "a")]
    assert main(args) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["routerlab_version"] == __version__
    assert rec["data"] == {"name": SMALL.name, "content_hash": SMALL.content_hash, "n_queries": 300,
                           "n_actors": 8, **({"synthetic": True} if command[0] == "audit" else {})}
    assert rec["seed"] == 5
    assert rec["split"] == "train" if command[0] == "society" else rec["split"]["kind"] == "given"
    assert "table" not in rec and "content_hash" not in rec  # the old per-command shapes are gone
