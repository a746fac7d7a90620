"""``judge:SPEC``: an LLM grades the answer, with a prompt made for the question's kind.

``SPEC`` is a backend spec without a name (``local:smollm2-135m``, ``local:/models/x.gguf,threads=1``,
``openai:MODEL@URL,key_env=VAR``) plus judge options, taken out before the backend sees the spec:

- ``template=auto|qa|math|code|open|pair`` (default ``auto``): which prompt. ``auto`` reads the item: a second
  answer (``extra["answer_b"]``) -> ``pair``; else the ``metric`` (:data:`METRIC_TEMPLATES`: ``em_mc``,
  ``f1_score`` -> ``qa``; ``gsm8k``, ``math`` -> ``math``; ``code_eval`` -> ``code``; ``commongen_coverage`` ->
  ``open``); else the dataset name (:data:`DATASET_TEMPLATES`, e.g. ``gsm8k``/``mgsm``/``math`` -> ``math``,
  ``mbpp``/``humaneval`` -> ``code``, ``alpaca``/``magpie``/``mt_bench``/``commongen`` -> ``open``); else ``qa``.
- ``verdict=auto|logits|generate`` (default ``auto``): how a yes/no (or A/B/tie) verdict is read. ``logits``
  reads the next-token logits of the verdict letters after the prompt (one forward pass; local models only:
  robust for small models, which often wander when they generate); ``generate`` generates a reply and parses it
  strictly; ``auto`` takes logits where the backend gives them. A 0-10 rating is always generated.
- ``swap=true|false`` (default false): ask a yes/no question by logits twice, the second time with its options the
  other way round (A. No, B. Yes), and take yes when the mean probability of yes over both orders is above 0.5:
  a judge that prefers a letter whatever it reads (SmolLM2-135M says A to almost everything) then no longer
  passes that preference off as a verdict. A pair is asked twice too, the second time with the two answers
  exchanged (by logits or generated): the verdict is the letter with the higher mean probability over both orders
  (a tie when A and B come out equal), or for generated verdicts the common one (a tie when the two orders
  disagree, no verdict when either has none). Twice the calls.
- ``max_tokens=N`` (default 128): the longest generated verdict.

The templates (one user message each; the texts are :data:`PROMPTS`):

- ``qa`` (binary): the question, the reference and the answer; only the final answer counts, formatting and
  reasoning do not, and the reference is taken as right (RouterWorld's judge guidelines, appendix H).
- ``math`` (binary): are the final answers equal as mathematical values (1/2 = 0.5 = ``\\frac{1}{2}``)?
- ``code`` (binary): does the program do what the task asks and pass the tests shown?
- ``open`` (graded): a 0-10 rating against the reference as a guide, RouterXBench's judge scale (appendix B.1);
  the score is rating / 10, read from ``[[N]]`` (else ``Rating: N``) in the reply.
- ``pair`` (graded): which of two answers (``answer`` and ``extra["answer_b"]``) is better: A -> 1, B -> 0, a tie
  -> 0.5. The order shown is the item's; ``swap=true`` also asks it the other way round.

Generated verdicts are parsed strictly: ``Verdict: yes`` / ``Verdict: no`` (the last one wins), ``[[yes]]``, or a
reply that is just ``yes`` or ``no``; ``[[A]]`` / ``Verdict: B`` for a pair; ``[[7]]`` for a rating. A reply
without one is a grade 0 whose detail starts ``no verdict`` (:func:`verdict_of` tells it apart from a real 0).
Every call goes through the LLM call cache (the raw verdict, reply or logits, is stored there): regrading costs
nothing. The backend is loaded on first use, once, and closed by :meth:`JudgeGrader.close`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from routerlab.errors import UsageError
from routerlab.llm.base import Backend, BackendSpec, Decoding, Message, backend_class, load_backend, parse_backend_spec
from routerlab.llm.graders import _prompts
from routerlab.llm.graders.base import Grade, Grader, Item, register_grader
from routerlab.llm.grading import LETTERS

TEMPLATES = ("qa", "math", "code", "open", "pair")
VERDICTS = ("auto", "logits", "generate")
JUDGE_OPTIONS: Mapping[str, Any] = {"template": "auto", "verdict": "auto", "max_tokens": 128, "swap": False}
"""The options a judge spec may carry besides its backend's (name -> default)."""

