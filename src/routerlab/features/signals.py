"""A small model's own per-query signals, read back for two-model routing (SPEC 6).

Two sources, joined to a table's queries **by query id, never by position**:

- a directory written by ``routerlab extract`` (:mod:`routerlab.llm.extract`): ``manifest.json`` and
  ``shards/*.npz`` + ``shards/*.json``. Each row keeps a hash of its question's text, checked against the
  table's text for that id (a table whose text changed since the extraction is an error, not a silent
  mismatch). Where one id was extracted more than once (the text changed), the row matching the text wins;
- precomputed arrays in one ``.npz``: ``ids`` (n,) and any of ``hidden`` (n, layers, dim), ``option_logits``
  (n, K) (NaN beyond a question's options), ``self_ask`` (n,), ``samples`` (n, k) (answer-cluster codes, -1 =
  none, or strings). No text check: the arrays carry none.

:func:`load_signals` returns the arrays in the table's query order, ready for
:meth:`routerlab.features.base.Features.with_signals`: ``hidden`` float16 (cast per batch by the routers; 3,000
questions of a 1.5B model hold 270 MB in float16), the others float32 / int32.

:func:`check_signals_model` pairs an extract directory with the actor it is used for: its manifest records the
model whose hidden states it holds, a collected table (``routerlab collect``, kept by ``join``) records each
actor's model (the actor columns ``model_id`` and ``spec``), and a mismatch is an error; where the table records
nothing the pairing is a warning naming both. An ``.npz`` records no model and is taken as given.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from routerlab.data._files import warn
from routerlab.errors import DataError
from routerlab.llm.extract import text_hash  # the hash extract keeps per row: one definition

if TYPE_CHECKING:
    from routerlab.data.table import RoutingTable

SIGNAL_NAMES = ("hidden", "option_logits", "self_ask", "samples")
SIGNAL_SHAPES = {"hidden": "(n, layers, dim)", "option_logits": "(n, K)", "self_ask": "(n,)", "samples": "(n, k)"}
SIGNAL_NDIM = {"hidden": 3, "option_logits": 2, "self_ask": 1, "samples": 2}


def _codes(rows: Sequence[Sequence[Any]], k: int) -> np.ndarray:
    """Answer strings -> per-row cluster codes (0, 1, ... in order of first appearance; -1 pads short rows)."""
    out = np.full((len(rows), k), -1, dtype=np.int32)
    for i, answers in enumerate(rows):
        seen: dict[Any, int] = {}
        for j, a in enumerate(list(answers)[:k]):
            if a is None or (isinstance(a, str) and a == "") or (isinstance(a, (int, np.integer)) and a < 0):
                continue
            out[i, j] = seen.setdefault(a, len(seen))
    return out


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest of an extract directory (model, layers, dim, settings, runs); {} for an .npz."""
    p = Path(path)
    if p.is_dir():
        m = p / "manifest.json"
        if not m.exists():
            raise DataError("not a signals directory (no manifest.json): run routerlab extract -o DIR", file=p)
        try:
            doc: dict[str, Any] = json.loads(m.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DataError(f"unreadable manifest ({exc})", file=m) from exc
        return doc
    return {}


def _weights(model_id: str) -> str:
    """A model id without the dtype a local backend appends (``local:IDENTITY:bfloat16``): the same weights
    extracted in float32 and collected in bfloat16 are one model."""
    kind, _, rest = model_id.partition(":")
    head, _, tail = rest.rpartition(":")
    return f"{kind}:{head}" if kind == "local" and head and tail in ("bfloat16", "float32") else model_id


def _spec_model(spec: str) -> str:
    """``KIND:MODEL`` of a spec's text, without its options (``local:smollm2-135m,threads=2``)."""
    return spec.split(",", 1)[0].strip()


def _texts(record: Any, keys: Sequence[str]) -> dict[str, str]:
    return {k: record[k].strip() for k in keys if isinstance(record, dict) and isinstance(record.get(k), str)
            and record[k].strip()}


def recorded_model(table: RoutingTable, actor: str) -> dict[str, str]:
    """Which model ``table`` records ``actor`` to be: ``model_id`` (the weights' identity) and ``spec``
    (``KIND:MODEL,...``), from the actor columns a collected or joined table has, else the collect record in
    ``meta["collect"]["actors"]``; {} when it records neither."""
    j = table.actor_names.index(actor)
    out: dict[str, str] = {}
    for key in ("model_id", "spec"):
        col = table.actors.extra.get(key)
        value = None if col is None else col[j]
        if isinstance(value, str) and value.strip():
            out[key] = value.strip()
    collect = table.meta.get("collect")
    runs = collect.get("actors") if isinstance(collect, dict) else None
    if isinstance(runs, dict):
        for key, value in _texts(runs.get(actor), ("model_id", "spec")).items():
            out.setdefault(key, value)
    return out


def check_signals_model(path: str | Path, table: RoutingTable, actor: str) -> None:
    """Refuse the signals of ``path`` for ``actor`` when they are another model's: a DataError naming both when
    the manifest and the table both record the model (weights' identity where both have it, else the spec's
    ``KIND:MODEL``), a warning naming both when only the manifest does. An ``.npz`` records no model: unchecked."""
    manifest = read_manifest(path)
    if not manifest:
        return
    theirs = _texts(manifest, ("model_id", "spec"))
    their_name = _spec_model(theirs["spec"]) if "spec" in theirs else theirs.get("model_id", "an unrecorded model")
    mine = recorded_model(table, actor)
    if not theirs:
        warn(f"the signals' manifest records no model, so they cannot be checked to be the small model "
             f"{actor!r}'s", file=path, field="model_id")
        return
    if not mine:
        warn(f"the signals are hidden states of {their_name}; table {table.name!r} does not record which model "
             f"actor {actor!r} is (tables from routerlab collect or join do), so they cannot be checked to be its",
             file=path, field="model_id")
        return
    if "model_id" in theirs and "model_id" in mine:
        same = _weights(theirs["model_id"]) == _weights(mine["model_id"])
    elif "spec" in theirs and "spec" in mine:
        same = _spec_model(theirs["spec"]) == _spec_model(mine["spec"])
    else:  # an id on one side, a spec on the other: nothing to compare
        warn(f"the signals are hidden states of {their_name}; table {table.name!r} records actor {actor!r} in a "
             "form that cannot be compared with it", file=path, field="model_id")
        return
    if not same:
        my_name = _spec_model(mine["spec"]) if "spec" in mine else mine["model_id"]
        raise DataError(f"the signals are hidden states of {their_name}, but the small model {actor!r} of table "
                        f"{table.name!r} is {my_name}: extract the small model's own signals (routerlab extract "
                        f"--model {my_name} ...)", file=path, field="model_id")


def _from_directory(path: Path, ids: Sequence[str], texts: Sequence[str] | None) -> dict[str, np.ndarray]:
    read_manifest(path)
    by_id: dict[str, list[tuple[dict[str, Any], Path, int]]] = {}
    metas = sorted((path / "shards").glob("*.json"))
    for meta in metas:
        npz = meta.with_suffix(".npz")
        if not npz.exists():
            continue
        try:
            rows = json.loads(meta.read_text(encoding="utf-8"))["rows"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DataError(f"unreadable shard ({exc})", file=meta) from exc
        for r, row in enumerate(rows):
            if not isinstance(row, dict) or "id" not in row or not isinstance(row.get("option_logits"), list):
                raise DataError("a row without its 'id' or 'option_logits' (not written by routerlab extract?)",
                                file=meta, row=r + 1)
            by_id.setdefault(str(row["id"]), []).append((row, npz, r))
    if not by_id:
        raise DataError("the signals directory holds no extracted rows", file=path)
    chosen: list[tuple[dict[str, Any], Path, int]] = []
    for i, qid in enumerate(ids):
        cands = by_id.get(str(qid))
        if not cands:
            raise DataError(f"no extracted signals for query {qid!r} ({sum(q not in by_id for q in ids)} of "
                            f"{len(ids)} queries lack them): extract the same questions", file=path, row=i + 1)
        if texts is not None:
            want = text_hash(texts[i])
            match = [c for c in cands if c[0].get("text_sha") == want]
            if not match:
                raise DataError(f"query {qid!r}: its signals were extracted from a different question text",
                                file=path, row=i + 1, field="text_sha")
            cands = match
        chosen.append(cands[-1])
    n = len(ids)
    hidden: np.ndarray | None = None
    loaded: dict[Path, np.ndarray] = {}
    for i, (_, npz, r) in enumerate(chosen):
        if npz not in loaded:
            try:
                with np.load(npz, allow_pickle=False) as z:
                    loaded[npz] = z["hidden"]
            except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
                raise DataError(f"unreadable hidden states ({exc})", file=npz, field="hidden") from exc
        h = loaded[npz][r]
        if hidden is None:
            hidden = np.empty((n, *h.shape), dtype=np.float16)
        if h.shape != hidden.shape[1:]:
            raise DataError(f"hidden states of shape {h.shape}, expected {hidden.shape[1:]} (two models in one "
                            "directory?)", file=npz)
        hidden[i] = h
    width = max(len(c[0]["option_logits"]) for c in chosen)
    logits = np.full((n, width), np.nan, dtype=np.float32)
    for i, (row, _, _) in enumerate(chosen):
        logits[i, :len(row["option_logits"])] = row["option_logits"]
    out: dict[str, np.ndarray] = {"option_logits": logits}
    if hidden is not None:
        out["hidden"] = hidden
    if all(row.get("self_ask") is not None for row, _, _ in chosen):
        out["self_ask"] = np.asarray([row["self_ask"] for row, _, _ in chosen], dtype=np.float32)
    k = max(len(row.get("samples") or []) for row, _, _ in chosen)
    if k:
        out["samples"] = _codes([row.get("samples") or [] for row, _, _ in chosen], k)
    return out


def _from_npz(path: Path, ids: Sequence[str]) -> dict[str, np.ndarray]:
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise DataError(f"unreadable .npz ({exc})", file=path) from exc
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise DataError("not an .npz archive of named arrays (np.savez(path, ids=..., hidden=...))", file=path)
    with z:
        if "ids" not in z.files:
            raise DataError("precomputed signals need an 'ids' array naming each row's query", file=path,
                            field="ids")
        names = [s for s in SIGNAL_NAMES if s in z.files]
        if not names:
            raise DataError(f"no signal arrays: expected some of {', '.join(SIGNAL_NAMES)}", file=path)
        arrays: dict[str, np.ndarray] = {}
        for s in ("ids", *names):
            try:  # an object array (pickled) or a damaged member
                arrays[s] = z[s]
            except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
                raise DataError(f"unreadable array ({exc})", file=path, field=s) from exc
    ids_array = arrays.pop("ids")
    if ids_array.ndim != 1:
        raise DataError(f"'ids' must be one id per row (1-d), got shape {ids_array.shape}", file=path, field="ids")
    have = [str(x) for x in ids_array.tolist()]
    pos = {q: i for i, q in enumerate(have)}
    if len(pos) != len(have):
        raise DataError("'ids' repeats a query id", file=path, field="ids")
    for s, a in arrays.items():
        if a.ndim == 0 or a.shape[0] != len(have):
            raise DataError(f"{s!r} has shape {a.shape}; its first axis must be the {len(have)} ids", file=path,
                            field=s)
        if a.ndim != SIGNAL_NDIM[s]:
            raise DataError(f"{s!r} has shape {a.shape}; expected {SIGNAL_SHAPES[s]}", file=path, field=s)
    missing = [q for q in ids if q not in pos]
    if missing:
        raise DataError(f"no row for query {missing[0]!r} ({len(missing)} of {len(ids)} queries missing)",
                        file=path, field="ids")
    rows = np.asarray([pos[q] for q in ids], dtype=np.intp)
    out: dict[str, np.ndarray] = {}
    for s, a in arrays.items():
        if s == "samples":
            if a.dtype.kind in "USO":
                out[s] = _codes(a[rows].tolist(), a.shape[1])
                continue
            v = a[rows]
            if v.dtype.kind not in "iu" and not (v.dtype.kind == "f" and np.isfinite(v).all()
                                                 and (v == np.round(v)).all()):
                raise DataError(f"'samples' must be integer answer-cluster codes or answer strings ({v.dtype})",
                                file=path, field=s)
            out[s] = v.astype(np.int32)
            continue
        v = a[rows]
        if v.dtype.kind not in "fiu":
            raise DataError(f"{s!r} is not numeric ({v.dtype})", file=path, field=s)
        if s == "hidden":
            v = v.astype(np.float16, copy=False)
            if v.ndim != 3:
                raise DataError(f"'hidden' must be (n, layers, dim), got {a.shape}", file=path, field=s)
        else:
            v = v.astype(np.float32, copy=False)
        bad = ~np.isfinite(v) if s != "option_logits" else ~np.isfinite(v) & ~np.isnan(v)
        if s == "option_logits":
            bad |= np.isnan(v).all(axis=1, keepdims=True) if v.ndim == 2 else False
        if bad.any():
            r = int(np.argwhere(bad)[0][0])
            raise DataError(f"{s!r} is not finite for query {ids[r]!r}", file=path, field=s, row=int(rows[r]) + 1)
        out[s] = v
    return out


def load_signals(path: str | Path, ids: Sequence[str], texts: Sequence[str] | None = None
                 ) -> dict[str, np.ndarray]:
    """The signals of the queries ``ids`` (their ``texts`` checked where the source keeps text hashes), in that
    order, from an extract directory or a precomputed ``.npz`` (module docstring)."""
    p = Path(path)
    if p.is_dir():
        return _from_directory(p, [str(q) for q in ids], texts)
    if p.suffix.lower() == ".npz" and p.is_file():
        return _from_npz(p, [str(q) for q in ids])
    if not p.exists():
        raise DataError("no such signals directory or .npz file", file=p)
    raise DataError("signals come from a routerlab extract directory or an .npz of arrays", file=p)
