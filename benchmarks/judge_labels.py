"""Build a real label set for ``routerlab judge-check``: local models answer LLMRouter questions, exact-match
graders give the reference labels.

A seeded sample of LLMRouter's multiple-choice and short-answer questions (stratified by dataset, as ``collect
--limit`` samples) is asked to each actor with :func:`routerlab.llm.collect.prompt_messages` (the chat ``collect``
sends, so the call cache is shared with ``collect``), greedy, and every reply is graded by the existing
deterministic graders (``mc``: the option letter against the gold letter; ``short``: exact match of the short
answer). One row per (question, actor): ``query_id, actor, dataset, kind, question, answer, reference, label``,
where ``question`` holds the options as ``A. text`` lines, ``reference`` is the gold answer as text (``B. the
option``) and ``label`` the grader's 1/0.

    ROUTERLAB_CACHE_DIR=/tmp/kappa-cache PYTHONPATH=src python benchmarks/judge_labels.py \\
        --table /tmp/judge-work/llmrouter --limit 120 -o /tmp/judge-work/labels.csv

Import the table first (docs/collect.md): ``routerlab import routerdc D/dcrouter_preprocessed/train.json
D/dcrouter_preprocessed/test.json D/example_data/query_data/default_query_{train,test}.jsonl -o TABLE``.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

from routerlab.llm.base import Decoding, load_backend, parse_actor_list
from routerlab.llm.collect import prompt_messages
from routerlab.llm.graders import Item, get_grader
from routerlab.llm.questions import Question, load_questions

ACTORS = "smollm2=local:smollm2-135m,qwen=local:qwen2.5-coder-1.5b"
COLUMNS = ["query_id", "actor", "dataset", "kind", "question", "answer", "reference", "label"]


def shown_question(q: Question) -> str:
    """The question as the actor saw it, without the answer instruction: the text and its lettered options."""
    if not q.choices:
        return q.text.strip()
    lines = [f"{letter}. {text}" for letter, text in zip(q.letters, q.choices, strict=True)]
    return q.text.rstrip() + "\n\n" + "\n".join(lines)


def reference_text(q: Question) -> str:
    """The gold answer as a judge reads it: ``B. the option's text`` for multiple choice, the gold otherwise."""
    if not q.choices:
        return q.gold
    return f"{q.gold}. {q.choices[q.letters.index(q.gold)]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", type=Path, required=True, help="an imported LLMRouter table directory")
    ap.add_argument("--limit", type=int, default=120, help="questions in the sample")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--actors", default=ACTORS)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args()

    qs = load_questions(args.table, limit=args.limit, seed=args.seed, kinds=("mc", "short"))
    print(f"{len(qs)} questions: {qs.counts()}", file=sys.stderr)
    decoding = Decoding(max_tokens=args.max_tokens)
    graders = {"mc": get_grader("mc"), "short": get_grader("short")}
    rows: list[dict[str, object]] = []
    for name, spec in parse_actor_list(args.actors):
        backend = load_backend(spec)
        t0 = time.perf_counter()
        fresh = 0
        try:
            for start in range(0, len(qs), args.batch_size):
                chunk = list(qs)[start:start + args.batch_size]
                replies = backend.complete_batch([prompt_messages(q) for q in chunk], decoding)
                fresh += sum(not r.cached for r in replies)
                for q, reply in zip(chunk, replies, strict=True):
                    item = Item(question=q.text, answer=reply.text, reference=q.gold, choices=q.choices,
                                dataset=q.dataset, query_id=q.id)
                    grade = graders[q.kind].grade(item)
                    rows.append({"query_id": q.id, "actor": name, "dataset": q.dataset, "kind": q.kind,
                                 "question": shown_question(q), "answer": reply.text.strip(),
                                 "reference": reference_text(q), "label": int(grade.score)})
                print(f"  {name}: {min(start + args.batch_size, len(qs))}/{len(qs)} "
                      f"({time.perf_counter() - t0:.0f} s, {fresh} fresh calls)", file=sys.stderr)
        finally:
            backend.close()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.output.with_suffix(args.output.suffix + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(args.output)
    positive = sum(int(str(r["label"])) for r in rows)
    print(f"wrote {len(rows)} rows to {args.output}: {positive} labelled 1 ({positive / len(rows):.0%})",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
