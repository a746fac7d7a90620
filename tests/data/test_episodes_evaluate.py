"""``evaluate`` on an episode table scores latency with the episode's latency: Acc@1-L, L-DCG and the mean latency of
the routers' choices equal an independent computation from the steps file alone (the cell's score is its last step's,
its latency the sum of latency_s + env_s over its steps), from the Python API and from the CLI, in memory and after a
store round-trip. The metrics are recomputed here from their definitions, without routerlab's metric code."""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from routerlab.cli import main
from routerlab.data.longformat.steps import read_steps
from routerlab.data.store import load
from routerlab.data.table import RoutingTable
from routerlab.errors import DataError
from routerlab.protocols.full import Evaluation, evaluate

EXAMPLE = Path(__file__).parent / "episodes"
pytestmark = pytest.mark.filterwarnings("ignore::routerlab.metrics.bootstrap.FewQueriesWarning")  # 5-6 test queries
ROUTERS = ["oracle", "best-single", "fastest", "knn:k=3"]  # argmax routers: each query's pick is its choice

# Hand-written episodes with known latencies: per (query, actor) the steps as KIND:SECONDS (m = a model call's
# latency_s, t = a tool's env_s, e = an environment step's env_s) and the last step's score. Times are multiples of
# 1/16 s, exact in float32, so the table's matrices hold the sums exactly. On q05, q08 and q11 the tool time makes
# the fastest model the slowest correct episode: without env_s, Acc@1-L and L-DCG would differ.
EPISODES = """
q01 train  fast m.25 t.0625 m.25 =1    mid m.5 t.0625 m.5 =1        slow m1 m1 =1
q02 train  fast m.25 t.0625 m.25 t.0625 m.25 =0  mid m.5 t.125 m.5 =1  slow m1 t.125 m1 =1
q03 train  fast m.25 =0                mid m.5 t.25 m.5 =0          slow m1 t.25 m1 =1
q04 train  fast m.25 t.0625 m.25 =1    mid m.5 m.5 =1               slow m1 =1
q05 train  fast m.25 t2 m.25 =1        mid m.5 t.125 m.5 =1         slow m1 t.125 m1 =1
q06 train  fast m.25 t.0625 m.25 t.0625 m.25 =0  mid m.5 t.0625 m.5 =0  slow m1 t.0625 m1 =1
q07 test   fast m.25 t.0625 m.25 =1    mid m.5 t.0625 m.5 =1        slow m1 m1 =1
q08 test   fast m.25 e.5 t1.5 m.25 =1  mid m.5 t.125 m.5 =1         slow m1 t.125 m1 =1
q09 test   fast m.25 =0                mid m.5 t.25 m.5 =1          slow m1 t.25 m1 =1
q10 test   fast m.25 t.0625 m.25 t.0625 m.25 =0  mid m.5 t.0625 m.5 =0  slow m1 t.0625 m1 =1
q11 test   fast m.25 t3 m.25 =1        mid m.5 t.125 m.5 =0         slow m1 t.125 m1 =1
q12 test   fast m.25 t.125 m.25 =1     mid m.5 t.125 m.5 =1         slow m1 t.125 m1 =1
"""
TEXTS = {"q01": "add 3 and 4", "q02": "convert 5 miles to km", "q03": "integrate x squared from 0 to 2",
         "q04": "add 10 and 12", "q05": "sort a list of numbers with a program", "q06": "prove the sum of odd numbers",
         "q07": "add 7 and 8", "q08": "sort a list of words with a program", "q09": "convert 2 feet to metres",
         "q10": "prove the square root of 2 is irrational", "q11": "run a program that counts primes",
         "q12": "add 1 and 2"}


def _episode_rows() -> list[list[Any]]:
    """EPISODES as the rows of a steps file (10 tokens in and 5 out per model call)."""
    kinds = {"m": "model", "t": "tool", "e": "env"}
    rows: list[list[Any]] = []
    for line in EPISODES.strip().splitlines():
        qid, _, *words = line.split()
        actor, step = "", 0
        for word in words:
            if word in ("fast", "mid", "slow"):
                actor, step = word, 0
            elif word.startswith("="):
                rows[-1][8] = word[1:]  # the last step's score
            else:
                kind, seconds = kinds[word[0]], word[1:]
                model = kind == "model"
                rows.append([qid, actor, step, kind, 10 if model else "", 5 if model else "",
                             seconds if model else "", "" if model else seconds, "",
                             "calculator" if kind == "tool" else ""])
                step += 1
    return rows


def _write_example(tmp_path: Path) -> tuple[Path, Path]:
    """The hand-written episodes as a steps CSV and a queries CSV (text and split)."""
    steps, queries = tmp_path / "steps.csv", tmp_path / "steps.queries.csv"
    with steps.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["query_id", "actor", "step", "kind", "tokens_in", "tokens_out", "latency_s", "env_s", "score",
                    "tool"])
        w.writerows(_episode_rows())
    with queries.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["query_id", "text", "split"])
        w.writerows([line.split()[0], TEXTS[line.split()[0]], line.split()[1]]
                    for line in EPISODES.strip().splitlines())
    return steps, queries


