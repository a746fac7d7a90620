"""Graders: an answer to a question, graded against its reference (:mod:`routerlab.llm.graders.base`).

Built-ins, each in its own module: ``mc``, ``short`` and ``f1`` (:mod:`.text`). Importing this package imports
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
