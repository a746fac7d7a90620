"""The metric catalog: what every number routerlab reports *is* (label, unit, direction, SPEC section, meaning,
the protocols that produce it), declared once. The report's glossary and tables, the CLI's tables, legends and
``--help``, and ``routerlab metrics`` all read it.

Two kinds of entries:

- :class:`Metric`: a number a result holds under ``name`` (a key of the result's JSON, the ``metric`` column of
  the results store). Its ``direction`` says whether higher or lower is better (``none``: descriptive, or it
  follows another metric, as an off-policy estimate follows the metric it estimates).
- :class:`Term`: a word the report uses that is not a number of its own (a protocol, a bound, an interval, a
  flag), with its meaning; no direction, no unit.

This module declares; it computes nothing. How a per-query metric is *computed* is
:mod:`routerlab.metrics.registry` (``@metric(name, needs=...)``), and a registered computation must have an entry
here (a test checks it). The catalog never changes once built: importing a module cannot add or alter an entry
(the glossary is a read-only view of it). A plugin declares its metrics through the ``routerlab.metrics``
entry-point group, each entry point naming a :class:`Metric` or :class:`Term`, read once on first use.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from typing import Any, Literal, get_args

from routerlab._registry import Registry
from routerlab.errors import UsageError
from routerlab.metrics.sources import SPEC_SOURCES, cite

Direction = Literal["higher", "lower", "none"]
DIRECTIONS: tuple[str, ...] = get_args(Direction)

PROTOCOLS: tuple[str, ...] = ("full", "cold-start", "voyager", "ope", "robustness", "two-model", "scaling",
                              "groups", "society", "power", "choose", "agentic")
"""The built-in protocols, by the names ``routerlab protocols`` lists."""


@dataclass(frozen=True)
class Metric:
    """One reported number: ``name`` as results hold it, ``label`` as tables show it, ``unit`` in words,
    ``direction`` (higher / lower is better, or none), the ``spec`` section that defines it, a one-sentence
    ``meaning`` (with its unit and the citation of that section, :func:`~routerlab.metrics.sources.cite`), and the
    ``protocols`` that produce it. ``symbol`` is the unit as a table heading adds it (``E_p (bits)``; empty: the
    label alone), ``title`` a longer name for titles (``AUROC (router ability)``) and for the legend under a
    console table (:func:`abbreviations`), ``digits`` the format a plain table prints it with."""

    name: str
    label: str
    unit: str
    direction: Direction
    spec: str
    meaning: str
    protocols: tuple[str, ...] = ()
    symbol: str = ""
    title: str = ""
    digits: str = ".4f"

    def __post_init__(self) -> None:
        problems = []
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            problems.append("its name must be lower-case letters, digits and underscores")
        if self.direction not in DIRECTIONS:
            problems.append(f"direction must be one of {', '.join(DIRECTIONS)}, got {self.direction!r}")
        if self.spec not in SPEC_SOURCES:
            problems.append(f"spec must be a section number of the specification (1-9), got {self.spec!r}")
        if not self.label or not self.unit or not self.meaning:
            problems.append("label, unit and meaning must not be empty")
        if problems:
            raise ValueError(f"metric {self.name!r}: {'; '.join(problems)}")

    @property
    def header(self) -> str:
        """The table heading: the label with its unit symbol, e.g. ``mean cost (USD/query)``."""
        return f"{self.label} ({self.symbol})" if self.symbol else self.label

    @property
    def long_label(self) -> str:
        """The label with its longer name, for titles: ``LPM (low-band performance mean)``."""
        return f"{self.label} ({self.title})" if self.title else self.label

    def to_dict(self) -> dict[str, Any]:
        """The entry as ``routerlab metrics --json`` prints it."""
        return {"name": self.name, "label": self.label, "unit": self.unit, "direction": self.direction,
                "spec": self.spec, "source": cite(self.spec), "protocols": list(self.protocols),
                "meaning": self.meaning}


@dataclass(frozen=True)
class Term:
    """A glossary word that is not a number of its own (a protocol, a bound, an interval, a flag); ``title`` is
    its long name where ``label`` abbreviates it (for the legend under a console table)."""

    key: str
    label: str
    spec: str
    meaning: str
    title: str = ""

    def __post_init__(self) -> None:
        if self.spec not in SPEC_SOURCES:
            raise ValueError(f"term {self.key!r}: spec must be a section number of the specification (1-9), got "
                             f"{self.spec!r}")
        if not self.key or not self.label or not self.meaning:
            raise ValueError(f"term {self.key!r}: key, label and meaning must not be empty")

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "spec": self.spec, "source": cite(self.spec),
                "meaning": self.meaning}


Entry = Metric | Term

# --------------------------------------------------------------------------------------------------- metrics
_EVAL = ("full", "cold-start", "voyager", "groups", "agentic")
"""The protocols whose result is an evaluation of routers on the full test outcomes (``protocols.full``)."""
_EVAL_OPE = (*_EVAL, "ope")

_BASE: tuple[Metric, ...] = (
    # SPEC 4-5: one router's choices on the test queries (evaluate, cold-start, Voyager, candidate groups; ope
    # estimates those with a per-query reward)
    Metric("mu_o", "mu_o", "score in [0, 1]", "higher", "4",
           "mean score of the actors a router chose, over the test queries; scores are in [0, 1], higher is better "
           f"({cite('4')}). A router is scored as deployed: one that samples its selection distribution (random, "
           "r_o(p), the bandits) by its expected score under that distribution, as every other choice metric of such a "
           "router", (*_EVAL_OPE, "scaling", "power", "choose"), title="mean score of the chosen actors"),
    Metric("v_b", "V_B", "ratio", "higher", "4",
           "mu_o divided by the best single actor's mean score on the same test queries (that actor picked on "
           f"train), a ratio without unit; above 1 beats always calling it ({cite('4')})", _EVAL,
           title="mu_o / the best single actor's score"),
    Metric("v_r", "V_R", "ratio", "higher", "4",
           "mu_o divided by a reference performance Perf(reference), a ratio without unit; above 1 beats the "
           "reference: an actor of the table (its mean score on the same test queries, resampled with the router's) "
           f"or a number a paper reports ({cite('4')}; only when a reference is given, evaluate or groups --reference)",
           ("full", "groups"), title="mu_o / the reference's score"),
    Metric("e_p", "E_p", "bits", "none", "4",
           "mean entropy, in bits, of the router's selection distribution per query: 0 = certain of one actor, "
           f"log2(m) = uniform over m actors ({cite('4')})", _EVAL, symbol="bits",
           title="entropy of the router's choice"),
    Metric("acc_at_1", "Acc@1", "share in [0, 1]", "higher", "5",
           f"share of test queries, in [0, 1], where the chosen actor is correct, i.e. scores >= 0.5 ({cite('5')})",
           _EVAL, title="share of queries with a correct pick"),
    Metric("acc_at_1_l", "Acc@1-L", "share in [0, 1]", "higher", "5",
           f"share of test queries, in [0, 1], where the chosen actor is the fastest correct one ({cite('5')})",
           _EVAL_OPE, title="share with the fastest correct pick"),
    Metric("dcg", "DCG", "gain in [0, 1]", "higher", "5",
           "1 / log2(r + 1) for the chosen actor's rank r among the correct actors ordered by latency (fastest = "
           f"1), 0 when it is wrong; mean over test queries, in [0, 1] ({cite('5')})", _EVAL_OPE,
           title="latency-rank gain among correct actors"),
    Metric("l_dcg", "L-DCG", "gain in [0, 1]", "higher", "5",
           "DCG times the fastest correct actor's latency over the chosen actor's latency: right and fastest "
           f"scores 1; mean over test queries, in [0, 1] ({cite('5')})", _EVAL_OPE,
           title="DCG x fastest / chosen latency"),
    Metric("mean_cost", "mean cost", "USD per query", "lower", "1",
           f"mean cost of the chosen actors' answers, in USD per query ({cite('1')})", (*_EVAL_OPE, "choose"),
           symbol="USD/query",
           digits=".2e"),
    Metric("mean_latency", "mean latency", "seconds per query", "lower", "1",
           f"mean latency of the chosen actors' answers, in seconds per query ({cite('1')}; "
           "TTFT + (output tokens - 1) * ITL when derived from tokens, its equation 1)", (*_EVAL_OPE, "choose"),
           symbol="s"),
    Metric("mu_o_difference", "paired difference", "score points in [-1, 1]", "higher", "7",
           "a router's mu_o minus the reference router's (the best single actor unless --compare-to names "
           "another; in power, the second router or --versus) on the same test queries, in score points (-1 to 1), "
           "with a paired bootstrap 95% interval; a router 'beats' the reference only when the whole interval is "
           f"above 0 ({cite('7')})", (*_EVAL, "power")),
    Metric("p_value", "p", "probability in [0, 1]", "none", "7",
           "two-sided paired bootstrap p-value of 'no difference' between a router's mu_o and the reference "
           f"router's, a probability in [0, 1]; its smallest value is about 1 / resamples ({cite('7')})", _EVAL,
           digits=".3f", title="paired bootstrap p-value"),
    # SPEC 7: how many test queries a paired comparison needs (routerlab power; docs/power.md)
    Metric("sd_difference", "sd of differences", "score points in [0, 1]", "none", "7",
           "standard deviation of a router's per-query score minus the reference router's on the same test "
           f"queries, in score points: what the test queries a comparison needs grow with, squared ({cite('7')})",
           ("power",), title="sd of the paired per-query differences"),
    Metric("n_needed", "queries needed", "test queries", "lower", "7",
           "test queries a two-sided paired test at level alpha needs to detect a difference of delta in mu_o "
           "with the requested power, ((z_(1-alpha/2) + z_power) * sd / delta)^2 rounded up, at least 30 (normal "
           f"approximation; docs/power.md) ({cite('7')})", ("power",), digits="d",
           title="test queries needed to detect delta"),
    Metric("power_at_n", "power now", "probability in [0, 1]", "higher", "7",
           "the probability that a two-sided paired test at level alpha on the current test queries detects a "
           f"difference of delta in mu_o (normal approximation with the observed sd; docs/power.md) ({cite('7')})",
           ("power",), digits=".3f", title="power of the current test split for delta"),
    Metric("n_needed_observed", "queries needed (observed)", "test queries", "none", "7",
           "test queries the same test needs to detect the observed difference in mu_o, at least 30; empty when "
           f"the observed difference is 0 ({cite('7')})", ("power",), digits="d",
           title="test queries needed to detect the observed difference"),
    Metric("power_observed", "power now (observed)", "probability in [0, 1]", "none", "7",
           "the power of the current test queries for the observed difference taken as true ('observed power'): a "
           f"function of the observed difference's p-value, no evidence of its own (docs/power.md) ({cite('7')})",
           ("power",), digits=".3f", title="power of the current test split for the observed difference"),
    Metric("aiq", "AIQ", "score in [0, 1]", "higher", "6",
           "average improvement in quality of a lambda sweep (score - lambda * cost or latency): the area under "
           "the router's non-decreasing convex quality-vs-cost hull divided by the largest cost, in score units "
           f"[0, 1] ({cite('6')}; RouterBench's convention)", ("full", "cold-start"),
           title="average improvement in quality"),
    Metric("train_oracle", "train oracle", "score in [0, 1]", "higher", "4",
           "a candidate group's oracle performance on the training split (mean of the row maxima), in [0, 1]: "
           f"the draw with the highest one is kept ({cite('4')})", ("groups",)),
    # SPEC 4: the scaling curve (per pool size m, over random m-actor pools)
    Metric("oracle_p", "mu_o of r_o(p)", "score in [0, 1]", "higher", "4",
           "mu_o of the oracle router r_o(p) on a random m-actor pool, in expectation p * oracle + (1 - p) * "
           f"random; mean, std and 5-95% band over the pools drawn per m, in [0, 1] ({cite('4')})", ("scaling",)),
    Metric("best_single", "best single actor", "score in [0, 1]", "higher", "4",
           "mean test score, in [0, 1], of the actor with the highest mean train score (always called); on the "
           f"scaling curve per random m-actor pool, with mean, std and 5-95% band over the pools ({cite('4')})",
           ("scaling",), title="mean score of the actor best on train"),
    Metric("mu_o_std", "mu_o std over pools", "score in [0, 1]", "none", "4",
           "the standard deviation of mu_o over the random m-actor pools drawn per pool size, in score units: the "
           f"scaling protocol's record of how much the pool drawn matters ({cite('4')})", ("scaling",)),
    Metric("mu_o_q05", "mu_o 5% over pools", "score in [0, 1]", "higher", "4",
           "the 5th percentile of mu_o over the random m-actor pools drawn per pool size, in [0, 1]: the lower edge "
           f"of the scaling curve's band, a spread over pools, not a confidence interval ({cite('4')})", ("scaling",)),
    Metric("mu_o_q95", "mu_o 95% over pools", "score in [0, 1]", "higher", "4",
           "the 95th percentile of mu_o over the random m-actor pools drawn per pool size, in [0, 1]: the upper "
           f"edge of the scaling curve's band ({cite('4')})", ("scaling",)),
    # SPEC 1 (logged observability): off-policy evaluation
    Metric("ips", "IPS", "unit of the estimated metric", "none", "1",
           "inverse propensity scoring: mean over logged queries of the importance weight pi(a|x) / p times the "
           "logged reward; unbiased when the propensities are right, high variance with large weights; same unit "
           f"as the metric ({cite('1')}; docs/off-policy.md)", ("ope",), title="inverse propensity scoring"),
    Metric("snips", "SNIPS", "unit of the estimated metric", "none", "1",
           "self-normalised IPS: the weighted rewards divided by the sum of the weights instead of n; slightly "
           f"biased, within the rewards' range, usually of lower variance; same unit as the metric ({cite('1')}; "
           "docs/off-policy.md)", ("ope",), title="self-normalised IPS"),
    Metric("dr", "DR", "unit of the estimated metric", "none", "1",
           "doubly robust: a cross-fitted reward model's prediction for the router's choice plus the "
           "importance-weighted error of that model on the logged actor; unbiased when the propensities are "
           f"right; same unit as the metric ({cite('1')}; docs/off-policy.md)", ("ope",),
           title="doubly robust estimate"),
    Metric("truth", "truth", "unit of the estimated metric", "none", "1",
           "the router's actual value of the estimated metric (mu_o, ...) on the logged queries as deployed (for a "
           "router that samples its distribution, its expected value under it: what evaluate gives), from the "
           f"table's full outcomes, in that metric's unit; shown only when the table holds them ({cite('1')}; "
           "docs/off-policy.md)", ("ope",)),
    Metric("ess", "ESS", "logged queries", "higher", "1",
           "Kish's effective sample size of the importance weights, (sum w)^2 / sum w^2, in logged queries: how "
           f"many queries the estimate effectively rests on; below 30 no interval can be trusted ({cite('1')}; "
           "docs/off-policy.md)", ("ope",), digits=".1f", title="effective sample size"),
    Metric("n_agree", "agreeing logged queries", "logged queries", "none", "1",
           "logged queries whose logged actor the router's policy could choose (importance weight > 0), a number "
           f"of queries: only they carry IPS and SNIPS ({cite('1')}; docs/off-policy.md)", ("ope",), digits="d"),
    Metric("max_weight", "largest weight", "ratio", "none", "1",
           "the largest importance weight pi(a|x) / p over the logged queries, a ratio without unit: one large "
           f"weight lets a single query carry the estimate ({cite('1')}; docs/off-policy.md)", ("ope",)),
    Metric("min_propensity", "smallest propensity", "probability in (0, 1]", "none", "1",
           "the smallest propensity of a logged actor, a probability in (0, 1]; below 0.1 / m routerlab warns "
           f"({cite('1')}; docs/off-policy.md)", ("ope",)),
    # SPEC 3: routing robustness
    Metric("rho", "rho", "share in [0, 1]", "higher", "3",
           "routing robustness: share of a query's meaning-preserving variants routed to the same actor as the "
           "query itself, averaged over queries; 1 for a fixed router, 1/N in expectation for a uniform random "
           f"one over N actors ({cite('3')})", ("robustness",), title="share of variants routed like their query"),
    Metric("kappa_rho", "kappa_rho", "chance-corrected share, at most 1", "higher", "3",
           "chance-corrected rho, (rho - rho_chance) / (1 - rho_chance) with rho_chance = sum_a p_a^2, p the "
           "router's shares of the original queries (per actor k: (rho^(k) - p_k) / (1 - p_k)); 0 for routing "
           "independent of the original's choice (uniform random), 1 when every variant stays, null for a "
           "collapsed router (rho_chance = 1; flagged collapsed), at most 1 and at least -1 unless the variants go "
           f"systematically elsewhere ({cite('3')})", ("robustness",), title="rho corrected for chance agreement"),
    Metric("accuracy", "accuracy", "score in [0, 1]", "higher", "3",
           "mean score of the actor the router chose for each original test query it was checked on (its mu_o "
           f"there), in [0, 1] ({cite('3')})", ("robustness",)),
    Metric("perturbed_accuracy", "perturbed accuracy", "score in [0, 1]", "higher", "3",
           "mean score of the actor the router chose for each variant whose outcomes are known, in [0, 1]; its "
           f"drop from accuracy is what the perturbations cost ({cite('3')})", ("robustness",)),
    Metric("perturbed_accuracy_orig", "perturbed accuracy (original's outcome)", "score in [0, 1]", "higher", "3",
           "the HSE paper's perturbed accuracy: mean over the meaning-preserving variants of the original query's "
           "score for the actor the router chose for the variant (a variant is assumed to ask the same thing), in "
           f"[0, 1]; needs no outcomes of the variants ({cite('3')})", ("robustness",)),
    Metric("changed_share", "optimal actor changed", "share in [0, 1]", "none", "3",
           "invariance check: share of the variants with known outcomes whose optimal actor set (actors within "
           "95% of the best score) differs from the original query's, in [0, 1]; the control level's must exceed "
           f"every meaning-preserving level's ({cite('3')})", ("robustness",)),
    Metric("changed_share_argmax", "changed (argmax)", "share in [0, 1]", "none", "3",
           "the invariance check's changed share with the single best actor (oracle tie-break) in place of the "
           f"set, in [0, 1] ({cite('3')})", ("robustness",)),
    Metric("rho_all", "rho on all", "share in [0, 1]", "higher", "3",
           "rho over the variants with known outcomes, the invariance check's baseline for rho_invariant, a share "
           f"in [0, 1] ({cite('3')})", ("robustness",)),
    Metric("rho_invariant", "rho invariant", "share in [0, 1]", "higher", "3",
           "rho on the variants whose optimal actor set is unchanged, where rho's assumption holds, a share in "
           f"[0, 1] ({cite('3')})", ("robustness",)),
    # SPEC 6: two-model routing, per dataset and the ID / OOD means
    Metric("auroc", "AUROC", "area in [0, 1]", "higher", "6",
           "router ability: area under the ROC curve of the router's score for the label 'the small model is "
           f"good enough'; 0.5 = chance, 1 = perfect ({cite('6')})", ("two-model",), title="router ability"),
    Metric("lpm", "LPM", "score in [0, 1]", "higher", "6",
           "low-band performance mean: mean of Phi over the call rates of the low band (default [0.25, 0.30]), a "
           f"score in [0, 1] ({cite('6')})", ("two-model",), title="low-band performance mean"),
    Metric("mpm", "MPM", "score in [0, 1]", "higher", "6",
           "mid-band performance mean: mean of Phi over the grid points with Phi(d_hi) < Phi(x) < tau_1 (0 where "
           f"there are none), a score in [0, 1] ({cite('6')})", ("two-model",), title="mid-band performance mean"),
    Metric("hcr", "HCR", "share in [0, 1]", "higher", "6",
           "high-band call rate: 1 - mean call rate over the points where Phi reaches relative performance "
           "[0.85, 0.95] of the gap from Perf_S to Perf_L, in [0, 1]; higher = the target is reached calling the "
           f"large model less ({cite('6')})", ("two-model",), title="high-band call rate"),
    Metric("call_rate", "call rate", "share in [0, 1]", "none", "6",
           "share of the queries a two-model router sends to the large model at a threshold fixed on development "
           f"queries (routerlab choose, two-model --dev; {cite('6')})", ("choose", "two-model"),
           title="share sent to the large model"),
    Metric("phi_at_call_rate", "Phi@rate", "score in [0, 1]", "higher", "6",
           "mean score of the answers a two-model router gives on the test queries when its threshold is fixed on "
           f"development queries for the target call rate (two-model --dev --call-rate; {cite('6')})",
           ("two-model",), title="Phi at the call rate fixed on dev"),
    Metric("top_share", "top share", "share in [0, 1]", "none", "5",
           "the largest share of the test queries a router sends to one actor (its expected share for a router that "
           f"samples); 1/m is an even spread, 1 a router that always picks one actor ({cite('5')})", _EVAL,
           title="largest selection share"),
    Metric("collapsed_flag", "collapsed", "flag 0/1", "none", "5",
           "1 when one actor takes >= 99% of the test queries (top share >= 0.99; the collapsed routers of "
           f"RouterWorld's Table 3), else 0; expected of fixed routers, a warning sign for a learned one ({cite('5')})",
           _EVAL, title="collapsed (one actor takes >= 99%)", digits=".0f"),
    Metric("checkpoint_round", "checkpoint", "round", "none", "5",
           "the Voyager round whose fit a router deploys at this round: the one with the highest mu_o on the "
           f"development queries (voyager --dev; {cite('5')})", ("voyager",), title="round of the chosen checkpoint"),
    Metric("dev_mu_o", "dev mu_o", "score in [0, 1]", "higher", "5",
           "mu_o of the deployed checkpoint on the development queries, on which Voyager chose it (voyager --dev; "
           f"{cite('5')})", ("voyager",), title="mu_o on the development part"),
    Metric("auc", "AUC", "score in [0, 1]", "higher", "6",
           f"area under the call-rate curve Phi over call rates 0 to 1, in score units [0, 1] ({cite('6')})",
           ("two-model",), title="area under Phi"),
    Metric("apgr", "APGR", "ratio", "higher", "6",
           "average performance gap recovered, (AUC - Perf_S) / (Perf_L - Perf_S), a ratio without unit: 0.5 for "
           f"random routing in expectation, 1 for the whole gap ({cite('6')})", ("two-model",),
           title="average performance gap recovered"),
    Metric("perf_small", "Perf_S", "score in [0, 1]", "none", "6",
           f"Phi(0): mean score of the small model alone on the dataset, in [0, 1] ({cite('6')})", ("two-model",),
           title="the small model alone"),
    Metric("perf_large", "Perf_L", "score in [0, 1]", "none", "6",
           f"Phi(1): mean score of the large model alone on the dataset, in [0, 1] ({cite('6')})", ("two-model",),
           title="the large model alone"),
    Metric("both_fail", "both fail", "share in [0, 1]", "none", "6",
           "share of the evaluated queries both models fail (score < 0.5: 0 on 0/1 scores), where routing cannot "
           "help (routerxbench appendix D.2), in [0, 1], with a 95% bootstrap interval; a property of the pair on "
           f"the evaluated queries, so the same for every router of a run ({cite('6')})", ("two-model",),
           title="queries both models fail"),
    Metric("youden_accuracy", "Youden acc", "share in [0, 1]", "higher", "6",
           "routing accuracy at the Youden-J threshold: share of the test queries sent to the large model exactly "
           "when it is needed (the small model is not good enough), the threshold maximising TPR - FPR fixed on the "
           f"development part (else the training queries), never on test, in [0, 1] ({cite('6', '8')})",
           ("two-model",), title="routing accuracy at the Youden-J threshold"),
    Metric("youden_j", "Youden J", "difference in [-1, 1]", "higher", "6",
           "Youden's J = TPR - FPR for 'the large model is needed' on the test queries at the threshold fixed on the "
           "development part (else the training queries), in [-1, 1]; 0 = no better than a coin "
           f"({cite('6', '8')})", ("two-model",), title="Youden's J at the fixed threshold"),
    Metric("layer_weight", "layer weight", "share in [0, 1]", "none", "6",
           "a hidden-state probe's inference weight of one layer (slice layer=L, 0 = the embedding output): "
           "ProbeDirichlet's normalised concentration alpha_l / sum(alpha) (routerxbench Fig. 7), uniform for "
           f"probe-mean; the weights sum to 1 ({cite('6')})", ("two-model",), title="layer importance"),
    # SPEC 2: society diversity
    Metric("hse", "HSE", "bits x distance units", "none", "2",
           "hierarchic social entropy: the area under H(h), the entropy in bits of the actors' cluster sizes at "
           "distance level h; in bits x distance units, 0 = identical actors "
           f"({cite('2')})", ("society",), digits=".3f", title="hierarchic social entropy"),
    Metric("hse_normalized", "normalised HSE", "share in [0, 1]", "none", "2",
           "HSE / (log2(N) * largest possible distance), in [0, 1]; 1 = every pair of the N actors maximally "
           f"different ({cite('2')})", ("society",), digits=".3f"),
    Metric("max_hse", "largest HSE", "bits x distance units", "none", "2",
           "the largest HSE the pool's N actors could have under the distance, log2(N) * d_max, in bits x "
           f"distance units: normalised HSE = HSE / this ({cite('2')})", ("society",), digits=".3f"),
    Metric("d_max", "largest distance", "distance units", "none", "2",
           "the largest distance the metric allows between behaviour vectors in [0, 1]^L (cosine 1, correlation "
           f"2, euclidean sqrt(L), manhattan L), in distance units ({cite('2')})", ("society",)),
    Metric("full_hse", "pool HSE", "bits x distance units", "none", "2",
           "the whole pool's HSE that the coreset curve is measured against (the pool's hse), in bits x distance "
           f"units ({cite('2')})", ("society",), digits=".3f"),
    Metric("full_hse_normalized", "pool normalised HSE", "share in [0, 1]", "none", "2",
           f"the whole pool's normalised HSE that the coreset curve is measured against, in [0, 1] ({cite('2')})",
           ("society",), digits=".3f"),
    Metric("size_90", "90% coreset size", "actors", "none", "2",
           "the smallest size of the greedy max-HSE coreset whose HSE reaches 90% of the whole pool's, a number "
           f"of actors; none when the greedy stops before ({cite('2')})", ("society",), digits="d"),
    Metric("size_95", "95% coreset size", "actors", "none", "2",
           "the smallest size of the greedy max-HSE coreset whose HSE reaches 95% of the whole pool's, a number "
           f"of actors; none when the greedy stops before ({cite('2')})", ("society",), digits="d"),
    Metric("oracle_accuracy", "coreset oracle accuracy", "score in [0, 1]", "higher", "2",
           "mean over the items of the best score among a coreset's actors (its oracle performance), in [0, 1], "
           f"per size of the greedy curve ({cite('2')})", ("society",)),
    Metric("objective", "joint criterion", "score in [0, 1]", "higher", "2",
           "the coreset's joint criterion alpha * normalised HSE + (1 - alpha) * oracle_accuracy, in [0, 1], per "
           f"size of the greedy curve ({cite('2')})", ("society",)),
    Metric("n_actors", "actors", "actors", "none", "2",
           f"the number of actors in the society (or specialist society) a diversity number describes ({cite('2')})",
           ("society",), digits="d"),
    Metric("n_items", "items", "queries", "none", "2",
           f"the number of queries whose scores are the behaviour vectors HSE is computed from ({cite('2')})",
           ("society",), digits="d"),
)

_AGENTIC = ("agentic",)
_PLANNING = ("routerlab reads RouterWorld's planning steps (its appendix I.3) as an episode's model calls: each call "
             "plans the next action or answers")

_AGENTIC_METRICS: tuple[Metric, ...] = (
    # RouterWorld-Agentic (section 5.3, appendix I): episodes of an agent, one per (task, actor) cell; the latency
    # model of an episode is SPEC 1's (and 9's), the correctness threshold and the routers' metrics SPEC 5's
    Metric("n_episodes", "episodes", "episodes", "none", "1",
           "the number of agent episodes (task, actor cells holding steps) a step statistic is computed over, per "
           f"actor (slice actor=NAME), over every actor (actor=all) or per bucket of model steps ({cite('1')})",
           _AGENTIC, digits="d"),
    *(Metric(f"{prefix}_{stat}", f"{what} ({stat})", "steps per episode", "none", "1",
             f"the {stat} number of {words} per episode of an actor (slice actor=NAME; actor=all pools every "
             f"actor's episodes), with a percentile bootstrap 95% interval over its episodes ({cite('1')}"
             + ("; " + _PLANNING if prefix == "model_steps" else "") + ")", _AGENTIC, digits=".2f",
             title=f"{stat} {words} per episode")
      for prefix, what, words in (("model_steps", "model steps", "model calls (planning steps)"),
                                  ("tool_steps", "tool steps", "tool calls"),
                                  ("steps", "steps", "steps of every kind"))
      for stat in ("median", "mean")),
    Metric("episode_accuracy", "episode accuracy", "share in [0, 1]", "higher", "1",
           "share of an actor's episodes whose final score (the last step's) is >= 0.5, in [0, 1], with a bootstrap "
           "95% interval over episodes; per actor, over every actor (actor=all), or per bucket of model steps "
           f"(slice model_steps=B: success by planning steps) ({cite('1')})", _AGENTIC,
           title="share of correct episodes"),
    Metric("episode_latency_median", "median episode latency", "seconds per episode", "lower", "1",
           "median latency of an actor's episodes in seconds: each episode's model time plus its tool and "
           f"environment time, summed over its steps, with a bootstrap 95% interval over episodes ({cite('1')})",
           _AGENTIC, symbol="s", digits=".3f", title="median episode latency"),
    Metric("step_limit_share", "reached the step limit", "share in [0, 1]", "none", "1",
           "share of an actor's episodes whose model calls reached the agent's step limit (from the table's "
           f"metadata or --step-limit); only when the limit is known ({cite('1')})", _AGENTIC, digits=".3f",
           title="share of episodes that hit the step limit"),
    Metric("planning_spearman", "Spearman rho (steps, latency)", "correlation in [-1, 1]", "none", "1",
           "Spearman's rank correlation between an episode's model calls and its latency over an actor's episodes "
           f"(actor=all pools them), with a bootstrap 95% interval over episodes ({cite('1')}; {_PLANNING})",
           _AGENTIC, digits=".3f", title="rank correlation of planning steps and episode latency"),
    Metric("seconds_per_step", "seconds per model step", "seconds per model call", "none", "1",
           "the least-squares slope of episode latency on the number of model calls over an actor's episodes: the "
           f"seconds one more planning step adds, with a bootstrap 95% interval over episodes ({cite('1')}; "
           f"{_PLANNING})", _AGENTIC, symbol="s/step", digits=".3f", title="seconds each extra planning step adds"),
    *(Metric(f"{base}_variance", f"{label} variance", "percentage points squared", "none", "5",
             f"the variance of {label} across the non-collapsed learned routers of a run (the bounds, routers that "
             "sample, and collapsed routers, which send at least the collapse share, 95% unless --collapse says "
             "otherwise, of the test queries to one actor, left out), in percentage points "
             "squared: RouterWorld's sigma^2 of performance compression (its section 5.3 and Figure 3), the "
             "population variance of the routers' values in %; slice setting=agentic or setting=single-turn, with a "
             "bootstrap 95% interval from resampled test queries, each router's decisions fixed "
             f"({cite('5')})", _AGENTIC, symbol="pp²", digits=".2f", title=f"spread of {label} across routers")
      for base, label in (("acc_at_1", "Acc@1"), ("acc_at_1_l", "Acc@1-L"), ("dcg", "DCG"), ("l_dcg", "L-DCG"))),
    *(Metric(f"{base}_variance_ratio", f"{label} variance ratio", "ratio", "none", "5",
             f"the variance of {label} across routers on the agentic table divided by that on the single-turn table "
             "of the same actors, a ratio without unit, with a bootstrap 95% interval; below 1 = the routers are "
             f"compressed on episodes (RouterWorld, section 5.3; {cite('5')})", _AGENTIC, digits=".3f",
             title=f"agentic / single-turn spread of {label}")
      for base, label in (("acc_at_1", "Acc@1"), ("acc_at_1_l", "Acc@1-L"), ("dcg", "DCG"), ("l_dcg", "L-DCG"))),
)

PAIRED_TWO_MODEL: tuple[str, ...] = ("auroc", "lpm", "mpm", "hcr", "auc", "apgr")
"""The two-model metrics whose paired difference from a reference router (``--compare-to``) a result holds, as
``<metric>_diff``."""


def _difference(base: Metric) -> Metric:
    """``<metric>_diff``: a router's metric minus the reference router's, over the same resampled queries."""
    unit = base.unit.split(" in ")[0]
    return Metric(f"{base.name}_diff", f"Δ{base.label}", f"difference in {unit}", base.direction, base.spec,
                  f"{base.label} of the router minus that of the reference router (--compare-to) on the same "
                  f"queries, a difference in {unit} with a paired bootstrap 95% interval; a whole interval above 0 "
                  f"= better ({cite(base.spec, '7')})", base.protocols)


GREEDY: tuple[str, ...] = ("mu_o", "v_b", "v_r", "acc_at_1", "acc_at_1_l", "dcg", "l_dcg", "mean_cost", "mean_latency")
"""The choice metrics an exploring router also reports at its argmax, as ``<metric>_greedy`` (its headline value is
the expectation under the distribution it samples when deployed; docs/bandits.md "One value per router")."""


def _greedy(base: Metric) -> Metric:
    """``<metric>_greedy``: an exploring router's metric at its argmax pick, beside its deployed value."""
    return Metric(f"{base.name}_greedy", f"{base.label} (greedy)", base.unit, base.direction, base.spec,
                  f"{base.label} of a router that samples its selection distribution when deployed (random, r_o(p), "
                  f"the bandits), had it taken its argmax instead, in the same unit; shown beside the deployed "
                  f"value, the headline ({cite(base.spec)})", tuple(p for p in base.protocols if p in _EVAL),
                  symbol=base.symbol, title=f"{base.title}, at the argmax" if base.title else "", digits=base.digits)


