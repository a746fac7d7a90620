"""Ready-made tables: ``routerlab.datasets.demo()`` is the embedded synthetic benchmark."""

from routerlab.data.demo import DOMAINS, demo

__all__ = ["DOMAINS", "demo"]
