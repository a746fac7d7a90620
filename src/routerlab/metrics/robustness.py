"""Routing robustness rho under meaning-preserving perturbations, its chance-corrected form kappa_rho, and the
invariance check of its assumption (SPEC 3, hse-diversity-and-routing-robustness.txt sec. 5; hse-paper-review.json).

``perturbed_choices`` is an (n, p) matrix: column j holds the router's actor for perturbation j of each
query. Decision where SPEC is silent: a negative entry marks a perturbation that does not exist (ragged
data); rho_i averages over the existing ones, and a query with none is left out of every mean (its
rho_i is NaN), so no query is scored on perturbations it does not have.

kappa_rho = (rho - rho_chance) / (1 - rho_chance), rho_chance = sum_a p_a^2 (SPEC 3): p is the router's choice
distribution over the original queries that rho averages over (those with at least one perturbation of the slice),
so rho_chance is exactly the rho a router would get whose variant choices were independent draws from p. Per actor
k the chance term is p_k (a variant of a query routed to k lands on k by chance with probability p_k). A collapsed
router (every counted original on one actor: rho_chance = 1) has no kappa_rho: NaN, never 1. kappa_rho <= 1 always;
it is >= -1 whenever the router's choices on the variants are distributed as on the originals (then rho >=
2 * rho_chance - 1), and it can fall below -1 only when the variants go systematically to other actors than the
originals (a router that reads the text's length, say, under rambling): that value is reported as it is.
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


def choice_shares(original_choice: npt.ArrayLike, m: int, perturbed_choices: npt.ArrayLike | None = None
                  ) -> FloatArray:
    """p_a: the share of the original queries routed to each of the ``m`` actors; with ``perturbed_choices``, only
    the queries with at least one perturbation count (those rho averages over). All zeros when none counts."""
    orig = as_choice(original_choice, None, None, "original_choice")
    if orig.size and (orig.min() < 0 or orig.max() >= m):
        raise ValueError(f"original_choice must hold actor indices in 0..{m - 1}")
    use: BoolArray = np.ones(orig.size, dtype=bool)
    if perturbed_choices is not None:
        _, pert = _inputs(orig, perturbed_choices)
        use = np.asarray((pert >= 0).any(axis=1), dtype=bool)
    counts = np.bincount(orig[use], minlength=m).astype(np.float64)
    total = counts.sum()
    return counts / total if total > 0 else counts


def rho_chance(original_choice: npt.ArrayLike, m: int, perturbed_choices: npt.ArrayLike | None = None) -> float:
    """sum_a p_a^2 (SPEC 3): the agreement of two independent draws from the router's choice distribution on the
    originals (:func:`choice_shares`); 1/N for a uniform router, 1 for a collapsed one; NaN when no query counts."""
    p = choice_shares(original_choice, m, perturbed_choices)
    return float((p * p).sum()) if p.sum() > 0 else float("nan")


def chance_corrected(value: npt.ArrayLike, chance: npt.ArrayLike) -> FloatArray:
    """(value - chance) / (1 - chance), elementwise; NaN where chance >= 1 (collapsed: undefined, SPEC 3) or either
    input is NaN."""
    v = np.asarray(value, dtype=np.float64)
    c = np.asarray(chance, dtype=np.float64)
    ok = ~np.isnan(v) & ~np.isnan(c) & (c < 1.0)
    out = np.full(np.broadcast(v, c).shape, np.nan)
    np.divide(v - c, 1.0 - c, out=out, where=ok)
    return out


def kappa_rho(original_choice: npt.ArrayLike, perturbed_choices: npt.ArrayLike, m: int) -> float:
    """kappa_rho = (rho - rho_chance) / (1 - rho_chance) (SPEC 3, module docstring): 0 in expectation for a router
    whose variant choices are independent of its original choices, 1 for one that keeps every variant with its
    query; NaN for a collapsed router (rho_chance = 1)."""
    chance = rho_chance(original_choice, m, perturbed_choices)
    return float(chance_corrected(rho(original_choice, perturbed_choices), chance))


def kappa_rho_by_level(original_choice: npt.ArrayLike, perturbed_choices: npt.ArrayLike, levels: Sequence[str],
                       m: int) -> dict[str, float]:
    """kappa_rho per perturbation level; each level's rho_chance over the originals with a variant at that
    level."""
    orig, pert = _inputs(original_choice, perturbed_choices)
    labels = np.asarray(levels)
    if labels.shape != (pert.shape[1],):
        raise ValueError(f"levels must name each of the {pert.shape[1]} perturbation columns")
    return {str(lv): kappa_rho(orig, pert[:, labels == lv], m) for lv in dict.fromkeys(labels.tolist())}


def kappa_rho_per_actor(original_choice: npt.ArrayLike, perturbed_choices: npt.ArrayLike, m: int) -> FloatArray:
    """kappa_rho^(k) = (rho^(k) - p_k) / (1 - p_k): actor k's rho corrected by the chance p_k that a variant of a
    query routed to k lands on k; NaN for an actor no counted original went to (p_k = 0) and for the only one
    (p_k = 1)."""
    p = choice_shares(original_choice, m, perturbed_choices)
    out = chance_corrected(rho_per_actor(original_choice, perturbed_choices, m), p)
    out[p == 0] = np.nan
    return out


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
