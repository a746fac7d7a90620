"""The HSE paper's synthetic societies as routing tables (issue 24 part 1; paper sec. 6, app. 10.3): society maps,
``synth_table`` and ``routerlab synth``. Small hand-computed cases, then the real shared tables."""

from __future__ import annotations

import hashlib
import json
import math
import re
import tomllib
from collections.abc import Callable
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from routerlab.data.store import load
from routerlab.data.table import Queries, RoutingTable
from routerlab.datasets import demo
from routerlab.errors import DataError, UsageError
from routerlab.society import (
    SocietyMap,
    builtin_maps,
    default_society_map,
    diversity,
    hse,
    load_society_map,
    normalized_hse,
    synth_table,
)
from routerlab.society.synthetic import PAPER_TIERS, society_rows
from tests import run_main

REPO = Path(__file__).resolve().parents[2]

SMALL_MAP = """name = "small"
by = "dataset"

[assign.a]
cluster = "X"
tier = "R1"

[assign.b]
cluster = "Y"
tier = "R1"
reason = "a borderline case, written down"

[assign.c]
cluster = "X"
tier = "R3"
"""


def small_table() -> RoutingTable:
    """Six queries of datasets a a b c c c, two real actors with tokens and cost (which the society drops)."""
    queries = Queries.create([f"q{i}" for i in range(6)], text=[f"question {i}" for i in range(6)],
                             dataset=["a", "a", "b", "c", "c", "c"], split=["train"] * 4 + ["test"] * 2,
                             extra={"topic": np.array(["t0", "t1", "t0", "t1", "t0", "t1"], dtype=object),
                                    "secret": np.arange(6)}, visible=["topic"])
    from routerlab.data.table import Actors

    score = np.array([[1, 0], [0, 1], [1, 1], [0, 0], [1, 0], [0, 1]], dtype=np.float32)
    return RoutingTable(queries=queries, actors=Actors.create(["m1", "m2"]), score=score,
                        tokens_out=np.full((6, 2), 10.0), cost_usd=np.full((6, 2), 0.01), name="small",
                        meta={"format": "long"})


@pytest.fixture
def small_map(tmp_path: Path) -> SocietyMap:
    path = tmp_path / "small.toml"
    path.write_text(SMALL_MAP)
    return load_society_map(path)


# --------------------------------------------------------------------------- hand-computed societies


def test_sa_agents_score_one_on_their_cluster(small_map: SocietyMap) -> None:
    t = synth_table(small_table(), "sa", small_map)
    assert t.actor_names == ["sa:X", "sa:Y"]
    assert t.score.tolist() == [[1, 0], [1, 0], [0, 1], [1, 0], [1, 0], [1, 0]]
    assert hse(t, split=None) == 1.0 == math.log2(2)
    assert t.actors.extra["society"].tolist() == ["sa", "sa"]
    assert t.actors.extra["expertise"].tolist() == ["X", "Y"]


def test_rd_agents_score_one_on_their_tier_in_tier_order(small_map: SocietyMap) -> None:
    t = synth_table(small_table(), "rd", small_map)
    assert t.actor_names == ["rd:R1", "rd:R3"]  # R2, R4, R5 hold no query: no agent
    assert t.score.T.tolist() == [[1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1]]
    assert t.actors.extra["expertise"].tolist() == [PAPER_TIERS["R1"], PAPER_TIERS["R3"]]
    assert hse(t, split=None) == 1.0


