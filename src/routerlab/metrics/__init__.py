"""Metrics: pure functions of arrays (SPEC 3-7), each documented with the SPEC section it implements.

Modules, one per family: ``selection`` (SPEC 4: selection vectors, oracle, mu_o, V_B, V_R, E_p,
collapse), ``latency`` (SPEC 5: Acc@1, Acc@1-L, DCG, L-DCG, Oracle(Best-of-N)), ``cost`` (cost and
latency of choices, utility routing, Pareto frontier, AIQ), ``curves`` (SPEC 6: call-rate curve, AUROC,
LPM/HCR/MPM, AUC, APGR, CPT; each with the peer conventions of SPEC 6), ``robustness`` (SPEC 3: rho
and its invariance check), ``bootstrap`` (SPEC 7
intervals), ``registry`` (named per-query metrics and ``evaluate_choices``), ``bounds`` (oracle /
random / best-single bounds). The NaN rule shared by all is stated in ``_arrays``: a chosen
unobserved cell raises ``ValueError`` naming the query unless a ``nan_policy`` says otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from routerlab.metrics.cost import aiq, routerbench_hull
    from routerlab.metrics.curves import (
        CallRateCurve,
        apgr,
        auc_phi,
        auroc,
        call_rate_curve,
        call_rate_to_recover,
        cpt,
        hcr,
        lpm,
        mpm,
        router_auroc,
    )

__all__ = [
    "CallRateCurve",
    "aiq",
    "apgr",
    "auc_phi",
    "auroc",
    "call_rate_curve",
    "call_rate_to_recover",
    "cpt",
    "hcr",
    "lpm",
    "mpm",
    "router_auroc",
    "routerbench_hull",
]


def __getattr__(name: str) -> Any:
    """The re-exported functions, imported on first use: ``routerlab.metrics.catalog`` (what ``routerlab metrics``
    and ``results`` read) needs no numpy, and importing it imports this package first."""
    if name in __all__:
        import importlib

        module = "routerlab.metrics.cost" if name in ("aiq", "routerbench_hull") else "routerlab.metrics.curves"
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
