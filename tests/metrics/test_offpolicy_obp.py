"""Optional: routerlab's IPS, SNIPS and DR equal Open Bandit Pipeline's estimators on the same logs (Saito et al.
2021; ``pip install --no-deps obp`` beside pandas, seaborn, torch and scikit-learn). Skipped where obp is absent,
as in CI, whose environment does not carry it."""

from __future__ import annotations

import numpy as np
import pytest

from routerlab.metrics import offpolicy as op

obp_ope = pytest.importorskip("obp.ope")

pytestmark = pytest.mark.optional


@pytest.mark.parametrize("deterministic", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_point_estimates_equal_obp(seed: int, deterministic: bool) -> None:
    rng = np.random.default_rng(seed)
    n, m = 400, 6
    logging = rng.dirichlet(np.ones(m), size=n)
    action = np.array([rng.choice(m, p=row) for row in logging])
    pscore = logging[np.arange(n), action]
    reward = rng.binomial(1, 0.3 + 0.1 * (action % 4)).astype(np.float64)
    target = np.eye(m)[rng.integers(0, m, size=n)] if deterministic else rng.dirichlet(np.ones(m), size=n)
    rhat = rng.random((n, m))
    pi = op.target_probability(target, action)
    # obp's shapes: action_dist and estimated rewards (n, m, positions), positions all 0
    dist3, rhat3, position = target[:, :, None], rhat[:, :, None], np.zeros(n, dtype=int)
    kw = {"reward": reward, "action": action, "pscore": pscore, "action_dist": dist3, "position": position}
    ips = obp_ope.InverseProbabilityWeighting().estimate_policy_value(**kw)
    snips = obp_ope.SelfNormalizedInverseProbabilityWeighting().estimate_policy_value(**kw)
    dr = obp_ope.DoublyRobust().estimate_policy_value(**kw, estimated_rewards_by_reg_model=rhat3)
    assert float(op.ips(reward, pi, pscore)) == pytest.approx(ips, rel=1e-12, abs=1e-12)
    assert float(op.snips(reward, pi, pscore)) == pytest.approx(snips, rel=1e-12, abs=1e-12)
    assert float(op.dr(reward, action, pscore, target, rhat)) == pytest.approx(dr, rel=1e-12, abs=1e-12)
