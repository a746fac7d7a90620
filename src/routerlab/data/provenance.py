"""The run record every result carries (SPEC 7): which data (name, content hash, size), which split, which
seed, which encoder and routers, and which routerlab version made it.

Built in one place (:meth:`Provenance.of`) and written in one shape (:meth:`Provenance.to_dict`) by
``evaluate``, ``scaling``, ``groups``, ``society`` and ``audit``, so that any two results can be compared
field by field and any result can be reproduced from its record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from routerlab._version import __version__

if TYPE_CHECKING:
    from routerlab.data.splits import Split
    from routerlab.data.table import RoutingTable


@dataclass(frozen=True)
class Provenance:
    """What a result was computed from. ``split`` is a split's description (or a word such as ``"all"``
    for results that use no train/test split); ``encoder`` and ``routers`` are absent where none was used."""

    data: dict[str, Any]
    split: dict[str, Any] | str
    seed: int | None = None
    encoder: str | None = None
    routers: tuple[str, ...] | None = None
    version: str = __version__

    @classmethod
    def of(
        cls, table: RoutingTable, split: Split | dict[str, Any] | str, *, seed: int | None = None,
        encoder: str | None = None, routers: list[str] | tuple[str, ...] | None = None,
        data_extra: dict[str, Any] | None = None, split_extra: dict[str, Any] | None = None,
    ) -> Provenance:
        """The record of a run on ``table`` with ``split`` (a :class:`Split`, its description, or a word);
        ``data_extra`` / ``split_extra`` add facts to the data and split parts (e.g. ``n_test``)."""
        data = {"name": table.name, "content_hash": table.content_hash, "n_queries": table.n_queries,
                "n_actors": table.n_actors, **(data_extra or {})}
        described: dict[str, Any] | str = split if isinstance(split, dict | str) else split.describe()
        if split_extra:
            described = {**(described if isinstance(described, dict) else {"kind": described}), **split_extra}
        return cls(data, described, seed, encoder, None if routers is None else tuple(routers))

    def to_dict(self) -> dict[str, Any]:
        """``routerlab_version``, ``data``, ``split``, then ``encoder``, ``seed`` and ``routers`` where known."""
        out: dict[str, Any] = {"routerlab_version": self.version, "data": dict(self.data), "split": self.split}
        if self.encoder is not None:
            out["encoder"] = self.encoder
        if self.seed is not None:
            out["seed"] = self.seed
        if self.routers is not None:
            out["routers"] = list(self.routers)
        return out
