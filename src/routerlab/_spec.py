"""Spec strings such as ``knn:k=10,metric=cosine`` or ``tfidf:dim=128``: one parser for routers and encoders."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from routerlab.errors import UsageError


def coerce(value: str) -> Any:
    """Turn an option's text into a bool, None, int, float or ``a/b/c`` tuple; anything else stays text."""
    low = value.lower()
    if low in {"true", "false"}:
        return low == "true"
    if low in {"none", "null"}:
        return None
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    if "/" in value:  # lists as a/b/c, e.g. mlp:hidden=1024/512/256/128
        return tuple(coerce(v) for v in value.split("/"))
    return value


def parse_spec(spec: str, what: str = "router", *, coerce_values: bool = True) -> tuple[str, dict[str, Any]]:
    """``name:key=value,key=value`` -> (name, options); ``what`` names the kind in error messages.

    With ``coerce_values=False`` the values stay strings, for callers that coerce by option type
    (a file path such as ``a/b.npy`` must not become a tuple).
    """
    name, _, rest = spec.strip().partition(":")
    params: dict[str, Any] = {}
    for part in filter(None, rest.split(",")):
        key, eq, value = part.partition("=")
        if not eq:
            raise UsageError(f"bad {what} option {part!r} in {spec!r}; write name:key=value,key=value")
        params[key.strip()] = coerce(value.strip()) if coerce_values else value.strip()
    return name.strip(), params


def check_option_type(owner: str, key: str, value: Any, default: Any) -> None:
    """An option must have its default's type (an int is fine where a float is expected; a bare number
    where a tuple of layer sizes is): a clear UsageError here, never a ValueError deep inside a router or importer."""
    if default is None or key == "seed":
        return
    expected: tuple[type, ...]
    if isinstance(default, bool):
        expected = (bool,)
    elif isinstance(default, int):
        expected = (int,)
    elif isinstance(default, float):
        expected = (int, float)
    elif isinstance(default, tuple):
        expected = (tuple, int)
    else:
        expected = (type(default),)
    ok = isinstance(value, expected) and not (isinstance(value, bool) and bool not in expected)
    if ok and isinstance(value, tuple):
        ok = all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    if not ok:
        raise UsageError(f"{owner}: option {key}={value!r} should be "
                         f"{' or '.join(t.__name__ for t in expected)}, like its default {default!r}")


# ---------------------------------------------------------------------------- option constraints
class Interval:
    """A numeric range an option must lie in, e.g. ``Interval(int, 1, None)`` (k >= 1) or
    ``Interval(float, 0, None, closed="neither")`` (lr > 0). ``None`` bounds are open-ended; NaN is
    always refused and +-inf unless ``allow_inf``. ``kind=int`` refuses a float; ``kind=float`` takes an int.
    A tuple value (``hidden=1024/512``) is checked element by element."""

    def __init__(
        self, kind: type, low: float | None, high: float | None, *, closed: str = "both", allow_inf: bool = False,
    ) -> None:
        if closed not in {"both", "left", "right", "neither"}:
            raise ValueError(f"closed must be both, left, right or neither, got {closed!r}")
        self.kind, self.low, self.high, self.closed, self.allow_inf = kind, low, high, closed, allow_inf

    def describe(self) -> str:
        """The range in words, e.g. ``an integer >= 1``, ``a number in (0, 1]`` or ``an integer in [40,
        1,000,000]``."""
        def g(x: float) -> str:
            return f"{int(x):,}" if float(x).is_integer() and abs(x) >= 10_000 else f"{x:g}"

        what = "an integer" if self.kind is int else "a finite number" if not self.allow_inf else "a number"
        left_in = self.closed in {"both", "left"}
        right_in = self.closed in {"both", "right"}
        if self.low is not None and self.high is not None:
            return f"{what} in {'[' if left_in else '('}{g(self.low)}, {g(self.high)}{']' if right_in else ')'}"
        if self.low is not None:
            return f"{what} {'>=' if left_in else '>'} {g(self.low)}"
        if self.high is not None:
            return f"{what} {'<=' if right_in else '<'} {g(self.high)}"
        return what

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` (a number, or a tuple of numbers) lies in the range."""
        if isinstance(value, tuple):
            return all(self.accepts(v) for v in value)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.kind is int and not isinstance(value, int):
            return False
        v = float(value)
        if math.isnan(v) or (math.isinf(v) and not self.allow_inf):
            return False
        if self.low is not None and (v < self.low or (v == self.low and self.closed in {"right", "neither"})):
            return False
        if self.high is None:
            return True
        return not (v > self.high or (v == self.high and self.closed in {"left", "neither"}))


class Options:
    """A closed set of allowed values, e.g. ``Options({"cosine", "euclidean"})``."""

    def __init__(self, allowed: set[Any] | frozenset[Any]) -> None:
        self.allowed = frozenset(allowed)

    def describe(self) -> str:
        return "one of " + ", ".join(sorted(str(v) for v in self.allowed))

    def accepts(self, value: Any) -> bool:
        try:
            return value in self.allowed
        except TypeError:  # unhashable
            return False


Constraint = Interval | Options


def check_constraints(owner: str, params: Mapping[str, Any], constraints: Mapping[str, Constraint]) -> None:
    """Every option named in ``constraints`` must satisfy its constraint: one UsageError naming the owner,
    the option, the value and the allowed range, never a traceback or a silent nonsense result later."""
    for key, rule in constraints.items():
        if key in params and not rule.accepts(params[key]):
            value = params[key]
            shown = "/".join(str(v) for v in value) if isinstance(value, tuple) else repr(value)
            raise UsageError(f"{owner}: option {key}={shown} is out of range; it must be {rule.describe()}")
