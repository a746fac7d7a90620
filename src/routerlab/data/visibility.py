"""Which query metadata columns each source of tables declares visible to routers, and why.

A router sees a query's id, text, dataset (task) label and split, and the metadata columns its table declares
visible; every other column is hidden (default-deny, README "What a router sees"). A column is visible only when
an application that sends the query would know it without the answer: a task or cluster label, the question's
options, an upstream identifier. Gold answers, graded predictions, the oracle's pick and a generator's latent
variables stay hidden; they remain in the table for reports.

This is the one list of the declarations, read by the importers and :func:`routerlab.llm.collect.collect` when
they build a table and by :func:`routerlab.data.store.load` for tables saved before visibility was recorded
(their manifest has no ``visible_columns``): such a table gets the declaration of the format its ``meta`` names,
and a table of no known format (the demo, a join, a plugin's table) keeps every column hidden.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

_CHOICES = "the question's answer options, which are part of the prompt"
_METRIC = "how the task is graded (one value per task), a property of the task the application knows"
_TASK_ID = "the upstream benchmark's identifier of the question (e.g. HumanEval/12), an id like the query id"

DECLARED: Mapping[str, Mapping[str, str]] = MappingProxyType({
    # hidden: oracle_model_to_route_to (the best model, read off the outcomes)
    "routerbench": {"sample_id": "RouterBench's own id of the prompt, which the query id shows too"},
    # hidden: ground_truth (the answer)
    "routerdc": {
        "cluster_id": "RouterDC's k-means cluster of the query text's embedding: computable from the text",
        "task_name": "the task label, which the application sending the query knows",
        "metric": _METRIC,
        "choices": _CHOICES,
        "task_id": _TASK_ID,
    },
    # hidden: ground_truth (the answer)
    "routeprofile": {
        "metric": _METRIC,
        "choices": _CHOICES,
        "task_id": _TASK_ID,
        "domain": "the task's domain (domain_task_map.json), a task label",
    },
    # hidden: answer (the gold letter), answer_differs (whether the model files disagree on it)
    "mmlu-pro": {
        "src": "the question's source subset (e.g. ori_mmlu-business_ethics), a task label",
        "options": _CHOICES,
    },
    # hidden: gold, pred.<actor>, logits.<actor>, output.<actor>, grader.<actor>, detail.<actor> (answers, what
    # each actor answered and how it was graded), variant_of, level, variant (which perturbation of which
    # question: known to the evaluation only)
    "collect": {
        "choices": _CHOICES,
        "kind": "multiple choice or generated: the form of the question, which the prompt shows",
        "metric": _METRIC,
        "task_id": _TASK_ID,
    },
    # the long format keeps only the per-query columns its options name (visible=..., hidden=...)
    "long": {},
    # agentic episodes: the queries file's metadata columns are hidden unless its visible= option names them
    "steps": {},
})
"""Format -> {column it declares visible: why a deployed router would know it}. A format's other columns are
hidden; the comment above each entry names them and why."""


def declared_visible(fmt: str | None, columns: Iterable[str]) -> frozenset[str]:
    """The columns among ``columns`` that format ``fmt`` declares visible (none for an unknown format)."""
    declared = DECLARED.get(fmt or "", {})
    return frozenset(c for c in columns if c in declared)
