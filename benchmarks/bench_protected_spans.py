"""Measure how often a perturbation alters what a question is: a line of code, a doctest, an assert, an identifier
the code defines, an option label or an answer cue (SPEC 3; issue 22, part 1).

    .venv/bin/python benchmarks/bench_protected_spans.py                    # every offline level, seeds 0-4, p = 3
    .venv/bin/python benchmarks/bench_protected_spans.py --seeds 2 --mc-sample 40 --json out.json

Two sets of queries are perturbed at every offline level with several seeds:

* ``heldout``: tests/data/protected_spans_heldout.jsonl, 66 hand-written code and multiple-choice questions
  (Python, JavaScript, SQL, MBPP-style asserts, HumanEval-style doctests, MC with labels ``A.``, ``(A)``, ``A)``,
  ``[A]``, ``a)``, ``1.``, ``Option 1:``, ``Scenario 1 |``, ``Statement 1 |``), each annotated by hand with what must
  survive, written before the rules; ``blind``: tests/data/protected_spans_blind.jsonl, 30 more in other shapes (a
  CTE, destructuring, ``switch``, promise chains, ``@property``, roman-numeral statements, ``Passage:``, ``A:``
  labels, bulleted options, code inside a multiple-choice question), written after the rules and measured once
  before anything was changed for them;
* the shared tables' code and multiple-choice questions (../shared/data or $ROUTERLAB_SHARED_DATA): LLMRouter's
  HumanEval and MBPP questions, its MMLU questions with ``Scenario``/``Statement`` labels and its logic grids
  (numbered clues, ``Q:``, ``Clue(s):``), RouterBench's MBPP prompts and a seeded sample of its few-shot ARC and
  Winogrande prompts (``A)`` labels, ``Answer:``, "Print only a single choice ...").

The check is independent of :mod:`routerlab.perturb.spans`: for the held-out set it reads the annotations; for the
shared tables it derives what must survive with Python's own parsers and plain patterns (Python code: :mod:`ast`
gives the lines outside docstrings (any bare string statement), the function names and parameters; :mod:`doctest`
gives the examples and their expected output; ``assert`` lines; labels at the start of a line or ``Scenario N |``;
the cues). A variant alters a kind when one of its fragments occurs a different number of times than in the original
(as a whole line when it is one there, else as a substring), or the labels' sequence differs. Printed: per source and
level, the variants made, the queries with at least one, and the share of variants that alter each kind and any
kind. Runs with the routerlab on ``PYTHONPATH`` (so an older checkout can be measured
the same way).
"""

from __future__ import annotations

import argparse
import ast
import csv
import doctest
import json
import os
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from routerlab.perturb import perturb
from routerlab.perturb.base import OFFLINE_LEVELS

ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "tests" / "data" / "protected_spans_heldout.jsonl"
BLIND = ROOT / "tests" / "data" / "protected_spans_blind.jsonl"
HELDOUTS = (HELDOUT, BLIND)
KINDS = ("code", "doctest", "assert", "identifier", "label", "cue")
AMBIGUOUS = frozenset(("a", "A", "I"))


@dataclass
class Keep:
    """What a variant of one question must keep: line fragments by kind (each must occur as often as in the
    original), identifiers (whole words, as often), labels (the same sequence), cues (as often)."""

    fragments: dict[str, list[str]] = field(default_factory=lambda: {"code": [], "doctest": [], "assert": []})
    identifiers: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    cues: list[str] = field(default_factory=list)


def _word_count(name: str, text: str) -> int:
    return len(re.findall(r"(?<![\w$])" + re.escape(name) + r"(?![\w$])", text))


def _label_sequence(labels: Sequence[str], text: str) -> list[str]:
    if not labels:
        return []
    alternatives = "|".join(re.escape(lab) for lab in sorted(set(labels), key=len, reverse=True))
    return re.findall(r"(?<![\w(\[])(?:" + alternatives + r")(?![\w)\]])", text)


def _occurrences(fragment: str, text: str, whole_line: bool) -> int:
    if whole_line:
        return sum(line.strip() == fragment for line in text.split("\n"))
    return text.count(fragment)


def altered(original: str, variant: str, keep: Keep) -> set[str]:
    """The kinds of ``keep`` that ``variant`` alters (module docstring). A fragment that is a whole line of the
    original is counted as a line (the doctest output ``False`` is not the word False in the prose), any other as a
    substring."""
    out: set[str] = set()
    lines = {line.strip() for line in original.split("\n")}
    for kind, fragments in keep.fragments.items():
        if any(_occurrences(f, variant, f in lines) != _occurrences(f, original, f in lines) for f in set(fragments)):
            out.add(kind)
    if any(_word_count(n, variant) != _word_count(n, original) for n in set(keep.identifiers)):
        out.add("identifier")
    if _label_sequence(keep.labels, variant) != _label_sequence(keep.labels, original):
        out.add("label")
    if any(variant.count(c) != original.count(c) for c in set(keep.cues)):
        out.add("cue")
    return out


