"""Variants files: one JSON object per line, ``{"query_id", "level", "variant", "text"}`` and, when measured,
``"similarity"`` (the encoder cosine to the original) and ``"encoder"``, plus ``"meaning_changing": true`` on the
variants of a meaning-changing level (the control level; ``routerlab perturb`` writes them; users bring their own
variants in the same format with ``--variants-file``), or, for hand-made sets, a ``.json`` file mapping query id ->
level -> list of texts.

Reading checks every line (a bad one is a DataError naming the file, line and field; a level must be a registered
one, :func:`routerlab.perturb.base.level_names`); ``variant`` may be left out
of a hand-written file, and then counts up per (query, level) in file order. A repeated (query, level, variant)
or a repeated text for one (query, level) is an error, not a silent duplicate.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from routerlab._atomic import atomic_write
from routerlab.data._files import iter_jsonl, load_json
from routerlab.errors import DataError
from routerlab.perturb.base import PerturbationSet, Variant, level_names


def write_variants(path: str | Path, variants: Iterable[Variant], *, meaning_changing: Iterable[str] = ()) -> Path:
    """Write ``variants`` as JSON lines, atomically; a variant of a meaning-changing level (the registered
    ``control`` level, or one named in ``meaning_changing``) is marked ``"meaning_changing": true``."""
    from routerlab.perturb.control import MEANING_KEY, changes_meaning

    out = Path(path)
    named = set(meaning_changing)
    marked: dict[str, bool] = {}

    def record(v: Variant) -> dict[str, Any]:
        if v.level not in marked:
            marked[v.level] = v.level in named or changes_meaning(v.level)
        return {**v.to_record(), MEANING_KEY: True} if marked[v.level] else v.to_record()

    lines = [json.dumps(record(v), ensure_ascii=False) for v in variants]

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + ("\n" if lines else ""))

    atomic_write(out, write)
    return out


def mapping_records(src: Path) -> list[tuple[int, dict[str, Any]]]:
    """A ``.json`` variants file, ``{query_id: {level: [text, ...]}}``, as the (position, record) pairs of the
    lines format, in file order (the variant number is the text's place in its list); a wrong shape is a DataError
    naming the key."""
    data = load_json(src)
    if not isinstance(data, dict):
        raise DataError(f"expected a JSON object {{query_id: {{level: [texts]}}}}, got {type(data).__name__}",
                        file=src)
    out: list[tuple[int, dict[str, Any]]] = []
    for qid, by_level in data.items():
        if not isinstance(by_level, dict):
            raise DataError(f"query {qid!r}: expected an object {{level: [texts]}}, got {type(by_level).__name__}",
                            file=src, field=str(qid))
        for level, texts in by_level.items():
            if not isinstance(texts, list):
                raise DataError(f"query {qid!r}, level {level!r}: expected a list of texts, got "
                                f"{type(texts).__name__}", file=src, field=f"{qid}.{level}")
            out.extend((len(out) + 1, {"query_id": qid, "level": level, "variant": j, "text": text})
                       for j, text in enumerate(texts))
    return out


def read_variants(path: str | Path, *, levels: Iterable[str] | None = None) -> PerturbationSet:
    """A variants file as a :class:`PerturbationSet` (p = the most variants any query has at one level): JSON lines,
    or a ``.json`` mapping ``{query_id: {level: [texts]}}`` (rows in errors then count variants in file order).
    Variants of a level not in ``levels`` (when given) are skipped. A level whose rows are marked
    ``"meaning_changing": true`` (every row of it, or none) is meaning-changing: its settings say so."""
    from routerlab.perturb.control import MEANING_KEY

    src = Path(path)
    known = level_names()  # a level no perturber defines is an error unless its rows declare it (see below)
    flags: dict[str, tuple[bool, int]] = {}
    wanted = None if levels is None else set(levels)
    records = mapping_records(src) if src.suffix.lower() == ".json" else iter_jsonl(src)
    variants: list[Variant] = []
    seen: dict[tuple[str, str, int], int] = {}
    texts: dict[tuple[str, str, str], int] = {}
    counts: dict[tuple[str, str], int] = {}
    order: list[str] = []
    for lineno, obj in records:
        for key in ("query_id", "level", "text"):
            if key not in obj:
                raise DataError(f"missing {key!r}", file=src, row=lineno, field=key)
        qid, level, text = obj["query_id"], obj["level"], obj["text"]
        if isinstance(qid, bool) or not isinstance(qid, (str, int)) or str(qid) == "":
            raise DataError(f"query_id must be a non-empty string, got {qid!r}", file=src, row=lineno,
                            field="query_id")
        if not isinstance(level, str) or not level:
            raise DataError(f"level must be a non-empty string, got {level!r}", file=src, row=lineno, field="level")
        if not isinstance(text, str) or not text.strip():
            raise DataError("text must be a non-empty string", file=src, row=lineno, field="text")
        qid = str(qid)
        flag = obj.get(MEANING_KEY, False)
        if not isinstance(flag, bool):
            raise DataError(f"{MEANING_KEY} must be true or false, got {flag!r}", file=src, row=lineno,
                            field=MEANING_KEY)
        if level not in known and MEANING_KEY not in obj:  # a typo ("banana"), never a level of its own
            raise DataError(f"unknown level {level!r}; the levels are {', '.join(known)} (a level of your own "
                            f"declares itself: mark its rows \"{MEANING_KEY}\": true or false)", file=src,
                            row=lineno, field="level")
        first = flags.setdefault(level, (flag, lineno))
        if first[0] != flag:
            raise DataError(f"level {level!r} is marked {MEANING_KEY} {str(first[0]).lower()} on line {first[1]} "
                            f"and {str(flag).lower()} here: mark every variant of a level alike", file=src,
                            row=lineno, field=MEANING_KEY)
        if wanted is not None and level not in wanted:
            continue
        number = obj.get("variant", counts.get((qid, level), 0))
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise DataError(f"variant must be an integer >= 0, got {number!r}", file=src, row=lineno,
                            field="variant")
        if (qid, level, number) in seen:
            raise DataError(f"variant {number} of query {qid!r} at level {level!r} is already on line "
                            f"{seen[(qid, level, number)]}", file=src, row=lineno, field="variant")
        if (qid, level, text.strip()) in texts:
            raise DataError(f"the same text is already a variant of query {qid!r} at level {level!r} (line "
                            f"{texts[(qid, level, text.strip())]})", file=src, row=lineno, field="text")
        similarity, encoder = obj.get("similarity"), obj.get("encoder")
        if similarity is not None and (isinstance(similarity, bool) or not isinstance(similarity, (int, float))
                                       or not -1.0 <= similarity <= 1.0):
            raise DataError(f"similarity must be a cosine in [-1, 1] or null, got {similarity!r}", file=src,
                            row=lineno, field="similarity")
        if encoder is not None and (not isinstance(encoder, str) or not encoder):
            raise DataError(f"encoder must be a non-empty string or null, got {encoder!r}", file=src, row=lineno,
                            field="encoder")
        seen[(qid, level, number)] = lineno
        texts[(qid, level, text.strip())] = lineno
        counts[(qid, level)] = max(counts.get((qid, level), 0), number + 1)
        if level not in order:
            order.append(level)
        variants.append(Variant(qid, level, number, text, None if similarity is None else float(similarity),
                                encoder if similarity is not None else None))
    if not variants:
        what = "" if wanted is None else f" at level {', '.join(sorted(wanted))}"
        raise DataError(f"no variant{what} in the file", file=src)
    p = max(counts.values())
    stats = {lv: {"queries": len({v.query_id for v in variants if v.level == lv}),
                  "variants": sum(v.level == lv for v in variants)} for lv in order}
    settings = {lv: {"source": str(src), **({MEANING_KEY: True} if flags[lv][0] else {})} for lv in order}
    return PerturbationSet(tuple(variants), tuple(order), p, None, {}, stats, settings)
