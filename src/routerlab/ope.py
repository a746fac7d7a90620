"""Off-policy evaluation, the public entry point: estimate any router's metrics from logs alone.

``off_policy_evaluate(table, logs, routers)`` trains the routers on the table's training side, routes the logged
queries and estimates mu_o, mean cost and latency (and Acc@1-L, DCG, L-DCG from a simulated log's reward columns)
with IPS, SNIPS and DR, each with a 95% interval, the effective sample size and warnings
(:mod:`routerlab.protocols.ope`). The estimators themselves are pure array functions
(:mod:`routerlab.metrics.offpolicy`), re-exported here. Formulas and references: docs/off-policy.md.
"""

from routerlab.metrics.offpolicy import (
    ESTIMATORS,
    Contributions,
    WeightDiagnostics,
    bootstrap_intervals,
    contributions,
    dr,
    dr_contributions,
    effective_sample_size,
    fold_assignment,
    importance_weights,
    ips,
    ips_contributions,
    ridge_reward_model,
    snips,
    snips_contributions,
    target_probability,
    weight_diagnostics,
)
from routerlab.protocols.ope import METRICS, OffPolicyWarning, OPEResult, OPERouterResult, off_policy_evaluate

__all__ = [
    "ESTIMATORS",
    "METRICS",
    "Contributions",
    "OPEResult",
    "OPERouterResult",
    "OffPolicyWarning",
    "WeightDiagnostics",
    "bootstrap_intervals",
    "contributions",
    "dr",
    "dr_contributions",
    "effective_sample_size",
    "fold_assignment",
    "importance_weights",
    "ips",
    "ips_contributions",
    "off_policy_evaluate",
    "ridge_reward_model",
    "snips",
    "snips_contributions",
    "target_probability",
    "weight_diagnostics",
]
