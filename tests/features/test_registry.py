"""Encoder registry, spec strings, and the promise that nothing imports torch until MiniLM is used."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from routerlab._spec import parse_spec
from routerlab.errors import UsageError
from routerlab.features import Encoder, default_encoder, encode, encoder, encoders, get_encoder
from routerlab.features import minilm as minilm_module
from routerlab.features import registry as registry_module
from routerlab.routers import parse_router_spec
from tests.features.conftest import TRAIN_TEXTS, make_table


def test_builtin_encoders_are_registered() -> None:
    assert {"tfidf", "minilm", "precomputed"} <= set(encoders())
    assert default_encoder() in {"tfidf", "minilm"}


def test_specs_parse_the_same_for_routers_and_encoders() -> None:
    assert parse_router_spec("knn:k=10,metric=cosine") == ("knn", {"k": 10, "metric": "cosine"})
    assert parse_router_spec("mlp:hidden=64/32") == ("mlp", {"hidden": (64, 32)})
    assert parse_spec("precomputed:path=a/b.npy", "encoder", coerce_values=False) == ("precomputed",
                                                                                      {"path": "a/b.npy"})
    with pytest.raises(UsageError, match="bad encoder option"):
        get_encoder("tfidf:dim")
    with pytest.raises(UsageError, match="unknown encoder 'nope'"):
        get_encoder("nope")


def test_register_a_custom_encoder() -> None:
    try:

        @encoder("length")
        class LengthEncoder(Encoder):
            def _transform(self, texts: list[str]) -> np.ndarray:
                return np.array([[len(t)] for t in texts], dtype=np.float32)

        assert get_encoder("length").name == "length"
        f = encode(make_table(["ab", "abcd"]), "length", cache=False)
        np.testing.assert_array_equal(f.X, [[2], [4]])
        with pytest.raises(ValueError, match="registered twice"):
            encoder("length")(type("Other", (LengthEncoder,), {}))
    finally:
        registry_module._REGISTRY.remove("length")


def test_importing_and_encoding_with_tfidf_never_imports_torch(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import sys
        import routerlab.features
        from routerlab.features import encode, encoders
        from routerlab.datasets import demo
        encoders()
        encode(demo(n_queries=60), "tfidf:dim=8", cache_dir={str(tmp_path)!r})
        bad = sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules)
        assert not bad, bad
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_minilm_without_torch_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(minilm_module, "_MODELS", {})
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    monkeypatch.setattr(minilm_module, "model_path", lambda: "/nonexistent")
    with pytest.raises(UsageError, match=r"pip install torch==2\.13\.0 && pip install -e '\.\[embed\]'"):
        encode(make_table(TRAIN_TEXTS), "minilm", cache=False)
