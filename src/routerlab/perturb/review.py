"""The review loop of SPEC 3: a person reads a sample of variants and marks each ``same`` (asks the same thing as
its original) or ``changed``; robustness then drops the variants marked changed and reports, per level, the share
marked changed (the meaning drift of that level).

``review_sample`` draws the sample, stratified by level and similarity band (the quartiles of that level's
similarity, so equal allocation to the bands keeps the sample self-weighting within a level) and seeded;
``write_review`` writes it as CSV with an empty ``mark`` column; ``read_review`` checks a filled-in file (every
problem is a one-line DataError naming the file, the row and the field); ``apply_review`` drops the variants marked
changed from a :class:`PerturbationSet` and summarises the marks per level, with Wilson 95% intervals.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from routerlab._atomic import atomic_write
from routerlab.errors import DataError, UsageError
from routerlab.perturb.base import PerturbationSet, Variant, level_names

COLUMNS: tuple[str, ...] = ("variant_id", "level", "similarity", "band", "original", "variant", "mark")
"""The columns of a review file, in order; a person fills ``mark``."""
MARKS: tuple[str, ...] = ("same", "changed")
BANDS = 4
"""Similarity bands per level: its quartiles (band 1 the lowest similarities)."""
UNSCORED = "unscored"
"""The band of variants without a similarity (brought from a file that has none)."""
MAX_REVIEW = 10_000


def _bands(variants: list[Variant]) -> dict[str, list[Variant]]:
    """A level's variants cut into :data:`BANDS` equal-count bands by similarity rank (ties kept in file order),
    labelled ``qK lo-hi``; variants without a similarity form the band :data:`UNSCORED`."""
    scored = sorted((v for v in variants if v.similarity is not None), key=lambda v: v.similarity or 0.0)
    out: dict[str, list[Variant]] = {}
    for k, part in enumerate(np.array_split(np.arange(len(scored)), min(BANDS, len(scored))) if scored else []):
        members = [scored[int(i)] for i in part]
        lo, hi = members[0].similarity, members[-1].similarity
        out[f"q{k + 1} {lo:.2f}-{hi:.2f}"] = members
    rest = [v for v in variants if v.similarity is None]
    if rest:
        out[UNSCORED] = rest
    return out


def review_sample(pset: PerturbationSet, n: int, seed: int) -> list[tuple[str, Variant]]:
    """``n`` variants (all, when there are fewer) as (band, variant): the strata are (level, similarity band);
    ``n`` is spread over them as evenly as their sizes allow (round-robin, band by band across the levels, lowest
    band first), and each stratum's members are drawn at random (seeded). Ordered by band, then level."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_REVIEW:
        raise UsageError(f"--review: the sample size must be an integer in 1..{MAX_REVIEW}, got {n!r}")
    by_level = [list(_bands([v for v in pset.variants if v.level == level]).items()) for level in pset.levels]
    # band by band across the levels (lowest similarities first), so a small sample still covers every level
    strata = [(level, *bands[k]) for k in range(max((len(b) for b in by_level), default=0))
              for level, bands in zip(pset.levels, by_level, strict=True) if k < len(bands)]
    quota = [0] * len(strata)
    left = min(n, len(pset.variants))
    while left > 0:  # round-robin: one more to every stratum that still has members
        for k, (_, _, vs) in enumerate(strata):
            if left > 0 and quota[k] < len(vs):
                quota[k] += 1
                left -= 1
    rng = np.random.default_rng(seed)
    out: list[tuple[str, Variant]] = []
    for (_, band, vs), q in zip(strata, quota, strict=True):
        picked = sorted(rng.choice(len(vs), q, replace=False).tolist()) if q else []
        out.extend((band, vs[i]) for i in picked)
    return out


def write_review(path: str | Path, sample: list[tuple[str, Variant]], originals: Mapping[str, str]) -> Path:
    """The sample as a CSV file (:data:`COLUMNS`, ``mark`` empty), atomically."""
    out = Path(path)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for band, v in sample:
        writer.writerow([v.key, v.level, "" if v.similarity is None else f"{v.similarity:.4f}", band,
                         originals.get(v.query_id, ""), v.text, ""])

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(buf.getvalue())

    atomic_write(out, write)
    return out


@dataclass(frozen=True)
class Review:
    """A filled-in review file: per variant id, its mark and the variant text the person read (None when the file
    has no ``variant`` column), and the row it is on."""

    path: Path
    marks: dict[str, str]
    texts: dict[str, str | None]
    rows: dict[str, int]


def split_id(vid: str) -> tuple[str, str, int] | None:
    """``query_id#level#j`` as its parts, or None when it is not of that form."""
    qid, sep, rest = vid.rpartition("#")
    qid, sep2, level = qid.rpartition("#")
    if not sep or not sep2 or not qid or not level or not rest.isdigit():
        return None
    return qid, level, int(rest)


