"""Questions with gold answers, read from a routing table's query metadata or a JSON-lines file.

``routerlab collect`` runs actors on these and grades each answer with the question's grader
(:mod:`routerlab.llm.graders`). Two sources:

- **A routing table** (a saved directory, or an importer's output in Python). The reference is the first
  non-empty of the query metadata columns ``answer`` (MMLU-Pro), ``ground_truth`` (LLMRouter's query files
  joined by the ``routerdc`` importer) or ``gold``, kept as the source wrote it (GSM8K's worked solution, MATH's
  solution with its ``\\boxed{}``, MBPP's list of ``assert`` lines, HumanEval's ``check``): the grader takes what
  it needs. The options are ``options`` or ``choices`` (JSON text: a list of option texts, or ``{"text": [...],
  "label"|"labels": [...]}``), read only for questions whose ``metric`` is empty or ``em_mc`` (LLMRouter's MBPP
  rows carry their tests in ``choices``: tests, not options). A question with options is multiple choice: its
  gold must be one of the labels (ARC's ``1``-``4`` read as A-D) or an option letter, and the options are always
  shown lettered A, B, C, ... The ``metric`` and ``task_id`` columns are kept. Skipped and counted by reason are
  only the questions no grader can grade: no reference, options that are not a list of texts (or more than
  ten), a gold answer that is not one of the options' letters or labels, ``em_mc`` without options, and the
  ``mc`` grader chosen for a question without options.
- **A JSON-lines file**, one question per line: ``{"id", "question", "choices"?, "answer", "dataset"?,
  "split"?, "metric"?, "grader"?, "task_id"?}``. ``choices`` is a list of option texts (or the ``{"text",
  "label"}`` form above); ``answer`` is then the option's letter or its exact text, else the reference as
  written. ``id`` defaults to ``line<N>``, ``dataset`` to the file's stem. Here every problem is an error
  naming the file, line and field: a file written for collect should not lose questions silently.

Each question carries its grader's full name (:class:`~routerlab.llm.graders.GraderChoice`): the user's
``DATASET=NAME``, the user's ``NAME``, a JSON line's own ``grader``, the ``metric`` (``METRIC_GRADERS``), ``mc``
with options, ``short`` otherwise. Its **kind** is ``mc`` when it has options and ``generated`` otherwise
(``--kind``; ``short``, the older name, still means ``generated``).

``limit`` takes a seeded sample stratified by dataset (:func:`stratified_order`): the first ``limit`` of one
seeded order in which every dataset keeps its share within one question at every length, so the same seed
gives the same questions and a larger limit keeps every question of a smaller one (a rerun with more
questions reuses the call cache for the ones already asked). The questions keep their source order.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from routerlab.errors import DataError, UsageError
from routerlab.llm.graders import GraderChoice, Item, grader_class, parse_grader_choice
from routerlab.llm.grading import LETTERS

if TYPE_CHECKING:
    from routerlab.data.table import RoutingTable

Kind = Literal["mc", "generated"]
KINDS: tuple[Kind, ...] = ("mc", "generated")
KIND_ALIASES = {"short": "generated"}
"""Older kind names: before graders, every question without options was a ``short`` answer."""
GOLD_COLUMNS = ("answer", "ground_truth", "gold")
OPTION_COLUMNS = ("options", "choices")
OPTION_METRICS = ("", "em_mc")
"""The ``metric`` values whose ``choices`` are answer options (MBPP's ``code_eval`` rows hold tests there)."""


@dataclass(frozen=True)
class Question:
    """One question. ``gold`` is the option letter (with ``choices``) or the reference; ``reference`` is the
    reference as the source wrote it (an option label such as ARC's ``3``, a worked solution, a test list);
    ``grader`` the full name of the grader that scores its answers (``mc`` with options, ``short`` without,
    when not given); ``kind`` is ``mc`` with options, ``generated`` without (``short``, the older name, is read
    as ``generated``)."""

    id: str
    text: str
    dataset: str
    split: str
    choices: tuple[str, ...] | None
    gold: str
    kind: Kind
    reference: str = ""
    metric: str = ""
    task_id: str = ""
    grader: str = ""

    def __post_init__(self) -> None:
        kind = KIND_ALIASES.get(self.kind, self.kind)
        if kind not in KINDS:
            raise ValueError(f"question {self.id!r}: kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        object.__setattr__(self, "kind", kind)
        if not self.reference:
            object.__setattr__(self, "reference", self.gold)
        if not self.grader:
            object.__setattr__(self, "grader", "mc" if self.choices else "short")

    @property
    def letters(self) -> str:
        """The option letters (``"ABCD"`` for four options); empty for a question without options."""
        return LETTERS[: len(self.choices)] if self.choices else ""

    def item(self, answer: str = "") -> Item:
        """The grader's view of ``answer`` to this question: the reference is the gold letter for a question
        with options, else the reference as the source wrote it; ``extra`` holds the ``task_id``."""
        return Item(question=self.text, answer=answer, reference=self.gold if self.choices else self.reference,
                    choices=self.choices, dataset=self.dataset, metric=self.metric, query_id=self.id,
                    extra={"task_id": self.task_id} if self.task_id else {})


@dataclass(frozen=True)
class QuestionSet(Sequence[Question]):
    """The questions read from ``source`` (after sampling), and how many were skipped, by reason."""

    questions: tuple[Question, ...]
    source: str
    n_available: int
    skipped: Mapping[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.questions)

    def __iter__(self) -> Iterator[Question]:
        return iter(self.questions)

    def __getitem__(self, index: Any) -> Any:
        return self.questions[index]

    def counts(self) -> dict[str, int]:
        """Questions per dataset."""
        out: dict[str, int] = {}
        for q in self.questions:
            out[q.dataset] = out.get(q.dataset, 0) + 1
        return out


def load_questions(
    source: str | Path | RoutingTable,
    *,
    limit: int | None = None,
    seed: int = 0,
    kinds: Sequence[str] = KINDS,
    graders: GraderChoice | str | Sequence[str] | None = None,
) -> QuestionSet:
    """Questions from a table directory, a :class:`RoutingTable` or a ``.jsonl`` file (module docstring),
    each with its grader (``graders``: the user's choice, a :class:`GraderChoice` or ``--grader`` values),
    keeping the ``kinds`` asked for (``mc``, ``generated``), then a seeded stratified sample of ``limit``."""
    from routerlab.data.table import RoutingTable

    bad = [k for k in kinds if KIND_ALIASES.get(k, k) not in KINDS]
    if bad or not kinds:
        raise UsageError(f"question kinds must be some of {', '.join(KINDS)}, got {', '.join(kinds) or 'none'}")
    kinds = [KIND_ALIASES.get(k, k) for k in kinds]
    choice = graders if isinstance(graders, GraderChoice) else parse_grader_choice(graders)
    if limit is not None and limit < 1:
        raise UsageError(f"the question limit must be at least 1, got {limit}")
    skipped: dict[str, int] = {}
    named: dict[str, str] = {}
    if isinstance(source, RoutingTable):
        questions = questions_from_table(source, skipped)
        where = source.name
    else:
        path = Path(source)
        where = str(path)
        if path.is_dir():
            from routerlab.data.store import load

            questions = questions_from_table(load(path), skipped)
        elif path.suffix.lower() == ".jsonl":
            questions = questions_from_jsonl(path, named)
        elif not path.exists():
            raise DataError("no such file or table directory", file=path)
        else:
            raise DataError("questions come from a table directory or a .jsonl file", file=path)
    questions = assign_graders(questions, choice, skipped, named)
    kept = [q for q in questions if q.kind in kinds]
    other = len(questions) - len(kept)
    if other:
        skipped[f"kind not in {'/'.join(kinds)}"] = other
    n_available = len(kept)
    if limit is not None and limit < len(kept):
        order = stratified_order([q.dataset for q in kept], seed)
        chosen = np.sort(order[:limit])
        kept = [kept[i] for i in chosen.tolist()]
    return QuestionSet(tuple(kept), where, n_available, dict(sorted(skipped.items())))


def assign_graders(questions: Sequence[Question], choice: GraderChoice, skipped: dict[str, int],
                   named: Mapping[str, str] | None = None) -> list[Question]:
    """Each question with its grader's full name (module docstring for the order): ``named`` (question id ->
    the grader its source named, a JSON line's ``grader``) yields only to the user's choice. Every name is
    checked against the registry (an unknown one is a UsageError); the ``mc`` grader on a question without
    options is skipped and counted."""
    out: list[Question] = []
    checked: set[str] = set()
    for q in questions:
        own = (named or {}).get(q.id)
        if own is not None and q.dataset not in choice.by_dataset and choice.default is None:
            name = own
        else:
            name = choice.name_for(q.dataset, q.metric, bool(q.choices))
        if name not in checked:
            _check_grader(name)
            checked.add(name)
        if grader_class(name).kind == "mc" and not q.choices:
            reason = "grader mc on a question without options"
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        out.append(replace(q, grader=name) if name != q.grader else q)
    return out


def stratified_order(datasets: Sequence[str], seed: int) -> np.ndarray:
    """A seeded order of positions 0..n-1 in which each prefix holds every dataset in its share, within one.

    Each dataset's positions are shuffled with the seed; then, step by step, the next position comes from the
    dataset furthest below its share of the prefix (``k * n_d / n - taken_d``), ties going to a seeded order of
    the datasets. So every prefix is a stratified sample and a longer prefix contains a shorter one.
    """
    n = len(datasets)
    rng = np.random.default_rng(seed)
    names = sorted(set(datasets))
    members = {d: [] for d in names}  # type: dict[str, list[int]]
    for i, d in enumerate(datasets):
        members[d].append(i)
    pools = {d: list(rng.permutation(np.array(members[d], dtype=np.int64)).tolist()) for d in names}
    tie_rank = {d: int(r) for d, r in zip(names, rng.permutation(len(names)), strict=True)}
    share = {d: len(members[d]) / n for d in names} if n else {}
    taken = dict.fromkeys(names, 0)
    out = np.empty(n, dtype=np.int64)
    for k in range(1, n + 1):
        best = max((d for d in names if taken[d] < len(pools[d])),
                   key=lambda d: (k * share[d] - taken[d], -tie_rank[d]))
        out[k - 1] = pools[best][taken[best]]
        taken[best] += 1
    return out


# ---------------------------------------------------------------------------------------- tables


def _column(extra: Mapping[str, np.ndarray], names: Sequence[str], n: int) -> list[str]:
    """Per query, the first non-empty value among the metadata columns ``names`` ("" when none)."""
    out = [""] * n
    for name in names:
        col = extra.get(name)
        if col is None:
            continue
        for i, v in enumerate(col.tolist()):
            if not out[i] and v is not None and not (isinstance(v, float) and math.isnan(v)):
                out[i] = str(v).strip()
    return out


def parse_options(value: Any) -> tuple[tuple[str, ...], tuple[str, ...] | None] | None:
    """(option texts, their labels or None) from a list, a ``{"text", "label"|"labels"}`` dict, or their JSON
    text; None when there are no options. Raises ValueError when the form is wrong."""
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError("options are not JSON text") from None
    if value is None:
        return None
    labels: tuple[str, ...] | None = None
    if isinstance(value, dict):
        texts = value.get("text")
        raw_labels = value.get("label", value.get("labels"))
        if not isinstance(texts, list):
            raise ValueError("an options object needs a 'text' list")
        if raw_labels is not None:
            if not isinstance(raw_labels, list) or len(raw_labels) != len(texts):
                raise ValueError("option labels must be a list as long as the texts")
            labels = tuple(str(x).strip() for x in raw_labels)
            if len(set(labels)) != len(labels):
                raise ValueError(f"option labels repeat: {list(labels)}")
        value = texts
    if not isinstance(value, list):
        raise ValueError(f"options must be a list of texts, got {type(value).__name__}")
    if not value:
        return None
    if len(value) > len(LETTERS):
        raise ValueError(f"{len(value)} options; at most {len(LETTERS)} (A-{LETTERS[-1]}) are supported")
    if not all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in value):
        raise ValueError("every option must be a text")
    return tuple(str(v) for v in value), labels


def gold_letter(gold: str, choices: tuple[str, ...], labels: tuple[str, ...] | None) -> str | None:
    """The option letter of a gold answer: one of the source's own labels (ARC's ``1``-``4`` become A-D), else a
    letter of the options (any case), else None."""
    g = gold.strip()
    if labels is not None and g in labels:
        return LETTERS[labels.index(g)]
    letters = LETTERS[: len(choices)]
    return g.upper() if len(g) == 1 and g.upper() in letters else None


def option_letter(answer: str, choices: tuple[str, ...], labels: tuple[str, ...] | None) -> str | None:
    """The option letter an answer names: a letter or label (:func:`gold_letter`), else the letter of the option
    whose text it is exactly; None when it is none of them."""
    letter = gold_letter(answer, choices, labels)
    if letter is None and answer.strip() in choices:
        letter = LETTERS[choices.index(answer.strip())]
    return letter


def not_an_option(shown: str, choices: tuple[str, ...], labels: tuple[str, ...] | None) -> str:
    """Why ``shown`` (an answer as the message shows it) names no option: the letters and labels it could be."""
    letters = LETTERS[: len(choices)]
    return (f"{shown} is neither an option letter ({letters[0]}-{letters[-1]}"
            f"{', or a label ' + '/'.join(labels) if labels else ''}) nor an option's exact text")


def questions_from_table(table: RoutingTable, skipped: dict[str, int]) -> list[Question]:
    """Questions from a table's query metadata (module docstring); skips are counted in ``skipped``."""
    q = table.queries
    n = len(q)
    if not any(c in q.extra for c in GOLD_COLUMNS):
        raise UsageError(
            f"table {table.name!r} has no gold answers: its query metadata has none of {', '.join(GOLD_COLUMNS)} "
            "(import MMLU-Pro, or LLMRouter's score files with their query JSONL files, or give a .jsonl file)"
        )
    golds = _column(q.extra, GOLD_COLUMNS, n)
    options = _column(q.extra, OPTION_COLUMNS, n)
    metrics = _column(q.extra, ("metric",), n)
    task_ids = _column(q.extra, ("task_id",), n)
    out: list[Question] = []

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    for i in range(n):
        gold, metric = golds[i], metrics[i]
        if not gold:
            skip("no gold answer")
            continue
        base = {"id": str(q.ids[i]), "text": str(q.text[i]), "dataset": str(q.dataset[i]), "split": str(q.split[i]),
                "reference": gold, "metric": metric, "task_id": task_ids[i]}
        parsed = None
        if metric.lower() in OPTION_METRICS:
            try:
                parsed = parse_options(options[i])
            except ValueError:
                skip("options not usable (not a list of texts, or more than ten)")
                continue
        if parsed is not None:
            letter = gold_letter(gold, *parsed)
            if letter is None:
                skip("gold is not one of the options' letters or labels")
                continue
            out.append(Question(**base, choices=parsed[0], gold=letter, kind="mc"))
        elif metric.lower() == "em_mc":
            skip("multiple choice without options")
        else:
            out.append(Question(**base, choices=None, gold=gold, kind="generated"))
    return out


# ---------------------------------------------------------------------------------------- JSON lines


def questions_from_jsonl(path: Path, named: dict[str, str] | None = None) -> list[Question]:
    """Questions from a JSON-lines file (module docstring); any bad line is a DataError naming it. A line's own
    ``grader`` goes into ``named`` (question id -> grader name) for :func:`assign_graders`."""
    from routerlab.data._files import iter_jsonl

    out: list[Question] = []
    seen: dict[str, int] = {}
    stem = path.name.split(".")[0]
    for line, obj in iter_jsonl(path):
        text = obj.get("question")
        if not isinstance(text, str) or not text.strip():
            raise DataError("missing or not a non-empty text", file=path, row=line, field="question")
        qid = obj.get("id", f"line{line}")
        if not isinstance(qid, str | int) or isinstance(qid, bool) or str(qid) == "":
            raise DataError(f"expected a text or an integer, got {qid!r}", file=path, row=line, field="id")
        qid = str(qid)
        if qid in seen:
            raise DataError(f"id {qid!r} repeats (first on line {seen[qid]})", file=path, row=line, field="id")
        seen[qid] = line
        meta = {}
        for key, default in (("dataset", stem), ("split", "")):
            value = obj.get(key, default)
            if value is None:
                value = default
            if not isinstance(value, str):
                raise DataError(f"expected a text, got {value!r}", file=path, row=line, field=key)
            meta[key] = value
        for key in ("metric", "grader", "task_id"):
            value = obj.get(key, "")
            if value is None:
                value = ""
            if isinstance(value, int) and not isinstance(value, bool) and key == "task_id":
                value = str(value)
            if not isinstance(value, str):
                raise DataError(f"expected a text, got {value!r}", file=path, row=line, field=key)
            meta[key] = value.strip()
        if meta["grader"]:
            try:
                _check_grader(meta["grader"])
            except UsageError as exc:
                raise DataError(str(exc), file=path, row=line, field="grader") from None
            if named is not None:
                named[qid] = meta["grader"]
        try:
            parsed = parse_options(obj.get("choices")) if meta["metric"].lower() in OPTION_METRICS else None
        except ValueError as exc:
            raise DataError(str(exc), file=path, row=line, field="choices") from None
        answer = obj.get("answer")
        if isinstance(answer, int | float) and not isinstance(answer, bool) and parsed is None:
            answer = str(answer)
        if not isinstance(answer, str) or not answer.strip():
            raise DataError("missing or not a non-empty text (the gold answer)", file=path, row=line, field="answer")
        common = {"reference": answer.strip(), "metric": meta["metric"], "task_id": meta["task_id"]}
        if parsed is None:
            out.append(Question(qid, text, meta["dataset"], meta["split"], None, answer.strip(), "generated",
                                **common))
            continue
        choices, labels = parsed
        gold = option_letter(answer, choices, labels)
        if gold is None:
            raise DataError(not_an_option(repr(answer), choices, labels), file=path, row=line, field="answer")
        out.append(Question(qid, text, meta["dataset"], meta["split"], choices, gold, "mc", **common))
    if not out:
        raise DataError("holds no question", file=path)
    return out



def _check_grader(name: str) -> None:
    """A known grader name, with an argument only where the grader takes one (a UsageError otherwise)."""
    cls = grader_class(name)
    if (":" in name) != cls.takes_arg:
        raise UsageError(f"grader {name!r}: {cls.kind!r} " + ("needs an argument" if cls.takes_arg
                                                              else "takes no argument"))


# ---------------------------------------------------------------------------------------- variants


class VariantLike(Protocol):
    """What :func:`variant_questions` reads of a variant (``routerlab.perturb.Variant``; this layer sits below
    ``perturb`` and does not import it)."""

    @property
    def query_id(self) -> str: ...
    @property
    def level(self) -> str: ...
    @property
    def variant(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def key(self) -> str: ...


class VariantsLike(Protocol):
    """A set of variants (``routerlab.perturb.PerturbationSet``)."""

    @property
    def variants(self) -> Sequence[VariantLike]: ...


def variant_questions(
    questions: Iterable[Question],
    variants: VariantsLike | Iterable[VariantLike],
    *,
    source: str,
    lines: Sequence[int] | None = None,
) -> list[Question]:
    """One question per variant, in the variants' order: the original question (found by ``query_id`` among
    ``questions``) with its text replaced by the variant's and its id set to the variant's key ``qid#level#j``
    (SPEC 3, the invariance check). A variant whose query is not among ``questions`` is a DataError naming
    ``source`` (the variants file) and the variant's line (``lines[k]``, else its position counting from 1)."""
    items: Iterable[VariantLike] = variants.variants if hasattr(variants, "variants") else variants
    by_id = {q.id: q for q in questions}
    where = f" {questions.source}" if isinstance(questions, QuestionSet) else ""
    out: list[Question] = []
    for k, v in enumerate(items):
        original = by_id.get(str(v.query_id))
        if original is None:
            row = lines[k] if lines is not None and k < len(lines) else k + 1
            raise DataError(f"query {v.query_id!r} is not among the {len(by_id)} questions of the source{where} "
                            "(after its kind filter and skipped questions)", file=source, row=row, field="query_id")
        out.append(replace(original, id=v.key, text=v.text))
    return out