def test_rd_plus_sa_is_the_union_with_the_hand_computed_hse(small_map: SocietyMap) -> None:
    t = synth_table(small_table(), "rd+sa", small_map)
    assert t.actor_names == ["sa:X", "sa:Y", "rd:R1", "rd:R3"]
    # X = 110111, Y = 001000, R1 = 111000, R3 = 000111; cosine distances (1 - cos):
    d_x_r3 = 1 - 3 / math.sqrt(15)  # closest pair, merged first
    d_y_r1 = 1 - 1 / math.sqrt(3)
    d_x_r1 = 1 - 2 / math.sqrt(15)  # joins {X, R3} and {Y, R1} under single linkage (X-Y, R3-Y, R3-R1 are 1)
    # H(h): 4 singletons (2 bits), then sizes 2-1-1 (1.5 bits), then 2-2 (1 bit), then one cluster
    expected = 2 * d_x_r3 + 1.5 * (d_y_r1 - d_x_r3) + 1.0 * (d_x_r1 - d_y_r1)
    assert hse(t, split=None) == pytest.approx(expected, abs=1e-12)
    assert normalized_hse(t, split=None) == pytest.approx(expected / 2, abs=1e-12)  # log2(4) * d_max 1


def test_queries_are_the_tables_and_provenance_is_recorded(small_map: SocietyMap) -> None:
    base = small_table()
    t = synth_table(base, "sa", small_map)
    q, b = t.queries, base.queries
    for col in ("ids", "text", "dataset", "split"):
        assert getattr(q, col).tolist() == getattr(b, col).tolist()
    assert q.visible == {"topic"} and q.hidden == ("secret",)
    assert q.extra["secret"].tolist() == list(range(6))
    assert t.tokens_in is t.tokens_out is t.latency_s is t.cost_usd is None  # scores only: no invented costs
    assert t.name == "small-sa"
    synth = t.meta["synth"]
    assert t.meta["format"] == "synth"
    assert synth["society"] == "sa" and synth["source_table"] == "small" and synth["source_format"] == "long"
    assert synth["source_hash"] == base.content_hash
    assert synth["map"] == {"name": "small", "source": small_map.source, "by": "dataset",
                            "sha256": hashlib.sha256(SMALL_MAP.encode()).hexdigest()}


def test_saved_and_loaded_the_table_keeps_its_provenance(small_map: SocietyMap, tmp_path: Path) -> None:
    t = synth_table(small_table(), "rd+sa", small_map)
    t.save(tmp_path / "t")
    back = load(tmp_path / "t")
    assert back.content_hash == t.content_hash and back.actor_names == t.actor_names
    assert back.meta["synth"] == t.meta["synth"]
    assert back.queries.visible == {"topic"}


def test_a_map_may_key_on_a_query_column(tmp_path: Path) -> None:
    path = tmp_path / "topics.toml"
    path.write_text('by = "topic"\n[assign.t0]\ncluster = "Zero"\ntier = "R2"\n[assign.t1]\ncluster = "One"\n'
                    'tier = "R2"\n')
    m = load_society_map(str(path))
    assert m.name == "topics" and m.by == "topic"  # the name defaults to the file's stem
    t = synth_table(small_table(), "rd+sa", m)
    assert t.actor_names == ["sa:One", "sa:Zero", "rd:R2"]
    assert t.score[:, 2].tolist() == [1.0] * 6  # one tier holds every query


def test_unmapped_datasets_are_one_error_naming_them_and_the_map(small_map: SocietyMap) -> None:
    base = small_table()
    other = RoutingTable(queries=Queries.create(base.queries.ids, dataset=["a", "z", "z", "", "b", "y"]),
                         actors=base.actors, score=base.score, name="other")
    with pytest.raises(UsageError) as err:
        synth_table(other, "sa", small_map)
    message = str(err.value)
    assert message.startswith("3 dataset values no dataset (1 query), 'y' (1 query), 'z' (2 queries) of table "
                              "'other' are not in the society map 'small' (")
    assert small_map.source in message and "[assign.KEY]" in message


def test_unknown_society_and_unknown_column(small_map: SocietyMap, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=re.escape("unknown society 'sa+rd'; use one of sa, rd, rd+sa")):
        synth_table(small_table(), "sa+rd", small_map)
    path = tmp_path / "cat.toml"
    path.write_text('by = "category"\n[assign.x]\ncluster = "X"\ntier = "R1"\n')
    with pytest.raises(UsageError, match="no query column 'category'"):
        synth_table(small_table(), "sa", load_society_map(path))