def _with_twins(base: Metric) -> tuple[Metric, ...]:
    twins = [base]
    if base.name in GREEDY:
        twins.append(_greedy(base))
    if base.name in PAIRED_TWO_MODEL:
        twins.append(_difference(base))
    return tuple(twins)


_METRICS: tuple[Metric, ...] = (*(m for base in _BASE for m in _with_twins(base)), *_AGENTIC_METRICS)

# --------------------------------------------------------------------------------------------------- terms
_TERMS: tuple[Term, ...] = (
    Term("full observability", "full observability", "1",
         "routers are trained on every actor's score for every training query, and evaluated on the test queries' "
         f"full (hidden) scores; a protocol, not a number ({cite('1')})"),
    Term("cold-start", "cold-start", "1",
         "routers are trained on one outcome per training query, of the actor a logging policy (uniform random "
         "unless stated) chose, and evaluated on the full test outcomes; a protocol, not a number (RouterWorld, "
         "section 3.3, with the metrics of its section 4.4)"),
    Term("voyager", "Voyager", "5",
         "the training split in T ordered chunks: chunk 1 logged by the uniform policy, then each round a router "
         "is trained on the chunks so far, routes the next one and sees only the chosen outcomes; evaluated every "
         f"round on the same test split; a protocol, not a number ({cite('5')})"),
    Term("shift", "Δ (shift)", "5",
         "a metric under cold-start minus the same metric under full observability, same router and test "
         "queries, in that metric's unit: Acc@1 up with L-DCG down is the risk-aversion RouterWorld reports in its "
         f"section 5.2 ({cite('5')})"),
    Term("held up", "held up", "5",
         "a router whose cold-start L-DCG (mu_o without latency) is at or above the lower end of its "
         f"full-observability 95% interval; yes or no ({cite('5', '7')})"),
    Term("oracle", "oracle", "4",
         "mean over the test queries of the best actor's score, in [0, 1]: what a perfect router would reach "
         f"({cite('4')})"),
    Term("best single actor", "best single actor", "4",
         "the actor with the highest mean score on the training split, always called; its mean test score, in "
         f"[0, 1], is the baseline a router must beat ({cite('4')})"),
    Term("best-per-dataset", "best-per-dataset", "4",
         "the router that calls, for each query, the actor with the highest mean training score on that query's "
         "dataset (OpenRouterBench's Max Expert; a dataset unseen in training gets the best single actor); a "
         "router's gain over it, in points of mu_o with a paired 95% interval, is what it adds beyond knowing the "
         f"dataset ({cite('4', '7')})", title="the best training actor of each query's dataset"),
    Term("random", "random", "4",
         "mean over the test queries of the mean actor score, in [0, 1]: a uniformly random choice, in "
         f"expectation ({cite('4')})"),
    Term("oracle-p", "r_o(p)", "4",
         "the oracle router with probability p, a uniformly random actor otherwise; its mu_o is p * oracle + "
         f"(1 - p) * random, in expectation; r_o(1) is the oracle, r_o(0) random ({cite('4')})",
         title="mu_o of the oracle with probability p, else a random actor"),
    Term("pool size m", "pool size m", "4",
         "number of candidate actors a router chooses among; the scaling curve draws random m-actor pools and "
         f"shows the mean and the 5-95% band over pools ({cite('4')})", title="actors per pool"),
    Term("candidate group", "candidate group", "4",
         "an m-actor pool picked on the training split among actors with train score in [0.1, 0.9]: all-strong "
         "from the top 20%, all-weak from the bottom 20%, strong-to-weak one from each of m slices of the "
         f"ranking; the draw with the highest train oracle is kept ({cite('4')})"),
    Term("95% CI", "95% CI", "7",
         "percentile bootstrap interval over 1,000 resamples of the test queries, in the unit of the number it "
         f"brackets ({cite('7')})"),
    Term("collapsed", "collapsed", "5",
         "yes when one actor takes >= 99% of the test queries; expected of fixed routers such as best-single, a "
         f"warning sign for a learned one ({cite('5')})"),
    Term("oracle best-of-N", "oracle best-of-N", "5",
         "per query, the best actor among those picked by the evaluated routers that do not read test outcomes, "
         f"mean score in [0, 1]: what combining them could reach ({cite('5')})"),
    Term("propensity", "propensity", "1",
         "the logging policy's probability of the actor it logged, in (0, 1]; importance weights divide by it "
         f"({cite('1')}; docs/logs.md)"),
    Term("perturbation level", "perturbation level", "3",
         "how a variant differs from its query: character (typos), word (synonyms), syntax (reordering), "
         f"paraphrase, rambling, in increasing semantic distance ({cite('3')})"),
    Term("rho_chance", "rho_chance", "3",
         "the rho of chance: sum_a p_a^2, the probability that two independent draws from the router's shares p "
         "of the original queries pick the same actor, a share in [1/N, 1]; kappa_rho corrects rho by it "
         f"({cite('3')})"),
    Term("control level", "control level", "3",
         "the falsifier of the invariance check: an opt-in perturbation level of meaning-CHANGING edits (a "
         "number changed, the question negated, its key entity swapped); left out of rho and kappa_rho, its "
         f"share of changed optimal actors must exceed every meaning-preserving level's ({cite('3')})"),
    Term("invariance check", "invariance check", "3",
         "whether a variant keeps its query's optimal actor (set of actors within 95% of the best score), "
         f"measured from outcomes of the variants; rho assumes it does ({cite('3')})"),
    Term("ID avg", "ID avg", "6",
         "the mean of a two-model metric over the in-domain datasets, those the routers are trained on (their test "
         f"queries are evaluated), in that metric's unit ({cite('6')})",
         title="mean over the in-domain datasets (trained on)"),
    Term("OOD avg", "OOD avg", "6",
         "the mean of a two-model metric over the out-of-domain datasets, evaluated whole and never trained on, in "
         f"that metric's unit ({cite('6')})", title="mean over the out-of-domain datasets (never trained on)"),
    Term("call-rate curve", "call-rate curve", "6",
         "Phi(x): mean score of the answers when the share x of the queries the router trusts least goes to the "
         f"large model; Phi(0) = Perf_S (small model alone), Phi(1) = Perf_L ({cite('6')})"),
    Term("coreset", "coreset", "2",
         "the greedy max-HSE subset; its 90% / 95% sizes are the first sizes whose HSE reaches that share of the "
         f"whole pool's; sizes are numbers of actors ({cite('2')})"),
    Term("specialists", "specialists", "2",
         "one perfect binary expert per dataset (1 on its dataset, 0 elsewhere): the most complementary pool of "
         f"that size; its HSE is in bits x distance units ({cite('2')})"),
    Term("duplicates", "duplicates", "1",
         f"number of queries whose text repeats an earlier query's text ({cite('1')})"),
    Term("leaks", "leaks", "1",
         "evaluated test queries whose exact text also occurs in the training split: a learned router's score "
         f"on them is optimistic; a number of queries ({cite('1', '7')})"),
)


