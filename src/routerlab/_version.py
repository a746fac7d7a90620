"""routerlab's version, in one place: the package root re-exports it, pyproject reads it (``dynamic``),
and modules inside the package import it from here (importing the root would pull in the data layer)."""

__version__ = "0.1.0"
