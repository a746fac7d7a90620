"""The grader contract: one answer to a question, graded against its reference, gives a :class:`Grade`.

A grader is found by name in one registry (``@register_grader("math")``; plugins under the entry-point group
``routerlab.graders``). A name may carry an argument after the first ``:``: ``judge:local:smollm2-135m`` is the
``judge`` grader with the backend spec ``local:smollm2-135m``. :func:`get_grader` builds one from its full name.

A grader reads the reference **as the source wrote it** (GSM8K's worked solution ending ``#### 20,000``, MATH's
solution with its ``\\boxed{}``, MBPP's list of ``assert`` lines, HumanEval's ``check`` function) and the answer as
the actor wrote it (a whole reply): what to take from each is the grader's business, so ``routerlab grade`` works
on raw upstream files. It also says how to ask the question so that its answer can be graded
(:meth:`Grader.prompt`): ``collect`` asks every question with its grader's prompt.

Which grader a question gets (:class:`GraderChoice`, in this order): the user's ``DATASET=NAME``, the user's
single ``NAME``, the question's ``metric`` metadata (LLMRouter's names, :data:`METRIC_GRADERS`), ``mc`` for a
question with options, ``short`` otherwise.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from routerlab._registry import Registry
from routerlab.errors import UsageError

__all__ = [
    "METRIC_GRADERS",
    "Grade",
    "Grader",
    "GraderChoice",
    "Item",
    "get_grader",
    "grader_class",
    "grader_names",
    "parse_grader_choice",
    "register_grader",
]


@dataclass(frozen=True)
class Item:
    """One answer to grade: the question as asked (without a grader's instruction), the actor's whole reply and
    the reference as the source wrote it. ``choices`` are a multiple-choice question's option texts (the
    reference is then the gold letter); ``extra`` holds other metadata a grader may read (``task_id``)."""

    question: str
    answer: str
    reference: str
    choices: tuple[str, ...] | None = None
    dataset: str = ""
    metric: str = ""
    query_id: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Grade:
    """A grader's verdict: ``score`` in [0, 1] (1/0 for a binary grader, a share or a scaled rating otherwise),
    the grader's full name, the answer as the grader read it and a short reason (``"timeout after 10 s"``,
    ``"f1 0.67"``, ``"no \\boxed{}"``)."""

    score: float
    grader: str
    extracted: str = ""
    detail: str = ""

    def __post_init__(self) -> None:
        s = self.score
        if isinstance(s, bool) or not isinstance(s, int | float) or not 0.0 <= s <= 1.0:
            raise ValueError(f"grader {self.grader}: a score lies in [0, 1], got {s!r}")
        object.__setattr__(self, "score", float(s))

    def to_record(self) -> dict[str, Any]:
        return {"score": self.score, "grader": self.grader, "extracted": self.extracted, "detail": self.detail}


class Grader(ABC):
    """Grades answers of one kind. Subclasses set ``kind`` (their registry name), implement :meth:`grade`, and
    may override :meth:`instruction` / :meth:`prompt` (how to ask), :meth:`grade_many` (a batch: the code grader
    runs sandboxes side by side, a judge batches its calls) and :meth:`close` (free a model or a pool).

    ``arg`` is the text after ``kind:`` in the full name (None without one; a grader that takes none refuses
    one); ``cache_dir`` is the LLM call cache a grader that calls a model uses."""

    kind: ClassVar[str] = ""
    takes_arg: ClassVar[bool] = False
    binary: ClassVar[bool] = True
    """Whether every score is 0 or 1 (False for shares, F1 and ratings)."""

    def __init__(self, arg: str | None = None, *, cache_dir: Path | None = None) -> None:
        if arg is not None and not self.takes_arg:
            raise UsageError(f"grader {self.kind!r} takes no argument, got {self.kind}:{arg}")
        if arg is None and self.takes_arg:
            raise UsageError(f"grader {self.kind!r} needs an argument: {self.kind}:ARG")
        self.arg = arg
        self.cache_dir = cache_dir

    @property
    def name(self) -> str:
        """The full name (``math``, ``judge:local:smollm2-135m``), recorded with every grade."""
        return self.kind if self.arg is None else f"{self.kind}:{self.arg}"

    def instruction(self, item: Item) -> str:
        """The line that asks for an answer this grader can read."""
        from routerlab.llm.graders._prompts import SHORT

        return SHORT

    def prompt(self, item: Item) -> str:
        """The user message that asks ``item``'s question (``collect`` sends it): the question, then the
        instruction."""
        return f"{item.question.rstrip()}\n\n{self.instruction(item)}"

    @abstractmethod
    def grade(self, item: Item) -> Grade:
        """The grade of one answer; a malformed answer is a low grade with its reason, never an exception."""

    def grade_many(self, items: Sequence[Item]) -> list[Grade]:
        """The grades of several answers, in order (one at a time unless a subclass does better)."""
        return [self.grade(item) for item in items]

    def close(self) -> None:  # noqa: B027 - most graders hold nothing
        """Free what the grader holds (a model, a worker pool); a closed grader is not used again."""

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


G = TypeVar("G", bound=type[Grader])
_REGISTRY: Registry[type[Grader]] = Registry("grader", package="routerlab.llm.graders", group="routerlab.graders")


def register_grader(kind: str) -> Callable[[G], G]:
    """Class decorator: ``@register_grader("math") class MathGrader(Grader)``."""
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", kind):
        raise ValueError(f"a grader name is lower-case letters, digits, '_' and '-', got {kind!r}")

    def decorate(cls: G) -> G:
        cls.kind = kind
        _REGISTRY.add(kind, cls)
        return cls

    return decorate


def grader_names() -> list[str]:
    """Every registered grader kind (``judge`` is one, used as ``judge:SPEC``)."""
    return _REGISTRY.names()


def grader_class(name: str) -> type[Grader]:
    """The class of a full grader name (``judge:local:x`` -> the judge class); unknown: a UsageError."""
    return _REGISTRY.get(name.partition(":")[0].strip())


def get_grader(name: str, *, cache_dir: Path | None = None) -> Grader:
    """A grader built from its full name, ``KIND`` or ``KIND:ARG``."""
    kind, colon, arg = name.strip().partition(":")
    if not kind:
        raise UsageError(f"grader {name!r}: write a grader name ({', '.join(grader_names())})")
    return grader_class(kind)(arg if colon else None, cache_dir=cache_dir)


METRIC_GRADERS: Mapping[str, str] = {
    "em_mc": "mc",
    "f1_score": "f1",
    "gsm8k": "number",
    "math": "math",
    "code_eval": "code",
    "commongen_coverage": "coverage",
}
"""LLMRouter's (and RouteProfile's) ``metric`` names, lower-cased, to the grader that scores them."""


@dataclass(frozen=True)
class GraderChoice:
    """The user's choice of graders: one ``default`` for every question and/or one per dataset."""

    default: str | None = None
    by_dataset: Mapping[str, str] = field(default_factory=dict)

    def name_for(self, dataset: str, metric: str = "", has_choices: bool = False) -> str:
        """The full grader name of one question (module docstring for the order)."""
        if dataset in self.by_dataset:
            return self.by_dataset[dataset]
        if self.default is not None:
            return self.default
        by_metric = METRIC_GRADERS.get(metric.strip().lower())
        if by_metric is not None:
            return by_metric
        return "mc" if has_choices else "short"

    def describe(self) -> dict[str, Any]:
        return {"default": self.default, "by_dataset": dict(self.by_dataset)}