# --------------------------------------------------------------------------------------------------- plugins
def _from_plugin(name: str, loaded: Any, ep: EntryPoint) -> Entry:
    """A ``routerlab.metrics`` entry point names a :class:`Metric` or :class:`Term` whose name is the entry
    point's."""
    where = f"metric plugin {name!r} ({ep.value})"
    if not isinstance(loaded, Metric | Term):
        raise UsageError(f"{where} must name a routerlab.metrics.catalog Metric or Term, not a "
                         f"{type(loaded).__name__}")
    own = loaded.name if isinstance(loaded, Metric) else loaded.key
    if own != name:
        raise UsageError(f"{where} names the entry {own!r}; the entry point must have the same name")
    return loaded


_PLUGINS: Registry[Entry] = Registry("metric", group="routerlab.metrics", from_plugin=_from_plugin)


def _builtin_keys() -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    entries: tuple[Entry, ...] = (*_METRICS, *_TERMS)
    for entry in entries:
        key = entry.name if isinstance(entry, Metric) else entry.key
        if key in out:  # a typo in this file; a test imports it
            raise ValueError(f"the metric catalog declares {key!r} twice")
        out[key] = entry
    return out


_BUILTIN = _builtin_keys()


def _entries() -> dict[str, Entry]:
    """Every entry by key: the built-ins in catalog order, then the plugins' in name order. A plugin may not
    take a built-in's key."""
    plugins = dict(_PLUGINS.items())
    taken = sorted(set(plugins) & set(_BUILTIN))
    if taken:
        raise UsageError(f"metric plugin(s) {', '.join(map(repr, taken))} take the name of a built-in entry")
    return {**_BUILTIN, **plugins}


