"""torch's intra-op thread count, changed for a block without racing other threads.

``torch.set_num_threads`` is process-wide. Three places run torch on a chosen count (the local LLM backend's
``threads=`` option, the MiniLM encoder's ``threads`` option, the probe routers' one-thread training); under
``routerlab serve`` such blocks run in several threads at once, and a plain save/set/restore in each lets one
thread restore the count while another still relies on its own (or leaves the wrong count behind for good).

:func:`torch_threads` counts the blocks that hold a count: blocks asking for the same count run together,
a block asking for another waits until they have all left, and the count the process had before is restored
when the last one leaves. A block nested in one of the same thread runs on the outer block's count. Torch work
outside any block runs on whatever count is current (the setting is process-wide; nothing can scope it to a
thread).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_cond = threading.Condition()
_held: dict[str, Any] = {"count": 0, "threads": 0, "before": 0}  # blocks inside, their count, the count before
_local = threading.local()


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block with torch on ``n`` intra-op threads (``n <= 0``: leave the count as it is)."""
    depth: int = getattr(_local, "depth", 0)
    if n <= 0 or depth:  # nothing to set, or nested: the outer block's count stands
        _local.depth = depth + (n > 0)
        try:
            yield
        finally:
            _local.depth = depth
        return
    import torch

    with _cond:
        while _held["count"] and _held["threads"] != n:
            _cond.wait()
        if not _held["count"]:
            _held["before"] = torch.get_num_threads()
            if _held["before"] != n:
                torch.set_num_threads(n)
            _held["threads"] = n
        _held["count"] += 1
    _local.depth = 1
    try:
        yield
    finally:
        _local.depth = 0
        with _cond:
            _held["count"] -= 1
            if not _held["count"]:
                if torch.get_num_threads() != _held["before"]:
                    torch.set_num_threads(_held["before"])
                _cond.notify_all()
