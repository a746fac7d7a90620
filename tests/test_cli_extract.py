"""``routerlab extract`` end to end on a tiny .jsonl with the real SmolLM2 (the session fixture stands in for
the load), its rerun, the call cache shared with ``collect``, and every bad value refused in one line with
exit 2 before any model is loaded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab.cli import main
from routerlab.features.signals import load_signals
from routerlab.llm import base as llm_base
from routerlab.llm.base import Backend, BackendSpec
from routerlab.llm.cache import CachedBackend, CallCache

ROWS = [
    {"id": "m1", "question": "Which is a fruit?", "choices": ["stone", "apple", "chair"], "answer": "B",
     "dataset": "food"},
    {"id": "m2", "question": "Which is a colour?", "choices": ["red", "dog", "car", "run"], "answer": "A",
     "dataset": "art"},
    {"id": "s1", "question": "What is 6 times 7?", "answer": "42", "dataset": "math"},
    {"id": "m3", "question": "Which flies?", "choices": ["rock", "fish", "bird", "tree"], "answer": "C",
     "dataset": "nature"},
]


@pytest.fixture()
def questions(tmp_path: Path) -> Path:
    path = tmp_path / "quiz.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


@pytest.fixture()
def borrowed(smollm2: Any, monkeypatch: pytest.MonkeyPatch) -> list[BackendSpec]:
    """load_backend hands out the session's model behind a call cache (as the real load would), and records
    the specs it was asked for."""
    inner = smollm2.inner if isinstance(smollm2, CachedBackend) else smollm2
    asked: list[BackendSpec] = []

    class Borrowed(CachedBackend):
        def close(self) -> None:  # the session fixture owns the model
            pass

    def load_backend(spec: BackendSpec, *, cache_dir: Path | None = None, cache: bool = True) -> Backend:
        assert spec.kind == "local" and spec.model == "smollm2-135m"
        asked.append(spec)
        return Borrowed(inner, CallCache(cache_dir))

    monkeypatch.setattr(llm_base, "load_backend", load_backend)
    return asked


def test_extract_runs_reruns_and_feeds_collect(questions: Path, borrowed: list[BackendSpec], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out, cache = tmp_path / "sig", tmp_path / "cache"
    args = ["extract", "--model", "local:smollm2-135m,threads=1", "--questions", str(questions), "-o", str(out),
            "--samples", "3", "--shard-size", "2", "--cache-dir", str(cache)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "3 questions (3 multiple-choice available in" in text
    assert "skipped: kind not in mc 1" in text
    assert "rows 3  fresh 3  reused 0" in text and "layers 31  dim 576" in text and f"wrote {out}" in text
    got = load_signals(out, ["m3", "m1", "m2"], texts=[ROWS[3]["question"], ROWS[0]["question"],
                                                        ROWS[1]["question"]])
    assert got["hidden"].shape == (3, 31, 576) and got["samples"].shape == (3, 3)
    assert np.isnan(got["option_logits"][1, 3]) and np.isfinite(got["option_logits"][[0, 2]]).all()
    assert len(list((out / "shards").glob("*.npz"))) == 2
    # the rerun: every row reused, one JSON object on stdout
    assert main([*args, "--json"]) == 0
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    assert (record["rows"], record["fresh"], record["reused"]) == (3, 0, 3)
    assert (record["layers"], record["dim"]) == (31, 576) and record["questions_per_s"] is None
    assert record["skipped"] == {"kind not in mc": 1} and record["spec"] == "local:smollm2-135m,threads=1"
    assert record["settings"] == {"samples": 3, "temperature": 1.0, "self_ask": True, "seed": 0}
    assert f"wrote {out}" in captured.err
    # collect on the same questions and cache: every option-letter call answered from extract's records
    assert main(["collect", str(questions), "-a", "smol=local:smollm2-135m,threads=1", "--kind", "mc", "--mode",
                 "logits", "--timing-probes", "0", "-o", str(tmp_path / "table"), "--cache-dir", str(cache)]) == 0
    assert "calls 0 new, 3 cached" in capsys.readouterr().out
    assert len(borrowed) == 3


def test_extract_without_self_ask_and_with_a_limit(questions: Path, borrowed: list[BackendSpec], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sig"
    assert main(["extract", "-m", "local:smollm2-135m", "-q", str(questions), "-o", str(out), "--limit", "2",
                 "--samples", "0", "--no-self-ask", "--seed", "5", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert (record["rows"], record["fresh"], record["limit"]) == (2, 2, 2)
    assert record["settings"] == {"samples": 0, "temperature": 1.0, "self_ask": False, "seed": 5}
    rows = [r for meta in (out / "shards").glob("*.json") for r in json.loads(meta.read_text())["rows"]]
    assert len(rows) == 2 and all(r["self_ask"] is None and r["samples"] == [] for r in rows)


def test_bad_values_are_one_line_before_any_load(questions: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    def never(*args: Any, **kwargs: Any) -> Backend:
        raise AssertionError("the model must not be loaded for a bad command line")

    monkeypatch.setattr(llm_base, "load_backend", never)
    (tmp_path / "file").write_text("x")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("keep")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "manifest.json").write_text(json.dumps(
        {"format": "routerlab-signals", "settings": {"samples": 3, "temperature": 1.0, "self_ask": True, "seed": 0}}))
    short = tmp_path / "short.jsonl"
    short.write_text(json.dumps(ROWS[2]) + "\n")
    good = {"--model": "local:smollm2-135m", "--questions": str(questions), "-o": str(tmp_path / "out")}
    cases: list[tuple[dict[str, str], str]] = [
        ({"--seed": "-1"}, "--seed"), ({"--limit": "0"}, "--limit"), ({"--limit": "-3"}, "--limit"),
        ({"--shard-size": "0"}, "--shard-size"), ({"--samples": "-1"}, "--samples"),
        ({"--temperature": "nan"}, "--temperature"), ({"--temperature": "0"}, "--temperature"),
        ({"--temperature": "-2"}, "--temperature"), ({"--temperature": "inf"}, "--temperature"),
        ({"-o": str(tmp_path / "file")}, "is an existing file"), ({"-o": str(tmp_path / "file" / "sub")}, "-o"),
        ({"--questions": str(tmp_path / "missing.jsonl")}, "no such file"),
        ({"--questions": str(short)}, "no multiple-choice question"),
        ({"--model": "openai:gpt-4o-mini@http://127.0.0.1:9"}, "only a local model gives"),
        ({"--model": "local:"}, "--model"), ({"--model": "nope:x"}, "unknown backend kind"),
        ({"--model": "local:smollm2-135m,threads=x"}, "threads"),
        ({"--cache-dir": str(tmp_path / "file")}, "--cache-dir"),
        ({"-o": str(tmp_path / "busy")}, "holds other files (notes.txt)"),
        ({"-o": str(tmp_path / "other")}, "extracted with other settings (samples=3, seed=0, self_ask=True, "
                                          "temperature=1.0; asked: samples=10, "),
    ]
    for change, message in cases:
        argv = ["extract", *[x for k, v in {**good, **change}.items() for x in (k, v)]]
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("routerlab: error: ") and err.count("\n") == 1, (argv, err)
        assert message in err, (argv, err)
    assert not (tmp_path / "out").exists() and (tmp_path / "busy" / "notes.txt").read_text() == "keep"
