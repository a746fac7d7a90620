"""Spec strings such as ``knn:k=10,metric=cosine`` or ``tfidf:dim=128``: one parser for routers and encoders."""

from __future__ import annotations

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