NO_VERDICT = "no verdict"

METRIC_TEMPLATES: Mapping[str, str] = {
    "em_mc": "qa", "f1_score": "qa", "exact_match": "qa", "gsm8k": "math", "math": "math", "code_eval": "code",
    "commongen_coverage": "open",
}
"""A question's ``metric`` (lower-cased; LLMRouter's names) -> the template ``template=auto`` gives it."""

DATASET_TEMPLATES: tuple[tuple[str, str], ...] = (
    ("gsm8k", "math"), ("mgsm", "math"), ("math", "math"), ("mbpp", "code"), ("humaneval", "code"),
    ("human_eval", "code"), ("code", "code"), ("commongen", "open"), ("alpaca", "open"), ("magpie", "open"),
    ("mt_bench", "open"), ("mt-bench", "open"), ("arena", "open"),
)
"""Without a known metric: the first of these substrings found in the lower-cased dataset name -> its template."""

_BINARY_LETTERS = ("A", "B")
_PAIR_LETTERS = ("A", "B", "C")

_INTRO = {
    "qa": "Decide whether an answer to a question is correct by comparing it with the reference answer.",
    "math": "Decide whether the final answer of a solution to a math problem equals the reference answer.",
    "code": "Decide whether a program solves a programming task.",
    "open": "Rate the quality of an answer to a request on a scale from 0 to 10, with the reference answer as "
            "an example of a good answer.",
    "pair": "Compare two answers to the same request and decide which one is better.",
}
_RULES = {
    "qa": "Only the final answer counts: ignore its formatting, its wording and any reasoning before it. Take the "
          "reference as correct without checking it. An answer that gives several different final answers, or "
          "none, is incorrect.",
    "math": "Compare only the final answers, as mathematical values: 1/2, 0.5 and \\frac{1}{2} are equal, and so "
            "are answers that differ only in units, thousands separators or LaTeX formatting. The steps do not "
            "matter. Take the reference as correct without checking it; its final answer is its last result "
            "(after ####, or in \\boxed{}).",
    "code": "The program must do what the task asks and pass the tests shown (or behave like the reference "
            "solution). A program that would not run, solves another task or only repeats the tests is "
            "incorrect. Style and comments do not matter.",
    "open": "Rate how helpful, correct, relevant and complete the answer is for the request. It need not use the "
            "reference's words, only be as good. 0: useless or wrong; 5: partly right or incomplete; 10: as good "
            "as the reference or better. Length alone is no merit.",
    "pair": "Judge helpfulness, correctness, relevance and completeness for the request. Do not let the order in "
            "which the answers are shown, or their length alone, decide.",
}
_YES_NO_QUESTION = {
    "qa": ("Is the answer to grade correct?", "Yes, its final answer agrees with the reference."),
    "math": ("Is the final answer of the solution to grade equal to the reference's?", "Yes, they are equal."),
    "code": ("Does the program solve the task?", "Yes."),
}
_ASK_LETTERS = {
    **{t: f"{q}\nA. {yes}\nB. No.\n\nAnswer with the letter A or B." for t, (q, yes) in _YES_NO_QUESTION.items()},
    "pair": "Which answer is better?\nA. Answer A.\nB. Answer B.\nC. They are equally good.\n\n"
            "Answer with the letter A, B or C.",
}
_ASK_SWAPPED = {t: f"{q}\nA. No.\nB. {yes}\n\nAnswer with the letter A or B."
                for t, (q, yes) in _YES_NO_QUESTION.items()}
