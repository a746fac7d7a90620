"""Synthetic specialist societies from a labelled partition of the items (SPEC 2; paper app. 10.3).

One binary expert per group: it scores 1 on every item of its group and 0 elsewhere, a specialist
with perfect but narrowly scoped expertise. A partition by subject gives the paper's SA society, one
by reasoning depth its RD society, and the union of the two its RD+SA pool. Experts of one
partition are mutually orthogonal, so their HSE is log2(number of groups) under cosine distance.

Items whose label is missing (``""`` or ``None``, routerlab's "unknown") belong to no group, so every
expert scores 0 on them; this choice is routerlab's, the paper labelling every item.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from routerlab._words import plural, verb
from routerlab.errors import DataError, UsageError
from routerlab.society.behaviour import Society

if TYPE_CHECKING:
    from routerlab.data.table import RoutingTable


def specialist_society(labels: npt.ArrayLike, *, prefix: str = "") -> Society:
    """One expert per distinct label (sorted), scoring 1 on its group's items and 0 elsewhere."""
    lab = np.asarray(labels, dtype=object).ravel()
    if lab.size == 0:
        raise DataError("a specialist society needs at least one item")
    text = np.array(["" if v is None else str(v) for v in lab.tolist()], dtype=object)
    groups = sorted({str(v) for v in text.tolist()} - {""})
    if not groups:
        raise DataError("every item label is missing; a specialist society needs labelled items")
    B = np.zeros((len(groups), lab.size), dtype=np.float32)
    for g, name in enumerate(groups):
        B[g, text == name] = 1.0
    notes = []
    unlabelled = int(np.count_nonzero(text == ""))
    if unlabelled:
        notes.append(f"{plural(unlabelled, 'item')} {verb(unlabelled, 'has', 'have')} no label; every expert scores "
                     f"0 on {verb(unlabelled, 'it', 'them')}")
    return Society(B, [f"{prefix}{g}" for g in groups], notes)


def item_labels(table: RoutingTable, by: str, split: str | None = "train") -> npt.NDArray[np.object_]:
    """The label of each item of ``table``'s behaviour matrix: ``dataset`` or a query metadata column.

    Uses the same rows as :func:`routerlab.society.behaviour.from_table` (``split``, or all rows of a
    table without split labels).
    """
    if by == "dataset":
        col: Any = table.queries.dataset
    elif by in table.queries.extra:
        col = table.queries.extra[by]
    else:
        known = ["dataset", *sorted(table.queries.extra)]
        raise UsageError(f"no query column {by!r} to partition the items by; columns are {known}")
    arr: npt.NDArray[np.object_] = np.asarray(col, dtype=object)
    if split is None:
        return arr
    labels = table.queries.split.astype(str)
    mask = labels == split
    if mask.any():
        return np.asarray(arr[mask], dtype=object)
    if split == "train" and not np.any(labels != ""):
        return arr
    raise UsageError(f"no query has split {split!r}; splits are {sorted(set(labels.tolist()))}")


def table_specialists(table: RoutingTable, by: str, split: str | None = "train") -> Society:
    """The specialist society of a table's items partitioned by ``by`` (``dataset`` or a query column)."""
    return specialist_society(item_labels(table, by, split), prefix=f"{by}=")


def union_society(*societies: Society) -> Society:
    """All actors of several societies over the same items (the paper's RD+SA pool)."""
    if not societies:
        raise UsageError("union_society needs at least one society")
    L = societies[0].n_items
    if any(s.n_items != L for s in societies):
        raise DataError(f"societies to unite must share the items; sizes {[s.n_items for s in societies]}")
    names: list[str] = []
    for s in societies:
        for name in s.names:
            new, i = name, 2
            while new in names:
                new, i = f"{name}#{i}", i + 1
            names.append(new)
    B = np.concatenate([np.asarray(s.matrix, dtype=np.float32) for s in societies], axis=0)
    return Society(B, names, [n for s in societies for n in s.notes])


def orthogonal_society(n: int, items_per_actor: int = 1) -> Society:
    """``n`` mutually orthogonal binary actors (each succeeds on its own items only): HSE = log2 n."""
    if n < 1 or items_per_actor < 1:
        raise UsageError("orthogonal_society needs n >= 1 and items_per_actor >= 1")
    return specialist_society(np.repeat([f"g{i:04d}" for i in range(n)], items_per_actor))
