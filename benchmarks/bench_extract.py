"""Speed of ``routerlab extract`` (SPEC 6 signals) against a naive reference, on MMLU-Pro questions.

    python benchmarks/bench_extract.py                                   # SmolLM2-135M, 40 questions
    python benchmarks/bench_extract.py --n 100 --samples 0 --no-self-ask
    python benchmarks/bench_extract.py --model local:qwen2.5-coder-1.5b,threads=2 --n 40

Questions: a seeded sample, stratified by category, of MMLU-Pro's multiple-choice questions from
../shared/data (imported with ``routerlab.read("mmlu-pro", ...)``), asked exactly as ``collect`` asks them.

``extract`` runs one forward pass per question that yields the hidden states of every layer and the option
logits together, then the self-ask turn on the kept key/value states (~20 new tokens). The naive reference,
measured in the same run on the same questions and model, does what one would write without that reuse: a
forward pass for the hidden states, a second one for the option logits, and the self-ask follow-up prompt
run from scratch; its samples come from the second pass's logits as extract's do. Both are timed per
question (the model's work only; extract's shard writing is included in its wall time, printed too). The
largest differences between the two methods' hidden states, option logits and self-ask scores are printed
(bf16 noise only: the two compute the same quantities).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"


def mmlu_pro_questions(n: int, seed: int) -> Any:
    import routerlab
    from routerlab.llm.questions import load_questions

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = routerlab.read("mmlu-pro", DATA / "mmlu-pro-outputs" / "eval_results")
    return load_questions(table, limit=n, seed=seed, kinds=("mc",))


def naive(backend: Any, questions: Any, settings: Any) -> tuple[float, dict[str, dict[str, Any]]]:
    """The reference: separate passes for hidden states and option logits, the follow-up from scratch.
    Returns the summed per-question seconds and, per query id, what it computed."""
    import torch

    from routerlab.llm.base import Message
    from routerlab.llm.collect import prompt_messages
    from routerlab.llm.extract import SELF_ASK_PROMPT, _sample_answers, _word_ids

    model, tok = backend.loaded.model, backend.tokenizer
    yes, no = _word_ids(tok, "Yes"), _word_ids(tok, "No")
    total = 0.0
    out: dict[str, dict[str, Any]] = {}
    for q in questions:
        t0 = time.perf_counter()
        with backend._calling(), torch.inference_mode():
            messages = prompt_messages(q)
            ids = torch.tensor([tok(backend.prompt(messages), add_special_tokens=False)["input_ids"]])
            states = model(input_ids=ids, output_hidden_states=True).hidden_states
            hidden = torch.stack([h[0].float().mean(dim=0) for h in states]).numpy().astype(np.float16)
            logits = model(input_ids=ids, logits_to_keep=1).logits[0, -1].float()
            values = [max(float(logits[j]) for j in c) for c in backend._letter_ids(tuple(q.letters))]
            _sample_answers(logits, q.letters, settings.samples, settings.temperature, settings.seed, tok)
            self_ask = None
            if settings.self_ask:
                answer = q.letters[int(np.argmax(values))]
                follow = (*messages, Message("assistant", answer), Message("user", SELF_ASK_PROMPT))
                ids2 = torch.tensor([tok(backend.prompt(follow), add_special_tokens=False)["input_ids"]])
                last = model(input_ids=ids2, logits_to_keep=1).logits[0, -1].float()
                self_ask = max(float(last[j]) for j in yes) - max(float(last[j]) for j in no)
        total += time.perf_counter() - t0
        out[q.id] = {"hidden": hidden, "option_logits": values, "self_ask": self_ask}
    return total, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local:smollm2-135m,threads=1", help="a local model spec")
    parser.add_argument("--n", type=int, default=40, help="MMLU-Pro questions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--no-self-ask", action="store_true")
    parser.add_argument("-o", "--out", type=Path, default=None, help="extract directory (default: a temp one)")
    args = parser.parse_args(argv)
    if not (DATA / "mmlu-pro-outputs").exists():
        print(f"bench_extract: no MMLU-Pro outputs under {DATA}", file=sys.stderr)
        return 2

    from routerlab.features.signals import load_signals
    from routerlab.llm.base import load_backend, parse_backend_spec
    from routerlab.llm.collect import prompt_messages
    from routerlab.llm.extract import ExtractSettings, extract

    qs = list(mmlu_pro_questions(args.n, args.seed))
    spec = parse_backend_spec(args.model, option="--model")
    t0 = time.perf_counter()
    backend = load_backend(spec, cache=False)
    print(f"model {spec.describe()} loaded in {time.perf_counter() - t0:.1f} s; {len(qs)} MMLU-Pro questions, "
          f"{sum(backend.count_tokens(backend.prompt(prompt_messages(q))) for q in qs) / len(qs):.0f} prompt "
          f"tokens on average")
    settings = ExtractSettings(samples=args.samples, self_ask=not args.no_self_ask, seed=args.seed)
    naive(backend, qs[:2], settings)  # warm-up: first calls allocate

    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp) / "signals"
        t1 = time.perf_counter()
        report = extract(backend, qs, out, settings)
        wall = time.perf_counter() - t1
        if report.reused:
            print(f"bench_extract: {out} already held {report.reused} of these rows; give a new -o", file=sys.stderr)
            return 2
        naive_s, ref = naive(backend, qs, settings)
        got = load_signals(out, [q.id for q in qs], texts=[q.text for q in qs])

    fast = report.fresh / report.seconds
    slow = len(qs) / naive_s
    print(f"extract: {fast:.2f} questions/s ({report.seconds:.1f} s of model work, {wall:.1f} s wall with the "
          f"shard writes; {report.layers} layers x {report.dim})")
    print(f"naive:   {slow:.2f} questions/s ({naive_s:.1f} s: hidden-state pass + option-logit pass + self-ask "
          "from scratch)")
    print(f"speed-up {fast / slow:.2f}x  (samples={settings.samples}, self_ask={settings.self_ask})")
    hidden_ref = np.stack([ref[q.id]["hidden"] for q in qs]).astype(np.float32)
    scale = np.abs(hidden_ref).max(axis=(0, 2))  # per layer
    rel = (np.abs(got["hidden"].astype(np.float32) - hidden_ref).max(axis=(0, 2)) / scale).max()
    logit_diff = max(abs(a - b) for q, row in zip(qs, got["option_logits"], strict=True)
                     for a, b in zip(ref[q.id]["option_logits"], row[:len(q.letters)], strict=True))
    print(f"agreement: hidden states max |diff| / layer max {rel:.2e}; option logits max |diff| {logit_diff:.3f}",
          end="")
    if settings.self_ask:
        sa = max(abs(ref[q.id]["self_ask"] - float(v)) for q, v in zip(qs, got["self_ask"], strict=True))
        print(f"; self-ask max |diff| {sa:.3f}")
    else:
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
