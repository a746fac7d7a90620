"""Graders of final answers to maths questions: ``number`` (GSM8K-style) and ``math`` (MATH-style).

- ``number``: the reference's number (after GSM8K's ``####``, else read from the whole reference as from a
  reply) against the reply's final number: the first number on the last ``The answer is N`` (or ``Answer: N``)
  line (the prompt asks for one), else in the last ``\\boxed{}``, else the last number in the reply. Read
  through currency and units (``$1,250.50``, ``20 cm``, ``50%``, ``\\frac{3}{4}``, ``3/4``, a trailing period);
  compared numerically (relative tolerance 1e-6).
- ``math``: the final answer (the last ``\\boxed{}``, else the last ``The answer is ...`` line, else the last
  ``$...$``, else a reply of one short line) against the reference's (the last ``\\boxed{}`` of a MATH worked
  solution, else the whole reference: MGSM's bare numbers), equal by
  :func:`routerlab.llm.graders._mathsym.equivalent`. What plain strings and numbers decide is decided here; the
  rest goes to a persistent sympy worker process, killed and restarted when one comparison runs past
  ``timeout_s``: a hostile answer costs a failed grade, never the run. Needs sympy
  (``pip install 'routerlab[grade]'``), imported only in that worker.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import queue
import re
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import IO, Any

from routerlab.errors import UsageError
from routerlab.llm.graders import _mathsym, _prompts
from routerlab.llm.graders.base import Grade, Grader, Item, register_grader
from routerlab.llm.grading import last_boxed, numbers_equal, parse_number

__all__ = ["MathGrader", "NumberGrader", "final_math_answer", "read_number", "reference_math_answer",
           "reference_number", "reply_number"]

_NUMBER_IN_TEXT = re.compile(
    r"(?<![\w.])(-)?(?:[$€£]\s?)?(-)?(\d{1,3}(?:,\d{3})+(?!\d|,\d)|\d+)(\.\d+)?"
    r"(?:\s*/\s*(\d+(?:\.\d+)?)(?![\d.]))?")
_LATEX_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*(-?[\d.,]+)\s*\}\s*\{\s*(-?[\d.,]+)\s*\}")
_ANSWER_IS = re.compile(r"answer\s*(?:is\b\s*[:=]?|:)[\s*]*([^\n]*)", re.IGNORECASE)


def _plain(text: str) -> str:
    """LaTeX and typography a number may wear, taken off: ``\\frac{a}{b}`` as ``a/b``, ``\\$``, ``\\%``, ``{,}``,
    ``\\!``, a Unicode minus."""
    s = _LATEX_FRAC.sub(r"\1/\2", text)
    s = s.replace("{,}", ",").replace("\\!", "").replace("\\$", "$").replace("\\%", "%").replace("\u2212", "-")
    return s.replace("\\,", "").replace("\\text", " ").replace("\\mathrm", " ")


def _numbers(text: str) -> list[tuple[float, str]]:
    """Every number in ``text`` with its literal, in order (units, currency and percent signs around it ignored)."""
    out = []
    for m in _NUMBER_IN_TEXT.finditer(_plain(text)):
        literal = m.group(0).strip()
        body = m.group(3).replace(",", "") + (m.group(4) or "")
        value = parse_number(body)
        if value is None:
            continue
        if m.group(5) is not None:
            den = parse_number(m.group(5))
            if not den:
                continue
            value /= den
        if m.group(1) or m.group(2):
            value = -value
        out.append((value, literal))
    return out


def read_number(text: str) -> tuple[float, str] | None:
    """The first number in ``text`` (``$1,250.50``, ``20 cm``, ``-3``, ``3/4``, ``\\frac{3}{4}``, ``50%``) and
    its literal, or None."""
    found = _numbers(text)
    return found[0] if found else None


def reply_number(reply: str) -> tuple[float, str, str] | None:
    """A reply's final number, its literal and where it was read (``answer is``, ``boxed``, ``last number``)."""
    for m in reversed(list(_ANSWER_IS.finditer(reply))):
        found = read_number(m.group(1))
        if found is not None:
            return found[0], found[1], "answer is"
    boxed = last_boxed(reply)
    if boxed is not None:
        found = read_number(boxed)
        if found is not None:
            return found[0], found[1], "boxed"
    numbers = _numbers(reply)
    if numbers:
        return numbers[-1][0], numbers[-1][1], "last number"
    return None