def read_review(path: str | Path) -> Review:
    """A review CSV with at least the columns ``variant_id`` and ``mark``; every row must carry a well-formed
    variant id (once) and a mark ``same`` or ``changed`` (case and surrounding spaces ignored)."""
    src = Path(path)
    if not src.is_file():
        raise UsageError(f"--reviewed {src}: no such file")
    try:
        text = src.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read the review file: {exc}", file=src) from None
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    for column in ("variant_id", "mark"):
        if column not in header:
            raise DataError(f"the review file has no {column!r} column (columns: {', '.join(header) or 'none'}); "
                            "write one with routerlab perturb --review N FILE.csv", file=src, field=column)
    marks: dict[str, str] = {}
    texts: dict[str, str | None] = {}
    rows: dict[str, int] = {}
    for row_no, row in enumerate(reader, start=2):  # row 1 is the header
        vid = (row.get("variant_id") or "").strip()
        if split_id(vid) is None:
            raise DataError(f"variant_id must be query_id#level#number, got {vid!r}", file=src, row=row_no,
                            field="variant_id")
        if vid in rows:
            raise DataError(f"variant {vid} is already marked on row {rows[vid]}", file=src, row=row_no,
                            field="variant_id")
        mark = (row.get("mark") or "").strip().lower()
        if not mark:
            raise DataError(f"no mark for variant {vid}: write same or changed", file=src, row=row_no, field="mark")
        if mark not in MARKS:
            raise DataError(f"mark must be same or changed, got {row.get('mark')!r}", file=src, row=row_no,
                            field="mark")
        marks[vid], rows[vid] = mark, row_no
        texts[vid] = row.get("variant") if "variant" in header else None
    if not marks:
        raise DataError("the review file has no marked variant", file=src)
    return Review(src, marks, texts, rows)


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score 95% interval of a proportion k/n (n >= 1)."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def apply_review(pset: PerturbationSet, review: Review, query_ids: Collection[str]) -> tuple[PerturbationSet,
                                                                                             dict[str, Any]]:
    """``pset`` without the variants marked ``changed`` (variant numbers kept, so outcome ids still match), and
    the summary: per level of the run, the variants reviewed, marked changed, their share and its Wilson 95%
    interval; the variants dropped; the rows about queries or levels outside this run (ignored).

    A row's variant id must name a query of ``query_ids`` (the table's) and a known level; a variant of a query
    and level of this run must exist in it, with the text the person read (when the file has it)."""
    by_key = {v.key: v for v in pset.variants}
    run_queries = {v.query_id for v in pset.variants}
    known_levels = set(level_names()) | set(pset.levels)
    ignored = 0
    used: dict[str, str] = {}
    for vid, mark in review.marks.items():
        parts = split_id(vid)
        assert parts is not None
        qid, level, _ = parts
        row = review.rows[vid]
        if qid not in query_ids:
            raise DataError(f"unknown variant {vid}: the table has no query {qid!r}", file=review.path, row=row,
                            field="variant_id")
        if level not in known_levels:
            raise DataError(f"unknown variant {vid}: no level {level!r} (known: {', '.join(sorted(known_levels))})",
                            file=review.path, row=row, field="variant_id")
        if qid not in run_queries or level not in pset.levels:
            ignored += 1
            continue
        variant = by_key.get(vid)
        if variant is None:
            raise DataError(f"unknown variant {vid}: this run has no such variant of query {qid!r} at level "
                            f"{level!r} (was the review made with another seed or variants file?)",
                            file=review.path, row=row, field="variant_id")
        read = review.texts.get(vid)
        if read is not None and read.strip() != variant.text.strip():
            raise DataError(f"variant {vid}: the text reviewed differs from this run's variant (was the review made "
                            "with another seed, version or variants file?)", file=review.path, row=row,
                            field="variant")
        used[vid] = mark
    if not used:
        raise DataError(f"none of the {len(review.marks)} reviewed variants is a variant of this run (its test "
                        "queries and levels)", file=review.path)
    by_level: dict[str, dict[str, Any]] = {}
    for level in pset.levels:
        marks = [m for vid, m in used.items() if by_key[vid].level == level]
        if not marks:
            continue
        changed = sum(m == "changed" for m in marks)
        lo, hi = wilson(changed, len(marks))
        by_level[level] = {"reviewed": len(marks), "changed": changed, "changed_share": changed / len(marks),
                           "changed_share_ci": [lo, hi]}
    drop = {vid for vid, m in used.items() if m == "changed"}
    kept = tuple(v for v in pset.variants if v.key not in drop)
    stats = {lv: {**dict(pset.stats.get(lv, {})), "variants": sum(v.level == lv for v in kept)}
             for lv in pset.levels}
    summary = {"file": str(review.path), "reviewed": len(used), "dropped": len(drop), "ignored": ignored,
               "by_level": by_level}
    return replace(pset, variants=kept, stats=stats), summary


def review_lines(summary: Mapping[str, Any]) -> list[str]:
    """The review's report lines: per level, the share marked changed (meaning drift) with its interval."""
    lines = [f"review {summary['file']}: {summary['reviewed']} variants reviewed, {summary['dropped']} marked "
             "changed and dropped" + (f", {summary['ignored']} rows outside this run ignored"
                                      if summary.get("ignored") else "")]
    for level, s in summary["by_level"].items():
        lo, hi = s["changed_share_ci"]
        lines.append(f"  {level}: {s['changed']}/{s['reviewed']} changed = {s['changed_share']:.1%} "
                     f"[{lo:.1%}, {hi:.1%}] (meaning drift)")
    return lines
