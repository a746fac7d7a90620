"""Graders: an answer to a question, graded against its reference (:mod:`routerlab.llm.graders.base`).

Built-ins: ``mc``, ``short`` and ``f1`` (:mod:`.text`), ``number`` and ``math`` (:mod:`.numeric`, sympy in a
worker process with a timeout), ``coverage``, ``coverage-exact`` and ``coverage-llmrouter`` (:mod:`.coverage`),
``code`` (:mod:`.code`, run in :mod:`.sandbox`) and ``judge:SPEC`` (:mod:`.judge`). Importing this package imports
no grader module; the registry imports them the first time a grader is asked for by name.
"""

from __future__ import annotations

from routerlab.llm.graders.base import (
    METRIC_GRADERS,
    Grade,
    Grader,
    GraderChoice,
    Item,
    get_grader,
    grader_class,
    grader_names,
    parse_grader_choice,
    register_grader,
)

__all__ = [
    "METRIC_GRADERS",
    "Grade",
    "Grader",
    "GraderChoice",
    "Item",
    "get_grader",
    "grader_class",
    "grader_names",
    "parse_grader_choice",
    "register_grader",
]
