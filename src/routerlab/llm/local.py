"""The ``local`` backend: a causal LM run on CPU through transformers (torch CPU build).

Spec: ``local:MODEL[,dtype=bfloat16|float32][,threads=N][,batch_size=B]`` where MODEL is a built-in name
(``smollm2-135m``, ``qwen2.5-coder-1.5b``; see :mod:`routerlab.llm.models`), a Hugging Face model directory
or a ``.gguf`` file. A GGUF is dequantized once into a bf16 safetensors folder in the cache
(``<cache>/models/<sha256 of the GGUF>/``), named by the file's content; later loads read that folder and
take seconds. Nothing is ever fetched from the network (``local_files_only``).

- :meth:`LocalBackend.complete_batch` runs left-padded batches (``batch_size`` prompts at a time); greedy
  decoding (temperature 0) is deterministic, sampling is seeded by ``Decoding.seed``. Each answer records
  its latency (call start to its last token), its TTFT (call start to the batch's first generated token:
  template, tokenizing and prefill) and its ITL (mean gap between its later tokens), measured per decoding
  step; tokens in and out are counted by the model's tokenizer.
- :meth:`LocalBackend.stream` yields text deltas while generating (serve's streaming).
- :meth:`LocalBackend.choice_scores` gives each option letter's next-token logit after the chat prompt (the
  larger of the tokens ``"A"`` and ``" A"``) from one forward pass, with no generation; the batched form's
  ``latency_s`` is the batch's time divided by its size.

``threads=N`` runs this backend's calls on N torch threads (default 0: torch's own setting, one per core).
On a machine whose cores are busy with other processes, ``threads=1`` can be many times faster than two
spinning threads (measured: 0.9 s against 27 s for one short SmolLM2 answer on 2 shared cores).

One process loads each (weights, dtype) once: backends built from the same spec share the model, and
calls on it are serialised by a lock (torch already uses every core for one call). torch and
transformers are imported when a backend is built, never when routerlab is imported.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from routerlab._atomic import atomic_directory
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


@register_backend("local")
class LocalBackend(Backend):
    """A local causal LM (see the module docstring)."""

    options: ClassVar[Mapping[str, Any]] = {"dtype": "bfloat16", "threads": 0, "batch_size": 8}
    supports_choice_scores: ClassVar[bool] = True

    def __init__(self, spec: BackendSpec, *, cache_dir: Path | None = None) -> None:
        super().__init__(spec, cache_dir=cache_dir)
        dtype = str(spec.option("dtype", "bfloat16"))
        if dtype not in DTYPES:
            raise UsageError(f"actor spec {spec.describe()}: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        threads = int(spec.option("threads", 0))
        self.batch_size = int(spec.option("batch_size", 8))
        if threads < 0 or self.batch_size < 1:
            raise UsageError(f"actor spec {spec.describe()}: threads must be >= 0 and batch_size >= 1")
        try:
            import torch  # noqa: F401 - a clear error now rather than deep inside loading
            import transformers  # noqa: F401
        except ImportError as exc:
            raise UsageError(f"the local backend needs torch and transformers ({exc}); "
                             "install the llm extra: pip install torch==2.13.0 && pip install -e '.[llm]'") from exc
        self.threads = threads
        root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.source = resolve_model(spec.model, root)
        self.loaded = load_model(self.source, dtype, root)
        self.model_id = f"local:{self.source.identity}:{dtype}"

    @contextlib.contextmanager
    def _calling(self) -> Iterator[None]:
        """Hold the model's lock for one call, with torch on ``threads`` threads when that option is set
        (restored afterwards: the setting is process-wide)."""
        with self.loaded.lock:
            if not self.threads:
                yield
                return
            import torch

            before = torch.get_num_threads()
            torch.set_num_threads(self.threads)
            try:
                yield
            finally:
                torch.set_num_threads(before)

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

    def _generate(self, chunk: Sequence[Sequence[Message]], decoding: Decoding) -> list[Completion]:
        import torch

        with self._calling():
            t0 = time.perf_counter()
            enc = self._encode([self.prompt(m) for m in chunk])
            plen = enc["input_ids"].shape[1]
            steps = _Steps(self.tokenizer, plen, decoding.stop, None)
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
            cancel.set()
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
        import torch

        letters = check_letters(letters)
        cand = self._letter_ids(letters)
        out: list[ChoiceScores] = []
        for start in range(0, len(batch), self.batch_size):
            chunk = batch[start:start + self.batch_size]
            with self._calling():
                t0 = time.perf_counter()
                enc = self._encode([self.prompt(m) for m in chunk])
                mask = enc["attention_mask"]
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                with torch.inference_mode():
                    logits = self.loaded.model(**enc, position_ids=positions, logits_to_keep=1).logits[:, -1, :]
                logits = logits.float()
                elapsed = (time.perf_counter() - t0) / len(chunk)
            for r in range(len(chunk)):
                row = logits[r]
                values = tuple(max(float(row[i]) for i in ids) for ids in cand)
                out.append(ChoiceScores(letters, values, elapsed, int(mask[r].sum())))
        return out

    def describe_load(self) -> dict[str, Any]:
        """How the model was loaded (for reports): source, identity, folder, dtype, seconds."""
        return {"model": self.source.label, "identity": self.source.identity, "folder": str(self.loaded.folder),
                "dtype": self.loaded.dtype, "load_s": self.loaded.load_s, "converted_s": self.loaded.converted_s}
