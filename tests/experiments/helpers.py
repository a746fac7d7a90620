"""Small experiment files for the experiment tests: the demo at 300 queries, 40 resamples per interval."""

from __future__ import annotations

from pathlib import Path

SMALL = """\
name = "small"
routers = [{routers}]
seeds = [{seeds}]
protocols = ["full", {{ name = "cold-start", logging = "uniform" }}]

[settings]
n_boot = 40

[[tables]]
path = "demo"
n_queries = 300
split = "random"
"""


def write_experiment(directory: Path, *, routers: str = '"oracle", "best-single", "knn"', seeds: str = "0, 1",
                     name: str = "exp.toml") -> Path:
    """A small demo experiment file in ``directory``."""
    path = directory / name
    path.write_text(SMALL.format(routers=routers, seeds=seeds), encoding="utf-8")
    return path