"""``swap=true``: the yes/no question asked a second time with the options in the other order."""
_ASK_TEXT = {
    "qa": "Is the answer to grade correct? Reply with one line: Verdict: yes, or Verdict: no.",
    "math": "Is the final answer of the solution to grade equal to the reference's? Reply with one line: "
            "Verdict: yes, or Verdict: no.",
    "code": "Does the program solve the task? Reply with one line: Verdict: yes, or Verdict: no.",
    "open": "Reply with one sentence of reasons, then the rating in double brackets on the last line, for "
            "example: Rating: [[6]]",
    "pair": "Reply with one line: Verdict: [[A]] if answer A is better, [[B]] if answer B is better, [[C]] for a "
            "tie.",
}
_HEADINGS = {
    "qa": ("Question", "Reference answer", "Answer to grade"),
    "math": ("Problem", "Reference solution", "Solution to grade"),
    "code": ("Task", "Tests or reference solution", "Program to grade"),
    "open": ("Request", "Reference answer", "Answer to rate"),
    "pair": ("Request", "Reference answer", "Answer A"),
}
PROMPTS: Mapping[str, Mapping[str, Any]] = {
    t: {"intro": _INTRO[t], "rules": _RULES[t], "headings": _HEADINGS[t], "ask_letters": _ASK_LETTERS.get(t),
        "ask_letters_swapped": _ASK_SWAPPED.get(t),
        "ask_text": _ASK_TEXT[t]} for t in TEMPLATES
}
"""Every template's texts, for reading and for provenance (they are part of every judge call's cache key)."""


# ------------------------------------------------------------------------------------------ the judge spec
def split_judge_spec(arg: str) -> tuple[BackendSpec, dict[str, Any]]:
    """``KIND:MODEL[,key=value...]`` -> (the backend spec, the judge options), every error one UsageError line.
    ``;`` may stand for ``,`` (``--grader judge:local:m;template=math`` keeps ``template=math`` from reading as
    a ``DATASET=GRADER`` pair)."""
    raw = arg.strip()
    where = f"grader judge:{raw}"
    head, *parts = raw.replace(";", ",").split(",")
    kept: list[str] = [head]
    options: dict[str, Any] = {}
    for part in parts:
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if key not in JUDGE_OPTIONS:
            kept.append(part)
            continue
        if not eq or not value:
            raise UsageError(f"{where}: bad option {part.strip()!r}; write {key}=VALUE")
        if key in options:
            raise UsageError(f"{where}: option {key!r} given twice")
        options[key] = value
    template = str(options.get("template", JUDGE_OPTIONS["template"]))
    if template not in ("auto", *TEMPLATES):
        raise UsageError(f"{where}: template must be one of auto, {', '.join(TEMPLATES)}, got {template!r}")
    verdict = str(options.get("verdict", JUDGE_OPTIONS["verdict"]))
    if verdict not in VERDICTS:
        raise UsageError(f"{where}: verdict must be one of {', '.join(VERDICTS)}, got {verdict!r}")
    swap = str(options.get("swap", "false")).lower()
    if swap not in ("true", "false"):
        raise UsageError(f"{where}: swap must be true or false, got {swap!r}")
    tokens = str(options.get("max_tokens", JUDGE_OPTIONS["max_tokens"]))
    if not tokens.isdigit() or not 1 <= int(tokens) <= 32768:
        raise UsageError(f"{where}: max_tokens must be an integer in 1..32768, got {tokens!r}")
    try:
        spec = parse_backend_spec(",".join(kept), option="grader judge")
    except UsageError as exc:
        text = str(exc)
        if "unknown option" in text:
            text += f" (judge options: {', '.join(JUDGE_OPTIONS)})"
        raise UsageError(text) from None
    if verdict == "logits" and not backend_class(spec.kind).supports_choice_scores:
        raise UsageError(f"{where}: verdict=logits needs a backend that gives option-letter logits (a local "
                         f"model); {spec.kind} cannot: use verdict=generate or auto")
    return spec, {"template": template, "verdict": verdict, "max_tokens": int(tokens), "swap": swap == "true"}


def template_for(item: Item, forced: str = "auto") -> str:
    """The template an item gets (module docstring): the forced one, else pair / metric / dataset / ``qa``."""
    if forced != "auto":
        return forced
    if item.extra.get("answer_b", "").strip():
        return "pair"
    by_metric = METRIC_TEMPLATES.get(item.metric.strip().lower())
    if by_metric is not None:
        return by_metric
    dataset = item.dataset.strip().lower()
    for pattern, template in DATASET_TEMPLATES:
        if pattern in dataset:
            return template
    return "qa"


def _question_text(item: Item) -> str:
    """The question as the actor saw it: its text, and its options as ``A. text`` lines."""
    text = item.question.strip()
    if item.choices:
        text += "\n\n" + "\n".join(f"{letter}. {c}" for letter, c in zip(LETTERS, item.choices, strict=False))
    return text