# --------------------------------------------------------------------------------------------------- lookups
def all_metrics() -> tuple[Metric, ...]:
    """Every metric, in catalog order (the order tables show them in)."""
    return tuple(e for e in _entries().values() if isinstance(e, Metric))


def all_terms() -> tuple[Term, ...]:
    """Every glossary term that is not a metric."""
    return tuple(e for e in _entries().values() if isinstance(e, Term))


def metric_names() -> tuple[str, ...]:
    return tuple(m.name for m in all_metrics())


def _unknown(what: str, name: str, known: list[str]) -> UsageError:
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(known)}"
    return UsageError(f"unknown {what} {name!r}; {hint} ('routerlab metrics' lists every metric)")


def metric_info(name: str) -> Metric:
    """The catalog entry of metric ``name``; an unknown name is a UsageError naming the closest ones."""
    entry = _entries().get(name)
    if isinstance(entry, Metric):
        return entry
    raise _unknown("metric", name, list(metric_names()))


def metrics_for(protocol: str) -> tuple[Metric, ...]:
    """The metrics ``protocol`` produces, in catalog order; an unknown protocol is a UsageError."""
    metrics = all_metrics()
    known = list(dict.fromkeys([*PROTOCOLS, *(p for m in metrics for p in m.protocols)]))
    if protocol not in known:
        raise UsageError(f"unknown protocol {protocol!r}; known: {', '.join(known)}")
    return tuple(m for m in metrics if protocol in m.protocols)


