"""Progress of long steps, always on stderr (stdout carries results and ``--json``).

On a terminal a step shows a tqdm bar. Anywhere else (a log file, CI, a pipe) it writes plain lines
such as ``routerlab: evaluate: router knn (4/13) ... 2.1 s``: one line for an item that took at least
:data:`MIN_SECONDS`, a "so far" line at most every :data:`HEARTBEAT_SECONDS` in a loop of fast items,
and a closing line for a loop that took long without saying so. ``ROUTERLAB_PROGRESS`` picks the mode:
``0`` (or ``off``) is silent, ``bar`` or ``lines`` force one, anything else chooses by whether stderr
is a terminal. This module imports only the standard library and tqdm, so any module may use it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")

ENV = "ROUTERLAB_PROGRESS"
MIN_SECONDS = 1.0
"""A finished item (or a whole silent loop) gets its own line in line mode when it took this long."""
HEARTBEAT_SECONDS = 5.0
"""In line mode a loop of fast items says how far it got at most this often."""


def mode() -> str:
    """``"off"``, ``"bar"`` or ``"lines"``: how progress is shown right now (see the module docstring)."""
    value = os.environ.get(ENV, "").strip().lower()
    if value in {"0", "off", "false", "no", "none"}:
        return "off"
    if value in {"bar", "lines"}:
        return value
    stream = sys.stderr
    try:
        return "bar" if stream is not None and stream.isatty() else "lines"
    except (AttributeError, ValueError):  # a closed or unusual stream
        return "lines"


def _count(n: float, unit_scale: bool) -> str:
    return tqdm.format_sizeof(n, divisor=1000).strip() if unit_scale else f"{n:g}"


class Progress:
    """A progress display for one step of ``total`` items (or an unknown number): with ``enabled``
    None (the default), a tqdm bar on a terminal, rate-limited plain lines elsewhere, nothing when
    progress is off; ``enabled=True`` forces a bar, ``False`` hides it.

    ``update(n, label)`` marks ``n`` more items done; ``label`` names the item that just finished and
    is shown in its line (``desc label (i/total) ... seconds``). ``start(label)`` names the item now
    running (the bar's postfix) and restarts its clock.
    """

    def __init__(self, desc: str, total: int | None = None, *, unit: str = "it", initial: int = 0,
                 unit_scale: bool = False, enabled: bool | None = None) -> None:
        self.desc = desc
        self.total = total
        self.unit = unit
        self.unit_scale = unit_scale
        self.n = initial
        self._mode = {False: "off", True: "bar", None: mode()}[enabled]
        self._t0 = self._item_t0 = self._last_line = time.perf_counter()
        self._silent_since = 0  # items done since the last line
        self._closed = False
        self._bar: Any = None
        if self._mode == "bar":
            self._bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, unit_scale=unit_scale,
                             leave=False, file=sys.stderr, disable=False, dynamic_ncols=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(failed=exc_type is not None)

    def start(self, label: str | None = None) -> None:
        """The item named ``label`` starts now (shown beside a bar; its line times it from here)."""
        self._item_t0 = time.perf_counter()
        if self._bar is not None and label is not None:
            self._bar.set_postfix_str(label, refresh=True)

    def update(self, n: int = 1, label: str | None = None) -> None:
        """``n`` more items are done; ``label`` names the item that just finished."""
        self.n += n
        if self._bar is not None:
            self._bar.update(n)
            return
        if self._mode != "lines":
            return
        now = time.perf_counter()
        item_dt = now - self._item_t0
        if label is not None and item_dt >= MIN_SECONDS:
            self._line(f"{label} {self._fraction()} ... {item_dt:.1f} s", now)
        elif now - self._last_line >= HEARTBEAT_SECONDS:
            self._line(f"{self._fraction()} ... {now - self._t0:.1f} s so far", now)
        else:
            self._silent_since += n
        self._item_t0 = now

    def close(self, *, failed: bool = False) -> None:
        """End the display; in line mode a loop whose unreported last items took long gets one line."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
            return
        now = time.perf_counter()
        if self._mode == "lines" and not failed and self._silent_since and now - self._last_line >= MIN_SECONDS:
            self._line(f"{self._fraction()} done ... {now - self._t0:.1f} s", now)

    def finish(self) -> None:
        """End a one-item step (see :func:`task`): its line says how long it took."""
        if self._bar is not None:
            self._bar.update(1)
        elif self._mode == "lines" and not self._closed:
            took = time.perf_counter() - self._t0
            if took >= MIN_SECONDS:
                self._line(f"... {took:.1f} s", time.perf_counter())
        self._closed = True
        if self._bar is not None:
            self._bar.close()

    def _fraction(self) -> str:
        done = _count(self.n, self.unit_scale)
        if self.total is None:
            return f"({done} {self.unit})"
        unit = f" {self.unit}" if self.unit_scale else ""
        return f"({done}/{_count(self.total, self.unit_scale)}{unit})"

    def _line(self, text: str, now: float) -> None:
        self._last_line = now
        self._silent_since = 0
        print(f"routerlab: {self.desc} {text}", file=sys.stderr, flush=True)


def track(items: Iterable[T], desc: str, *, total: int | None = None, unit: str = "it",
          label: Callable[[T], str] | None = None, enabled: bool | None = None) -> Iterator[T]:
    """Iterate over ``items`` showing progress; ``label(item)`` names each item in its line or bar."""
    if total is None:
        try:
            total = len(items)  # type: ignore[arg-type]
        except TypeError:
            total = None
    with Progress(desc, total, unit=unit, enabled=enabled) as bar:
        for item in items:
            name = label(item) if label is not None else None
            bar.start(name)
            yield item
            bar.update(1, name)


@contextmanager
def task(desc: str, *, enabled: bool | None = None) -> Iterator[None]:
    """One step of unknown length (encoding features, a bootstrap): a bar while it runs on a terminal,
    one line with its duration elsewhere when it took at least :data:`MIN_SECONDS`."""
    bar = Progress(desc, 1, enabled=enabled)
    try:
        yield
    except BaseException:
        bar.close(failed=True)
        raise
    bar.finish()
