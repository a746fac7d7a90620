"""Serving: an OpenAI-compatible HTTP server in front of a trained router, logging every routed request.

:class:`RoutingService` wires a router (trained on a routing table), the query encoder fitted on the training
texts and one backend per actor; :class:`RequestLog` appends one long-format row per served request (with the
propensity of the chosen actor), the input of ``routerlab ope`` once scores are attached
(:func:`attach_feedback`); :func:`routerlab.serve.app.create_app` is the FastAPI app. fastapi and uvicorn are
imported only by :mod:`routerlab.serve.app` and the ``serve`` command, never by ``import routerlab.serve``.
See docs/serve.md.
"""

from __future__ import annotations

from routerlab.serve.feedback import attach_feedback
from routerlab.serve.log import LOG_COLUMNS, LogRecord, RequestLog
from routerlab.serve.routing import ROUTED_MODELS, BackendFailure, Decision, RoutingService, request_text

__all__ = [
    "LOG_COLUMNS",
    "ROUTED_MODELS",
    "BackendFailure",
    "Decision",
    "LogRecord",
    "RequestLog",
    "RoutingService",
    "attach_feedback",
    "request_text",
]
