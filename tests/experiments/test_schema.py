"""Experiment files: every bad value is one UsageError naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from routerlab.data.store import save
from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.experiments.schema import Experiment, load_experiment
from tests.experiments.helpers import write_experiment

REPO = Path(__file__).resolve().parents[2]

GOOD = """\
name = "x"
routers = ["oracle", "knn:k=3"]
seeds = [0]
protocols = ["full"]
[[tables]]
path = "demo"
n_queries = 120
"""


def _load(tmp_path: Path, text: str) -> Experiment:
    path = tmp_path / "exp.toml"
    path.write_text(text, encoding="utf-8")
    return load_experiment(path)


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(UsageError) as info:
        _load(tmp_path, text)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(tmp_path / "exp.toml") + ": ")
    return message


def test_good_file_parses_with_defaults(tmp_path: Path) -> None:
    exp = load_experiment(write_experiment(tmp_path))
    assert exp.name == "small"
    assert exp.routers == ["oracle", "best-single", "knn"]
    assert exp.seeds == [0, 1]
    assert [p.label for p in exp.protocols] == ["full", "cold-start(logging=uniform)"]
    assert exp.settings_grid == [{"encoder": "tfidf", "n_boot": 40, "skip_inapplicable": False}]
    assert exp.tables[0].split == "random:0.2" and exp.tables[0].demo_options == {"n_queries": 300}
    assert exp.n_cells == 1 * 2 * 3 * 2 * 1
    assert len(exp.file_hash) == 64


def test_shipped_demo_experiment_parses() -> None:
    exp = load_experiment(REPO / "examples" / "demo-experiment.toml")
    assert len(exp.routers) >= 3 and len(exp.seeds) >= 2
    assert {p.name for p in exp.protocols} == {"full", "cold-start"}


@pytest.mark.parametrize(("text", "key", "says"), [
    (GOOD.replace('name = "x"\n', ""), "name", "missing"),
    (GOOD.replace("seeds = [0]", 'seeds = "0"'), "seeds", "must be an array"),
    (GOOD.replace("seeds = [0]", "seeds = [0, -1]"), "seeds[2]", "between 0 and"),
    (GOOD.replace("seeds = [0]", "seeds = [0, 0]"), "seeds[2]", "listed twice"),
    (GOOD.replace('routers = ["oracle", "knn:k=3"]', "routers = []"), "routers", "must not be empty"),
    (GOOD.replace('"knn:k=3"', '"knn:kk=3"'), "routers[2]", "no option"),
    (GOOD.replace('"knn:k=3"', '"nosuchrouter"'), "routers[2]", "nosuchrouter"),
    (GOOD.replace('"knn:k=3"', "3"), "routers[2]", "must be a string"),
    (GOOD.replace("routers =", "router ="), "router", "did you mean 'routers'"),
    (GOOD.replace('["full"]', '["ful"]'), "protocols[1].name", "did you mean 'full'"),
    (GOOD.replace('["full"]', '[{name = "full", logging = "uniform"}]'), "protocols[1].logging",
     "applies to protocol cold-start and ope only, not to full"),
    (GOOD.replace('["full"]', '[{name = "cold-start", logging = "bogus"}]'), "protocols[1].logging",
     "unknown logging policy"),
    (GOOD.replace('["full"]', '[{name = "voyager", rounds = 1}]'), "protocols[1].rounds",
     "must be an integer >= 2, got 1"),
    (GOOD.replace('path = "demo"', 'path = "no/such/dir"'), "[[tables]][1].path", "no such directory"),
    (GOOD.replace("n_queries = 120", "n_querys = 120"), "[[tables]][1].n_querys", "did you mean 'n_queries'"),
    (GOOD.replace("n_queries = 120", "n_queries = 5"), "[[tables]][1].n_queries", "between 12"),
    (GOOD.replace("n_queries = 120", "test_fraction = 0.3"), "[[tables]][1].test_fraction", "split = \"random\""),
    (GOOD.replace("n_queries = 120", 'split = "random"\ntest_fraction = 1.5'), "[[tables]][1].test_fraction",
     "between 0 and 1"),
    (GOOD.replace("n_queries = 120", 'split = "ood"'), "[[tables]][1].split", "'given' or 'random'"),
    (GOOD.replace("n_queries = 120", "dev = 1.0"), "[[tables]][1].dev", "between 0 and 1"),
    (GOOD.replace("n_queries = 120", "dev = nan"), "[[tables]][1].dev", "must be a number"),
    (GOOD.replace("n_queries = 120", 'dev = "0.2"'), "[[tables]][1].dev", "must be a number"),
    (GOOD.replace('["full"]', '[{name = "full", dev = 1.2}]'), "protocols[1].dev", "must be in (0, 1)"),
    (GOOD + '[[tables]]\npath = "demo"\n', "[[tables]][2].name", "names must be unique"),
    (GOOD.replace("[[tables]]", "[tables]"), "tables", "[[tables]]"),
    (GOOD + "[settings]\nn_boot = 10\n", "settings.n_boot", "between 40"),
    (GOOD + '[settings]\nencoder = ["tfidf", "nope"]\n', "settings.encoder[2]", "unknown encoder"),
    (GOOD + "[settings]\nboot = 100\n", "settings.boot", "did you mean 'n_boot'"),
    (GOOD + '[settings]\nskip_inapplicable = "yes"\n', "settings.skip_inapplicable", "true or false"),
])
def test_errors_name_the_key(tmp_path: Path, text: str, key: str, says: str) -> None:
    message = _error(tmp_path, text)
    assert f": {key}: " in message, message
    assert says in message, message


def test_a_table_dev_part_is_read_and_ignored_with_a_note_where_no_choice_is_made(tmp_path: Path) -> None:
    exp = _load(tmp_path, GOOD.replace("n_queries = 120", "n_queries = 120\ndev = 0.25").replace(
        '["full"]', '["full", "society"]'))
    assert exp.tables[0].dev == 0.25
    assert any("society" in n and "[[tables]] dev is ignored" in n for n in exp.notes), exp.notes
    assert _load(tmp_path, GOOD).tables[0].dev is None


def test_not_toml_and_missing_file(tmp_path: Path) -> None:
    assert "not valid TOML" in _error(tmp_path, "name = \n")
    with pytest.raises(UsageError, match="no such file"):
        load_experiment(tmp_path / "missing.toml")
    with pytest.raises(UsageError, match="is a directory"):
        load_experiment(tmp_path)


def test_paths_are_relative_to_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    save(demo(n_queries=60), tmp_path / "tables" / "small")
    (tmp_path / "exp").mkdir()
    text = GOOD.replace('path = "demo"\nn_queries = 120', 'path = "../tables/small"')
    exp_file = tmp_path / "exp" / "e.toml"
    exp_file.write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path / "tables")  # somewhere else: the path must not depend on the working directory
    exp = load_experiment(exp_file)
    assert exp.tables[0].path == tmp_path / "exp" / ".." / "tables" / "small"
    assert exp.tables[0].name == "small"
    assert exp.tables[0].load().n_queries == 60


def test_settings_arrays_sweep(tmp_path: Path) -> None:
    exp = _load(tmp_path, GOOD + "[settings]\nn_boot = [40, 80]\n")
    assert [s["n_boot"] for s in exp.settings_grid] == [40, 80]
    assert exp.n_cells == 1 * 1 * 2 * 1 * 2


def test_precomputed_encoder_path_is_relative_to_the_file(tmp_path: Path) -> None:
    exp = _load(tmp_path, GOOD + '[settings]\nencoder = "precomputed:path=vectors/q.npy"\n')
    assert exp.settings_grid[0]["encoder"] == f"precomputed:path={tmp_path / 'vectors' / 'q.npy'}"
    absolute = _load(tmp_path, GOOD + '[settings]\nencoder = "precomputed:path=/abs/q.npy"\n')
    assert absolute.settings_grid[0]["encoder"] == "precomputed:path=/abs/q.npy"