def glossary_entry(key: str) -> Entry:
    """The metric or term the report's glossary explains under ``key``; a UsageError when there is none."""
    entries = _entries()
    if key in entries:
        return entries[key]
    raise _unknown("glossary term", key, list(entries))


def label(name: str) -> str:
    """The metric's label (``V_B`` for ``v_b``)."""
    return metric_info(name).label


def header(name: str) -> str:
    """The metric's table heading, with its unit symbol when it has one (``E_p (bits)``)."""
    return metric_info(name).header


def format_value(name: str, value: float | None) -> str:
    """``value`` as plain tables print metric ``name`` (its ``digits``: 4 decimals unless declared otherwise, e.g.
    ``mean_cost`` as 6.26e-05); ``-`` for a missing or NaN value."""
    if value is None or value != value:  # NaN, numpy's float32 included
        return "-"
    fmt = metric_info(name).digits
    return format(int(value) if fmt == "d" else value, fmt)


def legend(names: list[str]) -> str:
    """One line saying which of ``names`` are better high, which low, and the units of those with a symbol:
    ``higher is better: mu_o, v_b; lower is better: mean_cost (USD/query); descriptive: e_p (bits)``."""
    groups: dict[str, list[str]] = {"higher": [], "lower": [], "none": []}
    for name in names:
        m = metric_info(name)
        groups[m.direction].append(f"{name} ({m.symbol})" if m.symbol else name)
    words = {"higher": "higher is better", "lower": "lower is better", "none": "descriptive"}
    return "; ".join(f"{words[d]}: {', '.join(v)}" for d, v in groups.items() if v)