# --------------------------------------------------------------------------- map files


@pytest.mark.parametrize("text,needle", [
    ("name = [", "not a valid TOML file"),
    ('nme = "x"\n[assign.a]\ncluster = "X"\ntier = "R1"\n', "unknown key(s) ['nme']"),
    ('name = "x"\n', "field 'assign': a society map needs an [assign.KEY] table"),
    ('[assign.a]\ntier = "R1"\n', "field 'assign.a': needs a cluster"),
    ('[assign.a]\ncluster = "X"\ntier = "R6"\n', "field 'assign.a': tier must be one of R1, R2, R3, R4, R5, got 'R6'"),
    ('[assign.a]\ncluster = "X"\ntier = "R1"\nwhy = "?"\n', "unknown key(s) ['why']"),
    ('by = ""\n[assign.a]\ncluster = "X"\ntier = "R1"\n', "field 'by': must be a non-empty string"),
    ('[tiers]\nlow = "Easy"\n[assign.a]\ncluster = "X"\ntier = "R1"\n', "tier must be one of low, got 'R1'"),
])
def test_a_bad_map_file_is_one_data_error_naming_it(text: str, needle: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(DataError) as err:
        load_society_map(path)
    assert str(err.value).startswith(f"{path}") and needle in str(err.value)


def test_own_tiers_replace_the_papers(tmp_path: Path) -> None:
    path = tmp_path / "own.toml"
    path.write_text('[tiers]\nlow = "Easy"\nhigh = "Hard"\n[assign.a]\ncluster = "X"\ntier = "high"\n'
                    '[assign.b]\ncluster = "X"\ntier = "low"\n[assign.c]\ncluster = "Y"\ntier = "low"\n')
    t = synth_table(small_table(), "rd", load_society_map(path))
    assert t.actor_names == ["rd:low", "rd:high"]  # the file's tier order
    assert t.actors.extra["expertise"].tolist() == ["Easy", "Hard"]


def test_unknown_names_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown society map 'nope'; the built-in maps are demo, llmrouter, "
                                         "mmlu-pro, mmlu-pro-src, routerbench"):
        load_society_map("nope")
    with pytest.raises(UsageError, match="no such file"):
        load_society_map(tmp_path / "absent.toml")
    with pytest.raises(UsageError, match="no such file"):
        load_society_map("absent.toml")
    with pytest.raises(UsageError, match=f"society map {tmp_path}: is not a file"):
        load_society_map(tmp_path)


def test_builtin_maps_load_and_write_their_reasoning() -> None:
    assert builtin_maps() == ["demo", "llmrouter", "mmlu-pro", "mmlu-pro-src", "routerbench"]
    for name in builtin_maps():
        m = load_society_map(name)
        assert m.name == name and m.source.startswith("built-in") and dict(m.tier_names) == PAPER_TIERS
        if name != "mmlu-pro-src":  # by dataset: every entry says why, borderline ones at length
            assert m.by == "dataset" and set(m.reasons) == set(m.clusters)
    mmlu = load_society_map("mmlu-pro")
    assert len(mmlu.keys) == 14 and len(set(mmlu.clusters.values())) == 14
    assert set(mmlu.tiers.values()) == set(PAPER_TIERS)
    assert mmlu.clusters["law"] == "Law & Legal Reasoning" and mmlu.tiers["law"] == "R5"
    llm = load_society_map("llmrouter")
    assert len(llm.keys) == 14 and llm.clusters["gpqa"] == "Chemistry & Earth Sciences"  # the paper's placements
    assert llm.tiers["gpqa"] == "R5" and llm.tiers["gsm8k"] == "R3" and llm.tiers["agentverse-logicgrid"] == "R4"
    src = load_society_map("mmlu-pro-src")  # MMLU's subjects one by one, as the paper assigns them
    assert src.by == "src" and len(src.keys) == 91 and set(src.clusters.values()) == set(mmlu.clusters.values())
    assert src.clusters["ori_mmlu-econometrics"] == "Advanced Mathematics"  # the paper's borderline placements
    assert src.clusters["ori_mmlu-business_ethics"] == "Law & Legal Reasoning"
    professional = [k for k in src.keys if k.startswith("ori_mmlu-professional_")]
    assert len(professional) == 4 and {src.tiers[k] for k in professional} == {"R5"}
    assert {k for k, t in src.tiers.items() if t == "R5"} == set(professional)


