"""The small model's own signals for two-model routing (SPEC 6; routerxbench-probedirichlet.txt sec. 4).

:func:`extract` runs a local causal LM once over each multiple-choice question, asked exactly as
``routerlab collect`` asks it (:func:`routerlab.llm.collect.prompt_messages`), and keeps per question:

- ``hidden``: the mean over the prompt's tokens of every hidden-state layer the model returns (the embedding
  output first, then each transformer block; paper eq. 12), float16, shape (layers, dim);
- ``option_logits``: the next-token logits of the option letters after the prompt (the largest over the
  letter's token forms, as :meth:`LocalBackend.choice_scores` reads them), the input of ``max-logit``,
  ``entropy`` and ``margin``. They are also written to the call cache under the key ``collect --mode logits``
  uses, so collecting the same questions afterwards asks the model nothing again;
- ``self_ask``: after the model's answer (its top option letter) a second user turn asks "Is your answer
  correct? Answer Yes or No."; the score is logit(Yes) - logit(No) at the reply's first token (P(True),
  Kadavath et al. 2022). The second turn continues the first pass's key/value states, so it costs only its
  own ~20 tokens;
- ``samples``: ``k`` answers drawn from the model's next-token distribution at temperature ``temperature``
  (seeded by the question's content hash and ``seed``), each the decoded first token, stripped; a letter
  of the question's options counts as that option. The answer of a multiple-choice question is one letter,
  so the first token *is* the sampled answer (free-text sampling is not done here: see docs/two-model.md).

Rows go to ``DIR/shards/`` in shards of ``shard_size`` questions (an ``.npz`` of keys and hidden states and a
``.json`` of the other fields), each written atomically; a row's key is the sha256 of the model, the prompt
and the settings, so a rerun skips every question already extracted (an interrupted run resumes) and a
changed question text or setting is extracted again. ``DIR/manifest.json`` records the model, layer count,
width, settings, rows and this run's speed. :func:`routerlab.features.signals.load_signals` reads a DIR back,
joined to a table by query id and checked against each query's text.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from routerlab._atomic import atomic_write
from routerlab.errors import UsageError
from routerlab.llm.base import ChoiceScores, Message
from routerlab.llm.cache import CallCache, call_key
from routerlab.llm.collect import prompt_messages
from routerlab.llm.questions import Question

EXTRACT_VERSION = 1
SELF_ASK_PROMPT = "Is your answer correct? Answer Yes or No."
MANIFEST = "manifest.json"
SHARDS = "shards"


@dataclass(frozen=True)
class ExtractSettings:
    """What is extracted besides hidden states and option logits (part of every row's key)."""

    samples: int = 10
    temperature: float = 1.0
    self_ask: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        if self.samples < 0:
            raise UsageError(f"samples must be >= 0, got {self.samples}")
        if not (np.isfinite(self.temperature) and self.temperature > 0):
            raise UsageError(f"temperature must be a finite number > 0, got {self.temperature}")


@dataclass
class ExtractReport:
    """One run of :func:`extract`: rows in the directory, rows computed now, and their speed."""

    out: Path
    rows: int
    fresh: int
    reused: int
    skipped: dict[str, int]
    seconds: float
    layers: int
    dim: int
    model: dict[str, Any] = field(default_factory=dict)

    @property
    def questions_per_s(self) -> float:
        return self.fresh / self.seconds if self.seconds > 0 and self.fresh else float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {"out": str(self.out), "rows": self.rows, "fresh": self.fresh, "reused": self.reused,
                "skipped": self.skipped, "seconds": round(self.seconds, 3),
                "questions_per_s": None if not self.fresh else round(self.questions_per_s, 4),
                "layers": self.layers, "dim": self.dim, "model": self.model}


def text_hash(text: str) -> str:
    """The short content hash a row keeps of its question text (checked when rows are joined to a table)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def row_key(model_id: str, prompt: str, letters: str, settings: ExtractSettings) -> str:
    payload = json.dumps([EXTRACT_VERSION, model_id, prompt, letters, asdict(settings)], sort_keys=True,
                         ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def check_directory(out: str | Path, settings: ExtractSettings, model_id: str | None = None) -> None:
    """Refuse to add rows to a directory extracted with another model or other settings (its manifest says
    so): the loader joins rows by query id and text only, so mixed rows would be read as one set."""
    path = Path(out) / MANIFEST
    if not path.is_file():
        return
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # rewritten at the end of this run
    if not isinstance(doc, dict):
        return
    had = doc.get("settings")
    if isinstance(had, dict) and had != asdict(settings):
        raise UsageError(f"{out} was extracted with other settings ({_settings_text(had)}; asked: "
                         f"{_settings_text(asdict(settings))}): use a new directory for these")
    if model_id is not None and doc.get("model_id") not in (None, model_id):
        raise UsageError(f"{out} holds signals of another model ({doc.get('spec') or doc.get('model_id')}): "
                         "use a new directory for this one")


def _settings_text(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))


def _row_index(out: Path) -> dict[str, dict[str, tuple[Path | None, int, dict[str, Any]]]]:
    """Every readable row of ``out`` by key, then query id: (its shard's npz, its row there, its record). One key
    holds several ids when the same question (same prompt) comes under several ids; unreadable shards are left out
    (and recomputed)."""
    index: dict[str, dict[str, tuple[Path | None, int, dict[str, Any]]]] = {}
    for meta in sorted((out / SHARDS).glob("*.json")):
        npz = meta.with_suffix(".npz")
        try:
            rows = json.loads(meta.read_text(encoding="utf-8"))["rows"]
            if not npz.exists():
                continue
            for r, row in enumerate(rows):
                index.setdefault(str(row["key"]), {})[str(row["id"])] = (npz, r, row)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return index


def stored_ids(out: str | Path) -> set[str]:
    """The query ids whose rows ``out`` holds in readable shards: what a rerun does not extract again."""
    return {qid for ids in _row_index(Path(out)).values() for qid in ids}


def _stored(rows: dict[str, tuple[Path | None, int, dict[str, Any]]]) -> tuple[np.ndarray, dict[str, Any]]:
    """The hidden states and record of one stored row of a key (any of its ids)."""
    for npz, r, record in rows.values():
        if npz is not None:
            with np.load(npz) as z:
                return np.asarray(z["hidden"][r], dtype=np.float32), record
    raise RuntimeError("a row of this run was not kept in memory")  # unreachable: this run's rows are in ``made``


def _word_ids(tokenizer: Any, word: str) -> list[int]:
    ids = set()
    for form in (word, " " + word, word.lower(), " " + word.lower()):
        enc = tokenizer(form, add_special_tokens=False)["input_ids"]
        if len(enc) == 1:
            ids.add(int(enc[0]))
    if not ids:
        raise UsageError(f"{word!r} is not a single token for this tokenizer: self-ask cannot be read")
    return sorted(ids)


def _sample_answers(logits: Any, letters: str, k: int, temperature: float, seed: int, tokenizer: Any) -> list[str]:
    import torch

    if k == 0:
        return []
    gen = torch.Generator().manual_seed(seed)
    probs = torch.softmax(logits / temperature, dim=-1)
    draws = torch.multinomial(probs, k, replacement=True, generator=gen).tolist()
    out = []
    for tok in draws:
        text = str(tokenizer.decode([int(tok)])).strip()
        up = text.strip("().:").upper()
        out.append(up if len(up) == 1 and up in letters else text)
    return out


def _states(res: Any) -> Any:
    """The key/value states a forward pass returned (``cache`` in newer transformers, ``past_key_values`` before)."""
    cache = getattr(res, "cache", None)
    return cache if cache is not None else res.past_key_values


class _Writer:
    """Buffers rows and writes a shard (npz + json) every ``size`` rows, atomically."""

    def __init__(self, out: Path, size: int) -> None:
        self.dir = out / SHARDS
        self.size = size
        self.keys: list[str] = []
        self.hidden: list[np.ndarray] = []
        self.rows: list[dict[str, Any]] = []

    def add(self, key: str, hidden: np.ndarray, row: dict[str, Any]) -> None:
        self.keys.append(key)
        self.hidden.append(hidden)
        self.rows.append(row)
        if len(self.keys) >= self.size:
            self.flush()

    def flush(self) -> None:
        if not self.keys:
            return
        name = hashlib.sha256("".join(self.keys).encode()).hexdigest()[:20]
        keys = np.asarray(self.keys)
        hidden = np.stack(self.hidden).astype(np.float16)

        def write_npz(tmp: str) -> None:
            with open(tmp, "wb") as fh:
                np.savez(fh, keys=keys, hidden=hidden)

        def write_json(tmp: str) -> None:
            Path(tmp).write_text(json.dumps({"version": EXTRACT_VERSION, "rows": self.rows}, ensure_ascii=False,
                                            allow_nan=False), encoding="utf-8")

        atomic_write(self.dir / f"{name}.npz", write_npz)  # the npz first: a json without its npz is ignored
        atomic_write(self.dir / f"{name}.json", write_json)
        self.keys, self.hidden, self.rows = [], [], []


def extract(
    backend: Any,
    questions: Sequence[Question],
    out: str | Path,
    settings: ExtractSettings = ExtractSettings(),
    *,
    shard_size: int = 32,
    call_cache: CallCache | None = None,
    on_row: Callable[[int, int], None] | None = None,
) -> ExtractReport:
    """Extract the signals of every multiple-choice question of ``questions`` with ``backend`` (a loaded
    :class:`~routerlab.llm.local.LocalBackend`, or a cached one wrapping it) into ``out`` (module docstring).
    Short-answer questions are skipped and counted. ``on_row(done, total)`` reports progress."""
    import torch

    from routerlab.llm.local import LocalBackend

    inner = getattr(backend, "inner", backend)
    if not isinstance(inner, LocalBackend):
        raise UsageError("extract reads hidden states, which only a local model gives: use a local:MODEL spec "
                         f"(got a {getattr(inner, 'kind', type(inner).__name__)} backend)")
    if shard_size < 1:
        raise UsageError(f"shard_size must be >= 1, got {shard_size}")
    out = Path(out)
    check_directory(out, settings, inner.model_id)
    out.mkdir(parents=True, exist_ok=True)
    model = inner.loaded.model
    tok = inner.tokenizer
    index = _row_index(out)  # key -> {query id: (shard npz or None, row, record)}
    made: dict[str, tuple[np.ndarray, dict[str, Any]]] = {}  # this run's rows by key
    mc = [q for q in questions if q.kind == "mc" and q.choices]
    skipped = {"not multiple choice": len(questions) - len(mc)} if len(questions) > len(mc) else {}
    yes_ids, no_ids = (_word_ids(tok, "Yes"), _word_ids(tok, "No")) if settings.self_ask else ([], [])
    writer = _Writer(out, shard_size)
    fresh = reused = 0
    layers = dim = 0
    t_start = time.perf_counter()
    compute_s = 0.0
    for i, q in enumerate(mc):
        messages = prompt_messages(q)
        prompt = inner.prompt(messages)
        key = row_key(inner.model_id, prompt, q.letters, settings)
        if key in index or key in made:
            if q.id not in index.get(key, {}):  # the same question under another id: its rows, copied
                states, record = made[key] if key in made else _stored(index[key])
                writer.add(key, states, {**record, "id": q.id, "text_sha": text_hash(q.text), "dataset": q.dataset,
                                         "gold": q.gold})
                index.setdefault(key, {})[q.id] = (None, -1, record)
            reused += 1
            if on_row:
                on_row(i + 1, len(mc))
            continue
        t0 = time.perf_counter()
        with inner._calling():
            ids = tok(prompt, add_special_tokens=False)["input_ids"]
            run = torch.tensor([ids], dtype=torch.long)
            with torch.inference_mode():
                res = model(input_ids=run, output_hidden_states=True, use_cache=settings.self_ask, logits_to_keep=1)
            states = torch.stack([h[0].float().mean(dim=0) for h in res.hidden_states]).numpy()
            logits = res.logits[0, -1, :].float()
            cand = inner._letter_ids(tuple(q.letters))
            values = [max(float(logits[j]) for j in idset) for idset in cand]
            elapsed_answer = time.perf_counter() - t0
            seed = (int(key[:8], 16) + settings.seed) % (2**63)
            samples = _sample_answers(logits, q.letters, settings.samples, settings.temperature, seed, tok)
            self_ask = None
            if settings.self_ask:
                answer = q.letters[int(np.argmax(values))]
                follow = (*messages, Message("assistant", answer), Message("user", SELF_ASK_PROMPT))
                ids2 = tok(inner.prompt(follow), add_special_tokens=False)["input_ids"]
                with torch.inference_mode():
                    if ids2[:len(ids)] == ids:
                        tail = torch.tensor([ids2[len(ids):]], dtype=torch.long)
                        logits2 = model(input_ids=tail, use_cache=True, logits_to_keep=1,
                                        **{inner._cache_kwarg(): _states(res)}).logits[0, -1, :].float()
                    else:  # a chat template that rewrites earlier turns: the whole follow-up prompt
                        logits2 = model(input_ids=torch.tensor([ids2], dtype=torch.long),
                                        logits_to_keep=1).logits[0, -1, :].float()
                self_ask = max(float(logits2[j]) for j in yes_ids) - max(float(logits2[j]) for j in no_ids)
        seconds = time.perf_counter() - t0
        compute_s += seconds
        layers, dim = int(states.shape[0]), int(states.shape[1])
        if call_cache is not None:  # what collect --mode logits would have stored for this very call
            ck = call_key(inner.kind, inner.model_id, "choice_scores", messages, {"letters": list(q.letters)})
            if call_cache.get(ck) is None:
                call_cache.put(ck, ChoiceScores(tuple(q.letters), tuple(values), elapsed_answer, len(ids)).to_record())
        record = {
            "key": key, "id": q.id, "text_sha": text_hash(q.text), "dataset": q.dataset, "gold": q.gold,
            "letters": q.letters, "option_logits": [round(v, 4) for v in values],
            "choice": q.letters[int(np.argmax(values))], "self_ask": None if self_ask is None else round(self_ask, 4),
            "samples": samples, "tokens": len(ids), "seconds": round(seconds, 4)}
        writer.add(key, states, record)
        made[key] = (states, record)  # the same question twice in one run is extracted once
        index.setdefault(key, {})[q.id] = (None, -1, record)
        fresh += 1
        if on_row:
            on_row(i + 1, len(mc))
    writer.flush()
    wall = time.perf_counter() - t_start
    rows = sum(len(v) for v in _row_index(out).values())
    report = ExtractReport(out, rows, fresh, reused, skipped, compute_s if fresh else wall, layers, dim,
                           model=inner.describe_load())
    report.layers, report.dim = _write_manifest(out, inner, settings, report)  # a rerun: the manifest's
    return report


def _shard_shape(out: Path) -> tuple[int, int]:
    """(layers, dim) of the hidden states in the directory's first readable shard; (0, 0) with none."""
    for npz in sorted((out / SHARDS).glob("*.npz")):
        try:
            with np.load(npz) as z:
                shape = z["hidden"].shape
            return int(shape[1]), int(shape[2])
        except (OSError, ValueError, KeyError, IndexError):
            continue
    return 0, 0


def _write_manifest(out: Path, inner: Any, settings: ExtractSettings, report: ExtractReport) -> tuple[int, int]:
    """Write DIR/manifest.json; the directory's (layers, dim), from an earlier run when nothing was fresh."""
    from routerlab._version import __version__

    path = out / MANIFEST
    previous: dict[str, Any] = {}
    if path.exists():
        try:
            previous = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            previous = {}
    layers = report.layers or int(previous.get("layers", 0))
    dim = report.dim or int(previous.get("dim", 0))
    if not (layers and dim):  # nothing fresh and no manifest yet (another run still writing): ask a shard
        layers, dim = _shard_shape(out)
    runs = list(previous.get("runs", []))[-19:]
    runs.append({"fresh": report.fresh, "reused": report.reused, "seconds": round(report.seconds, 3),
                 "questions_per_s": None if not report.fresh else round(report.questions_per_s, 4)})
    doc = {"format": "routerlab-signals", "version": EXTRACT_VERSION, "routerlab_version": __version__,
           "model": inner.describe_load(), "model_id": inner.model_id, "spec": inner.spec.describe(),
           "layers": layers, "dim": dim, "settings": asdict(settings), "self_ask_prompt": SELF_ASK_PROMPT,
           "rows": report.rows, "runs": runs}
    def write(tmp: str) -> None:
        Path(tmp).write_text(json.dumps(doc, indent=1), encoding="utf-8")

    atomic_write(path, write)
    return layers, dim
