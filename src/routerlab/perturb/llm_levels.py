"""The LLM-written levels: paraphrase and rambling (SPEC 3; hse paper sec. 5.1 and appendix 11.1).

As in the paper, one zero-shot prompt per query and level asks a model for ``ask`` rewrites (10 by default, the
paper's number) at once; the reply is parsed into items and :func:`routerlab.perturb.perturb` keeps up to p of them
that are distinct, differ from the query and keep its protected spans (numbers, formulae, code: a rewrite that
changes, drops or adds one is rejected and counted). The paper's own prompt templates are not in its text, so the
prompts here are routerlab's wording of the levels it describes (a reformulation with the same meaning; the query
wrapped in irrelevant chatter); they are in :data:`PROMPTS` and in docs/perturb.md.

Decoding is greedy, so a level's variants are a function of the query, the model and ``ask`` (the seed plays no
part); every call goes through the backend's on-disk call cache (keyed by the content hash of the prompt, model and
decoding), so a rerun asks nothing again and an interrupted run resumes. Calls are batched (``batch_size``) among
queries that get the same token budget, which depends only on the query's own length, so a query's cache key never
depends on the other queries of a run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from routerlab.errors import UsageError
from routerlab.perturb.base import Perturber, register_level

if TYPE_CHECKING:
    from routerlab.llm.base import Backend

SYSTEM = "You rewrite questions for a study of how wording affects question routing. You never answer the questions."
_KEEP = ("Keep every number, formula, symbol, code snippet and single-letter variable exactly as written, and add no "
         "new ones.")
PROMPTS: dict[str, str] = {
    "paraphrase": (
        'Here is a question:\n"""\n{prompt}\n"""\nWrite {ask} paraphrases of this question. Each paraphrase asks '
        "exactly the same thing, with the same answer, in different words and with a different sentence structure. "
        + _KEEP + " Output only the {ask} paraphrases, one per line, numbered 1 to {ask}."
    ),
    "rambling": (
        'Here is a question:\n"""\n{prompt}\n"""\nWrite {ask} versions of this question as a chatty person might '
        "type it: each version adds a sentence or two of irrelevant personal background or small talk (their day, "
        "their job, their studies, their family) before or after the question, and still asks exactly the same "
        "question. " + _KEEP + " Output only the {ask} versions, one per line, numbered 1 to {ask}."
    ),
}
"""The user message of each level; :data:`SYSTEM` is the system message. A first wording without them ("Rewrite the
question below in {ask} different ways ...") made Qwen2.5-Coder-1.5B answer multiple-choice stems instead of
rewriting them and refuse the rambling level ("I can't assist with that"); this one did neither on the same
queries."""
# A rewrite's length relative to the query's (characters): outside these bounds it is not a rewrite (a small model
# often answers the question, or stops mid-sentence) and is dropped; rambling only adds material.
LENGTH_RATIO = {"paraphrase": (0.4, 3.0), "rambling": (1.0, 10.0)}
# Token budget per requested rewrite: the query's own length times this factor, plus room for the numbering.
_LENGTH_FACTOR = {"paraphrase": 1.5, "rambling": 3.0}
_BUDGET_STEP = 64
MAX_TOKENS = 4096

_NUMBERED = re.compile(r"^\s*(?:\*\*)?\(?(\d{1,2})[.):](?:\*\*)?\s+", re.MULTILINE)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|(?:rewrite|variant|version)\s*\d+\s*[:.)-])\s*", re.IGNORECASE)
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_QUOTES = "\"'\u201c\u201d\u2018\u2019`"


def parse_rewrites(reply: str) -> list[str]:
    """The rewrites in an LLM reply: the numbered items (``1.``, ``2)``, ``**3.**``; an item may span lines) when
    the reply numbers them, else its non-empty lines without bullets; a preamble such as ``Here are 10 rewrites:``
    and surrounding quotes are dropped."""
    starts = list(_NUMBERED.finditer(reply))
    if len(starts) >= 2:
        items = [reply[m.end(): nxt.start() if nxt is not None else len(reply)]
                 for m, nxt in zip(starts, [*starts[1:], None], strict=True)]
    else:
        items = [line for line in reply.splitlines() if not line.rstrip().endswith(":")]
    out: list[str] = []
    for item in items:
        text = _BOLD.sub(r"\1", " ".join(item.split()))
        text = _BULLET.sub("", text).strip().strip(_QUOTES).strip()
        if text and not (text.endswith(":") and len(starts) < 2):
            out.append(text)
    return out


class _LLMLevel(Perturber):
    """A level written by an LLM backend from one zero-shot prompt per query (module docstring)."""

    offline: ClassVar[bool] = False
    defaults: ClassVar[dict[str, int]] = {"ask": 10, "batch_size": 8}

    def __init__(self, backend: Backend | None = None, **options: Any) -> None:
        unknown = set(options) - set(self.defaults)
        if unknown:
            raise UsageError(f"perturbation level {self.level!r} has no option {sorted(unknown)}; options: "
                             f"{', '.join(sorted(self.defaults))}")
        for key, value in options.items():
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
                raise UsageError(f"perturbation level {self.level!r}: {key} must be an integer in 1..100, "
                                 f"got {value!r}")
        super().__init__(backend)
        self.ask = int(options.get("ask", self.defaults["ask"]))
        self.batch_size = int(options.get("batch_size", self.defaults["batch_size"]))

    def prompt(self, text: str) -> str:
        """The zero-shot prompt that asks for ``ask`` rewrites of ``text``."""
        return PROMPTS[self.level].format(ask=self.ask, prompt=text.strip())

    def budget(self, text: str) -> int:
        """Most tokens of the reply: ``ask`` rewrites of about the query's length (rambling: three times), rounded
        up to a multiple of 64 so that queries of similar length share a batch."""
        assert self.backend is not None
        counted = self.backend.count_tokens(text)
        n = counted if counted is not None else max(1, len(text) // 3)
        want = self.ask * (int(n * _LENGTH_FACTOR[self.level]) + 8)
        return min(MAX_TOKENS, -(-want // _BUDGET_STEP) * _BUDGET_STEP)

    def candidates(self, texts: Sequence[str], p: int, rngs: Sequence[np.random.Generator]) -> list[list[str]]:
        from routerlab.llm.base import Decoding, Message
        from routerlab.progress import Progress

        assert self.backend is not None
        budgets = [self.budget(t) for t in texts]
        out: list[list[str]] = [[] for _ in texts]
        with Progress(f"perturb: {self.level}", len(texts), unit="q") as bar:
            for budget in sorted(set(budgets)):
                rows = [i for i, b in enumerate(budgets) if b == budget]
                for start in range(0, len(rows), self.batch_size):
                    chunk = rows[start: start + self.batch_size]
                    chats = [(Message("system", SYSTEM), Message("user", self.prompt(texts[i]))) for i in chunk]
                    replies = self.backend.complete_batch(chats, Decoding(max_tokens=budget))
                    for i, reply in zip(chunk, replies, strict=True):
                        items = parse_rewrites(reply.text)
                        if reply.finish_reason == "length" and items:  # the last rewrite was cut off
                            items.pop()
                            self.dropped += 1
                        out[i] = self._plausible(texts[i], items)
                    bar.update(len(chunk))
        return out

    def _plausible(self, text: str, rewrites: list[str]) -> list[str]:
        """The rewrites whose length is within :data:`LENGTH_RATIO` of the query's; the rest are counted in
        ``dropped``."""
        lo, hi = LENGTH_RATIO[self.level]
        n = max(len(text.strip()), 1)
        kept = [r for r in rewrites if lo <= len(r) / n <= hi]
        self.dropped += len(rewrites) - len(kept)
        return kept

    def settings(self) -> dict[str, Any]:
        assert self.backend is not None
        return {"backend": repr(self.backend), "ask": self.ask, "decoding": "greedy", "system": SYSTEM,
                "prompt": PROMPTS[self.level],
                "length_ratio": list(LENGTH_RATIO[self.level])}


@register_level("paraphrase")
class Paraphrase(_LLMLevel):
    """Level 4: the same question in other words and another structure, written by an LLM."""

    summary = "the same question reworded and restructured by an LLM backend (needs --backend)"


@register_level("rambling")
class Rambling(_LLMLevel):
    """Level 5: the question wrapped in irrelevant chatter, written by an LLM."""

    summary = "the question wrapped in irrelevant personal context and filler by an LLM backend (needs --backend)"