def test_builtin_maps_are_package_data() -> None:
    """Every maps/*.toml matches a package-data glob of pyproject, so an installed wheel ships it."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["routerlab"]
    folder = resources.files("routerlab.society") / "maps"
    files = sorted(f"society/maps/{p.name}" for p in folder.iterdir() if p.name.endswith(".toml"))
    assert len(files) == 5
    assert all(any(fnmatch(f, g) for g in globs) for f in files), globs


def test_default_map_follows_the_format_then_coverage() -> None:
    assert default_society_map(demo(60, seed=0)).name == "demo"  # no format: the map that assigns every dataset
    t = small_table()
    with pytest.raises(UsageError, match="no built-in society map assigns every dataset of table 'small' "
                                         "\\(format 'long'\\)"):
        default_society_map(t)


# --------------------------------------------------------------------------- the real shared tables


@pytest.mark.shared_data
@pytest.mark.parametrize("name,map_name,n_sa,n_rd", [("mmlu-pro", "mmlu-pro", 14, 5), ("llmrouter", "llmrouter", 9, 5)])
def test_real_tables_sa_hse_is_log2_k_exactly(name: str, map_name: str, n_sa: int, n_rd: int,
                                              real_table: Callable[[str], RoutingTable]) -> None:
    base = real_table(name)
    society_map = default_society_map(base)
    assert society_map.name == map_name
    sa = synth_table(base, "sa", society_map)
    assert sa.n_actors == n_sa and sa.n_queries == base.n_queries
    assert (sa.score.sum(axis=1) == 1).all()  # each query in exactly one cluster: oracle accuracy 1
    assert sa.queries.ids.tolist() == base.queries.ids.tolist()
    split, _ = society_rows(sa)
    assert hse(sa, split=split) == math.log2(n_sa)
    rd = synth_table(base, "rd", society_map)
    assert rd.n_actors == n_rd and hse(rd, split=split) == math.log2(n_rd)
    both = synth_table(base, "rd+sa", society_map)
    assert both.n_actors == n_sa + n_rd
    # overlapping experts: less diverse than n orthogonal ones, more than the RD tiers alone
    h = diversity(both, split=split)
    assert hse(rd, split=split) < h.hse < math.log2(n_sa + n_rd) and 0 < h.hse_normalized < 1


@pytest.mark.shared_data
def test_real_table_mmlu_pro_numbers(real_table: Callable[[str], RoutingTable]) -> None:
    """The numbers docs/synth.md reports for MMLU-Pro (every query: the import has no split)."""
    base = real_table("mmlu-pro")
    m = load_society_map("mmlu-pro")
    both = synth_table(base, "rd+sa", m)
    assert society_rows(both) == (None, "all 12032 queries")
    assert round(hse(both, split=None), 4) == 3.1549
    counts = dict(zip(both.actor_names, both.score.sum(axis=0).astype(int).tolist(), strict=True))
    assert counts["sa:Law & Legal Reasoning"] == counts["rd:R5"] == 1101  # law is the only R5 category
    assert counts["rd:R3"] == 1299 + 1132 + 969 + 789  # physics, chemistry, engineering, business


@pytest.mark.shared_data
def test_real_table_mmlu_pro_by_source(real_table: Callable[[str], RoutingTable]) -> None:
    """The source map assigns every question of the real import; R5 is exactly the four Professional subjects."""
    base = real_table("mmlu-pro")
    m = load_society_map("mmlu-pro-src")
    rd = synth_table(base, "rd", m)
    assert hse(rd, split=None) == math.log2(5)
    counts = dict(zip(rd.actor_names, rd.score.sum(axis=0).astype(int).tolist(), strict=True))
    assert counts == {"rd:R1": 1304, "rd:R2": 3246, "rd:R3": 3898, "rd:R4": 1808, "rd:R5": 1003 + 254 + 324 + 195}
    sa = synth_table(base, "sa", m)
    assert sa.n_actors == 14 and hse(sa, split=None) == math.log2(14)
    assert round(hse(synth_table(base, "rd+sa", m), split=None), 4) == 3.0300


# --------------------------------------------------------------------------- the command


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("synth") / "demo"
    demo(120, seed=0).save(path)
    return path


def test_cli_writes_the_society_and_prints_one_line(demo_dir: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sa"
    code, stdout, _ = run_main(["synth", str(demo_dir), "--society", "sa", "-o", str(out)], capsys)
    assert code == 0
    table = load(out)
    n_train = int((table.queries.split == "train").sum())
    assert stdout == (f"wrote {out}: sa society of 6 actors x 120 queries (map demo, by dataset), HSE "
                      f"{math.log2(6):.4f} (normalised 1.0000) on the {n_train} train queries\n")
    assert table.meta["synth"]["source_hash"] == load(demo_dir).content_hash
    code, stdout, _ = run_main(["synth", str(demo_dir), "--society", "rd+sa", "--map", "demo", "-o", str(out),
                                "--force", "--json"], capsys)
    record = json.loads(stdout)
    assert code == 0 and record["n_actors"] == 11 and record["map"]["name"] == "demo"
    assert record["hse"] == pytest.approx(hse(load(out)))


def test_routers_run_on_a_synthetic_table_and_the_oracle_is_perfect(demo_dir: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rd"
    assert run_main(["synth", str(demo_dir), "--society", "rd", "-o", str(out)], capsys)[0] == 0
    code, stdout, _ = run_main(["evaluate", str(out), "--routers", "oracle,best-single", "--n-boot", "40",
                                "--json"], capsys)
    assert code == 0
    results = {r["router"]: r for r in json.loads(stdout)["results"]}
    assert results["oracle"]["metrics"]["acc_at_1"] == 1.0  # each query lies in exactly one tier (paper sec. 6)
    assert results["best-single"]["metrics"]["acc_at_1"] < 1.0


@pytest.mark.parametrize("args,message", [
    (["--society", "xx"], "--society: must be one of sa, rd, rd+sa, got 'xx'"),
    (["--society", "sa", "--map", "nope"], "unknown society map 'nope'"),
    (["--society", "sa", "--map", "missing.toml"], "society map missing.toml: no such file"),
    (["--society", "sa", "--map", "mmlu-pro"], "4 dataset values 'code' (16 queries), 'commonsense'"),
])
def test_cli_bad_values_are_one_line_exit_2(args: list[str], message: str, demo_dir: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code, _, err = run_main(["synth", str(demo_dir), *args, "-o", str(out)], capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("routerlab: error: ") and message in err, err
    assert not out.exists()


def test_cli_refuses_an_existing_or_unwritable_output(demo_dir: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t"
    assert run_main(["synth", str(demo_dir), "--society", "sa", "-o", str(out)], capsys)[0] == 0
    code, _, err = run_main(["synth", str(demo_dir), "--society", "rd", "-o", str(out)], capsys)
    assert code == 2 and err == f"routerlab: error: -o {out}: already holds a routerlab table; pass --force to " \
                                "overwrite it\n"
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = run_main(["synth", str(demo_dir), "--society", "sa", "-o", str(blocker / "t")], capsys)
    assert code == 2 and err.count("\n") == 1 and "which is a file" in err, err
    code, _, err = run_main(["synth", str(demo_dir), "--society", "sa", "-o", str(demo_dir)], capsys)
    assert code == 2 and err.count("\n") == 1, err
