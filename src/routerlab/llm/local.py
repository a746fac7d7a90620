"""The ``local`` backend: a causal LM run on CPU through transformers (torch CPU build).

Spec: ``local:MODEL[,dtype=bfloat16|float32][,threads=N][,batch_size=B][,prefix_cache=true|false]
[,prefix_min_tokens=T][,prefix_slots=S]`` where MODEL is a built-in name
(``smollm2-135m``, ``qwen2.5-coder-1.5b``; see :mod:`routerlab.llm.models`), a Hugging Face model directory
or a ``.gguf`` file. A GGUF is dequantized once into a bf16 safetensors folder in the cache
(``<cache>/models/<sha256 of the GGUF>/``), named by the file's content; later loads read that folder and
take seconds. Nothing is ever fetched from the network (``local_files_only``).

- :meth:`LocalBackend.complete_batch` runs left-padded batches (``batch_size`` prompts at a time); greedy
  decoding (temperature 0) is deterministic, sampling is seeded by ``Decoding.seed``. Each answer records
  its latency (call start to its last token), its TTFT (call start to the batch's first generated token:
  template, tokenizing and prefill) and its ITL (mean gap between its later tokens), measured per decoding
  step; tokens in and out are counted by the model's tokenizer.
- :meth:`LocalBackend.stream` yields text deltas while generating (serve's streaming); closing it early stops
  the generation at the next token. :meth:`LocalBackend.complete_cancellable` stops at the next token once its
  event is set (serve's deadlines and client disconnects).
- **Prompt length.** :meth:`LocalBackend.context_window` is the model's ``max_position_embeddings``;
  :meth:`LocalBackend.prompt_tokens` counts the chat-template prompt with bounded work for a huge one: a token
  covers at most K characters (K = the longest token string of the vocabulary, 81 for SmolLM2), so a prompt of
  more than K x (limit + 1) characters is over the limit untokenized; a shorter one is tokenized in 16k-character
  pieces cut at spaces between words (exact for byte-level BPE, whose pre-tokenizer splits there too), stopping
  once the sum passes the limit, and a prompt that fits is counted whole. (Characters do not bound tokens from
  above: one character can be several byte tokens.)
- :meth:`LocalBackend.choice_scores` gives each option letter's next-token logit after the chat prompt (the
  larger of the tokens ``"A"`` and ``" A"``) from one forward pass, with no generation; the batched form's
  ``latency_s`` is the batch's time divided by its size.

**Prefix KV cache** (``prefix_cache``, on by default; docs/llm.md "Prefix cache"). Option-letter scoring of
prompts that share a long token prefix (the ``prompted`` router's fixed few-shot prefix, SPEC section 3) computes
that prefix once: a scored prompt that computed more than ``prefix_min_tokens`` tokens itself is kept, with
every layer's keys and values, in a per-backend LRU of ``prefix_slots`` entries; a later prompt that shares at
least ``prefix_min_tokens`` leading *tokens* with an entry reuses those states and runs only its remaining tokens
(prompts of one batch served by the same entry run together, right-padded, in one pass).
Matching on token ids (of the whole prompt, tokenized as usual) makes reuse exact: a causal model's states at a
position depend only on the tokens up to it; only the float rounding of the shorter forward pass differs.
A prompt identical to an entry returns the entry's stored letter logits unchanged. Memory: 2 x KV heads x head
size x 2 bytes (bf16) per kept token and layer, at most ``prefix_slots`` x the longest scored prompt (22.5 KiB a
token on SmolLM2-135M, 28 KiB on Qwen2.5-Coder-1.5B). Generation (``complete``) does not use the cache.

``threads=N`` runs this backend's calls on N torch threads; ``threads=0`` leaves torch's own setting (one
per core). Without ``threads=`` the count is picked when the backend is built
(:func:`routerlab._threads.auto_threads`): the cores this process may run on that other processes leave free,
divided among the local models of this process whose backends are open (those can run at the same time). On a
machine whose cores are busy with other processes, one thread can be many times faster than two spinning ones
(measured: 0.9 s against 27 s for one short SmolLM2 answer on 2 shared cores; 9.8 against 0.2 questions/s).

One process loads each (weights, dtype) once: backends built from the same spec share the model, and
calls on it are serialised by a lock (torch already uses every core for one call). torch and
transformers are imported when a backend is built, never when routerlab is imported.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from routerlab._atomic import atomic_directory
from routerlab._threads import auto_threads, hold_torch_user, torch_threads
from routerlab.errors import UsageError
from routerlab.llm.base import (
    GREEDY,
    Backend,
    BackendSpec,
    ChoiceScores,
    Completion,
    Decoding,
    Message,
    check_letters,
    register_backend,
)
from routerlab.llm.cache import default_cache_dir
from routerlab.llm.models import ModelSource, resolve_model, write_json
from routerlab.progress import task

DTYPES = ("bfloat16", "float32")
MARKER = "routerlab-model.json"
# end-of-turn tokens of common chat templates: generation stops at any of them the tokenizer has as a special
# token (Qwen's vocabulary also holds a plain-text '</s>', which must not end an answer)
_END_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "</s>")


@dataclass
class LoadedModel:
    """A model and tokenizer in memory, shared by every backend of the same (weights, dtype)."""

    model: Any
    tokenizer: Any
    source: ModelSource
    folder: Path
    dtype: str
    load_s: float
    converted_s: float | None
    end_ids: tuple[int, ...]
    lock: threading.Lock = field(default_factory=threading.Lock)
    letter_ids: dict[str, tuple[int, ...]] = field(default_factory=dict)
    max_token_chars: int | None = None


_MODELS: dict[tuple[str, str], LoadedModel] = {}
_MODELS_LOCK = threading.Lock()


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """No progress bars or info chatter from transformers while routerlab loads a model."""
    import transformers.utils.logging

    hf_logging: Any = transformers.utils.logging  # untyped functions
    bars = hf_logging.is_progress_bar_enabled()
    level = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    # the GGUF reader draws its own tqdm bar, deaf to the switch above; routerlab's own line says what runs
    gguf_utils: Any = None
    with contextlib.suppress(ImportError):
        import transformers.modeling_gguf_pytorch_utils as gguf_utils
    bar = getattr(gguf_utils, "tqdm", None)
    if bar is not None:
        gguf_utils.tqdm = _no_bar
    try:
        yield
    finally:
        if bar is not None:
            gguf_utils.tqdm = bar
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def _no_bar(items: Any, *args: Any, **kwargs: Any) -> Any:
    """tqdm's call shape, without the bar."""
    return items