# ------------------------------------------------------------------------- the independent computation


Cells = dict[tuple[str, str], tuple[float, float]]


def cells_from_steps(records: Iterable[Mapping[str, Any]], *, model_time_only: bool = False) -> Cells:
    """(query, actor) -> (score of the last step, sum of latency_s + env_s over the steps), from step records whose
    empty values are None or ''. ``model_time_only`` leaves env_s out (what a wrong implementation would do)."""
    steps: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        steps[(str(r["query_id"]), str(r["actor"]))].append(r)

    def num(v: Any) -> float:
        return 0.0 if v is None or v == "" or (isinstance(v, float) and math.isnan(v)) else float(v)

    out = {}
    for cell, rs in steps.items():
        rs = sorted(rs, key=lambda r: int(r["step"]))
        total = math.fsum(num(r["latency_s"]) + (0.0 if model_time_only else num(r["env_s"])) for r in rs)
        out[cell] = (float(rs[-1]["score"]), total)
    return out


def csv_records(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def parquet_records(path: Path) -> list[dict[str, Any]]:
    """The steps of a saved table, read with pyarrow alone."""
    return list(pq.read_table(path).to_pylist())


def expected_metrics(cells: Cells, test_ids: Sequence[str], picks: Sequence[str], actors: Sequence[str],
                     *, float32: bool = False) -> dict[str, float]:
    """Acc@1-L, L-DCG and mean latency of the picks, from the definitions: the correct actors (score >= 0.5) ranked
    by latency, rank = 1 + the correct actors strictly faster than the pick; Acc@1-L = 1 when the pick is correct and
    none is faster; L-DCG = [correct] / log2(rank + 1) x fastest correct latency / the pick's. ``float32``: each
    cell's latency as the table stores it (its matrices are float32)."""
    acc_l, l_dcg, latency = [], [], []
    for q, pick in zip(test_ids, picks, strict=True):
        score = {a: cells[(q, a)][0] for a in actors}
        lat = {a: float(np.float32(cells[(q, a)][1])) if float32 else cells[(q, a)][1] for a in actors}
        latency.append(lat[pick])
        correct = [a for a in actors if score[a] >= 0.5]
        if pick not in correct:
            acc_l.append(0.0)
            l_dcg.append(0.0)
            continue
        rank = 1 + sum(lat[a] < lat[pick] for a in correct)
        fastest = min(lat[a] for a in correct)
        acc_l.append(1.0 if rank == 1 else 0.0)
        l_dcg.append(1.0 / math.log2(rank + 1) * (1.0 if fastest == lat[pick] else fastest / lat[pick]))
    n = len(picks)
    return {"acc_at_1_l": math.fsum(acc_l) / n, "l_dcg": math.fsum(l_dcg) / n, "mean_latency": math.fsum(latency) / n}


def assert_equal_metrics(got: Mapping[str, float], want: Mapping[str, float], router: str) -> None:
    assert got["acc_at_1_l"] == want["acc_at_1_l"], router  # a mean of indicators: exactly
    for key in ("l_dcg", "mean_latency"):  # the same sums, up to the order of the summation
        assert math.isclose(got[key], want[key], rel_tol=1e-12, abs_tol=1e-15), (router, key, got[key], want[key])


def check_evaluation(ev: Evaluation, cells: Cells, *, float32: bool = False) -> list[str]:
    """Every router's metrics against the independent computation; returns each router's picks, joined."""
    actors = list(ev.actor_names)
    test_ids = [str(q) for q in ev.test_ids]
    picked = []
    for r in ev.results:
        assert r.policy == "argmax", r.spec
        picks = [actors[int(c)] for c in r.choice]
        assert_equal_metrics(r.metrics, expected_metrics(cells, test_ids, picks, actors, float32=float32), r.spec)
        picked.append(",".join(picks))
    return picked


# ------------------------------------------------------------------------------------------------ the tests


@pytest.fixture(scope="module")
def hand_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[RoutingTable, Path]:
    tmp = tmp_path_factory.mktemp("hand")
    steps, queries = _write_example(tmp)
    return read_steps([steps], queries=queries), steps


def test_the_hand_written_cells_are_the_sums_over_their_steps(hand_table: tuple[RoutingTable, Path]) -> None:
    table, steps = hand_table
    cells = cells_from_steps(csv_records(steps))
    assert len(cells) == 36 and table.latency_s is not None
    ids = table.queries.ids.tolist()
    for (q, a), (score, latency) in cells.items():
        i, j = ids.index(q), table.actor_names.index(a)
        assert (float(table.score[i, j]), float(table.latency_s[i, j])) == (score, latency)  # exact: dyadic times
    assert cells[("q08", "fast")] == (1.0, 2.5) and cells[("q11", "fast")] == (1.0, 3.5)


def test_evaluate_scores_episode_latency_python_api(hand_table: tuple[RoutingTable, Path]) -> None:
    table, steps = hand_table
    ev = evaluate(table, ROUTERS, n_boot=50, seed=0)
    assert [str(q) for q in ev.test_ids] == ["q07", "q08", "q09", "q10", "q11", "q12"]
    cells = cells_from_steps(csv_records(steps))
    picks = check_evaluation(ev, cells)
    # the test is not blind to env_s: with model time only, some router's numbers would differ
    model_only = cells_from_steps(csv_records(steps), model_time_only=True)
    actors, test_ids = list(ev.actor_names), [str(q) for q in ev.test_ids]
    assert any(expected_metrics(model_only, test_ids, p.split(","), actors)
               != expected_metrics(cells, test_ids, p.split(","), actors) for p in picks)
    oracle = next(r for r in ev.results if r.spec == "oracle")
    assert oracle.metrics["acc_at_1_l"] == 1.0  # ties broken to the fastest episode, env time included
    assert [actors[int(c)] for c in oracle.choice] == ["fast", "mid", "mid", "slow", "slow", "fast"]


def test_evaluate_after_a_store_round_trip_reads_the_saved_steps(hand_table: tuple[RoutingTable, Path],
                                                                 tmp_path: Path) -> None:
    table, _ = hand_table
    table.save(tmp_path / "t")
    back = load(tmp_path / "t", verify=True)
    assert back.content_hash == table.content_hash
    cells = cells_from_steps(parquet_records(tmp_path / "t" / "steps.parquet"))
    before = check_evaluation(evaluate(table, ROUTERS, n_boot=50, seed=0), cells)
    after = check_evaluation(evaluate(back, ROUTERS, n_boot=50, seed=0), cells)
    assert before == after


def test_evaluate_cli_json_matches_the_steps_file(hand_table: tuple[RoutingTable, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    table, steps = hand_table
    table_dir = tmp_path / "t"
    assert main(["import", "steps", str(steps), str(steps.with_name("steps.queries.csv")), "-o", str(table_dir)]) == 0
    capsys.readouterr()
    assert load(table_dir).content_hash == table.content_hash
    out = tmp_path / "ev"
    assert main(["evaluate", str(table_dir), "--routers", ",".join(ROUTERS), "--n-boot", "50", "--json",
                 "-o", str(out)]) == 0
    record = json.loads(capsys.readouterr().out)
    choices = pq.read_table(out / "choices.parquet").to_pydict()
    cells = cells_from_steps(parquet_records(table_dir / "steps.parquet"))
    actors = sorted({a for _, a in cells})
    for r in record["results"]:
        assert r["policy"] == "argmax"
        want = expected_metrics(cells, choices["query_id"], choices[r["spec"]], actors)
        assert_equal_metrics(r["metrics"], want, r["spec"])


def test_the_example_file_evaluates_to_its_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped example (times with three decimals, not exact in float32): equal to the independent computation
    on the cells as the table stores them (float32), and within float32's precision of the float64 sums."""
    files = [EXAMPLE / "steps.csv", EXAMPLE / "steps.queries.csv", EXAMPLE / "steps.actors.csv"]
    assert main(["import", "steps", *map(str, files), "-o", str(tmp_path / "t")]) == 0
    capsys.readouterr()
    table = load(tmp_path / "t")
    cells = cells_from_steps(parquet_records(tmp_path / "t" / "steps.parquet"))
    assert cells == cells_from_steps(csv_records(files[0]))
    ev = evaluate(table, ROUTERS, n_boot=50, seed=0)
    check_evaluation(ev, cells, float32=True)
    actors, test_ids = list(ev.actor_names), [str(q) for q in ev.test_ids]
    for r in ev.results:
        exact = expected_metrics(cells, test_ids, [actors[int(c)] for c in r.choice], actors)
        for key in ("l_dcg", "mean_latency"):
            assert r.metrics[key] == pytest.approx(exact[key], rel=1e-6)


def test_editing_the_saved_steps_is_caught_by_load(hand_table: tuple[RoutingTable, Path], tmp_path: Path) -> None:
    table, _ = hand_table
    table.save(tmp_path / "t")
    file = tmp_path / "t" / "steps.parquet"
    steps = pq.read_table(file)
    env = steps.column("env_s").to_pylist()
    i = next(k for k, v in enumerate(env) if v and v > 0)
    env[i] = env[i] + 0.25  # one tool call made slower: a valid steps file, another table
    pq.write_table(steps.set_column(steps.column_names.index("env_s"), "env_s", pa.array(env, pa.float64())), file,
                   compression="zstd")
    with pytest.raises(DataError) as err:
        load(tmp_path / "t")
    assert "t" in str(err.value)
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    manifest["files"]["steps.parquet"] = file.stat().st_size  # a tamperer who fixes the size: the hash still tells
    (tmp_path / "t" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="content hash"):
        load(tmp_path / "t")
