"""Deterministic test backends for the serve tests (no model): registered as the backend kind ``test-echo``.

``NAME=test-echo:LABEL[,delay=S,fail=true,fail_after=K]`` answers ``"LABEL says: <last user message>"`` after
sleeping ``delay`` seconds; ``fail`` raises on every call (a dead backend), ``fail_after`` breaks a stream after
K deltas. Streams yield the answer word by word, so their concatenation equals the non-streamed answer.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from routerlab.llm.base import Backend, Completion, Decoding, Message, register_backend

GREEDY = Decoding()


@register_backend("test-echo")
class EchoBackend(Backend):
    options: ClassVar[dict[str, Any]] = {"delay": 0.0, "fail": False, "fail_after": -1}

    def _answer(self, messages: Sequence[Message], decoding: Decoding) -> list[str]:
        if self.spec.option("fail", False):
            raise ConnectionError(f"{self.spec.model} is down\nsecond line of a traceback-like message")
        last = next(m.content for m in reversed(messages) if m.role == "user")
        words = f"{self.spec.model} says: {last}".split(" ")
        return [w if i == 0 else " " + w for i, w in enumerate(words)][: decoding.max_tokens]

    def complete(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Completion:
        t0 = time.perf_counter()
        delay = float(self.spec.option("delay", 0.0))
        if delay:
            time.sleep(delay)
        words = self._answer(messages, decoding)
        tokens_in = sum(len(m.content.split()) for m in messages)
        finish = "length" if len(words) >= decoding.max_tokens else "stop"
        return Completion("".join(words), tokens_in, len(words), time.perf_counter() - t0, None, None,
                          finish_reason=finish)

    def stream(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Iterator[str]:
        words = self._answer(messages, decoding)
        fail_after = int(self.spec.option("fail_after", -1))
        for i, w in enumerate(words):
            if i == fail_after:
                raise ConnectionError("stream broke")
            yield w

    def count_tokens(self, text: str) -> int | None:
        return len(text.split(" ")) if text else 0