def _reference_text(item: Item) -> str:
    """The reference as a judge reads it: a gold option letter with its option's text (``B. apple``)."""
    ref = item.reference.strip()
    if item.choices and len(ref) == 1 and ref.upper() in LETTERS[: len(item.choices)]:
        return f"{ref.upper()}. {item.choices[LETTERS.index(ref.upper())]}"
    return ref


def judge_prompt(item: Item, template: str, by_letters: bool, swapped: bool = False) -> str:
    """The judge's user message for ``item`` with ``template``; ``by_letters``: asking for a verdict letter
    (read from logits) rather than a generated verdict line; ``swapped``: a yes/no question's options in the
    other order (A. No, B. Yes)."""
    intro, rules = _INTRO[template], _RULES[template]
    q_head, ref_head, ans_head = _HEADINGS[template]
    reference = _reference_text(item)
    blocks = [intro, f"{q_head}:\n{_question_text(item)}"]
    if reference:
        blocks.append(f"{ref_head}:\n{reference}")
    elif template in ("open", "pair"):
        blocks.append(f"{ref_head}: none given.")
    blocks.append(f"{ans_head}:\n{item.answer.strip()}")
    if template == "pair":
        blocks.append(f"Answer B:\n{item.extra.get('answer_b', '').strip()}")
    blocks.append(f"Rules: {rules}")
    if by_letters and swapped and template in _ASK_SWAPPED:
        blocks.append(_ASK_SWAPPED[template])
    else:
        blocks.append(_ASK_LETTERS[template] if by_letters and template in _ASK_LETTERS else _ASK_TEXT[template])
    return "\n\n".join(blocks)


# ------------------------------------------------------------------------------------------ reading verdicts
_YES_NO = re.compile(r"verdict\s*[:=]\s*[*_`\[\(\"']*\s*(yes|no)\b", re.IGNORECASE)
_BRACKET_YES_NO = re.compile(r"\[\[\s*(yes|no)\s*\]\]", re.IGNORECASE)
_BARE_YES_NO = re.compile(r"^[\s*_`\"'.]*(yes|no)[\s*_`\"'.!]*$", re.IGNORECASE)
_PAIR = re.compile(r"\[\[\s*([ABC])\s*\]\]|verdict\s*[:=]\s*[*_`\"']*\s*\[{0,2}([ABC])\b", re.IGNORECASE)
_RATING = re.compile(r"\[\[\s*(\d+(?:\.\d+)?)\s*\]\]")
_RATING_LINE = re.compile(r"rating\s*[:=]\s*[*_`\"']*\s*(\d+(?:\.\d+)?)\s*(?:/\s*10)?\b", re.IGNORECASE)


def parse_binary(reply: str) -> bool | None:
    """A generated yes/no verdict: the last ``Verdict: yes|no``, else the last ``[[yes]]``/``[[no]]``, else a
    reply that is only ``yes`` or ``no``; None when there is none."""
    for pattern in (_YES_NO, _BRACKET_YES_NO):
        found: list[str] = pattern.findall(reply)
        if found:
            return found[-1].lower() == "yes"
    m = _BARE_YES_NO.match(reply)
    return None if m is None else m.group(1).lower() == "yes"


def parse_pair(reply: str) -> str | None:
    """A generated pairwise verdict, ``A``, ``B`` or ``C`` (a tie): the last ``[[X]]`` or ``Verdict: X``."""
    found = [a or b for a, b in _PAIR.findall(reply)]
    return found[-1].upper() if found else None


def parse_rating(reply: str) -> float | None:
    """A generated 0-10 rating: the last ``[[N]]``, else the last ``Rating: N``; None when there is none or it
    lies outside 0..10."""
    found = _RATING.findall(reply) or _RATING_LINE.findall(reply)
    if not found:
        return None
    value = float(found[-1])
    return value if 0.0 <= value <= 10.0 else None


def verdict_of(grade: Grade) -> float | None:
    """The judge's score of a grade, or None when the judge gave no verdict (an unparseable reply, a pair
    without its second answer): ``judge-check`` counts those rows apart instead of reading them as 0."""
    return None if grade.detail.startswith(NO_VERDICT) else grade.score