def abbreviations(columns: Iterable[str | tuple[str, str]]) -> str:
    """The legend under a console table: each column the catalog gives a long name (its ``title``), as the table
    heads it, with that name: ``v_b = mu_o / the best single actor's score; AUROC = router ability``.

    A column is a metric's name or label, a glossary term's key or label, or a pair (heading as shown, catalog
    key) for a heading the catalog does not spell (``("p=0.5", "oracle-p")``); columns the catalog does not know
    (``router``, a dataset) or that need no long name (``mean cost``) are left out, and each heading is named
    once. An empty string when no column needs a legend."""
    entries = _entries()
    by_shown: dict[str, Entry] = {}
    for e in entries.values():
        by_shown.setdefault(e.name if isinstance(e, Metric) else e.key, e)
        by_shown.setdefault(e.label, e)
    parts: dict[str, str] = {}
    for column in columns:
        shown, key = column if isinstance(column, tuple) else (column, column)
        entry = entries.get(key) or by_shown.get(key)
        if entry is None or not entry.title or shown in parts:
            continue
        unit = f" ({entry.symbol})" if isinstance(entry, Metric) and entry.symbol else ""
        parts[shown] = f"{shown} = {entry.title}{unit}"
    return "; ".join(parts.values())


def legend_line(columns: Iterable[str | tuple[str, str]], *more: str) -> list[str]:
    """``["legend  <abbreviations>; <more>"]`` for a console table (see :func:`abbreviations`; ``more`` adds
    what the catalog does not spell, e.g. ``r1.. = rounds``), or ``[]`` when nothing needs explaining."""
    parts = [p for p in (abbreviations(columns), *more) if p]
    return [f"legend  {'; '.join(parts)}"] if parts else []


