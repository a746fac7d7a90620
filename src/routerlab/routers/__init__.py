"""Routers: one small contract (:class:`Router`), a decorator registry, one module per family."""

from routerlab.metrics.selection import softmax
from routerlab.routers.base import Router, get_router, parse_router_spec, register, routers, split_router_list

__all__ = ["Router", "get_router", "parse_router_spec", "register", "routers", "softmax", "split_router_list"]