def reference_number(reference: str) -> float | None:
    """The number of a reference: the first after GSM8K's last ``####``, else read as a reply's is."""
    if "####" in reference:
        found = read_number(reference.rpartition("####")[2])
        return None if found is None else found[0]
    got = reply_number(reference)
    return None if got is None else got[0]


@register_grader("number")
class NumberGrader(Grader):
    """The final number of a reply against the reference's number (module docstring)."""

    def instruction(self, item: Item) -> str:
        return _prompts.NUMBER

    def prompt(self, item: Item) -> str:
        return _prompts.ask_number(item)

    def grade(self, item: Item) -> Grade:
        gold = reference_number(item.reference)
        if gold is None:
            return Grade(0.0, self.name, "", f"no number in the reference {item.reference[-40:]!r}")
        got = reply_number(item.answer)
        if got is None:
            return Grade(0.0, self.name, "", "no number in the reply")
        value, literal, where = got
        ok = numbers_equal(value, gold)
        return Grade(1.0 if ok else 0.0, self.name, literal, f"{where}: {value:g} {'=' if ok else '!='} {gold:g}")


# ----------------------------------------------------------------------------------------------------------------
# math
# ----------------------------------------------------------------------------------------------------------------

_SHORT_REPLY = 40
"""A reply of one line this short with no marked answer is itself the answer (``28``, ``x = 5``)."""
_BOXED_BARE = re.compile(r"\\(?:boxed|fbox)\s+([^\s$]+)")
_MATH_SPANS = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$(?![\s$])([^$\n]+?)(?<![\s\\])\$|\\\((.+?)\\\)|\\\[(.+?)\\\]",
                         re.DOTALL)
"""Math spans: ``$$...$$``, ``\\(...\\)``, ``\\[...\\]`` and ``$...$`` on one line with no space just inside
its dollars (so the currency in ``costs $30 - $3 = $27`` is not read as one)."""


def _last_fbox(text: str) -> str | None:
    return last_boxed(text.replace("\\fbox{", "\\boxed{")) if "\\fbox{" in text else None


def final_math_answer(reply: str) -> tuple[str, str] | None:
    """A reply's final answer and where it was read: the last ``\\boxed{}`` (``\\fbox{}``, ``\\boxed 5``), else
    the answer on the last ``The answer is ...``/``Answer: ...`` line (:func:`_answer_text`), else the last math
    span ``$...$`` (or ``$$...$$``, ``\\(...\\)``, ``\\[...\\]``), else a whole reply of one short line; None
    without any."""
    boxed = last_boxed(reply) if "\\boxed{" in reply else _last_fbox(reply)
    if boxed is not None:
        return boxed, "boxed"
    bare = list(_BOXED_BARE.finditer(reply))
    if bare:
        return bare[-1].group(1), "boxed"
    said = list(_ANSWER_IS.finditer(reply))
    if said:
        text = _answer_text(said[-1].group(1))
        if text:
            return text, "answer is"
    spans = list(_MATH_SPANS.finditer(reply))
    if spans:
        last = spans[-1]
        return next(g for g in last.groups() if g is not None).strip(), "last $...$"
    short = reply.strip().rstrip(".").strip()
    if short and "\n" not in short and len(short) <= _SHORT_REPLY:
        return short, "whole reply"
    return None


_CLAUSE = re.compile(r",\s+(?=[A-Za-z]{2,}\b)|\s+(?:because|since|which|so|as|for|where|when)\b", re.IGNORECASE)
_NUMBER_THEN_WORDS = re.compile(r"(-?[\d.,/]+)\s+[A-Za-z][A-Za-z\s'-]*")


def _answer_text(line: str) -> str:
    """The answer in the rest of a ``The answer is ...`` line: its first math span if it has one (``$x = 5$
    apples`` gives ``x = 5``), else the text before a clause (a comma and a word, ``because``, ``since``, ...),
    and a number followed by plain words alone (``12 apples`` gives ``12``)."""
    text = line.strip().rstrip(".").strip()
    span = _MATH_SPANS.search(text)
    if span is not None:
        return next(g for g in span.groups() if g is not None).strip()
    text = _CLAUSE.split(text, maxsplit=1)[0].strip().rstrip(".").strip()
    m = _NUMBER_THEN_WORDS.fullmatch(text)
    return m.group(1) if m else text


def reference_math_answer(reference: str) -> str:
    """The reference's final answer: its last ``\\boxed{}`` (a MATH solution), else the whole reference."""
    boxed = last_boxed(reference)
    return boxed if boxed is not None else reference.strip()


