"""Routing robustness rho under meaning-preserving perturbations, and the invariance check of its
assumption (SPEC 3, hse-diversity-and-routing-robustness.txt sec. 5; hse-paper-review.json).

``perturbed_choices`` is an (n, p) matrix: column j holds the router's actor for perturbation j of each
query. Decision where SPEC is silent: a negative entry marks a perturbation that does not exist (ragged
data); rho_i averages over the existing ones, and a query with none is left out of every mean (its
rho_i is NaN), so no query is scored on perturbations it does not have.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from routerlab.metrics._arrays import BoolArray, FloatArray, IntArray, as_choice


def _inputs(original_choice: npt.ArrayLike, perturbed_choices: npt.ArrayLike) -> tuple[IntArray, IntArray]:
    orig = as_choice(original_choice, None, None, "original_choice")
    pert = np.asarray(perturbed_choices)
    if pert.ndim == 1:
        pert = pert[:, None]
    if pert.ndim != 2 or pert.shape[0] != orig.size:
        raise ValueError(f"perturbed_choices must have shape ({orig.size}, p), got {pert.shape}")
    if (orig < 0).any():
        raise ValueError("original_choice must hold actor indices >= 0")
    return orig, pert.astype(np.intp)


def _rho_rows(orig: IntArray, pert: IntArray, use: BoolArray) -> FloatArray:
    """rho_i over the perturbations marked in ``use``; NaN for a query with none."""
    same = (pert == orig[:, None]) & use
    count = use.sum(axis=1)
    out = np.full(orig.size, np.nan)
    np.divide(same.sum(axis=1), count, out=out, where=count > 0)
    return out


def _mean_known(values: FloatArray) -> float:
    known = values[~np.isnan(values)]
    return float(known.mean()) if known.size else float("nan")


def rho_per_query(original_choice: npt.ArrayLike, perturbed_choices: npt.ArrayLike) -> FloatArray:
    """rho_i = share of query i's perturbations routed to the original's actor (SPEC 3, paper eq. 5);
    NaN for a query without perturbations."""
    orig, pert = _inputs(original_choice, perturbed_choices)
    return _rho_rows(orig, pert, pert >= 0)


def rho(original_choice: npt.ArrayLike, perturbed_choices: npt.ArrayLike) -> float:
    """rho = mean over queries of rho_i (SPEC 3, paper eq. 6): 1 for a fixed router, 1/N in expectation
    for a uniform random one over N actors."""
    return _mean_known(rho_per_query(original_choice, perturbed_choices))


def rho_per_actor(original_choice: npt.ArrayLike, perturbed_choices: npt.ArrayLike, m: int) -> FloatArray:
    """rho^(k) = mean rho_i over the queries originally routed to actor k; 0 where none are (SPEC 3,
    paper eq. 7)."""
    orig, _ = _inputs(original_choice, perturbed_choices)
    if orig.size and orig.max() >= m:
        raise ValueError(f"original_choice has an actor index >= m = {m}")
    values = rho_per_query(original_choice, perturbed_choices)
    known = ~np.isnan(values)
    sums = np.bincount(orig[known], weights=values[known], minlength=m)
    counts = np.bincount(orig[known], minlength=m)
    out = np.zeros(m)
    np.divide(sums, counts, out=out, where=counts > 0)
    return out


def rho_by_level(
    original_choice: npt.ArrayLike, perturbed_choices: npt.ArrayLike, levels: Sequence[str]
) -> dict[str, float]:
    """rho per perturbation level (SPEC 3: character, word, syntax, paraphrase, rambling); ``levels``
    names the level of each column of ``perturbed_choices``."""
    orig, pert = _inputs(original_choice, perturbed_choices)
    labels = np.asarray(levels)
    if labels.shape != (pert.shape[1],):
        raise ValueError(f"levels must name each of the {pert.shape[1]} perturbation columns")
    return {
        str(level): _mean_known(_rho_rows(orig, pert, (pert >= 0) & (labels == level)[None, :]))
        for level in dict.fromkeys(labels.tolist())
    }


@dataclass(frozen=True)
class InvarianceCheck:
    """The invariance check of rho's assumption (SPEC 3): does the optimal actor survive perturbation?

    ``changed_share`` is the share of perturbations with known outcomes whose optimal actor differs from
    the original query's; ``rho_invariant`` is rho on the perturbations whose optimal actor does not.
    Both are NaN when no outcome is known (``n_known`` = 0): unknown is reported, never assumed.
    """

    n_perturbations: int
    n_known: int
    changed_share: float
    rho_all: float
    rho_invariant: float


def invariance_check(
    original_optimal: npt.ArrayLike,
    perturbed_optimal: npt.ArrayLike,
    original_choice: npt.ArrayLike,
    perturbed_choices: npt.ArrayLike,
) -> InvarianceCheck:
    """Check rho's assumption that perturbations keep the optimal actor (SPEC 3, review's concrete test).

    The optimal actors come from the scores of the original and perturbed queries, e.g. with
    ``selection.oracle_choice`` on each; a negative entry of ``perturbed_optimal`` means its outcome is
    unknown and that perturbation is left out of ``changed_share`` and ``rho_invariant``.
    """
    orig, pert = _inputs(original_choice, perturbed_choices)
    opt, pert_opt = _inputs(original_optimal, perturbed_optimal)
    if opt.shape != orig.shape or pert_opt.shape != pert.shape:
        raise ValueError("optimal actors must have the shapes of the choices")
    exists = pert >= 0
    known = exists & (pert_opt >= 0)
    invariant = known & (pert_opt == opt[:, None])
    n_known = int(known.sum())
    return InvarianceCheck(
        n_perturbations=int(exists.sum()),
        n_known=n_known,
        changed_share=float((known & ~invariant).sum() / n_known) if n_known else float("nan"),
        rho_all=_mean_known(_rho_rows(orig, pert, exists)),
        rho_invariant=_mean_known(_rho_rows(orig, pert, invariant)),
    )


def invariance_by_level(
    original_optimal: npt.ArrayLike,
    perturbed_optimal: npt.ArrayLike,
    original_choice: npt.ArrayLike,
    perturbed_choices: npt.ArrayLike,
    levels: Sequence[str],
) -> dict[str, InvarianceCheck]:
    """``invariance_check`` per perturbation level (SPEC 3 asks for it per level); ``levels`` names the
    level of each column."""
    pert_opt = np.asarray(perturbed_optimal)
    pert = np.asarray(perturbed_choices)
    labels = np.asarray(levels)
    if pert.ndim != 2 or labels.shape != (pert.shape[1],):
        raise ValueError("levels must name each column of perturbed_choices")
    return {
        str(level): invariance_check(
            original_optimal, pert_opt[:, labels == level], original_choice, pert[:, labels == level]
        )
        for level in dict.fromkeys(labels.tolist())
    }
