"""Every router evaluated on each candidate group (routereval.txt 4.2, SPEC 4), and the registered ``groups``
protocol.

Routers may be spec strings or :class:`Router` instances, as in :func:`routerlab.protocols.full.evaluate`.
Each group re-fits every router, so an instance is never fitted itself: each group gets a fresh copy
built from its options, ``type(router)(**router.params)`` (the registry's contract: a router is
defined by its options), which keeps its own seed when it was given one and otherwise gets the run's.

The protocol's records: for each group, every router's metrics as the full protocol records them
(:func:`~routerlab.protocols.full.router_records`: each metric with its 95% CI, ``mu_o_difference`` against the
reference router, Oracle(Best-of-N)), and the group's ``train_oracle`` under router ``group``, all with slice
``m=M,group=KIND`` (KIND: all-strong, all-weak or strong-to-weak). For each m whose three groups were all
evaluated, every (router, metric) the three hold is averaged over them under slice ``m=M,group=average`` (RouterEval
4.2: "the final model performance is the average of the results from these three candidates"). Its interval is the
average of the three intervals' ends: the three share the test queries, and the standard error of a mean of three
estimates is at most the mean of their standard errors, so it is conservative (exact when the three groups' errors
move together), never too narrow.

``m`` may name ``all`` or ``A..all``: resolved against the eligible actors (train performance in [0.1, 0.9]), the
pool the groups are drawn from. A group of m = that count is the whole eligible pool for all three kinds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from routerlab.data.provenance import Provenance
from routerlab.data.splits import Split, make_split
from routerlab.data.table import RoutingTable
from routerlab.errors import UsageError
from routerlab.features.base import Features
from routerlab.features.registry import Encoder
from routerlab.progress import task, track
from routerlab.protocols.base import MetricRecord, Protocol, Result, RunContext, SettingError, register_protocol
from routerlab.protocols.full import (
    Evaluation,
    RouterLike,
    applicable_routers,
    evaluate,
    featurize,
    resolve_compare_to,
    router_label,
    router_records,
)
from routerlab.protocols.groups import (
    AVERAGE,
    KINDS,
    CandidateGroup,
    GroupsSettings,
    candidate_groups,
    eligible_actors,
)
from routerlab.protocols.scaling import check_pool_sizes, resolve_pool_sizes
from routerlab.routers.base import Router


@dataclass
class GroupEvaluations:
    """Each candidate group with every router's :class:`Evaluation` on it (``Result.native`` of ``groups``);
    :meth:`to_dict` is the JSON record ``routerlab groups --json`` prints."""

    provenance: Provenance
    draws: int
    groups: list[tuple[CandidateGroup, Evaluation]]

    def to_dict(self) -> dict[str, Any]:
        return {**self.provenance.to_dict(), "draws": self.draws,
                "groups": [{**g.to_dict(), "evaluation": ev.to_dict()} for g, ev in self.groups]}

    def records(self) -> list[MetricRecord]:
        """The metric records of every group (see the module docstring)."""
        out: list[MetricRecord] = []
        by_m: dict[int, dict[str, list[MetricRecord]]] = {}
        for g, ev in self.groups:
            where = f"m={g.m},group={g.kind}"
            records = [MetricRecord.of("group", "train_oracle", g.train_oracle, slice=where),
                       *router_records(ev.results, ev.oracle_best_of_n, where)]
            by_m.setdefault(g.m, {})[g.kind] = records
            out += records
        for m, kinds in by_m.items():
            if set(kinds) == set(KINDS):
                out += average_records([kinds[k] for k in KINDS], f"m={m},group={AVERAGE}")
        return out


def average_records(groups: Sequence[Sequence[MetricRecord]], slice: str) -> list[MetricRecord]:
    """Each (router, metric) that every one of ``groups`` (the records of the three groups of one m) holds, averaged
    over them, with the average of their interval ends when all have one (module docstring), under ``slice``."""
    keyed = [{(r.router, r.metric): r for r in records} for records in groups]
    out: list[MetricRecord] = []
    for key, first in keyed[0].items():
        found = [k[key] for k in keyed if key in k]
        values = [r.value for r in found if r.value is not None]
        if len(values) < len(keyed):
            continue
        lows = [r.ci_low for r in found if r.ci_low is not None]
        highs = [r.ci_high for r in found if r.ci_high is not None]
        ci = (float(np.mean(lows)), float(np.mean(highs))) if len(lows) == len(highs) == len(found) else None
        out.append(MetricRecord.of(first.router, first.metric, float(np.mean(values)), ci, slice))
    return out


def run_groups(
    table: RoutingTable, m_values: list[int], router_specs: Sequence[RouterLike], *, draws: int = 1000,
    kinds: tuple[str, ...] = KINDS, encoder: str | Encoder = "tfidf", split: str | Split = "given", seed: int = 0,
    n_boot: int = 1000, compare_to: str | None = "auto", skip_inapplicable: bool = False,
    features: tuple[Features, Features] | None = None, reference: str | float | None = None,
) -> GroupEvaluations:
    """Pick the groups on the train split, then evaluate each router on each group's test split.

    The query features are computed once (or given, for the split's train and test queries) and shared by every
    group (they do not depend on actors). With ``skip_inapplicable`` a router that cannot fit a group's table is
    left out of that group's evaluation (listed under its ``skipped``) instead of stopping the run. ``reference``
    adds V_R on every group (:data:`~routerlab.protocols.groups.GROUP_REFERENCE_HELP`).
    """
    sp = split if isinstance(split, Split) else make_split(table, split, seed)
    train, test = sp.apply(table)
    # bad or inapplicable routers fail before any encoding (checked on copies: instances stay unfitted)
    applicable_routers([_copy(r) for r in router_specs], train, seed, skip_inapplicable)
    resolve_compare_to(compare_to, [router_label(r) for r in router_specs])
    feats = features if features is not None else featurize(train, test, encoder)
    with task(f"groups: drawing candidate groups ({draws} draws each)"):
        groups = candidate_groups(train, m_values, kinds, draws, seed)
    out = []
    for g in track(groups, "groups: evaluating", unit="group", label=lambda g: f"{g.kind} m={g.m}"):
        ev = evaluate(table.select_actors(g.actors), [_copy(r) for r in router_specs], split=sp, encoder=encoder,
                      seed=seed, n_boot=n_boot, features=feats, skip_inapplicable=skip_inapplicable,
                      compare_to=compare_to, reference=group_reference(reference, test, g.actors))
        out.append((g, ev))
    run = Provenance.of(table, sp, seed=seed, encoder=feats[0].encoder if isinstance(encoder, Encoder) else encoder,
                        routers=[router_label(r) for r in router_specs])
    return GroupEvaluations(run, draws, out)


def evaluate_groups(
    table: RoutingTable, m_values: list[int], router_specs: Sequence[RouterLike], *, draws: int = 1000,
    kinds: tuple[str, ...] = KINDS, encoder: str | Encoder = "tfidf", split: str = "given", seed: int = 0,
    n_boot: int = 1000,
) -> dict[str, Any]:
    """:func:`run_groups` as its JSON record (the run record, ``draws`` and each group with its evaluation)."""
    return run_groups(table, m_values, router_specs, draws=draws, kinds=kinds, encoder=encoder, split=split,
                      seed=seed, n_boot=n_boot).to_dict()


def group_reference(reference: str | float | None, test: RoutingTable, actors: Sequence[str]
                    ) -> str | float | None:
    """V_R's reference on one group: a number as is, an actor the group holds by its name (the full protocol's
    rule: its mean on the evaluated queries, resampled with the router's), any other actor of the table as its
    mean score on the group's evaluated test queries (those every actor of the group answered), a fixed number."""
    if reference is None or isinstance(reference, float | int):
        return reference
    from routerlab.protocols.full import resolve_reference

    actor, _ = resolve_reference(reference, test.actor_names)
    if actor is None or test.actor_names[actor] in actors:
        return reference
    cols = [test.actor_names.index(a) for a in actors]
    rows = ~np.isnan(test.score[:, cols]).any(axis=1)
    perf = float(np.nanmean(test.score[rows, actor].astype(np.float64))) if rows.any() else float("nan")
    if not np.isfinite(perf) or perf == 0:
        raise UsageError(f"reference {test.actor_names[actor]!r}: its mean score on a group's evaluated test "
                         "queries is 0 or undefined, so V_R = mu_o / Perf(reference) is undefined")
    return perf


def _copy(router: RouterLike) -> RouterLike:
    """A spec string as is; an unfitted copy of a router instance, made from its options."""
    if isinstance(router, str):
        return router
    if not isinstance(router, Router):
        raise UsageError(f"a router is a spec string or a Router instance, got {type(router).__name__}")
    try:
        return type(router)(**router.params)
    except TypeError as exc:
        raise UsageError(f"{type(router).__name__} cannot be rebuilt from its options {router.params} for each "
                         f"group ({exc}); its __init__ must accept them as keyword arguments") from exc


# -- the registered protocol ---------------------------------------------------------------------------------


def _shared_features(table: RoutingTable, s: GroupsSettings, seed: int, context: RunContext, sp: Split
                     ) -> tuple[Features, Features]:
    """The features of ``sp`` from the caller's :class:`RunContext`: encoded once per (split spec, encoder,
    seed) for every protocol run on the table, and cut to ``sp``'s test queries when ``sp`` keeps only some of
    the spec's (the audit's split, cut to the queries every actor answered)."""
    key = (s.split, s.encoder, seed)
    full = make_split(table, s.split, seed)
    if key not in context.features:
        train, test = full.apply(table)
        if context.encode is not None:
            context.features[key] = context.encode(train, test, s.encoder)
        else:
            context.features[key] = featurize(train, test, s.encoder, context.cache_dir)
    ftrain, ftest = context.features[key]
    if np.array_equal(full.train, sp.train) and np.array_equal(full.test, sp.test):
        return ftrain, ftest
    pos = np.searchsorted(full.test, sp.test)
    if not (np.array_equal(full.train, sp.train) and (pos < full.test.size).all()
            and np.array_equal(full.test[pos], sp.test)):
        raise UsageError(f"the split given to the groups protocol is not a part of split {s.split!r}")
    return ftrain, Features(ftest.X[pos], table.select_queries(sp.test), ftest.encoder)


def groups_result(table: RoutingTable, settings: GroupsSettings, seed: int = 0, routers: Sequence[Any] = (),
                  context: RunContext | None = None, split: Split | None = None) -> Result:
    """The ``groups`` protocol's run; ``split`` replaces the split ``settings.split`` makes (the audit passes its
    own, whose test side is cut to the queries every actor answered, which a split spec cannot say)."""
    s = settings
    check_pool_sizes(s.m, table.n_actors)
    labels = [router_label(r) for r in routers]
    if s.compare_to not in ("auto", "none") and s.compare_to not in labels:
        raise SettingError("compare_to", f"{s.compare_to!r} is not a router of this run ({', '.join(labels)}); "
                           "name one of them, or 'none'")
    sp = split if split is not None else make_split(table, s.split, seed)
    m_values = [m for m in s.m if isinstance(m, int)]
    m_notes: list[str] = []
    if len(m_values) < len(s.m):  # 'all' or 'A..all': the eligible actors of the training side are the pool
        n_eligible = int(eligible_actors(sp.apply(table)[0]).size)
        m_values, m_notes = resolve_pool_sizes(s.m, n_eligible, f"the table's {n_eligible} eligible actors (train "
                                               "performance in [0.1, 0.9])")
    features = _shared_features(table, s, seed, context, sp) if context is not None else None
    native = run_groups(table, m_values, list(routers), draws=s.draws, encoder=s.encoder, split=sp, seed=seed,
                        n_boot=s.n_boot, compare_to=s.compare_to, skip_inapplicable=s.skip_inapplicable,
                        features=features, reference=s.reference)
    skipped = {str(k): str(v) for _, ev in native.groups for k, v in dict(ev.extra.get("skipped", {})).items()}
    notes = m_notes + list(dict.fromkeys(n for _, ev in native.groups for n in ev.extra.get("notes", [])))
    return Result(GroupsProtocol.name, native.provenance, s, native.records(), native=native, skipped=skipped,
                  n_train=int(sp.train.size), n_test=int(sp.test.size), notes=notes)


@register_protocol("groups")
class GroupsProtocol(Protocol):
    summary = "candidate groups (all-strong, all-weak, strong-to-weak) picked on train, every router on each"
    spec = "SPEC 4"
    Settings = GroupsSettings

    def run(self, table: RoutingTable, settings: Any, seed: int = 0, routers: Sequence[Any] = (),
            context: RunContext | None = None) -> Result:
        return groups_result(table, settings, seed, routers, context)


__all__ = ["GroupEvaluations", "GroupsProtocol", "evaluate_groups", "groups_result", "run_groups"]
