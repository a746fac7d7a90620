"""Tests of the perturbation levels (SPEC 3). Helpers shared by the test modules: real queries from ../shared/data,
the installed WordNet (skip without it unless ROUTERLAB_REQUIRE_SHARED_DATA=1), a bounded Levenshtein distance."""

from __future__ import annotations

import json
from pathlib import Path

from tests import missing_requirement

WORDNET_DIR = Path("/usr/share/wordnet")


def require_wordnet() -> Path:
    """The WordNet directory the levels use; skips the test when it is missing, or fails under
    ROUTERLAB_REQUIRE_SHARED_DATA=1 (CI installs wordnet-base, so a missing WordNet must not turn CI green)."""
    from routerlab.perturb.wordnet import wordnet_dir

    path = wordnet_dir()
    if not (path / "data.noun").is_file():
        missing_requirement(f"WordNet 3.0 not found at {path} (apt-get install wordnet-base)")
    return path


def real_queries(shared_data: Path) -> tuple[list[str], list[str]]:
    """(ids, texts) of the 706 queries of LLMRouter's default test split (14 tasks: math, code, logic grids,
    trivia, multiple choice), read straight from ../shared/data."""
    path = shared_data / "llmrouter" / "data" / "example_data" / "query_data" / "default_query_test.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [f"{r['task_name']}-{i}" for i, r in enumerate(rows)], [r["query"] for r in rows]


def levenshtein(a: str, b: str, bound: int) -> int:
    """The edit distance of ``a`` and ``b`` when it is at most ``bound``, else ``bound + 1`` (a banded dynamic
    programme after stripping the common prefix and suffix, fast on long texts with few edits)."""
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    a, b = a[i:], b[i:]
    j = 0
    while j < min(len(a), len(b)) and a[-1 - j] == b[-1 - j]:
        j += 1
    a, b = a[:len(a) - j], b[:len(b) - j]
    if abs(len(a) - len(b)) > bound:
        return bound + 1
    big = bound + 1
    prev = {k: k for k in range(min(len(b), bound) + 1)}
    for r in range(1, len(a) + 1):
        row: dict[int, int] = {}
        for c in range(max(0, r - bound), min(len(b), r + bound) + 1):
            if c == 0:
                row[c] = r
                continue
            row[c] = min(prev.get(c, big) + 1, row.get(c - 1, big) + 1,
                         prev.get(c - 1, big) + (a[r - 1] != b[c - 1]))
        prev = row
    return min(prev.get(len(b), big), big)