# ----------------------------------------------------------------------------------------------- held-out set
def heldout(path: Path = HELDOUT) -> list[tuple[str, str, Keep]]:
    """(id, text, keep) of the hand-written held-out questions."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        k = item["keep"]
        keep = Keep({kind: list(k.get(kind, [])) for kind in ("code", "doctest", "assert")},
                    list(k.get("identifier", [])), list(k.get("label", [])), list(k.get("cue", [])))
        out.append((item["id"], item["text"], keep))
    return out


# ----------------------------------------------------------------------------------------------- shared tables
_ASSERT_LINE = re.compile(r"^[ \t]*(assert\b.*)$", re.MULTILINE)
_LINE_LABEL = re.compile(r"^[ \t]*(\([A-Z]\)|\[[A-Z]\]|[A-Z][.)])(?=[ \t])", re.MULTILINE)
_NAMED_LABEL = re.compile(r"\b(?:Scenario|Statement) \d+ ?\|")
_NUMBERED = re.compile(r"^(\d{1,2}\.)(?= )", re.MULTILINE)
_CUES = ("Answer:", "Question:", "Clue(s):", "Your code should pass these tests:", "Answer Choices:", "Options:")
_LINE_CUES = re.compile(r"^(?:Q|A):(?=\s|$)|^Print only a single choice.*$", re.MULTILINE)


def python_keep(text: str, keep: Keep) -> None:
    """Python code: the lines outside docstrings (bare string statements), the doctests and their output, example
    lines that call a function the code defines, the functions' and parameters' names (from :mod:`ast`)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return
    doc_lines: set[int] = set()
    docstrings: list[str] = []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
            if not isinstance(node, ast.ClassDef):
                names.extend(a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs])
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            doc_lines |= set(range(node.lineno, (node.end_lineno or node.lineno) + 1))  # a docstring, or a bare
            docstrings.append(node.value.value)                                          # string used as one
    lines = text.split("\n")
    keep.fragments["code"].extend(line.strip() for i, line in enumerate(lines, 1)
                                  if i not in doc_lines and line.strip())
    functions = [n for n in names if n.isidentifier()]
    for doc in docstrings:
        try:
            examples = doctest.DocTestParser().get_examples(doc)
        except ValueError:  # a docstring doctest itself refuses (inconsistent indentation): its >>> lines, plainly
            examples = [doctest.Example(line.strip()[4:], "") for line in doc.splitlines()
                        if line.strip().startswith(">>> ")]
        for example in examples:
            keep.fragments["doctest"].extend(">>> " + s.strip() if i == 0 else s.strip()
                                             for i, s in enumerate(example.source.splitlines()) if s.strip())
            keep.fragments["doctest"].extend(w.strip() for w in example.want.splitlines() if w.strip())
        keep.fragments["doctest"].extend(line.strip() for line in doc.splitlines()
                                         if any(line.strip().startswith(f + "(") for f in functions))
    keep.fragments["doctest"] = [f for f in keep.fragments["doctest"] if not f.startswith(">>> ") or f in text]
    keep.identifiers.extend(n for n in names if n not in AMBIGUOUS)


def shared_keep(text: str, python: bool) -> Keep:
    """What a shared-table question must keep (module docstring)."""
    keep = Keep()
    if python:
        python_keep(text, keep)
    keep.fragments["assert"].extend(m.group(1).strip() for m in _ASSERT_LINE.finditer(text))
    labels = [m.group(1) for m in _LINE_LABEL.finditer(text)] + _NAMED_LABEL.findall(text)
    if len(set(labels)) >= 2:
        keep.labels.extend(labels)
    numbered = _NUMBERED.findall(text)
    if "1." in numbered and "2." in numbered:
        keep.labels.extend(numbered)
    keep.cues.extend(c for c in _CUES if c in text)
    keep.cues.extend(m.group().strip() for m in _LINE_CUES.finditer(text))
    return keep


def shared_data_root() -> Path:
    return Path(os.environ.get("ROUTERLAB_SHARED_DATA") or ROOT.parent / "shared" / "data")


def shared(mc_sample: int, seed: int) -> dict[str, list[tuple[str, str, Keep]]]:
    """The shared tables' code and multiple-choice questions, by source (module docstring)."""
    root = shared_data_root()
    qdir = root / "llmrouter" / "data" / "example_data" / "query_data"
    rows: list[dict[str, Any]] = []
    for name in ("default_query_train.jsonl", "default_query_test.jsonl"):
        rows.extend(json.loads(line) for line in (qdir / name).read_text(encoding="utf-8").split("\n")
                    if line.strip())
    out: dict[str, list[tuple[str, str, Keep]]] = {}
    seen: set[str] = set()
    for i, r in enumerate(rows):
        task, text = r["task_name"], r["query"]
        if text in seen:
            continue
        labelled = task == "mmlu" and _NAMED_LABEL.search(text) is not None
        if task in ("human_eval", "mbpp", "agentverse-logicgrid") or labelled:
            seen.add(text)
            source = "llmrouter-" + ("mmlu-labelled" if labelled else task)
            out.setdefault(source, []).append((f"{task}-{i}", text, shared_keep(text, task == "human_eval")))
    csv.field_size_limit(1 << 30)
    rb = root / "routerbench-routerdc" / "datasets" / "routerbench_zs"
    rng = random.Random(seed)
    for name, source in (("mbpp_test.csv", "routerbench-mbpp"), ("arc_challenge_test.csv", "routerbench-arc"),
                         ("winograde_test.csv", "routerbench-winogrande")):
        with open(rb / name, newline="", encoding="utf-8") as fh:
            items = [(r["sample_id"], "\n\n".join(ast.literal_eval(r["prompt"]))) for r in csv.DictReader(fh)]
        if source != "routerbench-mbpp" and mc_sample < len(items):
            items = rng.sample(items, mc_sample)
        out[source] = [(f"{source}-{j}-{sid}", text, shared_keep(text, False)) for j, (sid, text) in
                       enumerate(items)]
    return out