def convert_gguf(gguf: Path, folder: Path, source: ModelSource) -> None:
    """Dequantize ``gguf`` into a bf16 safetensors model folder (published atomically at ``folder``)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    with atomic_directory(folder) as tmp, _quiet_transformers():
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16, local_files_only=True,
            quantization_config=GgufConfig(gguf_file=gguf.name, dequantize=True))
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        write_json(tmp / MARKER, {"source": source.label, "gguf": str(gguf), "sha256": source.identity,
                                  "dtype": "bfloat16"})


def load_model(source: ModelSource, dtype: str, root: Path) -> LoadedModel:
    """The model of ``source`` in ``dtype``, loaded once per process (converted once per GGUF)."""
    key = (source.identity, dtype)
    with _MODELS_LOCK:
        if key in _MODELS:
            return _MODELS[key]
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        converted_s = None
        if source.kind == "gguf":
            folder = root / "models" / source.identity[:32]
            if not (folder / MARKER).is_file():
                t0 = time.perf_counter()
                with task(f"llm: converting {source.label} (GGUF -> bf16 safetensors, once)"):
                    convert_gguf(source.path(), folder, source)
                converted_s = time.perf_counter() - t0
        else:
            folder = source.path()
        t0 = time.perf_counter()
        with task(f"llm: loading {source.label}"), _quiet_transformers():
            tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            model: Any = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype),
                                                              local_files_only=True)
        model.eval()
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        vocab = tok.get_vocab()
        special = set(tok.all_special_ids) | set(getattr(tok, "added_tokens_decoder", {}))
        ends = {tok.eos_token_id} | {vocab[t] for t in _END_TOKENS if vocab.get(t) in special}
        gen_eos = getattr(model.generation_config, "eos_token_id", None)
        ends |= set(gen_eos) if isinstance(gen_eos, (list, tuple)) else ({gen_eos} if gen_eos is not None else set())
        loaded = LoadedModel(model, tok, source, Path(folder), dtype, time.perf_counter() - t0, converted_s,
                             tuple(sorted(i for i in ends if i is not None)))
        _MODELS[key] = loaded
        return loaded


class _Steps:
    """A stopping criterion that times every decoding step, stops rows at stop strings, and stops all
    rows when ``cancel`` is set (a stream whose reader went away)."""

    def __init__(self, tokenizer: Any, prompt_len: int, stops: tuple[str, ...], cancel: threading.Event | None,
                 on_step: Any = None) -> None:
        self.times: list[float] = []
        self.tok = tokenizer
        self.prompt_len = prompt_len
        self.stops = stops
        self.tail = max((len(s) for s in stops), default=0) + 8
        self.cancel = cancel
        self.on_step = on_step

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        self.times.append(time.perf_counter())
        if self.on_step is not None:
            self.on_step(input_ids)
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool)
        if self.cancel is not None and self.cancel.is_set():
            return done | True
        if self.stops:
            for r in range(input_ids.shape[0]):
                text = self.tok.decode(input_ids[r, self.prompt_len:][-self.tail:], skip_special_tokens=True)
                done[r] = any(s in text for s in self.stops)
        return done


def common_prefix_length(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading token ids ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


@dataclass
class PrefixEntry:
    """One kept prompt: its token ids, every layer's (keys, values) over them (shape ``(1, heads, tokens,
    head_dim)``), and the float32 next-token logits after its last token."""

    ids: np.ndarray
    layers: tuple[tuple[Any, Any], ...]
    logits: Any

    @property
    def nbytes(self) -> int:
        return sum(int(k.nbytes) + int(v.nbytes) for k, v in self.layers)


class PrefixCache:
    """An LRU of recent prompts' key/value states, matched by longest common token prefix (module docstring).

    Policy: :meth:`lookup` picks the entry that shares the most leading tokens with a prompt and reuses at most
    all but the prompt's last token (which must run to give the next-token logits); below ``min_tokens`` it is a
    miss. The backend keeps (:meth:`store`) every prompt that computed more than ``min_tokens`` of its tokens
    itself: every miss, and a hit whose own part is that long (so prompts that share only a header with a kept
    one get their own entry, while a run of short suffixes on one prefix keeps one entry). A new entry drops
    the entries it extends; past ``slots`` entries the least recently used goes. So a run of prompts with one
    shared prefix and different suffixes hits from its second prompt on. Its own lock makes it safe to share.
    """

    def __init__(self, slots: int, min_tokens: int) -> None:
        self.slots = slots
        self.min_tokens = min_tokens
        self._entries: OrderedDict[bytes, PrefixEntry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = self.tokens_saved = self.evictions = 0

    def _best(self, ids: np.ndarray) -> tuple[PrefixEntry | None, int]:
        best, shared = None, 0
        for entry in self._entries.values():
            n = common_prefix_length(entry.ids, ids)
            if n > shared:
                best, shared = entry, n
        reuse = min(shared, len(ids) - 1)
        return (best, reuse) if best is not None and reuse >= self.min_tokens else (None, 0)

    def reusable(self, ids: np.ndarray) -> int:
        """How many tokens of ``ids`` a lookup would reuse now (0 for a miss); counts nothing."""
        with self._lock:
            return self._best(ids)[1]

    def lookup(self, ids: np.ndarray) -> tuple[PrefixEntry | None, int]:
        """The entry to reuse for ``ids`` and how many of its leading tokens, or (None, 0); counted as a hit
        or a miss (the caller counts the tokens it saves), and the entry becomes the most recently used."""
        with self._lock:
            entry, reuse = self._best(ids)
            if entry is None:
                self.misses += 1
                return None, 0
            self._entries.move_to_end(entry.ids.tobytes())
            self.hits += 1
            return entry, reuse

    def count_saved(self, n: int) -> None:
        """Count ``n`` prompt tokens whose states were reused rather than computed."""
        with self._lock:
            self.tokens_saved += n

    def count_misses(self, n: int) -> None:
        """Count ``n`` prompts that could not use the cache (too short, or scored in a padded batch)."""
        with self._lock:
            self.misses += n

    def store(self, entry: PrefixEntry) -> None:
        """Keep ``entry`` as the newest (when longer than ``min_tokens``); entries that are a prefix of it go."""
        if len(entry.ids) <= self.min_tokens:
            return
        with self._lock:
            covered = [key for key, old in self._entries.items()
                       if len(old.ids) <= len(entry.ids) and common_prefix_length(old.ids, entry.ids) == len(old.ids)]
            for key in covered:
                del self._entries[key]
            self._entries[entry.ids.tobytes()] = entry
            while len(self._entries) > self.slots:
                self._entries.popitem(last=False)
                self.evictions += 1

    def stats(self) -> dict[str, int]:
        """Counters and what is held: hits, misses, tokens_saved, evictions, entries, tokens_held, bytes_held."""
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "tokens_saved": self.tokens_saved,
                    "evictions": self.evictions, "entries": len(self._entries),
                    "tokens_held": sum(len(e.ids) for e in self._entries.values()),
                    "bytes_held": sum(e.nbytes for e in self._entries.values())}

    def clear(self) -> None:
        """Forget every entry and zero the counters."""
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = self.tokens_saved = self.evictions = 0


@register_backend("local")
class LocalBackend(Backend):
    """A local causal LM (see the module docstring)."""

    options: ClassVar[Mapping[str, Any]] = {"dtype": "bfloat16", "threads": 0, "batch_size": 8, "prefix_cache": True,
                                            "prefix_min_tokens": 64, "prefix_slots": 4}
    supports_choice_scores: ClassVar[bool] = True

    def __init__(self, spec: BackendSpec, *, cache_dir: Path | None = None) -> None:
        super().__init__(spec, cache_dir=cache_dir)
        dtype = str(spec.option("dtype", "bfloat16"))
        if dtype not in DTYPES:
            raise UsageError(f"actor spec {spec.describe()}: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        given = spec.option("threads")
        threads = 0 if given is None else int(given)
        self.batch_size = int(spec.option("batch_size", 8))
        if threads < 0 or self.batch_size < 1:
            raise UsageError(f"actor spec {spec.describe()}: threads must be >= 0 and batch_size >= 1")
        prefix_on = spec.option("prefix_cache", True)
        min_tokens, slots = spec.option("prefix_min_tokens", 64), spec.option("prefix_slots", 4)
        if not isinstance(prefix_on, bool):
            raise UsageError(f"actor spec {spec.describe()}: prefix_cache must be true or false, got {prefix_on!r}")
        for key, value in (("prefix_min_tokens", min_tokens), ("prefix_slots", slots)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"actor spec {spec.describe()}: {key} must be an integer >= 1, got {value!r}")
        self.prefix_cache: PrefixCache | None = PrefixCache(slots, min_tokens) if prefix_on else None
        try:
            import torch  # noqa: F401 - a clear error now rather than deep inside loading
            import transformers  # noqa: F401
        except ImportError as exc:
            raise UsageError(f"the local backend needs torch and transformers ({exc}); "
                             "install the llm extra: pip install torch==2.13.0 && pip install -e '.[llm]'") from exc
        root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.source = resolve_model(spec.model, root)
        self.loaded = load_model(self.source, dtype, root)
        self.model_id = f"local:{self.source.identity}:{dtype}"
        # backends of one model share its lock, so they count as one torch user of the process
        self._release_user = hold_torch_user((self.source.identity, dtype))
        self.threads_auto = given is None
        self.threads = auto_threads() if given is None else threads

    @contextlib.contextmanager
    def _calling(self) -> Iterator[None]:
        """Hold the model's lock for one call, with torch on ``threads`` threads (given, or picked from the free
        cores; 0: torch's own) (:func:`routerlab._threads.torch_threads`: the setting is process-wide, so
        concurrent calls that want another count wait, and the count before is restored when the last one
        ends)."""
        with self.loaded.lock, torch_threads(self.threads):
            yield

    # -- prompts --------------------------------------------------------------------------------
    @property
    def tokenizer(self) -> Any:
        return self.loaded.tokenizer

    def prompt(self, messages: Sequence[Message]) -> str:
        """The chat as the model reads it, ending where the assistant's answer starts: the tokenizer's chat
        template, or a plain ``role: content`` transcript for a tokenizer without one."""
        tok = self.tokenizer
        chat = [{"role": m.role, "content": m.content} for m in messages]
        if getattr(tok, "chat_template", None):
            text: str = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
            return text
        return "".join(f"{m.role}: {m.content}\n" for m in messages) + "assistant:"

    def _encode(self, prompts: Sequence[str]) -> Any:
        return self.tokenizer(list(prompts), return_tensors="pt", padding=True, padding_side="left",
                              add_special_tokens=False)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def context_window(self) -> int | None:
        """The model's ``max_position_embeddings`` (or the tokenizer's ``model_max_length`` when smaller and
        real; tokenizers without one report a huge placeholder)."""
        config = self.loaded.model.config
        sizes = [getattr(config, "max_position_embeddings", None), getattr(self.tokenizer, "model_max_length", None)]
        real = [int(n) for n in sizes if isinstance(n, int) and 0 < n < 10**7]
        return min(real) if real else None

    def max_token_chars(self) -> int:
        """The longest text one token of this vocabulary stands for, in characters, at most (once per model).

        Measured on the tokens' own strings: a byte-level BPE writes one character per byte (at least one byte a
        character of text), a SentencePiece vocabulary one per character (a byte-fallback token ``<0xE2>`` is
        six for one byte, special tokens count their whole name): each token's string is at least as long as the
        text it covers, so a text of c characters needs at least c / K tokens (barring a normalizer that deletes
        characters, which these chat models do not have)."""
        if self.loaded.max_token_chars is None:
            tok = self.tokenizer
            self.loaded.max_token_chars = max(
                (len(t) for t in tok.convert_ids_to_tokens(list(range(len(tok)))) if t), default=1)
        return max(1, self.loaded.max_token_chars)

    def prompt_tokens(self, messages: Sequence[Message], *, limit: int | None = None) -> int:
        """Tokens of the chat-template prompt; with ``limit``, bounded work for a long one (module docstring
        "Prompt length"): past ``K * limit`` characters (K = :meth:`max_token_chars`) it holds more than
        ``limit`` tokens without tokenizing; otherwise it is counted in pieces cut at spaces between words
        (where byte-level pre-tokenizers split anyway), stopping once the sum passes ``limit``; a prompt that
        may fit is counted whole, in one pass, so the count that caps ``max_tokens`` is exact."""
        text = self.prompt(messages)
        if limit is None:
            return self.count_tokens(text)
        k = self.max_token_chars()
        if len(text) > k * (limit + 1):
            return -(-len(text) // k)  # ceil: at least this many tokens, more than limit
        piece = 16384
        if len(text) <= 2 * piece:
            return self.count_tokens(text)
        total, start = 0, 0
        while start < len(text):
            end = min(len(text), start + piece)
            if end < len(text):
                cut = text.rfind(" ", start + piece // 2, end)
                while cut > start and (text[cut - 1].isspace() or text[cut + 1].isspace()):
                    cut = text.rfind(" ", start + piece // 2, cut)
                end = cut if cut > start else end
            total += self.count_tokens(text[start:end])
            if total > limit:
                return total
            start = end
        return self.count_tokens(text)

    def complete_cancellable(self, messages: Sequence[Message], decoding: Decoding,
                             cancel: threading.Event) -> Completion:
        """One answer that stops between tokens once ``cancel`` is set (a served request whose client left or
        whose deadline passed)."""
        return self._generate([messages], decoding, cancel)[0]

    def _gen_config(self, decoding: Decoding, max_tokens: int | None = None) -> Any:
        import transformers

        config_class: Any = transformers.GenerationConfig
        tok = self.tokenizer
        kwargs: dict[str, Any] = {"max_new_tokens": max_tokens or decoding.max_tokens,
                                  "pad_token_id": tok.pad_token_id, "eos_token_id": list(self.loaded.end_ids)}
        if decoding.greedy:
            kwargs["do_sample"] = False
        else:
            kwargs.update(do_sample=True, temperature=decoding.temperature, top_p=decoding.top_p, top_k=0)
        return config_class(**kwargs)

    # -- generation -----------------------------------------------------------------------------
    def complete(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Completion:
        return self.complete_batch([messages], decoding)[0]

    def complete_batch(self, batch: Sequence[Sequence[Message]], decoding: Decoding = GREEDY) -> list[Completion]:
        out: list[Completion] = []
        for start in range(0, len(batch), self.batch_size):
            out.extend(self._generate(batch[start:start + self.batch_size], decoding))
        return out

    def _generate(self, chunk: Sequence[Sequence[Message]], decoding: Decoding,
                  cancel: threading.Event | None = None) -> list[Completion]:
        import torch

        with self._calling():
            t0 = time.perf_counter()
            enc = self._encode([self.prompt(m) for m in chunk])
            plen = enc["input_ids"].shape[1]
            steps = _Steps(self.tokenizer, plen, decoding.stop, cancel)
            if not decoding.greedy:
                torch.manual_seed(decoding.seed if decoding.seed is not None else time.time_ns() % (2**31))
            with torch.inference_mode():
                ids = self.loaded.model.generate(**enc, generation_config=self._gen_config(decoding),
                                                 stopping_criteria=[steps])
            t_end = time.perf_counter()
        results = []
        mask = enc["attention_mask"]
        for r in range(len(chunk)):
            gen = ids[r, plen:].tolist()
            n, ended = len(gen), False
            for i, t in enumerate(gen):
                if t in self.loaded.end_ids:
                    n, ended = i, True
                    break
            text = self.tokenizer.decode(gen[:n], skip_special_tokens=True)
            cut = [text.find(s) for s in decoding.stop if s in text]
            if cut:
                text = text[:min(cut)]
            finish = "stop" if ended or cut else "length"
            steps_used = min(n + ended, len(steps.times))  # this row's decoding steps, its end token included
            last = steps.times[steps_used - 1] if steps_used else t_end
            ttft = steps.times[0] - t0 if steps.times else None
            itl = (last - steps.times[0]) / (steps_used - 1) if steps_used > 1 else None
            latency = (last if len(chunk) > 1 else t_end) - t0
            results.append(Completion(text=text, tokens_in=int(mask[r].sum()), tokens_out=n, latency_s=latency,
                                      ttft_s=ttft, itl_s=itl, finish_reason=finish))
        return results

    def stream(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Iterator[str]:
        """Text deltas as tokens are generated; a stop string ends the stream (and is not sent)."""
        import torch

        q: queue.Queue[tuple[str, Any]] = queue.Queue()
        cancel = threading.Event()
        tok = self.tokenizer
        end_ids = set(self.loaded.end_ids)

        def worker() -> None:
            try:
                with self._calling():
                    enc = self._encode([self.prompt(messages)])
                    plen = enc["input_ids"].shape[1]

                    def on_step(input_ids: Any) -> None:
                        q.put(("tok", int(input_ids[0, -1])))

                    steps = _Steps(tok, plen, (), cancel, on_step)
                    if not decoding.greedy:
                        torch.manual_seed(decoding.seed if decoding.seed is not None else time.time_ns() % (2**31))
                    with torch.inference_mode():
                        self.loaded.model.generate(**enc, generation_config=self._gen_config(decoding),
                                                   stopping_criteria=[steps])
                q.put(("end", None))
            except BaseException as exc:  # handed to the reader, raised there
                q.put(("error", exc))

        thread = threading.Thread(target=worker, name="routerlab-local-stream", daemon=True)
        thread.start()
        ids: list[int] = []
        sent = 0
        hold = max((len(s) for s in decoding.stop), default=1) - 1
        try:
            while True:
                kind, value = q.get()
                if kind == "error":
                    raise value
                finished = kind == "end"
                if kind == "tok":
                    if value in end_ids:
                        finished = True
                    else:
                        ids.append(value)
                text = tok.decode(ids, skip_special_tokens=True)
                cut = [text.find(s) for s in decoding.stop if s in text]
                if cut:
                    text, finished = text[:min(cut)], True
                # hold back an incomplete UTF-8 sequence and what could be the start of a stop string
                safe = len(text) if finished else max(sent, len(text) - hold - (1 if text.endswith("\ufffd") else 0))
                if safe > sent:
                    yield text[sent:safe]
                    sent = safe
                if finished:
                    return
        finally:
            # closing the generator (a reader that went away) stops generation at the next token; the worker is
            # joined so the model is free again when this returns, unless this runs on the worker itself (a
            # generator dropped there and finalized by the garbage collector: it cannot join itself)
            cancel.set()
            if thread is not threading.current_thread():
                thread.join()

    # -- option-letter scores ---------------------------------------------------------------------
    def _letter_ids(self, letters: tuple[str, ...]) -> list[tuple[int, ...]]:
        out = []
        for letter in letters:
            if letter not in self.loaded.letter_ids:
                ids = set()
                for form in (letter, " " + letter):
                    enc = self.tokenizer(form, add_special_tokens=False)["input_ids"]
                    if len(enc) == 1:
                        ids.add(int(enc[0]))
                if not ids:
                    raise UsageError(f"option letter {letter!r} is not a single token for {self.source.label}")
                self.loaded.letter_ids[letter] = tuple(sorted(ids))
            out.append(self.loaded.letter_ids[letter])
        return out

    def choice_scores(self, messages: Sequence[Message], letters: Sequence[str]) -> ChoiceScores:
        return self.choice_scores_batch([messages], letters)[0]

    def choice_scores_batch(self, batch: Sequence[Sequence[Message]], letters: Sequence[str]) -> list[ChoiceScores]:
        letters = check_letters(letters)
        cand = self._letter_ids(letters)
        out: list[ChoiceScores] = []
        for start in range(0, len(batch), self.batch_size):
            chunk = batch[start:start + self.batch_size]
            with self._calling():
                prompts = [self.prompt(m) for m in chunk]
                rows = self._score_chunk(prompts)
            for row, elapsed, n_in in rows:
                values = tuple(max(float(row[i]) for i in ids) for ids in cand)
                out.append(ChoiceScores(letters, values, elapsed, n_in))
        return out

    def _score_chunk(self, prompts: Sequence[str]) -> list[tuple[Any, float, int]]:
        """(float32 next-token logits, seconds, prompt tokens) per prompt, in order. With the prefix cache on, a
        prompt goes through the cache when it is long enough to be reused and has a cached prefix, shares a long
        prefix with another prompt of the chunk, or is a single call; the rest run in one left-padded batch as
        without the cache. On the cache, a prompt nothing serves runs alone and is kept; the prompts served by one
        kept prompt then run as one batch on its states."""
        cache = self.prefix_cache
        if cache is None:
            return self._score_padded(prompts)
        t0 = time.perf_counter()
        ids = [np.asarray(self.tokenizer(p, add_special_tokens=False)["input_ids"], dtype=np.int64) for p in prompts]
        least = cache.min_tokens
        on_cache = []
        for i, row in enumerate(ids):
            partner = any(common_prefix_length(row, other) >= least for j, other in enumerate(ids) if j != i)
            if len(row) > least and (len(ids) == 1 or partner or cache.reusable(row)):
                on_cache.append(i)
        share = (time.perf_counter() - t0) / len(prompts)
        results: list[tuple[Any, float, int] | None] = [None] * len(prompts)
        rest = [i for i in range(len(prompts)) if i not in on_cache]
        if rest:
            cache.count_misses(len(rest))
            for i, res in zip(rest, self._score_padded([prompts[i] for i in rest]), strict=True):
                results[i] = (res[0], res[1] + share, res[2])
        groups: dict[int, tuple[PrefixEntry, list[tuple[int, int]]]] = {}
        for i in on_cache:
            t1 = time.perf_counter()
            entry, reuse = cache.lookup(ids[i])
            if entry is None:
                logits = self._run_on_prefix(None, 0, [ids[i]], cache)[0]
                results[i] = (logits, time.perf_counter() - t1 + share, len(ids[i]))
            elif np.array_equal(entry.ids, ids[i]):  # the very prompt kept: its logits as first computed
                cache.count_saved(reuse)
                results[i] = (entry.logits, time.perf_counter() - t1 + share, len(ids[i]))
            else:
                groups.setdefault(id(entry), (entry, []))[1].append((i, reuse))
        for entry, members in groups.values():
            t1 = time.perf_counter()
            reuse = min(r for _, r in members)  # one shared length for the batch: the shortest match
            rows = self._run_on_prefix(entry, reuse, [ids[i] for i, _ in members], cache)
            each = (time.perf_counter() - t1) / len(members)
            for (i, _), logits in zip(members, rows, strict=True):
                results[i] = (logits, each + share, len(ids[i]))
        return [r for r in results if r is not None]

    def _score_padded(self, prompts: Sequence[str]) -> list[tuple[Any, float, int]]:
        """One left-padded forward pass over ``prompts`` (the time is shared equally)."""
        import torch

        t0 = time.perf_counter()
        enc = self._encode(prompts)
        mask = enc["attention_mask"]
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            logits = self.loaded.model(**enc, position_ids=positions, logits_to_keep=1).logits[:, -1, :]
        logits = logits.float()
        elapsed = (time.perf_counter() - t0) / len(prompts)
        return [(logits[r], elapsed, int(mask[r].sum())) for r in range(len(prompts))]

    def _run_on_prefix(self, entry: PrefixEntry | None, reuse: int, rows: Sequence[np.ndarray],
                       cache: PrefixCache) -> list[Any]:
        """The float32 next-token logits after each of ``rows``, which all start with ``entry``'s first
        ``reuse`` tokens (none without an entry): one forward pass over their remaining tokens, right-padded,
        on the kept states repeated per row. Right padding needs no attention mask: a causal model's real
        tokens never look at the pads after them, and every row's positions continue from ``reuse``. A row
        that computed more than ``min_tokens`` tokens itself (every miss) is kept for later prompts."""
        import torch
        from transformers import DynamicCache

        model = self.loaded.model
        tails = [row[reuse:] for row in rows]
        width = max(len(t) for t in tails)
        run = torch.full((len(rows), width), int(self.tokenizer.pad_token_id), dtype=torch.long)
        for r, tail in enumerate(tails):
            run[r, :len(tail)] = torch.from_numpy(tail)
        if entry is None:
            past = DynamicCache(config=model.config)
        else:
            past = DynamicCache(config=model.config, ddp_cache_data=[
                (k[..., :reuse, :].expand(len(rows), -1, -1, -1), v[..., :reuse, :].expand(len(rows), -1, -1, -1))
                for k, v in entry.layers])
        last = torch.tensor([len(t) - 1 for t in tails])
        keep = torch.unique(last)  # sorted; the lm head runs on these positions only
        with torch.inference_mode():  # the pass appends the rows' states to ``past``
            out = model(input_ids=run, use_cache=True, logits_to_keep=1 if len(rows) == 1 else keep,
                        **{self._cache_kwarg(): past}).logits
        cols = torch.zeros_like(last) if len(rows) == 1 else torch.searchsorted(keep, last)
        logits = [out[r, cols[r], :].float() for r in range(len(rows))]
        cache.count_saved(reuse * len(rows))
        layers = getattr(past, "layers", None)
        if layers is None or any(type(layer).__name__ != "DynamicLayer" for layer in layers):
            # sliding-window or recurrent layers keep only part of the past: a prefix of them cannot be reused
            self.prefix_cache = None
            return logits
        for r, tail in enumerate(tails):
            if len(tail) > cache.min_tokens or entry is None:
                n = reuse + len(tail)
                states = tuple((layer.keys[r:r + 1, :, :n, :], layer.values[r:r + 1, :, :n, :]) for layer in layers)
                if len(rows) > 1:  # its own copy, not a view that keeps the whole batch's states alive
                    states = tuple((k.clone(), v.clone()) for k, v in states)
                cache.store(PrefixEntry(rows[r], states, logits[r]))
        return logits

    def _cache_kwarg(self) -> str:
        """The forward pass's name for its key/value cache: ``cache`` in newer transformers 5 releases,
        ``past_key_values`` before (and deprecated since)."""
        import inspect

        return "cache" if "cache" in inspect.signature(self.loaded.model.forward).parameters else "past_key_values"

    def prefix_stats(self) -> dict[str, int]:
        """The prefix cache's counters (hits, misses, tokens_saved, evictions) and holdings (entries,
        tokens_held, bytes_held); all zero when the cache is off."""
        if self.prefix_cache is None:
            return dict.fromkeys(("hits", "misses", "tokens_saved", "evictions", "entries", "tokens_held",
                                  "bytes_held"), 0)
        return self.prefix_cache.stats()

    def describe_load(self) -> dict[str, Any]:
        """How the model was loaded (for reports): source, identity, folder, dtype, seconds, torch threads (and
        whether that count was picked from the free cores)."""
        return {"model": self.source.label, "identity": self.source.identity, "folder": str(self.loaded.folder),
                "dtype": self.loaded.dtype, "load_s": self.loaded.load_s, "converted_s": self.loaded.converted_s,
                "threads": self.threads, "threads_auto": self.threads_auto}

    def close(self) -> None:
        """No longer a torch user of this process (the model stays loaded for the next backend of it)."""
        self._release_user()
