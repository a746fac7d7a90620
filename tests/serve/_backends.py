"""Deterministic test backends for the serve tests (no model): registered as the backend kind ``test-echo``.

``NAME=test-echo:LABEL[,delay=S,fail=true,fail_after=K,word_delay=S,hang=true,context=N,repeat=R]`` answers
``"LABEL says: <last user message>"`` after sleeping ``delay`` seconds; ``fail`` raises on every call (a dead
backend), ``fail_after`` breaks a stream after K deltas. Streams yield the answer word by word, so their
concatenation equals the non-streamed answer. ``word_delay`` sleeps before each word (a slow generation; a
cancellable call stops between words), ``hang`` blocks every call until :func:`release_hangs` (a backend that
never answers and ignores cancellation, like a dead connection), and ``context`` gives the model a context
window of N tokens, a token being a space-separated word of the chat; ``repeat`` says the answer R times over
(a long answer to a short prompt).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from routerlab.llm.base import Backend, Completion, Decoding, Message, register_backend

GREEDY = Decoding()
_RELEASE = threading.Event()


def release_hangs() -> None:
    """Let every hanging call return (test teardown): their worker threads end."""
    _RELEASE.set()


def reset_hangs() -> None:
    """Make ``hang=true`` backends hang again."""
    _RELEASE.clear()


@register_backend("test-echo")
class EchoBackend(Backend):
    options: ClassVar[dict[str, Any]] = {"delay": 0.0, "fail": False, "fail_after": -1, "word_delay": 0.0,
                                         "hang": False, "context": 0, "repeat": 1}

    def _answer(self, messages: Sequence[Message], decoding: Decoding) -> list[str]:
        if self.spec.option("fail", False):
            raise ConnectionError(f"{self.spec.model} is down\nsecond line of a traceback-like message")
        if self.spec.option("hang", False):
            _RELEASE.wait(120)
        last = next(m.content for m in reversed(messages) if m.role == "user")
        words = f"{self.spec.model} says: {last}".split(" ") * int(self.spec.option("repeat", 1))
        return [w if i == 0 else " " + w for i, w in enumerate(words)][: decoding.max_tokens]

    def complete(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Completion:
        return self.complete_cancellable(messages, decoding, threading.Event())

    def complete_cancellable(self, messages: Sequence[Message], decoding: Decoding,
                             cancel: threading.Event) -> Completion:
        t0 = time.perf_counter()
        delay = float(self.spec.option("delay", 0.0))
        if delay:
            time.sleep(delay)
        words = self._answer(messages, decoding)
        pause = float(self.spec.option("word_delay", 0.0))
        if pause:
            done = []
            for w in words:
                if cancel.wait(pause):
                    break
                done.append(w)
            words = done
        tokens_in = sum(len(m.content.split()) for m in messages)
        finish = "length" if len(words) >= decoding.max_tokens else "stop"
        return Completion("".join(words), tokens_in, len(words), time.perf_counter() - t0, None, None,
                          finish_reason=finish)

    def stream(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Iterator[str]:
        words = self._answer(messages, decoding)
        fail_after = int(self.spec.option("fail_after", -1))
        pause = float(self.spec.option("word_delay", 0.0))
        for i, w in enumerate(words):
            if i == fail_after:
                raise ConnectionError("stream broke")
            if pause:
                time.sleep(pause)
            yield w

    def count_tokens(self, text: str) -> int | None:
        return len(text.split(" ")) if text else 0

    def context_window(self) -> int | None:
        return int(self.spec.option("context", 0)) or None

    def prompt_tokens(self, messages: Sequence[Message], *, limit: int | None = None) -> int | None:
        return sum(len(m.content.split(" ")) for m in messages)
