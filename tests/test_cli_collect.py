"""``routerlab collect`` end to end: a scripted backend kind (no model) and SmolLM2 (the shared fixture);
every bad input is one line and exit 2, the output directory checked first."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from routerlab.cli import main
from routerlab.data.store import load
from routerlab.llm import base as llm_base
from routerlab.llm.base import Backend, BackendSpec, register_backend
from routerlab.llm.cache import CachedBackend, CallCache
from routerlab.llm.collect import choice_logits
from tests.llm.test_collect import SCRIPT, ScriptedBackend

ROWS = [
    {"id": "m1", "question": "Which is a fruit?", "choices": ["stone", "apple", "chair"], "answer": "B",
     "dataset": "food"},
    {"id": "m2", "question": "Which is a colour?", "choices": ["red", "dog", "car", "run"], "answer": "A",
     "dataset": "art"},
    {"id": "m3", "question": "Which is a number?", "choices": ["cat", "seven", "sky", "hat"], "answer": "B",
     "dataset": "math"},
    {"id": "m4", "question": "Which flies?", "choices": ["rock", "fish", "bird", "tree"], "answer": "C",
     "dataset": "nature"},
    {"id": "s1", "question": "What is 6 times 7?", "answer": "42", "dataset": "math"},
]


@pytest.fixture()
def questions(tmp_path: Path) -> Path:
    path = tmp_path / "quiz.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


@pytest.fixture()
def scripted_kind() -> Iterator[str]:
    class Registered(ScriptedBackend):
        def __init__(self, spec: BackendSpec, *, cache_dir: Path | None = None) -> None:
            super().__init__(spec, cache_dir=cache_dir, script=SCRIPT)

    register_backend("cli-scripted")(Registered)
    yield "cli-scripted"
    llm_base._REGISTRY.remove("cli-scripted")


def test_collect_writes_a_table_and_reruns_from_the_cache(
    questions: Path, scripted_kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "table"
    args = ["collect", str(questions), "--actors", f"a={scripted_kind}:one,input_price=1,output_price=3,"
            f"b={scripted_kind}:two", "-o", str(out), "--cache-dir", str(tmp_path / "cache")]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "asked 5 questions (5 available in" in text
    assert "calls 5 new, 0 cached" in text and f"wrote {out}\n" in text
    table = load(out)
    assert table.actor_names == ["a", "b"] and table.n_queries == 5
    assert table.score[:, 0].tolist() == [1, 0, 1, 1, 1]
    assert table.cost_usd is not None
    assert np.isfinite(table.cost_usd[:, 0]).all() and np.isnan(table.cost_usd[:, 1]).all()
    assert choice_logits(table, "a").shape == (5, 10)
    assert table.meta["collect"]["source"] == str(questions) and table.meta["collect"]["mode"] == "auto"
    # the table is there now: refused without --force, replaced with it, every call from the cache
    assert main(args) == 2
    assert "already holds a routerlab table; pass --force" in capsys.readouterr().err
    assert main([*args, "--force", "--json"]) == 0
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    assert record["actor_summary"]["a"]["fresh_calls"] == 0 and record["actor_summary"]["a"]["cached_calls"] == 5
    assert record["actor_summary"]["a"]["accuracy"] == pytest.approx(0.8)
    assert record["content_hash"] == load(out).content_hash == table.content_hash
    assert f"wrote {out}" in captured.err


def test_collect_sample_kind_and_mode(questions: Path, scripted_kind: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t"
    assert main(["collect", str(questions), "-a", f"x={scripted_kind}:m", "--kind", "mc", "--limit", "2",
                 "--seed", "5", "--mode", "generate", "--max-tokens", "3", "-o", str(out)]) == 0
    table = load(out)
    assert table.n_queries == 2 and set(table.queries.extra["kind"].tolist()) == {"mc"}
    assert table.meta["collect"]["limit"] == 2 and table.meta["collect"]["seed"] == 5
    assert table.meta["collect"]["n_available"] == 4 and table.meta["collect"]["decoding"]["max_tokens"] == 3
    assert table.actors.extra["mode"].tolist() == ["generate"]
    assert "(4 available in" in capsys.readouterr().out


def test_collect_grader_choice(questions: Path, scripted_kind: str, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t"
    assert main(["collect", str(questions), "-a", f"x={scripted_kind}:m", "--grader", "math=f1", "--kind",
                 "generated", "-o", str(out), "--cache-dir", str(tmp_path / "cache")]) == 0
    table = load(out)
    x = table.queries.extra
    assert x["grader.x"].tolist() == ["f1"] and x["detail.x"].tolist() == ["f1 1.000"]  # "The answer is 42"
    assert table.meta["collect"]["grader_choice"] == {"default": None, "by_dataset": {"math": "f1"}}
    assert table.meta["collect"]["graders"]["f1"]["questions"] == 1
    assert "graded: f1 1 answers in" in capsys.readouterr().out
    # the user's single grader for every question: mc cannot grade a question without options, which is counted
    assert main(["collect", str(questions), "-a", f"x={scripted_kind}:m", "--grader", "mc", "-o", str(out),
                 "--force", "--cache-dir", str(tmp_path / "cache")]) == 0
    assert "grader mc on a question without options 1" in capsys.readouterr().out
    assert load(out).n_queries == 4


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--mode", "sample"], "--mode must be one of auto, logits, generate"),
        (["--kind", "essay"], "--kind must be one of all, mc, generated, short"),
        (["--grader", "essay"], "unknown grader 'essay'"),
        (["--grader", "quiz=essay"], "unknown grader 'essay'"),
        (["--grader", "f1", "--grader", "short"], "two graders for every question"),
        (["--grader", "f1:x"], "takes no argument"),
        (["--limit", "0"], "--limit"),
        (["--max-tokens", "0"], "--max-tokens"),
        (["--batch-size", "0"], "--batch-size"),
        (["--logits-batch-size", "0"], "--logits-batch-size"),
        (["--timing-probes", "-1"], "--timing-probes"),
        (["--seed", "-1"], "--seed"),
    ],
)
def test_bad_options_are_one_line(questions: Path, scripted_kind: str, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str], extra: list[str], message: str) -> None:
    out = tmp_path / "t"
    assert main(["collect", str(questions), "-a", f"x={scripted_kind}:m", "-o", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("routerlab: error:")
    assert not out.exists()


@pytest.mark.parametrize(
    ("actors", "message"),
    [
        ("x", "write NAME=KIND:MODEL"),
        ("x=nosuch:m", "unknown backend kind 'nosuch'"),
        ("x=openai:m@http://127.0.0.1:9/v1,colour=blue", "unknown option 'colour'"),
        ("x=openai:m@http://127.0.0.1:9/v1,input_price=-1", "input_price"),
        ("x=openai:m@http://127.0.0.1:9/v1,x=openai:m@http://127.0.0.1:9/v1", "given twice"),
        ("api=openai:gpt@http://127.0.0.1:9/v1", "--mode logits: actor 'api'"),
    ],
)
def test_bad_actors_are_one_line(questions: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 actors: str, message: str) -> None:
    assert main(["collect", str(questions), "-a", actors, "--mode", "logits", "-o", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_bad_files_are_one_line(questions: Path, scripted_kind: str, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    actor = ["-a", f"x={scripted_kind}:m"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps({"id": "q", "question": "?", "choices": ["a"],
                                                             "answer": "Z"}) + "\n")
    cases = [
        ([str(bad), *actor, "-o", str(tmp_path / "o1")], f"{bad}, row 2, field 'answer'"),
        ([str(tmp_path / "none.jsonl"), *actor, "-o", str(tmp_path / "o2")], "no such file"),
    ]
    # -o is checked before anything else: a file as output wins over bad actors and a missing question file
    (tmp_path / "file").write_text("x")
    cases.append(([str(tmp_path / "none.jsonl"), "-a", "x", "-o", str(tmp_path / "file")], "is not a directory"))
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("keep")
    cases.append(([str(questions), *actor, "-o", str(tmp_path / "busy")], "not empty"))
    nogold = tmp_path / "nogold"
    from routerlab.datasets import demo

    demo(20, seed=0).save(nogold)
    cases.append(([str(nogold), *actor, "-o", str(tmp_path / "o3")], "has no gold answers"))
    cases.append(([str(questions), *actor, "--kind", "short", "--mode", "logits", "-o", str(tmp_path / "o4"),
                   "--cache-dir", str(tmp_path / "file")], "--cache-dir"))
    for args, message in cases:
        assert main(["collect", *args]) == 2, args
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, (args, err)
    assert (tmp_path / "busy" / "notes.txt").read_text() == "keep"


def test_collect_with_smollm2(smollm2: Backend, questions: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    """The real model through the whole command; the session's loaded model stands in for the load."""
    inner = smollm2.inner if isinstance(smollm2, CachedBackend) else smollm2

    class Borrowed(CachedBackend):
        def close(self) -> None:  # the session fixture owns the model
            pass

    def load_backend(spec: BackendSpec, *, cache_dir: Path | None = None, cache: bool = True) -> Backend:
        assert spec.kind == "local" and spec.model == "smollm2-135m"
        return Borrowed(inner, CallCache(cache_dir))

    monkeypatch.setattr(llm_base, "load_backend", load_backend)
    out = tmp_path / "t"
    assert main(["collect", str(questions), "-a", "smol=local:smollm2-135m,input_price=0.1,output_price=0.2",
                 "--kind", "mc", "--timing-probes", "1", "-o", str(out), "--cache-dir", str(tmp_path / "c")]) == 0
    assert "smol" in capsys.readouterr().out
    table = load(out)
    assert table.n_queries == 4 and set(np.unique(table.score).tolist()) <= {0.0, 1.0}
    assert table.latency_s is not None and (table.latency_s > 0).all()
    assert table.cost_usd is not None and (table.cost_usd > 0).all()
    assert table.actors.ttft_ms[0] > 0 and table.actors.itl_ms[0] > 0
    assert table.actors.extra["mode"].tolist() == ["logits"]
    assert np.isfinite(choice_logits(table, "smol")[:, :3]).all()