class Glossary(Mapping[str, tuple[str, str]]):
    """The report's glossary, read from the catalog: key -> (label, meaning). Read-only: no module can add or
    change a term (declare it in the catalog instead)."""

    def __getitem__(self, key: str) -> tuple[str, str]:
        entry = _entries()[key]
        return entry.label, entry.meaning

    def __iter__(self) -> Iterator[str]:
        return iter(_entries())

    def __len__(self) -> int:
        return len(_entries())

    def __repr__(self) -> str:
        return f"Glossary({len(self)} entries)"


GLOSSARY = Glossary()
"""Every term the report may show (key -> label, meaning with unit and SPEC section), metrics and terms alike."""


def check_catalog() -> list[str]:
    """What is wrong with the catalog, in words (empty when nothing): a built-in metric naming an unknown
    protocol, or whose meaning does not cite its own SPEC section."""
    problems = []
    for m in all_metrics():
        if cite(m.spec) not in m.meaning:
            problems.append(f"{m.name}: its meaning does not cite {cite(m.spec)} (section {m.spec})")
        if m.name in _BUILTIN:
            problems += [f"{m.name}: unknown protocol {p!r}" for p in m.protocols if p not in PROTOCOLS]
    for t in all_terms():
        if cite(t.spec) not in t.meaning:
            problems.append(f"{t.key}: its meaning does not cite {cite(t.spec)} (section {t.spec})")
    return problems