# ----------------------------------------------------------------------------------------------- the grader
@dataclass(frozen=True)
class _Call:
    """How one item is judged: its template, whether by verdict-letter logits, and the chat."""

    template: str
    by_letters: bool
    messages: tuple[Message, ...]
    swapped: tuple[Message, ...] | None = None  # the yes/no question with its options the other way round


@register_grader("judge")
class JudgeGrader(Grader):
    """An LLM judge with per-task prompts (module docstring); ``judge:SPEC``."""

    takes_arg = True
    binary = False

    def __init__(self, arg: str | None = None, *, cache_dir: Path | None = None) -> None:
        super().__init__(arg, cache_dir=cache_dir)
        assert self.arg is not None  # takes_arg: the base refuses a judge without a spec
        self.spec, options = split_judge_spec(self.arg)
        self.template: str = options["template"]
        self.verdict: str = options["verdict"]
        self.decoding = Decoding(max_tokens=options["max_tokens"])
        self.swap: bool = options["swap"]
        self._backend: Backend | None = None

    @property
    def backend(self) -> Backend:
        """The judge's model, loaded through the call cache on first use."""
        if self._backend is None:
            self._backend = load_backend(self.spec, cache_dir=self.cache_dir)
        return self._backend

    def _uses_logits(self) -> bool:
        if self.verdict == "generate":
            return False
        return self.verdict == "logits" or backend_class(self.spec.kind).supports_choice_scores

    def call_for(self, item: Item) -> _Call:
        """The template, verdict reading and chat of one item (no model is loaded)."""
        template = template_for(item, self.template)
        by_letters = template != "open" and self._uses_logits()
        swapped = None
        if self.swap and template == "pair":
            other = replace(item, answer=item.extra.get("answer_b", ""), extra={**item.extra, "answer_b": item.answer})
            swapped = (Message("user", judge_prompt(other, template, by_letters)),)
        elif by_letters and self.swap and template in _ASK_SWAPPED:
            swapped = (Message("user", judge_prompt(item, template, True, swapped=True)),)
        return _Call(template, by_letters, (Message("user", judge_prompt(item, template, by_letters)),), swapped)

    def prompt(self, item: Item) -> str:
        """How ``collect`` asks a question this judge grades: as the grader of its kind would (math in
        ``\\boxed{}``, GSM8K with a final number, code in a code block, options lettered), an open request as
        it is."""
        template = template_for(item, self.template)
        if template == "math":
            return _prompts.ask_number(item) if item.metric.strip().lower() == "gsm8k" else _prompts.ask_math(item)
        if template == "code":
            return _prompts.ask_code(item)
        if template in ("open", "pair"):
            return item.question.strip()
        if item.choices:
            return f"{_question_text(item)}\n\n{_prompts.MC}"
        return super().prompt(item)

    def grade(self, item: Item) -> Grade:
        return self.grade_many([item])[0]

    def grade_many(self, items: Sequence[Item]) -> list[Grade]:
        """Grades in order; the calls go in batches: one of verdict-letter scores per letter set, one of
        generations."""
        calls = [self.call_for(item) for item in items]
        out: list[Grade | None] = [None] * len(items)
        for i, (item, call) in enumerate(zip(items, calls, strict=True)):
            if call.template == "pair" and not item.extra.get("answer_b", "").strip():
                out[i] = Grade(0.0, self.name, "", f"{NO_VERDICT}: a pair needs the second answer in "
                                                    "extra['answer_b']")
        todo = [i for i in range(len(items)) if out[i] is None]
        for letters in (_BINARY_LETTERS, _PAIR_LETTERS):
            rows = [i for i in todo if calls[i].by_letters and
                    (calls[i].template == "pair") == (letters == _PAIR_LETTERS)]
            if not rows:
                continue
            scores = self.backend.choice_scores_batch([calls[i].messages for i in rows], letters)
            first = {i: sc.probabilities() for i, sc in zip(rows, scores, strict=True)}
            for i, probs in first.items():
                out[i] = self._from_letters(calls[i].template, letters, probs)
            both = [i for i in rows if calls[i].swapped is not None]
            if both:
                scores = self.backend.choice_scores_batch([calls[i].swapped or () for i in both], letters)
                for i, sc in zip(both, scores, strict=True):
                    if calls[i].template == "pair":
                        out[i] = self._pair_both_orders(first[i], sc.probabilities())
                        continue
                    p_yes = (first[i][0] + sc.probabilities()[1]) / 2.0  # swapped: B is yes
                    out[i] = self._yes_no(p_yes > 0.5, f"by logits, both orders (p_yes={p_yes:.2f})")
        rows = [i for i in todo if not calls[i].by_letters]
        if rows:
            replies = self.backend.complete_batch([calls[i].messages for i in rows], self.decoding)
            for i, reply in zip(rows, replies, strict=True):
                out[i] = self._from_text(calls[i].template, reply.text)
            both = [i for i in rows if calls[i].swapped is not None]
            if both:
                replies = self.backend.complete_batch([calls[i].swapped or () for i in both], self.decoding)
                for i, reply in zip(both, replies, strict=True):
                    out[i] = self._pair_both_texts(out[i], reply.text)
        return [g for g in out if g is not None]

    def _from_letters(self, template: str, letters: Sequence[str], probs: Sequence[float]) -> Grade:
        best = max(range(len(letters)), key=lambda k: (probs[k], -k))
        p = f"p={probs[best]:.2f}"
        if template == "pair":
            return Grade(_PAIR_SCORE[letters[best]], self.name, letters[best], f"verdict {letters[best]} by logits "
                                                                                f"({p})")
        return self._yes_no(letters[best] == "A", f"by logits (p_yes={probs[0]:.2f})")

    def _pair_both_orders(self, first: Sequence[float], swapped: Sequence[float]) -> Grade:
        """A pair judged by logits in both orders: the mean probability of each verdict, the swapped call's A and B
        read back as B and A; equal A and B is a tie."""
        a, b, tie = (first[0] + swapped[1]) / 2.0, (first[1] + swapped[0]) / 2.0, (first[2] + swapped[2]) / 2.0
        letter = "C" if math.isclose(a, b, abs_tol=1e-9) or tie >= max(a, b) else ("A" if a > b else "B")
        return Grade(_PAIR_SCORE[letter], self.name, letter,
                     f"verdict {letter} by logits, both orders (p_A={a:.2f}, p_B={b:.2f}, p_tie={tie:.2f})")

    def _pair_both_texts(self, first: Grade | None, reply: str) -> Grade:
        """A pair's generated verdicts in both orders: the common verdict, a tie when they disagree."""
        second = parse_pair(reply)
        if first is None or verdict_of(first) is None or second is None:
            snippet = " ".join(reply.split())[:80]
            return Grade(0.0, self.name, "", f"{NO_VERDICT} in both orders: {snippet!r}")
        back = {"A": "B", "B": "A", "C": "C"}[second]
        letter = first.extracted if first.extracted == back else "C"
        how = "both orders agree" if letter == back else f"the orders disagree ({first.extracted}, then {back})"
        return Grade(_PAIR_SCORE[letter], self.name, letter, f"verdict {letter}, {how}")

    def _yes_no(self, yes: bool, how: str) -> Grade:
        return Grade(1.0 if yes else 0.0, self.name, "yes" if yes else "no", f"verdict {'yes' if yes else 'no'} {how}")

    def _from_text(self, template: str, reply: str) -> Grade:
        snippet = " ".join(reply.split())[:80]
        if template == "open":
            rating = parse_rating(reply)
            if rating is None:
                return Grade(0.0, self.name, "", f"{NO_VERDICT}: {snippet!r}")
            return Grade(rating / 10.0, self.name, _num(rating), f"rating {_num(rating)}/10")
        if template == "pair":
            letter = parse_pair(reply)
            if letter is None:
                return Grade(0.0, self.name, "", f"{NO_VERDICT}: {snippet!r}")
            return Grade(_PAIR_SCORE[letter], self.name, letter, f"verdict {letter}")
        yes = parse_binary(reply)
        if yes is None:
            return Grade(0.0, self.name, "", f"{NO_VERDICT}: {snippet!r}")
        return Grade(1.0 if yes else 0.0, self.name, "yes" if yes else "no", f"verdict {'yes' if yes else 'no'}")

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None


_PAIR_SCORE = {"A": 1.0, "B": 0.0, "C": 0.5}



def _num(value: float) -> str:
    return str(int(value)) if math.isclose(value, round(value)) else f"{value:g}"
