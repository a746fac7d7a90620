"""Where an experiment's tables come from (experiments/sources.py), its [quick] section and [[paper]] entries:
upstream files imported on load and cached, seeded samples, derived tables (coreset, actors), and the paper's
numbers compared with routerlab's from the store."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from routerlab.datasets import demo
from routerlab.errors import UsageError
from routerlab.experiments.papers import compare, paper_markdown
from routerlab.experiments.runner import load_tables, run_experiment
from routerlab.experiments.schema import PaperNumber, load_experiment
from routerlab.experiments.sources import sample_queries
from routerlab.experiments.store import query


def _long_csv(path: Path, n: int = 90) -> Path:
    """A small long-format file: n queries over three datasets, three actors with different strengths."""
    rng = np.random.default_rng(0)
    lines = ["query_id,actor,score,dataset,text"]
    for i in range(n):
        ds = ("alpha", "beta", "gamma")[i % 3]
        for j, actor in enumerate(("a", "b", "c")):
            p = 0.3 + 0.2 * j if ds != "gamma" else 0.9 - 0.3 * j
            lines.append(f"q{i},{actor},{float(rng.random() < p)},{ds},question {i} about {ds}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.toml"
    path.write_text(text, encoding="utf-8")
    return path


IMPORTED = """\
name = "imported"
routers = ["oracle", "best-single", "knn:k=5"]
seeds = [0]
protocols = ["full", {{ name = "society", coreset = 2 }}]
[settings]
n_boot = 40
[[tables]]
name = "pool"
format = "long"
path = "{csv}"
split = "random"
test_fraction = 0.4
[[tables]]
name = "core"
from = "pool"
coreset = 2
[[tables]]
name = "pair"
from = "pool"
actors = ["a", "c"]
[quick]
n_queries = 45
routers = ["oracle", "knn:k=5"]
skip_tables = ["pair"]
settings = {{ n_boot = 50 }}
[quick.protocols]
society = {{ coreset = 1 }}
[[paper]]
claim = "oracle mu_o on the pool"
value = 0.9
table = "pool"
protocol = "full"
router = "oracle"
metric = "mu_o"
tolerance = 0.02
note = "a made-up number"
[[paper]]
claim = "pool HSE"
value = 0.5
table = "pool"
protocol = "society"
router = "pool"
metric = "hse"
"""


def test_upstream_files_are_imported_on_load_and_cached_by_their_bytes(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERLAB_CACHE_DIR", str(tmp_path / "cache"))
    csv = _long_csv(tmp_path / "rows.csv")
    exp = load_experiment(_write(tmp_path, IMPORTED.format(csv="rows.csv")))  # relative to the TOML file
    tables = load_tables(exp)
    assert tables["pool"].n_queries == 90 and tables["pool"].actor_names == ["a", "b", "c"]
    cached = list((tmp_path / "cache" / "tables").iterdir())
    assert len(cached) == 1 and (cached[0] / "manifest.json").is_file()
    again = load_tables(exp)  # read back from the cache: the same content
    assert again["pool"].content_hash == tables["pool"].content_hash
    assert len(list((tmp_path / "cache" / "tables").iterdir())) == 1
    csv.write_text(csv.read_text().replace("question 0 about", "question zero about"))
    load_tables(exp)  # one changed byte: a new import under a new key
    assert len(list((tmp_path / "cache" / "tables").iterdir())) == 2
    # derived tables: the coreset's 2 actors are among the pool's, the named actors as asked
    assert set(tables["core"].actor_names) < {"a", "b", "c"} and tables["core"].n_queries == 90
    assert tables["pair"].actor_names == ["a", "c"]


def test_a_sample_is_seeded_stratified_and_nested() -> None:
    table = demo(n_queries=600)
    small, large = sample_queries(table, 60, 3), sample_queries(table, 120, 3)
    assert small.n_queries == 60 and set(small.queries.ids) < set(large.queries.ids)
    assert list(small.queries.ids) == list(sample_queries(table, 60, 3).queries.ids)
    assert list(small.queries.ids) != list(sample_queries(table, 60, 4).queries.ids)
    full, part = table.dataset_counts(), small.dataset_counts()
    for ds, count in full.items():  # every dataset in its share, within one
        assert abs(part.get(ds, 0) - 60 * count / table.n_queries) <= 1
    assert sample_queries(table, 10_000, 0) is table


def test_quick_replaces_merges_skips_and_caps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERLAB_CACHE_DIR", str(tmp_path / "cache"))
    _long_csv(tmp_path / "rows.csv")
    path = _write(tmp_path, IMPORTED.format(csv="rows.csv"))
    full, quick = load_experiment(path), load_experiment(path, quick=True)
    assert [t.name for t in full.tables] == ["pool", "core", "pair"]
    assert [t.name for t in quick.tables] == ["pool", "core"] and quick.tables[0].sample == (45, 0)
    assert quick.routers == ["oracle", "knn:k=5"] and quick.settings_grid[0]["n_boot"] == 50
    assert [p.options for p in quick.protocols if p.name == "society"] == [{"coreset": 1}]
    assert quick.quick and not full.quick
    assert load_tables(quick)["core"].n_actors == 2  # the table's own coreset, not the society protocol's
    assert [e.claim for e in full.papers] == ["oracle mu_o on the pool", "pool HSE"]
    assert [e.claim for e in quick.papers] == ["oracle mu_o on the pool", "pool HSE"]
    drop_oracle = load_experiment(_write(tmp_path, IMPORTED.format(csv="rows.csv").replace(
        'routers = ["oracle", "knn:k=5"]', 'routers = ["knn:k=5"]')), quick=True)
    assert [e.claim for e in drop_oracle.papers] == ["pool HSE"]  # its router does not run in the quick version
    no_quick = _write(tmp_path, IMPORTED.format(csv="rows.csv").split("[quick]")[0])
    with pytest.raises(UsageError, match=r"quick: --quick: the file has no \[quick\] section"):
        load_experiment(no_quick, quick=True)


@pytest.mark.parametrize(("extra", "message"), [
    ('[[tables]]\nname = "d"\nfrom = "nope"\ncoreset = 1\n', r"\[\[tables\]\]\[2\]\.from: no earlier table 'nope'"),
    ('[[tables]]\nname = "d"\nfrom = "pool"\ncoreset = 1\nactors = ["a"]\n', "exactly one of synth, coreset or "
                                                                             "actors, got coreset, actors"),
    ('[[tables]]\nname = "d"\nfrom = "pool"\nactors = ["a"]\nmap = "x.toml"\n', r"map: applies only with synth"),
    ('[[tables]]\nname = "d"\nfrom = "pool"\nsynth = "xy"\n', r"synth: must be one of sa, rd, rd\+sa, got 'xy'"),
    ('[[tables]]\nname = "d"\nfrom = "pool"\npath = "demo"\nactors = ["a"]\n', r"\.path: a derived table"),
    ('[[tables]]\nfrom = "pool"\nactors = ["a"]\n', r"\.name: missing: a derived table needs its own name"),
    ('[[tables]]\nname = "d"\npath = "demo"\ncoreset = 2\n', r"coreset: applies only to a derived table"),
    ('[[tables]]\nname = "d"\npath = "demo"\nvisible = ["x"]\n', r"visible: applies only with format"),
    ('[[tables]]\nname = "d"\nformat = "nosuch"\npath = "rows.csv"\n', r"format: unknown format 'nosuch'"),
    ('[[tables]]\nname = "d"\nformat = "long"\npath = "gone.csv"\n', r"path: no such file or directory"),
    ('[[tables]]\nname = "d"\nformat = "long"\npath = "rows.csv"\noptions = 3\n', r"options: must be a table"),
    ('[[tables]]\nname = "d"\nfrom = "pool"\nactors = ["a"]\n'
     '[[paper]]\nclaim = "c"\nvalue = 1\nprotocol = "full"\nmetric = "mu_o"\nrouter = "oracle"\n',
     r"\[\[paper\]\]\[1\]\.table: missing: the file has several tables"),
    ('[[paper]]\nclaim = "c"\nvalue = 1\ntable = "pool"\nprotocol = "scaling"\nmetric = "mu_o"\n',
     r"protocol: the file runs no protocol 'scaling'"),
    ('[[paper]]\nclaim = "c"\nvalue = 1\ntable = "pool"\nprotocol = "full"\nmetric = "mu_oo"\nrouter = "oracle"\n',
     r"metric: unknown metric 'mu_oo'"),
    ('[[paper]]\nclaim = "c"\nvalue = 1\ntable = "pool"\nprotocol = "full"\nmetric = "mu_o"\n',
     r"router: missing: protocol 'full' evaluates routers"),
    ('[[paper]]\nclaim = "c"\nvalue = nan\ntable = "pool"\nprotocol = "full"\nmetric = "mu_o"\nrouter = "knn"\n',
     r"value: must be a finite number"),
])
def test_bad_sources_and_entries_are_one_line_naming_the_key(tmp_path: Path, extra: str, message: str) -> None:
    _long_csv(tmp_path / "rows.csv")
    head = IMPORTED.format(csv="rows.csv").split("[[tables]]\nname = \"core\"")[0]
    with pytest.raises(UsageError, match=message) as info:
        load_experiment(_write(tmp_path, head + extra))
    assert "\n" not in str(info.value) and str(info.value).startswith(str(tmp_path / "exp.toml"))


def test_table_override_replaces_an_import_by_a_table_directory_and_refuses_derived(tmp_path: Path) -> None:
    _long_csv(tmp_path / "rows.csv")
    path = _write(tmp_path, IMPORTED.format(csv="rows.csv"))
    demo(n_queries=60).save(tmp_path / "mine")
    exp = load_experiment(path, tables={"pool": str(tmp_path / "mine")})
    assert exp.tables[0].source is not None and exp.tables[0].source.kind == "dir"
    assert exp.tables[0].load().n_queries == 60
    with pytest.raises(UsageError, match=r"\[\[tables\]\]\[3\] \(pair\): actors: 'a', 'c' not in table 'pool' \(its "
                                         r"actors: tiny-2b, "):
        load_tables(exp)  # a derived table follows its base's override
    with pytest.raises(UsageError, match=re.escape("--table core=...: 'core' is derived from table 'pool'")):
        load_experiment(path, tables={"core": str(tmp_path / "mine")})


def test_paper_numbers_come_from_the_experiments_own_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERLAB_CACHE_DIR", str(tmp_path / "cache"))
    _long_csv(tmp_path / "rows.csv")
    exp = load_experiment(_write(tmp_path, IMPORTED.format(csv="rows.csv")), quick=True)
    summary = run_experiment(exp, tmp_path / "store")
    assert summary.peak_rss_mb is not None and summary.peak_rss_mb > 10
    _, runs = query(tmp_path / "store", "SELECT seconds, peak_rss_mb, status FROM runs")
    assert runs[0][0] > 0 and runs[0][1] > 10 and runs[0][2] == "finished"
    rows = compare(exp, tmp_path / "store", summary.hashes)
    oracle, hse = rows
    _, truth = query(tmp_path / "store", "SELECT value FROM results WHERE protocol = 'full' AND router = 'oracle' "
                                         "AND metric = 'mu_o' AND slice = ''")
    assert oracle.value == pytest.approx(truth[0][0])
    assert hse.value is not None and 0 < hse.value <= math.log2(3) and hse.ci_low is None
    assert hse.agrees == (abs(hse.value - 0.5) <= 0)
    text = paper_markdown(rows)
    assert text.splitlines()[0] == "| claim | paper | routerlab (95% CI) | agrees | note |"
    assert "| oracle mu_o on the pool | 0.900 |" in text and "a made-up number" in text


def test_agreement_rule_by_hand() -> None:
    e = PaperNumber(claim="c", value=0.5, table="t", protocol="full", metric="mu_o", router="r", tolerance=0.01)
    assert e.agrees(0.6, 0.45, 0.7) is True  # inside the interval
    assert e.agrees(0.6, 0.505, 0.7) is True  # 0.5 >= 0.505 - 0.01
    assert e.agrees(0.6, 0.52, 0.7) is False
    assert e.agrees(0.509, None, None) is True and e.agrees(0.52, None, None) is False
    assert e.agrees(None, None, None) is None and e.agrees(float("nan"), 0.0, 1.0) is None
