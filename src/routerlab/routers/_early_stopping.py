"""Early stopping on a development part (private helper of the routers that train by epochs: ``mlp``, ``barp``, the
probes).

The router measures one value on its development queries before training (epoch 0) and after every epoch; the
epoch with the best value is kept (an improvement must beat the best by more than ``min_delta``, so a tie keeps the
earlier, shorter-trained epoch), and training stops once ``patience`` epochs in a row brought none. The record
(:meth:`EarlyStopping.describe`) says which value, the epoch kept, the epochs run and the whole curve, so a result
shows why that epoch was chosen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class EarlyStopping:
    """The development curve of one fit and the epoch it keeps (module docstring). ``metric`` names the value
    (``dev_mu_o``: mean score of the router's choices, higher is better; ``dev_bce``: its training loss, lower is
    better)."""

    metric: str
    higher_is_better: bool
    patience: int
    min_delta: float = 1e-6
    curve: list[float] = field(default_factory=list)  # index k = the value after k epochs (0 = before training)
    best_epoch: int = 0
    stale: int = 0

    @property
    def epochs_run(self) -> int:
        return max(len(self.curve) - 1, 0)

    @property
    def best(self) -> float:
        return self.curve[self.best_epoch]

    def update(self, value: float) -> tuple[bool, bool]:
        """Record the value after the next epoch (the first call: before training). Returns (improved, stop):
        whether this epoch is the new best (keep its parameters), and whether patience has run out. A non-finite
        value is never an improvement (a diverged epoch is not kept)."""
        value = float(value)
        epoch = len(self.curve)
        self.curve.append(value)
        if epoch == 0:
            self.best_epoch, self.stale = 0, 0
            return True, False
        best = self.best
        if not math.isfinite(best):
            better = math.isfinite(value)
        elif self.higher_is_better:
            better = value > best + self.min_delta
        else:
            better = value < best - self.min_delta
        if better:
            self.best_epoch, self.stale = epoch, 0
            return True, False
        self.stale += 1
        return False, self.stale >= self.patience

    def describe(self, n_dev: int, max_epochs: int) -> dict[str, Any]:
        """The record a router keeps in ``early_stopping`` (and a result shows): ``best_epoch`` is the epoch whose
        parameters were kept (0 = the untrained start), ``curve[k]`` the development value after k epochs."""
        return {
            "on": "dev", "n_dev": int(n_dev), "metric": self.metric,
            "direction": "max" if self.higher_is_better else "min",
            "best_epoch": int(self.best_epoch), "epochs_run": int(self.epochs_run), "max_epochs": int(max_epochs),
            "patience": int(self.patience), "stopped_early": self.epochs_run < max_epochs,
            "best_value": _finite(self.best), "curve": [_finite(v) for v in self.curve],
        }


def _finite(v: float) -> float | None:
    """A curve value for JSON: rounded to 6 places, None where it is not finite (JSON has no NaN)."""
    return round(float(v), 6) if math.isfinite(v) else None