# ----------------------------------------------------------------------------------------------- measuring
def measure(items: Sequence[tuple[str, str, Keep]], levels: Iterable[str], seeds: Iterable[int],
            p: int) -> dict[str, dict[str, Any]]:
    """Per level: variants, queries with a variant, rejected candidates, and the variants altering each kind."""
    ids = [i for i, _, _ in items]
    texts = [t for _, t, _ in items]
    keeps = {i: (t, k) for i, t, k in items}
    out: dict[str, dict[str, Any]] = {}
    for level in levels:
        counts: Counter[str] = Counter()
        examples: list[dict[str, Any]] = []
        made = 0
        with_variant: set[str] = set()
        rejected = 0
        for seed in seeds:
            ps = perturb(ids, texts, [level], p, seed=seed)
            rejected += int(ps.stats.get(level, {}).get("rejected", 0))
            for v in ps.variants:
                made += 1
                with_variant.add(v.query_id)
                text, keep = keeps[v.query_id]
                bad = altered(text.strip(), v.text, keep)
                counts.update(bad)
                if bad:
                    counts["any"] += 1
                    if len(examples) < 5:
                        examples.append({"query_id": v.query_id, "seed": seed, "kinds": sorted(bad),
                                         "variant": v.text[:400]})
        out[level] = {"variants": made, "queries": len(ids), "with_variant": len(with_variant),
                      "rejected": rejected, "altered": {k: counts[k] for k in (*KINDS, "any")},
                      "examples": examples}
    return out


def _share(n: int, d: int) -> str:
    return f"{100 * n / d:.1f}%" if d else "-"


def report(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    rows = ["| source | level | queries | with a variant | variants | " + " | ".join(KINDS) + " | any |",
            "|---|---|---|---|---|" + "---|" * (len(KINDS) + 1)]
    for source, by_level in results.items():
        for level, r in by_level.items():
            n = r["variants"]
            rows.append(f"| {source} | {level} | {r['queries']} | {r['with_variant']} | {n} | "
                        + " | ".join(_share(r["altered"][k], n) for k in (*KINDS, "any")) + " |")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default=",".join(OFFLINE_LEVELS), help="comma list (default: offline levels)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    parser.add_argument("--p", type=int, default=3, help="variants per query per level (default 3)")
    parser.add_argument("--mc-sample", type=int, default=120,
                        help="RouterBench ARC and Winogrande prompts sampled (each; default 120)")
    parser.add_argument("--heldout-only", action="store_true", help="measure the held-out sets only")
    parser.add_argument("--heldout", type=Path, action="append",
                        help="held-out JSON lines file (repeatable; default: the two in tests/data)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    levels = [lv.strip() for lv in args.levels.split(",") if lv.strip()]
    seeds = range(args.seeds)
    start = time.perf_counter()
    sources = {path.stem.replace("protected_spans_", ""): heldout(path) for path in (args.heldout or HELDOUTS)}
    if not args.heldout_only:
        sources.update(shared(args.mc_sample, seed=0))
    results = {name: measure(items, levels, seeds, args.p) for name, items in sources.items()}
    total: dict[str, dict[str, Any]] = {}
    for level in levels:
        rs = [results[s][level] for s in results if s not in ("heldout", "blind")]
        if rs:
            total[level] = {"variants": sum(r["variants"] for r in rs), "queries": sum(r["queries"] for r in rs),
                            "with_variant": sum(r["with_variant"] for r in rs),
                            "rejected": sum(r["rejected"] for r in rs),
                            "altered": {k: sum(r["altered"][k] for r in rs) for k in (*KINDS, "any")},
                            "examples": []}
    if total:
        results["shared (all)"] = total
    print(report(results))
    print(f"\nlevels {','.join(levels)}, seeds 0-{args.seeds - 1}, p = {args.p}; "
          f"{time.perf_counter() - start:.1f} s")
    for source, by_level in results.items():
        for level, r in by_level.items():
            for ex in r["examples"][:2]:
                print(f"  {source}/{level}: {ex['query_id']} seed {ex['seed']} alters {ex['kinds']}: "
                      f"{ex['variant'][:160]!r}")
    if args.json:
        args.json.write_text(json.dumps({"levels": levels, "seeds": args.seeds, "p": args.p,
                                         "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
