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