class _Worker:
    """A persistent ``_mathsym`` worker process, asked one comparison at a time (JSON lines)."""

    def __init__(self, startup_timeout: float) -> None:
        script = Path(_mathsym.__file__)
        # -P: the script's folder (this package: base.py, text.py, ...) must not shadow other modules
        self.proc = subprocess.Popen([sys.executable, "-P", "-u", str(script)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, encoding="utf-8")
        self.lines: queue.Queue[str | None] = queue.Queue()
        assert self.proc.stdout is not None
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True).start()
        self._finalizer = weakref.finalize(self, _kill, self.proc)
        hello = self._read(startup_timeout)
        if hello is None or not hello.get("ready"):
            self.kill()
            why = "no answer" if hello is None else hello.get("error", "not ready")
            raise UsageError(f"grader 'math': its sympy worker did not start ({why}); "
                             "install sympy with: pip install 'routerlab[grade]'")

    @staticmethod
    def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
        """Moves the worker's lines to the queue until its end (or the pipe closed by a kill), then None."""
        with contextlib.suppress(ValueError, OSError):
            for line in stream:
                lines.put(line)
        lines.put(None)

    def _read(self, timeout: float) -> dict[str, Any] | None:
        try:
            line = self.lines.get(timeout=max(timeout, 0.001))
        except queue.Empty:
            return None
        if line is None:
            return None
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None

    def ask(self, answer: str, reference: str, timeout: float) -> dict[str, Any] | None:
        """The worker's verdict, or None when it did not answer within ``timeout`` seconds (or died)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({"a": answer, "b": reference}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        return self._read(timeout)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        self._finalizer()


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


@register_grader("math")
class MathGrader(Grader):
    """Equivalence of a reply's final answer and the reference's (module docstring); sympy in a worker process
    with a timeout per answer."""

    timeout_s: float = 5.0
    """Seconds one comparison may take in the sympy worker before it is killed and the answer graded 0."""
    startup_timeout_s: float = 60.0
    """Seconds the worker may take to start (import sympy)."""

    def __init__(self, arg: str | None = None, *, cache_dir: Path | None = None) -> None:
        super().__init__(arg, cache_dir=cache_dir)
        if importlib.util.find_spec("sympy") is None:
            raise UsageError("grader 'math' needs sympy: pip install 'routerlab[grade]' (or pip install sympy)")
        self._worker: _Worker | None = None
        self._lock = threading.Lock()
        self.restarts = 0
        """How many times the worker was killed (a timeout, or it ended without an answer) and so restarted."""

    def instruction(self, item: Item) -> str:
        return _prompts.MATH

    def prompt(self, item: Item) -> str:
        return _prompts.ask_math(item)

    def grade(self, item: Item) -> Grade:
        found = final_math_answer(item.answer)
        if found is None:
            return Grade(0.0, self.name, "", "no \\boxed{}, 'The answer is' or $...$ in the reply")
        answer, where = found
        reference = reference_math_answer(item.reference)
        try:
            equal, detail = _mathsym.equivalent(answer, reference, sympy_ok=False)
        except _mathsym.NeedSympy:
            equal, detail = self._ask_worker(answer, reference)
        except Exception as e:  # a bug in reading one answer costs that answer, never the run
            equal, detail = False, f"error: {type(e).__name__}: {e}"
        return Grade(1.0 if equal else 0.0, self.name, answer, f"{where}: {detail}")

    def _ask_worker(self, answer: str, reference: str) -> tuple[bool, str]:
        with self._lock:
            if self._worker is not None and not self._worker.alive:
                self._worker.kill()  # ended between two answers (killed from outside): not this answer's fault
                self._worker = None
            if self._worker is None:
                self._worker = _Worker(self.startup_timeout_s)
            start = time.perf_counter()
            verdict = self._worker.ask(answer, reference, self.timeout_s)
            if verdict is None:
                self._worker.kill()
                self._worker = None
                self.restarts += 1
                elapsed = time.perf_counter() - start
                if elapsed >= self.timeout_s * 0.9:
                    return False, f"timeout after {elapsed:.1f} s (sympy)"
                return False, "the sympy worker ended without an answer"
            return bool(verdict.get("equal")), str(verdict.get("detail", ""))

    @property
    def worker_pid(self) -> int | None:
        """The sympy worker's process id (None before the first comparison that needs it, or after a kill)."""
        return None if self._worker is None else self._worker.pid

    def close(self) -> None:
        with self._lock:
            if self._worker is not None:
                self._worker.kill()
                self._worker = None
