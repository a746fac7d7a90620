"""Query text -> vectors, cached on disk by content hash (text + encoder + version)."""

from routerlab.features.base import Features

__all__ = ["Features"]