_MAPPING_RE = re.compile(r"^\s*([^=:,\s][^=:,]*)=\s*([a-z][a-z0-9_-]*)(?::|\s*$)")


def parse_grader_choice(values: str | Sequence[str] | None) -> GraderChoice:
    """``--grader`` values: ``NAME`` (every question) or ``DATASET=NAME`` pairs, comma-separated or repeated.

    A judge's spec holds commas and ``key=value`` options (``judge:openai:m@url,key_env=K,template=math``), so
    a grader that takes an argument runs to the end of its ``--grader`` value: give it last, or in a ``--grader``
    of its own. Before one, a comma part starts a new pair when it reads ``DATASET=KNOWN_GRADER``, and any other
    part continues the one before. Every name is checked against the registry (a judge's spec is checked when
    it is built)."""
    if values is None:
        return GraderChoice()
    texts = [values] if isinstance(values, str) else list(values)
    known = set(grader_names())
    chunks: list[str] = []
    for text in texts:
        started = in_spec = False
        for part in text.split(","):
            if not part.strip():
                raise UsageError(f"--grader {text!r}: an empty grader name; write NAME or DATASET=NAME,...")
            m = _MAPPING_RE.match(part)
            new_pair = not in_spec and m is not None and m.group(2) in known
            if not started or new_pair:
                chunks.append(part)
                started = True
                kind = (part[m.start(2):] if new_pair and m is not None else part).partition(":")[0].strip()
                in_spec = kind in known and grader_class(kind).takes_arg
            else:
                chunks[-1] += "," + part
    default: str | None = None
    by_dataset: dict[str, str] = {}
    for chunk in chunks:
        chunk = chunk.strip()
        m = _MAPPING_RE.match(chunk)
        if m is not None and m.group(2) in known:
            dataset, name = m.group(1).strip(), chunk[m.start(2):].strip()
            if dataset in by_dataset:
                raise UsageError(f"--grader: dataset {dataset!r} is given two graders")
            _check_name(name)
            by_dataset[dataset] = name
        else:
            if "=" in chunk.partition(":")[0]:
                dataset, _, rest = chunk.partition("=")
                name = rest.partition(":")[0].strip()
                if not dataset.strip() or not name:
                    raise UsageError(f"--grader {chunk!r}: write DATASET=NAME, both named (e.g. gsm8k=number)")
                raise UsageError(f"--grader {chunk!r}: unknown grader {name!r}; known graders: "
                                 f"{', '.join(sorted(known))}")
            _check_name(chunk)
            if default is not None:
                raise UsageError(f"--grader: two graders for every question ({default} and {chunk}); "
                                 "give one, or DATASET=NAME pairs")
            default = chunk
    return GraderChoice(default, by_dataset)


def _check_name(name: str) -> None:
    """A known grader kind, with an argument only where the grader takes one (``f1,x`` is refused here)."""
    cls = grader_class(name)
    if not cls.takes_arg and name != cls.kind:
        raise UsageError(f"--grader {name!r}: grader {cls.kind!r} takes no argument or option")
